// Black-Scholes call and put prices, one option per thread (expf, logf, sqrtf and a polynomial
// cumulative normal, as in NVIDIA's BlackScholes sample).
#include "bench_cuda.h"
static const char SHAPE[] = "black_scholes";

__device__ float cnd(float d) {
    const float A1 = 0.31938153f, A2 = -0.356563782f, A3 = 1.781477937f, A4 = -1.821255978f, A5 = 1.330274429f;
    const float RSQRT2PI = 0.39894228040143267794f;
    float K = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float c = RSQRT2PI * expf(-0.5f * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))));
    return d > 0 ? 1.0f - c : c;
}

extern "C" __global__ void black_scholes(float *call, float *put, const float *S, const float *X, const float *T,
                                         float R, float V, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sqrtT = sqrtf(T[i]);
        float d1 = (logf(S[i] / X[i]) + (R + 0.5f * V * V) * T[i]) / (V * sqrtT);
        float d2 = d1 - V * sqrtT;
        float c1 = cnd(d1), c2 = cnd(d2);
        float expRT = expf(-R * T[i]);
        call[i] = S[i] * c1 - X[i] * expRT * c2;
        put[i] = X[i] * expRT * (1.0f - c2) - S[i] * (1.0f - c1);
    }
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 1L << 23);
    int n = (int)args.n;
    const float R = 0.02f, V = 0.30f;
    float *S = (float *)bench_alloc(n * sizeof(float)), *X = (float *)bench_alloc(n * sizeof(float));
    float *T = (float *)bench_alloc(n * sizeof(float)), *call = (float *)bench_alloc(n * sizeof(float));
    float *put = (float *)bench_alloc(n * sizeof(float));
    bench_fill(S, n, 5, 30, &args.seed);
    bench_fill(X, n, 1, 100, &args.seed);
    bench_fill(T, n, 0.25f, 10, &args.seed);
    start_device(SHAPE);
    float *dS = to_device(SHAPE, S, n), *dX = to_device(SHAPE, X, n), *dT = to_device(SHAPE, T, n);
    float *dcall = device_poisoned<float>(SHAPE, n), *dput = device_poisoned<float>(SHAPE, n);
    int threads = 256, blocks = (n + threads - 1) / threads;
    auto launch = [&] { black_scholes<<<blocks, threads>>>(dcall, dput, dS, dX, dT, R, V, n); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, call, dcall, n);
    to_host(SHAPE, put, dput, n);
    check_black_scholes(SHAPE, S, X, T, R, V, call, put, n);
    bench_times t = time_repeats(SHAPE, args, launch);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
