/* The BLAS front through the shim, from C: every GEMM entry point it serves (random shapes, operations,
 * leading dimensions and scalars, poisoned outputs, every element against a double reference), device
 * pointer mode, stream order, cublasLtMatmul with D != C, and calls it forwards to NVIDIA's library. Prints
 * PASS/FAIL per case. Usage: blas_front SEED */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cublas_api.h declares cublasHgemm for C++ only (its __half type): the C ABI is a pointer per scalar */
cublasStatus_t cublasHgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                           const void *, int, const void *, int, const void *, void *, int);

static int failures;
static void verdict(const char *name, double err, double tol) {
    int ok = err <= tol;
    printf("%s %s err=%.3g tol=%.3g\n", ok ? "PASS" : "FAIL", name, err, tol);
    failures += !ok;
}
#define CHECK(x)                                                                       \
    do {                                                                               \
        int r_ = (int)(x);                                                             \
        if (r_) {                                                                      \
            printf("FAIL %s:%d %s -> %d\n", __FILE__, __LINE__, #x, r_);               \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static double rnd(void) { return (double)rand() / RAND_MAX * 2 - 1; }
static int irand(int lo, int hi) { return lo + rand() % (hi - lo + 1); }

static CUdeviceptr dev(size_t bytes) {
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, bytes ? bytes : 1));
    return p;
}
static CUdeviceptr upload(const void *h, size_t bytes) {
    CUdeviceptr p = dev(bytes);
    CHECK(cuMemcpyHtoD(p, h, bytes));
    return p;
}

/* element (i, j) of op(X) for a column-major X with leading dimension ld; complex: re/im from 2 doubles */
static void op_elem(const double *x, int ld, int op, int i, int j, int complex, double *re, double *im) {
    size_t at = op == 0 ? (size_t)j * ld + i : (size_t)i * ld + j;
    if (!complex) {
        *re = x[at];
        *im = 0;
        return;
    }
    *re = x[2 * at];
    *im = op == 2 ? -x[2 * at + 1] : x[2 * at + 1];
}

/* reference C = alpha op(A) op(B) + beta C0 in doubles; returns the max error relative to sum|terms| */
static double check_gemm(int complex, int ta, int tb, int m, int n, int k, const double *al, const double *a, int lda,
                         const double *b, int ldb, const double *be, const double *c0, const double *c, int ldc) {
    double worst = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double sr = 0, si = 0, mag = 0;
            for (int p = 0; p < k; p++) {
                double ar, ai, br, bi;
                op_elem(a, lda, ta, i, p, complex, &ar, &ai);
                op_elem(b, ldb, tb, p, j, complex, &br, &bi);
                sr += ar * br - ai * bi;
                si += ar * bi + ai * br;
                mag += sqrt((ar * ar + ai * ai) * (br * br + bi * bi));
            }
            size_t at = (size_t)j * ldc + i;
            double cr = complex ? c0[2 * at] : c0[at], ci = complex ? c0[2 * at + 1] : 0;
            double er = al[0] * sr - (complex ? al[1] * si : 0) + be[0] * cr - (complex ? be[1] * ci : 0);
            double ei = complex ? al[0] * si + al[1] * sr + be[0] * ci + be[1] * cr : 0;
            double gr = complex ? c[2 * at] : c[at], gi = complex ? c[2 * at + 1] : 0;
            /* complex scalars scale by their modulus: a small real part with a large imaginary one still
             * carries the rounding of the whole product */
            double scale = hypot(al[0], complex ? al[1] : 0) * mag + hypot(be[0], complex ? be[1] : 0) * hypot(cr, ci)
                           + 1e-30;
            double e = (fabs(gr - er) + fabs(gi - ei)) / scale;
            if (!(e <= worst))
                worst = isnan(e) ? INFINITY : e;
        }
    return worst;
}

static void fill(double *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = rnd();
}

