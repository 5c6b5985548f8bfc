/* libnvJitLink.so.13 beside the shim. NVIDIA's nvJitLink links a program's device code into SASS for the
 * sm_XX it is given, which nothing here can run; numba-cuda and cuda.core link through it whenever it is
 * installed (it comes with NVIDIA's cuFFT, cuSOLVER and cuSPARSE wheels). Here a link for a cubin goes to the
 * driver's own linker (cuLink*, in libcuda.so.1), whose image is PTX the shim loads; LTO-IR inputs are first
 * linked to PTX by NVIDIA's nvJitLink (-arch=compute_XX -ptx). A link that asks for PTX (-ptx) is NVIDIA's
 * from start to end. Built by zluda_py/_shim_build.py as its own library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front_find.h"

#define EXPORT __attribute__((visibility("default")))

typedef int nvJitLinkResult;
typedef struct link *nvJitLinkHandle;
enum { OK = 0, E_MISSING_ARCH = 2, E_INVALID_INPUT = 3, E_PTX_COMPILE = 4, E_INTERNAL = 6,
       E_UNRECOGNIZED_INPUT = 8, E_NULL_INPUT = 10 };
enum { IN_NONE = 0, IN_CUBIN = 1, IN_PTX = 2, IN_LTOIR = 3, IN_FATBIN = 4, IN_OBJECT = 5, IN_LIBRARY = 6,
       IN_INDEX = 7, IN_ANY = 10 };

/* --- NVIDIA's nvJitLink ------------------------------------------------------------------------------ */

#define REAL_FNS(X)                                                                                       \
    X(Create, (nvJitLinkHandle *, uint32_t, const char **))                                              \
    X(Destroy, (nvJitLinkHandle *))                                                                      \
    X(AddData, (nvJitLinkHandle, int, const void *, size_t, const char *))                              \
    X(AddFile, (nvJitLinkHandle, int, const char *))                                                     \
    X(Complete, (nvJitLinkHandle))                                                                       \
    X(GetLinkedCubinSize, (nvJitLinkHandle, size_t *))                                                   \
    X(GetLinkedCubin, (nvJitLinkHandle, void *))                                                         \
    X(GetLinkedPtxSize, (nvJitLinkHandle, size_t *))                                                     \
    X(GetLinkedPtx, (nvJitLinkHandle, char *))                                                           \
    X(GetLinkedLTOIRSize, (nvJitLinkHandle, size_t *))                                                   \
    X(GetLinkedLTOIR, (nvJitLinkHandle, void *))                                                         \
    X(GetErrorLogSize, (nvJitLinkHandle, size_t *))                                                      \
    X(GetErrorLog, (nvJitLinkHandle, char *))                                                            \
    X(GetInfoLogSize, (nvJitLinkHandle, size_t *))                                                       \
    X(GetInfoLog, (nvJitLinkHandle, char *))                                                             \
    X(Version, (unsigned *, unsigned *))

#define DECLARE(name, params) static nvJitLinkResult(*real_##name) params;
REAL_FNS(DECLARE)

static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static int have_real;

/* Marks this library, so that the finder never takes a copy of it for NVIDIA's. */
EXPORT int zl_nvjitlink_front(void) { return 1; }

static void load_real(void) {
    void *h = front_find_nvidia("libnvJitLink.so.13", "ZLUDA_NVJITLINK", "zl_nvjitlink_front");
    if (!h)
        return;
#define BIND(name, params) real_##name = (nvJitLinkResult(*) params)dlsym(h, "nvJitLink" #name);
    REAL_FNS(BIND)
    have_real = real_Create && real_Destroy && real_AddData && real_Complete && real_GetLinkedPtxSize &&
                real_GetLinkedPtx && real_GetErrorLogSize && real_GetErrorLog;
}

static int real_loaded(void) {
    pthread_once(&real_once, load_real);
    return have_real;
}

/* --- the driver's linker ----------------------------------------------------------------------------- */

