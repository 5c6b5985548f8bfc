/* The "dark API" export tables cudart asks for through cuGetExportTable, at fixed addresses because the
 * integrity check hashes their addresses; MD2/HMAC-MD2 for that check; context-local storage in C
 * because cudart reads it before almost every runtime call. Facts: shared/docs/cudart-interface.md. */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zluda_shim.h"

typedef int32_t dark_result;
typedef uint64_t dark_ctx;
enum { DARK_SUCCESS = 0, DARK_INVALID_VALUE = 1, DARK_INVALID_HANDLE = 400, DARK_NOT_SUPPORTED = 801 };

/* The shim's own exported driver entry points (src/shim.c), called so every answer here matches what the
 * application sees through the ordinary API. */
extern int32_t cuDriverGetVersion(int *version);
extern int32_t cuDeviceGetCount(int *count);
extern int32_t cuDeviceGet(int *device, int ordinal);
extern int32_t cuDeviceGetUuid(uint8_t *uuid, int dev);
extern int32_t cuDeviceGetAttribute(int *value, int attrib, int dev);
extern int32_t cuModuleLoadData(uint64_t *module, const void *image);
extern int32_t cuCtxGetCurrent(uint64_t *ctx);
extern int32_t cuCtxCreate_v2(uint64_t *ctx, unsigned flags, int dev);
extern int32_t cuModuleGetFunctionCount(unsigned *count, uint64_t module);
extern int32_t cuModuleEnumerateFunctions(uint64_t *functions, unsigned count, uint64_t module);

/* The device's primary context handle, without retaining or activating it: implemented in Python
 * (zluda_py/darkapi.py, through cffi `extern "Python+C"`), reached through src/loader.c. */
static int32_t zluda_dark_primary_ctx(uint64_t *out, int32_t dev)
{
    if (__atomic_load_n(&zluda_shim_disabled, __ATOMIC_ACQUIRE) || zluda_python_start() != 0)
        return zluda_disabled_result(-1);
    return zluda_dark_primary_ctx_ptr(out, dev);
}

/* ---------------------------------------------------------------------------------------------------
 * MD2 (RFC 1319) and HMAC-MD2 (RFC 2104, 16-byte block). */

static const uint8_t MD2_S[256] = {
    41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19, 98, 167, 5, 243, 192, 199, 115, 140,
    152, 147, 43, 217, 188, 76, 130, 202, 30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18,
    190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122, 169, 104, 121, 145, 21, 178, 7, 63,
    148, 194, 16, 137, 11, 34, 95, 33, 128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3, 255,
    25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198, 79, 184, 56, 210, 150, 164, 125, 182, 118,
    252, 107, 226, 156, 116, 4, 241, 69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2, 27,
    96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15, 85, 71, 163, 35, 221, 81, 175, 58, 195, 92,
    249, 206, 186, 197, 234, 38, 44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82, 106, 220,
    55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74, 120, 136, 149, 139, 227, 99, 232, 109, 233,
    203, 213, 254, 59, 0, 29, 57, 242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10,
    49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20};

typedef struct {
    uint8_t state[48];
    uint8_t checksum[16];
    uint8_t buffer[16];
    size_t used;
} md2_ctx;

static void md2_block(md2_ctx *c, const uint8_t *block) {
    uint8_t l = c->checksum[15];
    for (int j = 0; j < 16; j++) {
        c->state[16 + j] = block[j];
        c->state[32 + j] = (uint8_t)(c->state[j] ^ block[j]);
        l = c->checksum[j] ^= MD2_S[block[j] ^ l];
    }
    uint8_t t = 0;
    for (int j = 0; j < 18; j++) {
        for (int k = 0; k < 48; k++)
            t = c->state[k] ^= MD2_S[t];
        t = (uint8_t)(t + j);
    }
}

static void md2_init(md2_ctx *c) { memset(c, 0, sizeof *c); }

static void md2_update(md2_ctx *c, const uint8_t *data, size_t len) {
    while (len) {
        size_t n = 16 - c->used;
        if (n > len)
            n = len;
        memcpy(c->buffer + c->used, data, n);
        c->used += n;
        data += n;
        len -= n;
        if (c->used == 16) {
            md2_block(c, c->buffer);
            c->used = 0;
        }
    }
}

static void md2_final(md2_ctx *c, uint8_t *out) {
    uint8_t pad = (uint8_t)(16 - c->used);
    uint8_t padding[16];
    memset(padding, pad, sizeof padding);
    md2_update(c, padding, pad);
    uint8_t checksum[16];
    memcpy(checksum, c->checksum, 16);
    md2_block(c, checksum);
    memcpy(out, c->state, 16);
}

