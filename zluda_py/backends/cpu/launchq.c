/* The CPU backend's native launch queue: kernel launches that streams submit run on native threads,
   without the GIL, in lanes (ZLUDA_STREAMS: zq_init's nlanes). A lane runs its items in submission order on
   its own launcher thread; lanes run at once. A ticket is (seq << 4) | lane, seq counting every item of
   every lane, so "ticket t has run" is "lane (t & 15)'s done counter >= t", which a host thread waits for
   here with the GIL released (a short spin, then a futex). A stream keeps its items in one lane while any
   is pending (its order), and moves to an idle lane when it has none. Built and loaded by launchq.py. */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "launchq.h"

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

typedef int32_t (*last_fault_fn)(void *out);
typedef void (*reserve_fn)(int32_t delta);
#define PTXRT_RESERVED 2u            /* ptxrt.h: the launching thread's core is counted already */
typedef int32_t (*launch_ex_fn)(void *fn, const uint8_t *params, uint32_t gx, uint32_t gy, uint32_t gz,
                                uint32_t bx, uint32_t by, uint32_t bz, uint32_t static_shared,
                                uint32_t dyn_shared, uint32_t frame_bytes, uint32_t flags);

struct item {
    struct item *next;
    uint64_t *stamp;            /* not NULL: no launch, write the time (CLOCK_MONOTONIC ns) there */
    uint64_t after;             /* not 0 (and no stamp, no fn): wait until this ticket of another lane ran */
    uint64_t ticket;
    void *fn;
    uint64_t *state;            /* the submitting stream's fault record (ZQ_STATE_WORDS, see zq_submit); a
                                   fault there skips the stream's later launches */
    uint32_t dims[6], static_shared, dyn_shared, frame_bytes, flags;
    uint8_t params[];
};

struct lane {
    pthread_mutex_t mu;
    struct item *head, *tail;
    uint64_t queued;                         /* under mu: items submitted and not yet run */
    _Atomic uint32_t done_word;              /* futex: bumped by every item run */
    _Atomic uint32_t done_waiters;
    _Atomic uint32_t work_word;              /* futex: bumped by every submit */
    _Atomic uint32_t launcher_asleep;
    int started;
    int running;                             /* under mu: a thread is running an item of this lane */
    int reserved;                            /* under mu: the lane holds a core of the runtime's count */
} __attribute__((aligned(64)));

static struct lane lanes[MAX_LANES];
_Atomic uint64_t zq_done[MAX_LANES * DONE_STRIDE] __attribute__((aligned(64)));

static struct {
    pthread_mutex_t seq_mu;                  /* tickets of every lane are numbered in one sequence */
    uint64_t seq;
    _Atomic uint64_t outstanding;            /* items of all lanes not yet run */
    uint32_t nlanes;
    launch_ex_fn launch;
    last_fault_fn last_fault;
    reserve_fn reserve;                      /* ptx_rt_reserve, or NULL */
    uint64_t spin_ns;
} Q = {.seq_mu = PTHREAD_MUTEX_INITIALIZER, .spin_ns = 50000, .nlanes = 1};

static pthread_once_t lanes_once = PTHREAD_ONCE_INIT;

