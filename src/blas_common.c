/* The BLAS front's shared half: finding NVIDIA's libraries and the host BLAS, asking the driver whether
 * device memory is host memory, and running GEMMs in stream order as host functions. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blas_front.h"
#include "front_find.h"

static void say_once(int *said, const char *fmt, const char *arg) {
    if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED)) {
        fprintf(stderr, "[zluda] ");
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
    }
}

/* What a forwarded function answers when NVIDIA's library was not found: CUBLAS_STATUS_NOT_INITIALIZED. */
int blas_missing(void) {
    static int said;
    say_once(&said, "%s", "the BLAS front found no NVIDIA cuBLAS to forward to (pip install nvidia-cublas, "
                          "or set ZLUDA_CUBLAS to its lib directory): calls answer CUBLAS_STATUS_NOT_INITIALIZED");
    return BLAS_NOT_INITIALIZED;
}

void *blas_load_real(const char *soname, const char *env, struct blas_fn *table, size_t n) {
    void *h = front_find_nvidia(soname, env, "zl_blas_front");
    if (!h) {
        static int said;
        say_once(&said, "the BLAS front found no NVIDIA %s (pip install nvidia-cublas, or set ZLUDA_CUBLAS to "
                        "its lib directory): forwarded calls answer CUBLAS_STATUS_NOT_INITIALIZED", soname);
    }
    for (size_t i = 0; i < n; i++) {
        void *f = h ? dlsym(h, table[i].name) : NULL;
        *table[i].real = f;
        if (!table[i].own)
            __atomic_store_n(table[i].slot, f ? f : (void *)blas_missing, __ATOMIC_RELEASE);
    }
    return h;
}

/* --- the driver -------------------------------------------------------------------------------------- */

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_host_fn_launch)(blas_stream, void (*)(void *), void *);
typedef int (*cu_is_capturing_fn)(blas_stream, int *);
typedef int (*host_memory_fn)(void);

static struct {
    pthread_once_t once;
    int host_memory;
    cu_host_fn_launch launch_host_func;
    cu_is_capturing_fn is_capturing;
} drv = {PTHREAD_ONCE_INIT, 0, NULL, NULL};

static void find_driver(void) {
    void *cu = front_libcuda();
    if (!cu)
        return;
    host_memory_fn host_memory = (host_memory_fn)dlsym(cu, "zluda_host_memory_devices");
    cu_init_fn init = (cu_init_fn)dlsym(cu, "cuInit");
    drv.launch_host_func = (cu_host_fn_launch)dlsym(cu, "cuLaunchHostFunc");
    drv.is_capturing = (cu_is_capturing_fn)dlsym(cu, "cuStreamIsCapturing");
    /* NVIDIA's driver has no such answer: its device memory is the GPU's, and everything is forwarded */
    if (host_memory && init && drv.launch_host_func && drv.is_capturing && init(0) == 0)
        drv.host_memory = host_memory();
}

int blas_host_memory(void) {
    pthread_once(&drv.once, find_driver);
    return drv.host_memory;
}

int blas_enqueue(blas_stream stream, void (*job)(void *), void *arg) {
    int capturing = 0;
    /* a graph being captured must replay the GEMM on every launch: NVIDIA's kernels are captured instead */
    if (!blas_host_memory() || drv.is_capturing(stream, &capturing) != 0 || capturing)
        return -1;
    return drv.launch_host_func(stream, job, arg);
}

/* --- the host BLAS ----------------------------------------------------------------------------------- */

static struct host_blas hb;
static pthread_once_t hb_once = PTHREAD_ONCE_INIT;

static int bind_blas(void *h) {
    static const char *prefixes[] = {"scipy_cblas_", "cblas_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        char name[64];
        void **dst[] = {(void **)&hb.sgemm, (void **)&hb.dgemm, (void **)&hb.cgemm, (void **)&hb.zgemm};
        const char *what[] = {"sgemm", "dgemm", "cgemm", "zgemm"};
        int found = 0;
        for (int j = 0; j < 4; j++) {
            snprintf(name, sizeof name, "%s%s", prefixes[i], what[j]);
            found += (*dst[j] = dlsym(h, name)) != NULL;
        }
        if (found == 4)
            return 1;
    }
    memset(&hb, 0, sizeof hb);
    return 0;
}

static void find_blas(void) {
    const char *e = getenv("ZLUDA_BLAS");
    void *h = NULL;
    if (e && *e) {
        h = front_try_open(e, NULL);
        if (!h || !bind_blas(h)) {
            static int said;
            say_once(&said, "ZLUDA_BLAS=%s is no CBLAS library: GEMMs go to NVIDIA's kernels", e);
        }
        return;
    }
    static const char *rels[] = {"scipy_openblas32/lib/libscipy_openblas.so"};
    for (size_t i = 0; i < sizeof rels / sizeof rels[0] && !h; i++)
        if ((h = front_in_site_packages(rels[i], NULL)) && !bind_blas(h))
            h = NULL;
    static const char *system[] = {"libopenblas.so.0", "libopenblas.so", "libblis.so.4", "libcblas.so.3"};
    for (size_t i = 0; i < sizeof system / sizeof system[0] && !h; i++)
        if ((h = dlopen(system[i], RTLD_NOW | RTLD_LOCAL)) && !bind_blas(h))
            h = NULL;
    if (!h) {
        static int said;
        say_once(&said, "%s", "the BLAS front found no host BLAS (pip install scipy-openblas32, or set ZLUDA_BLAS):"
                              " GEMMs go to NVIDIA's kernels, JIT-compiled for the CPU");
    }
}

const struct host_blas *host_blas(void) {
    pthread_once(&hb_once, find_blas);
    return hb.sgemm ? &hb : NULL;
}