void zluda_md2(const uint8_t *data, size_t len, uint8_t *out) {
    md2_ctx c;
    md2_init(&c);
    md2_update(&c, data, len);
    md2_final(&c, out);
}

void zluda_hmac_md2(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t len,
                                      uint8_t *out) {
    uint8_t k[16] = {0}, ipad[16], opad[16], inner[16];
    if (key_len > 16)
        zluda_md2(key, key_len, k);
    else
        memcpy(k, key, key_len);
    for (int i = 0; i < 16; i++) {
        ipad[i] = k[i] ^ 0x36;
        opad[i] = k[i] ^ 0x5c;
    }
    md2_ctx c;
    md2_init(&c);
    md2_update(&c, ipad, 16);
    md2_update(&c, msg, len);
    md2_final(&c, inner);
    md2_init(&c);
    md2_update(&c, opad, 16);
    md2_update(&c, inner, 16);
    md2_final(&c, out);
}

/* ---------------------------------------------------------------------------------------------------
 * Slots. Unknown slots get a stub rather than NULL: a NULL cudart calls crashes the program. */

static dark_result dark_unsupported(void) { return DARK_NOT_SUPPORTED; }
static dark_result dark_success(void) { return DARK_SUCCESS; }
static void dark_nothing(size_t unused) { (void)unused; }

#define STUB ((void *)dark_unsupported)

/* CUDART_INTERFACE */
static dark_result cudart_module_from_cubin(uint64_t *module, const void *wrapper) {
    return cuModuleLoadData(module, wrapper);
}
static dark_result cudart_primary_ctx(uint64_t *ctx, int32_t dev) {
    if (!ctx)
        return DARK_INVALID_VALUE;
    return zluda_dark_primary_ctx(ctx, dev);
}
static dark_result cudart_module_from_cubin_ext1(uint64_t *module, const void *wrapper, void *a, void *b,
                                                 uint32_t c) {
    (void)a, (void)b, (void)c;
    return cuModuleLoadData(module, wrapper);
}
static dark_result cudart_module_from_cubin_ext2(const void *fatbin_header, uint64_t *module, void *a, void *b,
                                                 uint32_t c) {
    (void)a, (void)b, (void)c;
    return cuModuleLoadData(module, fatbin_header);
}

/* TOOLS_RUNTIME_CALLBACK_HOOKS: cudart writes into these buffers; they only need to exist. */
static uint32_t hooks_buffer_a[1024];
static uint32_t hooks_buffer_b[14];
static dark_result hooks_buffer_2(void **ptr, size_t *size) {
    if (ptr)
        *ptr = hooks_buffer_a;
    if (size)
        *size = sizeof hooks_buffer_a;
    return DARK_SUCCESS;
}
static dark_result hooks_buffer_6(void **ptr, size_t *size) {
    if (ptr)
        *ptr = hooks_buffer_b;
    if (size)
        *size = sizeof hooks_buffer_b;
    return DARK_SUCCESS;
}

/* TOOLS_TLS[2] (void **out), then 21318c60[4] (void *tls, uint64_t *out): cuBLASLt 13 asks for the calling
 * thread's tools state and then something of it before each call (cublasSgemm); a failure of either makes
 * it answer CUBLAS_STATUS_NOT_SUPPORTED. No tool is attached: a zeroed per-thread block and 0. */
static __thread uint64_t tools_tls_block[32];
static dark_result tools_tls_2(void **out) {
    if (!out)
        return DARK_INVALID_VALUE;
    *out = tools_tls_block;
    return DARK_SUCCESS;
}
static dark_result runtime_13_4_slot4(void *tls, uint64_t *out) {
    (void)tls;
    if (out)
        *out = 0;
    return DARK_SUCCESS;
}

/* 21318c60[51] (object, key, void **out) and [39] (object, data, uint64_t *out): cuBLAS 13 asks before each
 * launch for a tools record of the launch and then for something of it; both are filled only while a tool
 * is attached. None is: an empty record and 0, which cuBLAS takes as "nothing to report". */
static uint64_t no_tools_record[64];
static dark_result runtime_13_4_slot51(void *object, uint64_t key, void **out) {
    (void)object;
    if (!out)
        return DARK_INVALID_VALUE;
    if (key == UINT64_MAX)
        return DARK_INVALID_HANDLE;
    *out = no_tools_record;
    return DARK_SUCCESS;
}
static dark_result runtime_13_4_slot39(void *object, void *data, uint64_t *out) {
    (void)object;
    if (!data || !out)
        return DARK_INVALID_VALUE;
    *out = 0;
    return DARK_SUCCESS;
}

