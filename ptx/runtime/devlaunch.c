/* CUDA dynamic parallelism on the CPU (ptxrt.h, "CUDA dynamic parallelism"): the device runtime's launch,
   stream, copy and error calls that kernel code makes, the queue of work each grid launches, and the
   registry that turns a kernel's address into what a launch of it needs. ptxrt.c runs the queue when the
   grid's last block is done (ptxrt_launch_nested). */
#define _GNU_SOURCE
#include "devlaunch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern int ptxrt_mc_on;              /* memcheck.c: ZLUDA_MEMCHECK is on */
void ptx_rt_memcheck_remove_base(uint64_t base);

/* cudaError_t values the device runtime answers with */
enum {
    E_OK = 0, E_INVALID_VALUE = 1, E_MEMORY = 2, E_CONFIGURATION = 9, E_MEMCPY_DIRECTION = 21,
    E_MAX_DEPTH = 65, E_INVALID_FUNCTION = 98, E_RESOURCE_HANDLE = 400,
};

/* device-side stream handles: the special ones of cuda_device_runtime_api.h, and those made here */
#define STREAM_NULL 0u
#define STREAM_PER_THREAD 2u
#define STREAM_TAIL 3u
#define STREAM_FIRE_AND_FORGET 4u
#define STREAM_TAG 0x5a4c000000000000ull     /* | a serial number */
#define STREAM_TAG_MASK 0xffff000000000000ull

enum { ITEM_LAUNCH, ITEM_COPY, ITEM_FILL };
#define ITEM_MAGIC 0x43445032u
#define PARAM_ALIGN 64u

struct cdp_item {
    struct cdp_item *next;
    uint32_t kind, magic;
    uint64_t fn;
    uint32_t grid[3], block[3];
    uint32_t dyn_shared, static_shared, frame_bytes, size;   /* size: of the parameter buffer */
    uint64_t dst, src, n;            /* copies; fills keep their byte value in src */
    void *mem;                       /* the allocation holding this item and its parameters */
    uint8_t *params;
};

static inline struct ptxrt_cdp *queue_of(ptx_worker *W) { return ptxrt_cdp_of(W); }

static int32_t fail(struct ptxrt_cdp *c, int32_t e)
{
    atomic_store_explicit(&c->error, e, memory_order_relaxed);
    return e;
}

/* ------------------------------------------------------------------ the kernel registry */

struct kernel_info {
    uint64_t fn;
    uint32_t static_shared, frame_bytes, param_size, hints;
    uint32_t timed;                  /* interleavable kernels: launches counted, and each way's best probe (ns) */
    uint64_t ns[2];
};

static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct kernel_info *reg;          /* open addressing; fn 0 = empty */
static size_t reg_cap, reg_count;

static size_t reg_slot(uint64_t fn, size_t cap) { return (size_t)((fn >> 4) * 0x9E3779B97F4A7C15ull >> 24) & (cap - 1); }

/* The registry's entry for fn, or NULL; the caller holds reg_lock. */
static struct kernel_info *entry(uint64_t fn)
{
    if (!reg_cap || !fn) return NULL;
    for (size_t i = reg_slot(fn, reg_cap); reg[i].fn; i = (i + 1) & (reg_cap - 1))
        if (reg[i].fn == fn) return &reg[i];
    return NULL;
}

static int reg_grow(void)
{
    size_t cap = reg_cap ? reg_cap * 2 : 256;
    struct kernel_info *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < reg_cap; i++) {
        if (!reg[i].fn) continue;
        size_t j = reg_slot(reg[i].fn, cap);
        while (t[j].fn) j = (j + 1) & (cap - 1);
        t[j] = reg[i];
    }
    free(reg);
    reg = t;
    reg_cap = cap;
    return 0;
}

