/* libcublas.so.13 of the BLAS front: every function of NVIDIA's libcublas.so.13 (src/cublas_exports.h),
 * forwarded to it, except the GEMMs below, which the host BLAS computes in the handle's stream order when
 * device memory is host memory and their arguments are plain and valid. Anything else, invalid arguments
 * included, goes to NVIDIA's function, so every answer but the arithmetic is NVIDIA's. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blas_front.h"

#define CUBLASLT_FN(name)
#define CUBLAS_FN(name) BLAS_TRAMPOLINE(name)
#include "cublas_exports.h"
#undef CUBLAS_FN

/* Marks this library as ours, so that the search for NVIDIA's never takes it. */
__attribute__((visibility("default"))) int zl_blas_front(void) { return 1; }

static void ensure_loaded(void);

/* NVIDIA's function `name` of type `fn`, or the answer of a missing library */
#define REAL(name, fn) (real_##name ? (fn)real_##name : (fn)(void *)blas_missing)

typedef void *handle_t;
typedef blas_status (*get_stream_fn)(handle_t, blas_stream *);
typedef blas_status (*get_pointer_mode_fn)(handle_t, int *);

/* The handle's stream and pointer mode, as NVIDIA's library keeps them; nonzero if it cannot say. */
static int handle_state(handle_t h, blas_stream *stream, int *device_scalars) {
    int mode = 0;
    if (!h || !real_cublasGetStream_v2 || !real_cublasGetPointerMode_v2)
        return -1;
    if (REAL(cublasGetStream_v2, get_stream_fn)(h, stream) != BLAS_SUCCESS ||
        REAL(cublasGetPointerMode_v2, get_pointer_mode_fn)(h, &mode) != BLAS_SUCCESS)
        return -1;
    *device_scalars = mode == 1;      /* CUBLAS_POINTER_MODE_DEVICE */
    return 0;
}

static int64_t rows_of(int op, int64_t m, int64_t k) { return op == OP_N ? m : k; }

/* The dimensions BLAS accepts (otherwise NVIDIA's library answers the error). */
static int plain(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                 int64_t batch) {
    if (m < 0 || n < 0 || k < 0 || batch < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX ||
        ldb > INT_MAX || ldc > INT_MAX || batch > INT_MAX)
        return 0;
    int64_t ra = rows_of(ta, m, k), rb = rows_of(tb, k, n);
    return lda >= (ra > 1 ? ra : 1) && ldb >= (rb > 1 ? rb : 1) && ldc >= (m > 1 ? m : 1);
}

/* scale type of a cublasComputeType_t for elements of cudaDataType `type` */
static int scale_of(int compute, int type) {
    int complex = type == C_32F || type == C_64F;
    switch (compute) {
    case COMPUTE_16F: case COMPUTE_16F_PEDANTIC:
        return R_16F;
    case COMPUTE_32F: case COMPUTE_32F_PEDANTIC: case COMPUTE_32F_FAST_16F: case COMPUTE_32F_FAST_16BF:
    case COMPUTE_32F_FAST_TF32:
        return complex ? C_32F : R_32F;
    case COMPUTE_64F: case COMPUTE_64F_PEDANTIC:
        return complex ? C_64F : R_64F;
    default:
        return -1;
    }
}

