// Thread-block clusters (compute capability 9.0): a 512-bin histogram whose bins are spread over the shared
// memories of a cluster's 4 CTAs (cooperative_groups::this_cluster(), map_shared_rank, atomicAdd into another
// CTA's shared memory, cluster.sync()), launched with cudaLaunchKernelEx and a cluster-dimension attribute,
// and a block-sum reduction by a __cluster_dims__(2, 1, 1) kernel launched with <<<>>>; both checked
// against host references; a cooperative launch of clusters whose CTAs meet at cluster.sync() and whose whole
// grid meets at grid.sync(). Bad cluster launches answer cudaErrorInvalidClusterSize as on an H100.
// Built for compute_90 (tests/apps/test_cluster_sample.py); on an older device it says so and passes.
#include "sample_common.h"
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define BINS 512
#define CLUSTER 4

__global__ void cluster_histogram(const unsigned *data, int n, unsigned *hist) {
#if __CUDA_ARCH__ >= 900
    __shared__ unsigned shard[BINS / CLUSTER];
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    for (int i = threadIdx.x; i < BINS / CLUSTER; i += blockDim.x) shard[i] = 0;
    cluster.sync();                              // every shard is zeroed before anyone adds to it
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned bin = data[i] % BINS;
        unsigned *dst = cluster.map_shared_rank(shard, bin % CLUSTER);
        atomicAdd(&dst[bin / CLUSTER], 1u);
    }
    cluster.sync();                              // every CTA's adds are in before the shards are read
    for (int i = threadIdx.x; i < BINS / CLUSTER; i += blockDim.x)
        atomicAdd(&hist[i * CLUSTER + rank], shard[i]);
#endif
}

// nvcc refuses __cluster_dims__ in a device pass below sm_90; those builds print that clusters need 9.0
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define CLUSTER_DIMS_2
#else
#define CLUSTER_DIMS_2 __cluster_dims__(2, 1, 1)
#endif
__global__ void CLUSTER_DIMS_2 cluster_sum(const int *data, long long *sums, unsigned *ranks) {
#if __CUDA_ARCH__ >= 900
    __shared__ long long partial;
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) partial = 0;
    __syncthreads();
    atomicAdd((unsigned long long *)&partial, (unsigned long long)(long long)data[blockIdx.x * blockDim.x + threadIdx.x]);
    cluster.sync();
    if (cluster.block_rank() == 0 && threadIdx.x == 0) {
        long long total = 0;
        for (unsigned r = 0; r < cluster.num_blocks(); r++) total += *cluster.map_shared_rank(&partial, r);
        sums[blockIdx.x / 2] = total;
    }
    if (threadIdx.x == 0) ranks[blockIdx.x] = cluster.block_rank() | cluster.num_blocks() << 8 | cluster.block_index().x << 16;
    cluster.sync();                              // rank 0 has read every partial before any CTA exits
#endif
}

// Cooperative and clustered at once: each cluster of 2 CTAs sums its inputs through distributed shared memory,
// grid.sync() publishes every cluster's sum, and every thread then adds up all of them.
__global__ void coop_cluster_total(const int *data, long long *cluster_sums, long long *totals) {
#if __CUDA_ARCH__ >= 900
    __shared__ long long partial;
    cg::cluster_group cluster = cg::this_cluster();
    cg::grid_group grid = cg::this_grid();
    if (threadIdx.x == 0) partial = 0;
    __syncthreads();
    atomicAdd((unsigned long long *)&partial, (unsigned long long)(long long)data[blockIdx.x * blockDim.x + threadIdx.x]);
    cluster.sync();
    unsigned nclusters = gridDim.x / cluster.num_blocks();
    unsigned id = blockIdx.x / cluster.num_blocks();
    if (cluster.block_rank() == 0 && threadIdx.x == 0) {
        long long total = 0;
        for (unsigned r = 0; r < cluster.num_blocks(); r++) total += *cluster.map_shared_rank(&partial, r);
        cluster_sums[id] = total;
    }
    cluster.sync();                              // rank 0 has read every partial before any CTA moves on
    grid.sync();                                 // every cluster's sum is in
    long long all = 0;
    for (unsigned c = 0; c < nclusters; c++) all += cluster_sums[(id + c) % nclusters];
    totals[blockIdx.x * blockDim.x + threadIdx.x] = all;
#endif
}

