// An empty kernel: the cost of launch + cudaDeviceSynchronize from a C host, per launch. n launches per
// timed round; the rounds are the runs (best of them).
#include "bench_cuda.h"
static const char SHAPE[] = "empty";

extern "C" __global__ void empty() {}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 2000);
    long iters = args.n;
    start_device(SHAPE);
    double first = time_launch(SHAPE, [] { empty<<<1, 1>>>(); });
    bench_times t;
    t.count = 0;
    t.spent = 0;
    while (bench_more(&t, &args)) {
        double t0 = bench_now();
        for (long i = 0; i < iters; i++) {
            empty<<<1, 1>>>();
            cudaError_t e = cudaDeviceSynchronize();
            if (e != cudaSuccess) bench_fail(SHAPE, "launch %ld -> %d (%s)", i, (int)e, cudaGetErrorString(e));
        }
        double dt = bench_now() - t0;
        t.spent += dt;
        t.t[t.count++] = dt / iters;
    }
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
