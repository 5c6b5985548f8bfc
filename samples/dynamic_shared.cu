// Dynamic shared memory: extern __shared__ arrays sized at launch, several typed arrays carved out of
// one allocation, a size that needs cudaFuncSetAttribute to exceed 48 KiB, and static + dynamic together.
#include "sample_common.h"

// Reverses each block's segment through shared memory sized by the launch.
__global__ void reverse_segments(const int *in, int *out, int n) {
    extern __shared__ int seg[];
    int base = blockIdx.x * blockDim.x, t = threadIdx.x;
    if (base + t < n) seg[t] = in[base + t];
    __syncthreads();
    int len = min((int)blockDim.x, n - base);
    if (t < len) out[base + t] = seg[len - 1 - t];
}

// Three arrays of different types in one dynamic allocation (doubles first to keep alignment).
__global__ void carved(const float *x, double *out_d, int *out_i, float *out_f, int n) {
    extern __shared__ double raw[];
    double *sd = raw;
    float *sf = (float *)(sd + blockDim.x);
    int *si = (int *)(sf + blockDim.x);
    __shared__ int static_total;  // static shared memory beside the dynamic part
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    if (t == 0) static_total = 0;
    float v = i < n ? x[i] : 0.0f;
    sd[t] = (double)v * 2.0;
    sf[t] = v + 1.0f;
    si[t] = (int)v;
    __syncthreads();
    atomicAdd(&static_total, si[(t + 1) % blockDim.x]);
    __syncthreads();
    if (i < n) {
        out_d[i] = sd[blockDim.x - 1 - t];
        out_f[i] = sf[(t + 5) % blockDim.x];
        out_i[i] = static_total;
    }
}

// Uses ~64 KiB of dynamic shared memory: a sliding-window sum over a large staged chunk.
__global__ void big_window(const float *in, float *out, int n, int elems) {
    extern __shared__ float buf[];
    int base = blockIdx.x * elems;
    for (int j = threadIdx.x; j < elems; j += blockDim.x) buf[j] = base + j < n ? in[base + j] : 0.0f;
    __syncthreads();
    for (int j = threadIdx.x; j < elems; j += blockDim.x) {
        float s = buf[j];
        if (j > 0) s += buf[j - 1];
        if (j + 1 < elems) s += buf[j + 1];
        if (base + j < n) out[base + j] = s;
    }
}

int main() {
    Rng rng(12);
    const int n = 100000;
    int *hi = new int[n], *ref = new int[n], *got = new int[n];
    for (int i = 0; i < n; i++) hi[i] = (int)rng.u32();
    int *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMemcpy(din, hi, n * sizeof(int), cudaMemcpyHostToDevice));
    const int blocks_sizes[] = {64, 256, 1000};
    for (int bs : blocks_sizes) {
        for (int base = 0; base < n; base += bs) {
            int len = base + bs <= n ? bs : n - base;
            for (int t = 0; t < len; t++) ref[base + t] = hi[base + len - 1 - t];
        }
        CHECK(cudaMemset(dout, 0xFF, n * sizeof(int)));
        reverse_segments<<<(n + bs - 1) / bs, bs, bs * sizeof(int)>>>(din, dout, n);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(got, dout, n * sizeof(int), cudaMemcpyDeviceToHost));
        char name[32];
        sprintf(name, "reverse%d", bs);
        compare_exact(name, got, ref, n);
    }

    const int m = 1 << 16, B = 128;
    float *x = new float[m];
    for (int i = 0; i < m; i++) x[i] = (float)rng.range(-50, 50);
    float *dx, *df; double *dd; int *di;
    CHECK(cudaMalloc(&dx, m * sizeof(float))); CHECK(cudaMalloc(&df, m * sizeof(float)));
    CHECK(cudaMalloc(&dd, m * sizeof(double))); CHECK(cudaMalloc(&di, m * sizeof(int)));
    CHECK(cudaMemcpy(dx, x, m * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(df, 0xFF, m * sizeof(float))); CHECK(cudaMemset(dd, 0xFF, m * sizeof(double)));
    CHECK(cudaMemset(di, 0xFF, m * sizeof(int)));
    carved<<<m / B, B, B * (sizeof(double) + sizeof(float) + sizeof(int))>>>(dx, dd, di, df, m);
    CHECK_LAUNCH();
    double *gd = new double[m], *rd = new double[m];
    float *gf = new float[m], *rf = new float[m];
    int *gi = new int[m], *ri = new int[m];
    CHECK(cudaMemcpy(gd, dd, m * sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gf, df, m * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gi, di, m * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < m / B; b++) {
        int tot = 0;
        for (int t = 0; t < B; t++) tot += (int)x[b * B + t];
        for (int t = 0; t < B; t++) {
            rd[b * B + t] = (double)x[b * B + B - 1 - t] * 2.0;
            rf[b * B + t] = x[b * B + (t + 5) % B] + 1.0f;
            ri[b * B + t] = tot;
        }
    }
    compare_exact("carved_d", gd, rd, m);
    compare_exact("carved_f", gf, rf, m);
    compare_exact("carved_i", gi, ri, m);

    // More than the default 48 KiB needs an explicit opt-in on every GPU since Volta.
    const int elems = 16384;  // 64 KiB
    const size_t smem = elems * sizeof(float);
    CHECK(cudaFuncSetAttribute(big_window, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaFuncAttributes attr;
    CHECK(cudaFuncGetAttributes(&attr, big_window));
    expect(attr.maxDynamicSharedSizeBytes == (int)smem, "max dynamic shared size attribute was set");
    const int p = 1 << 18;
    float *pin = new float[p], *pref = new float[p], *pgot = new float[p];
    for (int i = 0; i < p; i++) pin[i] = (float)rng.range(-1000, 1000);
    for (int i = 0; i < p; i++) {
        int j = i % elems;
        float s = pin[i];
        if (j > 0) s += pin[i - 1];
        if (j + 1 < elems) s += pin[i + 1];
        pref[i] = s;
    }
    float *dp, *dq;
    CHECK(cudaMalloc(&dp, p * sizeof(float))); CHECK(cudaMalloc(&dq, p * sizeof(float)));
    CHECK(cudaMemcpy(dp, pin, p * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dq, 0xFF, p * sizeof(float)));
    big_window<<<p / elems, 256, smem>>>(dp, dq, p, elems);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(pgot, dq, p * sizeof(float), cudaMemcpyDeviceToHost));
    compare_exact("big_window", pgot, pref, p);

    CHECK(cudaFree(din)); CHECK(cudaFree(dout)); CHECK(cudaFree(dx)); CHECK(cudaFree(df));
    CHECK(cudaFree(dd)); CHECK(cudaFree(di)); CHECK(cudaFree(dp)); CHECK(cudaFree(dq));
    return finish();
}
