/* The device-memory allocator the C fast path and the CPU backend share (src/fastpath.h): 256-byte aligned
 * blocks under a byte budget, with ZLUDA_MEM_POOL's size-class pools of freed blocks. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "fastpath.h"

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
        if (p == MAP_FAILED)
            return NULL;
        madvise(p, bytes, MADV_HUGEPAGE);
        return p;
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

