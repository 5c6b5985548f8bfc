/* scripts/bench_cpu's harness, shared by the CUDA programs (host side) and the native C program: arguments,
   inputs from a seed, the clock, and the one machine-readable line each run prints. C, so both compile it. */
#ifndef BENCH_H
#define BENCH_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* `key=value` arguments: n (problem size), reps and min_time (timed runs go on until both that many are done
   and that many seconds are spent: on a busy machine the best of many short runs is the one nobody
   interrupted), budget (seconds after which they stop, at least one done), seed (inputs). */
static inline double bench_arg(int argc, char **argv, const char *key, double fallback) {
    size_t k = strlen(key);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], key, k) == 0 && argv[i][k] == '=') return atof(argv[i] + k + 1);
    return fallback;
}

typedef struct {
    long n;
    int reps;
    double min_time, budget;
    uint64_t seed;
} bench_args;

static inline bench_args bench_parse(int argc, char **argv, long default_n) {
    bench_args a;
    a.n = (long)bench_arg(argc, argv, "n", (double)default_n);
    a.reps = (int)bench_arg(argc, argv, "reps", 5);
    a.min_time = bench_arg(argc, argv, "min_time", 0.0);
    a.budget = bench_arg(argc, argv, "budget", 5.0);
    a.seed = (uint64_t)bench_arg(argc, argv, "seed", 12345);
    if (a.reps < 1) a.reps = 1;
    return a;
}

/* splitmix64: inputs that both programs of a row regenerate from the same seed */
static inline uint64_t bench_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void bench_fill(float *x, long n, float lo, float hi, uint64_t *seed) {
    for (long i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)((bench_next(seed) >> 40) * 0x1p-24);
}

static inline void *bench_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("FAIL cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

/* Prints the FAIL line scripts/bench_cpu shows for the row and ends the program. */
static inline void bench_fail(const char *shape, const char *fmt, ...) {
    va_list ap;
    printf("FAIL shape=%s ", shape);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(1);
}

/* Timed runs: best and median of the runs made before the budget ran out. */
typedef struct {
    double t[1024];
    int count;
    double spent;
} bench_times;

static inline int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline int bench_more(const bench_times *t, const bench_args *a) {
    if (t->count == 0) return 1;
    if (t->count >= 1024 || t->spent >= a->budget) return 0;
    return t->count < a->reps || t->spent < a->min_time;
}

static inline void bench_add(bench_times *t, double dt) {
    t->t[t->count++] = dt;
    t->spent += dt;
}

/* The line scripts/bench_cpu reads. first_s: the warm-up run (for a CUDA program with an empty kernel
   cache: module load and compile included). */
static inline void bench_report(const char *shape, double first_s, bench_times *t, const char *extra) {
    qsort(t->t, t->count, sizeof t->t[0], bench_cmp);
    printf("RESULT shape=%s first_s=%.9g best_s=%.9g median_s=%.9g runs=%d%s%s\n", shape, first_s, t->t[0],
           t->t[t->count / 2], t->count, extra ? " " : "", extra ? extra : "");
    fflush(stdout);
}

#endif
