/* The native baseline of scripts/bench_cpu: the work of each CUDA program written as plain C loops for
   gcc -O3 -march=native -fopenmp (all usable cores), on the same inputs (same seed), checked against the
   same references and timed the same way (a first run, then best of the timed runs).
   ./native shape=NAME n=N reps=R budget=S seed=X */
#include <omp.h>
#include "bench_ref.h"

#define TIMED(args, t, stmt)                          \
    do {                                              \
        while (bench_more(&(t), &(args))) {           \
            double t0_ = bench_now();                 \
            stmt;                                     \
            bench_add(&(t), bench_now() - t0_);       \
        }                                             \
    } while (0)

static double once(void (*fn)(void *), void *ctx) {
    double t0 = bench_now();
    fn(ctx);
    return bench_now() - t0;
}

static float *floats(long n) { return (float *)bench_alloc(n * sizeof(float)); }

static void poison(float *x, long n) { memset(x, 0xff, n * sizeof(float)); }

/* ---------------------------------------------------------------- vector add, 32- and 64-bit index */
typedef struct { const float *a, *b; float *c; long n; } vec_ctx;

static void vec_add32(void *p) {
    vec_ctx *v = (vec_ctx *)p;
    int n = (int)v->n;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) v->c[i] = v->a[i] + v->b[i];
}

static void vec_add64(void *p) {
    vec_ctx *v = (vec_ctx *)p;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < v->n; i++) v->c[i] = v->a[i] + v->b[i];
}

static void run_vec_add(const char *shape, bench_args a, void (*fn)(void *)) {
    float *x = floats(a.n), *y = floats(a.n), *z = floats(a.n);
    bench_fill(x, a.n, -1, 1, &a.seed);
    bench_fill(y, a.n, -1, 1, &a.seed);
    poison(z, a.n);
    vec_ctx v = {x, y, z, a.n};
    double first = once(fn, &v);
    check_vec_add(shape, x, y, z, a.n);
    bench_times t = {{0}, 0, 0};
    TIMED(a, t, fn(&v));
    bench_report(shape, first, &t, NULL);
}

/* ---------------------------------------------------------------- saxpy */
typedef struct { float alpha; const float *x; float *y; long n; } saxpy_ctx;

static void saxpy(void *p) {
    saxpy_ctx *s = (saxpy_ctx *)p;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < s->n; i++) s->y[i] = s->alpha * s->x[i] + s->y[i];
}

static void run_saxpy(bench_args a) {
    float *x = floats(a.n), *y0 = floats(a.n), *y = floats(a.n);
    bench_fill(x, a.n, -1, 1, &a.seed);
    bench_fill(y0, a.n, -1, 1, &a.seed);
    memcpy(y, y0, a.n * sizeof(float));
    saxpy_ctx s = {0.75f, x, y, a.n};
    double first = once(saxpy, &s);
    check_saxpy("saxpy", s.alpha, x, y0, y, a.n, 1);
    bench_times t = {{0}, 0, 0};
    TIMED(a, t, saxpy(&s));
    check_saxpy("saxpy", s.alpha, x, y0, y, a.n, 1 + t.count);
    bench_report("saxpy", first, &t, NULL);
}

/* ---------------------------------------------------------------- reductions */
typedef struct { const float *in; float *out; long n; double sum; } red_ctx;

/* one sum per 256-element slice, as the reduction kernels produce */
static void slice_sums(void *p) {
    red_ctx *r = (red_ctx *)p;
    const float *in = r->in; /* locals: through r, gcc 12 turns the simd loads into gathers */
    float *out = r->out;
    long slices = r->n / 256;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < slices; b++) {
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int t = 0; t < 256; t++) s += in[b * 256 + t];
        out[b] = s;
    }
}

/* reading the input once: the floor the reductions are held to */
static void read_once(void *p) {
    red_ctx *r = (red_ctx *)p;
    const float *in = r->in;
    long n = r->n;
    float s = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : s)
    for (long i = 0; i < n; i++) s += in[i];
    r->sum = s;
}

static void run_reduce(bench_args a, int whole) {
    const char *shape = whole ? "read_once" : "reduce";
    float *x = floats(a.n), *out = floats(a.n / 256);
    bench_fill(x, a.n, -1, 1, &a.seed);
    poison(out, a.n / 256);
    red_ctx r = {x, out, a.n, 0};
    void (*fn)(void *) = whole ? read_once : slice_sums;
    double first = once(fn, &r);
    if (whole) {
        double sum = 0, abs_sum = 0;
        for (long i = 0; i < a.n; i++) {
            sum += x[i];
            abs_sum += fabs(x[i]);
        }
        if (!(fabs(r.sum - sum) <= a.n * BENCH_EPS * abs_sum)) bench_fail(shape, "sum %.9g, expected %.9g", r.sum, sum);
    } else {
        check_slice_sums(shape, x, out, a.n / 256, 256);
    }
    bench_times t = {{0}, 0, 0};
    TIMED(a, t, fn(&r));
    bench_report(shape, first, &t, NULL);
}

