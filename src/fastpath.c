/* The C fast path: cuMemAlloc, cuMemFree, the synchronous cuMemcpy forms and cuCtxGetCurrent answered
 * without entering Python when everything is ordinary (the cffi hop into Python alone costs about a
 * microsecond). Python stays the authority: it tells this file which context each thread has current, bumps
 * a generation whenever any context's state changes (destroy, reset, sticky error), counts busy and
 * capturing streams, and mirrors every allocation of its index into the range table here. Whatever is
 * unusual (an error, a stream with Python work, a stale generation, an unknown range) returns -1 and the
 * Python handler runs, so errors are reported and logged in one place. Streams busy with native launches
 * only are waited for here, through the launch queue (fastlaunch.c).
 *
 * Allocations made here exist only in the range table ("C-only") until a Python lookup needs them: Python
 * then adopts them all (zl_range_adopt) and owns them from there on (a C free then falls back to Python).
 *
 * The trivial getters (cuDriverGetVersion, cuDeviceGet, cuDeviceGetCount, cuDeviceGetAttribute) answer from
 * a table Python publishes once after cuInit: the devices and their attributes are fixed from then on. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fastpath.h"

/* --- switches ---------------------------------------------------------------------------------------- */
static atomic_int fp_enabled;
static atomic_uint_fast64_t fp_generation = 1;
static atomic_int_fast64_t fp_busy;          /* busy or capturing streams, all contexts together */
static atomic_int fp_capturing;              /* stream captures under way: calls must be recorded */

/* The calling thread's current context as Python last published it; valid only while tl_generation is
 * the global generation. */
static __thread uint64_t tl_ctx;
static __thread uint64_t tl_generation;
static __thread int32_t tl_device;

void zl_fast_enable(int on)
{
    atomic_store(&fp_enabled, on);
}

void zl_fast_invalidate(void)
{
    atomic_fetch_add(&fp_generation, 1);
}

void zl_fast_set_current(uint64_t ctx, int32_t device)
{
    tl_ctx = ctx;
    tl_device = device;
    tl_generation = atomic_load(&fp_generation);
}

void zl_fast_busy(int32_t delta)
{
    atomic_fetch_add(&fp_busy, delta);
}

int64_t zl_fast_busy_count(void)
{
    return atomic_load(&fp_busy);
}

/* The launch queue counts its streams' busy transitions here itself (launchq_streams.c). */
int64_t *zl_fast_busy_address(void)
{
    return (int64_t *)&fp_busy;
}

void zl_fast_capture(int32_t delta)
{
    atomic_fetch_add(&fp_capturing, delta);
    atomic_fetch_add(&fp_busy, delta);
}

/* need_idle: queued work must run before a synchronous copy (ZL_QUIESCE_COPY: what the legacy stream
 * waits for) or a free (ZL_QUIESCE_ALL): with busy streams, the launch queue waits for it when it is all
 * native launches, else Python does. The busy count is read before the generation: a faulting kernel's
 * stream sets the sticky error (bumping the generation) before it stops counting as busy, so a copy that
 * sees no busy stream also sees the new generation; a fault the wait finds sends the call to Python. */
static inline int current_ok(int need_idle)
{
    if (!atomic_load_explicit(&fp_enabled, memory_order_relaxed))
        return 0;
    if (need_idle && atomic_load_explicit(&fp_busy, memory_order_acquire) != 0
        && (tl_ctx == 0 || atomic_load(&fp_capturing) || zl_fast_quiesce(tl_ctx, need_idle) != 0))
        return 0;
    return tl_ctx != 0 && tl_generation == atomic_load_explicit(&fp_generation, memory_order_acquire);
}

uint64_t zl_fast_context(void)
{
    if (atomic_load_explicit(&fp_capturing, memory_order_relaxed) || !current_ok(0))
        return 0;
    return tl_ctx;
}

/* --- range table ------------------------------------------------------------------------------------- */
typedef struct {
    uint64_t base, end, token, owner;   /* owner: the context handle of a C-only entry */
    int32_t device;
    int32_t c_only;
} range_t;

static pthread_mutex_t range_lock = PTHREAD_MUTEX_INITIALIZER;
static range_t *ranges;                 /* sorted by base; equal bases keep insertion order */
static size_t range_n, range_cap;
static atomic_int_fast64_t range_c_only;
/* Tokens of C-only entries: beyond any Python buffer id, and they become the adopted Allocation's id. */
static uint64_t next_c_token = 1ull << 48;