void ptx_rt_register_kernel(uint64_t func, uint32_t static_shared, uint32_t frame_bytes, uint32_t param_size)
{
    if (!func) return;
    pthread_rwlock_wrlock(&reg_lock);
    if ((reg_count + 1) * 2 > reg_cap && reg_grow() != 0) {
        pthread_rwlock_unlock(&reg_lock);
        return;                      /* a launch of it then answers cudaErrorInvalidDeviceFunction */
    }
    size_t i = reg_slot(func, reg_cap);
    while (reg[i].fn && reg[i].fn != func) i = (i + 1) & (reg_cap - 1);
    if (!reg[i].fn) {               /* a new entry; registering again keeps the hints and the launches' timings */
        reg_count++;
        reg[i] = (struct kernel_info){.fn = func};
    }
    reg[i].static_shared = static_shared;
    reg[i].frame_bytes = frame_bytes;
    reg[i].param_size = param_size;
    pthread_rwlock_unlock(&reg_lock);
}

void ptx_rt_kernel_hints(uint64_t func, uint32_t hints)
{
    pthread_rwlock_wrlock(&reg_lock);
    struct kernel_info *e = entry(func);
    if (e) e->hints = hints;
    pthread_rwlock_unlock(&reg_lock);
}

void ptx_rt_unregister_kernel(uint64_t func)
{
    pthread_rwlock_wrlock(&reg_lock);
    size_t mask = reg_cap - 1, i = reg_cap ? reg_slot(func, reg_cap) : 0;
    while (reg_cap && reg[i].fn && reg[i].fn != func) i = (i + 1) & mask;
    if (reg_cap && reg[i].fn == func && func) {
        reg_count--;
        /* backward-shift deletion: every probe chain stays unbroken without tombstones */
        for (size_t j = (i + 1) & mask; reg[j].fn; j = (j + 1) & mask) {
            size_t home = reg_slot(reg[j].fn, reg_cap);
            int stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays) {
                reg[i] = reg[j];
                i = j;
            }
        }
        reg[i].fn = 0;
    }
    pthread_rwlock_unlock(&reg_lock);
}

static int lookup(uint64_t fn, struct kernel_info *out)
{
    pthread_rwlock_rdlock(&reg_lock);
    const struct kernel_info *e = entry(fn);
    if (e) *out = *e;
    pthread_rwlock_unlock(&reg_lock);
    return e != NULL;
}

/* Whether a launch of the kernel at fn runs its blocks interleaved (ptxrt.h PTXRT_HINT_INTERLEAVE): which way is
   faster depends on where the data is (from memory it gains up to a fifth, from the caches the switches cost about
   as much), which only the launches can tell. So after WARMUP launches (the first ones are slower while the caches,
   the kernel and the helper threads warm up; they run interleaved and are not timed) PROBES launches try the ways
   in the order plain, interleaved, interleaved, plain (so that a trend in the times favours neither), and again
   every RETRY_EVERY launches; the others take the way whose best probe was faster. One launch each way was not
   enough: this machine's memory bandwidth swings by a third from one launch to the next. */
#define WARMUP 4u
#define PROBES 4u
#define RETRY_EVERY 64u
int ptxrt_kernel_interleave(uint64_t fn, uint32_t *probe)
{
    struct kernel_info k;
    *probe = 0;
    if (!lookup(fn, &k) || !(k.hints & PTXRT_HINT_INTERLEAVE)) return -1;
    if (k.timed < WARMUP) return 1;
    uint32_t t = (k.timed - WARMUP) % RETRY_EVERY;
    if (t < PROBES) {
        *probe = 1;
        return t == 1 || t == 2;
    }
    return k.ns[1] < k.ns[0];
}

void ptxrt_kernel_timed(uint64_t fn, int interleaved, uint32_t probe, uint64_t ns)
{
    pthread_rwlock_wrlock(&reg_lock);
    struct kernel_info *e = entry(fn);
    if (e) {
        if (probe && e->timed >= WARMUP) {
            if ((e->timed - WARMUP) % RETRY_EVERY == 0) e->ns[0] = e->ns[1] = UINT64_MAX;   /* new probes */
            if (ns < e->ns[interleaved != 0]) e->ns[interleaved != 0] = ns;
        }
        e->timed++;
    }
    pthread_rwlock_unlock(&reg_lock);
}

/* ------------------------------------------------------------------ items and the queue */

/* An item with `size` parameter bytes aligned to `align` (a power of two); the 8 bytes before the
   parameters point back at the item, so a parameter buffer finds its launch. */
