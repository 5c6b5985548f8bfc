/* The launch fast path: cuLaunchKernel / cuLaunchKernelEx (and their _ptsz forms), cuCtxSynchronize[_v2],
 * cuStreamSynchronize[_ptsz] and cuStreamQuery[_ptsz] answered without entering Python on the CPU backend.
 * A launch packs its parameters here and hands them to the native launch queue (the CPU backend's
 * launchq_streams.c, whose entry points Python gives us), which finds the stream and keeps CUDA's stream
 * order; a synchronize waits there for the streams' native work.
 *
 * Python publishes each (function or kernel handle, context) it has launched once, ordinarily, with what a
 * launch needs (block function, sizes, parameter layout, the configuration limits): a lazy kernel's first
 * launch, which compiles it, is always Python's. Anything unusual (an unpublished function, a bad
 * configuration, `extra`, launch attributes, a stream with Python work or a fault, a legacy-stream wait, a
 * capture, ZLUDA_TRACE/PROFILE/MEMCHECK, which keep the fast path off) returns -1 and the Python handler
 * runs, so every error is NVIDIA's answer from one place. A module unload, a function attribute change or
 * a context state change forgets every published function. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fastpath.h"

#define HANDLE_LEGACY 1u            /* CU_STREAM_LEGACY */
#define HANDLE_PER_THREAD 2u        /* CU_STREAM_PER_THREAD */
#define SYNC_STREAM 0               /* launchq_streams.c's zq_fast_sync modes */
#define SYNC_CONTEXT 1
#define SYNC_BLOCKING 2
#define MAX_PARAM_BYTES 4096        /* larger parameter lists go to Python */
#define ATTR_COOPERATIVE 2          /* CUlaunchAttributeID */
#define ATTR_CLUSTER_DIMENSION 4
#define ATTR_LAST 16
#define ATTR_SIZE 72                /* CUlaunchAttribute: id, padding, a 64-byte value */

typedef int (*queue_launch_fn)(uint64_t ctx, uint64_t handle, uint64_t thread, uint64_t fn, const uint8_t *params,
                               uint32_t nparams, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                               uint32_t bz, uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes);
typedef int (*queue_sync_fn)(uint64_t ctx, int32_t mode, uint64_t handle, uint64_t thread);
typedef int (*queue_query_fn)(uint64_t ctx, uint64_t handle, uint64_t thread);

static _Atomic(queue_launch_fn) q_launch;
static _Atomic(queue_sync_fn) q_sync;
static _Atomic(queue_query_fn) q_query;
static _Atomic uint64_t served[3];  /* launches, synchronizes, queries answered here (tests look) */

/* How many launches, synchronizes (of contexts and streams) and stream queries C has answered. */
void zl_fast_served(uint64_t *out)
{
    for (int i = 0; i < 3; i++)
        out[i] = atomic_load_explicit(&served[i], memory_order_relaxed);
}

static inline int answered(int kind, int r)
{
    if (r >= 0)
        atomic_fetch_add_explicit(&served[kind], 1, memory_order_relaxed);
    return r;
}

/* Python, once the CPU backend's launch queue runs launches (ZLUDA_CPU_NATIVE_QUEUE=0 never sets it). */
void zl_fast_set_queue(uint64_t launch, uint64_t sync, uint64_t query)
{
    atomic_store(&q_sync, (queue_sync_fn)(uintptr_t)sync);
    atomic_store(&q_query, (queue_query_fn)(uintptr_t)query);
    atomic_store(&q_launch, (queue_launch_fn)(uintptr_t)launch);
}

/* --- published functions: (handle, context) -> what a launch needs --------------------------------------- */
typedef struct {
    uint64_t handle, ctx;           /* handle 0: an empty slot */
    uint64_t fn;
    uint32_t static_shared, frame_bytes, param_size, nparams;
    uint32_t limits[8];             /* max grid x/y/z, max block x/y/z, max threads, max dynamic shared bytes */
    uint32_t block[3];              /* the block fn was compiled for (0, 0, 0: any); another is Python's */
    uint32_t *plan;                 /* nparams (offset, size) pairs */
} fn_entry;

static pthread_rwlock_t fn_lock = PTHREAD_RWLOCK_INITIALIZER;
static fn_entry *fn_table;          /* open addressing, a power of two long, at most half full */
static size_t fn_cap, fn_count;

static size_t fn_slot(uint64_t handle, uint64_t ctx)
{
    uint64_t h = (handle ^ (ctx * 0x9E3779B97F4A7C15ull)) * 0xD6E8FEB86659FD93ull;
    return (size_t)(h >> 32) & (fn_cap - 1);
}

