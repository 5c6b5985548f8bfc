/* Streams' native state, shared by the CPU backend's Python streams (stream.py) and the shim's C fast path
   (src/fastlaunch.c): a stream's last ticket, fault record and busy count change only under its lock, and a
   registry finds a stream by (context, CUstream handle, thread) so that launches, synchronizes and queries
   that never enter Python keep CUDA's stream order, the legacy stream's implicit waits included. Anything
   the fast path cannot decide alone (Python work queued, a fault, a stream it does not know) it leaves to
   Python (-1). Built with launchq.c. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launchq.h"

#define HANDLE_LEGACY 1u            /* CU_STREAM_LEGACY: the legacy default stream of a context */
#define HANDLE_PER_THREAD 2u        /* CU_STREAM_PER_THREAD: a thread's own default stream */
#define CUDA_ERROR_NOT_READY 600

/* The words Python reads without a call come first (stream.py: [0] ticket, [1..10] fault record,
   [11] counted, [12] synced, [13] closed, [14] destroyed, which Python writes, [15] the context's count). */
struct zq_stream {
    _Atomic uint64_t ticket;            /* the stream's last native item: later work waits for it */
    uint64_t state[ZQ_STATE_WORDS];     /* its launches' fault record (zq_submit) */
    _Atomic uint64_t counted;           /* counted busy: in its context's count and the process's */
    _Atomic uint64_t synced;            /* a synchronize came since Python last gave its work to the pool */
    _Atomic uint64_t closed;            /* Python work is queued or running inline: the fast path leaves it */
    _Atomic uint64_t destroyed;         /* cuStreamDestroy: the fast path no longer finds it */
    uint64_t ctx_busy_address;          /* ctx_busy, for Python */
    pthread_mutex_t mu;                 /* ticket, counted and closed change under it */
    uint64_t ctx, handle, thread;       /* the registry's key (thread: a per-thread stream's owner) */
    _Atomic int64_t *ctx_busy;          /* its context's count of counted streams, while registered */
    uint64_t serial;
    int32_t blocking;                   /* waits for the legacy stream, and it for this one */
    int32_t findable;                   /* registered and not destroyed */
    int32_t index;                      /* its place in the registry, or -1 */
    int32_t pins;                       /* fast synchronizes waiting for it without the registry lock */
    int32_t released;                   /* Python dropped it: freed once nothing may touch it */
    struct zq_stream *next_dead;
};
_Static_assert(offsetof(struct zq_stream, state) == 8 && offsetof(struct zq_stream, counted) == 11 * 8 &&
               offsetof(struct zq_stream, closed) == 13 * 8 && offsetof(struct zq_stream, ctx_busy_address) == 15 * 8,
               "stream.py reads words 0-15");

static _Atomic int64_t busy_none;                       /* the count of a stream that is in no context */
static _Atomic int64_t busy_local;
static _Atomic int64_t *busy_all = &busy_local;         /* the shim's count of busy streams, if any */

/* The registry: live streams (findable), and destroyed ones still counted busy (their work is pending). */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct zq_stream **reg;
static uint32_t reg_n, reg_cap;
static struct zq_stream *dead;          /* released, but a ticket may still write its fault record */
static uint64_t next_serial = 1;

/* Each context's count of counted streams (Python reads it to know whether any may have work). */
#define CTX_BUCKETS 256
static struct ctx_count { uint64_t ctx; _Atomic int64_t busy; struct ctx_count *next; } *ctx_counts[CTX_BUCKETS];

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void after_fork_child(void) {
    /* Only this thread survived: whatever held a lock is gone. Tickets count as run (launchq.c). */
    pthread_mutex_init(&reg_mu, NULL);
    for (uint32_t i = 0; i < reg_n; i++) {
        pthread_mutex_init(&reg[i]->mu, NULL);
        reg[i]->pins = 0;
    }
}