static struct cdp_item *item_new(uint32_t kind, uint64_t size, uint64_t align)
{
    if (align < PARAM_ALIGN) align = PARAM_ALIGN;
    if ((align & (align - 1)) || align > 4096 || size > (1u << 20)) return NULL;
    size_t head = (sizeof(struct cdp_item) + sizeof(void *) + align - 1) & ~(size_t)(align - 1);
    void *mem = NULL;
    if (posix_memalign(&mem, align, head + (size ? size : 1))) return NULL;
    struct cdp_item *it = mem;
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->magic = ITEM_MAGIC;
    it->mem = mem;
    it->params = (uint8_t *)mem + head;
    it->size = (uint32_t)size;
    memcpy(it->params - sizeof(void *), &it, sizeof it);
    /* kernel code writes the parameters: under ZLUDA_MEMCHECK the buffer is memory it may write */
    if (size && __atomic_load_n(&ptxrt_mc_on, __ATOMIC_ACQUIRE))
        ptx_rt_memcheck_add((uint64_t)(uintptr_t)it->params, size, PTXRT_MC_HEAP);
    return it;
}

static struct cdp_item *item_of(void *params)
{
    if (!params || ((uintptr_t)params & (PARAM_ALIGN - 1))) return NULL;
    struct cdp_item *it;
    memcpy(&it, (uint8_t *)params - sizeof(void *), sizeof it);
    return it && it->magic == ITEM_MAGIC && it->params == params ? it : NULL;
}

static void item_free(struct cdp_item *it)
{
    if (it->size && __atomic_load_n(&ptxrt_mc_on, __ATOMIC_ACQUIRE))
        ptx_rt_memcheck_remove_base((uint64_t)(uintptr_t)it->params);
    it->magic = 0;
    free(it->mem);
}

/* Whether [p, p + n) is mapped: a device-side copy runs outside kernel code, where a wild address would
   end the process instead of the launch. */
static int mapped(uint64_t p, uint64_t n)
{
    static const size_t chunk = 256;
    unsigned char vec[256];
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), a = p & ~(page - 1), end = p + n;
    if (end < p) return 0;
    while (a < end) {
        uint64_t len = end - a < chunk * page ? end - a : chunk * page;
        if (mincore((void *)(uintptr_t)a, len, vec) != 0) return 0;
        a += chunk * page;
    }
    return 1;
}

static void lock(struct ptxrt_cdp *c) { while (atomic_flag_test_and_set_explicit(&c->lock, memory_order_acquire)) {} }
static void unlock(struct ptxrt_cdp *c) { atomic_flag_clear_explicit(&c->lock, memory_order_release); }

void ptxrt_cdp_begin(struct ptxrt_cdp *c, uint32_t depth)
{
    atomic_flag_clear(&c->lock);
    c->head = c->tails = NULL;
    c->tail = &c->head;
    c->tails_end = &c->tails;
    atomic_store(&c->error, 0);
    c->depth = depth;
}

struct cdp_item *ptxrt_cdp_take(struct ptxrt_cdp *c)
{
    *c->tail = c->tails;             /* tail launches after everything else the grid launched */
    struct cdp_item *all = c->head;
    c->head = c->tails = NULL;
    c->tail = &c->head;
    c->tails_end = &c->tails;
    return all;
}

static int stream_ok(uint64_t s)
{
    return s == STREAM_NULL || s == STREAM_PER_THREAD || s == STREAM_TAIL || s == STREAM_FIRE_AND_FORGET ||
           (s & STREAM_TAG_MASK) == STREAM_TAG;
}

