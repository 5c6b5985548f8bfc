/* The native baseline for scripts/bench_cpu: the same work as the CUDA kernels, written as plain C
   loops for gcc -O3 -march=native -fopenmp (all usable cores). */
#include <omp.h>
#include <stdint.h>
#include <time.h>

void vec_add(const float *a, const float *b, float *c, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) c[i] = a[i] + b[i];
}

/* The cache-friendly loop order: the fair native figure for the tiled kernel. */
void sgemm_ikj(const float *A, const float *B, float *C, int n) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *c = C + (long)i * n;
        for (int j = 0; j < n; j++) c[j] = 0.0f;
        for (int k = 0; k < n; k++) {
            float a = A[(long)i * n + k];
            const float *b = B + (long)k * n;
            for (int j = 0; j < n; j++) c[j] += a * b[j];
        }
    }
}

/* The naive kernel's own order: one dot product per output element. */
void sgemm_naive(const float *A, const float *B, float *C, int n) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int k = 0; k < n; k++) acc += A[(long)i * n + k] * B[(long)k * n + j];
            C[(long)i * n + j] = acc;
        }
}

/* One sum per 256-element slice. */
void reduce_blocks(const float *in, float *out, long nblocks) {
#pragma omp parallel for schedule(static)
    for (long b = 0; b < nblocks; b++) {
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int t = 0; t < 256; t++) s += in[b * 256 + t];
        out[b] = s;
    }
}

/* Reading the input once: the floor for the reductions. */
double read_once(const float *in, long n) {
    float s = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : s)
    for (long i = 0; i < n; i++) s += in[i];
    return s;
}

/* ns per empty parallel region (fork + join of the OpenMP team). */
double omp_empty_region_ns(int iters) {
    volatile int sink = 0;
    struct timespec t0, t1;
#pragma omp parallel
    { sink += 0; }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iters; i++) {
#pragma omp parallel
        { sink += 0; }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / iters;
}

int native_threads(void) { return omp_get_max_threads(); }