/* TOOLS_MODULE (6e163fbe...) slot 7 (context, module, callback, user): hands each function of the module to
 * callback(user, function, module) and answers how many it handed; cuFFT takes the one kernel of each module
 * it loads this way (a module of one kernel must answer 1). A bad module answers its error code. */
typedef void (*module_function_cb)(void *user, uint64_t function, uint64_t module);
static int32_t tools_module_functions(dark_ctx ctx, uint64_t module, module_function_cb cb, void *user) {
    (void)ctx;
    unsigned n = 0;
    int32_t r = cuModuleGetFunctionCount(&n, module);
    if (r != 0)
        return r;
    if (!cb)
        return DARK_INVALID_VALUE;
    uint64_t *fns = n ? calloc(n, sizeof *fns) : NULL;
    if (n && !fns)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    if (n && (r = cuModuleEnumerateFunctions(fns, n, module)) != 0) {
        free(fns);
        return r;
    }
    for (unsigned i = 0; i < n; i++)
        cb(user, fns[i], module);
    free(fns);
    return (int32_t)n;
}

/* CONTEXT_CHECKS */
static dark_result ctx_check_2(dark_ctx ctx, uint32_t *out, const void **unused) {
    (void)ctx, (void)unused;
    if (out)
        *out = 0;
    return DARK_SUCCESS;
}
static uint32_t ctx_check_3(void) { return 0; }

/* CTX_CREATE_BYPASS */
static dark_result ctx_create_bypass(uint64_t *ctx, unsigned flags, int dev) { return cuCtxCreate_v2(ctx, flags, dev); }

/* ---------------------------------------------------------------------------------------------------
 * CONTEXT_LOCAL_STORAGE: (context, key) -> value with an optional destructor. */

typedef void (*cls_dtor)(dark_ctx ctx, void *key, void *value);
typedef struct cls_entry {
    dark_ctx ctx;
    void *key;
    void *value;
    cls_dtor dtor;
    struct cls_entry *next;
} cls_entry;

static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
static cls_entry *cls_head;

static dark_result cls_resolve(dark_ctx *ctx) {
    if (*ctx)
        return DARK_SUCCESS;
    dark_result r = cuCtxGetCurrent(ctx);
    if (r)
        return r;
    return *ctx ? DARK_SUCCESS : 201 /* CUDA_ERROR_INVALID_CONTEXT */;
}

static cls_entry **cls_find(dark_ctx ctx, void *key) {
    cls_entry **p = &cls_head;
    while (*p && !((*p)->ctx == ctx && (*p)->key == key))
        p = &(*p)->next;
    return p;
}

static dark_result cls_put(dark_ctx ctx, void *key, void *value, cls_dtor dtor) {
    dark_result r = cls_resolve(&ctx);
    if (r)
        return r;
    pthread_mutex_lock(&cls_lock);
    cls_entry **p = cls_find(ctx, key);
    if (*p) {
        (*p)->value = value;
        (*p)->dtor = dtor;
    } else {
        cls_entry *e = calloc(1, sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&cls_lock);
            return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
        }
        e->ctx = ctx;
        e->key = key;
        e->value = value;
        e->dtor = dtor;
        e->next = cls_head;
        cls_head = e;
    }
    pthread_mutex_unlock(&cls_lock);
    return DARK_SUCCESS;
}

static dark_result cls_delete(dark_ctx ctx, void *key) {
    dark_result r = cls_resolve(&ctx);
    if (r)
        return r;
    pthread_mutex_lock(&cls_lock);
    cls_entry **p = cls_find(ctx, key);
    cls_entry *e = *p;
    if (e)
        *p = e->next;
    pthread_mutex_unlock(&cls_lock);
    if (!e)
        return DARK_INVALID_HANDLE;
    free(e);
    return DARK_SUCCESS;
}

static dark_result cls_get(void **value, dark_ctx ctx, void *key) {
    if (!value)
        return DARK_INVALID_VALUE;
    dark_result r = cls_resolve(&ctx);
    if (r)
        return r;
    pthread_mutex_lock(&cls_lock);
    cls_entry *e = *cls_find(ctx, key);
    if (e)
        *value = e->value;
    pthread_mutex_unlock(&cls_lock);
    return e ? DARK_SUCCESS : DARK_INVALID_HANDLE;
}