static fn_entry *fn_find(uint64_t handle, uint64_t ctx)
{
    if (!fn_cap)
        return NULL;
    for (size_t i = fn_slot(handle, ctx);; i = (i + 1) & (fn_cap - 1)) {
        fn_entry *e = &fn_table[i];
        if (!e->handle)
            return NULL;
        if (e->handle == handle && e->ctx == ctx)
            return e;
    }
}

static int fn_grow(void)
{
    size_t cap = fn_cap ? fn_cap * 2 : 64;
    fn_entry *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    fn_entry *old = fn_table;
    size_t old_cap = fn_cap;
    fn_table = t;
    fn_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].handle)
            continue;
        size_t j = fn_slot(old[i].handle, old[i].ctx);
        while (fn_table[j].handle)
            j = (j + 1) & (cap - 1);
        fn_table[j] = old[i];
    }
    free(old);
    return 0;
}

/* limits: 11 values, fn_entry's limits then its block. 0, or -1 (out of memory: launches of it stay Python's). */
int zl_fast_publish_function(uint64_t handle, uint64_t ctx, uint64_t fn, uint32_t static_shared,
                             uint32_t frame_bytes, uint32_t param_size, uint32_t nparams, const uint32_t *plan,
                             const uint32_t *limits)
{
    if (!handle || !fn || param_size > MAX_PARAM_BYTES)
        return -1;
    uint32_t *copy = malloc((nparams ? nparams : 1) * 2 * sizeof *copy);
    if (!copy)
        return -1;
    memcpy(copy, plan, nparams * 2 * sizeof *copy);
    for (uint32_t i = 0; i < nparams; i++) {
        if ((uint64_t)copy[2 * i] + copy[2 * i + 1] > param_size) {
            free(copy);
            return -1;
        }
    }
    pthread_rwlock_wrlock(&fn_lock);
    fn_entry *e = fn_find(handle, ctx);
    if (!e) {
        if ((fn_count + 1) * 2 > fn_cap && fn_grow() != 0) {
            pthread_rwlock_unlock(&fn_lock);
            free(copy);
            return -1;
        }
        size_t i = fn_slot(handle, ctx);
        while (fn_table[i].handle)
            i = (i + 1) & (fn_cap - 1);
        e = &fn_table[i];
        fn_count++;
    } else {
        free(e->plan);
    }
    *e = (fn_entry){handle, ctx, fn, static_shared, frame_bytes, param_size, nparams, {0}, {0}, copy};
    memcpy(e->limits, limits, sizeof e->limits);
    memcpy(e->block, limits + 8, sizeof e->block);
    pthread_rwlock_unlock(&fn_lock);
    return 0;
}

void zl_fast_forget_functions(void)
{
    pthread_rwlock_wrlock(&fn_lock);
    for (size_t i = 0; i < fn_cap; i++)
        free(fn_table[i].plan);
    if (fn_cap)
        memset(fn_table, 0, fn_cap * sizeof *fn_table);
    fn_count = 0;
    pthread_rwlock_unlock(&fn_lock);
}

/* --- entry points --------------------------------------------------------------------------------------- */
static uint64_t stream_handle(uint64_t hstream, int per_thread)
{
    return hstream ? hstream : per_thread ? HANDLE_PER_THREAD : HANDLE_LEGACY;
}

static uint64_t this_thread(void)
{
    return (uint64_t)pthread_self();        /* Python's threading.get_ident() */
}