/* Queue `it` in `stream`; on failure it is freed and the error returned (and kept as the last one). */
static int32_t enqueue(struct ptxrt_cdp *c, struct cdp_item *it, uint64_t stream)
{
    int32_t e = E_OK;
    if (!stream_ok(stream))
        e = E_RESOURCE_HANDLE;
    else if (it->kind == ITEM_LAUNCH && c->depth + 1 > PTXRT_CDP_MAX_DEPTH)
        e = E_MAX_DEPTH;
    else if (it->kind == ITEM_LAUNCH) {
        const uint32_t *g = it->grid, *b = it->block;
        if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2] || g[0] > 0x7fffffffu || g[1] > 65535 ||
            g[2] > 65535 || b[0] > 1024 || b[1] > 1024 || b[2] > 64 || (uint64_t)b[0] * b[1] * b[2] > 1024 ||
            (uint64_t)it->dyn_shared + it->static_shared > (1u << 30))
            e = E_CONFIGURATION;
    }
    if (e != E_OK) {
        item_free(it);
        return fail(c, e);
    }
    it->next = NULL;
    lock(c);
    if (it->kind == ITEM_LAUNCH && stream == STREAM_TAIL) {
        *c->tails_end = it;
        c->tails_end = &it->next;
    } else {
        *c->tail = it;
        c->tail = &it->next;
    }
    unlock(c);
    return E_OK;
}

int32_t ptxrt_cdp_run(struct cdp_item *work, int32_t status, uint32_t depth, uint32_t flags)
{
    while (work) {
        struct cdp_item *it = work;
        work = it->next;
        if (status == PTXRT_OK) {
            if (it->kind == ITEM_LAUNCH)
                status = ptxrt_launch_nested((ptx_block_fn)(uintptr_t)it->fn, it->params, it->grid[0],
                                             it->grid[1], it->grid[2], it->block[0], it->block[1], it->block[2],
                                             it->static_shared, it->dyn_shared, it->frame_bytes,
                                             flags & PTXRT_RESERVED, depth + 1);
            else if (it->kind == ITEM_COPY && mapped(it->dst, it->n) && mapped(it->src, it->n))
                memmove((void *)(uintptr_t)it->dst, (const void *)(uintptr_t)it->src, it->n);
            else if (it->kind == ITEM_FILL && mapped(it->dst, it->n))
                memset((void *)(uintptr_t)it->dst, (int)it->src, it->n);
            else
                status = PTXRT_FAULT;       /* as a GPU's copy engine reports an illegal address */
        }
        item_free(it);
    }
    return status;
}

/* ------------------------------------------------------------------ the calls kernel code makes */

void *ptx_rt_cdp_param_buffer(ptx_worker *W, uint64_t alignment, uint64_t size)
{
    struct cdp_item *it = item_new(ITEM_LAUNCH, size, alignment ? alignment : 1);
    if (!it) {
        fail(queue_of(W), E_MEMORY);
        return NULL;
    }
    return it->params;
}

static void set_config(struct cdp_item *it, const struct kernel_info *k, const uint32_t grid[3],
                       const uint32_t block[3], uint32_t shared)
{
    it->fn = k->fn;
    memcpy(it->grid, grid, sizeof it->grid);
    memcpy(it->block, block, sizeof it->block);
    it->dyn_shared = shared;
    it->static_shared = k->static_shared;
    it->frame_bytes = k->frame_bytes;
}

void *ptx_rt_cdp_param_buffer_v2(ptx_worker *W, uint64_t func, const uint32_t grid[3], const uint32_t block[3],
                                 uint32_t shared)
{
    struct kernel_info k;
    if (!lookup(func, &k)) {
        fail(queue_of(W), E_INVALID_FUNCTION);
        return NULL;
    }
    struct cdp_item *it = item_new(ITEM_LAUNCH, k.param_size, PARAM_ALIGN);
    if (!it) {
        fail(queue_of(W), E_MEMORY);
        return NULL;
    }
    set_config(it, &k, grid, block, shared);
    return it->params;
}

int32_t ptx_rt_cdp_launch_v2(ptx_worker *W, void *buffer, uint64_t stream)
{
    struct ptxrt_cdp *c = queue_of(W);
    struct cdp_item *it = item_of(buffer);
    if (!it || !it->fn) return fail(c, E_INVALID_VALUE);
    return enqueue(c, it, stream);
}

