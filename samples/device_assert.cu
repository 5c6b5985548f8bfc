// A failing device-side assert(): the launch itself succeeds, synchronisation reports cudaErrorAssert,
// and the error is sticky (the context is unusable afterwards), as on NVIDIA's driver.
#include "sample_common.h"
#undef NDEBUG
#include <cassert>

__global__ void check_sorted(const int *v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + 1 < n) assert(v[i] <= v[i + 1]);
}

int main() {
    const int n = 256;
    int h[n];
    for (int i = 0; i < n; i++) h[i] = i;
    int *d;
    CHECK(cudaMalloc(&d, sizeof(h)));
    CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
    // Sorted input: the assert holds and nothing happens.
    check_sorted<<<1, n>>>(d, n);
    CHECK_LAUNCH();
    printf("sorted input: no assert\n");
    h[77] = 1000;  // now v[77] > v[78]
    CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
    check_sorted<<<1, n>>>(d, n);
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    cudaError_t after = cudaGetLastError();
    cudaError_t later = cudaMalloc(&d, 16);
    printf("launch: %s\nsynchronize: %s\nlast error: %s\nlater call: %s\n", cudaGetErrorName(launch),
           cudaGetErrorName(sync), cudaGetErrorName(after), cudaGetErrorName(later));
    expect(launch == cudaSuccess, "the launch itself succeeds");
    expect(sync == cudaErrorAssert, "synchronize reports cudaErrorAssert");
    expect(after == cudaErrorAssert, "the last error is cudaErrorAssert");
    expect(later == cudaErrorAssert, "the error is sticky");
    return finish();
}
