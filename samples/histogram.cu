// Histogram: per-block private bins in shared memory (shared-memory atomics), merged into the global
// histogram with global atomics; a skewed input makes many threads hit the same bin.
#include "sample_common.h"

#define BINS 256

__global__ void histogram_shared(const unsigned char *data, int n, unsigned *hist) {
    __shared__ unsigned local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (local[b]) atomicAdd(&hist[b], local[b]);
}

// The same with 16-bit keys folded into 1024 bins through dynamic shared memory.
__global__ void histogram_dyn(const unsigned short *data, int n, unsigned *hist, int bins) {
    extern __shared__ unsigned dl[];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) dl[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&dl[data[i] % bins], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) atomicAdd(&hist[b], dl[b]);
}

int main() {
    const int n = 1 << 20;
    unsigned char *h = new unsigned char[n];
    Rng rng(8);
    unsigned ref[BINS] = {0}, got[BINS];
    for (int i = 0; i < n; i++) {
        unsigned r = rng.u32();
        h[i] = (r & 3) == 0 ? 42 : (unsigned char)(r >> 24);  // a quarter of all keys land in bin 42
        ref[h[i]]++;
    }
    unsigned char *dd; unsigned *dh;
    CHECK(cudaMalloc(&dd, n));
    CHECK(cudaMalloc(&dh, BINS * sizeof(unsigned)));
    CHECK(cudaMemcpy(dd, h, n, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dh, 0, BINS * sizeof(unsigned)));
    histogram_shared<<<64, 256>>>(dd, n, dh);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, dh, sizeof(got), cudaMemcpyDeviceToHost));
    compare_exact("hist", got, ref, BINS);

    const int m = 1 << 18, bins = 1000;
    unsigned short *k = new unsigned short[m];
    unsigned *ref2 = new unsigned[bins](), *got2 = new unsigned[bins];
    for (int i = 0; i < m; i++) { k[i] = (unsigned short)rng.u32(); ref2[k[i] % bins]++; }
    unsigned short *dk; unsigned *dh2;
    CHECK(cudaMalloc(&dk, m * sizeof(unsigned short)));
    CHECK(cudaMalloc(&dh2, bins * sizeof(unsigned)));
    CHECK(cudaMemcpy(dk, k, m * sizeof(unsigned short), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dh2, 0, bins * sizeof(unsigned)));
    histogram_dyn<<<32, 128, bins * sizeof(unsigned)>>>(dk, m, dh2, bins);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got2, dh2, bins * sizeof(unsigned), cudaMemcpyDeviceToHost));
    compare_exact("hist1000", got2, ref2, bins);

    CHECK(cudaFree(dd)); CHECK(cudaFree(dh)); CHECK(cudaFree(dk)); CHECK(cudaFree(dh2));
    return finish();
}