/* Called by the driver (zluda_py/darkapi.py) when a context is destroyed or a primary context is reset or
 * finally released: run and drop that context's entries. Destructors run unlocked: they may call back. */
void zluda_dark_context_destroyed(uint64_t ctx) {
    for (;;) {
        pthread_mutex_lock(&cls_lock);
        cls_entry **p = &cls_head;
        while (*p && (*p)->ctx != ctx)
            p = &(*p)->next;
        cls_entry *e = *p;
        if (e)
            *p = e->next;
        pthread_mutex_unlock(&cls_lock);
        if (!e)
            return;
        if (e->dtor)
            e->dtor(e->ctx, e->key, e->value);
        free(e);
    }
}

/* ---------------------------------------------------------------------------------------------------
 * The tables. Slot 0 holds the table's size in bytes, except CONTEXT_LOCAL_STORAGE (no size slot). */

static dark_result integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);

static const void *CUDART_INTERFACE[13] = {
    (void *)(13 * 8), cudart_module_from_cubin, cudart_primary_ctx, STUB, STUB, STUB,
    cudart_module_from_cubin_ext1, dark_nothing, cudart_module_from_cubin_ext2, STUB, STUB, STUB, dark_success};
static const void *TOOLS_TLS[4] = {(void *)(4 * 8), STUB, tools_tls_2, STUB};
static const void *TOOLS_RUNTIME_CALLBACK_HOOKS[7] = {
    (void *)(7 * 8), STUB, hooks_buffer_2, STUB, STUB, STUB, hooks_buffer_6};
static const void *CONTEXT_LOCAL_STORAGE[4] = {cls_put, cls_delete, cls_get, NULL};
static const void *CONTEXT_CHECKS[4] = {(void *)(4 * 8), STUB, ctx_check_2, ctx_check_3};
static const void *INTEGRITY_CHECK[3] = {(void *)(3 * 8), integrity_check, STUB};
static const void *CTX_CREATE_BYPASS[2] = {(void *)(2 * 8), ctx_create_bypass};
static const void *HEAP_ACCESS[3] = {(void *)(3 * 8), STUB, STUB};
static const void *DEVICE_EXTENDED_RT[26] = {
    (void *)(26 * 8), STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB,
    STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB};

/* (unnamed, 21318c60...): CUDA 13.4+ runtimes refuse to start without it. NVIDIA's has 93 slots (slot 91
 * NULL, tests/data/nvidia_export_tables_13.json). cudart 13.5 calls only slots 51 and 39, and only on its
 * tools-callback path, which stays off while the TOOLS_RUNTIME_CALLBACK_HOOKS buffers are zero; it skips
 * the callback's extra data when they fail, so stubs are a faithful answer there. cuBLASLt 13 calls slot 4
 * (above) on every call, cuBLAS 13 slots 51 and 39 before every launch. */
#define S8 STUB, STUB, STUB, STUB, STUB, STUB, STUB, STUB
static const void *RUNTIME_13_4[93] = {
    (void *)(93 * 8), STUB, STUB, STUB, runtime_13_4_slot4, STUB, STUB, STUB, S8, S8, S8,
    STUB, STUB, STUB, STUB, STUB, STUB, STUB, runtime_13_4_slot39, S8,
    STUB, STUB, STUB, runtime_13_4_slot51, STUB, STUB, STUB, STUB, S8, S8, S8, S8,
    STUB, STUB, STUB, NULL, STUB};
#undef S8
static const void *TOOLS_MODULE[8] = {(void *)(8 * 8), STUB, STUB, STUB, STUB, STUB, STUB, tools_module_functions};

static const struct {
    uint8_t id[16];
    const void *const *table;
} DARK_TABLES[] = {
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9}, CUDART_INTERFACE},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc}, TOOLS_TLS},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66},
     TOOLS_RUNTIME_CALLBACK_HOOKS},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93},
     CONTEXT_LOCAL_STORAGE},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e}, CONTEXT_CHECKS},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2}, INTEGRITY_CHECK},
    {{0x0c, 0xa5, 0x0b, 0x8c, 0x10, 0x04, 0x92, 0x9a, 0x89, 0xa7, 0xd0, 0xdf, 0x10, 0xe7, 0x72, 0x86}, CTX_CREATE_BYPASS},
    {{0x19, 0x5b, 0xcb, 0xf4, 0xd6, 0x7d, 0x02, 0x4a, 0xac, 0xc5, 0x1d, 0x29, 0xce, 0xa6, 0x31, 0xae}, HEAP_ACCESS},
    {{0xb1, 0x05, 0x41, 0xe1, 0xf7, 0xc7, 0xc7, 0x4a, 0x9f, 0x64, 0xf2, 0x23, 0xbe, 0x99, 0xf1, 0xe2},
     DEVICE_EXTENDED_RT},
    {{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2}, RUNTIME_13_4},
    {{0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e}, TOOLS_MODULE},
};

