// C = A * B for n x n row-major matrices, 16x16 tiles through shared memory (n a multiple of 16).
#include "bench_cuda.h"
static const char SHAPE[] = "sgemm_tiled";

#define TILE 16
extern "C" __global__ void sgemm_tiled(const float *A, const float *B, float *C, int n) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        As[ty][tx] = A[row * n + t + tx];
        Bs[ty][tx] = B[(t + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[row * n + col] = acc;
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
    dim3 block(TILE, TILE), grid(n / TILE, n / TILE);
    auto launch = [&] { sgemm_tiled<<<grid, block>>>(dA, dB, dC, n); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, C, dC, nn);
    check_sgemm(SHAPE, A, B, C, n);
    bench_times t = time_repeats(SHAPE, args, launch);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
