/* The C fast path: cuMemAlloc, cuMemFree and the synchronous cuMemcpy forms answered without entering
 * Python when everything is ordinary (the cffi hop into Python alone costs about a microsecond). Python
 * stays the authority: it tells this file which context each thread has current, bumps a generation
 * whenever any context's state changes (destroy, reset, sticky error), counts busy and capturing streams,
 * and mirrors every allocation of its index into the range table here. Whatever is unusual (an error, a
 * busy stream, a stale generation, an unknown range) returns -1 and the Python handler runs, so errors are
 * reported and logged in one place.
 *
 * Allocations made here exist only in the range table ("C-only") until a Python lookup needs them: Python
 * then adopts them all (zl_range_adopt) and owns them from there on (a C free then falls back to Python).
 *
 * The trivial getters (cuDriverGetVersion, cuDeviceGet, cuDeviceGetCount, cuDeviceGetAttribute) answer from
 * a table Python publishes once after cuInit: the devices and their attributes are fixed from then on. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
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

/* need_idle: a stream with queued work must run before a synchronous copy or a free. The busy count is
 * read before the generation: a faulting kernel's stream sets the sticky error (bumping the generation)
 * before it stops counting as busy, so a copy that sees no busy stream also sees the new generation. */
static inline int current_ok(int need_idle)
{
    if (!atomic_load_explicit(&fp_enabled, memory_order_relaxed))
        return 0;
    if (need_idle && atomic_load_explicit(&fp_busy, memory_order_acquire) != 0)
        return 0;
    return tl_ctx != 0 && tl_generation == atomic_load_explicit(&fp_generation, memory_order_acquire);
}

/* --- allocator ---------------------------------------------------------------------------------------- */
/* ZLUDA_MEM_POOL (read once, at the first zl_mem_set_total):
 * - off (0, the default): a freed block goes back at once, to free() below MAP_BYTES and to the kernel
 *   (munmap) from there up, so cuMemFree returns memory as NVIDIA's does;
 * - on (1): blocks are rounded up to size classes (4 per power of two) and a freed one waits in its
 *   class for the next allocation of that class, up to POOL_BLOCK_LIMIT a block and a quarter of the
 *   budget in all; zl_mem_trim (cuMemPoolTrimTo, context destroy, an allocation the host refused) gives
 *   them back. */
#define ALIGNMENT 256u
#define MAP_BYTES (64u << 10)            /* blocks from here up are mappings of their own */
#define POOL_BLOCK_LIMIT (256ull << 20)
#define SMALL_CLASSES 16                 /* 256 .. 4096 in steps of 256 */
#define CLASSES (SMALL_CLASSES + 4 * 17) /* then 4 per doubling, 4 KiB .. 512 MiB */

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t mem_total, mem_used, mem_cached, mem_cache_limit;
static int mem_pool = -1;                /* -1: not read yet */
static void *cache_head[CLASSES];        /* free blocks of one class, linked through their start */
static uint64_t mem_returned;            /* blocks given back to the host since start (tests read it) */

static inline uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* The class of a pooled block of `size` bytes and that class's block size; -1 past the pool's limit. */
static int size_class(uint64_t size, uint64_t *bytes)
{
    uint64_t r = round_up(size, ALIGNMENT);
    if (r <= 4096) {
        *bytes = r;
        return (int)(r / ALIGNMENT) - 1;
    }
    if (r > POOL_BLOCK_LIMIT)
        return -1;
    int k = 63 - __builtin_clzll(r - 1);          /* 2^k < r <= 2^(k+1), k >= 12 */
    uint64_t step = 1ull << (k - 2);
    uint64_t q = (r - (1ull << k) + step - 1) / step;   /* 1..4 quarters above 2^k */
    *bytes = (1ull << k) + q * step;
    return SMALL_CLASSES + (k - 12) * 4 + (int)q - 1;
}