/* ---------------------------------------------------------------- SGEMM */
typedef struct { const float *A, *B; float *C; long n; } mm_ctx;

/* the cache-friendly loop order a C programmer writes (each C entry still sums over k in order) */
static void sgemm_ikj(void *p) {
    mm_ctx *m = (mm_ctx *)p;
    long n = m->n;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        float *c = m->C + i * n;
        for (long j = 0; j < n; j++) c[j] = 0.0f;
        for (long k = 0; k < n; k++) {
            float a = m->A[i * n + k];
            const float *b = m->B + k * n;
            for (long j = 0; j < n; j++) c[j] += a * b[j];
        }
    }
}

static void run_sgemm(bench_args a) {
    long nn = a.n * a.n;
    float *A = floats(nn), *B = floats(nn), *C = floats(nn);
    bench_fill(A, nn, 0, 1, &a.seed);
    bench_fill(B, nn, 0, 1, &a.seed);
    poison(C, nn);
    mm_ctx m = {A, B, C, a.n};
    double first = once(sgemm_ikj, &m);
    check_sgemm("sgemm", A, B, C, a.n);
    bench_times t = {{0}, 0, 0};
    TIMED(a, t, sgemm_ikj(&m));
    bench_report("sgemm", first, &t, NULL);
}

/* ---------------------------------------------------------------- transpose */
typedef struct { const float *in; float *out; long n; } grid_ctx;

static void transpose(void *p) {
    grid_ctx *g = (grid_ctx *)p;
    long n = g->n;
#pragma omp parallel for collapse(2) schedule(static)
    for (long by = 0; by < n; by += 32)
        for (long bx = 0; bx < n; bx += 32)
            for (long y = by; y < by + 32 && y < n; y++)
                for (long x = bx; x < bx + 32 && x < n; x++) g->out[x * n + y] = g->in[y * n + x];
}

static void run_transpose(bench_args a) {
    long nn = a.n * a.n;
    float *in = floats(nn), *out = floats(nn);
    bench_fill(in, nn, -1, 1, &a.seed);
    poison(out, nn);
    grid_ctx g = {in, out, a.n};
    double first = once(transpose, &g);
    check_transpose("transpose", in, out, a.n);
    bench_times t = {{0}, 0, 0};
    TIMED(a, t, transpose(&g));
    bench_report("transpose", first, &t, NULL);
}

/* ---------------------------------------------------------------- 5-point stencil */
static void stencil5(void *p) {
    grid_ctx *g = (grid_ctx *)p;
    long n = g->n;
#pragma omp parallel for schedule(static)
    for (long y = 1; y < n - 1; y++)
        for (long x = 1; x < n - 1; x++) {
            long i = y * n + x;
            g->out[i] = 0.5f * g->in[i] + 0.125f * (g->in[i - 1] + g->in[i + 1] + g->in[i - n] + g->in[i + n]);
        }
}

static void run_stencil5(bench_args a) {
    long nn = a.n * a.n;
    float *in = floats(nn), *out = floats(nn);
    bench_fill(in, nn, 1, 2, &a.seed);
    memset(out, 0, nn * sizeof(float));
    grid_ctx g = {in, out, a.n};
    double first = once(stencil5, &g);
    check_stencil5("stencil5", in, out, a.n);
    bench_times t = {{0}, 0, 0};
    TIMED(a, t, stencil5(&g));
    bench_report("stencil5", first, &t, NULL);
}

/* ---------------------------------------------------------------- histogram */
typedef struct { const unsigned char *data; long n; unsigned *hist; } hist_ctx;

/* a private histogram per thread, added up at the end: how OpenMP code counts */
static void histogram(void *p) {
    hist_ctx *h = (hist_ctx *)p;
#pragma omp parallel
    {
        unsigned local[256] = {0};
#pragma omp for schedule(static)
        for (long i = 0; i < h->n; i++) local[h->data[i]]++;
        for (int b = 0; b < 256; b++) {
#pragma omp atomic
            h->hist[b] += local[b];
        }
    }
}

