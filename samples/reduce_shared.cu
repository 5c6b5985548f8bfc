// Block reduction in shared memory: a tree of halving steps with __syncthreads inside the loop,
// then a second pass over the per-block partial sums.
#include "sample_common.h"

template <unsigned BLOCK>
__global__ void reduce_sum(const int *in, long long *out, int n) {
    __shared__ long long s[BLOCK];
    unsigned tid = threadIdx.x;
    long long v = 0;
    for (int i = blockIdx.x * BLOCK * 2 + tid; i < n; i += gridDim.x * BLOCK * 2) {
        v += in[i];
        if (i + BLOCK < n) v += in[i + BLOCK];
    }
    s[tid] = v;
    __syncthreads();
    for (unsigned stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}

__global__ void reduce_max(const int *in, int *out, int n) {
    extern __shared__ int sm[];
    int tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
    sm[tid] = i < n ? in[i] : INT_MIN;
    __syncthreads();
    // Sequential addressing works for any power-of-two block size chosen at launch.
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride) sm[tid] = max(sm[tid], sm[tid + stride]);
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sm[0];
}

int main() {
    const int n = (1 << 20) + 123;
    int *h = new int[n];
    Rng rng(4);
    long long ref_sum = 0;
    int ref_max = INT_MIN;
    for (int i = 0; i < n; i++) { h[i] = rng.range(-1000000, 1000000); ref_sum += h[i]; ref_max = h[i] > ref_max ? h[i] : ref_max; }

    int *din; long long *dpart, *dsum;
    const int blocks = 64;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dpart, blocks * sizeof(long long)));
    CHECK(cudaMalloc(&dsum, sizeof(long long)));
    CHECK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dsum, 0xFF, sizeof(long long)));
    reduce_sum<256><<<blocks, 256>>>(din, dpart, n);
    CHECK_LAUNCH();
    // The partials themselves are checked too, against a host computation of the same split.
    long long part[blocks], ref_part[blocks] = {0};
    CHECK(cudaMemcpy(part, dpart, sizeof(part), cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        for (int base = b * 512; base < n; base += blocks * 512)
            for (int j = base; j < base + 512 && j < n; j++) ref_part[b] += h[j];
    compare_exact("partial", part, ref_part, blocks);

    // Second pass: the partials are ints no more; reduce them with a one-block launch of 64 threads.
    reduce_sum<64><<<1, 64>>>((const int *)nullptr, dsum, 0);  // n=0: writes 0, exercises the empty path
    CHECK_LAUNCH();
    long long zero = -1;
    CHECK(cudaMemcpy(&zero, dsum, sizeof(zero), cudaMemcpyDeviceToHost));
    expect(zero == 0, "empty reduction gives 0");
    long long total = 0;
    for (int b = 0; b < blocks; b++) total += part[b];
    expect(total == ref_sum, "sum of partials equals the host sum");
    printf("sum = %lld (host %lld)\n", total, ref_sum);

    int *dmax, nb = (n + 511) / 512;
    CHECK(cudaMalloc(&dmax, nb * sizeof(int)));
    reduce_max<<<nb, 512, 512 * sizeof(int)>>>(din, dmax, n);
    CHECK_LAUNCH();
    int *hm = new int[nb], *refm = new int[nb];
    CHECK(cudaMemcpy(hm, dmax, nb * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < nb; b++) {
        refm[b] = INT_MIN;
        for (int j = b * 512; j < (b + 1) * 512 && j < n; j++) refm[b] = h[j] > refm[b] ? h[j] : refm[b];
    }
    compare_exact("blockmax", hm, refm, nb);
    int gmax = INT_MIN;
    for (int b = 0; b < nb; b++) gmax = hm[b] > gmax ? hm[b] : gmax;
    expect(gmax == ref_max, "max");

    CHECK(cudaFree(din)); CHECK(cudaFree(dpart)); CHECK(cudaFree(dsum)); CHECK(cudaFree(dmax));
    delete[] h; delete[] hm; delete[] refm;
    return finish();
}
