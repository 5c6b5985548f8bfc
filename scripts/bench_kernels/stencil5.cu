// 5-point stencil on an n x n grid, one point per thread in 16x16 blocks; the border is not written.
#include "bench_cuda.h"
static const char SHAPE[] = "stencil5";

extern "C" __global__ void stencil5(const float *in, float *out, int nx, int ny) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x > 0 && y > 0 && x < nx - 1 && y < ny - 1) {
        int i = y * nx + x;
        out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
    }
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 4096);
    int n = (int)args.n;
    size_t nn = (size_t)n * n;
    float *in = (float *)bench_alloc(nn * sizeof(float)), *out = (float *)bench_alloc(nn * sizeof(float));
    bench_fill(in, nn, 1, 2, &args.seed);
    start_device(SHAPE);
    float *din = to_device(SHAPE, in, nn), *dout = nullptr;
    CUDA_CHECK(cudaMalloc(&dout, nn * sizeof(float)));
    CUDA_CHECK(cudaMemset(dout, 0, nn * sizeof(float)));  // the border stays 0; the interior must be written
    dim3 block(16, 16), grid((n + 15) / 16, (n + 15) / 16);
    auto launch = [&] { stencil5<<<grid, block>>>(din, dout, n, n); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, out, dout, nn);
    check_stencil5(SHAPE, in, out, n);
    bench_times t = time_repeats(SHAPE, args, launch);
    to_host(SHAPE, out, dout, nn);
    check_stencil5(SHAPE, in, out, n);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