static void lanes_init(void) {
    for (int l = 0; l < MAX_LANES; l++) pthread_mutex_init(&lanes[l].mu, NULL);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* The next queued item of lane L, when no other thread is running one of it and (limit != 0) ticket
   `limit` has not run yet: the caller then runs it (run_item). A lane's items run one at a time, in
   ticket order, on its launcher or on a host thread waiting for one (zq_wait), whichever comes first. */
static struct item *take(struct lane *L, uint64_t limit) {
    struct item *it = NULL;
    pthread_mutex_lock(&L->mu);
    if (L->head && !L->running && (!limit || !zq_reached(limit))) {
        it = L->head;
        L->head = it->next;
        if (!L->head) L->tail = NULL;
        L->running = 1;
    }
    pthread_mutex_unlock(&L->mu);
    return it;
}

/* ZLUDA_PROFILE (zq_profile): launches, total and longest ns per kernel. Lanes run at once, so the table
   has a lock (taken only while profiling); a full table drops what it cannot place. */
#define PROF_SLOTS 512
static struct prof { void *fn; uint64_t count, total_ns, max_ns; } prof[PROF_SLOTS];
static int profiling;
static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;

void zq_profile(int on) { profiling = on; }

static void prof_add(void *fn, uint64_t ns) {
    uint32_t h = (uint32_t)(((uintptr_t)fn >> 4) * 2654435761u) % PROF_SLOTS;
    pthread_mutex_lock(&prof_mu);
    for (uint32_t n = 0; n < PROF_SLOTS; n++, h = (h + 1) % PROF_SLOTS) {
        struct prof *p = &prof[h];
        if (p->fn != fn && p->fn) continue;
        p->count++;
        p->total_ns += ns;
        if (ns > p->max_ns) p->max_ns = ns;
        __atomic_store_n(&p->fn, fn, __ATOMIC_RELEASE);
        break;
    }
    pthread_mutex_unlock(&prof_mu);
}

/* Slot i's (kernel address, launches, total ns, max ns); 0 when i is out of range. */
int zq_profile_get(uint32_t i, uint64_t *out) {
    if (i >= PROF_SLOTS) return 0;
    struct prof *p = &prof[i];
    out[0] = (uint64_t)(uintptr_t)__atomic_load_n(&p->fn, __ATOMIC_ACQUIRE);
    out[1] = p->count;
    out[2] = p->total_ns;
    out[3] = p->max_ns;
    return 1;
}

static void wait_reached(uint64_t ticket, uint64_t spin_ns);

static void run_item(struct lane *L, struct item *it) {
    uint64_t *st = it->state;
    uint64_t ticket = it->ticket;
    if (it->stamp) {
        __atomic_store_n(it->stamp, now_ns(), __ATOMIC_RELEASE);
    } else if (it->after) {
        if (Q.reserve) Q.reserve(-1);        /* a waiting lane runs nothing: helpers may have its core */
        wait_reached(it->after, Q.spin_ns);
        if (Q.reserve) Q.reserve(1);
    } else if (!__atomic_load_n(&st[0], __ATOMIC_ACQUIRE)) {
        uint64_t t0 = profiling ? now_ns() : 0;
        int32_t r = Q.launch(it->fn, it->params, it->dims[0], it->dims[1], it->dims[2], it->dims[3],
                             it->dims[4], it->dims[5], it->static_shared, it->dyn_shared,
                             it->frame_bytes, it->flags | (Q.reserve ? PTXRT_RESERVED : 0));
        if (profiling) prof_add(it->fn, now_ns() - t0);
        if (r) {
            st[1] = (uint64_t)(uintptr_t)it->fn;
            st[2] = it->dims[0];
            st[3] = it->dims[1];
            /* a memory fault's details are the launching thread's, i.e. ours: copied out for the host */
            if (Q.last_fault && Q.last_fault(&st[4]) != 0) memset(&st[4], 0, 6 * sizeof st[0]);
            __atomic_store_n(&st[0], (uint64_t)(uint32_t)r, __ATOMIC_RELEASE);
        }
    }
    free(it);
    pthread_mutex_lock(&L->mu);
    atomic_store(&zq_done[LANE_OF(ticket) * DONE_STRIDE], ticket);
    atomic_fetch_add(&L->done_word, 1);
    L->queued--;
    L->running = 0;
    int more = L->head != NULL, release = !more && L->reserved;
    if (release) L->reserved = 0;
    pthread_mutex_unlock(&L->mu);
    if (release) Q.reserve(-1);
    atomic_fetch_sub(&Q.outstanding, 1);
    if (atomic_load(&L->done_waiters)) futex_wake_all(&L->done_word);
    if (more) {     /* a host thread ran this one: the launcher takes the rest */
        atomic_fetch_add(&L->work_word, 1);
        if (atomic_load(&L->launcher_asleep)) futex_wake_all(&L->work_word);
    }
}

static void *launcher_main(void *arg) {
    struct lane *L = arg;
    /* Asynchronous signals belong to the application's threads; faults in kernel code stay deliverable. */
    sigset_t set;
    sigfillset(&set);
    sigdelset(&set, SIGSEGV);
    sigdelset(&set, SIGBUS);
    sigdelset(&set, SIGFPE);
    sigdelset(&set, SIGILL);
    sigdelset(&set, SIGTRAP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    for (;;) {
        uint32_t seen = atomic_load(&L->work_word);
        struct item *it = take(L, 0);
        if (!it) {
            /* A host loop of launch + synchronize submits again within microseconds: poll a little before
               sleeping so the next launch starts at once, then cost nothing while idle. The polls yield:
               on a loaded machine the submitting thread may be waiting for this very core. */
            uint64_t t0 = now_ns();
            unsigned spins = 0;
            while (atomic_load_explicit(&L->work_word, memory_order_acquire) == seen) {
                if (++spins & 7) cpu_relax();
                else sched_yield();
                if ((spins & 7) == 0 && now_ns() - t0 > Q.spin_ns) {
                    atomic_store(&L->launcher_asleep, 1);
                    if (atomic_load(&L->work_word) == seen) futex_wait(&L->work_word, seen);
                    atomic_store(&L->launcher_asleep, 0);
                    break;
                }
            }
            continue;
        }
        run_item(L, it);
    }
    return NULL;
}

static void after_fork_child(void) {
    /* The launchers did not survive the fork; work queued in the parent is the parent's. */
    pthread_mutex_init(&Q.seq_mu, NULL);
    for (int l = 0; l < MAX_LANES; l++) {
        struct lane *L = &lanes[l];
        pthread_mutex_init(&L->mu, NULL);
        L->head = L->tail = NULL;
        L->queued = 0;
        L->started = 0;
        L->running = 0;
        L->reserved = 0;
        atomic_store(&L->done_waiters, 0);
        atomic_store(&L->launcher_asleep, 0);
        /* every ticket the parent handed out counts as run: nothing will run it here */
        atomic_store(&zq_done[l * DONE_STRIDE], (Q.seq << 4) | (uint64_t)l);
    }
    atomic_store(&Q.outstanding, 0);
}

/* Once, before any submit: the runtime's launch entry point, its ptx_rt_last_fault and ptx_rt_reserve
   (or NULL), how long idle threads spin (ns) and how many lanes streams spread over (1..16). A lane with
   work queued keeps a core reserved in the runtime, so its next launch does not find a helper there. */
int zq_init(void *launch_ex, void *last_fault, void *reserve, uint64_t spin_ns, uint32_t nlanes) {
    pthread_once(&lanes_once, lanes_init);
    Q.launch = (launch_ex_fn)launch_ex;
    Q.last_fault = (last_fault_fn)last_fault;
    Q.reserve = (reserve_fn)reserve;
    Q.spin_ns = spin_ns;
    Q.nlanes = nlanes < 1 ? 1 : nlanes > MAX_LANES ? MAX_LANES : nlanes;
    static int atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, after_fork_child);
        atfork_done = 1;
    }
    return (int)Q.nlanes;
}

