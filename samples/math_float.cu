// Single-precision math library on the device against the host's double-precision results, within
// the maximum ulp errors NVIDIA documents (CUDA C++ Programming Guide, "Mathematical Functions"),
// plus the fast intrinsics (__sinf, __cosf, __expf, __logf, __powf, __fdividef) within their
// documented absolute/relative bounds on their stated ranges.
#include "sample_common.h"

enum Fn { SIN, COS, TAN, EXP, EXP2, EXP10, LOG, LOG2, LOG10, LOG1P, EXPM1, POW, ERF, ERFC, SQRT, RSQRT,
          CBRT, ATAN2, ATAN, ASIN, ACOS, SINH, COSH, TANH, HYPOT, FMA, FMOD, FLOOR, CEIL, ROUND, TRUNC,
          FDIV, NFN };
static const char *names[NFN] = {"sinf", "cosf", "tanf", "expf", "exp2f", "exp10f", "logf", "log2f", "log10f",
    "log1pf", "expm1f", "powf", "erff", "erfcf", "sqrtf", "rsqrtf", "cbrtf", "atan2f", "atanf", "asinf", "acosf",
    "sinhf", "coshf", "tanhf", "hypotf", "fmaf", "fmodf", "floorf", "ceilf", "roundf", "truncf", "x/y"};
// Documented maximum ulp errors (full range, default compilation flags: IEEE sqrt and division).
static const int max_ulp[NFN] = {2, 2, 4, 2, 2, 2, 1, 1, 2, 1, 1, 4, 2, 4, 0, 2, 1, 3, 2, 2, 2, 3, 2, 2, 3, 0, 0, 0,
                                 0, 0, 0, 0};

__global__ void eval(const float *x, const float *y, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = x[i], b = y[i];
    float *o = out + (size_t)i * NFN;
    o[SIN] = sinf(a); o[COS] = cosf(a); o[TAN] = tanf(a);
    o[EXP] = expf(b); o[EXP2] = exp2f(b); o[EXP10] = exp10f(b * 0.25f);
    float p = fabsf(a) + 1e-3f;
    o[LOG] = logf(p); o[LOG2] = log2f(p); o[LOG10] = log10f(p); o[LOG1P] = log1pf(p); o[EXPM1] = expm1f(b);
    o[POW] = powf(p, b * 0.5f);
    o[ERF] = erff(b); o[ERFC] = erfcf(b * 0.25f);
    o[SQRT] = sqrtf(p); o[RSQRT] = rsqrtf(p); o[CBRT] = cbrtf(a);
    o[ATAN2] = atan2f(a, b); o[ATAN] = atanf(a); o[ASIN] = asinf(b / 20.0f); o[ACOS] = acosf(b / 20.0f);
    o[SINH] = sinhf(b * 0.25f); o[COSH] = coshf(b * 0.25f); o[TANH] = tanhf(b * 0.25f);
    o[HYPOT] = hypotf(a, b); o[FMA] = fmaf(a, b, p); o[FMOD] = fmodf(a, b + 30.0f);
    o[FLOOR] = floorf(a); o[CEIL] = ceilf(a); o[ROUND] = roundf(a * 4.0f); o[TRUNC] = truncf(a);
    o[FDIV] = a / (b + 30.0f);
}

enum Fast { FSIN, FCOS, FEXP, FLOG, FPOW, FDIVF, NFAST };
static const char *fast_names[NFAST] = {"__sinf", "__cosf", "__expf", "__logf", "__powf", "__fdividef"};

__global__ void eval_fast(const float *x, const float *y, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = x[i], b = y[i];
    float s = a * (3.14159265f / 100.0f);  // [-pi, pi]: the range the __sinf bound holds on
    float *o = out + (size_t)i * NFAST;
    o[FSIN] = __sinf(s); o[FCOS] = __cosf(s); o[FEXP] = __expf(b * 0.25f);
    float p = fabsf(a) / 50.0f + 0.5f;  // [0.5, 2.5]
    o[FLOG] = __logf(p); o[FPOW] = __powf(p, b * 0.1f); o[FDIVF] = __fdividef(a, b + 30.0f);
}

static double ulp_of(float r) {
    float a = fabsf(r);
    if (a < 1.1754944e-38f) return 1.4e-45;
    return (double)(nextafterf(a, INFINITY) - a);
}