/* cublas<S|D|C|Z>gemm_v2 with random shapes and ops: `t` 0 float, 1 double, 2 complex float, 3 complex double */
static void gemm_case(cublasHandle_t h, int t, int ta, int tb) {
    static const char *names[] = {"Sgemm", "Dgemm", "Cgemm", "Zgemm"};
    int complex = t >= 2, wide = t == 1 || t == 3, cw = complex ? 2 : 1;
    size_t es = (wide ? 8 : 4) * cw;
    int m = irand(1, 45), n = irand(1, 45), k = irand(1, 45);
    int lda = (ta ? k : m) + irand(0, 3), ldb = (tb ? n : k) + irand(0, 3), ldc = m + irand(0, 3);
    size_t na = (size_t)lda * (ta ? m : k) * cw, nb = (size_t)ldb * (tb ? k : n) * cw, nc = (size_t)ldc * n * cw;
    double *a = malloc(na * 8), *b = malloc(nb * 8), *c0 = malloc(nc * 8), *c = malloc(nc * 8), al[2], be[2];
    fill(a, na), fill(b, nb), fill(c0, nc), fill(al, 2), fill(be, 2);
    void *ha = malloc(na * 8), *hb = malloc(nb * 8), *hc = malloc(nc * 8);
    float alf[2] = {(float)al[0], (float)al[1]}, bef[2] = {(float)be[0], (float)be[1]};
    for (size_t i = 0; i < na; i++)
        wide ? (((double *)ha)[i] = a[i]) : (((float *)ha)[i] = (float)a[i], a[i] = ((float *)ha)[i]);
    for (size_t i = 0; i < nb; i++)
        wide ? (((double *)hb)[i] = b[i]) : (((float *)hb)[i] = (float)b[i], b[i] = ((float *)hb)[i]);
    for (size_t i = 0; i < nc; i++)
        wide ? (((double *)hc)[i] = c0[i]) : (((float *)hc)[i] = (float)c0[i], c0[i] = ((float *)hc)[i]);
    if (!wide)
        al[0] = alf[0], al[1] = alf[1], be[0] = bef[0], be[1] = bef[1];
    CUdeviceptr da = upload(ha, na / cw * es), db = upload(hb, nb / cw * es), dc = upload(hc, nc / cw * es);
    int r;
    switch (t) {
    case 0: r = cublasSgemm(h, ta, tb, m, n, k, alf, (float *)da, lda, (float *)db, ldb, bef, (float *)dc, ldc); break;
    case 1: r = cublasDgemm(h, ta, tb, m, n, k, al, (double *)da, lda, (double *)db, ldb, be, (double *)dc, ldc); break;
    case 2: r = cublasCgemm(h, ta, tb, m, n, k, (cuComplex *)alf, (cuComplex *)da, lda, (cuComplex *)db, ldb,
                            (cuComplex *)bef, (cuComplex *)dc, ldc); break;
    default: r = cublasZgemm(h, ta, tb, m, n, k, (cuDoubleComplex *)al, (cuDoubleComplex *)da, lda,
                             (cuDoubleComplex *)db, ldb, (cuDoubleComplex *)be, (cuDoubleComplex *)dc, ldc);
    }
    CHECK(r);
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(hc, dc, nc / cw * es));
    for (size_t i = 0; i < nc; i++)
        c[i] = wide ? ((double *)hc)[i] : ((float *)hc)[i];
    char name[64];
    snprintf(name, sizeof name, "%s_%c%c", names[t], "NTC"[ta], "NTC"[tb]);
    verdict(name, check_gemm(complex, ta, tb, m, n, k, al, a, lda, b, ldb, be, c0, c, ldc), wide ? 1e-12 : 1e-5);
    cuMemFree(da), cuMemFree(db), cuMemFree(dc);
    free(a), free(b), free(c0), free(c), free(ha), free(hb), free(hc);
}

