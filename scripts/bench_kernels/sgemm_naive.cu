// C = A * B for n x n row-major matrices, one output per thread, no shared memory (16x16 blocks).
#include "bench_cuda.h"
static const char SHAPE[] = "sgemm_naive";

extern "C" __global__ void sgemm_naive(const float *A, const float *B, float *C, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; k++) acc += A[row * n + k] * B[k * n + col];
        C[row * n + col] = acc;
    }
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 1024);
    int n = (int)args.n;
    size_t nn = (size_t)n * n;
    float *A = (float *)bench_alloc(nn * sizeof(float)), *B = (float *)bench_alloc(nn * sizeof(float));
    float *C = (float *)bench_alloc(nn * sizeof(float));
    bench_fill(A, nn, 0, 1, &args.seed);
    bench_fill(B, nn, 0, 1, &args.seed);
    start_device(SHAPE);
    float *dA = to_device(SHAPE, A, nn), *dB = to_device(SHAPE, B, nn), *dC = device_poisoned<float>(SHAPE, nn);
    dim3 block(16, 16), grid((n + 15) / 16, (n + 15) / 16);
    auto launch = [&] { sgemm_naive<<<grid, block>>>(dA, dB, dC, n); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, C, dC, nn);
    check_sgemm(SHAPE, A, B, C, n);
    bench_times t = time_repeats(SHAPE, args, launch);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
