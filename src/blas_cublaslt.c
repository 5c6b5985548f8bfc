/* libcublasLt.so.13 of the BLAS front: every function of NVIDIA's libcublasLt.so.13 (src/cublas_exports.h),
 * forwarded, except cublasLtMatmul of plain layouts (column-major, no epilogue or scaling pointers, one
 * element type per operand pair), which the host BLAS computes in the stream's order when device memory is
 * host memory. The descriptors stay NVIDIA's: their attributes are read back through its library. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blas_front.h"

#define CUBLAS_FN(name)
#define CUBLASLT_FN(name) BLAS_TRAMPOLINE(name)
#include "cublas_exports.h"
#undef CUBLASLT_FN

/* Marks this library as ours, so that the search for NVIDIA's never takes it. */
__attribute__((visibility("default"))) int zl_blas_front(void) { return 1; }

static void ensure_loaded(void);

typedef void *desc_t;
typedef blas_status (*get_attr_fn)(desc_t, int, void *, size_t, size_t *);

enum { DESC_COMPUTE_TYPE = 0, DESC_SCALE_TYPE = 1, DESC_POINTER_MODE = 2, DESC_TRANSA = 3, DESC_TRANSB = 4,
       DESC_TRANSC = 5, DESC_EPILOGUE = 7, DESC_A_SCALE = 17, DESC_B_SCALE = 18, DESC_C_SCALE = 19,
       DESC_D_SCALE = 20, DESC_AMAX_D = 21, DESC_D_OUT_SCALE = 36, DESC_EMULATION = 38 };
enum { LAYOUT_TYPE = 0, LAYOUT_ORDER = 1, LAYOUT_ROWS = 2, LAYOUT_COLS = 3, LAYOUT_LD = 4, LAYOUT_BATCH = 5,
       LAYOUT_STRIDE = 6, LAYOUT_PLANE = 7 };
enum { EPILOGUE_DEFAULT = 1, ORDER_COL = 0 };

/* An attribute of NVIDIA's descriptor, zero-extended into *out; nonzero when it cannot be read. */
static int attr(void *getter, desc_t d, int which, void *out, size_t size) {
    size_t written = 0;
    memset(out, 0, size);
    return !getter || !d || ((get_attr_fn)getter)(d, which, out, size, &written) != BLAS_SUCCESS || written > size;
}

struct layout {
    uint32_t type;
    int32_t order, batch;
    uint64_t rows, cols;
    int64_t ld, stride, plane;
};

static int read_layout(desc_t d, struct layout *l) {
    void *g = real_cublasLtMatrixLayoutGetAttribute;
    memset(l, 0, sizeof *l);
    return attr(g, d, LAYOUT_TYPE, &l->type, 4) || attr(g, d, LAYOUT_ORDER, &l->order, 4) ||
           attr(g, d, LAYOUT_ROWS, &l->rows, 8) || attr(g, d, LAYOUT_COLS, &l->cols, 8) ||
           attr(g, d, LAYOUT_LD, &l->ld, 8) || attr(g, d, LAYOUT_BATCH, &l->batch, 4) ||
           attr(g, d, LAYOUT_STRIDE, &l->stride, 8) || attr(g, d, LAYOUT_PLANE, &l->plane, 8) ||
           l->order != ORDER_COL || l->plane != 0 || l->ld < (int64_t)(l->rows > 1 ? l->rows : 1) ||
           l->rows > 0x7fffffff || l->cols > 0x7fffffff || l->ld > 0x7fffffff || l->batch < 1;
}