int32_t ptx_rt_cdp_launch(ptx_worker *W, uint64_t func, void *buffer, const uint32_t grid[3],
                          const uint32_t block[3], uint32_t shared, uint64_t stream)
{
    struct ptxrt_cdp *c = queue_of(W);
    struct kernel_info k;
    struct cdp_item *given = buffer ? item_of(buffer) : NULL;
    if (buffer && (!given || given->fn)) return fail(c, E_INVALID_VALUE);
    if (!lookup(func, &k)) {
        if (given) item_free(given);
        return fail(c, E_INVALID_FUNCTION);
    }
    struct cdp_item *it = given;
    if (!it || it->size < k.param_size) {   /* the kernel reads all its parameters: room for them */
        it = item_new(ITEM_LAUNCH, k.param_size, PARAM_ALIGN);
        if (!it) {
            if (given) item_free(given);
            return fail(c, E_MEMORY);
        }
        if (given) {
            memcpy(it->params, given->params, given->size);
            item_free(given);
        }
    }
    set_config(it, &k, grid, block, shared);
    return enqueue(c, it, stream);
}

int32_t ptx_rt_cdp_stream_create(ptx_worker *W, uint64_t *stream, uint32_t flags)
{
    static _Atomic uint64_t serial;
    /* cudaStreamNonBlocking is the only flag, and required (the device has no blocking streams) */
    if (!stream || flags != 1u) return fail(queue_of(W), E_INVALID_VALUE);
    *stream = STREAM_TAG | (atomic_fetch_add(&serial, 1) + 1);
    return E_OK;
}

int32_t ptx_rt_cdp_stream_destroy(ptx_worker *W, uint64_t stream)
{
    /* work already launched into it still runs (CUDA releases the stream after it) */
    if ((stream & STREAM_TAG_MASK) != STREAM_TAG) return fail(queue_of(W), E_RESOURCE_HANDLE);
    return E_OK;
}

int32_t ptx_rt_cdp_memcpy(ptx_worker *W, uint64_t dst, uint64_t src, uint64_t n, uint32_t kind, uint64_t stream)
{
    struct ptxrt_cdp *c = queue_of(W);
    if (kind > 4) return fail(c, E_MEMCPY_DIRECTION);
    if (!n) return E_OK;
    if (!dst || !src) return fail(c, E_INVALID_VALUE);
    struct cdp_item *it = item_new(ITEM_COPY, 0, PARAM_ALIGN);
    if (!it) return fail(c, E_MEMORY);
    it->dst = dst;
    it->src = src;
    it->n = n;
    return enqueue(c, it, stream);
}

int32_t ptx_rt_cdp_memset(ptx_worker *W, uint64_t dst, uint32_t value, uint64_t n, uint64_t stream)
{
    struct ptxrt_cdp *c = queue_of(W);
    if (!n) return E_OK;
    if (!dst) return fail(c, E_INVALID_VALUE);
    struct cdp_item *it = item_new(ITEM_FILL, 0, PARAM_ALIGN);
    if (!it) return fail(c, E_MEMORY);
    it->dst = dst;
    it->src = value & 0xffu;
    it->n = n;
    return enqueue(c, it, stream);
}

int32_t ptx_rt_cdp_last_error(ptx_worker *W, uint32_t clear)
{
    struct ptxrt_cdp *c = queue_of(W);
    return clear ? atomic_exchange(&c->error, 0) : atomic_load(&c->error);
}

const char *ptx_rt_cdp_error_text(int32_t error, uint32_t name)
{
    static const struct { int32_t code; const char *name, *text; } T[] = {
        {E_OK, "cudaSuccess", "no error"},
        {E_INVALID_VALUE, "cudaErrorInvalidValue", "invalid argument"},
        {E_MEMORY, "cudaErrorMemoryAllocation", "out of memory"},
        {E_CONFIGURATION, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
        {E_MEMCPY_DIRECTION, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
        {E_MAX_DEPTH, "cudaErrorLaunchMaxDepthExceeded", "launch would exceed maximum depth of nested launches"},
        {69, "cudaErrorLaunchPendingCountExceeded", "launch would exceed pending launch count"},
        {E_INVALID_FUNCTION, "cudaErrorInvalidDeviceFunction", "invalid device function"},
        {E_RESOURCE_HANDLE, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (T[i].code == error) return name ? T[i].name : T[i].text;
    return name ? "cudaErrorUnknown" : "unrecognized error code";
}

void ptx_rt_graph_set_conditional(uint64_t handle, uint32_t value)
{
    if (handle) __atomic_store_n((uint32_t *)(uintptr_t)handle, value, __ATOMIC_RELEASE);
}
