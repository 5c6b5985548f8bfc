/* GEMMs of the BLAS front computed by the host BLAS: a job per call, run as a host function in the stream's
 * order; half and bfloat16 operands are widened to float for sgemm and C rounded back (nearest even). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_front.h"

enum { COL_MAJOR = 102, NO_TRANS = 111, TRANS = 112, CONJ_TRANS = 113 };

size_t scalar_size(int scale) {
    switch (scale) {
    case R_16F: return 2;
    case R_32F: return 4;
    case R_64F: case C_32F: return 8;
    case C_64F: return 16;
    default: return 0;
    }
}

int gemm_supported(int type, int ctype, int scale, int ta, int tb) {
    if (ta < OP_N || ta > OP_C || tb < OP_N || tb > OP_C || !host_blas())
        return 0;
    switch (type) {
    case R_32F: case R_64F: case C_32F: case C_64F:
        return ctype == type && scale == type;
    case R_16F:
        return (ctype == R_16F || ctype == R_32F) && (scale == R_32F || (scale == R_16F && ctype == R_16F));
    case R_16BF:
        return (ctype == R_16BF || ctype == R_32F) && scale == R_32F;
    default:
        return 0;
    }
}

/* --- narrow floats ----------------------------------------------------------------------------------- */

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | (man << 13);
    else if (exp)
        bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (man) {   /* subnormal: exact as a float */
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    } else
        bits = sign;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)                       /* NaN stays NaN (quiet) */
        return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff);
    if (ax >= 0x477ff000u)                      /* rounds past 65504: infinity */
        return sign | 0x7c00;
    if (ax < 0x38800000u) {                     /* subnormal half (or zero): round at 2^-24 */
        float a = fabsf(f) * 16777216.0f;       /* exact scaling; nearbyintf rounds to nearest even */
        return sign | (uint16_t)nearbyintf(a);
    }
    uint32_t r = ax + 0xfff + ((ax >> 13) & 1); /* round to nearest even at bit 13 */
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

static float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static float narrow_to_float(int type, uint16_t v) {
    return type == R_16F ? half_to_float(v) : bf16_to_float(v);
}

static uint16_t float_to_narrow(int type, float v) {
    return type == R_16F ? float_to_half(v) : float_to_bf16(v);
}

/* A rows x cols matrix of 16-bit elements with leading dimension ld, widened to a packed float copy. */
static float *widen(int type, const uint16_t *src, int rows, int cols, int ld) {
    float *out = malloc(sizeof(float) * (size_t)rows * (size_t)cols + 1);
    if (!out)
        return NULL;
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            out[(size_t)j * rows + i] = narrow_to_float(type, src[(size_t)j * ld + i]);
    return out;
}

/* --- running a job ----------------------------------------------------------------------------------- */

static int trans(int op) { return op == OP_N ? NO_TRANS : op == OP_T ? TRANS : CONJ_TRANS; }

static float scalar_f(const struct gemm_job *j, const unsigned char *v) {
    if (j->scale == R_16F) {
        uint16_t h;
        memcpy(&h, v, 2);
        return half_to_float(h);
    }
    float f;
    memcpy(&f, v, 4);
    return f;
}

static void narrow_gemm(const struct gemm_job *j, const struct host_blas *b, const void *a, const void *bm,
                        void *c, float alpha, float beta) {
    int ar = j->ta == OP_N ? j->m : j->k, ac = j->ta == OP_N ? j->k : j->m;
    int br = j->tb == OP_N ? j->k : j->n, bc = j->tb == OP_N ? j->n : j->k;
    float *fa = widen(j->type, a, ar, ac, j->lda), *fb = widen(j->type, bm, br, bc, j->ldb), *fc = NULL;
    if (fa && fb && j->ctype == R_32F) {
        b->sgemm(COL_MAJOR, trans(j->ta), trans(j->tb), j->m, j->n, j->k, alpha, fa, ar ? ar : 1, fb,
                 br ? br : 1, beta, c, j->ldc);
    } else if (fa && fb) {
        fc = beta == 0.0f ? calloc((size_t)j->m * j->n + 1, sizeof(float)) : widen(j->type, c, j->m, j->n, j->ldc);
        if (fc) {
            b->sgemm(COL_MAJOR, trans(j->ta), trans(j->tb), j->m, j->n, j->k, alpha, fa, ar ? ar : 1, fb,
                     br ? br : 1, beta, fc, j->m ? j->m : 1);
            uint16_t *out = c;
            for (int col = 0; col < j->n; col++)
                for (int row = 0; row < j->m; row++)
                    out[(size_t)col * j->ldc + row] = float_to_narrow(j->type, fc[(size_t)col * j->m + row]);
        }
    }
    free(fa);
    free(fb);
    free(fc);
}

