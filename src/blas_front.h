/* The BLAS front (libcublas.so.13 and libcublasLt.so.13 beside the shim): what its two libraries share.
 * Every function NVIDIA's libraries export is a trampoline that jumps through a slot: to NVIDIA's own
 * function, or for the GEMM entry points to ours, which computes with the host's BLAS when device memory is
 * host memory (the CPU backend) and forwards anything else. NVIDIA's types are restated here: no NVIDIA
 * header is needed to build. */
#ifndef ZLUDA_BLAS_FRONT_H
#define ZLUDA_BLAS_FRONT_H

#include <stddef.h>
#include <stdint.h>

typedef int blas_status;       /* cublasStatus_t */
enum { BLAS_SUCCESS = 0, BLAS_NOT_INITIALIZED = 1, BLAS_ALLOC_FAILED = 3 };
typedef void *blas_stream;     /* cudaStream_t, which is CUstream */

/* cudaDataType and cublasComputeType_t values the native path serves */
enum { R_32F = 0, R_64F = 1, R_16F = 2, C_32F = 4, C_64F = 5, R_16BF = 14 };
enum { COMPUTE_16F = 64, COMPUTE_16F_PEDANTIC = 65, COMPUTE_32F = 68, COMPUTE_32F_PEDANTIC = 69,
       COMPUTE_64F = 70, COMPUTE_64F_PEDANTIC = 71, COMPUTE_32F_FAST_16F = 74, COMPUTE_32F_FAST_16BF = 75,
       COMPUTE_32F_FAST_TF32 = 77 };
enum { OP_N = 0, OP_T = 1, OP_C = 2 };

/* One slot per exported function: `slot` is where the exported symbol jumps, `real` NVIDIA's function. */
struct blas_fn {
    const char *name;
    void **slot;
    void **real;
    int own;        /* served by the front: its slot keeps our function */
};

/* Exports `name` as a jump through slot_<name> (x86-64). The slot first holds resolve_<name>, which loads
 * NVIDIA's library through RESOLVER (BLAS_LAZY_RESOLVER) and jumps again: NVIDIA's libraries cost nothing
 * until a program calls one of their functions. */
