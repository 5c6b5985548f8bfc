// Grid-stride saxpy, y = alpha * x + y: a fixed grid (32 blocks per multiprocessor) and a loop in each thread.
#include "bench_cuda.h"
static const char SHAPE[] = "saxpy";

extern "C" __global__ void saxpy(int n, float alpha, const float *x, float *y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = alpha * x[i] + y[i];
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 1L << 25);
    int n = (int)args.n;
    const float alpha = 0.75f;
    float *x = (float *)bench_alloc(n * sizeof(float)), *y0 = (float *)bench_alloc(n * sizeof(float));
    float *y = (float *)bench_alloc(n * sizeof(float));
    bench_fill(x, n, -1, 1, &args.seed);
    bench_fill(y0, n, -1, 1, &args.seed);
    start_device(SHAPE);
    float *dx = to_device(SHAPE, x, n), *dy = to_device(SHAPE, y0, n);
    int threads = 256, blocks = 32 * multiprocessors(SHAPE);
    auto launch = [&] { saxpy<<<blocks, threads>>>(n, alpha, dx, dy); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, y, dy, n);
    check_saxpy(SHAPE, alpha, x, y0, y, n, 1);
    bench_times t = time_repeats(SHAPE, args, launch);
    to_host(SHAPE, y, dy, n);
    check_saxpy(SHAPE, alpha, x, y0, y, n, 1 + t.count);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
