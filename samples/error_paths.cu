// Runtime error semantics as CUDA 13 reports them (checked on an H200, see README.md): invalid launch
// configurations (block too large, grid.y too large, too much shared memory -> cudaErrorInvalidValue;
// CUDA 13 no longer says cudaErrorInvalidConfiguration for these), out-of-range copies, bad frees,
// bad devices, allocation failure. Every failed call also becomes the "last error": cudaGetLastError
// returns and clears it, cudaPeekAtLastError leaves it; none of these errors is sticky.
#include "sample_common.h"

__global__ void inc(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

__global__ void uses_dynamic_shared(int *p) {
    extern __shared__ int s[];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    p[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

__device__ int d_small[16];

static void expect_error(const char *what, cudaError_t got, cudaError_t want) {
    printf("%-44s -> %s\n", what, cudaGetErrorName(got));
    if (got != want) {
        printf("  want %s\n", cudaGetErrorName(want));
        g_failures++;
    }
}

// A failed call leaves its error as the last error; reading it once clears it.
static void expect_last(const char *what, cudaError_t want) {
    cudaError_t e = cudaGetLastError();
    if (e != want) { printf("%s: last error %s, want %s\n", what, cudaGetErrorName(e), cudaGetErrorName(want)); g_failures++; }
    e = cudaGetLastError();
    if (e != cudaSuccess) { printf("%s: last error not cleared (%s)\n", what, cudaGetErrorName(e)); g_failures++; }
}

int main() {
    const int n = 1024;
    int *d;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    CHECK(cudaMemset(d, 0, n * sizeof(int)));
    expect_last("start", cudaSuccess);

    // --- launch configuration errors: reported at launch, held until read ---
    inc<<<1, 2048>>>(d, n);  // more than 1024 threads per block
    expect_error("peek after 2048-thread block", cudaPeekAtLastError(), cudaErrorInvalidValue);
    expect_error("peek again (peek does not clear)", cudaPeekAtLastError(), cudaErrorInvalidValue);
    expect_error("get (clears)", cudaGetLastError(), cudaErrorInvalidValue);
    expect_error("get after clearing", cudaGetLastError(), cudaSuccess);
    expect_error("peek after clearing", cudaPeekAtLastError(), cudaSuccess);

    inc<<<0, 32>>>(d, n);
    expect_error("zero-block grid", cudaGetLastError(), cudaErrorInvalidValue);
    inc<<<1, 0>>>(d, n);
    expect_error("zero-thread block", cudaGetLastError(), cudaErrorInvalidValue);
    inc<<<dim3(1, 70000), 1>>>(d, n);  // grid y is limited to 65535
    expect_error("grid.y = 70000", cudaGetLastError(), cudaErrorInvalidValue);
    inc<<<1, dim3(32, 32, 2)>>>(d, n);  // 2048 threads through y and z
    expect_error("block 32x32x2", cudaGetLastError(), cudaErrorInvalidValue);
    inc<<<1, dim3(1, 1, 128)>>>(d, n);  // block z is limited to 64
    expect_error("block.z = 128", cudaGetLastError(), cudaErrorInvalidValue);
    uses_dynamic_shared<<<1, 32, 1 << 20>>>(d);  // 1 MiB of dynamic shared memory
    expect_error("1 MiB dynamic shared memory", cudaGetLastError(), cudaErrorInvalidValue);
    // The device still works: a good launch after the bad ones runs and reports success.
    inc<<<n / 256, 256>>>(d, n);
    expect_error("good launch after bad ones", cudaGetLastError(), cudaSuccess);
    expect_error("synchronize", cudaDeviceSynchronize(), cudaSuccess);

    // --- API errors also become the last error, and are not sticky ---
    void *huge = nullptr;
    expect_error("cudaMalloc(1 PiB)", cudaMalloc(&huge, (size_t)1 << 50), cudaErrorMemoryAllocation);
    expect_error("last error after failed malloc", cudaGetLastError(), cudaErrorMemoryAllocation);
    expect_error("last error read twice", cudaGetLastError(), cudaSuccess);

    int host[2 * n];
    expect_error("H2D copy past the allocation end", cudaMemcpy(d, host, 2 * n * sizeof(int), cudaMemcpyHostToDevice),
                 cudaErrorInvalidValue);
    expect_last("after H2D", cudaErrorInvalidValue);
    expect_error("D2H copy past the allocation end", cudaMemcpy(host, d + n / 2, n * sizeof(int), cudaMemcpyDeviceToHost),
                 cudaErrorInvalidValue);
    expect_last("after D2H", cudaErrorInvalidValue);
    expect_error("memset past the allocation end", cudaMemset(d, 0, 4 * n * sizeof(int)), cudaErrorInvalidValue);
    expect_last("after memset", cudaErrorInvalidValue);
    expect_error("copy to symbol past its end", cudaMemcpyToSymbol(d_small, host, 32 * sizeof(int)), cudaErrorInvalidValue);
    expect_last("after symbol copy", cudaErrorInvalidValue);
    expect_error("cudaFree(bogus pointer)", cudaFree((void *)0x1234), cudaErrorInvalidValue);
    expect_last("after free", cudaErrorInvalidValue);
    expect_error("cudaFree(nullptr)", cudaFree(nullptr), cudaSuccess);
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    expect_error("cudaSetDevice(count)", cudaSetDevice(count), cudaErrorInvalidDevice);
    expect_last("after set device", cudaErrorInvalidDevice);
    int value = 0;
    expect_error("attribute of device -1", cudaDeviceGetAttribute(&value, cudaDevAttrWarpSize, -1), cudaErrorInvalidDevice);
    expect_last("after attribute", cudaErrorInvalidDevice);
    int max_optin = 0;
    CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    expect_error("max dynamic shared above the opt-in limit",
                 cudaFuncSetAttribute(uses_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, max_optin + 4096),
                 cudaErrorInvalidValue);
    expect_last("after func attribute", cudaErrorInvalidValue);

    // --- names and strings ---
    expect(strcmp(cudaGetErrorName(cudaErrorInvalidConfiguration), "cudaErrorInvalidConfiguration") == 0, "error name");
    expect(strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue") == 0, "error name");
    expect(strcmp(cudaGetErrorName(cudaSuccess), "cudaSuccess") == 0, "success name");
    expect(cudaGetErrorString(cudaErrorMemoryAllocation) != nullptr && strlen(cudaGetErrorString(cudaErrorMemoryAllocation)) > 0,
           "error string");

    // --- everything still works, and the data saw exactly one increment ---
    inc<<<n / 256, 256>>>(d, n);
    CHECK_LAUNCH();
    int *got = new int[n], *want = new int[n];
    CHECK(cudaMemcpy(got, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) want[i] = 2;
    compare_exact("d", got, want, n);
    CHECK(cudaFree(d));
    return finish();
}