/* Queues one GEMM call natively: 0 when queued, else nonzero (the caller forwards it). */
static int native_gemm(const char *fn, handle_t h, int type, int ctype, int scale, int ta, int tb, int64_t m, int64_t n,
                       int64_t k, const void *alpha, const void *a, int64_t lda, int64_t sa, const void *b,
                       int64_t ldb, int64_t sb, const void *beta, void *c, int64_t ldc, int64_t sc, int64_t batch,
                       const void *const *aa, const void *const *ba, void *const *ca) {
    blas_stream stream;
    int device_scalars;
    ensure_loaded();        /* the real functions this and the caller's forwarding need */
    if (!blas_host_memory() || !gemm_supported(type, ctype, scale, ta, tb) ||
        !plain(ta, tb, m, n, k, lda, ldb, ldc, batch) || !alpha || !beta || handle_state(h, &stream, &device_scalars))
        return -1;
    if (aa ? (!ba || !ca) : (!a || !b || !c))
        return -1;
    struct gemm_job *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    *j = (struct gemm_job){.type = type, .ctype = ctype, .scale = scale, .ta = ta, .tb = tb, .m = (int)m,
                           .n = (int)n, .k = (int)k, .lda = (int)lda, .ldb = (int)ldb, .ldc = (int)ldc,
                           .stride_a = sa, .stride_b = sb, .stride_c = sc, .batch = (int)batch, .a = a, .b = b,
                           .c = c, .a_array = aa, .b_array = ba, .c_array = ca};
    if (device_scalars) {
        j->alpha_ptr = alpha;
        j->beta_ptr = beta;
    } else {
        memcpy(j->alpha, alpha, scalar_size(scale));
        memcpy(j->beta, beta, scalar_size(scale));
    }
    if (gemm_submit(j, stream, fn) != 0) {
        free(j);
        return -1;
    }
    return 0;
}

/* --- the typed entry points: 32-bit and _64 forms -------------------------------------------------------- */

