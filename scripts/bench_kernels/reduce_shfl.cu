// Sum of each 256-element slice: shfl.down within warps, then the 8 warp sums by warp 0.
// (reduce_shfl.ptx beside it is this kernel, nvcc -ptx -arch=compute_86; tests/ptx/test_warp_regions.py runs it.)
#include "bench_cuda.h"
static const char SHAPE[] = "reduce_shfl";

extern "C" __global__ void reduce_shfl(const float *in, float *out) {
    __shared__ float warp_sums[8];
    unsigned t = threadIdx.x;
    float v = in[blockIdx.x * 256 + t];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((t & 31) == 0) warp_sums[t >> 5] = v;
    __syncthreads();
    if (t < 32) {
        v = t < 8 ? warp_sums[t] : 0.0f;
        for (int o = 4; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (t == 0) out[blockIdx.x] = v;
    }
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 1L << 25);
    long n = args.n, blocks = n / 256;
    float *x = (float *)bench_alloc(n * sizeof(float)), *out = (float *)bench_alloc(blocks * sizeof(float));
    bench_fill(x, n, -1, 1, &args.seed);
    start_device(SHAPE);
    float *dx = to_device(SHAPE, x, n), *dout = device_poisoned<float>(SHAPE, blocks);
    auto launch = [&] { reduce_shfl<<<(unsigned)blocks, 256>>>(dx, dout); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, out, dout, blocks);
    check_slice_sums(SHAPE, x, out, blocks, 256);
    bench_times t = time_repeats(SHAPE, args, launch);
    to_host(SHAPE, out, dout, blocks);
    check_slice_sums(SHAPE, x, out, blocks, 256);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