int main() {
    const int n = 1 << 14;
    float *x = new float[n], *y = new float[n];
    Rng rng(19);
    for (int i = 0; i < n; i++) { x[i] = rng.uniform(-100.0f, 100.0f); y[i] = rng.uniform(-20.0f, 20.0f); }
    // A few special points on every function.
    x[0] = 0.0f; y[0] = 0.0f; x[1] = 1.0f; y[1] = 1.0f; x[2] = -1.0f; y[2] = -1.0f; x[3] = 3.14159265f; y[3] = 0.5f;
    float *dx, *dy, *dout, *dfast;
    CHECK(cudaMalloc(&dx, n * sizeof(float))); CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMalloc(&dout, (size_t)n * NFN * sizeof(float)));
    CHECK(cudaMalloc(&dfast, (size_t)n * NFAST * sizeof(float)));
    CHECK(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dout, 0xFF, (size_t)n * NFN * sizeof(float)));
    CHECK(cudaMemset(dfast, 0xFF, (size_t)n * NFAST * sizeof(float)));
    eval<<<n / 128, 128>>>(dx, dy, dout, n);
    CHECK(cudaGetLastError());
    eval_fast<<<n / 128, 128>>>(dx, dy, dfast, n);
    CHECK_LAUNCH();
    float *out = new float[(size_t)n * NFN], *fast = new float[(size_t)n * NFAST];
    CHECK(cudaMemcpy(out, dout, (size_t)n * NFN * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(fast, dfast, (size_t)n * NFAST * sizeof(float), cudaMemcpyDeviceToHost));

    double worst[NFN] = {0};
    for (int i = 0; i < n; i++) {
        double a = x[i], b = y[i], p = fabsf(x[i]) + 1e-3f;
        float bq = y[i] * 0.25f, bh = y[i] * 0.5f, b20 = y[i] / 20.0f, b30 = y[i] + 30.0f;
        double r[NFN];
        r[SIN] = sin(a); r[COS] = cos(a); r[TAN] = tan(a);
        r[EXP] = exp(b); r[EXP2] = exp2(b); r[EXP10] = pow(10.0, (double)bq);
        r[LOG] = log(p); r[LOG2] = log2(p); r[LOG10] = log10(p); r[LOG1P] = log1p(p); r[EXPM1] = expm1(b);
        r[POW] = pow(p, (double)bh);
        r[ERF] = erf(b); r[ERFC] = erfc((double)bq);
        r[SQRT] = sqrt(p); r[RSQRT] = 1.0 / sqrt(p); r[CBRT] = cbrt(a);
        r[ATAN2] = atan2(a, b); r[ATAN] = atan(a); r[ASIN] = asin((double)b20); r[ACOS] = acos((double)b20);
        r[SINH] = sinh((double)bq); r[COSH] = cosh((double)bq); r[TANH] = tanh((double)bq);
        r[HYPOT] = hypot(a, b); r[FMA] = (double)fmaf(x[i], y[i], (float)p); r[FMOD] = fmod(a, (double)b30);
        r[FLOOR] = floor(a); r[CEIL] = ceil(a); r[ROUND] = round((double)(x[i] * 4.0f)); r[TRUNC] = trunc(a);
        r[FDIV] = a / (double)b30;
        for (int f = 0; f < NFN; f++) {
            float g = out[(size_t)i * NFN + f];
            float want = (float)r[f];
            // Error measured against the exact result, in ulps of the correctly rounded float;
            // a correctly rounded function may be up to 0.5 ulp off the exact value.
            double err = fabs((double)g - r[f]) / ulp_of(want);
            if (std::isnan(g) || err > max_ulp[f] + 0.5) {
                char gs[64], ws[64];
                sprintf(gs, "%.9g (%.1f ulp)", g, err);
                sprintf(ws, "%.9g (max %d ulp) for x=%.9g y=%.9g", want, max_ulp[f], x[i], y[i]);
                report_mismatch(names[f], i, gs, ws);
            }
            if (err > worst[f]) worst[f] = err;
        }
        double fr[NFAST], s = (double)(x[i] * (3.14159265f / 100.0f)), pf = (double)(fabsf(x[i]) / 50.0f + 0.5f);
        fr[FSIN] = sin(s); fr[FCOS] = cos(s); fr[FEXP] = exp((double)bq); fr[FLOG] = log(pf);
        fr[FPOW] = pow(pf, (double)(y[i] * 0.1f)); fr[FDIVF] = a / (double)b30;
        for (int f = 0; f < NFAST; f++) {
            double g = fast[(size_t)i * NFAST + f], w = fr[f];
            // Documented bounds: __sinf/__cosf 2^-21.41 absolute on [-pi, pi], __logf 2^-21.41
            // absolute on [0.5, 2]; __expf/__powf/__fdividef a few ulps relative (taken as 2^-18 here,
            // since __powf's bound grows with the exponent).
            double tol = (f == FSIN || f == FCOS || (f == FLOG && pf <= 2.0)) ? 3.6e-7 + 1e-7
                         : fabs(w) * 4e-6 + 1e-30;
            if (f == FLOG && pf > 2.0) tol = fabs(w) * 4e-6 + 3.6e-7;
            if (!(fabs(g - w) <= tol)) {
                char gs[64], ws[64];
                sprintf(gs, "%.9g", g);
                sprintf(ws, "%.9g (tol %.3g)", w, tol);
                report_mismatch(fast_names[f], i, gs, ws);
            }
        }
    }
    printf("worst errors (ulp):");
    for (int f = 0; f < NFN; f++) if (worst[f] > 0.5) printf(" %s=%.2f", names[f], worst[f]);
    printf("\n");
    CHECK(cudaFree(dx)); CHECK(cudaFree(dy)); CHECK(cudaFree(dout)); CHECK(cudaFree(dfast));
    return finish();
}
