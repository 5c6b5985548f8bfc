// Cooperative groups: a grid-wide barrier (this_grid().sync()) between phases of one kernel launched
// with cudaLaunchCooperativeKernel on a grid small enough to be co-resident; also thread_block and
// tiled_partition groups (block sync, tile shuffles and reductions).
#include "sample_common.h"
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

// Phase 1: every thread writes its block's partial sums; grid sync; phase 2: block 0 totals them;
// grid sync; phase 3: every element is normalised by the total (read by all blocks).
__global__ void grid_phases(const int *in, int *partials, long long *total, int *out, int n) {
    cg::grid_group grid = cg::this_grid();
    cg::thread_block block = cg::this_thread_block();
    __shared__ int warp_part[32];
    int sum = 0;
    for (int i = grid.thread_rank(); i < n; i += grid.size()) sum += in[i];
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    int tile_sum = cg::reduce(tile, sum, cg::plus<int>());
    if (tile.thread_rank() == 0) warp_part[tile.meta_group_rank()] = tile_sum;
    block.sync();
    if (block.thread_rank() == 0) {
        int s = 0;
        for (unsigned w = 0; w < tile.meta_group_size(); w++) s += warp_part[w];
        partials[blockIdx.x] = s;
    }
    grid.sync();
    if (grid.block_rank() == 0 && block.thread_rank() == 0) {
        long long t = 0;
        for (unsigned b = 0; b < grid.num_blocks(); b++) t += partials[b];
        *total = t;
    }
    grid.sync();
    long long t = *total;
    for (int i = grid.thread_rank(); i < n; i += grid.size()) out[i] = (int)(in[i] * 1000ll / (t == 0 ? 1 : t)) + (int)(t % 1000);
}

// Iterated relaxation: each step reads neighbours written by other blocks in the previous step.
__global__ void grid_relax(int *a, int *b, int n, int steps) {
    cg::grid_group grid = cg::this_grid();
    for (int s = 0; s < steps; s++) {
        for (int i = grid.thread_rank(); i < n; i += grid.size()) {
            int l = a[(i + n - 1) % n], r = a[(i + 1) % n];
            b[i] = (l + 2 * a[i] + r) / 4 + 1;
        }
        grid.sync();
        int *t = a; a = b; b = t;
    }
}

int main() {
    int dev = 0, supports = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&supports, cudaDevAttrCooperativeLaunch, dev));
    expect(supports == 1, "device supports cooperative launch");
    int sms = 0, per_sm = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int block = 128;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_phases, block, 0));
    expect(per_sm >= 1, "at least one block per SM fits");
    int grid = 8;  // small, and co-resident on any device that reports one SM and 8 blocks per SM
    if (grid > sms * per_sm) grid = sms * per_sm;

    const int n = 100000;
    int *h = new int[n];
    Rng rng(14);
    long long t = 0;
    for (int i = 0; i < n; i++) { h[i] = rng.range(0, 100); t += h[i]; }
    int *din, *dpart, *dout; long long *dtot;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMalloc(&dpart, grid * sizeof(int)));
    CHECK(cudaMalloc(&dtot, sizeof(long long)));
    CHECK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dout, 0xFF, n * sizeof(int)));
    CHECK(cudaMemset(dtot, 0xFF, sizeof(long long)));
    int nn = n;
    void *args[] = {&din, &dpart, &dtot, &dout, &nn};
    CHECK(cudaLaunchCooperativeKernel((void *)grid_phases, dim3(grid), dim3(block), args, 0, 0));
    CHECK_LAUNCH();
    long long got_t;
    CHECK(cudaMemcpy(&got_t, dtot, sizeof(got_t), cudaMemcpyDeviceToHost));
    compare_exact("total", &got_t, &t, 1);
    int *got = new int[n], *ref = new int[n];
    CHECK(cudaMemcpy(got, dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ref[i] = (int)(h[i] * 1000ll / t) + (int)(t % 1000);
    compare_exact("normalised", got, ref, n);

    const int m = 4096, steps = 20;
    int *a = new int[m], *b = new int[m];
    for (int i = 0; i < m; i++) a[i] = rng.range(0, 1 << 20);
    int *da, *db;
    CHECK(cudaMalloc(&da, m * sizeof(int)));
    CHECK(cudaMalloc(&db, m * sizeof(int)));
    CHECK(cudaMemcpy(da, a, m * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(db, 0, m * sizeof(int)));
    int mm = m, ss = steps;
    void *args2[] = {&da, &db, &mm, &ss};
    CHECK(cudaLaunchCooperativeKernel((void *)grid_relax, dim3(grid), dim3(block), args2, 0, 0));
    CHECK_LAUNCH();
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < m; i++) b[i] = (a[(i + m - 1) % m] + 2 * a[i] + a[(i + 1) % m]) / 4 + 1;
        int *tmp = a; a = b; b = tmp;
    }
    int *g2 = new int[m];
    CHECK(cudaMemcpy(g2, steps % 2 ? db : da, m * sizeof(int), cudaMemcpyDeviceToHost));
    compare_exact("relax", g2, a, m);

    CHECK(cudaFree(din)); CHECK(cudaFree(dout)); CHECK(cudaFree(dpart)); CHECK(cudaFree(dtot));
    CHECK(cudaFree(da)); CHECK(cudaFree(db));
    return finish();
}