static void run_histogram(bench_args a) {
    unsigned char *data = (unsigned char *)bench_alloc(a.n);
    for (long i = 0; i < a.n; i++) data[i] = (unsigned char)(bench_next(&a.seed) >> 56);
    unsigned hist[256] = {0};
    hist_ctx h = {data, a.n, hist};
    double first = once(histogram, &h);
    check_histogram("histogram", data, a.n, hist, 1);
    bench_times t = {{0}, 0, 0};
    TIMED(a, t, histogram(&h));
    check_histogram("histogram", data, a.n, hist, 1 + t.count);
    bench_report("histogram", first, &t, NULL);
}

/* ---------------------------------------------------------------- Black-Scholes */
typedef struct { float *call, *put; const float *S, *X, *T; float R, V; long n; } bs_ctx;

static float cnd(float d) {
    const float A1 = 0.31938153f, A2 = -0.356563782f, A3 = 1.781477937f, A4 = -1.821255978f, A5 = 1.330274429f;
    const float RSQRT2PI = 0.39894228040143267794f;
    float K = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float c = RSQRT2PI * expf(-0.5f * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))));
    return d > 0 ? 1.0f - c : c;
}

static void black_scholes(void *p) {
    bs_ctx *b = (bs_ctx *)p;
    float R = b->R, V = b->V;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < b->n; i++) {
        float sqrtT = sqrtf(b->T[i]);
        float d1 = (logf(b->S[i] / b->X[i]) + (R + 0.5f * V * V) * b->T[i]) / (V * sqrtT);
        float d2 = d1 - V * sqrtT;
        float c1 = cnd(d1), c2 = cnd(d2);
        float expRT = expf(-R * b->T[i]);
        b->call[i] = b->S[i] * c1 - b->X[i] * expRT * c2;
        b->put[i] = b->X[i] * expRT * (1.0f - c2) - b->S[i] * (1.0f - c1);
    }
}

static void run_black_scholes(bench_args a) {
    float *S = floats(a.n), *X = floats(a.n), *T = floats(a.n), *call = floats(a.n), *put = floats(a.n);
    bench_fill(S, a.n, 5, 30, &a.seed);
    bench_fill(X, a.n, 1, 100, &a.seed);
    bench_fill(T, a.n, 0.25f, 10, &a.seed);
    poison(call, a.n);
    poison(put, a.n);
    bs_ctx b = {call, put, S, X, T, 0.02f, 0.30f, a.n};
    double first = once(black_scholes, &b);
    check_black_scholes("black_scholes", S, X, T, b.R, b.V, call, put, a.n);
    bench_times t = {{0}, 0, 0};
    TIMED(a, t, black_scholes(&b));
    bench_report("black_scholes", first, &t, NULL);
}

/* ---------------------------------------------------------------- empty parallel region */
/* fork + join of the OpenMP team per "launch", for scale beside the empty kernel's launch + synchronize */
static void run_empty(bench_args a) {
    volatile int sink = 0;
    double t0 = bench_now();
#pragma omp parallel
    { sink += 0; }
    double first = bench_now() - t0;
    bench_times t = {{0}, 0, 0};
    while (bench_more(&t, &a)) {
        t0 = bench_now();
        for (long i = 0; i < a.n; i++) {
#pragma omp parallel
            { sink += 0; }
        }
        double dt = bench_now() - t0;
        t.spent += dt;
        t.t[t.count++] = dt / a.n;
    }
    bench_report("empty", first, &t, NULL);
}

int main(int argc, char **argv) {
    const char *shape = "";
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "shape=", 6) == 0) shape = argv[i] + 6;
    bench_args a = bench_parse(argc, argv, 1L << 25);
    printf("threads %d\n", omp_get_max_threads());
    if (!strcmp(shape, "vec_add")) run_vec_add(shape, a, vec_add32);
    else if (!strcmp(shape, "vec_add64")) run_vec_add(shape, a, vec_add64);
    else if (!strcmp(shape, "saxpy")) run_saxpy(a);
    else if (!strcmp(shape, "reduce")) run_reduce(a, 0);
    else if (!strcmp(shape, "read_once")) run_reduce(a, 1);
    else if (!strcmp(shape, "sgemm")) run_sgemm(a);
    else if (!strcmp(shape, "transpose")) run_transpose(a);
    else if (!strcmp(shape, "stencil5")) run_stencil5(a);
    else if (!strcmp(shape, "histogram")) run_histogram(a);
    else if (!strcmp(shape, "black_scholes")) run_black_scholes(a);
    else if (!strcmp(shape, "empty")) run_empty(a);
    else bench_fail(shape, "unknown shape");
    return 0;
}