static double bf16_val(unsigned short v) {
    unsigned int bits = (unsigned int)v << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static unsigned short bf16_of(double x) {   /* truncation: the reference uses the value kept */
    float f = (float)x;
    unsigned int bits;
    memcpy(&bits, &f, 4);
    return (unsigned short)(bits >> 16);
}

/* cublasHgemm and cublasGemmEx with half/bfloat16 operands (C in half, bfloat16 or float) */
static void narrow_case(cublasHandle_t h, const char *name, int type, int ctype, int hgemm) {
    int m = irand(1, 40), n = irand(1, 40), k = irand(1, 40), ta = irand(0, 1), tb = irand(0, 1);
    int lda = (ta ? k : m) + irand(0, 2), ldb = (tb ? n : k) + irand(0, 2), ldc = m + irand(0, 2);
    size_t na = (size_t)lda * (ta ? m : k), nb = (size_t)ldb * (tb ? k : n), nc = (size_t)ldc * n;
    double *a = malloc(na * 8), *b = malloc(nb * 8), *c0 = malloc(nc * 8), *c = malloc(nc * 8);
    unsigned short *ha = malloc(na * 2), *hb = malloc(nb * 2), *hc16 = malloc(nc * 2);
    float *hc32 = malloc(nc * 4);
    for (size_t i = 0; i < na; i++) {
        if (type == CUDA_R_16F) { _Float16 v = (_Float16)rnd(); memcpy(&ha[i], &v, 2); a[i] = v; }
        else { ha[i] = bf16_of(rnd()); a[i] = bf16_val(ha[i]); }
    }
    for (size_t i = 0; i < nb; i++) {
        if (type == CUDA_R_16F) { _Float16 v = (_Float16)rnd(); memcpy(&hb[i], &v, 2); b[i] = v; }
        else { hb[i] = bf16_of(rnd()); b[i] = bf16_val(hb[i]); }
    }
    for (size_t i = 0; i < nc; i++) {
        if (ctype == CUDA_R_32F) { hc32[i] = (float)rnd(); c0[i] = hc32[i]; }
        else if (ctype == CUDA_R_16F) { _Float16 v = (_Float16)rnd(); memcpy(&hc16[i], &v, 2); c0[i] = v; }
        else { hc16[i] = bf16_of(rnd()); c0[i] = bf16_val(hc16[i]); }
    }
    size_t cs = ctype == CUDA_R_32F ? 4 : 2;
    CUdeviceptr da = upload(ha, na * 2), db = upload(hb, nb * 2), dc = upload(cs == 4 ? (void *)hc32 : hc16, nc * cs);
    double al[2] = {rnd(), 0}, be[2] = {rnd(), 0};
    if (hgemm) {
        _Float16 a16 = (_Float16)al[0], b16 = (_Float16)be[0];
        al[0] = a16, be[0] = b16;
        CHECK(cublasHgemm(h, ta, tb, m, n, k, &a16, (void *)da, lda, (void *)db, ldb, &b16, (void *)dc, ldc));
    } else {
        float a32 = (float)al[0], b32 = (float)be[0];
        al[0] = a32, be[0] = b32;
        CHECK(cublasGemmEx(h, ta, tb, m, n, k, &a32, (void *)da, type, lda, (void *)db, type, ldb, &b32, (void *)dc,
                           ctype, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(cs == 4 ? (void *)hc32 : hc16, dc, nc * cs));
    for (size_t i = 0; i < nc; i++) {
        if (cs == 4) c[i] = hc32[i];
        else if (ctype == CUDA_R_16F) { _Float16 v; memcpy(&v, &hc16[i], 2); c[i] = v; }
        else c[i] = bf16_val(hc16[i]);
    }
    /* float accumulation, then one rounding to the output type */
    double tol = ctype == CUDA_R_32F ? 1e-5 : ctype == CUDA_R_16F ? 2e-3 : 1.6e-2;
    verdict(name, check_gemm(0, ta, tb, m, n, k, al, a, lda, b, ldb, be, c0, c, ldc), tol);
    cuMemFree(da), cuMemFree(db), cuMemFree(dc);
    free(a), free(b), free(c0), free(c), free(ha), free(hb), free(hc16), free(hc32);
}

/* strided and pointer-array batches of float GEMMs (GemmStridedBatchedEx, GemmBatchedEx,
 * SgemmStridedBatched), alpha/beta in device memory when device_scalars */
static void batch_case(cublasHandle_t h, const char *name, int how, int device_scalars) {
    int m = irand(1, 30), n = irand(1, 30), k = irand(1, 30), batch = irand(1, 5), ta = irand(0, 1), tb = irand(0, 1);
    int lda = (ta ? k : m) + 1, ldb = (tb ? n : k) + 2, ldc = m + 1;
    long long sa = (long long)lda * (ta ? m : k) + 3, sb = (long long)ldb * (tb ? k : n) + 1,
              sc = (long long)ldc * n + 2;
    size_t na = sa * batch, nb = sb * batch, nc = sc * batch;
    float *ha = malloc(na * 4), *hb = malloc(nb * 4), *hc = malloc(nc * 4);
    double *a = malloc(na * 8), *b = malloc(nb * 8), *c0 = malloc(nc * 8), *c = malloc(nc * 8);
    for (size_t i = 0; i < na; i++) ha[i] = (float)rnd(), a[i] = ha[i];
    for (size_t i = 0; i < nb; i++) hb[i] = (float)rnd(), b[i] = hb[i];
    for (size_t i = 0; i < nc; i++) hc[i] = (float)rnd(), c0[i] = hc[i];
    CUdeviceptr da = upload(ha, na * 4), db = upload(hb, nb * 4), dc = upload(hc, nc * 4);
    float sc2[2] = {(float)rnd(), (float)rnd()};
    double al[2] = {sc2[0], 0}, be[2] = {sc2[1], 0};
    CUdeviceptr dscal = upload(sc2, 8);
    const float *pa = device_scalars ? (const float *)dscal : &sc2[0], *pb = device_scalars ? (const float *)dscal + 1 : &sc2[1];
    CHECK(cublasSetPointerMode(h, device_scalars ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST));
    if (how == 0) {
        CHECK(cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, pa, (void *)da, CUDA_R_32F, lda, sa, (void *)db, CUDA_R_32F,
                                         ldb, sb, pb, (void *)dc, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT));
    } else if (how == 1) {
        CHECK(cublasSgemmStridedBatched(h, ta, tb, m, n, k, pa, (float *)da, lda, sa, (float *)db, ldb, sb, pb,
                                        (float *)dc, ldc, sc, batch));
    } else {
        CUdeviceptr arrays[3][8];
        for (int i = 0; i < batch; i++)
            arrays[0][i] = da + 4 * sa * i, arrays[1][i] = db + 4 * sb * i, arrays[2][i] = dc + 4 * sc * i;
        CUdeviceptr pa_ = upload(arrays[0], 8 * batch), pb_ = upload(arrays[1], 8 * batch), pc_ = upload(arrays[2], 8 * batch);
        CHECK(cublasGemmBatchedEx(h, ta, tb, m, n, k, pa, (const void *const *)pa_, CUDA_R_32F, lda,
                                  (const void *const *)pb_, CUDA_R_32F, ldb, pb, (void *const *)pc_, CUDA_R_32F, ldc,
                                  batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CHECK(cuCtxSynchronize());
        cuMemFree(pa_), cuMemFree(pb_), cuMemFree(pc_);
    }
    CHECK(cuCtxSynchronize());
    CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    CHECK(cuMemcpyDtoH(hc, dc, nc * 4));
    for (size_t i = 0; i < nc; i++) c[i] = hc[i];
    double worst = 0;
    for (int i = 0; i < batch; i++) {
        double e = check_gemm(0, ta, tb, m, n, k, al, a + sa * i, lda, b + sb * i, ldb, be, c0 + sc * i, c + sc * i, ldc);
        worst = e > worst || isnan(e) ? e : worst;
    }
    /* the gaps between batch members are untouched */
    for (int i = 0; i < batch; i++)
        for (long long p = (long long)ldc * n; p < sc; p++)
            if (hc[sc * i + p] != (float)c0[sc * i + p]) worst = INFINITY;
    verdict(name, worst, 1e-5);
    cuMemFree(da), cuMemFree(db), cuMemFree(dc), cuMemFree(dscal);
    free(ha), free(hb), free(hc), free(a), free(b), free(c0), free(c);
}

/* beta == 0: C is not read (NaN there must not leak), on a user stream, after an asynchronous upload and
 * before an asynchronous download, through the _64 entry point */
static void stream_case(cublasHandle_t h) {
    int m = irand(8, 64), n = irand(8, 64), k = irand(8, 64);
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    float *ha, *hb, *hc;
    CHECK(cuMemAllocHost((void **)&ha, na * 4));
    CHECK(cuMemAllocHost((void **)&hb, nb * 4));
    CHECK(cuMemAllocHost((void **)&hc, nc * 4));
    double *a = malloc(na * 8), *b = malloc(nb * 8), *c = malloc(nc * 8), *c0 = calloc(nc, 8);
    for (size_t i = 0; i < na; i++) ha[i] = (float)rnd(), a[i] = ha[i];
    for (size_t i = 0; i < nb; i++) hb[i] = (float)rnd(), b[i] = hb[i];
    for (size_t i = 0; i < nc; i++) hc[i] = NAN;
    CUdeviceptr da = dev(na * 4), db = dev(nb * 4), dc = upload(hc, nc * 4);
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cublasSetStream(h, (cudaStream_t)s));
    CHECK(cuMemcpyHtoDAsync(da, ha, na * 4, s));
    CHECK(cuMemcpyHtoDAsync(db, hb, nb * 4, s));
    float al = (float)rnd(), be = 0;
    double ald[2] = {al, 0}, bed[2] = {0, 0};
    CHECK(cublasSgemm_v2_64(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &al, (float *)da, m, (float *)db, k, &be,
                            (float *)dc, m));
    CHECK(cuMemcpyDtoHAsync(hc, dc, nc * 4, s));
    CHECK(cuStreamSynchronize(s));
    for (size_t i = 0; i < nc; i++) c[i] = hc[i];
    verdict("stream_beta0_64", check_gemm(0, 0, 0, m, n, k, ald, a, m, b, k, bed, c0, c, m), 1e-5);
    CHECK(cublasSetStream(h, 0));
    cuStreamDestroy(s);
    cuMemFree(da), cuMemFree(db), cuMemFree(dc);
    cuMemFreeHost(ha), cuMemFreeHost(hb), cuMemFreeHost(hc);
    free(a), free(b), free(c), free(c0);
}

/* cublasLtMatmul, D != C with its own leading dimension */
static void lt_case(void) {
    cublasLtHandle_t lt;
    CHECK(cublasLtCreate(&lt));
    int m = irand(1, 40), n = irand(1, 40), k = irand(1, 40);
    int lda = m + 1, ldb = k + 2, ldc = m + 3, ldd = m;
    size_t na = (size_t)lda * k, nb = (size_t)ldb * n, nc = (size_t)ldc * n, nd = (size_t)ldd * n;
    float *ha = malloc(na * 4), *hb = malloc(nb * 4), *hc = malloc(nc * 4), *hd = malloc(nd * 4);
    double *a = malloc(na * 8), *b = malloc(nb * 8), *c0 = malloc(nd * 8), *d = malloc(nd * 8);
    for (size_t i = 0; i < na; i++) ha[i] = (float)rnd(), a[i] = ha[i];
    for (size_t i = 0; i < nb; i++) hb[i] = (float)rnd(), b[i] = hb[i];
    for (size_t i = 0; i < nc; i++) hc[i] = (float)rnd();
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) c0[(size_t)j * ldd + i] = hc[(size_t)j * ldc + i];
    for (size_t i = 0; i < nd; i++) hd[i] = NAN;
    CUdeviceptr da = upload(ha, na * 4), db = upload(hb, nb * 4), dc = upload(hc, nc * 4), dd = upload(hd, nd * 4);
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ldl;
    CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, lda));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, ldb));
    CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc));
    CHECK(cublasLtMatrixLayoutCreate(&ldl, CUDA_R_32F, m, n, ldd));
    float al = (float)rnd(), be = (float)rnd();
    double ald[2] = {al, 0}, bed[2] = {be, 0};
    CHECK(cublasLtMatmul(lt, op, &al, (void *)da, la, (void *)db, lb, &be, (void *)dc, lc, (void *)dd, ldl, NULL, NULL,
                         0, 0));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(hd, dd, nd * 4));
    for (size_t i = 0; i < nd; i++) d[i] = hd[i];
    verdict("LtMatmul_D_not_C", check_gemm(0, 0, 0, m, n, k, ald, a, lda, b, ldb, bed, c0, d, ldd), 1e-5);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(ldl), cublasLtMatmulDescDestroy(op), cublasLtDestroy(lt);
    cuMemFree(da), cuMemFree(db), cuMemFree(dc), cuMemFree(dd);
    free(ha), free(hb), free(hc), free(hd), free(a), free(b), free(c0), free(d);
}

