// A kernel storing through a wild pointer: synchronisation reports cudaErrorIllegalAddress, the error is
// sticky (on NVIDIA's driver for the rest of the process, even after cudaDeviceReset), and the process
// itself carries on and exits normally.
#include "sample_common.h"

// out[i] = 3*i + 1; thread `who` of block `bad_block` also stores through `bad`.
__global__ void fill(int *out, int n, int bad_block, int who, int *bad) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 3 * i + 1;
    if (blockIdx.x == bad_block && threadIdx.x == who) *bad = i;
}

static void good_launch(const char *what) {
    const int n = 1000;
    int *d;
    CHECK(cudaMalloc(&d, (n + 8) * sizeof(int)));
    CHECK(cudaMemset(d, 0xAB, (n + 8) * sizeof(int)));
    fill<<<(n + 127) / 128, 128>>>(d, n, -1, -1, nullptr);
    CHECK_LAUNCH();
    static int h[1008];
    CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) expect(h[i] == 3 * i + 1, what);
    for (int i = n; i < n + 8; i++) expect(h[i] == (int)0xABABABAB, "nothing written past the end");
    CHECK(cudaFree(d));
    printf("%s: ok\n", what);
}

int main() {
    good_launch("before the fault");
    int *d;
    CHECK(cudaMalloc(&d, 64 * 128 * sizeof(int)));
    // block 41 of 64, thread 13, writes to address 0x10: nothing is mapped there on any GPU or CPU
    fill<<<64, 128>>>(d, 64 * 128, 41, 13, (int *)0x10);
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    int h[4];
    cudaError_t later = cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    cudaError_t again = cudaDeviceSynchronize();
    printf("launch: %s\nsynchronize: %s\nlater call: %s\nsynchronize again: %s\n", cudaGetErrorName(launch),
           cudaGetErrorName(sync), cudaGetErrorName(later), cudaGetErrorName(again));
    expect(launch == cudaSuccess, "the launch itself succeeds");
    expect(sync == cudaErrorIllegalAddress, "synchronize reports cudaErrorIllegalAddress");
    expect(later == cudaErrorIllegalAddress, "the error is sticky");
    expect(again == cudaErrorIllegalAddress, "still sticky");
    int *d2 = nullptr;
    expect(cudaMalloc(&d2, 64) == cudaErrorIllegalAddress, "allocation fails too");
    return finish();
}