/* What a live block of `size` requested bytes really holds (its class's size when pooling). */
static uint64_t block_bytes(uint64_t size)
{
    uint64_t bytes;
    if (mem_pool > 0 && size_class(size, &bytes) >= 0)
        return bytes;
    return round_up(size, ALIGNMENT);
}

static void *block_get(uint64_t bytes)
{
    if (bytes >= MAP_BYTES) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    void *p = NULL;
    return posix_memalign(&p, ALIGNMENT, bytes) == 0 ? p : NULL;
}

static void block_put(void *p, uint64_t bytes)
{
    if (bytes >= MAP_BYTES)
        munmap(p, bytes);
    else
        free(p);
    __atomic_fetch_add(&mem_returned, 1, __ATOMIC_RELAXED);
}

/* Live block -> requested size: open addressing with linear probing (keys are never 0). */
static uint64_t *size_keys, *size_values;
static size_t size_cap, size_count;

static inline size_t size_slot(uint64_t key)
{
    return (size_t)(((key >> 8) * 0x9E3779B97F4A7C15ull) >> 20) & (size_cap - 1);
}

static int size_grow(void)
{
    size_t cap = size_cap ? size_cap * 2 : 1024;
    uint64_t *keys = calloc(cap, sizeof *keys), *values = calloc(cap, sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return -1;
    }
    uint64_t *old_keys = size_keys, *old_values = size_values;
    size_t old_cap = size_cap;
    size_keys = keys;
    size_values = values;
    size_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old_keys[i]) {
            size_t j = size_slot(old_keys[i]);
            while (size_keys[j])
                j = (j + 1) & (size_cap - 1);
            size_keys[j] = old_keys[i];
            size_values[j] = old_values[i];
        }
    }
    free(old_keys);
    free(old_values);
    return 0;
}

static int size_put(uint64_t key, uint64_t value)
{
    if ((size_count + 1) * 2 > size_cap && size_grow() != 0)
        return -1;
    size_t i = size_slot(key);
    while (size_keys[i] && size_keys[i] != key)
        i = (i + 1) & (size_cap - 1);
    if (!size_keys[i])
        size_count++;
    size_keys[i] = key;
    size_values[i] = value;
    return 0;
}

