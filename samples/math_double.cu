// Double-precision math library on the device against long-double (80-bit) host references, within
// NVIDIA's documented maximum ulp errors (measured against the exact value, so a correctly rounded
// result may be 0.5 ulp off); sqrt, fma, division, fmod and rounding functions must match exactly.
#include "sample_common.h"

enum Fn { SIN, COS, TAN, EXP, EXP2, LOG, LOG2, LOG10, LOG1P, EXPM1, POW, ERF, ERFC, SQRT, RSQRT, CBRT, ATAN2,
          ASIN, SINH, TANH, HYPOT, FMA, DIV, FMOD, FLOOR, RINT, LGAMMA, SINPI, NFN };
static const char *names[NFN] = {"sin", "cos", "tan", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "pow",
    "erf", "erfc", "sqrt", "rsqrt", "cbrt", "atan2", "asin", "sinh", "tanh", "hypot", "fma", "x/y", "fmod", "floor",
    "rint", "lgamma", "sinpi"};
// CUDA C++ Programming Guide, double-precision mathematical functions, maximum ulp error.
static const int max_ulp[NFN] = {2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 2, 2, 5, 0, 1, 1, 2, 2, 2, 1, 2, 0, 0, 0, 0, 0, 4, 1};

__global__ void eval(const double *x, const double *y, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double a = x[i], b = y[i], p = fabs(a) + 1e-3;
    double *o = out + (size_t)i * NFN;
    o[SIN] = sin(a); o[COS] = cos(a); o[TAN] = tan(a);
    o[EXP] = exp(b); o[EXP2] = exp2(b);
    o[LOG] = log(p); o[LOG2] = log2(p); o[LOG10] = log10(p); o[LOG1P] = log1p(p); o[EXPM1] = expm1(b);
    o[POW] = pow(p, b * 0.5);
    o[ERF] = erf(b * 0.25); o[ERFC] = erfc(b * 0.25);
    o[SQRT] = sqrt(p); o[RSQRT] = rsqrt(p); o[CBRT] = cbrt(a);
    o[ATAN2] = atan2(a, b); o[ASIN] = asin(b / 20.0);
    o[SINH] = sinh(b * 0.25); o[TANH] = tanh(b * 0.25);
    o[HYPOT] = hypot(a, b); o[FMA] = fma(a, b, p); o[DIV] = a / (b + 30.0); o[FMOD] = fmod(a, b + 30.0);
    o[FLOOR] = floor(a); o[RINT] = rint(a * 8.0);
    o[LGAMMA] = lgamma(p + 1.0); o[SINPI] = sinpi(b * 0.1);
}

// sin(pi x) with the argument reduced exactly (x - 2k, then reflection into [-1/2, 1/2]) so that the
// long-double product with pi stays accurate near the zeros of sinpi.
static long double sinpi_ref(double x) {
    double r = x - 2.0 * nearbyint(x * 0.5);
    if (r > 0.5) r = 1.0 - r;
    else if (r < -0.5) r = -1.0 - r;
    return sinl(3.14159265358979323846264338327950288L * r);
}

static double ulp_of(double r) {
    double a = fabs(r);
    if (a < 2.2250738585072014e-308) return 4.9e-324;
    return nextafter(a, INFINITY) - a;
}

int main() {
    const int n = 1 << 14;
    double *x = new double[n], *y = new double[n];
    Rng rng(20);
    for (int i = 0; i < n; i++) { x[i] = rng.uniform_d(-100.0, 100.0); y[i] = rng.uniform_d(-20.0, 20.0); }
    x[0] = 0.0; y[0] = 0.0; x[1] = 1.0; y[1] = 1.0; x[2] = -0.5; y[2] = -1.0;
    double *dx, *dy, *dout;
    CHECK(cudaMalloc(&dx, n * sizeof(double))); CHECK(cudaMalloc(&dy, n * sizeof(double)));
    CHECK(cudaMalloc(&dout, (size_t)n * NFN * sizeof(double)));
    CHECK(cudaMemcpy(dx, x, n * sizeof(double), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y, n * sizeof(double), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dout, 0xFF, (size_t)n * NFN * sizeof(double)));
    eval<<<n / 128, 128>>>(dx, dy, dout, n);
    CHECK_LAUNCH();
    double *out = new double[(size_t)n * NFN];
    CHECK(cudaMemcpy(out, dout, (size_t)n * NFN * sizeof(double), cudaMemcpyDeviceToHost));
    double worst[NFN] = {0};
    for (int i = 0; i < n; i++) {
        double a = x[i], b = y[i], p = fabs(a) + 1e-3;
        // The device rounds each argument expression to double first; so does the host.
        double bh = b * 0.5, bq = b * 0.25, b20 = b / 20.0, b30 = b + 30.0, a8 = a * 8.0, p1 = p + 1.0, b10 = b * 0.1;
        typedef long double L;
        L r[NFN];
        r[SIN] = sinl(a); r[COS] = cosl(a); r[TAN] = tanl(a);
        r[EXP] = expl(b); r[EXP2] = exp2l(b);
        r[LOG] = logl(p); r[LOG2] = log2l(p); r[LOG10] = log10l(p); r[LOG1P] = log1pl(p); r[EXPM1] = expm1l(b);
        r[POW] = powl(p, bh);
        r[ERF] = erfl(bq); r[ERFC] = erfcl(bq);
        r[SQRT] = sqrt(p); r[RSQRT] = 1.0L / sqrtl(p); r[CBRT] = cbrtl(a);
        r[ATAN2] = atan2l(a, b); r[ASIN] = asinl(b20);
        r[SINH] = sinhl(bq); r[TANH] = tanhl(bq);
        r[HYPOT] = hypotl(a, b); r[FMA] = fma(a, b, p); r[DIV] = (L)(a / b30); r[FMOD] = fmod(a, b30);
        r[FLOOR] = floor(a); r[RINT] = rint(a8);
        r[LGAMMA] = lgammal(p1); r[SINPI] = sinpi_ref(b10);
        for (int f = 0; f < NFN; f++) {
            double g = out[(size_t)i * NFN + f];
            double want = (double)r[f];
            double err = (double)fabsl((L)g - r[f]) / ulp_of(want);
            // lgamma's bound is absolute near its zeros (x = 1, 2): measure there in ulps of 1.0.
            if (f == LGAMMA && fabs(want) < 1.0) err = (double)fabsl((L)g - r[f]) / ulp_of(1.0);
            double limit = max_ulp[f] == 0 ? 0.0 : max_ulp[f] + 0.5;
            if (max_ulp[f] == 0) err = g == want ? 0.0 : fmax(err, 1.0);
            if (std::isnan(g) || err > limit) {
                char gs[64], ws[96];
                sprintf(gs, "%.17g (%.2f ulp)", g, err);
                sprintf(ws, "%.17g (max %d) x=%.17g y=%.17g", want, max_ulp[f], a, b);
                report_mismatch(names[f], i, gs, ws);
            }
            if (err > worst[f]) worst[f] = err;
        }
    }
    printf("worst errors (ulp):");
    for (int f = 0; f < NFN; f++) if (worst[f] > 0.5) printf(" %s=%.2f", names[f], worst[f]);
    printf("\n");
    CHECK(cudaFree(dx)); CHECK(cudaFree(dy)); CHECK(cudaFree(dout));
    return finish();
}