typedef void *CUcontext, *CUlinkState;
static struct {
    pthread_once_t once;
    int ok;
    int (*init)(unsigned);
    int (*ctx_get_current)(CUcontext *);
    int (*device_get)(int *, int);
    int (*primary_retain)(CUcontext *, int);
    int (*primary_release)(int);
    int (*ctx_push)(CUcontext);
    int (*ctx_pop)(CUcontext *);
    int (*link_create)(unsigned, int *, void **, CUlinkState *);
    int (*link_add)(CUlinkState, int, void *, size_t, const char *, unsigned, int *, void **);
    int (*link_complete)(CUlinkState, void **, size_t *);
    int (*link_destroy)(CUlinkState);
} drv = {PTHREAD_ONCE_INIT};

static void load_driver(void) {
    void *cu = front_libcuda();
    if (!cu)
        return;
    void **slots[] = {(void **)&drv.init, (void **)&drv.ctx_get_current, (void **)&drv.device_get,
                      (void **)&drv.primary_retain, (void **)&drv.primary_release, (void **)&drv.ctx_push,
                      (void **)&drv.ctx_pop, (void **)&drv.link_create, (void **)&drv.link_add,
                      (void **)&drv.link_complete, (void **)&drv.link_destroy};
    const char *names[] = {"cuInit", "cuCtxGetCurrent", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
                           "cuDevicePrimaryCtxRelease_v2", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2",
                           "cuLinkCreate_v2", "cuLinkAddData_v2", "cuLinkComplete", "cuLinkDestroy"};
    drv.ok = 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*slots[i] = dlsym(cu, names[i])))
            drv.ok = 0;
}

/* --- a link ------------------------------------------------------------------------------------------ */

/* An LTO-IR input, kept for NVIDIA's linker; every other input goes to the driver's linker as it comes. */
struct ltoir {
    char *data;
    size_t size;
    char *name;
};

struct link {
    nvJitLinkHandle real;   /* a -ptx link: NVIDIA's handle, every call forwarded */
    char **opts;            /* the options, -arch=sm_XX spelled compute_XX (for the LTO-IR's link to PTX) */
    uint32_t n_opts;
    struct ltoir *lto;
    size_t n_lto, cap_lto;
    CUlinkState st;         /* the driver's link, from the first input on */
    char drv_log[8192];     /* its error log buffer */
    int completed;          /* nvJitLinkComplete ran (its answer may have been an error) */
    char *image;            /* the linked PTX, NUL-terminated (image_size counts the NUL) */
    size_t image_size;
    char *error_log;
};

/* The log as `fmt` (up to two %s) makes it, after what it already says. */
static void add_log(struct link *l, const char *fmt, const char *a, const char *b) {
    size_t old = l->error_log ? strlen(l->error_log) : 0;
    size_t n = old + strlen(fmt) + (a ? strlen(a) : 0) + (b ? strlen(b) : 0) + 1;
    char *s = realloc(l->error_log, n);
    if (!s)
        return;
    if (!old)
        *s = 0;
    snprintf(s + old, n - old, fmt, a ? a : "", b ? b : "");
    l->error_log = s;
}

/* "sm_86", "sm_90a", "sm_120f": the digits' length when `s` names a real architecture, else 0. */
static size_t real_arch(const char *s) {
    if (strncmp(s, "sm_", 3) != 0)
        return 0;
    size_t n = 0;
    while (s[3 + n] >= '0' && s[3 + n] <= '9')
        n++;
    const char *rest = s + 3 + n;
    return n && (!*rest || ((*rest == 'a' || *rest == 'f') && !rest[1])) ? n : 0;
}

/* The driver's calls need a current context, nvJitLink's callers need none: the primary context of device 0
 * stands in while there is none. enter() answers what leave() takes. */
static CUcontext enter(void) {
    CUcontext cur = NULL, pc = NULL;
    int dev = 0;
    if (drv.init(0) != 0 || drv.ctx_get_current(&cur) != 0 || cur)
        return NULL;
    if (drv.device_get(&dev, 0) != 0 || drv.primary_retain(&pc, dev) != 0)
        return NULL;
    if (drv.ctx_push(pc) != 0) {
        drv.primary_release(dev);
        return NULL;
    }
    return pc;
}

static void leave(CUcontext pushed) {
    CUcontext popped;
    int dev;
    if (pushed && drv.ctx_pop(&popped) == 0 && drv.device_get(&dev, 0) == 0)
        drv.primary_release(dev);
}

