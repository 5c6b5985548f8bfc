// Zero-copy host memory: cudaHostAlloc(cudaHostAllocMapped) + cudaHostGetDevicePointer, a kernel
// reading and writing host memory directly, cudaHostRegister of an ordinary malloc'd buffer,
// portable/write-combined flags, and cudaHostGetFlags.
#include "sample_common.h"

__global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void fill_index(int *out, int n, int add) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i * 3 + add;
}

int main() {
    CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
    int can_map = 0;
    CHECK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, 0));
    expect(can_map == 1, "device can map host memory");

    const int n = 1 << 18;
    float *hx, *hy;
    CHECK(cudaHostAlloc(&hx, n * sizeof(float), cudaHostAllocMapped | cudaHostAllocWriteCombined));
    CHECK(cudaHostAlloc(&hy, n * sizeof(float), cudaHostAllocMapped | cudaHostAllocPortable));
    unsigned flags = 0;
    CHECK(cudaHostGetFlags(&flags, hy));
    expect((flags & cudaHostAllocMapped) && (flags & cudaHostAllocPortable), "cudaHostGetFlags reports mapped|portable");
    float *ref = new float[n];
    Rng rng(16);
    for (int i = 0; i < n; i++) {
        hx[i] = (float)rng.range(-1000, 1000);
        hy[i] = (float)rng.range(-1000, 1000);
        ref[i] = 2.5f * hx[i] + hy[i];
    }
    float *dx, *dy;
    CHECK(cudaHostGetDevicePointer((void **)&dx, hx, 0));
    CHECK(cudaHostGetDevicePointer((void **)&dy, hy, 0));
    saxpy<<<(n + 255) / 256, 256>>>(2.5f, dx, dy, n);
    CHECK_LAUNCH();
    compare_exact("y (mapped, read in place)", hy, ref, n);

    // Registering memory the program allocated itself.
    const int m = 100000;
    int *buf = (int *)malloc(m * sizeof(int));
    for (int i = 0; i < m; i++) buf[i] = -1;
    CHECK(cudaHostRegister(buf, m * sizeof(int), cudaHostRegisterMapped));
    int *dbuf;
    CHECK(cudaHostGetDevicePointer((void **)&dbuf, buf, 0));
    fill_index<<<(m + 127) / 128, 128>>>(dbuf, m, 7);
    CHECK_LAUNCH();
    int *want = new int[m];
    for (int i = 0; i < m; i++) want[i] = i * 3 + 7;
    compare_exact("registered", buf, want, m);
    // Registered memory is also a valid, fast source for ordinary copies.
    int *dcopy;
    CHECK(cudaMalloc(&dcopy, m * sizeof(int)));
    CHECK(cudaMemcpy(dcopy, buf, m * sizeof(int), cudaMemcpyHostToDevice));
    fill_index<<<(m + 127) / 128, 128>>>(dbuf, m, 0);  // overwrite host side through the mapping
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(buf, dcopy, m * sizeof(int), cudaMemcpyDeviceToHost));
    compare_exact("registered round trip", buf, want, m);
    CHECK(cudaHostUnregister(buf));
    free(buf);

    cudaPointerAttributes attr;
    CHECK(cudaPointerGetAttributes(&attr, hx));
    expect(attr.type == cudaMemoryTypeHost, "pointer attributes say host");
    expect(attr.devicePointer == dx, "attributes give the same device pointer");

    CHECK(cudaFree(dcopy));
    CHECK(cudaFreeHost(hx)); CHECK(cudaFreeHost(hy));
    return finish();
}
