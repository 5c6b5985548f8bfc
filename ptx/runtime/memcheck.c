/* ZLUDA_MEMCHECK: the range table kernels' accesses are checked against, the check generated code calls
   before each access (ptx/codegen/memcheck.py), and compute-sanitizer's report of the first bad one. */
#define _GNU_SOURCE
#include "ptxrt.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ptxrt_memcheck_stop(ptx_worker *W, uint64_t addr, int32_t access);   /* ptxrt.c */

int ptxrt_mc_on;                     /* ptx_rt_memcheck_enable(1) was called: device malloc registers too */

/* Readers (kernel threads) take no lock: the table is copied on every change and the new copy published
   with one atomic store. Old copies may still be read by a running launch, so they are freed only at the
   next launch's start, when no kernel runs (launches are serialised, ptxrt_memcheck_launch_begin). */
struct range { uint64_t base, end; uint32_t kind; };
struct table { size_t n; struct range r[]; };
static _Atomic(struct table *) current;
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct table **retired;
static size_t nretired, capretired;
static atomic_int reported;          /* the first bad access of a launch is the one printed */

static const char *const KIND[] = {"allocation", "allocation", "host allocation", "global variable",
                                   "device-malloc allocation", "managed allocation", "registered host memory"};

static void publish(struct table *t) {
    struct table *old = atomic_exchange(&current, t);
    if (!old) return;
    if (nretired == capretired) {
        size_t cap = capretired ? capretired * 2 : 16;
        struct table **g = realloc(retired, cap * sizeof *g);
        if (!g) return;              /* leaked rather than freed under a reader */
        retired = g;
        capretired = cap;
    }
    retired[nretired++] = old;
}

static size_t upper(const struct table *t, uint64_t addr) {   /* first index with base > addr */
    size_t lo = 0, hi = t ? t->n : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->r[mid].base <= addr) lo = mid + 1; else hi = mid;
    }
    return lo;
}

void ptx_rt_memcheck_enable(int32_t on) { __atomic_store_n(&ptxrt_mc_on, on, __ATOMIC_RELEASE); }

int32_t ptx_rt_memcheck_add(uint64_t base, uint64_t size, uint32_t kind) {
    if (!size) return 0;
    pthread_mutex_lock(&table_mu);
    struct table *t = atomic_load(&current);
    size_t n = t ? t->n : 0, i = upper(t, base);
    struct table *u = malloc(sizeof *u + (n + 1) * sizeof u->r[0]);
    if (!u) { pthread_mutex_unlock(&table_mu); return -1; }
    if (i) memcpy(u->r, t->r, i * sizeof u->r[0]);
    u->r[i] = (struct range){base, base + size, kind};
    if (n > i) memcpy(u->r + i + 1, t->r + i, (n - i) * sizeof u->r[0]);
    u->n = n + 1;
    publish(u);
    pthread_mutex_unlock(&table_mu);
    return 0;
}

void ptx_rt_memcheck_remove(uint64_t base, uint64_t size) {
    pthread_mutex_lock(&table_mu);
    struct table *t = atomic_load(&current);
    for (size_t i = upper(t, base); i > 0 && t->r[i - 1].base == base; i--) {
        if (t->r[i - 1].end != base + size) continue;
        struct table *u = malloc(sizeof *u + t->n * sizeof u->r[0]);
        if (!u) break;
        memcpy(u->r, t->r, (i - 1) * sizeof u->r[0]);
        memcpy(u->r + i - 1, t->r + i, (t->n - i) * sizeof u->r[0]);
        u->n = t->n - 1;
        publish(u);
        break;
    }
    pthread_mutex_unlock(&table_mu);
}

void ptx_rt_memcheck_remove_base(uint64_t base) {      /* device free: the one range starting there */
    struct table *t = atomic_load(&current);
    size_t i = upper(t, base);
    if (i && t->r[i - 1].base == base) ptx_rt_memcheck_remove(base, t->r[i - 1].end - base);
}

void ptxrt_memcheck_launch_begin(void) {
    atomic_store(&reported, 0);
    pthread_mutex_lock(&table_mu);
    for (size_t i = 0; i < nretired; i++) free(retired[i]);
    nretired = 0;
    pthread_mutex_unlock(&table_mu);
}

/* The thread's own stack above the check's frame: where a kernel's .local variables (allocas, or a
   cooperative block's fiber stack) live. 1 MiB covers any frame the code generator makes. */
static int on_stack(uint64_t addr, uint64_t size) {
    uint64_t lo = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    return addr >= lo && addr + size <= lo + (1u << 20);
}

#define SP_GENERIC 0
#define SP_GLOBAL 1
#define SP_SHARED 2
#define SP_LOCAL 3