static void free_link(struct link *l) {
    for (uint32_t i = 0; i < l->n_opts; i++)
        free(l->opts[i]);
    free(l->opts);
    for (size_t i = 0; i < l->n_lto; i++) {
        free(l->lto[i].data);
        free(l->lto[i].name);
    }
    free(l->lto);
    if (l->st) {
        CUcontext c = enter();
        drv.link_destroy(l->st);
        leave(c);
    }
    free(l->image);
    free(l->error_log);
    free(l);
}

EXPORT nvJitLinkResult nvJitLinkCreate(nvJitLinkHandle *handle, uint32_t numOptions, const char **options) {
    if (!handle || (numOptions && !options))
        return E_NULL_INPUT;
    *handle = NULL;
    int arch = 0, ptx_out = 0;
    for (uint32_t i = 0; i < numOptions; i++) {
        if (!options[i])
            return E_NULL_INPUT;
        arch |= strncmp(options[i], "-arch=", 6) == 0;
        ptx_out |= strcmp(options[i], "-ptx") == 0;
    }
    struct link *l = calloc(1, sizeof *l);
    if (!l)
        return E_INTERNAL;
    if (ptx_out) {     /* PTX out: nothing here can't load it */
        nvJitLinkResult r = real_loaded() ? real_Create(&l->real, numOptions, options) : E_INTERNAL;
        if (r != OK) {
            free(l);
            return r;
        }
        *handle = l;
        return OK;
    }
    if (real_loaded()) {     /* NVIDIA's verdict on the options, as the program would have had it */
        nvJitLinkHandle probe = NULL;
        nvJitLinkResult r = real_Create(&probe, numOptions, options);
        if (probe)
            real_Destroy(&probe);
        if (r != OK) {
            free(l);
            return r;
        }
    } else if (!arch) {
        free(l);
        return E_MISSING_ARCH;
    }
    l->opts = calloc(numOptions ? numOptions : 1, sizeof *l->opts);
    for (uint32_t i = 0; l->opts && i < numOptions; i++) {
        const char *o = options[i];
        size_t digits = strncmp(o, "-arch=", 6) == 0 ? real_arch(o + 6) : 0;
        if (!(l->opts[i] = malloc(strlen(o) + 8)))
            break;
        if (digits)
            sprintf(l->opts[i], "-arch=compute_%.*s", (int)digits, o + 9);
        else
            strcpy(l->opts[i], o);
        l->n_opts++;
    }
    if (l->n_opts != numOptions) {
        free_link(l);
        return E_INTERNAL;
    }
    *handle = l;
    return OK;
}

EXPORT nvJitLinkResult nvJitLinkDestroy(nvJitLinkHandle *handle) {
    if (!handle || !*handle)
        return E_NULL_INPUT;
    struct link *l = *handle;
    nvJitLinkResult r = l->real ? real_Destroy(&l->real) : OK;
    free_link(l);
    *handle = NULL;
    return r;
}

/* What an IN_ANY input is, from its first bytes. */
static int sniff(const unsigned char *d, size_t n) {
    if (n >= 4 && d[0] == 0x50 && d[1] == 0xed && d[2] == 0x55 && d[3] == 0xba)
        return IN_FATBIN;
    if (n >= 8 && memcmp(d, "!<arch>\n", 8) == 0)
        return IN_LIBRARY;
    if (n >= 20 && memcmp(d, "\177ELF", 4) == 0)
        return (d[18] | d[19] << 8) == 190 ? IN_CUBIN : IN_OBJECT;      /* EM_CUDA, else a host object */
    if (n >= 4 && ((d[0] == 0xed && d[1] == 0x43 && d[2] == 0x4e && d[3] == 0x7f) || memcmp(d, "BC\xc0\xde", 4) == 0))
        return IN_LTOIR;
    return IN_PTX;
}

/* CUjitInputType of an nvJitLink input type. */
static int cu_input(int type) {
    switch (type) {
    case IN_CUBIN: return 0;
    case IN_PTX: return 1;
    case IN_FATBIN: return 2;
    case IN_OBJECT: return 3;
    default: return 4;     /* IN_LIBRARY */
    }
}

static int driver_ready(struct link *l) {
    pthread_once(&drv.once, load_driver);
    if (!drv.ok) {
        add_log(l, "ERROR: no libcuda.so.1 with the cuLink* API to link with%s%s\n", NULL, NULL);
        return 0;
    }
    return 1;
}