static void fork_setup(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* The process-wide count the shim's fast paths read (its fp_busy); set once, before any stream exists. */
void zq_set_busy_counter(int64_t *counter) {
    busy_all = counter ? (_Atomic int64_t *)counter : &busy_local;
}

static _Atomic int64_t *ctx_count(uint64_t ctx) {     /* under reg_mu */
    struct ctx_count **b = &ctx_counts[(ctx >> 4) % CTX_BUCKETS];
    for (struct ctx_count *c = *b; c; c = c->next)
        if (c->ctx == ctx) return &c->busy;
    struct ctx_count *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ctx = ctx;
    c->next = *b;
    *b = c;
    return &c->busy;
}

static void count(struct zq_stream *s) {     /* under s->mu */
    if (!atomic_load_explicit(&s->counted, memory_order_relaxed)) {
        atomic_store(&s->counted, 1);
        atomic_fetch_add(s->ctx_busy, 1);
        atomic_fetch_add(busy_all, 1);
    }
}

static void uncount(struct zq_stream *s) {   /* under s->mu */
    if (atomic_load_explicit(&s->counted, memory_order_relaxed)) {
        atomic_store(&s->counted, 0);
        atomic_fetch_sub(s->ctx_busy, 1);
        atomic_fetch_sub(busy_all, 1);
    }
}

/* Registered, and not destroyed since. */
static inline int findable(const struct zq_stream *s) {
    return s->findable && !atomic_load_explicit(&s->destroyed, memory_order_relaxed);
}

/* No work of the stream is queued or running (ignoring what others may add after this). */
static inline int idle(struct zq_stream *s) {
    return !atomic_load(&s->closed) && zq_reached(atomic_load(&s->ticket));
}

/* ------------------------------------------------------------------ lifetime (under reg_mu) */

static int can_free(struct zq_stream *s) {
    return s->released && s->index < 0 && s->pins == 0 && zq_reached(atomic_load(&s->ticket));
}

static void bury(struct zq_stream *s) {
    if (can_free(s)) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return;
    }
    s->next_dead = dead;
    dead = s;
}

static void sweep_dead(void) {
    for (struct zq_stream **p = &dead; *p;) {
        struct zq_stream *s = *p;
        if (can_free(s)) {
            *p = s->next_dead;
            pthread_mutex_destroy(&s->mu);
            free(s);
        } else {
            p = &s->next_dead;
        }
    }
}

static void reg_remove(struct zq_stream *s) {
    uint32_t i = (uint32_t)s->index;
    reg[i] = reg[--reg_n];
    reg[i]->index = (int32_t)i;
    s->index = -1;
}

/* A destroyed stream leaves the registry once its work has run (it counts as busy until then). */
static int reap(struct zq_stream *s) {
    if (findable(s)) return 0;
    pthread_mutex_lock(&s->mu);
    int done = idle(s);
    if (done) uncount(s);
    pthread_mutex_unlock(&s->mu);
    if (!done) return 0;
    reg_remove(s);
    if (s->released) bury(s);
    return 1;
}

static struct zq_stream *stream_new(void) {
    pthread_once(&fork_once, fork_setup);
    struct zq_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->ctx_busy = &busy_none;
    s->index = -1;
    pthread_mutex_lock(&reg_mu);
    s->serial = next_serial++;
    if (dead) sweep_dead();
    pthread_mutex_unlock(&reg_mu);
    return s;
}

/* Make the stream findable by the fast path as (ctx, handle, thread); its context's busy count, NULL when
   out of memory (the stream then stays unregistered). */
