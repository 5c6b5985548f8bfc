/* Host references for scripts/bench_cpu's shapes, computed in double from the inputs, and the checks that
   turn a wrong result into a FAIL line (never a timing). Shared by the CUDA programs and native.c. */
#ifndef BENCH_REF_H
#define BENCH_REF_H

#include "bench.h"

#define BENCH_EPS 0x1p-24 /* float's unit roundoff */

static inline void check_vec_add(const char *shape, const float *a, const float *b, const float *c, long n) {
    for (long i = 0; i < n; i++)
        if (!(c[i] == a[i] + b[i])) bench_fail(shape, "c[%ld] = %.9g, expected %.9g", i, c[i], a[i] + b[i]);
}

/* y after `launches` runs of y = alpha * x + y from y0, within the rounding those runs may add */
static inline void check_saxpy(const char *shape, float alpha, const float *x, const float *y0, const float *y, long n,
                               int launches) {
    for (long i = 0; i < n; i++) {
        double ax = (double)alpha * x[i], ref = y0[i] + launches * ax;
        double tol = 4.0 * launches * BENCH_EPS * (fabs(y0[i]) + launches * fabs(ax)) + 1e-30;
        if (!(fabs(y[i] - ref) <= tol))
            bench_fail(shape, "y[%ld] = %.9g after %d launches, expected %.9g", i, y[i], launches, ref);
    }
}

/* out[s] = sum of in[s*len .. s*len+len), in any order of float additions */
static inline void check_slice_sums(const char *shape, const float *in, const float *out, long slices, int len) {
    for (long s = 0; s < slices; s++) {
        double sum = 0, abs_sum = 0;
        for (int t = 0; t < len; t++) {
            sum += in[s * len + t];
            abs_sum += fabs(in[s * len + t]);
        }
        if (!(fabs(out[s] - sum) <= 2.0 * len * BENCH_EPS * abs_sum + 1e-30))
            bench_fail(shape, "out[%ld] = %.9g, expected %.9g", s, out[s], sum);
    }
}

/* C = A * B (n x n, row-major, entries of A and B in [0, 1)): 64 rows spread over C against double, and
   every entry finite and within [0, n] so that no unwritten (poisoned) entry passes */
static inline void check_sgemm(const char *shape, const float *A, const float *B, const float *C, long n) {
    for (long i = 0; i < n * n; i++)
        if (!(C[i] >= 0.0f && C[i] <= (float)n)) bench_fail(shape, "C[%ld][%ld] = %.9g", i / n, i % n, C[i]);
    double *row = (double *)bench_alloc(sizeof(double) * n);
    long rows = n < 64 ? n : 64;
    for (long r = 0; r < rows; r++) {
        long i = (r * n) / rows + (r * 7) % (n / rows > 0 ? n / rows : 1);
        for (long j = 0; j < n; j++) row[j] = 0;
        for (long k = 0; k < n; k++)
            for (long j = 0; j < n; j++) row[j] += (double)A[i * n + k] * B[k * n + j];
        for (long j = 0; j < n; j++) /* entries are >= 0: the sum of |a*b| is the sum itself */
            if (!(fabs(C[i * n + j] - row[j]) <= 2.0 * n * BENCH_EPS * row[j] + 1e-30))
                bench_fail(shape, "C[%ld][%ld] = %.9g, expected %.9g", i, j, C[i * n + j], row[j]);
    }
    free(row);
}

static inline void check_transpose(const char *shape, const float *in, const float *out, long n) {
    for (long y = 0; y < n; y++)
        for (long x = 0; x < n; x++)
            if (!(out[x * n + y] == in[y * n + x]))
                bench_fail(shape, "out[%ld][%ld] = %.9g, expected %.9g", x, y, out[x * n + y], in[y * n + x]);
}

/* out = 0.5 in + 0.125 (the four neighbours) on the interior; the border keeps the 0 it was given */
static inline void check_stencil5(const char *shape, const float *in, const float *out, long n) {
    for (long y = 0; y < n; y++)
        for (long x = 0; x < n; x++) {
            long i = y * n + x;
            double ref = 0; /* inputs are in [1, 2): the terms are positive and ref bounds the rounding */
            if (x > 0 && y > 0 && x < n - 1 && y < n - 1)
                ref = 0.5 * in[i] + 0.125 * ((double)in[i - 1] + in[i + 1] + in[i - n] + in[i + n]);
            if (!(fabs(out[i] - ref) <= 8.0 * BENCH_EPS * ref))
                bench_fail(shape, "out[%ld][%ld] = %.9g, expected %.9g", y, x, out[i], ref);
        }
}

/* hist[b] = launches * (how many bytes of data are b) */
static inline void check_histogram(const char *shape, const unsigned char *data, long n, const unsigned *hist,
                                   int launches) {
    long ref[256] = {0};
    for (long i = 0; i < n; i++) ref[data[i]]++;
    for (int b = 0; b < 256; b++)
        if ((long)hist[b] != launches * ref[b])
            bench_fail(shape, "hist[%d] = %u after %d launches, expected %ld", b, hist[b], launches, launches * ref[b]);
}

/* Black-Scholes call and put prices (Abramowitz-Stegun cumulative normal, as NVIDIA's sample), in double */
static inline double bs_cnd(double d) {
    const double A1 = 0.31938153, A2 = -0.356563782, A3 = 1.781477937, A4 = -1.821255978, A5 = 1.330274429;
    double K = 1.0 / (1.0 + 0.2316419 * fabs(d));
    double cnd = 0.39894228040143267794 * exp(-0.5 * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))));
    return d > 0 ? 1.0 - cnd : cnd;
}

static inline void check_black_scholes(const char *shape, const float *S, const float *X, const float *T, float R,
                                       float V, const float *call, const float *put, long n) {
    for (long i = 0; i < n; i++) {
        double sqrtT = sqrt((double)T[i]);
        double d1 = (log((double)S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrtT), d2 = d1 - V * sqrtT;
        double c1 = bs_cnd(d1), c2 = bs_cnd(d2), expRT = exp(-(double)R * T[i]);
        double rc = S[i] * c1 - X[i] * expRT * c2, rp = X[i] * expRT * (1.0 - c2) - S[i] * (1.0 - c1);
        /* float inputs and float math: errors scale with the prices' operands, S and X */
        double tol = 4e-6 * (S[i] + X[i]); /* 20x the largest error seen, float C or nvcc */
        if (!(fabs(call[i] - rc) <= tol) || !(fabs(put[i] - rp) <= tol))
            bench_fail(shape, "option %ld: call %.9g put %.9g, expected %.9g %.9g", i, call[i], put[i], rc, rp);
    }
}

#endif
