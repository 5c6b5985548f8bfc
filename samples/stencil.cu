// 2D five-point Jacobi stencil with a shared-memory tile plus halo (loaded by edge threads), double-
// buffered over many sweeps, fixed boundary; checked against the same arithmetic on the host.
#include "sample_common.h"

#define BX 32
#define BY 8

__global__ void jacobi(const float *in, float *out, int w, int h) {
    __shared__ float t[BY + 2][BX + 2];
    int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
    int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
    bool inside = x < w && y < h;
    if (inside) {
        t[ty][tx] = in[y * w + x];
        if (threadIdx.x == 0 && x > 0) t[ty][0] = in[y * w + x - 1];
        if ((threadIdx.x == BX - 1 || x == w - 1) && x + 1 < w) t[ty][tx + 1] = in[y * w + x + 1];
        if (threadIdx.y == 0 && y > 0) t[0][tx] = in[(y - 1) * w + x];
        if ((threadIdx.y == BY - 1 || y == h - 1) && y + 1 < h) t[ty + 1][tx] = in[(y + 1) * w + x];
    }
    __syncthreads();
    if (!inside) return;
    if (x == 0 || y == 0 || x == w - 1 || y == h - 1) { out[y * w + x] = t[ty][tx]; return; }
    // Written as two separately rounded steps, and with __fmul_rn/__fadd_rn so that no FMA
    // contraction makes the device's rounding differ from the host's.
    float s = __fadd_rn(__fadd_rn(t[ty][tx - 1], t[ty][tx + 1]), __fadd_rn(t[ty - 1][tx], t[ty + 1][tx]));
    out[y * w + x] = __fmul_rn(s, 0.25f);
}

int main() {
    const int w = 300, h = 200, sweeps = 50;
    const size_t n = (size_t)w * h;
    float *a = new float[n], *b = new float[n], *got = new float[n];
    Rng rng(23);
    for (size_t i = 0; i < n; i++) a[i] = rng.uniform(0.0f, 100.0f);
    float *d0, *d1;
    CHECK(cudaMalloc(&d0, n * sizeof(float))); CHECK(cudaMalloc(&d1, n * sizeof(float)));
    CHECK(cudaMemcpy(d0, a, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d1, 0xFF, n * sizeof(float)));
    dim3 block(BX, BY), grid((w + BX - 1) / BX, (h + BY - 1) / BY);
    for (int s = 0; s < sweeps; s++) {
        jacobi<<<grid, block>>>(s % 2 ? d1 : d0, s % 2 ? d0 : d1, w, h);
        CHECK(cudaGetLastError());
    }
    CHECK(cudaDeviceSynchronize());
    for (int s = 0; s < sweeps; s++) {
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                size_t i = (size_t)y * w + x;
                if (x == 0 || y == 0 || x == w - 1 || y == h - 1) { b[i] = a[i]; continue; }
                volatile float l = a[i - 1], r = a[i + 1], u = a[i - w], d = a[i + w];
                volatile float lr = l + r, ud = u + d, sum = lr + ud;
                b[i] = sum * 0.25f;
            }
        float *t = a; a = b; b = t;
    }
    CHECK(cudaMemcpy(got, sweeps % 2 ? d1 : d0, n * sizeof(float), cudaMemcpyDeviceToHost));
    compare_exact("grid", got, a, n);
    CHECK(cudaFree(d0)); CHECK(cudaFree(d1));
    return finish();
}