/* Removes `key`; its size, or 0 when unknown. */
static uint64_t size_take(uint64_t key)
{
    if (!size_cap)
        return 0;
    size_t mask = size_cap - 1, i = size_slot(key);
    while (size_keys[i] != key) {
        if (!size_keys[i])
            return 0;
        i = (i + 1) & mask;
    }
    uint64_t value = size_values[i];
    size_count--;
    /* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
    for (size_t j = (i + 1) & mask; size_keys[j]; j = (j + 1) & mask) {
        size_t home = size_slot(size_keys[j]);
        int stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            size_keys[i] = size_keys[j];
            size_values[i] = size_values[j];
            i = j;
        }
    }
    size_keys[i] = 0;
    return value;
}

void zl_mem_set_total(uint64_t total)
{
    pthread_mutex_lock(&mem_lock);
    mem_total = total;
    mem_cache_limit = total / 4;
    if (mem_pool < 0) {
        const char *e = getenv("ZLUDA_MEM_POOL");
        mem_pool = e && e[0] && e[0] != '0';
    }
    pthread_mutex_unlock(&mem_lock);
}

int zl_mem_pool_enabled(void)
{
    return mem_pool > 0;
}

/* Cached bytes (pool on), and blocks given back to the host so far. */
uint64_t zl_mem_cached(void)
{
    pthread_mutex_lock(&mem_lock);
    uint64_t n = mem_cached;
    pthread_mutex_unlock(&mem_lock);
    return n;
}

uint64_t zl_mem_returned(void)
{
    return __atomic_load_n(&mem_returned, __ATOMIC_RELAXED);
}

void zl_mem_trim(void)
{
    void *heads[CLASSES];
    pthread_mutex_lock(&mem_lock);
    memcpy(heads, cache_head, sizeof heads);
    memset(cache_head, 0, sizeof cache_head);
    mem_cached = 0;
    pthread_mutex_unlock(&mem_lock);
    for (int c = 0; c < CLASSES; c++) {
        uint64_t bytes = c < SMALL_CLASSES ? (uint64_t)(c + 1) * ALIGNMENT : 0;
        if (!bytes) {
            int k = 12 + (c - SMALL_CLASSES) / 4, q = (c - SMALL_CLASSES) % 4 + 1;
            bytes = (1ull << k) + (uint64_t)q * (1ull << (k - 2));
        }
        while (heads[c]) {
            void *block = heads[c];
            memcpy(&heads[c], block, sizeof(void *));
            block_put(block, bytes);
        }
    }
#ifdef __GLIBC__
    malloc_trim(0);                      /* the small blocks just freed go back to the kernel too */
#endif
}

/* The address of a new block of `size` bytes, or 0: over the budget, or the host allocator refused. */
uint64_t zl_mem_alloc(uint64_t size)
{
    if (size == 0 || size > UINT64_MAX - (1ull << 32))
        return 0;
    uint64_t bytes = 0;
    void *block = NULL;
    pthread_mutex_lock(&mem_lock);
    if (size > mem_total || mem_used + size > mem_total) {
        pthread_mutex_unlock(&mem_lock);
        return 0;
    }
    int c = mem_pool > 0 ? size_class(size, &bytes) : -1;
    if (c >= 0 && cache_head[c]) {
        block = cache_head[c];
        if (size_put((uint64_t)(uintptr_t)block, size) == 0) {
            memcpy(&cache_head[c], block, sizeof(void *));
            mem_cached -= bytes;
            mem_used += size;
            pthread_mutex_unlock(&mem_lock);
            return (uint64_t)(uintptr_t)block;
        }
        block = NULL;
    }
    bytes = block_bytes(size);
    pthread_mutex_unlock(&mem_lock);
    block = block_get(bytes);
    if (!block) {
        zl_mem_trim();
        block = block_get(bytes);
        if (!block)
            return 0;
    }
    pthread_mutex_lock(&mem_lock);
    if (mem_used + size > mem_total || size_put((uint64_t)(uintptr_t)block, size) != 0) {
        pthread_mutex_unlock(&mem_lock);
        block_put(block, bytes);
        return 0;
    }
    mem_used += size;
    pthread_mutex_unlock(&mem_lock);
    return (uint64_t)(uintptr_t)block;
}

/* 0, or -1 when `addr` is not a live block of this allocator. */
int zl_mem_free(uint64_t addr)
{
    pthread_mutex_lock(&mem_lock);
    uint64_t size = addr ? size_take(addr) : 0;
    if (!size) {
        pthread_mutex_unlock(&mem_lock);
        return -1;
    }
    mem_used -= size;
    uint64_t bytes = block_bytes(size);
    void *block = (void *)(uintptr_t)addr;
    int c = mem_pool > 0 ? size_class(size, &bytes) : -1;
    if (c >= 0 && mem_cached + bytes <= mem_cache_limit) {
        memcpy(block, &cache_head[c], sizeof(void *));
        cache_head[c] = block;
        mem_cached += bytes;
        block = NULL;
    }
    pthread_mutex_unlock(&mem_lock);
    if (block)
        block_put(block, bytes);
    return 0;
}

uint64_t zl_mem_in_use(void)
{
    pthread_mutex_lock(&mem_lock);
    uint64_t used = mem_used;
    pthread_mutex_unlock(&mem_lock);
    return used;
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
    if (!current_ok(1) || !dptr)
        return -1;
    pthread_mutex_lock(&range_lock);
    size_t i = upper_bound(dptr);
    if (i == 0 || ranges[i - 1].base != dptr || !ranges[i - 1].c_only) {
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
    if (!current_ok(1))
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