/* The lane the next item of a stream whose last ticket is `prev` goes to: prev's while it is pending (the
   stream's order), else prev's lane when idle, else the idle (or least busy) lane. */
static uint32_t choose_lane(uint64_t prev) {
    uint32_t home = LANE_OF(prev) < Q.nlanes ? LANE_OF(prev) : 0;
    if (prev && !zq_reached(prev)) return LANE_OF(prev);
    uint64_t best_n = __atomic_load_n(&lanes[home].queued, __ATOMIC_RELAXED);
    uint32_t best = home;
    for (uint32_t l = 0; l < Q.nlanes && best_n; l++) {
        uint64_t n = __atomic_load_n(&lanes[l].queued, __ATOMIC_RELAXED);
        if (n < best_n) {
            best_n = n;
            best = l;
        }
    }
    return best;
}

static uint64_t enqueue(uint32_t lane, struct item *it) {
    struct lane *L = &lanes[lane];
    pthread_mutex_lock(&L->mu);
    if (!L->started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 16u << 20);    /* kernels keep per-lane .local arrays on the stack */
        int rc = pthread_create(&t, &attr, launcher_main, L);
        pthread_attr_destroy(&attr);
        if (rc) {
            pthread_mutex_unlock(&L->mu);
            free(it);
            return 0;
        }
        pthread_detach(t);
        L->started = 1;
    }
    /* numbered under the lane's lock, so a lane's queue is in ticket order */
    pthread_mutex_lock(&Q.seq_mu);
    uint64_t ticket = (++Q.seq << 4) | lane;
    pthread_mutex_unlock(&Q.seq_mu);
    it->ticket = ticket;
    if (L->tail) L->tail->next = it;
    else L->head = it;
    L->tail = it;
    __atomic_store_n(&L->queued, L->queued + 1, __ATOMIC_RELAXED);
    atomic_fetch_add(&Q.outstanding, 1);
    if (!L->reserved && Q.reserve) {
        L->reserved = 1;
        Q.reserve(1);
    }
    pthread_mutex_unlock(&L->mu);
    atomic_fetch_add(&L->work_word, 1);
    if (atomic_load(&L->launcher_asleep)) futex_wake_all(&L->work_word);
    return ticket;
}