/* forwarded to NVIDIA's library: a BLAS-1 kernel (its PTX, JIT-compiled) and NVIDIA's answer to bad input */
static void forwarded_case(cublasHandle_t h) {
    int n = irand(100, 3000);
    float *hx = malloc(n * 4), r = -1;
    double ref = 0;
    for (int i = 0; i < n; i++) hx[i] = (float)rnd(), ref += (double)hx[i] * hx[i];
    CUdeviceptr dx = upload(hx, n * 4);
    CHECK(cublasSnrm2(h, n, (float *)dx, 1, &r));
    verdict("Snrm2_forwarded", fabs(r - sqrt(ref)) / sqrt(ref), 1e-5);
    float one = 1;
    int bad = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 4, 4, &one, (float *)dx, 4, (float *)dx, 4, &one,
                          (float *)dx, 4);
    printf("%s bad_m_answer %d\n", bad == CUBLAS_STATUS_INVALID_VALUE ? "PASS" : "FAIL", bad);
    failures += bad != CUBLAS_STATUS_INVALID_VALUE;
    cuMemFree(dx);
    free(hx);
}

int main(int argc, char **argv) {
    srand(argc > 1 ? (unsigned)atoi(argv[1]) : 1);
    CUdevice d;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&d, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, d));
    CHECK(cuCtxSetCurrent(ctx));
    cublasHandle_t h;
    CHECK(cublasCreate(&h));
    for (int t = 0; t < 4; t++)
        for (int ta = 0; ta < 2 + (t >= 2); ta++)
            gemm_case(h, t, ta, irand(0, 1 + (t >= 2)));
    narrow_case(h, "Hgemm", CUDA_R_16F, CUDA_R_16F, 1);
    narrow_case(h, "GemmEx_16F_to_32F", CUDA_R_16F, CUDA_R_32F, 0);
    narrow_case(h, "GemmEx_16BF_to_16BF", CUDA_R_16BF, CUDA_R_16BF, 0);
    batch_case(h, "GemmStridedBatchedEx", 0, 0);
    batch_case(h, "SgemmStridedBatched_device_scalars", 1, 1);
    batch_case(h, "GemmBatchedEx_device_scalars", 2, 1);
    stream_case(h);
    lt_case();
    if (argc > 2 && strcmp(argv[2], "forwarded") == 0)
        forwarded_case(h);
    CHECK(cublasDestroy(h));
    printf("failures %d\n", failures);
    return failures != 0;
}
