// Matrix transpose through a 32x33 shared-memory tile (the padding column avoids bank conflicts), 32x8
// threads per block, each thread moving 4 elements (NVIDIA's transposeCoalesced; n a multiple of 32).
#include "bench_cuda.h"
static const char SHAPE[] = "transpose";

#define TILE_DIM 32
#define BLOCK_ROWS 8
extern "C" __global__ void transpose(float *odata, const float *idata, int width, int height) {
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main(int argc, char **argv) {
    bench_args args = bench_parse(argc, argv, 4096);
    int n = (int)args.n;
    size_t nn = (size_t)n * n;
    float *in = (float *)bench_alloc(nn * sizeof(float)), *out = (float *)bench_alloc(nn * sizeof(float));
    bench_fill(in, nn, -1, 1, &args.seed);
    start_device(SHAPE);
    float *din = to_device(SHAPE, in, nn), *dout = device_poisoned<float>(SHAPE, nn);
    dim3 block(TILE_DIM, BLOCK_ROWS), grid(n / TILE_DIM, n / TILE_DIM);
    auto launch = [&] { transpose<<<grid, block>>>(dout, din, n, n); };
    double first = time_launch(SHAPE, launch);
    to_host(SHAPE, out, dout, nn);
    check_transpose(SHAPE, in, out, n);
    bench_times t = time_repeats(SHAPE, args, launch);
    to_host(SHAPE, out, dout, nn);
    check_transpose(SHAPE, in, out, n);
    bench_report(SHAPE, first, &t, nullptr);
    return 0;
}