/* Queue one launch (params are copied) behind the stream's last ticket `prev` (0: none); returns its
   ticket, or 0 when out of memory / no thread. state: 10 words the stream owns until the launch has run;
   a failed launch fills [1..9] (kernel, grid x, grid y, ptx_fault_info) and then [0] (its PTXRT_* status). */
uint64_t zq_submit(uint64_t prev, void *fn, const uint8_t *params, uint32_t nparams, uint32_t gx, uint32_t gy,
                   uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t static_shared,
                   uint32_t dyn_shared, uint32_t frame_bytes, uint32_t flags, uint64_t *state) {
    struct item *it = malloc(sizeof *it + (nparams ? nparams : 8));
    if (!it) return 0;
    it->next = NULL;
    it->stamp = NULL;
    it->after = 0;
    it->fn = fn;
    it->state = state;
    it->dims[0] = gx; it->dims[1] = gy; it->dims[2] = gz;
    it->dims[3] = bx; it->dims[4] = by; it->dims[5] = bz;
    it->static_shared = static_shared;
    it->dyn_shared = dyn_shared;
    it->frame_bytes = frame_bytes;
    it->flags = flags;
    if (nparams) memcpy(it->params, params, nparams);
    else memset(it->params, 0, 8);
    return enqueue(choose_lane(prev), it);
}

/* Queue a time stamp behind `prev`: when it runs, *dst = CLOCK_MONOTONIC ns (the clock of Python's
   time.perf_counter_ns). dst must stay valid until the ticket has run. */
uint64_t zq_stamp(uint64_t prev, uint64_t *dst) {
    struct item *it = calloc(1, sizeof *it + 8);
    if (!it) return 0;
    it->stamp = dst;
    return enqueue(choose_lane(prev), it);
}

/* The ticket a stream whose last one is `prev` must wait for so that its later items run after `ticket`
   (cuStreamWaitEvent): prev when ticket has run, the later of the two in one lane, else a waiting item
   queued behind prev (0: out of memory). */
uint64_t zq_after(uint64_t prev, uint64_t ticket) {
    if (zq_reached(ticket)) return prev;
    uint32_t lane = choose_lane(prev);
    if (lane == LANE_OF(ticket)) return prev > ticket && prev && !zq_reached(prev) ? prev : ticket;
    struct item *it = calloc(1, sizeof *it + 8);
    if (!it) return 0;
    it->after = ticket;
    return enqueue(lane, it);
}

uint64_t zq_spin_ns(void) { return Q.spin_ns; }

/* Items of all lanes submitted and not yet run. */
uint64_t zq_outstanding(void) { return atomic_load(&Q.outstanding); }

/* Wait until `ticket` ran, without running anything (an item waiting for another lane). */
static void wait_reached(uint64_t ticket, uint64_t spin_ns) {
    struct lane *L = &lanes[LANE_OF(ticket)];
    uint64_t t0 = now_ns();
    unsigned spins = 0;
    while (!zq_reached(ticket)) {
        if (++spins & 7) cpu_relax();
        else sched_yield();
        if ((spins & 7) == 0 && now_ns() - t0 > spin_ns) {
            atomic_fetch_add(&L->done_waiters, 1);
            for (;;) {
                uint32_t w = atomic_load(&L->done_word);
                if (zq_reached(ticket)) break;
                futex_wait(&L->done_word, w);
            }
            atomic_fetch_sub(&L->done_waiters, 1);
            return;
        }
    }
}

/* Block until ticket has run: run its lane's queued items up to it here when the launcher has not started
   them (this thread would only wait), else spin up to spin_ns, then sleep. Called with the GIL released. */
void zq_wait(uint64_t ticket, uint64_t spin_ns) {
    if (zq_reached(ticket)) return;
    struct lane *L = &lanes[LANE_OF(ticket)];
    uint64_t t0 = now_ns();
    unsigned spins = 0;
    while (!zq_reached(ticket)) {
        struct item *it = take(L, ticket);
        if (it) {
            run_item(L, it);
            t0 = now_ns();
            continue;
        }
        if (++spins & 7) cpu_relax();
        else sched_yield();     /* the launcher may be waiting for this core */
        if ((spins & 7) == 0 && now_ns() - t0 > spin_ns) {
            wait_reached(ticket, 0);
            return;
        }
    }
}

/* The lanes' done counters (lane l's at [l * 8]): Python reads them without a call (aligned 64-bit loads). */
_Atomic uint64_t *zq_done_address(void) { return zq_done; }