/* desc: size in bits 0-23, write in bit 24, state space in bits 25-27, bit 28 (local): known bad; site: PTX line | index << 32 */
void ptx_rt_memcheck(const ptx_launch *L, ptx_worker *W, uint64_t addr, uint32_t desc, uint64_t site,
                     const char *fn, const char *file, uint32_t tx, uint32_t ty, uint32_t tz,
                     uint32_t cx, uint32_t cy, uint32_t cz) {
    uint64_t size = desc & 0xFFFFFFu;
    int write = (desc >> 24) & 1, space = (desc >> 25) & 7;
    uint64_t align = size & -size;
    int misaligned = align > 1 && (addr & (align - 1));
    uint64_t sh = (uint64_t)(uintptr_t)W->shared, shn = (uint64_t)L->static_shared + L->dyn_shared;
    int in_shared = addr >= sh && addr + size <= sh + shn;
    uint64_t sc = (uint64_t)(uintptr_t)W->scratch;
    int in_local = on_stack(addr, size) || (addr >= sc && addr + size <= sc + W->scratch_bytes);
    struct table *t = atomic_load_explicit(&current, memory_order_acquire);
    size_t i = upper(t, addr);
    const struct range *below = i ? &t->r[i - 1] : NULL, *above = t && i < t->n ? &t->r[i] : NULL;
    int in_table = below && addr >= below->base && addr + size <= below->end;
    uint64_t pb = (uint64_t)(uintptr_t)L->params;
    int in_params = addr >= pb && addr + size <= pb + 32768;    /* generic access to a kernel parameter */
    uint64_t ws = (uint64_t)(uintptr_t)L->grid_workspace;     /* nvcc's inline grid.sync counter */
    in_table = in_table || (ws && addr >= ws && addr + size <= ws + 64);
    int ok;
    switch (space) {
    case SP_SHARED: ok = in_shared; break;
    case SP_LOCAL: ok = in_local && !(desc >> 28 & 1); break;   /* bit 28: outside the function's .local */
    case SP_GLOBAL: ok = in_table; break;
    default: ok = in_table || in_shared || in_local || in_params; break;
    }
    if (ok && !misaligned) return;
    if (!atomic_exchange(&reported, 1)) {
        const char *sp = space == SP_SHARED || (space == SP_GENERIC && in_shared) ? "__shared__"
                       : space == SP_LOCAL ? "__local__" : "__global__";
        char near[256] = "";
        if (!misaligned && space != SP_SHARED && space != SP_LOCAL) {
            /* the allocation closest to the access: the one ending below it or starting above it */
            const struct range *r = NULL;
            uint64_t after = below ? addr - below->base - (below->end - below->base) : 0;
            if (below && addr >= below->end) r = below;
            if (above && (!r || above->base - addr < after)) r = above;
            if (below && addr < below->end) r = below;       /* starts inside, runs past the end */
            if (r && r == below && addr >= r->end)
                snprintf(near, sizeof near, "=========     and is %llu bytes after the nearest %s at 0x%llx of size %llu bytes\n",
                         (unsigned long long)(addr - r->end), KIND[r->kind < 7 ? r->kind : 0],
                         (unsigned long long)r->base, (unsigned long long)(r->end - r->base));
            else if (r && r == below)
                snprintf(near, sizeof near, "=========     and is %llu bytes inside the nearest %s at 0x%llx of size %llu bytes, running %llu bytes past its end\n",
                         (unsigned long long)(addr - r->base), KIND[r->kind < 7 ? r->kind : 0],
                         (unsigned long long)r->base, (unsigned long long)(r->end - r->base),
                         (unsigned long long)(addr + size - r->end));
            else if (r)
                snprintf(near, sizeof near, "=========     and is %llu bytes before the nearest %s at 0x%llx of size %llu bytes\n",
                         (unsigned long long)(r->base - addr), KIND[r->kind < 7 ? r->kind : 0],
                         (unsigned long long)r->base, (unsigned long long)(r->end - r->base));
        } else if (!misaligned && space == SP_SHARED) {
            snprintf(near, sizeof near, "=========     and is %lld bytes from the start of the block's %llu bytes of shared memory\n",
                     (long long)(addr - sh), (unsigned long long)shn);
        }
        fprintf(stderr,
                "========= Invalid %s %s of size %llu bytes\n"
                "=========     at %s+0x%llx in %s:%u\n"
                "=========     by thread (%u,%u,%u) in block (%u,%u,%u)\n"
                "=========     Address 0x%llx is %s\n%s=========\n",
                sp, write ? "write" : "read", (unsigned long long)size, fn,
                (unsigned long long)(site >> 32) * 16, file, (uint32_t)site, tx, ty, tz, cx, cy, cz,
                (unsigned long long)addr, misaligned ? "misaligned" : "out of bounds", near);
        fflush(stderr);
    }
    ptxrt_memcheck_stop(W, addr, write ? 2 : 1);
}