static size_t elem_size(int type) {
    return type == R_16F || type == R_16BF ? 2 : scalar_size(type);
}

static void run_job(void *arg) {
    struct gemm_job *j = arg;
    const struct host_blas *b = host_blas();
    unsigned char alpha[16], beta[16];
    size_t ss = scalar_size(j->scale);
    memcpy(alpha, j->alpha_ptr ? j->alpha_ptr : j->alpha, ss);
    memcpy(beta, j->beta_ptr ? j->beta_ptr : j->beta, ss);
    size_t es = elem_size(j->type), ces = elem_size(j->ctype);
    for (int i = 0; i < j->batch && j->m > 0 && j->n > 0; i++) {
        const char *a = j->a_array ? j->a_array[i] : (const char *)j->a + (size_t)(i * j->stride_a) * es;
        const char *bm = j->b_array ? j->b_array[i] : (const char *)j->b + (size_t)(i * j->stride_b) * es;
        char *c = j->c_array ? j->c_array[i] : (char *)j->c + (size_t)(i * j->stride_c) * ces;
        int ta = trans(j->ta), tb = trans(j->tb);
        if (j->c_src) {
            const char *from = (const char *)j->c_src + (size_t)(i * j->stride_c_src) * ces;
            for (int col = 0; col < j->n; col++)
                memmove(c + (size_t)col * j->ldc * ces, from + (size_t)col * j->ldc_src * ces, (size_t)j->m * ces);
        }
        switch (j->type) {
        case R_32F: {
            float al, be;
            memcpy(&al, alpha, 4);
            memcpy(&be, beta, 4);
            b->sgemm(COL_MAJOR, ta, tb, j->m, j->n, j->k, al, (const float *)a, j->lda, (const float *)bm, j->ldb,
                     be, (float *)c, j->ldc);
            break;
        }
        case R_64F: {
            double al, be;
            memcpy(&al, alpha, 8);
            memcpy(&be, beta, 8);
            b->dgemm(COL_MAJOR, ta, tb, j->m, j->n, j->k, al, (const double *)a, j->lda, (const double *)bm,
                     j->ldb, be, (double *)c, j->ldc);
            break;
        }
        case C_32F:
            b->cgemm(COL_MAJOR, ta, tb, j->m, j->n, j->k, alpha, a, j->lda, bm, j->ldb, beta, c, j->ldc);
            break;
        case C_64F:
            b->zgemm(COL_MAJOR, ta, tb, j->m, j->n, j->k, alpha, a, j->lda, bm, j->ldb, beta, c, j->ldc);
            break;
        default:
            narrow_gemm(j, b, a, bm, c, scalar_f(j, alpha), scalar_f(j, beta));
        }
    }
    free(j);
}

int gemm_submit(struct gemm_job *job, blas_stream stream, const char *fn) {
    int m = job->m, n = job->n, k = job->k, batch = job->batch;
    if (blas_enqueue(stream, run_job, job) != 0)
        return -1;
    const char *trace = getenv("ZLUDA_TRACE");
    if (trace && strcmp(trace, "1") == 0)
        fprintf(stderr, "[zluda] %s: host BLAS, m=%d n=%d k=%d batch=%d\n", fn, m, n, k, batch);
    return 0;
}