static cudaError_t launch_histogram(dim3 grid, dim3 block, unsigned cx, const unsigned *d, int n, unsigned *h) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cx; attr.val.clusterDim.y = 1; attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, cluster_histogram, d, n, h);
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    // the kernels have cluster code only in a build for compute_90 or newer (a compute_86 build JIT-compiled
    // for a 9.0 device would run their empty bodies)
    cudaFuncAttributes fa;
    CHECK(cudaFuncGetAttributes(&fa, cluster_histogram));
    if (prop.major < 9 || fa.ptxVersion < 90) {
        printf("compute capability %d.%d, kernels built for %d: thread-block clusters need 9.0, nothing to run\n",
               prop.major, prop.minor, fa.ptxVersion);
        return finish();
    }
    Rng rng(1234);
    const int n = 100000;
    unsigned *h_data = (unsigned *)malloc(n * sizeof(unsigned));
    unsigned want[BINS] = {0}, got[BINS];
    for (int i = 0; i < n; i++) {
        unsigned v = (unsigned)rng.next();
        h_data[i] = (i % 7 == 0) ? v % 37 : v;   // skewed: a few bins take many more adds
        want[h_data[i] % BINS]++;
    }
    unsigned *d_data, *d_hist;
    CHECK(cudaMalloc(&d_data, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&d_hist, BINS * sizeof(unsigned)));
    CHECK(cudaMemcpy(d_data, h_data, n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_hist, 0, BINS * sizeof(unsigned)));
    CHECK(launch_histogram(dim3(16), dim3(128), CLUSTER, d_data, n, d_hist));
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, d_hist, sizeof got, cudaMemcpyDeviceToHost));
    compare_exact("histogram", got, want, BINS);

    // bad shapes: a cluster that does not divide the grid, and 9 CTAs without the non-portable attribute
    expect(launch_histogram(dim3(6), dim3(128), CLUSTER, d_data, n, d_hist) == cudaErrorInvalidClusterSize,
           "grid 6 with clusters of 4 is cudaErrorInvalidClusterSize");
    cudaGetLastError();
    expect(launch_histogram(dim3(18), dim3(128), 9, d_data, n, d_hist) == cudaErrorInvalidClusterSize,
           "clusters of 9 without the non-portable attribute are cudaErrorInvalidClusterSize");
    cudaGetLastError();

    // __cluster_dims__(2,1,1) through <<<>>>: 8 clusters of two 64-thread CTAs
    const int blocks = 16, threads = 64;
    int h_in[blocks * threads];
    long long sums_want[blocks / 2] = {0}, sums_got[blocks / 2];
    for (int i = 0; i < blocks * threads; i++) {
        h_in[i] = (int)(rng.next() % 2000001) - 1000000;
        sums_want[i / (2 * threads)] += h_in[i];
    }
    int *d_in;
    long long *d_sums;
    unsigned *d_ranks, ranks[blocks], ranks_want[blocks];
    CHECK(cudaMalloc(&d_in, sizeof h_in));
    CHECK(cudaMalloc(&d_sums, sizeof sums_got));
    CHECK(cudaMalloc(&d_ranks, sizeof ranks));
    CHECK(cudaMemcpy(d_in, h_in, sizeof h_in, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_sums, 0xff, sizeof sums_got));
    cluster_sum<<<blocks, threads>>>(d_in, d_sums, d_ranks);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(sums_got, d_sums, sizeof sums_got, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(ranks, d_ranks, sizeof ranks, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++) ranks_want[b] = (b % 2) | 2u << 8 | (b % 2) << 16;
    compare_exact("cluster sums", sums_got, sums_want, blocks / 2);
    compare_exact("ranks", ranks, ranks_want, blocks);
    // an odd grid is no multiple of the kernel's cluster
    cluster_sum<<<blocks - 1, threads>>>(d_in, d_sums, d_ranks);
    expect(cudaGetLastError() == cudaErrorInvalidClusterSize, "an odd grid of a __cluster_dims__(2) kernel fails");

    // a cooperative launch of clusters of 2: cluster.sync() inside each cluster, grid.sync() across the grid
    {
        const int cb = 8, ct = 64;
        int h_c[cb * ct];
        long long want_sums[cb / 2] = {0}, got_sums[cb / 2], want_total = 0, got_totals[cb * ct], want_totals[cb * ct];
        for (int i = 0; i < cb * ct; i++) {
            h_c[i] = (int)(rng.next() % 2000001) - 1000000;
            want_sums[i / (2 * ct)] += h_c[i];
            want_total += h_c[i];
        }
        for (int i = 0; i < cb * ct; i++) want_totals[i] = want_total;
        int *d_c;
        long long *d_csums, *d_totals;
        CHECK(cudaMalloc(&d_c, sizeof h_c));
        CHECK(cudaMalloc(&d_csums, sizeof got_sums));
        CHECK(cudaMalloc(&d_totals, sizeof got_totals));
        CHECK(cudaMemcpy(d_c, h_c, sizeof h_c, cudaMemcpyHostToDevice));
        CHECK(cudaMemset(d_csums, 0xff, sizeof got_sums));
        CHECK(cudaMemset(d_totals, 0xff, sizeof got_totals));
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(cb);
        cfg.blockDim = dim3(ct);
        cudaLaunchAttribute attrs[2];
        attrs[0].id = cudaLaunchAttributeCooperative;
        attrs[0].val.cooperative = 1;
        attrs[1].id = cudaLaunchAttributeClusterDimension;
        attrs[1].val.clusterDim.x = 2; attrs[1].val.clusterDim.y = 1; attrs[1].val.clusterDim.z = 1;
        cfg.attrs = attrs;
        cfg.numAttrs = 2;
        CHECK(cudaLaunchKernelEx(&cfg, coop_cluster_total, (const int *)d_c, d_csums, d_totals));
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(got_sums, d_csums, sizeof got_sums, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(got_totals, d_totals, sizeof got_totals, cudaMemcpyDeviceToHost));
        compare_exact("cooperative cluster sums", got_sums, want_sums, cb / 2);
        compare_exact("cooperative grid totals", got_totals, want_totals, cb * ct);
        CHECK(cudaFree(d_c)); CHECK(cudaFree(d_csums)); CHECK(cudaFree(d_totals));
    }

    CHECK(cudaFree(d_data)); CHECK(cudaFree(d_hist)); CHECK(cudaFree(d_in)); CHECK(cudaFree(d_sums));
    CHECK(cudaFree(d_ranks));
    free(h_data);
    return finish();
}
