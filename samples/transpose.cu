// Matrix transpose: naive, and through a padded shared-memory tile (coalesced reads and writes,
// no bank conflicts), on a non-square matrix whose sides are not multiples of the tile.
#include "sample_common.h"

#define TILE 32
#define ROWS 8  // each thread moves TILE/ROWS elements

__global__ void transpose_naive(const float *in, float *out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}

__global__ void transpose_tiled(const float *in, float *out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main() {
    const int rows = 700, cols = 1000;
    const size_t n = (size_t)rows * cols;
    float *h = new float[n], *ref = new float[n], *got = new float[n];
    Rng rng(9);
    for (size_t i = 0; i < n; i++) h[i] = rng.uniform(-1, 1);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) ref[(size_t)c * rows + r] = h[(size_t)r * cols + c];
    float *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(float)));
    CHECK(cudaMalloc(&dout, n * sizeof(float)));
    CHECK(cudaMemcpy(din, h, n * sizeof(float), cudaMemcpyHostToDevice));

    CHECK(cudaMemset(dout, 0xFF, n * sizeof(float)));
    transpose_naive<<<dim3((cols + 15) / 16, (rows + 15) / 16), dim3(16, 16)>>>(din, dout, rows, cols);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    compare_exact("naive", got, ref, n);

    CHECK(cudaMemset(dout, 0xFF, n * sizeof(float)));
    transpose_tiled<<<dim3((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE), dim3(TILE, ROWS)>>>(din, dout, rows, cols);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    compare_exact("tiled", got, ref, n);

    CHECK(cudaFree(din)); CHECK(cudaFree(dout));
    return finish();
}