/* One input into the driver's link, which checks it (ptxas compiles a PTX input when it is added). */
static nvJitLinkResult to_driver(struct link *l, int type, const char *data, size_t size, const char *name) {
    if (!driver_ready(l))
        return E_INTERNAL;
    CUcontext c = enter();
    int cr = 0;
    if (!l->st) {
        enum { ERROR_LOG_BUFFER = 5, ERROR_LOG_BUFFER_SIZE_BYTES = 6 };
        int opt[] = {ERROR_LOG_BUFFER, ERROR_LOG_BUFFER_SIZE_BYTES};
        void *val[] = {l->drv_log, (void *)(uintptr_t)sizeof l->drv_log};
        cr = drv.link_create(2, opt, val, &l->st);
    }
    l->drv_log[0] = 0;
    if (cr == 0)
        cr = drv.link_add(l->st, cu_input(type), (void *)data, size, name, 0, NULL, NULL);
    leave(c);
    if (cr == 0)
        return OK;
    add_log(l, "%s\n", l->drv_log, NULL);
    add_log(l, type == IN_PTX ? "ERROR NVJITLINK_ERROR_PTX_COMPILE: JIT the PTX (%s)\n"
                              : "ERROR NVJITLINK_ERROR_INVALID_INPUT: %s\n", name, NULL);
    return type == IN_PTX ? E_PTX_COMPILE : E_INVALID_INPUT;
}

EXPORT nvJitLinkResult nvJitLinkAddData(nvJitLinkHandle handle, int inputType, const void *data, size_t size,
                                        const char *name) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_AddData(handle->real, inputType, data, size, name);
    if (!data || !size)
        return E_NULL_INPUT;
    if (handle->completed)
        return E_INVALID_INPUT;
    if (inputType == IN_ANY)
        inputType = sniff(data, size);
    name = name ? name : "input";
    if (inputType < IN_CUBIN || inputType > IN_LIBRARY) {
        add_log(handle, "ERROR: %s: %s\n", name,
                inputType == IN_INDEX ? "index files are not supported" : "unknown input type");
        return E_UNRECOGNIZED_INPUT;
    }
    if (inputType != IN_LTOIR) {
        if (inputType != IN_PTX)
            return to_driver(handle, inputType, data, size, name);
        char *text = malloc(size + 1);     /* a PTX input may come without its NUL */
        if (!text)
            return E_INTERNAL;
        memcpy(text, data, size);
        text[size] = 0;
        nvJitLinkResult r = to_driver(handle, IN_PTX, text, strlen(text) + 1, name);
        free(text);
        return r;
    }
    if (handle->n_lto == handle->cap_lto) {
        size_t cap = handle->cap_lto ? 2 * handle->cap_lto : 4;
        struct ltoir *p = realloc(handle->lto, cap * sizeof *p);
        if (!p)
            return E_INTERNAL;
        handle->lto = p;
        handle->cap_lto = cap;
    }
    struct ltoir *in = &handle->lto[handle->n_lto];
    in->size = size;
    in->data = malloc(size);
    in->name = strdup(name);
    if (!in->data || !in->name) {
        free(in->data);
        free(in->name);
        return E_INTERNAL;
    }
    memcpy(in->data, data, size);
    handle->n_lto++;
    return OK;
}

EXPORT nvJitLinkResult nvJitLinkAddFile(nvJitLinkHandle handle, int inputType, const char *fileName) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_AddFile(handle->real, inputType, fileName);
    if (!fileName)
        return E_NULL_INPUT;
    FILE *f = fopen(fileName, "rb");
    if (!f) {
        add_log(handle, "ERROR: %s: cannot open file%s\n", fileName, NULL);
        return E_INVALID_INPUT;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap) {
            char *p = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
            if (!p) {
                free(buf);
                fclose(f);
                return E_INTERNAL;
            }
            buf = p;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got);
    fclose(f);
    nvJitLinkResult r = n ? nvJitLinkAddData(handle, inputType, buf, n, fileName) : E_INVALID_INPUT;
    free(buf);
    return r;
}