static _Atomic int64_t *stream_register(struct zq_stream *s, uint64_t ctx, uint64_t handle, uint64_t thread,
                                        int32_t blocking) {
    pthread_mutex_lock(&reg_mu);
    _Atomic int64_t *busy = ctx_count(ctx);
    if (!busy || s->index >= 0) {
        pthread_mutex_unlock(&reg_mu);
        return busy;
    }
    if (reg_n == reg_cap) {
        uint32_t cap = reg_cap ? reg_cap * 2 : 64;
        struct zq_stream **grown = realloc(reg, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&reg_mu);
            return NULL;
        }
        reg = grown;
        reg_cap = cap;
    }
    s->ctx = ctx;
    s->handle = handle;
    s->thread = handle == HANDLE_PER_THREAD ? thread : 0;
    s->blocking = blocking;
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->counted)) {         /* its count moves from "no context" to the context's */
        atomic_fetch_sub(s->ctx_busy, 1);
        atomic_fetch_add(busy, 1);
    }
    s->ctx_busy = busy;
    s->ctx_busy_address = (uint64_t)(uintptr_t)busy;
    pthread_mutex_unlock(&s->mu);
    s->findable = 1;
    s->index = (int32_t)reg_n;
    reg[reg_n++] = s;
    pthread_mutex_unlock(&reg_mu);
    return busy;
}

void zq_stream_release(struct zq_stream *s);

/* A stream of context `ctx` named CUstream `handle` (1: the legacy stream, 2: `thread`'s per-thread stream),
   made and registered in one call (each call costs Python about a microsecond); NULL when out of memory.
   When it leaves its context (cuStreamDestroy, a default stream dropped, a teardown) Python sets its
   `destroyed` word: the fast path no longer finds it, and it counts as busy until its pending work has run
   and the registry reaps it (zq_fast_sync, zq_stream_release). */
struct zq_stream *zq_stream_create(uint64_t ctx, uint64_t handle, uint64_t thread, int32_t blocking) {
    struct zq_stream *s = stream_new();
    if (s && !stream_register(s, ctx, handle, thread, blocking)) {
        zq_stream_release(s);
        return NULL;
    }
    return s;
}

/* Python dropped the stream: freed once its launches can no longer write its fault record. */
void zq_stream_release(struct zq_stream *s) {
    pthread_mutex_lock(&reg_mu);
    s->released = 1;
    if (s->index >= 0) {
        s->findable = 0;
        reap(s);                    /* removed and buried when done, else by a later reap */
    } else {
        pthread_mutex_lock(&s->mu);     /* in no registry: nothing would ever find it idle */
        uncount(s);
        pthread_mutex_unlock(&s->mu);
        bury(s);
    }
    if (dead) sweep_dead();
    pthread_mutex_unlock(&reg_mu);
}

/* ------------------------------------------------------------------ Python's operations on its stream */

/* A launch behind the stream's work (stream.py's native path); the ticket, or 0 (out of memory). */
uint64_t zq_stream_submit(struct zq_stream *s, void *fn, const uint8_t *params, uint32_t nparams, uint32_t gx,
                          uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                          uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes, uint32_t flags) {
    pthread_mutex_lock(&s->mu);
    uint64_t t = zq_submit(atomic_load(&s->ticket), fn, params, nparams, gx, gy, gz, bx, by, bz, static_shared,
                           dyn_shared, frame_bytes, flags, s->state);
    if (t) {
        atomic_store(&s->ticket, t);
        count(s);
    }
    pthread_mutex_unlock(&s->mu);
    return t;
}

/* A time stamp behind the stream's work (an event record); its ticket, or 0. */
uint64_t zq_stream_stamp(struct zq_stream *s, uint64_t *dst) {
    pthread_mutex_lock(&s->mu);
    uint64_t t = zq_stamp(atomic_load(&s->ticket), dst);
    if (t) {
        atomic_store(&s->ticket, t);
        count(s);
    }
    pthread_mutex_unlock(&s->mu);
    return t;
}

/* Later work of the stream waits for `ticket` (cuStreamWaitEvent); the stream's new last ticket, or 0. */
uint64_t zq_stream_after(struct zq_stream *s, uint64_t ticket) {
    pthread_mutex_lock(&s->mu);
    uint64_t prev = atomic_load(&s->ticket);
    uint64_t t = zq_after(prev, ticket);
    if (t && t != prev) {
        atomic_store(&s->ticket, t);
        count(s);
    }
    pthread_mutex_unlock(&s->mu);
    return t;
}

