/* The Driver API's runtime objects exercised through the real libcuda.so.1, from C, as a CUDA user calls
 * them: devices, contexts, memory, copies, streams, events, pointer attributes, pools, bad input, leaks.
 * Prints one line per failed check and "ALL PASSED" at the end; exits 1 on any failure. */
/* deprecated entry points (cuDeviceComputeCapability, cuDeviceGetProperties) are tested too */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures = 0;
static int checks = 0;

#define EXPECT(call, want)                                                                  \
    do {                                                                                    \
        CUresult r_ = (call);                                                               \
        checks++;                                                                           \
        if (r_ != (want)) {                                                                 \
            const char *n_ = "?";                                                           \
            cuGetErrorName(r_, &n_);                                                        \
            printf("FAIL %s:%d: %s -> %s (%d), want %d\n", __FILE__, __LINE__, #call, n_,   \
                   (int)r_, (int)(want));                                                   \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)
#define OK(call) EXPECT(call, CUDA_SUCCESS)
#define CHECK(cond)                                                                         \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                          \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms) { usleep(ms * 1000); }

static uint32_t rng_state;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static void fill_random(void *p, size_t n) {
    for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)rnd();
}

/* ---- host functions: an order log and gates that hold a stream until the test opens them ---- */
static int order_log[64];
static int order_len = 0;
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;