#define GEMM_TYPED(NAME, T, TYPE)                                                                              \
    typedef blas_status (*NAME##_fn)(handle_t, int, int, int, int, int, const T *, const T *, int, const T *, \
                                     int, const T *, T *, int);                                               \
    static blas_status own_##NAME(handle_t h, int ta, int tb, int m, int n, int k, const T *al, const T *a,    \
                                  int lda, const T *b, int ldb, const T *be, T *c, int ldc) {                \
        if (native_gemm(#NAME, h, TYPE, TYPE, TYPE, ta, tb, m, n, k, al, a, lda, 0, b, ldb, 0, be, c, ldc, 0, 1,    \
                        NULL, NULL, NULL) == 0)                                                               \
            return BLAS_SUCCESS;                                                                              \
        return REAL(NAME, NAME##_fn)(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);                  \
    }                                                                                                         \
    typedef blas_status (*NAME##_64_fn)(handle_t, int, int, int64_t, int64_t, int64_t, const T *, const T *,   \
                                        int64_t, const T *, int64_t, const T *, T *, int64_t);                \
    static blas_status own_##NAME##_64(handle_t h, int ta, int tb, int64_t m, int64_t n, int64_t k,            \
                                       const T *al, const T *a, int64_t lda, const T *b, int64_t ldb,          \
                                       const T *be, T *c, int64_t ldc) {                                      \
        if (native_gemm(#NAME "_64", h, TYPE, TYPE, TYPE, ta, tb, m, n, k, al, a, lda, 0, b, ldb, 0, be, c, ldc, 0, 1,    \
                        NULL, NULL, NULL) == 0)                                                               \
            return BLAS_SUCCESS;                                                                              \
        return REAL(NAME##_64, NAME##_64_fn)(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);          \
    }

typedef struct { float x, y; } cfloat;
typedef struct { double x, y; } cdouble;
typedef uint16_t half;
GEMM_TYPED(cublasSgemm_v2, float, R_32F)
GEMM_TYPED(cublasDgemm_v2, double, R_64F)
GEMM_TYPED(cublasCgemm_v2, cfloat, C_32F)
GEMM_TYPED(cublasZgemm_v2, cdouble, C_64F)
GEMM_TYPED(cublasHgemm, half, R_16F)

#define GEMM_STRIDED(NAME, T, TYPE, I)                                                                         \
    typedef blas_status (*NAME##_fn)(handle_t, int, int, I, I, I, const T *, const T *, I, long long,          \
                                     const T *, I, long long, const T *, T *, I, long long, I);               \
    static blas_status own_##NAME(handle_t h, int ta, int tb, I m, I n, I k, const T *al, const T *a, I lda,   \
                                  long long sa, const T *b, I ldb, long long sb, const T *be, T *c, I ldc,     \
                                  long long sc, I batch) {                                                     \
        if (native_gemm(#NAME, h, TYPE, TYPE, TYPE, ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc,      \
                        batch, NULL, NULL, NULL) == 0)                                                        \
            return BLAS_SUCCESS;                                                                              \
        return REAL(NAME, NAME##_fn)(h, ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc, batch); \
    }

GEMM_STRIDED(cublasSgemmStridedBatched, float, R_32F, int)
GEMM_STRIDED(cublasDgemmStridedBatched, double, R_64F, int)
GEMM_STRIDED(cublasCgemmStridedBatched, cfloat, C_32F, int)
GEMM_STRIDED(cublasZgemmStridedBatched, cdouble, C_64F, int)
GEMM_STRIDED(cublasHgemmStridedBatched, half, R_16F, int)
GEMM_STRIDED(cublasSgemmStridedBatched_64, float, R_32F, int64_t)
GEMM_STRIDED(cublasDgemmStridedBatched_64, double, R_64F, int64_t)

#define GEMM_BATCHED(NAME, T, TYPE, I)                                                                         \
    typedef blas_status (*NAME##_fn)(handle_t, int, int, I, I, I, const T *, const T *const *, I,              \
                                     const T *const *, I, const T *, T *const *, I, I);                        \
    static blas_status own_##NAME(handle_t h, int ta, int tb, I m, I n, I k, const T *al, const T *const *a,   \
                                  I lda, const T *const *b, I ldb, const T *be, T *const *c, I ldc, I batch) { \
        if (native_gemm(#NAME, h, TYPE, TYPE, TYPE, ta, tb, m, n, k, al, NULL, lda, 0, NULL, ldb, 0, be, NULL, ldc,   \
                        0, batch, (const void *const *)a, (const void *const *)b, (void *const *)c) == 0)     \
            return BLAS_SUCCESS;                                                                              \
        return REAL(NAME, NAME##_fn)(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, batch);            \
    }

GEMM_BATCHED(cublasSgemmBatched, float, R_32F, int)
GEMM_BATCHED(cublasDgemmBatched, double, R_64F, int)
GEMM_BATCHED(cublasCgemmBatched, cfloat, C_32F, int)
GEMM_BATCHED(cublasZgemmBatched, cdouble, C_64F, int)

/* --- the mixed-precision ones (cublasGemmEx and its batches) -------------------------------------------- */

typedef blas_status (*gemm_ex_fn)(handle_t, int, int, int, int, int, const void *, const void *, int, int,
                                  const void *, int, int, const void *, void *, int, int, int, int);
static blas_status own_cublasGemmEx(handle_t h, int ta, int tb, int m, int n, int k, const void *al,
                                    const void *a, int at, int lda, const void *b, int bt, int ldb,
                                    const void *be, void *c, int ct, int ldc, int compute, int algo) {
    if (at == bt && native_gemm(__func__ + 4, h, at, ct, scale_of(compute, at), ta, tb, m, n, k, al, a, lda, 0, b, ldb, 0, be,
                                c, ldc, 0, 1, NULL, NULL, NULL) == 0)
        return BLAS_SUCCESS;
    return REAL(cublasGemmEx, gemm_ex_fn)(h, ta, tb, m, n, k, al, a, at, lda, b, bt, ldb, be, c, ct, ldc,
                                           compute, algo);
}

typedef blas_status (*gemm_ex64_fn)(handle_t, int, int, int64_t, int64_t, int64_t, const void *, const void *,
                                    int, int64_t, const void *, int, int64_t, const void *, void *, int, int64_t,
                                    int, int);
static blas_status own_cublasGemmEx_64(handle_t h, int ta, int tb, int64_t m, int64_t n, int64_t k,
                                       const void *al, const void *a, int at, int64_t lda, const void *b, int bt,
                                       int64_t ldb, const void *be, void *c, int ct, int64_t ldc, int compute,
                                       int algo) {
    if (at == bt && native_gemm(__func__ + 4, h, at, ct, scale_of(compute, at), ta, tb, m, n, k, al, a, lda, 0, b, ldb, 0, be,
                                c, ldc, 0, 1, NULL, NULL, NULL) == 0)
        return BLAS_SUCCESS;
    return REAL(cublasGemmEx_64, gemm_ex64_fn)(h, ta, tb, m, n, k, al, a, at, lda, b, bt, ldb, be, c, ct, ldc,
                                                compute, algo);
}

typedef blas_status (*gemm_batched_ex_fn)(handle_t, int, int, int, int, int, const void *, const void *const *,
                                          int, int, const void *const *, int, int, const void *, void *const *,
                                          int, int, int, int, int);
static blas_status own_cublasGemmBatchedEx(handle_t h, int ta, int tb, int m, int n, int k, const void *al,
                                           const void *const *a, int at, int lda, const void *const *b, int bt,
                                           int ldb, const void *be, void *const *c, int ct, int ldc, int batch,
                                           int compute, int algo) {
    if (at == bt && native_gemm(__func__ + 4, h, at, ct, scale_of(compute, at), ta, tb, m, n, k, al, NULL, lda, 0, NULL, ldb,
                                0, be, NULL, ldc, 0, batch, a, b, c) == 0)
        return BLAS_SUCCESS;
    return REAL(cublasGemmBatchedEx, gemm_batched_ex_fn)(h, ta, tb, m, n, k, al, a, at, lda, b, bt, ldb, be, c,
                                                          ct, ldc, batch, compute, algo);
}

typedef blas_status (*gemm_strided_ex_fn)(handle_t, int, int, int, int, int, const void *, const void *, int,
                                          int, long long, const void *, int, int, long long, const void *,
                                          void *, int, int, long long, int, int, int);
static blas_status own_cublasGemmStridedBatchedEx(handle_t h, int ta, int tb, int m, int n, int k,
                                                  const void *al, const void *a, int at, int lda, long long sa,
                                                  const void *b, int bt, int ldb, long long sb, const void *be,
                                                  void *c, int ct, int ldc, long long sc, int batch, int compute,
                                                  int algo) {
    if (at == bt && native_gemm(__func__ + 4, h, at, ct, scale_of(compute, at), ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb,
                                be, c, ldc, sc, batch, NULL, NULL, NULL) == 0)
        return BLAS_SUCCESS;
    return REAL(cublasGemmStridedBatchedEx, gemm_strided_ex_fn)(h, ta, tb, m, n, k, al, a, at, lda, sa, b, bt,
                                                                 ldb, sb, be, c, ct, ldc, sc, batch, compute, algo);
}

/* --- the table ------------------------------------------------------------------------------------------ */

#define CUBLAS_FN(name) {#name, &slot_##name, &real_##name, 0},
static struct blas_fn table[] = {
#include "cublas_exports.h"
};
#undef CUBLAS_FN

static pthread_once_t loaded = PTHREAD_ONCE_INIT;
static void load_nvidia(void) {
    blas_load_real("libcublas.so.13", "ZLUDA_CUBLAS", table, sizeof table / sizeof table[0]);
}
/* what the first call of any forwarded function runs (BLAS_LAZY_RESOLVER), and every own function first */
__attribute__((used)) static void ensure_loaded(void) { pthread_once(&loaded, load_nvidia); }
BLAS_LAZY_RESOLVER(ensure_loaded)

static void own(const char *name, void *fn) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0) {
            table[i].own = 1;
            *table[i].slot = fn;
        }
}

#define OWN(name) own(#name, (void *)own_##name);
__attribute__((constructor)) static void serve_gemms(void) {
    OWN(cublasSgemm_v2) OWN(cublasDgemm_v2) OWN(cublasCgemm_v2) OWN(cublasZgemm_v2) OWN(cublasHgemm)
    OWN(cublasSgemm_v2_64) OWN(cublasDgemm_v2_64) OWN(cublasCgemm_v2_64) OWN(cublasZgemm_v2_64) OWN(cublasHgemm_64)
    OWN(cublasSgemmStridedBatched) OWN(cublasDgemmStridedBatched) OWN(cublasCgemmStridedBatched)
    OWN(cublasZgemmStridedBatched) OWN(cublasHgemmStridedBatched) OWN(cublasSgemmStridedBatched_64)
    OWN(cublasDgemmStridedBatched_64) OWN(cublasSgemmBatched) OWN(cublasDgemmBatched) OWN(cublasCgemmBatched)
    OWN(cublasZgemmBatched) OWN(cublasGemmEx) OWN(cublasGemmEx_64) OWN(cublasGemmBatchedEx)
    OWN(cublasGemmStridedBatchedEx)
}
