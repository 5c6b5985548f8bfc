// float32 vector add, one element per thread, 64-bit index: c[i] = a[i] + b[i].
#include "bench_cuda.h"
static const char SHAPE[] = "vec_add64";

extern "C" __global__ void vec_add64(const float *a, const float *b, float *c, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 1L << 25);
    long long n = args.n;
    float *a = (float *)bench_alloc(n * sizeof(float)), *b = (float *)bench_alloc(n * sizeof(float));
    float *c = (float *)bench_alloc(n * sizeof(float));
    bench_fill(a, n, -1, 1, &args.seed);
    bench_fill(b, n, -1, 1, &args.seed);
    start_device(SHAPE);
    float *da = to_device(SHAPE, a, n), *db = to_device(SHAPE, b, n), *dc = device_poisoned<float>(SHAPE, n);
    int threads = 256;
    unsigned blocks = (unsigned)((n + threads - 1) / threads);
    auto launch = [&] { vec_add64<<<blocks, threads>>>(da, db, dc, n); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, c, dc, n);
    check_vec_add(SHAPE, a, b, c, n);
    bench_times t = time_repeats(SHAPE, args, launch);
    to_host(SHAPE, c, dc, n);
    check_vec_add(SHAPE, a, b, c, n);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
