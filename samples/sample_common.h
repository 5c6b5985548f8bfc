// Shared helpers for the samples: error-checking macros, a fixed-seed generator, element-wise
// comparisons that report the first mismatches, and the PASS/FAIL ending every sample uses.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <climits>
#include <cuda_runtime.h>

// Every runtime call is checked: a failure names the error (cudaGetErrorName) and ends with FAIL,
// so the last line of output is always PASS or FAIL.
#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t err_ = (call);                                                           \
        if (err_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,        \
                    cudaGetErrorName(err_), cudaGetErrorString(err_));                       \
            printf("error: %s returned %s\n", #call, cudaGetErrorName(err_));                \
            printf("FAIL\n");                                                                \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

// A launch is checked twice: the configuration (cudaGetLastError) and the execution (sync).
#define CHECK_LAUNCH()                                                                       \
    do {                                                                                     \
        CHECK(cudaGetLastError());                                                           \
        CHECK(cudaDeviceSynchronize());                                                      \
    } while (0)

// xorshift64*: the same sequence on every machine, so every run sees the same inputs.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed ? seed : 0x9E3779B97F4A7C15ull) {}
    uint64_t next() {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        return s * 0x2545F4914F6CDD1Dull;
    }
    uint32_t u32() { return (uint32_t)(next() >> 32); }
    // Uniform integer in [lo, hi].
    int range(int lo, int hi) { return lo + (int)(u32() % (uint32_t)(hi - lo + 1)); }
    // Uniform float in [lo, hi).
    float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((u32() >> 8) * (1.0 / 16777216.0)); }
    double uniform_d(double lo, double hi) { return lo + (hi - lo) * ((next() >> 11) * (1.0 / 9007199254740992.0)); }
};

static int g_failures = 0;

// Records one failed check and prints the first few so a FAIL is easy to diagnose.
static inline void report_mismatch(const char *what, long long i, const char *got, const char *want) {
    if (g_failures < 10) printf("mismatch %s[%lld]: got %s, want %s\n", what, i, got, want);
    g_failures++;
}

template <typename T> static inline void fmt_value(char *buf, T v);
template <> inline void fmt_value<int>(char *buf, int v) { sprintf(buf, "%d", v); }
template <> inline void fmt_value<unsigned>(char *buf, unsigned v) { sprintf(buf, "%u", v); }
template <> inline void fmt_value<long long>(char *buf, long long v) { sprintf(buf, "%lld", v); }
template <> inline void fmt_value<unsigned long long>(char *buf, unsigned long long v) { sprintf(buf, "%llu", v); }
template <> inline void fmt_value<float>(char *buf, float v) { sprintf(buf, "%.9g", v); }
template <> inline void fmt_value<double>(char *buf, double v) { sprintf(buf, "%.17g", v); }

// Exact comparison of every element.
template <typename T>
static int compare_exact(const char *what, const T *got, const T *want, size_t n) {
    int before = g_failures;
    for (size_t i = 0; i < n; i++) {
        if (!(got[i] == want[i])) {
            char a[64], b[64];
            fmt_value(a, got[i]); fmt_value(b, want[i]);
            report_mismatch(what, (long long)i, a, b);
        }
    }
    return g_failures - before;
}

// Comparison of every element within |got - want| <= atol + rtol * |want|.
template <typename T>
static int compare_close(const char *what, const T *got, const T *want, size_t n, double rtol, double atol) {
    int before = g_failures;
    for (size_t i = 0; i < n; i++) {
        double g = (double)got[i], w = (double)want[i];
        bool ok = (std::isnan(g) && std::isnan(w)) || (g == w) || std::fabs(g - w) <= atol + rtol * std::fabs(w);
        if (!ok) {
            char a[64], b[64];
            fmt_value(a, got[i]); fmt_value(b, want[i]);
            report_mismatch(what, (long long)i, a, b);
        }
    }
    return g_failures - before;
}

// A single scalar check with a message.
static inline void expect(bool ok, const char *msg) {
    if (!ok) { printf("check failed: %s\n", msg); g_failures++; }
}

// The last line of every sample; the exit code matches it.
static inline int finish() {
    if (g_failures == 0) { printf("PASS\n"); return 0; }
    printf("%d check(s) failed\nFAIL\n", g_failures);
    return 1;
}
