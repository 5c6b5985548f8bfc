// Warp-level reductions with shuffles (__shfl_down_sync, __shfl_xor_sync, __shfl_sync, __shfl_up_sync),
// combined across warps through shared memory and across blocks with atomicAdd.
#include "sample_common.h"

__device__ __forceinline__ int warp_sum_down(int v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float warp_max_xor(float v) {
    for (int mask = 16; mask > 0; mask >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, mask));
    return v;
}

__global__ void block_sum_atomic(const int *in, unsigned long long *total, int *block_sums, int n) {
    __shared__ int warp_sums[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    v = warp_sum_down(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x / 32;
        v = lane < nw ? warp_sums[lane] : 0;
        v = warp_sum_down(v);
        if (lane == 0) {
            block_sums[blockIdx.x] = v;
            atomicAdd(total, (unsigned long long)(long long)v);
        }
    }
}

// Every lane ends with the warp's max (xor butterfly), its own inclusive prefix sum (shfl_up),
// and lane 7's value broadcast (shfl with a source lane).
__global__ void warp_ops(const float *in, float *wmax, int *prefix, float *bcast, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;  // n is a multiple of 32: whole warps only
    float x = in[i];
    wmax[i] = warp_max_xor(x);
    int lane = threadIdx.x & 31;
    int p = (int)x;
    for (int d = 1; d < 32; d <<= 1) {
        int up = __shfl_up_sync(0xffffffffu, p, d);
        if (lane >= d) p += up;
    }
    prefix[i] = p;
    bcast[i] = __shfl_sync(0xffffffffu, x, 7);
}

int main() {
    const int n = 1 << 18;
    int *h = new int[n];
    Rng rng(5);
    long long ref = 0;
    for (int i = 0; i < n; i++) { h[i] = rng.range(-5000, 5000); ref += h[i]; }
    const int block = 256, grid = (n + block - 1) / block;
    int *din, *dbs; unsigned long long *dtot;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dbs, grid * sizeof(int)));
    CHECK(cudaMalloc(&dtot, sizeof(unsigned long long)));
    CHECK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dtot, 0, sizeof(unsigned long long)));
    CHECK(cudaMemset(dbs, 0xFF, grid * sizeof(int)));
    block_sum_atomic<<<grid, block>>>(din, dtot, dbs, n);
    CHECK_LAUNCH();
    unsigned long long tot;
    CHECK(cudaMemcpy(&tot, dtot, sizeof(tot), cudaMemcpyDeviceToHost));
    expect((long long)tot == ref, "atomic total equals host sum");
    int *bs = new int[grid], *refbs = new int[grid];
    CHECK(cudaMemcpy(bs, dbs, grid * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < grid; b++) { refbs[b] = 0; for (int j = 0; j < block; j++) refbs[b] += h[b * block + j]; }
    compare_exact("block_sums", bs, refbs, grid);

    const int m = 1 << 16;
    float *f = new float[m];
    for (int i = 0; i < m; i++) f[i] = (float)rng.range(-100, 100);
    float *df, *dmax, *dbc; int *dpre;
    CHECK(cudaMalloc(&df, m * sizeof(float))); CHECK(cudaMalloc(&dmax, m * sizeof(float)));
    CHECK(cudaMalloc(&dbc, m * sizeof(float))); CHECK(cudaMalloc(&dpre, m * sizeof(int)));
    CHECK(cudaMemcpy(df, f, m * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dmax, 0xFF, m * sizeof(float))); CHECK(cudaMemset(dpre, 0xFF, m * sizeof(int)));
    CHECK(cudaMemset(dbc, 0xFF, m * sizeof(float)));
    warp_ops<<<m / 128, 128>>>(df, dmax, dpre, dbc, m);
    CHECK_LAUNCH();
    float *gmax = new float[m], *rmax = new float[m], *gbc = new float[m], *rbc = new float[m];
    int *gpre = new int[m], *rpre = new int[m];
    CHECK(cudaMemcpy(gmax, dmax, m * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gpre, dpre, m * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gbc, dbc, m * sizeof(float), cudaMemcpyDeviceToHost));
    for (int w = 0; w < m / 32; w++) {
        float mx = -1e30f; int p = 0;
        for (int l = 0; l < 32; l++) mx = fmaxf(mx, f[w * 32 + l]);
        for (int l = 0; l < 32; l++) {
            p += (int)f[w * 32 + l];
            rmax[w * 32 + l] = mx; rpre[w * 32 + l] = p; rbc[w * 32 + l] = f[w * 32 + 7];
        }
    }
    compare_exact("warp_max", gmax, rmax, m);
    compare_exact("warp_prefix", gpre, rpre, m);
    compare_exact("warp_broadcast", gbc, rbc, m);

    CHECK(cudaFree(din)); CHECK(cudaFree(dbs)); CHECK(cudaFree(dtot));
    CHECK(cudaFree(df)); CHECK(cudaFree(dmax)); CHECK(cudaFree(dbc)); CHECK(cudaFree(dpre));
    return finish();
}
