/* libnvrtc.so.13 beside the shim: every NVRTC call goes to NVIDIA's own NVRTC, except that a program
 * compiled for a real sm_XX is compiled for compute_XX instead and its "cubin" is that PTX, which the shim
 * loads (SASS it cannot run). Built by zluda_py/_shim_build.py as its own library, not into libcuda.so.1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "front_find.h"

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef struct nvrtcBundledHeadersInfo_ nvrtcBundledHeadersInfo;

#define EXPORT __attribute__((visibility("default")))
/* NVRTC's own answer when a library it needs (libnvrtc-builtins) cannot be loaded. */
#define NOT_LOADED 7


#define NVRTC_CODE(num, name)
#define NVRTC_FN(ret, name, params, args) static ret (*real_##name) params;
#define NVRTC_OWN NVRTC_FN
#include "nvrtc_exports.h"
#undef NVRTC_FN
#undef NVRTC_OWN

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *real;

/* `h` if it is an NVRTC (front_try_open has made sure it is not this library nor a copy of it), else NULL. */
static void *an_nvrtc(void *h) {
    if (h && !dlsym(h, "nvrtcCompileProgram")) {
        dlclose(h);
        return NULL;
    }
    return h;
}

static void *try_open(const char *path) { return an_nvrtc(front_try_open(path, "zl_nvrtc_forwarder")); }

/* Marks this library, so that try_open can tell a copy of it from NVIDIA's. */
EXPORT int zl_nvrtc_forwarder(void) { return 1; }

static void *try_in(const char *dir, const char *rel) {
    char p[PATH_MAX];
    if (!dir || !*dir || snprintf(p, sizeof p, "%s/%s", dir, rel) >= (int)sizeof p)
        return NULL;
    return try_open(p);
}

