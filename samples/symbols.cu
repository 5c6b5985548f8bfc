// __constant__ and __device__ symbols: cudaMemcpyToSymbol/FromSymbol (with offsets, sync and async),
// cudaGetSymbolAddress and cudaGetSymbolSize, statically initialised device data, and symbol
// contents surviving across launches.
#include "sample_common.h"

#define NCOEF 64

__constant__ float c_coef[NCOEF];
__constant__ int c_params[4] = {3, 5, 7, 11};  // initialised in the image, never copied
__device__ int d_counter;
__device__ float d_table[1024];
__device__ unsigned long long d_init64 = 0x0123456789abcdefull;

__global__ void apply_poly(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    // Broadcast reads from constant memory, chosen by a value every thread shares.
    int k = i % NCOEF;
    y[i] = x[i] * c_coef[k] + c_coef[(k + c_params[0]) % NCOEF] + (float)c_params[1];
    atomicAdd(&d_counter, 1);
}

__global__ void fill_table(int scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 1024) d_table[i] = (float)(i * scale) + (float)c_params[2];
    if (i == 0) d_init64 += c_params[3];
}

int main() {
    const int n = 1 << 16;
    float coef[NCOEF];
    Rng rng(11);
    for (int k = 0; k < NCOEF; k++) coef[k] = (float)rng.range(-8, 8) * 0.25f;
    // Upload in two halves, the second with an offset.
    CHECK(cudaMemcpyToSymbol(c_coef, coef, 32 * sizeof(float)));
    CHECK(cudaMemcpyToSymbol(c_coef, coef + 32, 32 * sizeof(float), 32 * sizeof(float)));
    float back[NCOEF];
    CHECK(cudaMemcpyFromSymbol(back, c_coef, sizeof(back)));
    compare_exact("c_coef", back, coef, NCOEF);
    int params[4];
    CHECK(cudaMemcpyFromSymbol(params, c_params, sizeof(params)));
    int want_params[4] = {3, 5, 7, 11};
    compare_exact("c_params", params, want_params, 4);

    int zero = 0;
    CHECK(cudaMemcpyToSymbol(d_counter, &zero, sizeof(int)));
    float *h = new float[n], *ref = new float[n], *got = new float[n];
    for (int i = 0; i < n; i++) {
        h[i] = (float)rng.range(-100, 100);
        int k = i % NCOEF;
        ref[i] = h[i] * coef[k] + coef[(k + 3) % NCOEF] + 5.0f;
    }
    float *dx, *dy;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMemcpy(dx, h, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dy, 0xFF, n * sizeof(float)));
    apply_poly<<<n / 256, 256>>>(dx, dy, n);
    CHECK_LAUNCH();
    apply_poly<<<n / 256, 256>>>(dx, dy, n);  // the counter keeps counting across launches
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    compare_close("y", got, ref, n, 1e-6, 0.0);
    int counter = 0;
    CHECK(cudaMemcpyFromSymbol(&counter, d_counter, sizeof(int)));
    expect(counter == 2 * n, "device counter counted every thread of both launches");

    // The symbol's address is an ordinary device pointer.
    float *table_ptr = nullptr;
    size_t table_size = 0;
    CHECK(cudaGetSymbolAddress((void **)&table_ptr, d_table));
    CHECK(cudaGetSymbolSize(&table_size, d_table));
    expect(table_size == 1024 * sizeof(float), "symbol size of d_table");
    CHECK(cudaMemset(table_ptr, 0xFF, table_size));
    fill_table<<<4, 256>>>(3);
    CHECK_LAUNCH();
    float table[1024], table_ref[1024];
    CHECK(cudaMemcpy(table, table_ptr, sizeof(table), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 1024; i++) table_ref[i] = (float)(i * 3) + 7.0f;
    compare_exact("d_table", table, table_ref, 1024);
    // Read part of it back through the symbol with an offset, asynchronously.
    float part[100];
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st));
    CHECK(cudaMemcpyFromSymbolAsync(part, d_table, sizeof(part), 500 * sizeof(float), cudaMemcpyDeviceToHost, st));
    CHECK(cudaStreamSynchronize(st));
    compare_exact("d_table[500:600]", part, table_ref + 500, 100);
    // And write a slice through the symbol asynchronously.
    for (int i = 0; i < 100; i++) part[i] = -(float)i;
    CHECK(cudaMemcpyToSymbolAsync(d_table, part, sizeof(part), 10 * sizeof(float), cudaMemcpyHostToDevice, st));
    CHECK(cudaStreamSynchronize(st));
    CHECK(cudaMemcpy(table, table_ptr, sizeof(table), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 100; i++) table_ref[10 + i] = -(float)i;
    compare_exact("d_table after slice write", table, table_ref, 1024);
    CHECK(cudaStreamDestroy(st));

    unsigned long long v64 = 0;
    CHECK(cudaMemcpyFromSymbol(&v64, d_init64, sizeof(v64)));
    unsigned long long want64 = 0x0123456789abcdefull + 11;
    compare_exact("d_init64", &v64, &want64, 1);

    CHECK(cudaFree(dx)); CHECK(cudaFree(dy));
    return finish();
}
