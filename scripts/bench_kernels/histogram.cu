// 256-bin byte histogram: each block counts into shared memory with atomicAdd over a grid-stride loop,
// then adds its counts to the global histogram (256 threads, 32 blocks per multiprocessor).
#include "bench_cuda.h"
static const char SHAPE[] = "histogram";

extern "C" __global__ void histogram256(const unsigned char *data, int n, unsigned int *hist) {
    __shared__ unsigned int s[256];
    s[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&s[data[i]], 1u);
    __syncthreads();
    atomicAdd(&hist[threadIdx.x], s[threadIdx.x]);
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 1L << 25);
    int n = (int)args.n;
    unsigned char *data = (unsigned char *)bench_alloc(n);
    for (int i = 0; i < n; i++) data[i] = (unsigned char)(bench_next(&args.seed) >> 56);
    unsigned hist[256];
    start_device(SHAPE);
    unsigned char *ddata = to_device(SHAPE, data, n);
    unsigned *dhist = nullptr;
    CUDA_CHECK(cudaMalloc(&dhist, sizeof hist));
    CUDA_CHECK(cudaMemset(dhist, 0, sizeof hist));
    int blocks = 32 * multiprocessors(SHAPE);
    auto launch = [&] { histogram256<<<blocks, 256>>>(ddata, n, dhist); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, hist, dhist, 256);
    check_histogram(SHAPE, data, n, hist, 1);
    bench_times t = time_repeats(SHAPE, args, launch);  // the counts add up over the launches
    to_host(SHAPE, hist, dhist, 256);
    check_histogram(SHAPE, data, n, hist, 1 + t.count);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