#define BLAS_TRAMPOLINE(name)                                                                              \
    void resolve_##name(void);                                                                           \
    __attribute__((used)) static void *slot_##name = (void *)resolve_##name;                             \
    static void *real_##name;                                                                            \
    __asm__(".text\n.globl " #name "\n.type " #name ",@function\n" #name ":\n\tjmp *slot_" #name "(%rip)\n" \
            ".size " #name ", .-" #name "\n"                                                                \
            ".local resolve_" #name "\n.type resolve_" #name ",@function\nresolve_" #name ":\n"              \
            "\tlea slot_" #name "(%rip), %r11\n\tjmp blas_lazy_resolve\n");

/* blas_lazy_resolve: keeps every argument register (and %rax, the vector count of a variadic call), calls
 * `load` (void(void)) to fill the slots, and jumps through the slot whose address is in %r11. */
#define BLAS_LAZY_RESOLVER(load)                                                                           \
    __asm__(".text\n.local blas_lazy_resolve\n.type blas_lazy_resolve,@function\nblas_lazy_resolve:\n"     \
            "\tpush %rbp\n\tmov %rsp, %rbp\n\tsub $192, %rsp\n"                                              \
            "\tmov %rdi, 0(%rsp)\n\tmov %rsi, 8(%rsp)\n\tmov %rdx, 16(%rsp)\n\tmov %rcx, 24(%rsp)\n"          \
            "\tmov %r8, 32(%rsp)\n\tmov %r9, 40(%rsp)\n\tmov %rax, 48(%rsp)\n\tmov %r11, 56(%rsp)\n"          \
            "\tmovdqu %xmm0, 64(%rsp)\n\tmovdqu %xmm1, 80(%rsp)\n\tmovdqu %xmm2, 96(%rsp)\n"                  \
            "\tmovdqu %xmm3, 112(%rsp)\n\tmovdqu %xmm4, 128(%rsp)\n\tmovdqu %xmm5, 144(%rsp)\n"               \
            "\tmovdqu %xmm6, 160(%rsp)\n\tmovdqu %xmm7, 176(%rsp)\n"                                          \
            "\tcall " #load "\n"                                                                            \
            "\tmov 0(%rsp), %rdi\n\tmov 8(%rsp), %rsi\n\tmov 16(%rsp), %rdx\n\tmov 24(%rsp), %rcx\n"          \
            "\tmov 32(%rsp), %r8\n\tmov 40(%rsp), %r9\n\tmov 48(%rsp), %rax\n\tmov 56(%rsp), %r11\n"          \
            "\tmovdqu 64(%rsp), %xmm0\n\tmovdqu 80(%rsp), %xmm1\n\tmovdqu 96(%rsp), %xmm2\n"                  \
            "\tmovdqu 112(%rsp), %xmm3\n\tmovdqu 128(%rsp), %xmm4\n\tmovdqu 144(%rsp), %xmm5\n"               \
            "\tmovdqu 160(%rsp), %xmm6\n\tmovdqu 176(%rsp), %xmm7\n"                                          \
            "\tmov %rbp, %rsp\n\tpop %rbp\n\tjmp *(%r11)\n.size blas_lazy_resolve, .-blas_lazy_resolve\n");

int blas_missing(void);

/* Opens NVIDIA's library `soname` (env names its directory, or a file in it), resolves each table entry's
 * real function and points its slot there (an own function keeps its slot; without NVIDIA's library the
 * others answer blas_missing). Returns the handle or NULL. */
void *blas_load_real(const char *soname, const char *env, struct blas_fn *table, size_t n);

/* 1 when the process's CUDA driver is zluda-py's and its device memory is host memory (the CPU backend). */
int blas_host_memory(void);

/* Runs job(arg) in `stream`'s order (a host function on it): 0, or nonzero when it cannot be queued (the
 * stream is capturing a graph, or the driver refused), and then nothing ran. arg is freed after the job. */
int blas_enqueue(blas_stream stream, void (*job)(void *), void *arg);

/* The host BLAS (OpenBLAS: the scipy-openblas32 wheel, ZLUDA_BLAS, or the system's), column-major, 32-bit
 * integers; NULL members when none was found. */
struct host_blas {
    void (*sgemm)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);
    void (*dgemm)(int order, int ta, int tb, int m, int n, int k, double alpha, const double *a, int lda,
                  const double *b, int ldb, double beta, double *c, int ldc);
    void (*cgemm)(int order, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int lda,
                  const void *b, int ldb, const void *beta, void *c, int ldc);
    void (*zgemm)(int order, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int lda,
                  const void *b, int ldb, const void *beta, void *c, int ldc);
};
const struct host_blas *host_blas(void);

/* One GEMM (column-major, C = alpha op(A) op(B) + beta C) in any type the native path serves. `type` is
 * the element type of A, B and C (for 16F/16BF the C type may be R_32F: ctype), `scale` of alpha/beta. */
struct gemm_job {
    int type, ctype, scale;
    int ta, tb;
    int m, n, k, lda, ldb, ldc;
    int64_t stride_a, stride_b, stride_c;       /* elements between batch members (strided batches) */
    int batch;
    const void *a, *b;
    void *c;
    const void *const *a_array, *const *b_array;   /* pointer-array batches, read when the job runs */
    void *const *c_array;
    const void *c_src;                          /* cuBLASLt's C when it is not D: copied into C (D) first */
    int ldc_src;
    int64_t stride_c_src;
    const void *alpha_ptr, *beta_ptr;           /* device pointer mode: read when the job runs */
    unsigned char alpha[16], beta[16];          /* host pointer mode: copied at the call */
};

/* Whether `type`/`ctype`/`scale` (cudaDataType) with op codes ta/tb can be done natively. */
int gemm_supported(int type, int ctype, int scale, int ta, int tb);
/* Queues the job on `stream` (it is freed after running). 0, or nonzero: forward the call instead. With
 * ZLUDA_TRACE=1, a queued job says so on stderr, named `fn`. */
int gemm_submit(struct gemm_job *job, blas_stream stream, const char *fn);
/* Bytes of one scalar of cudaDataType `scale` (alpha/beta). */
size_t scalar_size(int scale);

#endif
