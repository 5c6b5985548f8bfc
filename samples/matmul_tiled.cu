// Tiled matrix multiply: shared-memory tiles, __syncthreads between loads and use, non-multiple sizes.
#include "sample_common.h"

#define TILE 16

__global__ void matmul_tiled(const float *A, const float *B, float *C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; t++) {
        int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

static int run(int M, int N, int K, uint64_t seed) {
    // Small integers keep every partial sum exact, so the comparison is exact whatever the order.
    float *A = new float[M * K], *B = new float[K * N], *C = new float[M * N], *R = new float[M * N];
    Rng rng(seed);
    for (int i = 0; i < M * K; i++) A[i] = (float)rng.range(-4, 4);
    for (int i = 0; i < K * N; i++) B[i] = (float)rng.range(-4, 4);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            R[i * N + j] = s;
        }
    float *dA, *dB, *dC;
    CHECK(cudaMalloc(&dA, M * K * sizeof(float)));
    CHECK(cudaMalloc(&dB, K * N * sizeof(float)));
    CHECK(cudaMalloc(&dC, M * N * sizeof(float)));
    CHECK(cudaMemcpy(dA, A, M * K * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, B, K * N * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dC, 0xFF, M * N * sizeof(float)));
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled<<<grid, block>>>(dA, dB, dC, M, N, K);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(C, dC, M * N * sizeof(float), cudaMemcpyDeviceToHost));
    char name[64];
    sprintf(name, "C(%dx%dx%d)", M, N, K);
    int bad = compare_exact(name, C, R, (size_t)M * N);
    CHECK(cudaFree(dA)); CHECK(cudaFree(dB)); CHECK(cudaFree(dC));
    delete[] A; delete[] B; delete[] C; delete[] R;
    return bad;
}

int main() {
    run(256, 256, 256, 2);
    run(100, 75, 130, 3);  // edges: partial tiles in every dimension
    return finish();
}