static size_t upper_bound(uint64_t addr)
{
    size_t lo = 0, hi = range_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ranges[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static range_t *range_find(uint64_t addr)
{
    size_t i = upper_bound(addr);
    if (i == 0 || addr >= ranges[i - 1].end)
        return NULL;
    return &ranges[i - 1];
}

static int range_insert(uint64_t base, uint64_t size, uint64_t token, uint64_t owner, int32_t device, int c_only)
{
    if (range_n == range_cap) {
        size_t cap = range_cap ? range_cap * 2 : 256;
        range_t *grown = realloc(ranges, cap * sizeof *grown);
        if (!grown)
            return -1;
        ranges = grown;
        range_cap = cap;
    }
    size_t i = upper_bound(base);
    memmove(&ranges[i + 1], &ranges[i], (range_n - i) * sizeof *ranges);
    ranges[i] = (range_t){base, base + size, token, owner, device, c_only};
    range_n++;
    return 0;
}

static void range_erase(size_t i)
{
    if (ranges[i].c_only)
        atomic_fetch_sub(&range_c_only, 1);
    memmove(&ranges[i], &ranges[i + 1], (range_n - i - 1) * sizeof *ranges);
    range_n--;
}

int zl_range_add(uint64_t base, uint64_t size, uint64_t token)
{
    pthread_mutex_lock(&range_lock);
    int r = range_insert(base, size, token, 0, 0, 0);
    pthread_mutex_unlock(&range_lock);
    return r;
}

void zl_range_remove(uint64_t base, uint64_t token)
{
    pthread_mutex_lock(&range_lock);
    for (size_t i = upper_bound(base); i > 0 && ranges[i - 1].base == base; i--) {
        if (ranges[i - 1].token == token) {
            range_erase(i - 1);
            break;
        }
    }
    pthread_mutex_unlock(&range_lock);
}

/* Hands C-only entries to Python, 5 words each (base, size, owner, device, token), at most max_entries;
 * they are Python's from now on. Returns how many. */
size_t zl_range_adopt(uint64_t *out, size_t max_entries)
{
    size_t k = 0;
    pthread_mutex_lock(&range_lock);
    for (size_t i = 0; i < range_n && k < max_entries; i++) {
        range_t *r = &ranges[i];
        if (!r->c_only)
            continue;
        uint64_t *o = out + 5 * k++;
        o[0] = r->base;
        o[1] = r->end - r->base;
        o[2] = r->owner;
        o[3] = (uint64_t)(int64_t)r->device;
        o[4] = r->token;
        r->c_only = 0;
        atomic_fetch_sub(&range_c_only, 1);
    }
    pthread_mutex_unlock(&range_lock);
    return k;
}

/* How many C-only entries exist; Python reads it before every lookup of its own index. */
int64_t *zl_range_pending(void)
{
    return (int64_t *)&range_c_only;
}

size_t zl_range_count(void)
{
    pthread_mutex_lock(&range_lock);
    size_t n = range_n;
    pthread_mutex_unlock(&range_lock);
    return n;
}

/* --- the fast entry points ---------------------------------------------------------------------------- */
static long page_size;

/* Small copies in a loop touch the same few host pages again and again, and mincore costs as much as the
 * rest of the call: pages seen mapped are remembered per thread for a short while, as the Python side
 * does (bounded staleness: a page unmapped within that window is not caught, as it would not be by a
 * driver that copies through a staging buffer). */
#define SEEN_PAGES 8
#define SEEN_NS 250000000ull
static __thread uint64_t tl_seen[SEEN_PAGES];
static __thread uint64_t tl_seen_until;
static __thread unsigned tl_seen_next;

static uint64_t coarse_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int seen(uint64_t page)
{
    for (int i = 0; i < SEEN_PAGES; i++)
        if (tl_seen[i] == page)
            return 1;
    return 0;
}

/* Whether every page of [addr, addr+n) is mapped (mincore fails with ENOMEM on a hole): a bad host pointer
 * must become an error code from Python, not a crash here. */
static int host_mapped(uint64_t addr, uint64_t n)
{
    if (!page_size)
        page_size = sysconf(_SC_PAGESIZE);
    uint64_t page = (uint64_t)page_size;
    if (addr < page)
        return 0;
    uint64_t first = addr & ~(page - 1), last = (addr + n - 1) & ~(page - 1);
    int small = last - first <= page;
    if (small && seen(first) && seen(last) && coarse_ns() < tl_seen_until)
        return 1;
    unsigned char vec[1024];
    uint64_t at = first, end = addr + n;
    while (at < end) {
        uint64_t pages = (end - at + page - 1) / page;
        if (pages > sizeof vec)
            pages = sizeof vec;
        if (mincore((void *)(uintptr_t)at, pages * page, vec) != 0)
            return 0;
        at += pages * page;
    }
    if (small) {
        uint64_t now = coarse_ns();
        if (now >= tl_seen_until) {
            memset(tl_seen, 0, sizeof tl_seen);
            tl_seen_until = now + SEEN_NS;
        }
        tl_seen[tl_seen_next++ % SEEN_PAGES] = first;
        if (last != first)
            tl_seen[tl_seen_next++ % SEEN_PAGES] = last;
    }
    return 1;
}

/* --- getters ------------------------------------------------------------------------------------------ */
static atomic_int fp_getters;           /* 1 once the table below is published; it never changes again */
static int32_t dev_count, attr_max, driver_version;
static int32_t *attr_values;            /* dev_count rows of attr_max + 1 values */
static uint8_t *attr_known;             /* same shape: 1 where Python answers with that value */

/* `values`/`known`: n_devices rows of max_attr + 1 entries. Only the first call counts; 0, or -1. */
int zl_fast_publish_devices(int32_t n_devices, int32_t max_attr, const int32_t *values, const uint8_t *known,
                            int32_t version)
{
    static atomic_int claimed;
    int expected = 0;
    if (n_devices <= 0 || max_attr < 0 || !atomic_compare_exchange_strong(&claimed, &expected, 1))
        return -1;
    size_t cells = (size_t)n_devices * ((size_t)max_attr + 1);
    int32_t *v = malloc(cells * sizeof *v);
    uint8_t *k = malloc(cells);
    if (!v || !k) {
        free(v);
        free(k);
        return -1;
    }
    memcpy(v, values, cells * sizeof *v);
    memcpy(k, known, cells);
    attr_values = v;
    attr_known = k;
    dev_count = n_devices;
    attr_max = max_attr;
    driver_version = version;
    atomic_store_explicit(&fp_getters, 1, memory_order_release);
    return 0;
}

static inline int getters_ok(void)
{
    return atomic_load_explicit(&fp_getters, memory_order_acquire);
}

static inline void put_i32(uint64_t p, int32_t v)
{
    memcpy((void *)(uintptr_t)p, &v, sizeof v);
}

int zl_fast_driver_version(uint64_t out)
{
    if (!out || !getters_ok())
        return -1;
    put_i32(out, driver_version);
    return 0;
}

int zl_fast_device_get(uint64_t out, int64_t ordinal)
{
    if (!out || !getters_ok() || ordinal < 0 || ordinal >= dev_count)
        return -1;
    put_i32(out, (int32_t)ordinal);
    return 0;
}

int zl_fast_device_count(uint64_t out)
{
    if (!out || !getters_ok())
        return -1;
    put_i32(out, dev_count);
    return 0;
}

int zl_fast_device_attribute(uint64_t out, int64_t attrib, int64_t dev)
{
    if (!out || !getters_ok() || dev < 0 || dev >= dev_count || attrib < 0 || attrib > attr_max)
        return -1;
    size_t cell = (size_t)dev * ((size_t)attr_max + 1) + (size_t)attrib;
    if (!attr_known[cell])
        return -1;
    put_i32(out, attr_values[cell]);
    return 0;
}

/* Python answers from the top of the thread's context stack without checking a sticky error; a destroyed
 * or changed context has bumped the generation, and Python answers then. */
int zl_fast_ctx_get_device(uint64_t out)
{
    if (!out || !current_ok(0))
        return -1;
    put_i32(out, tl_device);
    return 0;
}

/* A context published here is live, not sticky and not a released primary: Python answers the others. */
int zl_fast_ctx_get_current(uint64_t out)
{
    if (!out || !current_ok(0))
        return -1;
    memcpy((void *)(uintptr_t)out, &tl_ctx, sizeof tl_ctx);
    return 0;
}

int zl_fast_mem_alloc(uint64_t dptr, uint64_t size)
{
    if (!current_ok(0) || !dptr || !size)
        return -1;
    uint64_t block = zl_mem_alloc(size);
    if (!block)
        return -1;
    pthread_mutex_lock(&range_lock);
    int r = range_insert(block, size, next_c_token++, tl_ctx, tl_device, 1);
    if (r == 0)
        atomic_fetch_add(&range_c_only, 1);
    pthread_mutex_unlock(&range_lock);
    if (r != 0) {
        zl_mem_free(block);
        return -1;
    }
    memcpy((void *)(uintptr_t)dptr, &block, sizeof block);
    return 0;
}

int zl_fast_mem_free(uint64_t dptr)
{
    if (!current_ok(ZL_QUIESCE_ALL) || !dptr)
        return -1;
    pthread_mutex_lock(&range_lock);
    size_t i = upper_bound(dptr);
    /* another context's block: its streams were not waited for (Python waits for the owner's) */
    if (i == 0 || ranges[i - 1].base != dptr || !ranges[i - 1].c_only
        || (ranges[i - 1].owner != tl_ctx && atomic_load(&fp_busy) != 0)) {
        pthread_mutex_unlock(&range_lock);
        return -1;
    }
    range_erase(i - 1);
    pthread_mutex_unlock(&range_lock);
    zl_mem_free(dptr);
    return 0;
}

/* dst_device/src_device: the side must be driver memory; otherwise pageable host memory is allowed too
 * (unified addressing), checked to be mapped. */
int zl_fast_copy(uint64_t dst, uint64_t src, uint64_t n, int dst_device, int src_device)
{
    if (!current_ok(ZL_QUIESCE_COPY))
        return -1;
    if (n == 0)
        return 0;
    if (dst + n < dst || src + n < src)
        return -1;
    pthread_mutex_lock(&range_lock);
    range_t *d = range_find(dst), *s = range_find(src);
    int bad = (d && dst + n > d->end) || (s && src + n > s->end) || (!d && dst_device) || (!s && src_device);
    pthread_mutex_unlock(&range_lock);
    if (bad || (!d && !host_mapped(dst, n)) || (!s && !host_mapped(src, n)))
        return -1;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return 0;
}
