// Bitonic sort of 1<<16 keys with payloads: a shared-memory kernel sorts 1024-element blocks, then
// global merge steps (one launch each) and shared-memory merges finish the job; the result must be
// sorted and a permutation of the input (payloads follow their keys).
#include "sample_common.h"
#include <algorithm>

#define SHARED_N 1024

__device__ __forceinline__ void cmp_swap(unsigned &ka, unsigned &va, unsigned &kb, unsigned &vb, bool up) {
    if ((ka > kb || (ka == kb && va > vb)) == up) {
        unsigned t = ka; ka = kb; kb = t;
        t = va; va = vb; vb = t;
    }
}

// Sorts each SHARED_N chunk in the direction its place in the whole sort needs.
__global__ void sort_shared(unsigned *keys, unsigned *vals) {
    __shared__ unsigned sk[SHARED_N], sv[SHARED_N];
    unsigned base = blockIdx.x * SHARED_N;
    for (unsigned t = threadIdx.x; t < SHARED_N; t += blockDim.x) { sk[t] = keys[base + t]; sv[t] = vals[base + t]; }
    __syncthreads();
    for (unsigned size = 2; size <= SHARED_N; size <<= 1) {
        for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
            for (unsigned t = threadIdx.x; t < SHARED_N / 2; t += blockDim.x) {
                unsigned pos = 2 * t - (t & (stride - 1));
                bool up = (((base + pos) & size) == 0);
                if (size == SHARED_N) up = ((blockIdx.x & 1) == 0);
                cmp_swap(sk[pos], sv[pos], sk[pos + stride], sv[pos + stride], up);
            }
            __syncthreads();
        }
    }
    for (unsigned t = threadIdx.x; t < SHARED_N; t += blockDim.x) { keys[base + t] = sk[t]; vals[base + t] = sv[t]; }
}

__global__ void merge_global(unsigned *keys, unsigned *vals, unsigned size, unsigned stride) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned pos = 2 * t - (t & (stride - 1));
    bool up = (pos & size) == 0;
    cmp_swap(keys[pos], vals[pos], keys[pos + stride], vals[pos + stride], up);
}

// Finishes a merge step once the stride fits in a block's chunk.
__global__ void merge_shared(unsigned *keys, unsigned *vals, unsigned size) {
    __shared__ unsigned sk[SHARED_N], sv[SHARED_N];
    unsigned base = blockIdx.x * SHARED_N;
    for (unsigned t = threadIdx.x; t < SHARED_N; t += blockDim.x) { sk[t] = keys[base + t]; sv[t] = vals[base + t]; }
    __syncthreads();
    bool up = (base & size) == 0;
    for (unsigned stride = SHARED_N / 2; stride > 0; stride >>= 1) {
        for (unsigned t = threadIdx.x; t < SHARED_N / 2; t += blockDim.x) {
            unsigned pos = 2 * t - (t & (stride - 1));
            cmp_swap(sk[pos], sv[pos], sk[pos + stride], sv[pos + stride], up);
        }
        __syncthreads();
    }
    for (unsigned t = threadIdx.x; t < SHARED_N; t += blockDim.x) { keys[base + t] = sk[t]; vals[base + t] = sv[t]; }
}

int main() {
    const unsigned n = 1 << 16;
    unsigned *k = new unsigned[n], *v = new unsigned[n];
    Rng rng(25);
    for (unsigned i = 0; i < n; i++) { k[i] = rng.u32() % 5000; v[i] = i; }  // many equal keys
    unsigned *dk, *dv;
    CHECK(cudaMalloc(&dk, n * sizeof(unsigned))); CHECK(cudaMalloc(&dv, n * sizeof(unsigned)));
    CHECK(cudaMemcpy(dk, k, n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dv, v, n * sizeof(unsigned), cudaMemcpyHostToDevice));
    sort_shared<<<n / SHARED_N, 256>>>(dk, dv);
    CHECK(cudaGetLastError());
    int launches = 1;
    for (unsigned size = 2 * SHARED_N; size <= n; size <<= 1) {
        for (unsigned stride = size / 2; stride >= SHARED_N; stride >>= 1) {
            merge_global<<<n / 2 / 256, 256>>>(dk, dv, size, stride);
            CHECK(cudaGetLastError());
            launches++;
        }
        merge_shared<<<n / SHARED_N, 256>>>(dk, dv, size);
        CHECK(cudaGetLastError());
        launches++;
    }
    CHECK(cudaDeviceSynchronize());
    unsigned *gk = new unsigned[n], *gv = new unsigned[n];
    CHECK(cudaMemcpy(gk, dk, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gv, dv, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    // (key, index) pairs are unique, so the sorted order is fully determined: compare to a host sort.
    unsigned long long *ref = new unsigned long long[n];
    for (unsigned i = 0; i < n; i++) ref[i] = ((unsigned long long)k[i] << 32) | v[i];
    std::sort(ref, ref + n);
    unsigned *rk = new unsigned[n], *rv = new unsigned[n];
    for (unsigned i = 0; i < n; i++) { rk[i] = (unsigned)(ref[i] >> 32); rv[i] = (unsigned)ref[i]; }
    compare_exact("keys", gk, rk, n);
    compare_exact("payloads", gv, rv, n);
    printf("sorted %u keys in %d launches\n", n, launches);
    CHECK(cudaFree(dk)); CHECK(cudaFree(dv));
    return finish();
}