static int launch(uint64_t f, const uint32_t *grid, const uint32_t *block, uint32_t shared, uint64_t hstream,
                  uint64_t kernel_params, uint64_t extra, int per_thread)
{
    queue_launch_fn queue = atomic_load_explicit(&q_launch, memory_order_acquire);
    if (!queue || extra)
        return -1;
    uint64_t ctx = zl_fast_context();
    if (!ctx)
        return -1;
    uint8_t params[MAX_PARAM_BYTES];
    pthread_rwlock_rdlock(&fn_lock);
    fn_entry *e = fn_find(f, ctx);
    int ok = e != NULL;
    if (ok) {
        /* CUDA's configuration checks (launch.py's check_configuration); a failing one is Python's to answer */
        const uint32_t *lim = e->limits;
        uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
        for (int d = 0; d < 3; d++)
            ok &= grid[d] > 0 && grid[d] <= lim[d] && block[d] > 0 && block[d] <= lim[3 + d];
        ok &= threads <= lim[6] && threads <= 1024 && block[2] <= 64 && shared <= lim[7]
              && (uint64_t)shared + e->static_shared <= (1u << 30);
        if (e->block[0])        /* code for one block: Python runs the others with the kernel's code for any */
            ok &= block[0] == e->block[0] && block[1] == e->block[1] && block[2] == e->block[2];
        if (ok && e->nparams && !kernel_params)
            ok = 0;
        if (ok) {
            memset(params, 0, e->param_size);
            const uint64_t *kp = (const uint64_t *)(uintptr_t)kernel_params;
            for (uint32_t i = 0; ok && i < e->nparams; i++) {
                const void *p = (const void *)(uintptr_t)kp[i];
                if (!p)
                    ok = 0;
                else
                    memcpy(params + e->plan[2 * i], p, e->plan[2 * i + 1]);
            }
        }
    }
    fn_entry c;
    if (ok)
        c = *e;
    pthread_rwlock_unlock(&fn_lock);
    if (!ok)
        return -1;
    return answered(0, queue(ctx, stream_handle(hstream, per_thread), this_thread(), c.fn, params, c.param_size,
                             grid[0], grid[1], grid[2], block[0], block[1], block[2], c.static_shared, shared,
                             c.frame_bytes) == 0 ? 0 : -1);
}

int zl_fast_launch(uint64_t f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                   uint32_t shared, uint64_t hstream, uint64_t kernel_params, uint64_t extra, int per_thread)
{
    const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return launch(f, grid, block, shared, hstream, kernel_params, extra, per_thread);
}

/* CUlaunchConfig: grid, block, shared bytes, the stream, its attributes. Attributes that change what runs
 * (cooperative, clusters) or that are unknown are Python's; the rest are hints with no effect here. */
typedef struct {
    uint32_t grid[3], block[3], shared, pad;
    uint64_t hstream, attrs;
    uint32_t nattrs;
} launch_config;

int zl_fast_launch_ex(uint64_t config, uint64_t f, uint64_t kernel_params, uint64_t extra, int per_thread)
{
    if (!config || !atomic_load_explicit(&q_launch, memory_order_relaxed))
        return -1;
    launch_config c;
    memcpy(&c, (const void *)(uintptr_t)config, sizeof c);
    if (c.nattrs && !c.attrs)
        return -1;
    for (uint32_t i = 0; i < c.nattrs; i++) {
        uint32_t id;
        memcpy(&id, (const uint8_t *)(uintptr_t)c.attrs + (size_t)ATTR_SIZE * i, sizeof id);
        if (id == ATTR_COOPERATIVE || id == ATTR_CLUSTER_DIMENSION || id > ATTR_LAST)
            return -1;
    }
    return launch(f, c.grid, c.block, c.shared, c.hstream, kernel_params, extra, per_thread);
}

/* cuCtxSynchronize (ctx 0) and cuCtxSynchronize_v2 of the current context. */
int zl_fast_ctx_synchronize(uint64_t ctx_arg)
{
    queue_sync_fn sync = atomic_load_explicit(&q_sync, memory_order_acquire);
    uint64_t ctx = sync ? zl_fast_context() : 0;
    if (!ctx || (ctx_arg && ctx_arg != ctx))
        return -1;
    return answered(1, sync(ctx, SYNC_CONTEXT, 0, 0) == 0 ? 0 : -1);
}

int zl_fast_stream_synchronize(uint64_t hstream, int per_thread)
{
    queue_sync_fn sync = atomic_load_explicit(&q_sync, memory_order_acquire);
    uint64_t ctx = sync ? zl_fast_context() : 0;
    if (!ctx)
        return -1;
    return answered(1, sync(ctx, SYNC_STREAM, stream_handle(hstream, per_thread), this_thread()) == 0 ? 0 : -1);
}

/* 0, CUDA_ERROR_NOT_READY (600: not an error; Python logs none either), or -1. */
int zl_fast_stream_query(uint64_t hstream, int per_thread)
{
    queue_query_fn query = atomic_load_explicit(&q_query, memory_order_acquire);
    uint64_t ctx = query ? zl_fast_context() : 0;
    if (!ctx)
        return -1;
    return answered(2, query(ctx, stream_handle(hstream, per_thread), this_thread()));
}

/* Native work of the streams a synchronous copy or a free comes after, waited for here. */
int zl_fast_quiesce(uint64_t ctx, int what)
{
    queue_sync_fn sync = atomic_load_explicit(&q_sync, memory_order_acquire);
    if (!sync)
        return -1;
    return sync(ctx, what == ZL_QUIESCE_COPY ? SYNC_BLOCKING : SYNC_CONTEXT, 0, 0) == 0 ? 0 : -1;
}