static void CUDA_CB log_order(void *user) {
    pthread_mutex_lock(&order_mu);
    if (order_len < 64) order_log[order_len++] = (int)(intptr_t)user;
    pthread_mutex_unlock(&order_mu);
}
static int order_count(void) {
    pthread_mutex_lock(&order_mu);
    int n = order_len;
    pthread_mutex_unlock(&order_mu);
    return n;
}
static void order_reset(void) {
    pthread_mutex_lock(&order_mu);
    order_len = 0;
    pthread_mutex_unlock(&order_mu);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate_t;
static void gate_init(gate_t *g) {
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
}
static void CUDA_CB gate_wait(void *user) {
    gate_t *g = user;
    pthread_mutex_lock(&g->mu);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}
static void gate_open(gate_t *g) {
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void CUDA_CB sleep_20ms(void *user) {
    (void)user;
    sleep_ms(20);
}

static CUstream cb_stream_seen;
static CUresult cb_status_seen = (CUresult)-1;
static void *cb_user_seen;
static void CUDA_CB stream_callback(CUstream s, CUresult status, void *user) {
    cb_stream_seen = s;
    cb_status_seen = status;
    cb_user_seen = user;
}

/* ---------------------------------------------------------------------------------------------- */
static void test_uninitialised(void) {
    int n = -1;
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    EXPECT(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(cuDeviceGet(&d, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(cuCtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    OK(cuInit(0));
    OK(cuInit(0));
}

static void test_devices(void) {
    int n = 0, v = 0;
    CUdevice dev;
    OK(cuDeviceGetCount(&n));
    CHECK(n >= 1);
    EXPECT(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGet(&dev, 0));
    CHECK(dev == 0);
    EXPECT(cuDeviceGet(&dev, n), CUDA_ERROR_INVALID_DEVICE);
    EXPECT(cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);

    char name[256];
    OK(cuDeviceGetName(name, sizeof name, 0));
    CHECK(strncmp(name, "ZLUDA CPU (", 11) == 0);
    char tiny[4] = {'x', 'x', 'x', 'x'};
    OK(cuDeviceGetName(tiny, 4, 0));
    CHECK(tiny[3] == 0 && strncmp(tiny, "ZLU", 3) == 0);
    EXPECT(cuDeviceGetName(NULL, 10, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetName(name, sizeof name, 99), CUDA_ERROR_INVALID_DEVICE);

    CUuuid u1, u2, u3;
    memset(&u1, 0, sizeof u1);
    memset(&u2, 1, sizeof u2);
    OK(cuDeviceGetUuid(&u1, 0));
    OK(cuDeviceGetUuid_v2(&u2, 0));
    OK(cuDeviceGetUuid(&u3, 0));
    CHECK(memcmp(&u1, &u2, sizeof u1) == 0 && memcmp(&u1, &u3, sizeof u1) == 0);
    int nonzero = 0;
    for (int i = 0; i < 16; i++) nonzero |= u1.bytes[i];
    CHECK(nonzero);
    EXPECT(cuDeviceGetUuid(NULL, 0), CUDA_ERROR_INVALID_VALUE);

    size_t total = 0;
    OK(cuDeviceTotalMem(&total, 0));
    CHECK(total > ((size_t)256 << 20));

    struct { CUdevice_attribute a; int want; } exact[] = {
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024},
        {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
        {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
        {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
        {CU_DEVICE_ATTRIBUTE_INTEGRATED, 0},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT},
        {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1},
        {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
        {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
        {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 1},
        {CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, 1},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 8},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 6},
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        v = -12345;
        OK(cuDeviceGetAttribute(&v, exact[i].a, 0));
        if (v != exact[i].want) {
            printf("FAIL attribute %d = %d, want %d\n", (int)exact[i].a, v, exact[i].want);
            failures++;
        }
    }
    int optin = 0, sm = 0, clock = 0, per_sm = 0;
    OK(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0));
    OK(cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 0));
    OK(cuDeviceGetAttribute(&sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    OK(cuDeviceGetAttribute(&clock, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0));
    CHECK(optin >= 48 * 1024 && per_sm >= optin && sm >= 1 && clock > 0);
    /* every attribute the driver's release names answers (CUDA 13.5's cuda.h, whose declarations the shim
       is built from, ends at 162: past this header's CU_DEVICE_ATTRIBUTE_MAX); the ones past the end do not */
    const int driver_attribute_max = 162;
    CHECK(driver_attribute_max >= (int)CU_DEVICE_ATTRIBUTE_MAX);
    for (int a = 1; a < driver_attribute_max; a++) {
        CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0);
        if (r != CUDA_SUCCESS) {
            printf("FAIL attribute %d -> %d\n", a, (int)r);
            failures++;
        }
    }
    EXPECT(cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetAttribute(&v, (CUdevice_attribute)driver_attribute_max, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 7), CUDA_ERROR_INVALID_DEVICE);

    int major = 0, minor = 0;
    OK(cuDeviceComputeCapability(&major, &minor, 0));
    CHECK(major == 8 && minor == 6);
    CUdevprop prop;
    OK(cuDeviceGetProperties(&prop, 0));
    CHECK(prop.SIMDWidth == 32 && prop.maxThreadsPerBlock == 1024 && prop.maxThreadsDim[2] == 64);

    char bus[32];
    CUdevice found = -1;
    OK(cuDeviceGetPCIBusId(bus, sizeof bus, 0));
    OK(cuDeviceGetByPCIBusId(&found, bus));
    CHECK(found == 0);
    EXPECT(cuDeviceGetByPCIBusId(&found, "not a bus id"), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetByPCIBusId(&found, "00ff:ee:1f.0"), CUDA_ERROR_INVALID_DEVICE);
    int peer = -1;
    OK(cuDeviceCanAccessPeer(&peer, 0, 0));
    CHECK(peer == 0);
}

/* ---- contexts ---- */
typedef struct {
    CUcontext ctx;
    CUdeviceptr mem;
    int ok;
} thread_arg_t;

static void *thread_uses_context(void *p) {
    thread_arg_t *t = p;
    CUcontext cur = (CUcontext)1;
    CUdeviceptr d;
    t->ok = cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL;
    t->ok &= cuMemAlloc(&d, 64) == CUDA_ERROR_INVALID_CONTEXT;
    t->ok &= cuCtxPushCurrent(t->ctx) == CUDA_SUCCESS;
    uint32_t values[16];
    for (int i = 0; i < 16; i++) values[i] = 0xC0DE0000u + i;
    t->ok &= cuMemcpyHtoD(t->mem, values, sizeof values) == CUDA_SUCCESS;
    CUcontext popped = NULL;
    t->ok &= cuCtxPopCurrent(&popped) == CUDA_SUCCESS && popped == t->ctx;
    return NULL;
}

typedef struct {
    CUcontext ctx;
    gate_t pushed, destroyed;
    CUresult after;
} destroyed_arg_t;

static void *thread_keeps_destroyed_context(void *p) {
    destroyed_arg_t *t = p;
    CUdeviceptr d;
    cuCtxPushCurrent(t->ctx);
    gate_open(&t->pushed);
    gate_wait(&t->destroyed);
    t->after = cuMemAlloc(&d, 64);
    cuCtxPopCurrent(NULL);
    return NULL;
}

static CUcontext test_contexts(void) {
    CUcontext primary = NULL, cur = NULL, ctx = NULL, popped = NULL;
    unsigned int flags = 99;
    int active = -1;
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 0);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    CHECK(primary != NULL);
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 1);
    OK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(flags == CU_CTX_SCHED_BLOCKING_SYNC);
    EXPECT(cuDevicePrimaryCtxSetFlags(0, 0x3), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDevicePrimaryCtxRetain(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDevicePrimaryCtxRetain(&cur, 5), CUDA_ERROR_INVALID_DEVICE);

    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == NULL);
    EXPECT(cuCtxGetCurrent(NULL), CUDA_ERROR_INVALID_VALUE);
    CUdevice dev = -1;
    EXPECT(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxSetCurrent(primary));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    OK(cuCtxGetDevice(&dev));
    CHECK(dev == 0);

    /* a created context becomes current; push/pop nest */
    OK(cuCtxCreate(&ctx, NULL, 0, 0));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == ctx && ctx != primary);
    unsigned long long id1 = 0, id2 = 0;
    OK(cuCtxGetId(ctx, &id1));
    OK(cuCtxGetId(primary, &id2));
    CHECK(id1 != id2 && id1 && id2);
    unsigned int api = 0;
    OK(cuCtxGetApiVersion(ctx, &api));
    CHECK(api >= 3020);
    OK(cuCtxPushCurrent(primary));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    OK(cuCtxPopCurrent(&popped));
    CHECK(popped == primary);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == ctx);
    size_t limit = 0;
    OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
    OK(cuCtxGetLimit(&limit, CU_LIMIT_STACK_SIZE));
    CHECK(limit == 4096);
    OK(cuCtxGetLimit(&limit, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK(limit > 0);
    EXPECT(cuCtxGetLimit(&limit, (CUlimit)0x77), CUDA_ERROR_UNSUPPORTED_LIMIT);
    CUfunc_cache cache = CU_FUNC_CACHE_PREFER_NONE;
    OK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
    OK(cuCtxGetCacheConfig(&cache));
    CHECK(cache == CU_FUNC_CACHE_PREFER_SHARED);
    EXPECT(cuCtxSetCacheConfig((CUfunc_cache)9), CUDA_ERROR_INVALID_VALUE);
    int least = 1, greatest = 1;
    OK(cuCtxGetStreamPriorityRange(&least, &greatest));
    CHECK(least == 0 && greatest < 0);
    OK(cuCtxSetFlags(CU_CTX_SCHED_YIELD));
    OK(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD);
    OK(cuCtxSynchronize());

    /* memory and streams of a destroyed context go with it; its handle is rejected */
    CUdeviceptr owned;
    CUstream owned_stream;
    OK(cuMemAlloc(&owned, 4096));
    OK(cuStreamCreate(&owned_stream, 0));
    OK(cuCtxDestroy(ctx));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    EXPECT(cuCtxPushCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxSetCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxDestroy(ctx), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxGetId(ctx, &id1), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuStreamQuery(owned_stream), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuMemFree(owned), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuCtxDestroy(primary), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxEnablePeerAccess(primary, 0), CUDA_ERROR_INVALID_DEVICE); /* its own device */

    /* other threads start with no context and can use one pushed there */
    thread_arg_t t = {primary, 0, 0};
    OK(cuMemAlloc(&t.mem, 64));
    pthread_t th;
    pthread_create(&th, NULL, thread_uses_context, &t);
    pthread_join(th, NULL);
    CHECK(t.ok);
    uint32_t back[16];
    OK(cuMemcpyDtoH(back, t.mem, sizeof back));
    CHECK(back[0] == 0xC0DE0000u && back[15] == 0xC0DE000Fu);
    OK(cuMemFree(t.mem));

    /* a context destroyed while current in another thread: that thread sees CONTEXT_IS_DESTROYED */
    destroyed_arg_t d;
    gate_init(&d.pushed);
    gate_init(&d.destroyed);
    OK(cuCtxCreate(&d.ctx, NULL, 0, 0));
    OK(cuCtxPopCurrent(NULL));
    pthread_create(&th, NULL, thread_keeps_destroyed_context, &d);
    gate_wait(&d.pushed);
    OK(cuCtxDestroy(d.ctx));
    gate_open(&d.destroyed);
    pthread_join(th, NULL);
    CHECK(d.after == CUDA_ERROR_CONTEXT_IS_DESTROYED);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    return primary;
}

static void test_primary_inactive_as_current(void) {
    /* cudart makes the primary context current before retaining it: the handle must work inactive */
    CUcontext primary, cur;
    unsigned int flags;
    int active;
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    OK(cuDevicePrimaryCtxRelease(0));
    OK(cuDevicePrimaryCtxRelease(0)); /* the retain of test_contexts: now inactive */
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 0);
    OK(cuCtxSetCurrent(primary));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    CUdevice dev = -1;
    OK(cuCtxGetDevice(&dev));
    CHECK(dev == 0);
    CUcontext again = NULL;
    OK(cuDevicePrimaryCtxRetain(&again, 0));
    CHECK(again == primary); /* the handle is stable across activations */
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 1);
}

/* ---- memory ---- */
static void test_memory(void) {
    enum { N = 1 << 16 };
    unsigned char *h1 = malloc(N), *h2 = malloc(N);
    CUdeviceptr a, b;
    fill_random(h1, N);
    memset(h2, 0xEE, N);
    OK(cuMemAlloc(&a, N));
    OK(cuMemAlloc(&b, N));
    CHECK(a % 256 == 0 && b % 256 == 0 && a != b);
    OK(cuMemcpyHtoD(a, h1, N));
    OK(cuMemcpyDtoD(b, a, N));
    OK(cuMemcpyDtoH(h2, b, N));
    CHECK(memcmp(h1, h2, N) == 0);
    /* unified addressing: generic copies in every direction, host to host included */
    unsigned char *h3 = malloc(N);
    memset(h3, 0, N);
    OK(cuMemcpy((CUdeviceptr)h3, b + 100, N - 100));
    CHECK(memcmp(h3, h1 + 100, N - 100) == 0);
    OK(cuMemcpy((CUdeviceptr)h2, (CUdeviceptr)h1, N));
    CHECK(memcmp(h2, h1, N) == 0);

    CUdeviceptr base = 0;
    size_t size = 0;
    OK(cuMemGetAddressRange(&base, &size, b + 1234));
    CHECK(base == b && size == N);
    EXPECT(cuMemGetAddressRange(&base, &size, (CUdeviceptr)h3), CUDA_ERROR_NOT_FOUND);
    size_t free_b = 0, total_b = 0;
    OK(cuMemGetInfo(&free_b, &total_b));
    CHECK(free_b > 0 && free_b <= total_b);

    /* memset patterns */
    OK(cuMemsetD8(a, 0xAB, N));
    OK(cuMemcpyDtoH(h2, a, N));
    int good = 1;
    for (int i = 0; i < N; i++) good &= h2[i] == 0xAB;
    CHECK(good);
    OK(cuMemsetD16(a + 2, 0xBEEF, 100));
    OK(cuMemcpyDtoH(h2, a, 256));
    uint16_t *s16 = (uint16_t *)h2;
    CHECK(s16[0] == 0xABAB && s16[1] == 0xBEEF && s16[100] == 0xBEEF && s16[101] == 0xABAB);
    OK(cuMemsetD32(a + 4, 0xDEADBEEF, 1000));
    OK(cuMemcpyDtoH(h2, a, 8192));
    uint32_t *s32 = (uint32_t *)h2;
    CHECK(s32[0] == 0xBEEFABAB && s32[1] == 0xDEADBEEF && s32[1000] == 0xDEADBEEF);
    CHECK(s32[1001] == 0xABABABAB);
    EXPECT(cuMemsetD32(a + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemsetD16(a + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemsetD8(a, 0, N + 1), CUDA_ERROR_INVALID_VALUE);
    /* 2D memset: 10 rows of 7 u32 with pitch 64, the gaps untouched */
    OK(cuMemsetD8(a, 0, 1024));
    OK(cuMemsetD2D32(a, 64, 0x01020304, 7, 10));
    OK(cuMemcpyDtoH(h2, a, 1024));
    good = 1;
    for (int row = 0; row < 12; row++)
        for (int col = 0; col < 16; col++) {
            uint32_t want = (row < 10 && col < 7) ? 0x01020304 : 0;
            good &= ((uint32_t *)h2)[row * 16 + col] == want;
        }
    CHECK(good);

    /* pitched allocation and 2D copies with offsets */
    CUdeviceptr pitched;
    size_t pitch = 0;
    OK(cuMemAllocPitch(&pitched, &pitch, 100, 20, 4));
    CHECK(pitch >= 100 && pitch % 32 == 0);
    EXPECT(cuMemAllocPitch(&pitched, &pitch, 100, 20, 3), CUDA_ERROR_INVALID_VALUE);
    unsigned char src2d[20][100], dst2d[20][100];
    fill_random(src2d, sizeof src2d);
    memset(dst2d, 0, sizeof dst2d);
    CUDA_MEMCPY2D c2;
    memset(&c2, 0, sizeof c2);
    c2.srcMemoryType = CU_MEMORYTYPE_HOST;
    c2.srcHost = src2d;
    c2.srcPitch = 100;
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.dstDevice = pitched;
    c2.dstPitch = pitch;
    c2.WidthInBytes = 100;
    c2.Height = 20;
    OK(cuMemcpy2D(&c2));
    memset(&c2, 0, sizeof c2);
    c2.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.srcDevice = pitched;
    c2.srcPitch = pitch;
    c2.srcXInBytes = 10;
    c2.srcY = 2;
    c2.dstMemoryType = CU_MEMORYTYPE_HOST;
    c2.dstHost = dst2d;
    c2.dstPitch = 100;
    c2.dstXInBytes = 5;
    c2.dstY = 1;
    c2.WidthInBytes = 50;
    c2.Height = 15;
    OK(cuMemcpy2DUnaligned(&c2));
    good = 1;
    for (int y = 0; y < 20; y++)
        for (int x = 0; x < 100; x++) {
            int inside = y >= 1 && y < 16 && x >= 5 && x < 55;
            unsigned char want = inside ? src2d[y - 1 + 2][x - 5 + 10] : 0;
            good &= dst2d[y][x] == want;
        }
    CHECK(good);
    c2.Height = 40; /* runs past the pitched allocation */
    EXPECT(cuMemcpy2D(&c2), CUDA_ERROR_INVALID_VALUE);
    c2.Height = 2;
    c2.srcPitch = 10; /* pitch smaller than the width */
    EXPECT(cuMemcpy2D(&c2), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpy2D(NULL), CUDA_ERROR_INVALID_VALUE);

    /* 3D: a 6x5x4 box out of a 16x8x6 volume at offset (3,2,1) into a packed host buffer */
    unsigned char vol[6][8][16], box[4][5][6];
    fill_random(vol, sizeof vol);
    memset(box, 0, sizeof box);
    CUdeviceptr dvol;
    OK(cuMemAlloc(&dvol, sizeof vol));
    OK(cuMemcpyHtoD(dvol, vol, sizeof vol));
    CUDA_MEMCPY3D c3;
    memset(&c3, 0, sizeof c3);
    c3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c3.srcDevice = dvol;
    c3.srcPitch = 16;
    c3.srcHeight = 8;
    c3.srcXInBytes = 3;
    c3.srcY = 2;
    c3.srcZ = 1;
    c3.dstMemoryType = CU_MEMORYTYPE_HOST;
    c3.dstHost = box;
    c3.dstPitch = 6;
    c3.dstHeight = 5;
    c3.WidthInBytes = 6;
    c3.Height = 5;
    c3.Depth = 4;
    OK(cuMemcpy3D(&c3));
    good = 1;
    for (int z = 0; z < 4; z++)
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 6; x++) good &= box[z][y][x] == vol[z + 1][y + 2][x + 3];
    CHECK(good);
    c3.Depth = 6; /* z 1..6 runs past the volume */
    EXPECT(cuMemcpy3D(&c3), CUDA_ERROR_INVALID_VALUE);
    c3.Depth = 4;
    c3.reserved0 = (void *)1;
    EXPECT(cuMemcpy3D(&c3), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(dvol));
    OK(cuMemFree(pitched));

    /* bad input: NULL outputs, absurd sizes, ranges, freed / foreign / interior pointers, double free */
    CUdeviceptr p;
    EXPECT(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc(&p, (size_t)1 << 62), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(cuMemAlloc(&p, (size_t)-1), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(cuMemcpyHtoD(a + 1, h1, N), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyDtoH(h2, a + N, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyDtoD(a, b + 8, N), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyDtoH(h2, (CUdeviceptr)h1, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD((CUdeviceptr)h2, h1, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD(a, (void *)0x1000, 16), CUDA_ERROR_INVALID_VALUE);        /* unmapped host */
    EXPECT(cuMemcpyDtoH((void *)16, a, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpy((CUdeviceptr)h2, (CUdeviceptr)h1, (size_t)1 << 40), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD(a, NULL, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFree(a + 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFree((CUdeviceptr)h1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(a));
    EXPECT(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD(a, h1, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemsetD8(a, 0, 16), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(b));

    /* page-locked and registered host memory, managed memory */
    void *ph = NULL;
    OK(cuMemHostAlloc(&ph, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    unsigned int hflags = 0;
    OK(cuMemHostGetFlags(&hflags, ph));
    CHECK(hflags == (CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CUdeviceptr mapped = 0;
    OK(cuMemHostGetDevicePointer(&mapped, ph, 0));
    CHECK(mapped == (CUdeviceptr)ph);
    memset(ph, 0x5A, 4096);
    OK(cuMemAlloc(&a, 4096));
    OK(cuMemcpyDtoD(a, mapped, 4096));
    OK(cuMemcpyDtoH(h2, a, 4096));
    CHECK(h2[0] == 0x5A && h2[4095] == 0x5A);
    EXPECT(cuMemHostAlloc(&ph, 16, 0x80), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFree((CUdeviceptr)ph), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFreeHost((void *)a), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(ph));
    EXPECT(cuMemFreeHost(ph), CUDA_ERROR_INVALID_VALUE);
    void *ph2 = NULL;
    OK(cuMemAllocHost(&ph2, 100));
    OK(cuMemFreeHost(ph2));

    OK(cuMemHostRegister(h3, N, CU_MEMHOSTREGISTER_DEVICEMAP));
    EXPECT(cuMemHostRegister(h3 + 64, 64, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(cuMemHostGetDevicePointer(&mapped, h3 + 10, 0));
    CHECK(mapped == (CUdeviceptr)(h3 + 10));
    OK(cuMemHostUnregister(h3));
    EXPECT(cuMemHostUnregister(h3), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    EXPECT(cuMemHostGetDevicePointer(&mapped, h3, 0), CUDA_ERROR_INVALID_VALUE);

    CUdeviceptr managed;
    OK(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
    ((int *)managed)[7] = 77; /* managed memory is host-accessible */
    int back = 0;
    OK(cuMemcpyDtoH(&back, managed + 28, 4));
    CHECK(back == 77);
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    OK(cuMemPrefetchAsync(managed, 4096, loc, 0, 0));
    OK(cuMemAdvise(managed, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, loc));
    EXPECT(cuMemAdvise(managed, 4096, (CUmem_advise)99, loc), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAdvise(managed, 8192, CU_MEM_ADVISE_SET_READ_MOSTLY, loc), CUDA_ERROR_INVALID_VALUE);
    int range_val = -7;
    OK(cuMemRangeGetAttribute(&range_val, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, managed, 4096));
    CHECK(range_val == 1);
    OK(cuMemRangeGetAttribute(&range_val, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, managed, 4096));
    CHECK(range_val == CU_DEVICE_INVALID);
    OK(cuMemAdvise(managed, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc));
    OK(cuMemRangeGetAttribute(&range_val, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, managed, 4096));
    CHECK(range_val == 0);
    OK(cuMemRangeGetAttribute(&range_val, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, managed, 4096));
    CHECK(range_val == 0);
    int accessed[3] = {7, 7, 7};
    OK(cuMemAdvise(managed, 4096, CU_MEM_ADVISE_SET_ACCESSED_BY, loc));
    OK(cuMemRangeGetAttribute(accessed, sizeof accessed, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, managed, 4096));
    CHECK(accessed[0] == 0 && accessed[1] == CU_DEVICE_INVALID && accessed[2] == CU_DEVICE_INVALID);
    EXPECT(cuMemRangeGetAttribute(&range_val, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, managed, 4096),
           CUDA_ERROR_INVALID_VALUE);
    {
        CUdeviceptr ptrs[2] = {managed, managed + 2048};
        size_t lens[2] = {2048, 2048}, loc_idx = 0;
        CUmemLocation host_loc = {CU_MEM_LOCATION_TYPE_HOST, 0};
        OK(cuMemPrefetchBatchAsync(ptrs, lens, 2, &host_loc, &loc_idx, 1, 0, 0));
        OK(cuMemRangeGetAttribute(&range_val, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, managed, 4096));
        CHECK(range_val == CU_DEVICE_CPU);
        lens[1] = 4096; /* past the end */
        EXPECT(cuMemPrefetchBatchAsync(ptrs, lens, 2, &host_loc, &loc_idx, 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
        lens[1] = 2048;
        OK(cuMemDiscardBatchAsync(ptrs, lens, 2, 0, 0));
    }
    EXPECT(cuMemAllocManaged(&managed, 16, 0), CUDA_ERROR_INVALID_VALUE);

    /* pointer attributes */
    CUcontext ctx, cur;
    cuCtxGetCurrent(&cur);
    unsigned int mtype = 0, is_managed = 9;
    CUdeviceptr dp = 0, start = 0;
    void *hp = (void *)1;
    int ordinal = -1;
    unsigned long long id_a = 0, id_m = 0;
    size_t rsize = 0;
    OK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 10));
    CHECK(mtype == CU_MEMORYTYPE_DEVICE);
    OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, a));
    CHECK(ctx == cur);
    OK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a + 10));
    CHECK(dp == a + 10);
    OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 10));
    OK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 10));
    CHECK(start == a && rsize == 4096);
    OK(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a));
    CHECK(is_managed == 0);
    OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
    CHECK(ordinal == 0);
    EXPECT(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, a), CUDA_ERROR_INVALID_VALUE);
    OK(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed));
    CHECK(is_managed == 1);
    OK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, managed));
    CHECK(hp == (void *)managed);
    OK(cuPointerGetAttribute(&id_a, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
    OK(cuPointerGetAttribute(&id_m, CU_POINTER_ATTRIBUTE_BUFFER_ID, managed));
    CHECK(id_a != id_m);
    EXPECT(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h1),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuPointerGetAttribute(&mtype, (CUpointer_attribute)999, a), CUDA_ERROR_INVALID_VALUE);
    void *pinned = NULL;
    OK(cuMemAllocHost(&pinned, 64));
    OK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)pinned));
    CHECK(mtype == CU_MEMORYTYPE_HOST);
    OK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)pinned + 8));
    CHECK(hp == (char *)pinned + 8);
    OK(cuMemFreeHost(pinned));

    CUpointer_attribute attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_CONTEXT};
    mtype = 7;
    is_managed = 7;
    ordinal = 7;
    ctx = (CUcontext)7;
    void *data[4] = {&mtype, &is_managed, &ordinal, &ctx};
    OK(cuPointerGetAttributes(4, attrs, data, managed));
    CHECK(mtype == CU_MEMORYTYPE_DEVICE && is_managed == 1 && ordinal == 0 && ctx == cur);
    OK(cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)h1)); /* unknown memory: zeros, success */
    CHECK(mtype == 0 && is_managed == 0 && ctx == NULL);
    OK(cuMemFree(managed));
    OK(cuMemFree(a));
    free(h1);
    free(h2);
    free(h3);
}

/* ---- streams and events ---- */
static void test_streams(void) {
    CUstream s1, s2, nb;
    OK(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
    OK(cuStreamCreateWithPriority(&s2, CU_STREAM_DEFAULT, -1));
    OK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    EXPECT(cuStreamCreate(&s1, 0x10), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    unsigned int flags = 9;
    int prio = 9;
    OK(cuStreamGetFlags(nb, &flags));
    CHECK(flags == CU_STREAM_NON_BLOCKING);
    OK(cuStreamGetPriority(s2, &prio));
    CHECK(prio == -1);
    CUcontext sctx = NULL, cur = NULL;
    cuCtxGetCurrent(&cur);
    OK(cuStreamGetCtx(s1, &sctx));
    CHECK(sctx == cur);
    unsigned long long id1 = 0, id2 = 0;
    OK(cuStreamGetId(s1, &id1));
    OK(cuStreamGetId(s2, &id2));
    CHECK(id1 != id2);
    CUstreamAttrValue av, back_av;
    memset(&av, 0, sizeof av);
    memset(&back_av, 0x55, sizeof back_av);
    av.accessPolicyWindow.num_bytes = 4096;
    av.accessPolicyWindow.hitRatio = 0.5f;
    OK(cuStreamSetAttribute(s1, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &av));
    OK(cuStreamGetAttribute(s1, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &back_av));
    CHECK(back_av.accessPolicyWindow.num_bytes == 4096 && back_av.accessPolicyWindow.hitRatio == 0.5f);
    OK(cuStreamGetAttribute(s2, CU_LAUNCH_ATTRIBUTE_PRIORITY, &back_av));
    CHECK(back_av.priority == -1);
    EXPECT(cuStreamGetAttribute(s1, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &back_av), CUDA_ERROR_INVALID_VALUE);
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    OK(cuStreamIsCapturing(s1, &cap));
    CHECK(cap == CU_STREAM_CAPTURE_STATUS_NONE);
    cap = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    cuuint64_t cap_id = 9;
    size_t ndeps = 9;
    OK(cuStreamGetCaptureInfo(s1, &cap, &cap_id, NULL, NULL, NULL, &ndeps));
    CHECK(cap == CU_STREAM_CAPTURE_STATUS_NONE && ndeps == 0);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == CU_STREAM_CAPTURE_MODE_RELAXED);

    /* in-order execution, asynchronous with the host: copies between host functions */
    enum { N = 1 << 20 };
    unsigned char *pinned_in, *pinned_out;
    OK(cuMemAllocHost((void **)&pinned_in, N));
    OK(cuMemAllocHost((void **)&pinned_out, N));
    fill_random(pinned_in, N);
    memset(pinned_out, 0, N);
    CUdeviceptr d;
    OK(cuMemAlloc(&d, N));
    gate_t g;
    gate_init(&g);
    order_reset();
    OK(cuLaunchHostFunc(s1, gate_wait, &g));
    OK(cuLaunchHostFunc(s1, log_order, (void *)1));
    OK(cuMemcpyHtoDAsync(d, pinned_in, N, s1));
    OK(cuMemsetD8Async(d, 0x11, 16, s1));
    OK(cuMemcpyDtoHAsync(pinned_out, d, N, s1));
    OK(cuLaunchHostFunc(s1, log_order, (void *)2));
    OK(cuStreamAddCallback(s1, stream_callback, (void *)0x1234, 0));
    EXPECT(cuStreamAddCallback(s1, stream_callback, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchHostFunc(s1, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    sleep_ms(20);
    EXPECT(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    CHECK(order_count() == 0 && pinned_out[100] == 0);
    gate_open(&g);
    OK(cuStreamSynchronize(s1));
    OK(cuStreamQuery(s1));
    CHECK(order_count() == 2 && order_log[0] == 1 && order_log[1] == 2);
    CHECK(pinned_out[0] == 0x11 && pinned_out[15] == 0x11 && memcmp(pinned_out + 16, pinned_in + 16, N - 16) == 0);
    CHECK(cb_stream_seen == s1 && cb_status_seen == CUDA_SUCCESS && cb_user_seen == (void *)0x1234);

    /* legacy default stream waits for blocking streams, not for non-blocking ones; and the reverse */
    gate_t g1, g2, g3, g4;
    gate_init(&g1);
    gate_init(&g2);
    gate_init(&g3);
    gate_init(&g4);
    order_reset();
    OK(cuLaunchHostFunc(s1, gate_wait, &g1));
    OK(cuLaunchHostFunc(0, log_order, (void *)10));
    sleep_ms(20);
    CHECK(order_count() == 0);
    gate_open(&g1);
    OK(cuStreamSynchronize(0));
    CHECK(order_count() == 1 && order_log[0] == 10);

    order_reset();
    OK(cuLaunchHostFunc(nb, gate_wait, &g2));
    OK(cuLaunchHostFunc(CU_STREAM_LEGACY, log_order, (void *)20));
    OK(cuStreamSynchronize(CU_STREAM_LEGACY)); /* must not wait for the non-blocking stream */
    CHECK(order_count() == 1 && order_log[0] == 20);
    gate_open(&g2);
    OK(cuStreamSynchronize(nb));

    order_reset();
    OK(cuLaunchHostFunc(0, gate_wait, &g3));
    OK(cuLaunchHostFunc(s2, log_order, (void *)30));
    OK(cuLaunchHostFunc(nb, log_order, (void *)31));
    OK(cuStreamSynchronize(nb));
    sleep_ms(20);
    CHECK(order_count() == 1 && order_log[0] == 31);
    gate_open(&g3);
    OK(cuStreamSynchronize(s2));
    CHECK(order_count() == 2 && order_log[1] == 30);

    /* the per-thread default stream does not wait for other blocking streams */
    order_reset();
    OK(cuLaunchHostFunc(s1, gate_wait, &g4));
    OK(cuLaunchHostFunc(CU_STREAM_PER_THREAD, log_order, (void *)40));
    OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    CHECK(order_count() == 1 && order_log[0] == 40);
    gate_open(&g4);
    OK(cuCtxSynchronize());

    /* cross-stream waits through events */
    CUevent ev;
    gate_t g5;
    gate_init(&g5);
    order_reset();
    OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    OK(cuLaunchHostFunc(s1, gate_wait, &g5));
    OK(cuLaunchHostFunc(s1, log_order, (void *)50));
    OK(cuEventRecord(ev, s1));
    OK(cuStreamWaitEvent(nb, ev, 0));
    OK(cuLaunchHostFunc(nb, log_order, (void *)51));
    sleep_ms(20);
    EXPECT(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    CHECK(order_count() == 0);
    gate_open(&g5);
    OK(cuStreamSynchronize(nb));
    CHECK(order_count() == 2 && order_log[0] == 50 && order_log[1] == 51);
    OK(cuEventQuery(ev));
    EXPECT(cuStreamWaitEvent(nb, ev, 0x8), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventDestroy(ev));
    EXPECT(cuStreamWaitEvent(nb, ev, 0), CUDA_ERROR_INVALID_HANDLE);

    /* a batch of copies in one call */
    {
        uint32_t a_in[64], b_in[32], a_out[64], b_out[32];
        for (int i = 0; i < 64; i++) a_in[i] = rnd();
        for (int i = 0; i < 32; i++) b_in[i] = rnd();
        memset(a_out, 0, sizeof a_out);
        memset(b_out, 0, sizeof b_out);
        CUdeviceptr dsts[4] = {d, d + 4096, (CUdeviceptr)a_out, (CUdeviceptr)b_out};
        CUdeviceptr srcs[4] = {(CUdeviceptr)a_in, (CUdeviceptr)b_in, d, d + 4096};
        size_t sizes[4] = {sizeof a_in, sizeof b_in, sizeof a_out, sizeof b_out};
        CUmemcpyAttributes attr;
        memset(&attr, 0, sizeof attr);
        attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        size_t attr_idx = 0;
        OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 4, &attr, &attr_idx, 1, s1));
        OK(cuStreamSynchronize(s1));
        CHECK(memcmp(a_in, a_out, sizeof a_in) == 0 && memcmp(b_in, b_out, sizeof b_in) == 0);
        sizes[1] = N; /* d + 4096 + N runs past d */
        EXPECT(cuMemcpyBatchAsync(dsts, srcs, sizes, 4, &attr, &attr_idx, 1, s1), CUDA_ERROR_INVALID_VALUE);
    }

    /* stream memory operations: s1 waits on a flag that another stream writes */
    CUdeviceptr flag;
    OK(cuMemAlloc(&flag, 64));
    OK(cuMemsetD32(flag, 0, 16));
    order_reset();
    OK(cuStreamWaitValue32(s1, flag, 5, CU_STREAM_WAIT_VALUE_GEQ));
    OK(cuLaunchHostFunc(s1, log_order, (void *)60));
    OK(cuStreamWaitValue64(s1, flag + 8, 0x100000000ULL, CU_STREAM_WAIT_VALUE_AND));
    OK(cuLaunchHostFunc(s1, log_order, (void *)61));
    sleep_ms(20);
    CHECK(order_count() == 0);
    OK(cuStreamWriteValue32(s2, flag, 4, 0));
    OK(cuStreamSynchronize(s2));
    sleep_ms(10);
    CHECK(order_count() == 0); /* 4 is not >= 5 */
    OK(cuStreamWriteValue32(s2, flag, 7, CU_STREAM_WRITE_VALUE_DEFAULT));
    OK(cuStreamSynchronize(s2));
    sleep_ms(20);
    CHECK(order_count() == 1 && order_log[0] == 60);
    OK(cuStreamWriteValue64(s2, flag + 8, 0x300000000ULL, 0));
    OK(cuStreamSynchronize(s1));
    CHECK(order_count() == 2 && order_log[1] == 61);
    EXPECT(cuStreamWaitValue32(s1, flag + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);   /* misaligned */
    EXPECT(cuStreamWaitValue32(s1, flag, 1, 7), CUDA_ERROR_INVALID_VALUE);       /* unknown operation */
    EXPECT(cuStreamWriteValue32(s1, flag + 4096, 1, 0), CUDA_ERROR_INVALID_VALUE); /* outside */
    CUstreamBatchMemOpParams ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = flag + 16;
    ops[0].writeValue.value = 0xABCD;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = flag + 16;
    ops[1].waitValue.value = 0xABCD;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    OK(cuStreamBatchMemOp(s1, 2, ops, 0));
    OK(cuStreamSynchronize(s1));
    uint32_t flag_words[8];
    OK(cuMemcpyDtoH(flag_words, flag, sizeof flag_words));
    CHECK(flag_words[0] == 7 && flag_words[2] == 0 && flag_words[3] == 3 && flag_words[4] == 0xABCD);
    OK(cuMemFree(flag));

    OK(cuMemFree(d));
    OK(cuMemFreeHost(pinned_in));
    OK(cuMemFreeHost(pinned_out));
    OK(cuStreamDestroy(s1));
    OK(cuStreamDestroy(s2));
    OK(cuStreamDestroy(nb));
    EXPECT(cuStreamDestroy(s1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamSynchronize(s1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamQuery(s2), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuLaunchHostFunc(nb, log_order, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamQuery((CUstream)0xdeadbeef0ULL), CUDA_ERROR_INVALID_HANDLE);
}

static void test_events(void) {
    CUstream s;
    CUevent e1, e2, e3, untimed, fresh, blocking;
    OK(cuStreamCreate(&s, 0));
    OK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    OK(cuEventCreate(&e2, CU_EVENT_DEFAULT));
    OK(cuEventCreate(&e3, CU_EVENT_DEFAULT));
    OK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
    OK(cuEventCreate(&fresh, CU_EVENT_DEFAULT));
    OK(cuEventCreate(&blocking, CU_EVENT_BLOCKING_SYNC));
    EXPECT(cuEventCreate(&fresh, 0x40), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventQuery(fresh)); /* never recorded: complete */

    gate_t g;
    gate_init(&g);
    float ms = -1;
    OK(cuLaunchHostFunc(s, gate_wait, &g));
    OK(cuEventRecord(e1, s));
    OK(cuLaunchHostFunc(s, sleep_20ms, NULL));
    OK(cuEventRecord(e2, s));
    OK(cuLaunchHostFunc(s, sleep_20ms, NULL));
    OK(cuEventRecordWithFlags(e3, s, CU_EVENT_RECORD_DEFAULT));
    OK(cuEventRecord(untimed, s));
    OK(cuEventRecord(blocking, s));
    EXPECT(cuEventQuery(e3), CUDA_ERROR_NOT_READY);
    EXPECT(cuEventElapsedTime(&ms, e1, e3), CUDA_ERROR_NOT_READY);
    gate_open(&g);
    double t0 = now_ms();
    OK(cuEventSynchronize(blocking));
    CHECK(now_ms() - t0 >= 30);
    OK(cuEventQuery(e3));
    float a = -1, b = -1, c = -1;
    OK(cuEventElapsedTime(&a, e1, e2));
    OK(cuEventElapsedTime(&b, e2, e3));
    OK(cuEventElapsedTime(&c, e1, e3));
    CHECK(a >= 15 && b >= 15 && c >= a && c >= b && c < 5000);
    CHECK(c + 0.5f >= a + b && c <= a + b + 0.5f);
    OK(cuEventElapsedTime(&ms, e1, e1));
    CHECK(ms == 0);
    EXPECT(cuEventElapsedTime(&ms, e1, untimed), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventElapsedTime(&ms, fresh, e1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventElapsedTime(NULL, e1, e2), CUDA_ERROR_INVALID_HANDLE);    /* NVIDIA's answer */
    EXPECT(cuEventRecordWithFlags(e1, s, 0x10), CUDA_ERROR_INVALID_VALUE);

    /* recording on the default stream, synchronising the context */
    OK(cuEventRecord(e1, 0));
    OK(cuEventRecord(e2, CU_STREAM_PER_THREAD));
    OK(cuCtxSynchronize());
    OK(cuEventQuery(e1));
    OK(cuEventQuery(e2));

    OK(cuEventDestroy(e1));
    EXPECT(cuEventDestroy(e1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventQuery(e1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventRecord(e1, s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventSynchronize(e1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventRecord(e2, (CUstream)0x5a1dffff0ULL), CUDA_ERROR_INVALID_HANDLE);
    OK(cuEventDestroy(e2));
    OK(cuEventDestroy(e3));
    OK(cuEventDestroy(untimed));
    OK(cuEventDestroy(fresh));
    OK(cuEventDestroy(blocking));
    OK(cuStreamDestroy(s));
}

/* ---- stream-ordered allocator ---- */
static void test_pools(void) {
    CUmemoryPool def = NULL, cur = NULL, mine = NULL;
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    OK(cuDeviceGetMemPool(&cur, 0));
    CHECK(def != NULL && cur == def);
    EXPECT(cuDeviceGetDefaultMemPool(&def, 3), CUDA_ERROR_INVALID_DEVICE);
    CUmemLocation here = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CUmemoryPool by_location = NULL;
    OK(cuMemGetDefaultMemPool(&by_location, &here, CU_MEM_ALLOCATION_TYPE_PINNED));
    CHECK(by_location == def);
    OK(cuMemGetMemPool(&by_location, &here, CU_MEM_ALLOCATION_TYPE_PINNED));
    CHECK(by_location == def);

    CUstream s;
    OK(cuStreamCreate(&s, 0));
    CUdeviceptr p = 0, q = 0;
    uint64_t used = 0, reserved = 0, threshold = 0;
    OK(cuMemAllocAsync(&p, 1 << 16, s));
    OK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    OK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    CHECK(used >= (1 << 16) && reserved >= used);
    uint32_t vals[256], back[256];
    for (int i = 0; i < 256; i++) vals[i] = rnd();
    OK(cuMemcpyHtoDAsync(p, vals, sizeof vals, s));
    OK(cuMemcpyDtoHAsync(back, p, sizeof back, s));
    OK(cuStreamSynchronize(s));
    CHECK(memcmp(vals, back, sizeof vals) == 0);
    CUmemoryPool owner = NULL;
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
    CHECK(owner == def);
    OK(cuMemFreeAsync(p, s));
    EXPECT(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamSynchronize(s));
    EXPECT(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    CHECK(used == 0);

    threshold = 1 << 20;
    OK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    threshold = 0;
    OK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CHECK(threshold == 1 << 20);
    OK(cuMemAllocAsync(&p, 4096, s));
    OK(cuMemFreeAsync(p, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    CHECK(reserved >= 4096); /* kept under the threshold for reuse */
    OK(cuMemPoolTrimTo(def, 0));
    OK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    CHECK(reserved == 0);
    int reuse = -1;
    OK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    CHECK(reuse == 1);
    EXPECT(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemPoolGetAttribute(def, (CUmemPool_attribute)99, &used), CUDA_ERROR_INVALID_VALUE);

    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    OK(cuMemPoolCreate(&mine, &props));
    OK(cuMemAllocFromPoolAsync(&q, 1000, mine, s));
    OK(cuMemsetD32Async(q, 0xCAFEF00D, 250, s));
    OK(cuMemcpyDtoHAsync(back, q, 1000, s));
    OK(cuStreamSynchronize(s));
    CHECK(back[0] == 0xCAFEF00D && back[249] == 0xCAFEF00D);
    OK(cuDeviceSetMemPool(0, mine));
    OK(cuDeviceGetMemPool(&cur, 0));
    CHECK(cur == mine);
    OK(cuMemAllocAsync(&p, 64, 0));
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
    CHECK(owner == mine);
    OK(cuMemFreeAsync(p, 0));
    OK(cuMemFreeAsync(q, s));
    OK(cuStreamSynchronize(s));
    OK(cuCtxSynchronize());
    OK(cuMemPoolDestroy(mine));
    OK(cuDeviceGetMemPool(&cur, 0));
    CHECK(cur == def);
    EXPECT(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAllocFromPoolAsync(&q, 64, mine, s), CUDA_ERROR_INVALID_VALUE);
    props.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    EXPECT(cuMemPoolCreate(&mine, &props), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
}

/* ---- leaks: RSS and thread count stay flat over 10,000 create/destroy loops ---- */
static long rss_kb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}
static int thread_count(void) {
    char line[256];
    int n = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    fclose(f);
    return n;
}

static void churn(int rounds) {
    for (int i = 0; i < rounds; i++) {
        CUdeviceptr p;
        CUstream s;
        CUevent e;
        if (cuMemAlloc(&p, 1 + (i % 4096)) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) failures++;
        if (cuStreamCreate(&s, 0) != CUDA_SUCCESS) failures++;
        if (cuEventCreate(&e, 0) != CUDA_SUCCESS) failures++;
        if (i % 16 == 0) {
            cuEventRecord(e, s);
            cuLaunchHostFunc(s, log_order, (void *)0);
        }
        if (cuEventDestroy(e) != CUDA_SUCCESS) failures++;
        if (cuStreamDestroy(s) != CUDA_SUCCESS) failures++;
        if (i % 64 == 0) order_reset();
    }
    cuCtxSynchronize();
}

static void test_leaks(void) {
    churn(1000);
    long rss0 = rss_kb();
    int threads0 = thread_count();
    double t0 = now_ms();
    churn(10000);
    double dt = now_ms() - t0;
    long rss1 = rss_kb();
    int threads1 = thread_count();
    printf("leak check: 10000 rounds in %.0f ms; RSS %ld -> %ld KiB; threads %d -> %d\n", dt, rss0, rss1,
           threads0, threads1);
    CHECK(rss1 - rss0 < 8 * 1024);
    /* streams own no thread: the shared worker pool grows only with work in flight at once (a few
       host functions here), never with the 10,000 streams created */
    CHECK(threads1 <= threads0 + 8);
}

int main(void) {
    rng_state = (uint32_t)time(NULL) | 1u;
    test_uninitialised();
    test_devices();
    CUcontext primary = test_contexts();
    test_primary_inactive_as_current();
    test_memory();
    test_streams();
    test_events();
    test_pools();
    test_leaks();
    OK(cuDevicePrimaryCtxRelease(0));
    (void)primary;
    printf("%d checks, %d failed\n", checks, failures);
    if (failures) return 1;
    printf("ALL PASSED\n");
    return 0;
}
