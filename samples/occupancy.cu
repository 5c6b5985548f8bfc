// Occupancy API: cudaOccupancyMaxPotentialBlockSize, cudaOccupancyMaxActiveBlocksPerMultiprocessor
// (with and without dynamic shared memory), cudaOccupancyAvailableDynamicSMemPerBlock and
// cudaFuncGetAttributes, checked for consistency with the device limits; then launches with the
// suggested configuration compute the right answer.
#include "sample_common.h"

__global__ void square_kernel(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * in[i];
}

__global__ void __launch_bounds__(128) bounded_kernel(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i ^ 0x55;
}

__global__ void shared_kernel(int *out, int n) {
    extern __shared__ int s[];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = s[(threadIdx.x + 1) % blockDim.x] + (int)blockIdx.x;
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int min_grid = 0, block = 0;
    CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, square_kernel, 0, 0));
    printf("square_kernel: block %d, min grid %d\n", block, min_grid);
    expect(block > 0 && block <= prop.maxThreadsPerBlock && block % prop.warpSize == 0, "suggested block size is a valid multiple of the warp");
    expect(min_grid >= prop.multiProcessorCount, "minimum grid covers every SM");

    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, square_kernel, block, 0));
    expect(per_sm >= 1 && per_sm * block <= prop.maxThreadsPerMultiProcessor, "active blocks fit the SM thread limit");
    expect(min_grid == per_sm * prop.multiProcessorCount, "min grid = blocks per SM x SMs");

    cudaFuncAttributes attr;
    CHECK(cudaFuncGetAttributes(&attr, bounded_kernel));
    expect(attr.maxThreadsPerBlock <= 128 && attr.maxThreadsPerBlock > 0, "__launch_bounds__(128) caps the block size");
    int bmin = 0, bblock = 0;
    CHECK(cudaOccupancyMaxPotentialBlockSize(&bmin, &bblock, bounded_kernel, 0, 0));
    expect(bblock > 0 && bblock <= 128, "suggested block size respects __launch_bounds__");

    // Shared memory limits occupancy: more per block, never more blocks.
    int with_small = 0, with_large = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&with_small, shared_kernel, 256, 1024));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&with_large, shared_kernel, 256, 32 * 1024));
    expect(with_small >= with_large && with_large >= 1, "more shared memory, no more blocks");
    size_t avail = 0;
    CHECK(cudaOccupancyAvailableDynamicSMemPerBlock(&avail, shared_kernel, 1, 256));
    expect(avail >= 32 * 1024 && avail <= (size_t)prop.sharedMemPerBlockOptin, "available dynamic shared memory");
    printf("blocks/SM: %d (1 KiB), %d (32 KiB); dynamic shared available: %zu\n", with_small, with_large, avail);

    // Launch with what the API suggested.
    const int n = 1 << 18;
    float *h = new float[n], *ref = new float[n], *got = new float[n];
    Rng rng(21);
    for (int i = 0; i < n; i++) { h[i] = (float)rng.range(-3000, 3000); ref[i] = h[i] * h[i]; }
    float *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(float))); CHECK(cudaMalloc(&dout, n * sizeof(float)));
    CHECK(cudaMemcpy(din, h, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dout, 0xFF, n * sizeof(float)));
    square_kernel<<<(n + block - 1) / block, block>>>(din, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    compare_exact("square", got, ref, n);

    int *di, *gi = new int[n], *ri = new int[n];
    CHECK(cudaMalloc(&di, n * sizeof(int)));
    CHECK(cudaMemset(di, 0xFF, n * sizeof(int)));
    bounded_kernel<<<(n + bblock - 1) / bblock, bblock>>>(di, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(gi, di, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ri[i] = i ^ 0x55;
    compare_exact("bounded", gi, ri, n);

    CHECK(cudaMemset(di, 0xFF, n * sizeof(int)));
    shared_kernel<<<n / 256, 256, 256 * sizeof(int)>>>(di, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(gi, di, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ri[i] = ((i % 256) + 1) % 256 + i / 256;
    compare_exact("shared", gi, ri, n);

    CHECK(cudaFree(din)); CHECK(cudaFree(dout)); CHECK(cudaFree(di));
    return finish();
}