/* The table for a 16-byte export-table id, or NULL (cuGetExportTable then answers CUDA_ERROR_INVALID_VALUE). */
const void *zluda_dark_export_table(const uint8_t *id) {
    if (!id)
        return NULL;
    for (size_t i = 0; i < sizeof DARK_TABLES / sizeof DARK_TABLES[0]; i++)
        if (memcmp(DARK_TABLES[i].id, id, 16) == 0)
            return DARK_TABLES[i].table;
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * The integrity check: cudart verifies HMAC-MD2 over the process, the tables and the devices. */

static const uint8_t INTEGRITY_KEY[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                                          0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

#define MAX_HASHED_DEVICES 64

/* The message cudart hashes for `version` at `unix_seconds` (48 bytes + 28 per device); returns its
 * length or 0 on failure. Exported so tests can recompute the digest independently. */
size_t zluda_dark_integrity_message(uint32_t version, uint64_t unix_seconds, uint8_t *msg,
                                                     size_t capacity) {
    int driver_version = 0, count = 0;
    if (cuDriverGetVersion(&driver_version) || cuDeviceGetCount(&count))
        return 0;
    if (count < 0)
        count = 0;
    if (count > MAX_HASHED_DEVICES)
        count = MAX_HASHED_DEVICES;
    size_t len = 48 + 28 * (size_t)count;
    if (capacity < len)
        return 0;
    put_u32(msg + 0, (uint32_t)driver_version);
    put_u32(msg + 4, version);
    put_u32(msg + 8, (uint32_t)getpid());
    put_u32(msg + 12, (uint32_t)(uintptr_t)pthread_self());
    put_u64(msg + 16, (uint64_t)(uintptr_t)CUDART_INTERFACE);
    put_u64(msg + 24, (uint64_t)(uintptr_t)INTEGRITY_CHECK);
    put_u64(msg + 32, (uint64_t)(uintptr_t)INTEGRITY_CHECK[1]);
    put_u64(msg + 40, unix_seconds);
    for (int i = 0; i < count; i++) {
        uint8_t *d = msg + 48 + 28 * (size_t)i;
        int dev = 0, domain = 0, bus = 0, device = 0;
        if (cuDeviceGet(&dev, i) || cuDeviceGetUuid(d, dev) || cuDeviceGetAttribute(&domain, 50, dev) ||
            cuDeviceGetAttribute(&bus, 33, dev) || cuDeviceGetAttribute(&device, 34, dev))
            return 0;
        put_u32(d + 16, (uint32_t)domain);
        put_u32(d + 20, (uint32_t)bus);
        put_u32(d + 24, (uint32_t)device);
    }
    return len;
}

static dark_result integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]) {
    if (!out)
        return DARK_INVALID_VALUE;
    if (version % 10 == 0) {
        out[0] = 0x3341181C03CB675CULL;
        out[1] = 0x8ED383AA1F4CD1E8ULL;
        return DARK_SUCCESS;
    }
    if (version % 10 == 1) {
        out[0] = 0x1841181C03CB675CULL;
        out[1] = 0x8ED383AA1F4CD1E8ULL;
        return DARK_SUCCESS;
    }
    uint8_t msg[48 + 28 * MAX_HASHED_DEVICES];
    size_t len = zluda_dark_integrity_message(version, unix_seconds, msg, sizeof msg);
    if (!len)
        return 999; /* CUDA_ERROR_UNKNOWN */
    uint8_t digest[16];
    zluda_hmac_md2(INTEGRITY_KEY, sizeof INTEGRITY_KEY, msg, len, digest);
    memcpy(&out[0], digest, 8);
    memcpy(&out[1], digest + 8, 8);
    return DARK_SUCCESS;
}

/* For tests: the check itself, as cudart calls it through the table. */
dark_result zluda_dark_integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t *out) {
    return ((dark_result(*)(uint32_t, uint64_t, uint64_t *))INTEGRITY_CHECK[1])(version, unix_seconds, out);
}