/* Python work was queued: it counts as busy and takes the fast path's launches until zq_stream_open. */
void zq_stream_close(struct zq_stream *s) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->closed, 1);
    count(s);
    pthread_mutex_unlock(&s->mu);
}

/* Python's queue drained. */
void zq_stream_open(struct zq_stream *s) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->closed, 0);
    if (zq_reached(atomic_load(&s->ticket))) uncount(s);
    pthread_mutex_unlock(&s->mu);
}

/* 1 when every native item of the stream has run and nothing is queued in Python: Python may then run a
   small piece of work inline, and no fast-path launch starts before zq_stream_unhold. 0: not idle. */
int zq_stream_hold(struct zq_stream *s) {
    pthread_mutex_lock(&s->mu);
    int ok = idle(s);
    if (ok) atomic_store(&s->closed, 1);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void zq_stream_unhold(struct zq_stream *s) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->closed, 0);
    pthread_mutex_unlock(&s->mu);
}

/* 1 (and no longer counted busy) when the stream is idle and its last ticket is still `ticket`, the one
   whose fault record the caller has looked at. */
int zq_stream_idle(struct zq_stream *s, uint64_t ticket) {
    pthread_mutex_lock(&s->mu);
    int ok = atomic_load(&s->ticket) == ticket && idle(s);
    if (ok) uncount(s);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* ------------------------------------------------------------------ the shim's fast path */

static inline int matches(const struct zq_stream *s, uint64_t handle, uint64_t thread) {
    return s->handle == handle && (handle != HANDLE_PER_THREAD || s->thread == thread);
}

/* A launch on stream (ctx, handle, thread) when nothing unusual is going on; 0, or -1 for Python: a stream
   the registry does not know, Python work or a fault on it, or a legacy-stream wait to make (the legacy
   stream waits for every blocking stream's earlier work, blocking streams for the legacy stream's). */
int zq_fast_launch(uint64_t ctx, uint64_t handle, uint64_t thread, void *fn, const uint8_t *params,
                   uint32_t nparams, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                   uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes) {
    struct zq_stream *target = NULL;
    int blocking_pending = 0, legacy_pending = 0;
    pthread_mutex_lock(&reg_mu);
    for (uint32_t i = 0; i < reg_n; i++) {
        struct zq_stream *s = reg[i];
        if (s->ctx != ctx || !findable(s)) continue;
        if (matches(s, handle, thread)) {
            target = s;
        } else if ((s->blocking || s->handle == HANDLE_LEGACY) && !idle(s)) {
            if (s->handle == HANDLE_LEGACY) legacy_pending = 1;
            else blocking_pending = 1;
        }
    }
    int r = -1;
    if (target && !(handle == HANDLE_LEGACY && blocking_pending) && !(target->blocking && legacy_pending)) {
        pthread_mutex_lock(&target->mu);
        if (!atomic_load(&target->closed) && !__atomic_load_n(&target->state[0], __ATOMIC_ACQUIRE)) {
            uint64_t t = zq_submit(atomic_load(&target->ticket), fn, params, nparams, gx, gy, gz, bx, by, bz,
                                   static_shared, dyn_shared, frame_bytes, 0, target->state);
            if (t) {
                atomic_store(&target->ticket, t);
                count(target);
                r = 0;
            }
        }
        pthread_mutex_unlock(&target->mu);
    }
    pthread_mutex_unlock(&reg_mu);
    return r;
}

#define SYNC_STREAM 0       /* one stream */
#define SYNC_CONTEXT 1      /* every stream of the context, destroyed ones with work pending too */
#define SYNC_BLOCKING 2     /* what a synchronous copy on the legacy stream waits for */
#define SYNC_MAX 64

/* Wait for the work queued so far on the streams `mode` names; 0, or -1 for Python: Python work queued on
   one of them, a fault (Python reports it), a stream the registry does not know, too many to wait for. */
int zq_fast_sync(uint64_t ctx, int32_t mode, uint64_t handle, uint64_t thread) {
    struct zq_stream *wait[SYNC_MAX];
    uint64_t tickets[SYNC_MAX];
    int n = 0, found = 0, r = 0;
    pthread_mutex_lock(&reg_mu);
    for (uint32_t i = 0; i < reg_n; i++) {
        struct zq_stream *s = reg[i];
        if (s->ctx != ctx) continue;
        if (!findable(s)) {
            if (reap(s)) {
                i--;                        /* the last entry moved here */
                continue;
            }
            if (mode != SYNC_CONTEXT) continue;
        } else if (mode == SYNC_STREAM && !matches(s, handle, thread)) {
            continue;
        } else if (mode == SYNC_BLOCKING && !s->blocking && s->handle != HANDLE_LEGACY) {
            /* not waited for; but a copy after it ran returns its fault, as Python's does (ctx.idle) */
            if (zq_reached(atomic_load(&s->ticket)) && __atomic_load_n(&s->state[0], __ATOMIC_ACQUIRE)) {
                r = -1;
                break;
            }
            continue;
        }
        found = 1;
        uint64_t t = atomic_load(&s->ticket);
        int done = zq_reached(t);       /* before the fault record: a fault is written before its ticket runs */
        if (atomic_load(&s->closed) || __atomic_load_n(&s->state[0], __ATOMIC_ACQUIRE) || n == SYNC_MAX) {
            r = -1;
            break;
        }
        atomic_store(&s->synced, 1);
        if (done) {
            if (atomic_load_explicit(&s->counted, memory_order_relaxed)) {
                pthread_mutex_lock(&s->mu);
                if (atomic_load(&s->ticket) == t) uncount(s);
                pthread_mutex_unlock(&s->mu);
            }
            continue;
        }
        s->pins++;
        wait[n] = s;
        tickets[n++] = t;
    }
    if (mode == SYNC_STREAM && !found) r = -1;
    pthread_mutex_unlock(&reg_mu);
    if (r == 0)
        for (int k = 0; k < n; k++) zq_wait(tickets[k], zq_spin_ns());
    if (!n) return r;
    pthread_mutex_lock(&reg_mu);
    for (int k = 0; k < n; k++) {
        struct zq_stream *s = wait[k];
        if (r == 0) {
            pthread_mutex_lock(&s->mu);
            int done = idle(s);
            if (__atomic_load_n(&s->state[0], __ATOMIC_ACQUIRE)) r = -1;
            else if (done) uncount(s);
            pthread_mutex_unlock(&s->mu);
        }
        s->pins--;
    }
    if (dead) sweep_dead();
    pthread_mutex_unlock(&reg_mu);
    return r;
}

/* cuStreamQuery: 0 (idle, no longer counted busy), CUDA_ERROR_NOT_READY, or -1 for Python. */
int zq_fast_query(uint64_t ctx, uint64_t handle, uint64_t thread) {
    int r = -1;
    pthread_mutex_lock(&reg_mu);
    for (uint32_t i = 0; i < reg_n; i++) {
        struct zq_stream *s = reg[i];
        if (s->ctx != ctx || !findable(s) || !matches(s, handle, thread)) continue;
        pthread_mutex_lock(&s->mu);
        int done = idle(s);
        if (!atomic_load(&s->closed) && !__atomic_load_n(&s->state[0], __ATOMIC_ACQUIRE)) {
            r = done ? 0 : CUDA_ERROR_NOT_READY;
            if (done) uncount(s);
        }
        pthread_mutex_unlock(&s->mu);
        break;
    }
    pthread_mutex_unlock(&reg_mu);
    return r;
}
