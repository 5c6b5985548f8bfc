// A kernel executing __trap(): synchronisation reports a launch failure, and the error is sticky.
#include "sample_common.h"

__global__ void maybe_trap(int *p, int trigger) {
    p[threadIdx.x] = threadIdx.x;
    if (threadIdx.x == trigger) __trap();
}

int main() {
    int *d;
    CHECK(cudaMalloc(&d, 64 * sizeof(int)));
    maybe_trap<<<1, 64>>>(d, -1);  // no thread traps
    CHECK_LAUNCH();
    int h[64];
    CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) expect(h[i] == i, "kernel without trap wrote its output");
    printf("no trap: ok\n");
    maybe_trap<<<1, 64>>>(d, 13);
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    cudaError_t later = cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    printf("launch: %s\nsynchronize: %s\nlater call: %s\n", cudaGetErrorName(launch), cudaGetErrorName(sync),
           cudaGetErrorName(later));
    expect(launch == cudaSuccess, "the launch itself succeeds");
    expect(sync == cudaErrorLaunchFailure, "synchronize reports cudaErrorLaunchFailure");
    expect(later == cudaErrorLaunchFailure, "the error is sticky");
    return finish();
}