/* The LTO-IR inputs linked to PTX by NVIDIA's nvJitLink: a malloc'd string, or NULL with the log set. */
static char *lto_to_ptx(struct link *l, nvJitLinkResult *r) {
    if (!real_loaded()) {
        add_log(l, "ERROR: LTO-IR inputs need NVIDIA's libnvJitLink.so.13 (pip install nvidia-nvjitlink, or set "
                   "ZLUDA_NVJITLINK)%s%s\n", NULL, NULL);
        *r = E_INTERNAL;
        return NULL;
    }
    const char **opts = malloc((l->n_opts + 1) * sizeof *opts);
    if (!opts) {
        *r = E_INTERNAL;
        return NULL;
    }
    for (uint32_t i = 0; i < l->n_opts; i++)
        opts[i] = l->opts[i];
    opts[l->n_opts] = "-ptx";
    nvJitLinkHandle h = NULL;
    char *ptx = NULL;
    *r = real_Create(&h, l->n_opts + 1, opts);
    free(opts);
    for (size_t i = 0; *r == OK && i < l->n_lto; i++)
        *r = real_AddData(h, IN_LTOIR, l->lto[i].data, l->lto[i].size, l->lto[i].name);
    if (*r == OK)
        *r = real_Complete(h);
    size_t n = 0;
    if (*r == OK && (*r = real_GetLinkedPtxSize(h, &n)) == OK && (ptx = calloc(n + 1, 1)) != NULL)
        *r = real_GetLinkedPtx(h, ptx);
    if (*r != OK && h) {
        free(ptx);
        ptx = NULL;
        size_t ln = 0;
        char *log = real_GetErrorLogSize(h, &ln) == OK && ln ? calloc(ln + 1, 1) : NULL;
        if (log && real_GetErrorLog(h, log) == OK)
            add_log(l, "%s%s", log, NULL);
        free(log);
    } else if (*r == OK && !ptx) {
        *r = E_INTERNAL;
    }
    if (h)
        real_Destroy(&h);
    return ptx;
}

EXPORT nvJitLinkResult nvJitLinkComplete(nvJitLinkHandle handle) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_Complete(handle->real);
    if (handle->completed)
        return E_INVALID_INPUT;
    handle->completed = 1;
    if (!handle->st && !handle->n_lto)
        return OK;        /* nothing to link: NVIDIA's answer too, with an empty image */
    nvJitLinkResult r = OK;
    if (handle->n_lto) {
        char *ptx = lto_to_ptx(handle, &r);
        if (r == OK)
            r = to_driver(handle, IN_PTX, ptx, strlen(ptx) + 1, "lto.ptx");
        free(ptx);
        if (r != OK)
            return r;
    }
    CUcontext c = enter();
    void *image = NULL;
    size_t size = 0;
    handle->drv_log[0] = 0;
    int cr = drv.link_complete(handle->st, &image, &size);
    if (cr == 0 && (handle->image = malloc(size)) != NULL) {
        memcpy(handle->image, image, size);
        handle->image_size = size;
    }
    leave(c);
    if (cr != 0) {     /* nvlink's errors, then NVIDIA's closing line for them */
        add_log(handle, "%s\nERROR 9: finish\n", handle->drv_log, NULL);
        return E_INTERNAL;
    }
    return handle->image ? OK : E_INTERNAL;
}

/* The cubin the program asked for is the linked PTX (its size counts the NUL), which the shim loads. Before
 * Complete there is none (INTERNAL, NVIDIA's answer); after a failed Complete it is empty. */
EXPORT nvJitLinkResult nvJitLinkGetLinkedCubinSize(nvJitLinkHandle handle, size_t *size) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_GetLinkedCubinSize ? real_GetLinkedCubinSize(handle->real, size) : E_INTERNAL;
    if (!size)
        return E_NULL_INPUT;
    if (!handle->completed)
        return E_INTERNAL;
    *size = handle->image_size;
    return OK;
}

EXPORT nvJitLinkResult nvJitLinkGetLinkedCubin(nvJitLinkHandle handle, void *cubin) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_GetLinkedCubin ? real_GetLinkedCubin(handle->real, cubin) : E_INTERNAL;
    if (!cubin)
        return E_NULL_INPUT;
    if (!handle->completed)
        return E_INTERNAL;
    if (handle->image_size)
        memcpy(cubin, handle->image, handle->image_size);
    return OK;
}

/* Linked PTX is a -ptx link's only (NVIDIA's: a -lto link for sm_XX has none either). */
EXPORT nvJitLinkResult nvJitLinkGetLinkedPtxSize(nvJitLinkHandle handle, size_t *size) {
    if (!handle)
        return E_NULL_INPUT;
    return handle->real ? real_GetLinkedPtxSize(handle->real, size) : E_INVALID_INPUT;
}

