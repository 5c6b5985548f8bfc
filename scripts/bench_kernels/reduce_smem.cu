// Sum of each 256-element slice: shared-memory tree with a barrier per level (8 levels).
#include "bench_cuda.h"
static const char SHAPE[] = "reduce_smem";

extern "C" __global__ void reduce_smem(const float *in, float *out) {
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (unsigned stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 1L << 25);
    long n = args.n, blocks = n / 256;
    float *x = (float *)bench_alloc(n * sizeof(float)), *out = (float *)bench_alloc(blocks * sizeof(float));
    bench_fill(x, n, -1, 1, &args.seed);
    start_device(SHAPE);
    float *dx = to_device(SHAPE, x, n), *dout = device_poisoned<float>(SHAPE, blocks);
    auto launch = [&] { reduce_smem<<<(unsigned)blocks, 256>>>(dx, dout); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, out, dout, blocks);
    check_slice_sums(SHAPE, x, out, blocks, 256);
    bench_times t = time_repeats(SHAPE, args, launch);
    to_host(SHAPE, out, dout, blocks);
    check_slice_sums(SHAPE, x, out, blocks, 256);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