/* ------------------------------------------------------------------ handing work back to the host */

/* A pool thread (workers.py) given a task a synchronizing host thread may take over comes here first,
   GIL released. The task's claim word: `open` (a post's number << 2), open | 1 taken back by the host,
   open | 2 taken by the pool thread. A stream reuses its word with the next number for its next post, so
   a thread still looking at an earlier post cannot take the new one. */

/* Claim word transition old -> new; 1 when this call made it. */
int zq_cas(uint32_t *claim, uint32_t old, uint32_t new_) {
    return atomic_compare_exchange_strong((_Atomic uint32_t *)claim, &old, new_);
}

/* Wait up to grace_ns for the host to take the task back; 1: it did not, the caller runs it. */
int zq_grace(uint32_t *claim, uint32_t open, uint64_t grace_ns) {
    uint64_t t0 = now_ns();
    unsigned n = 0;
    while (atomic_load((_Atomic uint32_t *)claim) == open && ((++n & 7) || now_ns() - t0 < grace_ns)) {
        if (n & 7) cpu_relax();
        else sched_yield();
    }
    return zq_cas(claim, open, open | 2);
}

/* ------------------------------------------------------------------ parking pool threads

   When the host is a C program (it holds the GIL only inside driver calls), an idle pool thread waits
   here instead of on a Python lock: it is posted its next task without a GIL round trip, and a task with
   a claim word that the host takes back costs it no GIL at all (it goes back to waiting; the host puts
   it back on the idle list). */
struct zq_slot {
    _Atomic uint32_t seq;                    /* bumped by every zq_post */
    _Atomic uint32_t asleep;
    _Atomic(_Atomic uint32_t *) claim;       /* the posted task's claim word, or NULL */
    _Atomic uint32_t open;                   /* its value while neither side has taken the task */
};

void zq_post(struct zq_slot *s, uint32_t *claim, uint32_t open) {
    atomic_store(&s->open, open);
    atomic_store(&s->claim, (_Atomic uint32_t *)claim);
    atomic_fetch_add(&s->seq, 1);
    if (atomic_load(&s->asleep)) futex_wake_all(&s->seq);
}

/* 1: a task was posted (and is this worker's to run); 0: timeout_ns (0: none) passed with nothing. */
int zq_park(struct zq_slot *s, uint32_t seen, uint64_t spin_ns, uint64_t timeout_ns, uint64_t grace_ns) {
    uint64_t start = now_ns();
    for (;;) {
        unsigned spins = 0;
        while (atomic_load(&s->seq) == seen) {
            uint64_t t = (++spins & 7) ? 0 : now_ns();
            if (spins & 7) {
                cpu_relax();
                continue;
            }
            sched_yield();
            if (t - start < spin_ns) continue;
            if (timeout_ns && t - start >= timeout_ns) return 0;
            atomic_store(&s->asleep, 1);
            if (atomic_load(&s->seq) == seen) {
                if (timeout_ns) {
                    uint64_t left = timeout_ns - (t - start);
                    struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
                    syscall(SYS_futex, (uint32_t *)&s->seq, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
                } else {
                    futex_wait(&s->seq, seen);
                }
            }
            atomic_store(&s->asleep, 0);
        }
        seen = atomic_load(&s->seq);
        _Atomic uint32_t *claim = atomic_load(&s->claim);
        if (!claim) return 1;
        uint32_t open = atomic_load(&s->open);
        uint64_t t0 = now_ns();
        unsigned n = 0;
        while (atomic_load(claim) == open && ((++n & 7) || now_ns() - t0 < grace_ns))
            if (n & 7) cpu_relax(); else sched_yield();
        if (atomic_compare_exchange_strong(claim, &open, open | 2)) return 1;
        /* the host ran it and has put this worker back on the idle list: wait for the next post */
        start = now_ns();
    }
}

/* ------------------------------------------------------------------ kernel parameters */

/* Gather cuLaunchKernel's kernelParams (n pointers, one per parameter) into the packed buffer dst, by
   plan = n (offset, size) pairs. 0, or i + 1 when kernelParams[i] is NULL (nothing is read past it). */
uint32_t zq_pack(uint8_t *dst, const uint64_t *kernel_params, const uint32_t *plan, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        const void *p = (const void *)(uintptr_t)kernel_params[i];
        if (!p) return i + 1;
        memcpy(dst + plan[2 * i], p, plan[2 * i + 1]);
    }
    return 0;
}