EXPORT nvJitLinkResult nvJitLinkGetLinkedPtx(nvJitLinkHandle handle, char *ptx) {
    if (!handle)
        return E_NULL_INPUT;
    return handle->real ? real_GetLinkedPtx(handle->real, ptx) : E_INVALID_INPUT;
}

EXPORT nvJitLinkResult nvJitLinkGetLinkedLTOIRSize(nvJitLinkHandle handle, size_t *size) {
    if (handle && handle->real && real_GetLinkedLTOIRSize)
        return real_GetLinkedLTOIRSize(handle->real, size);
    return E_INVALID_INPUT;
}

EXPORT nvJitLinkResult nvJitLinkGetLinkedLTOIR(nvJitLinkHandle handle, void *ltoir) {
    if (handle && handle->real && real_GetLinkedLTOIR)
        return real_GetLinkedLTOIR(handle->real, ltoir);
    return E_INVALID_INPUT;
}

EXPORT nvJitLinkResult nvJitLinkGetErrorLogSize(nvJitLinkHandle handle, size_t *size) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_GetErrorLogSize(handle->real, size);
    if (!size)
        return E_NULL_INPUT;
    *size = handle->error_log ? strlen(handle->error_log) + 1 : 0;
    return OK;
}

EXPORT nvJitLinkResult nvJitLinkGetErrorLog(nvJitLinkHandle handle, char *log) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_GetErrorLog(handle->real, log);
    if (!log)
        return E_NULL_INPUT;
    if (handle->error_log)
        strcpy(log, handle->error_log);
    else
        *log = 0;
    return OK;
}

EXPORT nvJitLinkResult nvJitLinkGetInfoLogSize(nvJitLinkHandle handle, size_t *size) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_GetInfoLogSize ? real_GetInfoLogSize(handle->real, size) : E_INTERNAL;
    if (!size)
        return E_NULL_INPUT;
    *size = 0;
    return OK;
}

EXPORT nvJitLinkResult nvJitLinkGetInfoLog(nvJitLinkHandle handle, char *log) {
    if (!handle)
        return E_NULL_INPUT;
    if (handle->real)
        return real_GetInfoLog ? real_GetInfoLog(handle->real, log) : E_INTERNAL;
    if (!log)
        return E_NULL_INPUT;
    *log = 0;
    return OK;
}

/* NVIDIA's version where it is installed. Without it this front links PTX but no LTO-IR, and frameworks that
 * see a working nvJitLink compile to LTO-IR (numba-cuda's default): failing here, as a missing library
 * would, keeps them on the driver's linker. */
EXPORT nvJitLinkResult nvJitLinkVersion(unsigned *major, unsigned *minor) {
    if (real_loaded() && real_Version)
        return real_Version(major, minor);
    return E_INTERNAL;
}

/* The versioned names nvJitLink.h's inline wrappers call (__nvJitLinkCreate_13_5 and so on). */
#define ALIAS(fn, v) extern __typeof__(fn) __##fn##_##v __attribute__((alias(#fn), visibility("default")));
#define VERSIONS(fn) ALIAS(fn, 13_0) ALIAS(fn, 13_1) ALIAS(fn, 13_2) ALIAS(fn, 13_3) ALIAS(fn, 13_4) ALIAS(fn, 13_5)
VERSIONS(nvJitLinkCreate)
VERSIONS(nvJitLinkDestroy)
VERSIONS(nvJitLinkAddData)
VERSIONS(nvJitLinkAddFile)
VERSIONS(nvJitLinkComplete)
VERSIONS(nvJitLinkGetLinkedCubinSize)
VERSIONS(nvJitLinkGetLinkedCubin)
VERSIONS(nvJitLinkGetLinkedPtxSize)
VERSIONS(nvJitLinkGetLinkedPtx)
VERSIONS(nvJitLinkGetLinkedLTOIRSize)
VERSIONS(nvJitLinkGetLinkedLTOIR)
VERSIONS(nvJitLinkGetErrorLogSize)
VERSIONS(nvJitLinkGetErrorLog)
VERSIONS(nvJitLinkGetInfoLogSize)
VERSIONS(nvJitLinkGetInfoLog)