/* `rel` under each directory of PATH that holds an nvcc (a toolkit's bin/). */
static void *beside_nvcc(const char *rel) {
    char buf[8192];
    const char *list = getenv("PATH");
    if (!list || snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        return NULL;
    for (char *save, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char nvcc[PATH_MAX];
        snprintf(nvcc, sizeof nvcc, "%s/nvcc", d);
        if (access(nvcc, X_OK) != 0)
            continue;
        void *h = try_in(d, rel);
        if (h)
            return h;
    }
    return NULL;
}

static void *find_real(void) {
    const char *env = getenv("ZLUDA_NVRTC");
    if (env && *env) {
        struct stat st;
        if (stat(env, &st) == 0 && S_ISDIR(st.st_mode))
            return try_in(env, "libnvrtc.so.13");
        return try_open(env);  /* what the user named, or nothing: no silent fallback */
    }
    /* the wheel's, beside an installed zluda-py or in the site-packages recorded when the shim was built */
    void *h = an_nvrtc(front_in_site_packages("nvidia/cu13/lib/libnvrtc.so.13", "zl_nvrtc_forwarder"));
    if (!h)
        h = an_nvrtc(front_in_site_packages("nvidia/cuda_nvrtc/lib/libnvrtc.so.13", "zl_nvrtc_forwarder"));
    if (!h)
        h = try_in(getenv("CUDA_HOME"), "lib64/libnvrtc.so.13");
    if (!h)
        h = try_in("/usr/local/cuda", "lib64/libnvrtc.so.13");
    if (!h)
        h = beside_nvcc("../lib64/libnvrtc.so.13");
    return h;
}

static void load(void) {
    void *h = find_real();
    if (!h) {
        const char *env = getenv("ZLUDA_NVRTC");
        fprintf(stderr, "zluda-py: libnvrtc.so.13: %s%s; NVRTC calls answer NVRTC_ERROR_BUILTIN_OPERATION_FAILURE"
                " (pip install nvidia-cuda-nvrtc, or set ZLUDA_NVRTC to NVIDIA's libnvrtc.so.13)\n",
                env && *env ? "ZLUDA_NVRTC does not name NVIDIA's NVRTC: " : "NVIDIA's NVRTC not found",
                env && *env ? env : "");
        return;
    }
#define NVRTC_FN(ret, name, params, args) real_##name = (ret (*) params)dlsym(h, #name);
#define NVRTC_OWN NVRTC_FN
#include "nvrtc_exports.h"
#undef NVRTC_FN
#undef NVRTC_OWN
    real = h;
}

static int loaded(void) {
    pthread_once(&once, load);
    return real != NULL;
}

#define NVRTC_FN(ret, name, params, args)                                                              \
    EXPORT ret name params {                                                                           \
        if (!loaded() || !real_##name)                                                                 \
            return NOT_LOADED;                                                                         \
        return real_##name args;                                                                       \
    }
#define NVRTC_OWN(ret, name, params, args)
#include "nvrtc_exports.h"
#undef NVRTC_FN
#undef NVRTC_OWN

EXPORT const char *nvrtcGetErrorString(nvrtcResult result) {
    if (loaded() && real_nvrtcGetErrorString)
        return real_nvrtcGetErrorString(result);
    switch (result) {
#undef NVRTC_CODE
#define NVRTC_CODE(num, name) case num: return #name;
#define NVRTC_FN(ret, name, params, args)
#define NVRTC_OWN NVRTC_FN
#include "nvrtc_exports.h"
#undef NVRTC_FN
#undef NVRTC_OWN
#undef NVRTC_CODE
    }
    return "NVRTC_ERROR unknown";
}

/* The programs compiled for compute_XX in place of the sm_XX they asked for. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static nvrtcProgram *ptx_for_cubin;
static size_t n_ptx, cap_ptx;

static int mark(nvrtcProgram prog, int on) {
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_ptx; i++)
        if (ptx_for_cubin[i] == prog) {
            found = 1;
            if (on == 0)
                ptx_for_cubin[i] = ptx_for_cubin[--n_ptx];
            break;
        }
    if (on == 1 && !found) {
        if (n_ptx == cap_ptx) {
            size_t cap = cap_ptx ? 2 * cap_ptx : 16;
            nvrtcProgram *p = realloc(ptx_for_cubin, cap * sizeof *p);
            if (p) {
                ptx_for_cubin = p;
                cap_ptx = cap;
            }
        }
        if (n_ptx < cap_ptx)
            ptx_for_cubin[n_ptx++] = prog;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

/* "sm_86", "sm_90a", "sm_100f" as the whole of `s`: the architecture a cubin would be built for. */
static int real_arch(const char *s) {
    if (strncmp(s, "sm_", 3) != 0 || !(s[3] >= '0' && s[3] <= '9'))
        return 0;
    const char *p = s + 3;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == 0 || ((*p == 'a' || *p == 'f') && p[1] == 0);
}

/* `opt` with its sm_ value (the text after `at`) spelled compute_, in a new string. */
static char *to_virtual(const char *opt, size_t at) {
    char *s = malloc(strlen(opt) + 8);
    if (s)
        sprintf(s, "%.*scompute_%s", (int)at, opt, opt + at + 3);
    return s;
}

EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options) {
    if (!loaded())
        return NOT_LOADED;
    if (numOptions <= 0 || !options)
        return real_nvrtcCompileProgram(prog, numOptions, options);
    const char **opts = malloc(numOptions * sizeof *opts);
    char **owned = calloc(numOptions, sizeof *owned);
    if (!opts || !owned) {
        free(opts);
        free(owned);
        return 1; /* NVRTC_ERROR_OUT_OF_MEMORY */
    }
    static const char *const spellings[] = {"-arch=", "--gpu-architecture=", "-arch", "--gpu-architecture"};
    int rewrote = 0;
    for (int i = 0; i < numOptions; i++) {
        const char *o = opts[i] = options[i];
        if (!o)
            continue;
        for (int k = 0; k < 4; k++) {
            size_t n = strlen(spellings[k]);
            if (k < 2 && strncmp(o, spellings[k], n) == 0 && real_arch(o + n)) {
                opts[i] = owned[i] = to_virtual(o, n);
            } else if (k >= 2 && strcmp(o, spellings[k]) == 0 && i + 1 < numOptions && options[i + 1] &&
                       real_arch(options[i + 1])) {
                opts[i + 1] = owned[i + 1] = to_virtual(options[i + 1], 0);
                i++;
            } else {
                continue;
            }
            if (!opts[i]) { /* to_virtual ran out of memory */
                for (int j = 0; j < numOptions; j++)
                    free(owned[j]);
                free(owned);
                free(opts);
                return 1;
            }
            rewrote = 1;
            break;
        }
    }
    nvrtcResult r = real_nvrtcCompileProgram(prog, numOptions, opts);
    mark(prog, rewrote);
    for (int i = 0; i < numOptions; i++)
        free(owned[i]);
    free(owned);
    free(opts);
    return r;
}

EXPORT nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet) {
    if (!loaded())
        return NOT_LOADED;
    if (mark(prog, -1))
        return real_nvrtcGetPTXSize(prog, cubinSizeRet);  /* the size counts the terminating NUL */
    return real_nvrtcGetCUBINSize(prog, cubinSizeRet);
}

EXPORT nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) {
    if (!loaded())
        return NOT_LOADED;
    if (mark(prog, -1))
        return real_nvrtcGetPTX(prog, cubin);
    return real_nvrtcGetCUBIN(prog, cubin);
}

EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
    if (!loaded())
        return NOT_LOADED;
    if (prog)
        mark(*prog, 0);
    return real_nvrtcDestroyProgram(prog);
}
