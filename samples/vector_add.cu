// Vector add: the smallest complete program (malloc, copies, one launch with a grid-stride loop).
#include "sample_common.h"

__global__ void vector_add(const float *a, const float *b, float *c, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}

int main() {
    const int n = 1 << 18;
    const size_t bytes = n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes), *ref = (float *)malloc(bytes);
    Rng rng(1);
    for (int i = 0; i < n; i++) { a[i] = rng.uniform(-100, 100); b[i] = rng.uniform(-100, 100); ref[i] = a[i] + b[i]; }

    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, bytes)); CHECK(cudaMalloc(&db, bytes)); CHECK(cudaMalloc(&dc, bytes));
    CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dc, 0xFF, bytes));  // poison: a kernel that writes nothing cannot pass

    // Exactly n threads, then a smaller grid that must loop: both shapes must give the same answer.
    vector_add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    compare_exact("c(full grid)", c, ref, n);

    CHECK(cudaMemset(dc, 0xFF, bytes));
    vector_add<<<37, 128>>>(da, db, dc, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    compare_exact("c(grid-stride)", c, ref, n);

    CHECK(cudaFree(da)); CHECK(cudaFree(db)); CHECK(cudaFree(dc));
    free(a); free(b); free(c); free(ref);
    return finish();
}