/* The call as a GEMM job, or NULL when it is not plain. */
static struct gemm_job *plain_matmul(desc_t op, const void *alpha, const void *a, desc_t ad, const void *b,
                                     desc_t bd, const void *beta, const void *c, desc_t cd, void *d, desc_t dd) {
    void *g = real_cublasLtMatmulDescGetAttribute;
    int32_t compute, scale, mode, ta, tb, tc;
    uint32_t epilogue;
    void *ptrs[7];
    static const int scaling[7] = {DESC_A_SCALE, DESC_B_SCALE, DESC_C_SCALE, DESC_D_SCALE, DESC_AMAX_D,
                                   DESC_D_OUT_SCALE, DESC_EMULATION};
    if (attr(g, op, DESC_COMPUTE_TYPE, &compute, 4) || attr(g, op, DESC_SCALE_TYPE, &scale, 4) ||
        attr(g, op, DESC_POINTER_MODE, &mode, 4) || attr(g, op, DESC_TRANSA, &ta, 4) ||
        attr(g, op, DESC_TRANSB, &tb, 4) || attr(g, op, DESC_TRANSC, &tc, 4) ||
        attr(g, op, DESC_EPILOGUE, &epilogue, 4))
        return NULL;
    for (int i = 0; i < 7; i++)
        if (attr(g, op, scaling[i], &ptrs[i], sizeof ptrs[i]) || ptrs[i])
            return NULL;
    struct layout la, lb, lc, ld;
    if (read_layout(ad, &la) || read_layout(bd, &lb) || read_layout(cd, &lc) || read_layout(dd, &ld))
        return NULL;
    if (epilogue != EPILOGUE_DEFAULT || tc != OP_N || (mode != 0 && mode != 1) || la.type != lb.type ||
        lc.type != ld.type || !gemm_supported((int)la.type, (int)lc.type, scale, ta, tb))
        return NULL;
    uint64_t m = ld.rows, n = ld.cols, k = ta == OP_N ? la.cols : la.rows;
    if ((ta == OP_N ? la.rows : la.cols) != m || (tb == OP_N ? lb.rows : lb.cols) != k ||
        (tb == OP_N ? lb.cols : lb.rows) != n || lc.rows != m || lc.cols != n || la.batch != ld.batch ||
        lb.batch != ld.batch || lc.batch != ld.batch || !alpha || !beta || !a || !b || !d || (!c && m && n))
        return NULL;
    struct gemm_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    *j = (struct gemm_job){.type = (int)la.type, .ctype = (int)lc.type, .scale = scale, .ta = ta, .tb = tb,
                           .m = (int)m, .n = (int)n, .k = (int)k, .lda = (int)la.ld, .ldb = (int)lb.ld,
                           .ldc = (int)ld.ld, .stride_a = la.stride, .stride_b = lb.stride, .stride_c = ld.stride,
                           .batch = ld.batch, .a = a, .b = b, .c = d};
    if (c != d || lc.ld != ld.ld || lc.stride != ld.stride) {
        j->c_src = c;
        j->ldc_src = (int)lc.ld;
        j->stride_c_src = lc.stride;
    }
    if (mode == 1) {
        j->alpha_ptr = alpha;
        j->beta_ptr = beta;
    } else {
        memcpy(j->alpha, alpha, scalar_size(scale));
        memcpy(j->beta, beta, scalar_size(scale));
    }
    return j;
}

typedef blas_status (*matmul_fn)(void *, desc_t, const void *, const void *, desc_t, const void *, desc_t,
                                 const void *, const void *, desc_t, void *, desc_t, const void *, void *, size_t,
                                 blas_stream);
static blas_status own_cublasLtMatmul(void *lt, desc_t op, const void *alpha, const void *a, desc_t ad,
                                      const void *b, desc_t bd, const void *beta, const void *c, desc_t cd, void *d,
                                      desc_t dd, const void *algo, void *ws, size_t ws_size, blas_stream stream) {
    ensure_loaded();
    if (lt && blas_host_memory()) {
        /* a C that overlaps D without being it cannot be copied first: NVIDIA's kernels handle that */
        struct gemm_job *j = plain_matmul(op, alpha, a, ad, b, bd, beta, c, cd, d, dd);
        if (j && gemm_submit(j, stream, "cublasLtMatmul") == 0)
            return BLAS_SUCCESS;
        free(j);
    }
    matmul_fn f = real_cublasLtMatmul ? (matmul_fn)real_cublasLtMatmul : (matmul_fn)(void *)blas_missing;
    return f(lt, op, alpha, a, ad, b, bd, beta, c, cd, d, dd, algo, ws, ws_size, stream);
}

#define CUBLASLT_FN(name) {#name, &slot_##name, &real_##name, 0},
static struct blas_fn table[] = {
#include "cublas_exports.h"
};
#undef CUBLASLT_FN

static pthread_once_t loaded = PTHREAD_ONCE_INIT;
static void load_nvidia(void) {
    blas_load_real("libcublasLt.so.13", "ZLUDA_CUBLAS", table, sizeof table / sizeof table[0]);
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

__attribute__((constructor)) static void serve_matmul(void) { own("cublasLtMatmul", (void *)own_cublasLtMatmul); }
