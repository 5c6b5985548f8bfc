/* The CPU runtime under compiled PTX kernels: a persistent worker pool that runs a grid's blocks,
   plus the device-side services generated code calls (printf, malloc, trap, assert, grid sync).
   The ABI is ptxrt.h. Built by ptx/runtime/__init__.py with the system C compiler. */
#define _GNU_SOURCE
#include "ptxrt.h"
#include "devlaunch.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

#define SHARED_ALIGN 128
#define SHARED_SLACK 64
#define SCRATCH_ALIGN 64
#define HELPER_STACK (16u << 20)   /* generated code may keep per-lane .local arrays on the stack */

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

static uint64_t now_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long futex_wait(_Atomic uint32_t *addr, uint32_t expected, const struct timespec *timeout) {
    return syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, timeout, NULL, 0);
}

static long futex_wake_all(_Atomic uint32_t *addr) {
    return syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Inside malloc/free (or a locked FILE) on a kernel's behalf: a fault there is not recovered, see
   "memory faults in kernels" below. volatile: nothing else reads it, so the compiler would drop the
   increments around the calls. */
static __thread volatile int tls_in_heap;

/* memcheck.c (ZLUDA_MEMCHECK) */
extern int ptxrt_mc_on;
void ptxrt_memcheck_launch_begin(void);
void ptx_rt_memcheck_remove_base(uint64_t base);

/* ------------------------------------------------------------------ printf buffers */

/* Output of one run of blocks (a chunk, or one fiber run between grid barriers), keyed so the
   launch can write all output ordered by block whatever the scheduling was. */
struct print_seg {
    uint64_t key;
    uint32_t slot;
    size_t off, len;
};

struct printbuf {
    char *buf;
    size_t len, cap;
    struct print_seg *segs;
    size_t nseg, capseg;
    uint64_t cur_key;
    int seg_open;                    /* the last seg belongs to cur_key */
};

static int pb_reserve(struct printbuf *pb, size_t extra) {
    if (pb->len + extra <= pb->cap) return 0;
    size_t cap = pb->cap ? pb->cap : 4096;
    while (cap < pb->len + extra) cap *= 2;
    tls_in_heap++;
    char *nb = realloc(pb->buf, cap);
    tls_in_heap--;
    if (!nb) return -1;
    pb->buf = nb;
    pb->cap = cap;
    return 0;
}

static void pb_begin(struct printbuf *pb, uint64_t key) {
    pb->cur_key = key;
    pb->seg_open = 0;
}

/* ------------------------------------------------------------------ fiber contexts */

/* A block of a cooperative launch runs on its own stack. On x86-64 the switch is a few
   instructions (callee-saved registers, MXCSR and the x87 control word, since kernels change the
   rounding mode); glibc's swapcontext makes two sigprocmask system calls per switch (~2 us here).
   Elsewhere, or with -DPTXRT_UCONTEXT, ucontext is used. */
#if defined(__x86_64__) && !defined(PTXRT_UCONTEXT)
#define PTXRT_FAST_CTX 1
typedef struct { void *sp; } fctx;

void ptxrt_ctx_switch(void **save_sp, void *new_sp);
void ptxrt_fiber_start(void);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl ptxrt_ctx_switch\n"
        ".hidden ptxrt_ctx_switch\n"
        ".type ptxrt_ctx_switch,@function\n"
        "ptxrt_ctx_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $16, %rsp\n  stmxcsr 8(%rsp)\n  fnstcw (%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr 8(%rsp)\n  fldcw (%rsp)\n  addq $16, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size ptxrt_ctx_switch, .-ptxrt_ctx_switch\n"
        ".p2align 4\n"
        ".globl ptxrt_fiber_start\n"
        ".hidden ptxrt_fiber_start\n"
        ".type ptxrt_fiber_start,@function\n"
        "ptxrt_fiber_start:\n"          /* first switch into a fiber returns here: r12 = arg, r13 = fn */
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        ".size ptxrt_fiber_start, .-ptxrt_fiber_start\n");

static void ctx_make(fctx *c, uint8_t *stack, size_t size, void (*fn)(void *), void *arg) {
    uint64_t *top = (uint64_t *)(((uintptr_t)(stack + size)) & ~(uintptr_t)15);
    /* the frame ptxrt_ctx_switch pops: cw/mxcsr, r15, r14, r13, r12, rbx, rbp, return address */
    uint64_t *sp = top - 11;
    sp[0] = 0x037f;                  /* x87 control word: default */
    sp[1] = 0x1f80;                  /* MXCSR: round to nearest, exceptions masked */
    sp[2] = 0;                       /* r15 */
    sp[3] = 0;                       /* r14 */
    sp[4] = (uint64_t)(uintptr_t)fn; /* r13 */
    sp[5] = (uint64_t)(uintptr_t)arg;/* r12 */
    sp[6] = 0;                       /* rbx */
    sp[7] = 0;                       /* rbp */
    sp[8] = (uint64_t)(uintptr_t)ptxrt_fiber_start;
    /* after `ret`, rsp = top - 2: 16-aligned, as the call in ptxrt_fiber_start needs */
    c->sp = sp;
}

static void ctx_switch(fctx *from, fctx *to) { ptxrt_ctx_switch(&from->sp, to->sp); }
#else
typedef ucontext_t fctx;

static void ctx_trampoline(unsigned fn_lo, unsigned fn_hi, unsigned arg_lo, unsigned arg_hi) {
    void (*fn)(void *) = (void (*)(void *))(((uintptr_t)fn_hi << 32) | fn_lo);
    fn((void *)(((uintptr_t)arg_hi << 32) | arg_lo));
}

static void ctx_make(fctx *c, uint8_t *stack, size_t size, void (*fn)(void *), void *arg) {
    getcontext(c);
    c->uc_stack.ss_sp = stack;
    c->uc_stack.ss_size = size;
    c->uc_link = NULL;
    makecontext(c, (void (*)(void))ctx_trampoline, 4, (unsigned)(uintptr_t)fn,
                (unsigned)((uintptr_t)fn >> 32), (unsigned)(uintptr_t)arg, (unsigned)((uintptr_t)arg >> 32));
}

static void ctx_switch(fctx *from, fctx *to) { swapcontext(from, to); }
#endif

/* ------------------------------------------------------------------ pool structures */

struct fiber;
struct slot;

/* Where a memory fault in kernel code lands (see "memory faults in kernels" below): a sigsetjmp
   taken on the stack the kernel runs on, and what the signal handler saw. */
struct fault_target {
    sigjmp_buf jb;
    uint64_t first, last;            /* the blocks the armed call runs */
    uint64_t addr, pc;
    int32_t signo, code, access;
};

struct job;

#define MAX_CLUSTER 16
#define INTERLEAVE_GROUP 8           /* blocks an interleaving worker runs at once (<= MAX_CLUSTER) */

/* A cluster's CTAs as the cluster barrier and distributed shared memory see them. All CTAs of a cluster run
   on one worker (as fibers), so it needs no atomics. */
struct cluster_sync {
    uint8_t *shared[MAX_CLUSTER];    /* W->cluster_shared */
    uint32_t passed[MAX_CLUSTER];    /* cluster barriers each CTA has reached */
    uint8_t done[MAX_CLUSTER], inside[MAX_CLUSTER];
};

struct cluster_run;

struct rt_ctx {
    struct slot *slot;
    struct fiber *fiber;             /* NULL outside cooperative and cluster launches */
    struct job *job;
    struct cluster_sync *cl;         /* cluster launches: the cluster this block is in (else NULL) */
    uint32_t rank;                   /* its %cluster_ctarank */
};

struct fiber {
    fctx uc;
    ptx_worker W;
    struct rt_ctx ctx;
    uint64_t block;
    int32_t ret;
    int done;
    struct fault_target ft;
};

/* One worker's private resources. Helpers have slots 1..nworkers-1 (id = index); a launching thread
   takes the launcher slot of its job (P.lslots, id 0), so launches on several threads at once never share
   shared memory or scratch. */
struct slot {
    ptx_worker W;
    struct rt_ctx ctx;
    uint8_t *shared_mem;
    size_t shared_cap;
    uint8_t *scratch_mem;
    size_t scratch_cap;
    struct printbuf *pb;             /* the running job's buffer for this slot id (job->pbs[id]) */
    fctx sched;                      /* cooperative and cluster launches: where fibers return to */
    struct cluster_run *cl;          /* cluster launches: this worker's cluster (resources kept) */
    struct fiber **ready;            /* cooperative: ring of this slot's blocks that yielded */
    size_t nready, capready, head;
    uint32_t id;
    pthread_t thread;
    _Atomic pid_t tid;               /* the thread running this slot (slot 0: the last launcher) */
    struct fault_target *volatile armed;  /* set while kernel code runs on this slot's thread */
    struct fault_target ft;          /* run_chunks' landing place */
} __attribute__((aligned(64)));

#define ST_TRAP 1u
#define ST_ASSERT 2u
#define ST_BAD 4u
#define ST_FAULT 8u
#define ST_MISALIGNED 16u

struct ptx_launch_state {
    _Atomic uint32_t flags;          /* ST_* */
    _Atomic uint32_t stop;
    struct ptxrt_cdp cdp;            /* what the grid's blocks launched (devlaunch.c) */
};

struct job {
    ptx_block_fn fn;
    ptx_launch L;
    struct ptx_launch_state st;
    uint64_t nblocks, chunk;
    _Atomic uint64_t next __attribute__((aligned(64)));
    uint64_t shared_bytes, scratch_bytes;    /* per block, unaligned requirement */
    uint32_t flags;
    /* cluster launches: CTAs per cluster along x, y, z, their product, clusters in the grid */
    uint32_t cdim[3], csize;
    uint64_t nclusters;
    /* interleaved launches (PTXRT_HINT_INTERLEAVE): consecutive blocks a worker takes at once (else 0) */
    uint32_t group;
    /* cooperative launches */
    struct fiber *fibers;
    struct cluster_sync *csync;      /* cooperative launches of clusters: one per cluster */
    uint8_t *arena;                  /* per block: shared then scratch */
    size_t per_block, shared_stride;
    uint8_t *stacks;
    size_t stack_size;
    uint32_t workspace[16];          /* %envreg1:%envreg2 of cooperative launches (nvcc's own grid.sync) */
    _Atomic uint64_t pending __attribute__((aligned(64)));   /* blocks yet to arrive or finish this phase */
    _Atomic uint64_t finished;
    _Atomic uint32_t phase;
    _Atomic int fault_taken;         /* the first fault of the launch is the one reported */
    ptx_fault_info fault;
    /* POOL_CLOSED | POOL_WAITING | joined helpers; helpers join while open */
    _Atomic uint32_t state __attribute__((aligned(64)));
    /* printf output per slot id: a helper may run another job's blocks before this launch flushes */
    struct printbuf *pbs;
};

#define POOL_CLOSED 0x80000000u
#define POOL_WAITING 0x40000000u
#define POOL_ACTIVE 0x3fffffffu

/* Launches that may run at once (ptx_rt_set_concurrency, at most MAX_JOBS): streams of the driver run
   their kernels on several threads, and blocks of all open launches share the helpers. 1 (the default)
   serialises launches as a single launch lock would. */
#define MAX_JOBS 16

static struct pool {
    pthread_mutex_t init_mu;
    pthread_mutex_t job_mu;          /* guards job_busy, max_jobs */
    pthread_cond_t job_cv;
    pthread_mutex_t serial_mu;       /* ZLUDA_MEMCHECK's tables and the cooperative cache assume one launch */
    uint32_t job_busy, max_jobs;
    int ready;
    uint32_t nworkers;
    uint64_t spin_ns;
    size_t fiber_stack;
    struct slot *slots;
    struct slot *lslots;             /* MAX_JOBS launcher slots */
    _Atomic uint32_t gen __attribute__((aligned(64)));      /* futex: one step per opened launch */
    _Atomic uint32_t sleepers;
    /* Threads running blocks (launchers and helpers): helpers join only while it is below nworkers, so
       launches on several threads never make more runners than cores (each would then get a fraction of
       one, and a launch waits for its slowest). A runner leaving while launches are open bumps gen. */
    _Atomic uint32_t running __attribute__((aligned(64)));
    _Atomic uint32_t open;           /* launches open for helpers */
    struct job jobs[MAX_JOBS];
} P = {.init_mu = PTHREAD_MUTEX_INITIALIZER, .job_mu = PTHREAD_MUTEX_INITIALIZER,
       .job_cv = PTHREAD_COND_INITIALIZER, .serial_mu = PTHREAD_MUTEX_INITIALIZER, .max_jobs = 1};

static void set_flag(struct ptx_launch_state *st, uint32_t f) {
    atomic_fetch_or(&st->flags, f);
    atomic_store_explicit(&st->stop, 1, memory_order_release);
}

static void record_ret(struct ptx_launch_state *st, int32_t r) {
    set_flag(st, r == PTXRT_ASSERT ? ST_ASSERT : r == PTXRT_BAD_LAUNCH ? ST_BAD
                 : r == PTXRT_FAULT ? ST_FAULT : r == PTXRT_MISALIGNED ? ST_MISALIGNED : ST_TRAP);
}

/* ------------------------------------------------------------------ memory faults in kernels */

/* A wild pointer in a kernel faults on the worker running it. Design:
   - One SIGSEGV/SIGBUS handler (SA_SIGINFO|SA_ONSTACK), installed at the first launch. It finds the
     faulting thread among the pool's slots by thread id (no TLS there: a thread that never touched
     ours would allocate it, i.e. malloc, inside the handler), and recovers only when that slot is
     armed, i.e. the fault is in kernel code: it restores the interrupted signal mask and siglongjmps
     to the slot's (or the running fiber's) sigsetjmp. Every other fault goes to the handler that was
     there before (Python's faulthandler, numba, ...) or to the default action, as if we were not here.
   - The sigsetjmp is always on the stack the kernel runs on: run_chunks' frame on the worker's
     stack, or fiber_entry's frame on the block's own fiber stack (cooperative launches), so the jump
     never crosses contexts. The landing code records the fault on the job, whose stop flag makes
     every worker stop taking blocks; the launch returns PTXRT_FAULT.
   - Each thread that runs blocks has an alternate signal stack, since the fault may be a stack
     overflow: helpers get one at start, a launching thread at its first launch unless it already has
     one (Python's faulthandler gives the main thread its own). Ours is freed when the thread ends.
   Not recoverable, so left to crash as before: a fault inside malloc/free called for a kernel
   (device malloc, printf's buffers), since the allocator's lock may be held and the heap is corrupt
   anyway. What a faulting kernel wrote before the fault stays written, as on a GPU. */

#define ALTSTACK_BYTES (64u << 10)

static struct sigaction fault_prev[2];   /* SIGSEGV, SIGBUS: what was installed before ours */
static int fault_enabled;
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static pthread_key_t altstack_key;
static __thread pid_t tls_tid;           /* 0: this thread has not launched yet (or was forked) */
static __thread ptx_fault_info tls_last_fault;
static __thread int tls_last_faulted;

static void fault_chain(int sig, siginfo_t *si, void *uc) {
    struct sigaction *prev = &fault_prev[sig == SIGBUS];
    if (prev->sa_flags & SA_SIGINFO) {
        prev->sa_sigaction(sig, si, uc);
        return;
    }
    if (prev->sa_handler == SIG_IGN && si->si_code <= 0) return;   /* a sent signal, ignored as before */
    if (prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN) {
        /* The default action, as if we had never been installed: a fault re-executes the instruction
           and dies of it (the kernel overrides SIG_IGN for faults); a sent signal is sent again and
           stays pending until this handler returns. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, NULL);
        if (si->si_code <= 0) raise(sig);
        return;
    }
    prev->sa_handler(sig);
}

static struct slot *slot_of_thread(pid_t tid) {
    struct slot *slots = __atomic_load_n(&P.slots, __ATOMIC_ACQUIRE);
    if (!slots || !__atomic_load_n(&P.ready, __ATOMIC_ACQUIRE)) return NULL;
    for (uint32_t i = 1; i < P.nworkers; i++)
        if (atomic_load_explicit(&slots[i].tid, memory_order_relaxed) == tid) return &slots[i];
    for (uint32_t i = 0; i < MAX_JOBS; i++)
        if (atomic_load_explicit(&P.lslots[i].tid, memory_order_relaxed) == tid) return &P.lslots[i];
    return NULL;
}

static void fault_handler(int sig, siginfo_t *si, void *ucv) {
    int saved_errno = errno;
    ucontext_t *uc = ucv;
    /* A fault from the hardware, or a handler installed after ours re-raising it (faulthandler does:
       it restores its predecessor, ours, and raise()s). A kill from elsewhere is not ours. */
    int genuine = si->si_code > 0;
    int reraised = si->si_code == SI_TKILL && si->si_pid == getpid();
    struct slot *s = (genuine || reraised) ? slot_of_thread((pid_t)syscall(SYS_gettid)) : NULL;
    struct fault_target *t = s ? s->armed : NULL;
    if (t && !tls_in_heap) {         /* TLS is safe here: this thread ran blocks, so it has ours */
        s->armed = NULL;             /* a fault before the landing re-arms goes to the chain */
        t->signo = sig;
        t->code = si->si_code;
        /* x86-64 reports a non-canonical address as a general protection fault: SI_KERNEL, no address */
        t->addr = genuine && si->si_code != SI_KERNEL ? (uint64_t)(uintptr_t)si->si_addr : 0;
        t->pc = 0;
        t->access = 0;
#if defined(__x86_64__)
        t->pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
        /* the page-fault error code: bit 1 = write */
        if (genuine && sig == SIGSEGV && si->si_code != SI_KERNEL)
            t->access = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? 2 : 1;
#elif defined(__aarch64__)
        t->pc = (uint64_t)uc->uc_mcontext.pc;
#endif
        /* sigsetjmp(.., 0) did not save the mask: put back the one the fault interrupted (the handler
           runs with SIGSEGV/SIGBUS blocked, and a blocked SIGSEGV on the next fault kills the process) */
        pthread_sigmask(SIG_SETMASK, &uc->uc_sigmask, NULL);
        errno = saved_errno;
        siglongjmp(t->jb, 1);
    }
    if (t) {
        static const char msg[] = "ptxrt: a kernel faulted inside malloc/free (heap corrupt?): not recoverable\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
    }
    errno = saved_errno;
    fault_chain(sig, si, ucv);
}

static void altstack_free(void *p) {
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == (uint8_t *)p + 4096 && !(cur.ss_flags & SS_ONSTACK)) {
        stack_t off = {.ss_flags = SS_DISABLE};
        sigaltstack(&off, NULL);
    }
    munmap(p, ALTSTACK_BYTES + 4096);
}

/* An alternate signal stack for the calling thread, unless it has one. `owned`: free it at thread exit. */
static void altstack_ensure(int owned) {
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) && cur.ss_size >= 8192) return;
    uint8_t *p = mmap(NULL, ALTSTACK_BYTES + 4096, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return;
    mprotect(p, 4096, PROT_NONE);    /* guard: an overflowing handler faults instead of corrupting */
    stack_t ss = {.ss_sp = p + 4096, .ss_size = ALTSTACK_BYTES, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(p, ALTSTACK_BYTES + 4096);
        return;
    }
    if (owned) pthread_setspecific(altstack_key, p);
}

static void fault_install(void) {
    const char *e = getenv("PTXRT_CATCH_FAULTS");
    if (e && e[0] == '0') return;
    if (pthread_key_create(&altstack_key, altstack_free)) return;
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = fault_handler;
    act.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&act.sa_mask);
    if (sigaction(SIGSEGV, &act, &fault_prev[0])) return;
    if (sigaction(SIGBUS, &act, &fault_prev[1])) {
        sigaction(SIGSEGV, &fault_prev[0], NULL);
        return;
    }
    __atomic_store_n(&fault_enabled, 1, __ATOMIC_RELEASE);
}

/* Called by every thread before it runs blocks: its id for the handler, its TLS allocated now (not
   in the handler), its alternate signal stack. `helper`: a pool thread (lives as long as the process). */
static void fault_thread_prepare(int helper) {
    if (tls_tid) return;
    tls_tid = (pid_t)syscall(SYS_gettid);
    tls_in_heap = 0;
    if (helper)
        altstack_ensure(0);          /* always: the pool may start before the handler is installed */
    else if (__atomic_load_n(&fault_enabled, __ATOMIC_ACQUIRE))
        altstack_ensure(1);
}

/* The landing side, back on the kernel's stack: the first fault of a launch is the one reported. */
static void fault_record(struct job *j, struct slot *s, struct fault_target *t) {
    if (!atomic_exchange(&j->fault_taken, 1)) {
        j->fault = (ptx_fault_info){.addr = t->addr, .pc = t->pc, .first_block = t->first,
                                    .last_block = t->last, .signo = t->signo, .code = t->code,
                                    .access = t->access, .worker_id = s->id};
    }
    set_flag(&j->st, ST_FAULT);
}

/* memcheck.c's way out of a kernel after a bad access: the landing a memory fault takes, so the launch
   stops the same way and returns PTXRT_FAULT (signo 0: no signal was involved). */
void ptxrt_memcheck_stop(ptx_worker *W, uint64_t addr, int32_t access) {
    struct rt_ctx *c = W->rt_private;
    struct slot *s = c ? c->slot : NULL;
    struct fault_target *t = s ? s->armed : NULL;
    if (!t) {                        /* not inside a block call: stop the launch as a trap would */
        set_flag(W->state, ST_FAULT);
        return;
    }
    s->armed = NULL;
    t->addr = addr;
    t->pc = 0;
    t->signo = 0;
    t->code = 0;
    t->access = access;
    siglongjmp(t->jb, 1);
}

int32_t ptx_rt_last_fault(ptx_fault_info *out) {
    if (!tls_last_faulted) return -1;
    if (out) *out = tls_last_fault;
    return 0;
}

/* ------------------------------------------------------------------ per-worker buffers */

static int grow(uint8_t **mem, size_t *cap, size_t need, size_t align) {
    if (need <= *cap && *mem) return 0;
    size_t n = align_up(need < 4096 ? 4096 : need, 4096);
    if (n < *cap * 2) n = align_up(*cap * 2, 4096);
    void *p = aligned_alloc(align, n);
    if (!p) return -1;
    free(*mem);
    *mem = p;
    *cap = n;
    return 0;
}

static int slot_prepare(struct slot *s, struct job *j) {
    if (!(j->flags & PTXRT_COOPERATIVE)) {
        if (grow(&s->shared_mem, &s->shared_cap, j->shared_bytes + SHARED_SLACK, SHARED_ALIGN) ||
            grow(&s->scratch_mem, &s->scratch_cap, j->scratch_bytes + SCRATCH_ALIGN, SCRATCH_ALIGN)) {
            set_flag(&j->st, ST_BAD);
            return -1;
        }
    }
    s->W.shared = s->shared_mem;
    s->W.scratch = s->scratch_mem;
    s->W.scratch_bytes = j->scratch_bytes;
    s->W.worker_id = s->id;
    s->W.grid_phase = 0;
    s->W.state = &j->st;
    s->W.cluster_shared = (uint8_t *const *)&s->W.shared;
    s->W.cluster_rank = 0;
    s->W.cluster_size = 1;
    s->ctx.slot = s;
    s->ctx.fiber = NULL;
    s->ctx.job = j;
    s->ctx.cl = NULL;
    s->ctx.rank = 0;
    s->pb = &j->pbs[s->id];
    s->W.rt_private = &s->ctx;
    return 0;
}

/* ------------------------------------------------------------------ running blocks */

/* The worker's next piece of the launch: `step` units from the shared counter, the first in *at; 0 once the units
   (of `total`) are gone, the launch stops, or this helper gives its core back to a launcher that started since it
   joined (launchers cannot be turned away, and a descheduled block holds its whole launch up). */
static int take_next(struct slot *s, struct job *j, uint64_t step, uint64_t total, uint64_t *at) {
    if (atomic_load_explicit(&j->st.stop, memory_order_relaxed)) return 0;
    if (s->id && atomic_load_explicit(&P.running, memory_order_relaxed) > P.nworkers) return 0;
    *at = atomic_fetch_add_explicit(&j->next, step, memory_order_relaxed);
    return *at < total;
}

static void run_chunks(struct slot *s, struct job *j) {
    if (sigsetjmp(s->ft.jb, 0)) {    /* a block faulted (fault_handler jumped here): this worker stops */
        fault_record(j, s, &s->ft);
        return;
    }
    for (uint64_t b; take_next(s, j, j->chunk, j->nblocks, &b);) {
        uint64_t e = b + j->chunk < j->nblocks ? b + j->chunk : j->nblocks;
        pb_begin(s->pb, b);
        s->ft.first = b;
        s->ft.last = e;
        s->armed = &s->ft;
        int32_t r = j->fn(&j->L, b, e, &s->W);
        s->armed = NULL;
        if (r) record_ret(&j->st, r);
    }
}

static void fiber_entry(void *arg) {
    struct fiber *f = arg;
    struct job *j = f->ctx.job;
    /* on the fiber's own stack, so a fault lands in this frame whichever context is current;
       run_cooperative arms f->ft each time it switches to the fiber */
    if (sigsetjmp(f->ft.jb, 0) == 0) {
        f->ret = j->fn(&j->L, f->block, f->block + 1, &f->W);
    } else {
        fault_record(j, f->ctx.slot, &f->ft);
        f->ret = PTXRT_FAULT;
    }
    f->done = 1;
    ctx_switch(&f->uc, &f->ctx.slot->sched);   /* never resumed */
    abort();
}

/* A block arrived at the grid barrier or finished: the last one of a phase releases the next.
   Finished blocks count as arrived at every later barrier (they never hold one up). */
static void coop_arrive(struct job *j, int finished) {
    if (finished) atomic_fetch_add(&j->finished, 1);
    if (atomic_fetch_sub(&j->pending, 1) == 1) {
        uint64_t live = j->nblocks - atomic_load(&j->finished);
        atomic_store(&j->pending, live);
        atomic_fetch_add(&j->phase, 1);
    }
}

static int ready_push(struct slot *s, struct fiber *f) {
    if (s->nready == s->capready) {
        size_t c = s->capready ? s->capready * 2 : 64;
        struct fiber **n = malloc(c * sizeof *n);
        if (!n) return -1;
        for (size_t i = 0; i < s->nready; i++) n[i] = s->ready[(s->head + i) % s->capready];
        free(s->ready);
        s->ready = n;
        s->capready = c;
        s->head = 0;
    }
    s->ready[(s->head + s->nready) % s->capready] = f;
    s->nready++;
    return 0;
}

static struct fiber *ready_pop(struct slot *s) {
    if (!s->nready) return NULL;
    struct fiber *f = s->ready[s->head];
    s->head = (s->head + 1) % s->capready;
    s->nready--;
    return f;
}

static struct fiber *start_fiber(struct slot *s, struct job *j, uint64_t b) {
    struct fiber *f = &j->fibers[b];
    f->block = b;
    f->done = 0;
    f->ret = 0;
    f->ctx.slot = s;
    f->ctx.fiber = f;
    f->ctx.job = j;
    f->W = s->W;
    f->W.shared = j->arena + b * j->per_block;
    f->W.scratch = j->arena + b * j->per_block + j->shared_stride;
    f->W.grid_phase = 0;
    f->W.rt_private = &f->ctx;
    f->W.cluster_shared = (uint8_t *const *)&f->W.shared;
    f->ctx.cl = NULL;
    f->ctx.rank = 0;
    ctx_make(&f->uc, j->stacks + b * j->stack_size, j->stack_size, fiber_entry, f);
    return f;
}

/* ------------------------------------------------------------------ thread-block clusters */

static uint8_t *map_bytes(size_t n, int extra);

/* One worker's cluster: its CTAs' fibers, shared memory and scratch (one arena, kept from launch to launch
   and grown as needed), fiber stacks, and the cluster barrier's state. */
struct cluster_run {
    struct fiber fibers[MAX_CLUSTER];
    struct cluster_sync sync;
    uint8_t *arena, *stacks;
    size_t arena_bytes, stacks_bytes, stack_size;
    uint32_t n, cur;                 /* interleaved launches: blocks started, the one running */
};

static int cluster_prepare(struct slot *s, struct job *j, uint32_t nfibers) {
    struct cluster_run *cl = s->cl;
    if (!cl) {
        cl = s->cl = calloc(1, sizeof *cl);
        if (!cl) return -1;
    }
    j->shared_stride = align_up(j->shared_bytes + SHARED_SLACK, 4096);  /* same alignment in every CTA */
    j->per_block = j->shared_stride + align_up(j->scratch_bytes + SCRATCH_ALIGN, SHARED_ALIGN);
    size_t arena = align_up(j->per_block * nfibers, 4096);
    if (cl->arena_bytes < arena) {
        if (cl->arena) munmap(cl->arena, cl->arena_bytes);
        cl->arena = map_bytes(arena, 0);
        cl->arena_bytes = cl->arena ? arena : 0;
        if (!cl->arena) return -1;
    }
    if (!cl->stacks || cl->stack_size != P.fiber_stack) {
        if (cl->stacks) munmap(cl->stacks, cl->stacks_bytes);
        cl->stack_size = P.fiber_stack;
        cl->stacks_bytes = MAX_CLUSTER * cl->stack_size;
        cl->stacks = map_bytes(cl->stacks_bytes, MAP_STACK);
        if (!cl->stacks) {
            cl->stacks_bytes = 0;
            return -1;
        }
        for (uint32_t r = 0; r < MAX_CLUSTER; r++) mprotect(cl->stacks + r * cl->stack_size, 4096, PROT_NONE);
    }
    return 0;
}

/* The linear block id of CTA r (its %cluster_ctarank) of cluster c, clusters and their CTAs numbered x fastest. */
static uint64_t cluster_block(const struct job *j, uint64_t c, uint32_t r) {
    const uint32_t *g = j->L.grid, *cd = j->cdim;
    uint64_t ncx = g[0] / cd[0], ncy = g[1] / cd[1];
    uint64_t cx = c % ncx, cy = c / ncx % ncy, cz = c / (ncx * ncy);
    uint64_t x = cx * cd[0] + r % cd[0], y = cy * cd[1] + r / cd[0] % cd[1], z = cz * cd[2] + r / (cd[0] * cd[1]);
    return x + g[0] * (y + (uint64_t)g[1] * z);
}

/* Makes fiber f (its shared memory in place) CTA r of the cluster whose barrier state is cs, that CTA's part
   of the state cleared. */
static void join_cluster(struct fiber *f, struct cluster_sync *cs, uint32_t r, uint32_t csize) {
    f->ctx.cl = cs;
    f->ctx.rank = r;
    f->W.cluster_shared = (uint8_t *const *)cs->shared;
    f->W.cluster_rank = r;
    f->W.cluster_size = csize;
    cs->shared[r] = f->W.shared;
    cs->passed[r] = 0;
    cs->done[r] = 0;
    cs->inside[r] = 0;
}

/* Fiber r of the worker's group (a cluster's CTAs, an interleaved launch's blocks), made block `block` of the launch
   with its own shared memory and scratch in the worker's arena, ready to start. */
static struct fiber *group_fiber(struct slot *s, struct job *j, uint32_t r, uint64_t block) {
    struct cluster_run *cl = s->cl;
    struct fiber *f = &cl->fibers[r];
    f->block = block;
    f->done = 0;
    f->ret = 0;
    f->ctx = (struct rt_ctx){.slot = s, .fiber = f, .job = j};
    f->W = s->W;
    f->W.shared = cl->arena + r * j->per_block;
    f->W.scratch = f->W.shared + j->shared_stride;
    f->W.cluster_shared = (uint8_t *const *)&f->W.shared;
    f->W.rt_private = &f->ctx;
    ctx_make(&f->uc, cl->stacks + r * cl->stack_size, cl->stack_size, fiber_entry, f);
    return f;
}

/* Before the worker switches to fiber f: its printf output goes under `key`, a fault lands in its frame. */
static void arm_fiber(struct slot *s, struct fiber *f, uint64_t key) {
    pb_begin(s->pb, key);
    f->ft.first = f->block;
    f->ft.last = f->block + 1;
    s->armed = &f->ft;
}

/* Each worker takes one cluster at a time: starts its CTAs as fibers and round-robins them (each runs
   until it finishes or waits at a cluster barrier) until all have finished. */
static void run_clusters(struct slot *s, struct job *j) {
    if (cluster_prepare(s, j, j->csize)) {
        set_flag(&j->st, ST_BAD);
        return;
    }
    struct cluster_run *cl = s->cl;
    for (uint64_t c; take_next(s, j, 1, j->nclusters, &c);) {
        for (uint32_t r = 0; r < j->csize; r++)
            join_cluster(group_fiber(s, j, r, cluster_block(j, c, r)), &cl->sync, r, j->csize);
        for (uint32_t left = j->csize; left;) {
            for (uint32_t r = 0; r < j->csize; r++) {
                struct fiber *f = &cl->fibers[r];
                if (cl->sync.done[r]) continue;
                if (atomic_load_explicit(&j->st.stop, memory_order_relaxed)) return;  /* parked CTAs dropped */
                arm_fiber(s, f, (uint64_t)cl->sync.passed[r] * j->nblocks + f->block);
                ctx_switch(&s->sched, &f->uc);
                s->armed = NULL;
                if (f->done) {
                    if (f->ret) record_ret(&j->st, f->ret);
                    cl->sync.done[r] = 1;
                    left--;
                }
            }
        }
    }
}

/* Interleaved launches: each worker takes j->group consecutive blocks at a time, starts them as fibers and
   round-robins them (each runs until ptx_rt_rotate, between two rounds of its loop, or until it finishes), so that
   the rounds of neighbouring blocks, which a grid-stride loop places side by side in memory, run one after another. */
static void run_interleaved(struct slot *s, struct job *j) {
    if (cluster_prepare(s, j, j->group)) {
        set_flag(&j->st, ST_BAD);
        return;
    }
    struct cluster_run *cl = s->cl;
    for (uint64_t b; take_next(s, j, j->group, j->nblocks, &b);) {
        uint32_t n = b + j->group < j->nblocks ? j->group : (uint32_t)(j->nblocks - b);
        for (uint32_t r = 0; r < n; r++) group_fiber(s, j, r, b + r);
        cl->n = n;
        cl->cur = 0;
        /* the fibers pass the worker to one another (ptx_rt_rotate); it comes back here when one finishes or
           waits (ptx_rt_yield) */
        for (uint32_t left = n; left;) {
            if (atomic_load_explicit(&j->st.stop, memory_order_relaxed)) return;  /* parked blocks dropped */
            uint32_t r = cl->cur;
            while (cl->fibers[r].done) r = (r + 1) % n;
            cl->cur = r;
            arm_fiber(s, &cl->fibers[r], cl->fibers[r].block);
            ctx_switch(&s->sched, &cl->fibers[r].uc);
            s->armed = NULL;
            struct fiber *f = &cl->fibers[cl->cur];
            if (f->done) {
                if (f->ret) record_ret(&j->st, f->ret);
                left--;
            } else {
                cl->cur = (cl->cur + 1) % n;
            }
        }
    }
}

/* Starts cluster c of a cooperative launch (a block, without clusters) on this worker: its CTAs are fibers
   here, all but the first in the ready ring. Returns the first, or NULL (ST_BAD set) where the ring could
   not grow; the CTAs that did not start count as finished so that no grid barrier waits for them. */
static struct fiber *start_cooperative_cluster(struct slot *s, struct job *j, uint64_t c) {
    if (j->csize == 1) return start_fiber(s, j, c);
    struct fiber *first = NULL;
    for (uint32_t r = 0; r < j->csize; r++) {
        struct fiber *f = start_fiber(s, j, cluster_block(j, c, r));
        join_cluster(f, &j->csync[c], r, j->csize);
        if (!r) {
            first = f;
        } else if (ready_push(s, f)) {
            set_flag(&j->st, ST_BAD);
            for (uint32_t k = r; k < j->csize; k++) coop_arrive(j, 1);
            break;
        }
    }
    return first;
}

/* Each worker starts blocks (or clusters) while any are left, then round-robins its own blocks that yielded
   (waiting at a grid or cluster barrier or spinning on memory) until all of them have finished. A block
   stays on the worker that started it. */
static void run_cooperative(struct slot *s, struct job *j) {
    s->nready = 0;
    s->head = 0;
    int all_started = 0;
    unsigned switches = 0;
    for (;;) {
        if (atomic_load_explicit(&j->st.stop, memory_order_relaxed)) break;  /* parked blocks are dropped */
        struct fiber *f = NULL;
        if (!all_started) {
            uint64_t c = atomic_fetch_add(&j->next, 1);
            if (c < j->nclusters)
                f = start_cooperative_cluster(s, j, c);
            else
                all_started = 1;
        }
        if (!f) f = ready_pop(s);
        if (!f) break;
        arm_fiber(s, f, (uint64_t)f->W.grid_phase * j->nblocks + f->block);
        ctx_switch(&s->sched, &f->uc);
        s->armed = NULL;
        if (f->done) {
            if (f->ret) record_ret(&j->st, f->ret);
            if (f->ctx.cl) f->ctx.cl->done[f->ctx.rank] = 1;
            coop_arrive(j, 1);
        } else if (ready_push(s, f)) {
            set_flag(&j->st, ST_BAD);
            coop_arrive(j, 1);
        }
        /* the blocks another worker runs may be what ours wait for: let it have the core */
        if ((++switches & 255) == 0 && all_started) sched_yield();
    }
    s->nready = 0;
}

static void run_job(struct slot *s, struct job *j) {
    if (slot_prepare(s, j)) return;
    if (j->flags & PTXRT_COOPERATIVE)
        run_cooperative(s, j);
    else if (j->csize > 1)
        run_clusters(s, j);
    else if (j->group > 1)
        run_interleaved(s, j);
    else
        run_chunks(s, j);
}

/* ------------------------------------------------------------------ helper threads */

static void runner_leaves(void) {
    atomic_fetch_sub(&P.running, 1);
    if (atomic_load(&P.open)) {      /* a helper turned away from an open launch may join it now */
        atomic_fetch_add(&P.gen, 1);
        if (atomic_load(&P.sleepers)) futex_wake_all(&P.gen);
    }
}

static void *helper_main(void *arg) {
    struct slot *s = arg;
    sigset_t all;
    sigfillset(&all);
    /* Faults must stay deliverable: the kernel kills the process outright on a blocked SIGSEGV/SIGBUS
       (so would it on FPE/ILL; unblocked, the process's own handlers, e.g. faulthandler, still see them) */
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    fault_thread_prepare(1);
    atomic_store(&s->tid, tls_tid);
    uint32_t seen = atomic_load(&P.gen);
    int turned_away = 0;
    for (;;) {
        uint32_t g = atomic_load(&P.gen);
        if (g == seen) {
            uint64_t t0 = now_ns(CLOCK_MONOTONIC);
            /* turned away: every core has a runner, spinning would take time from one */
            uint64_t spin = turned_away ? 0 : P.spin_ns;
            unsigned spins = 0;
            for (;;) {
                cpu_relax();
                g = atomic_load_explicit(&P.gen, memory_order_acquire);
                if (g != seen) break;
                if ((++spins & 127) == 0 && now_ns(CLOCK_MONOTONIC) - t0 > spin) {
                    atomic_fetch_add(&P.sleepers, 1);
                    futex_wait(&P.gen, seen, NULL);
                    atomic_fetch_sub(&P.sleepers, 1);
                    g = atomic_load(&P.gen);
                    if (g != seen) break;
                    t0 = now_ns(CLOCK_MONOTONIC);
                }
            }
        }
        /* Join an open launch with blocks left, while there is one (its fields are stable while we hold
           a place in its `state`). gen is read first: a launch opened after the scan bumps it again. */
        seen = atomic_load(&P.gen);
        turned_away = 0;
        for (int again = 1; again;) {
            again = 0;
            for (uint32_t k = 0; k < MAX_JOBS; k++) {
                struct job *j = &P.jobs[k];
                uint32_t st = atomic_load(&j->state);
                int joined = 0;
                while (!(st & POOL_CLOSED)) {
                    if (atomic_compare_exchange_weak(&j->state, &st, st + 1)) {
                        joined = 1;
                        break;
                    }
                }
                if (!joined) continue;
                if (atomic_load_explicit(&j->next, memory_order_relaxed) < j->nblocks) {
                    if (atomic_fetch_add(&P.running, 1) < P.nworkers) {
                        run_job(s, j);
                        runner_leaves();
                        again = 1;
                    } else {
                        atomic_fetch_sub(&P.running, 1);   /* a leaving runner wakes us */
                        turned_away = 1;
                    }
                }
                uint32_t v = atomic_fetch_sub(&j->state, 1) - 1;
                if ((v & POOL_WAITING) && !(v & POOL_ACTIVE)) futex_wake_all(&j->state);
            }
        }
    }
    return NULL;
}

static void after_fork_child(void) {
    /* The helpers did not survive the fork: start a fresh pool on the next launch. */
    pthread_mutex_init(&P.init_mu, NULL);
    pthread_mutex_init(&P.job_mu, NULL);
    pthread_cond_init(&P.job_cv, NULL);
    pthread_mutex_init(&P.serial_mu, NULL);
    P.job_busy = 0;
    P.ready = 0;
    P.slots = NULL;
    tls_tid = 0;                     /* the child's thread has a new id */
    atomic_store(&P.sleepers, 0);
    atomic_store(&P.running, 0);
    atomic_store(&P.open, 0);
}

/* A container's CPU quota (cgroup v2 cpu.max "quota period"), rounded up; 0 when unlimited. Spinning
   workers beyond the quota would only steal time from each other. */
static uint32_t cgroup_cpu_quota(void) {
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (!f) return 0;
    char quota[32] = {0};
    unsigned long long period = 0;
    int got = fscanf(f, "%31s %llu", quota, &period);
    fclose(f);
    if (got != 2 || !period || quota[0] < '0' || quota[0] > '9') return 0;
    unsigned long long q = strtoull(quota, NULL, 10);
    return q ? (uint32_t)((q + period - 1) / period) : 0;
}

static uint32_t usable_cores(void) {
    uint32_t n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = (uint32_t)CPU_COUNT(&set);
    if (!n) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (uint32_t)c : 1;
    }
    uint32_t quota = cgroup_cpu_quota();
    return quota && quota < n ? quota : n;
}

static int pool_init(void) {
    if (__atomic_load_n(&P.ready, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&P.init_mu);
    if (P.ready) {
        pthread_mutex_unlock(&P.init_mu);
        return 0;
    }
    static int atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, after_fork_child);
        atfork_done = 1;
    }
    uint32_t n = usable_cores();
    const char *e = getenv("PTXRT_THREADS");
    if (e && atoi(e) > 0) n = (uint32_t)atoi(e);
    if (n > 1024) n = 1024;
    P.spin_ns = 200000;
    e = getenv("PTXRT_SPIN_US");
    if (e && atol(e) >= 0) P.spin_ns = (uint64_t)atol(e) * 1000;
    P.fiber_stack = 1u << 20;
    e = getenv("PTXRT_FIBER_STACK");
    if (e && atol(e) >= 65536) P.fiber_stack = align_up((size_t)atol(e), 4096);
    struct slot *slots = aligned_alloc(64, align_up((n + MAX_JOBS) * sizeof(struct slot), 64));
    struct printbuf *pbs = calloc((size_t)MAX_JOBS * n, sizeof *pbs);
    if (!slots || !pbs) {
        free(slots);
        free(pbs);
        pthread_mutex_unlock(&P.init_mu);
        return -1;
    }
    memset(slots, 0, (n + MAX_JOBS) * sizeof(struct slot));
    P.lslots = slots + n;
    for (uint32_t k = 0; k < MAX_JOBS; k++) {
        P.jobs[k].pbs = pbs + (size_t)k * n;
        atomic_store(&P.jobs[k].state, POOL_CLOSED);
    }
    P.slots = slots;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, HELPER_STACK);
    uint32_t started = 1;
    for (uint32_t i = 0; i < n; i++) slots[i].id = i;   /* launcher slots keep id 0 */
    for (uint32_t i = 1; i < n; i++) {
        if (pthread_create(&slots[i].thread, &attr, helper_main, &slots[i]) != 0) break;
        pthread_detach(slots[i].thread);
        started++;
    }
    pthread_attr_destroy(&attr);
    P.nworkers = started;
    __atomic_store_n(&P.ready, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&P.init_mu);
    return 0;
}

uint32_t ptx_rt_num_workers(void) {
    if (pool_init()) return 1;
    return P.nworkers;
}

/* ------------------------------------------------------------------ printf output */

static int seg_cmp(const void *a, const void *b) {
    const struct print_seg *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static void flush_printf(struct job *j) {
    size_t total = 0;
    for (uint32_t i = 0; i < P.nworkers; i++) total += j->pbs[i].nseg;
    if (!total) return;
    struct print_seg *all = malloc(total * sizeof *all);
    size_t k = 0;
    for (uint32_t i = 0; i < P.nworkers; i++) {
        struct printbuf *pb = &j->pbs[i];
        for (size_t s = 0; s < pb->nseg; s++) {
            if (all) {
                all[k] = pb->segs[s];
                all[k].slot = i;
                k++;
            } else {
                fwrite(pb->buf + pb->segs[s].off, 1, pb->segs[s].len, stdout);
            }
        }
    }
    if (all) {
        qsort(all, k, sizeof *all, seg_cmp);
        for (size_t s = 0; s < k; s++)
            fwrite(j->pbs[all[s].slot].buf + all[s].off, 1, all[s].len, stdout);
        free(all);
    }
    fflush(stdout);
    for (uint32_t i = 0; i < P.nworkers; i++) {
        struct printbuf *pb = &j->pbs[i];
        pb->len = 0;
        pb->nseg = 0;
        pb->seg_open = 0;
        if (pb->cap > (64u << 20)) {        /* do not keep a huge buffer after a chatty launch */
            free(pb->buf);
            pb->buf = NULL;
            pb->cap = 0;
        }
    }
}

/* ------------------------------------------------------------------ launch */

/* Cooperative launches keep their fiber stacks and per-block buffers mapped from launch to launch
   (they are serialised, P.serial_mu); a bigger grid replaces them. Each stack's lowest page is a guard, so
   an overflow faults instead of silently corrupting the next block's stack. */
static struct {
    uint8_t *stacks, *arena;
    size_t stacks_bytes, arena_bytes, stack_size;
    struct fiber *fibers;
    uint64_t nfibers;
} coop_cache;

static uint8_t *map_bytes(size_t n, int extra) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | extra, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int setup_cooperative(struct job *j) {
    uint64_t B = j->nblocks;
    /* a cluster's CTAs see their shared memory at the same alignment, as in run_clusters */
    j->shared_stride = align_up(j->shared_bytes + SHARED_SLACK, j->csize > 1 ? 4096 : SHARED_ALIGN);
    j->per_block = j->shared_stride + align_up(j->scratch_bytes + SCRATCH_ALIGN, SHARED_ALIGN);
    j->stack_size = P.fiber_stack;
    if (B > (1ull << 16) || j->per_block > (1ull << 40) / B) return -1;   /* far above any co-resident grid */
    size_t arena_bytes = align_up(B * j->per_block, 4096);
    size_t stacks_bytes = B * j->stack_size;
    if (coop_cache.nfibers < B) {
        free(coop_cache.fibers);
        coop_cache.fibers = calloc(B, sizeof(struct fiber));
        coop_cache.nfibers = coop_cache.fibers ? B : 0;
        if (!coop_cache.fibers) return -1;
    }
    if (coop_cache.arena_bytes < arena_bytes) {
        if (coop_cache.arena) munmap(coop_cache.arena, coop_cache.arena_bytes);
        coop_cache.arena = map_bytes(arena_bytes, 0);
        coop_cache.arena_bytes = coop_cache.arena ? arena_bytes : 0;
        if (!coop_cache.arena) return -1;
    }
    if (coop_cache.stacks_bytes < stacks_bytes || coop_cache.stack_size != j->stack_size) {
        if (coop_cache.stacks) munmap(coop_cache.stacks, coop_cache.stacks_bytes);
        coop_cache.stacks = map_bytes(stacks_bytes, MAP_STACK);
        coop_cache.stacks_bytes = coop_cache.stacks ? stacks_bytes : 0;
        coop_cache.stack_size = j->stack_size;
        if (!coop_cache.stacks) return -1;
        for (uint64_t b = 0; b < B; b++)
            mprotect(coop_cache.stacks + b * j->stack_size, 4096, PROT_NONE);
    }
    if (j->csize > 1 && !(j->csync = calloc(j->nclusters, sizeof *j->csync))) return -1;
    j->fibers = coop_cache.fibers;
    j->arena = coop_cache.arena;
    j->stacks = coop_cache.stacks;
    atomic_store(&j->pending, B);
    atomic_store(&j->finished, 0);
    atomic_store(&j->phase, 0);
    memset(j->workspace, 0, sizeof j->workspace);
    j->L.grid_workspace = (uint8_t *)j->workspace;
    return 0;
}

static void teardown_cooperative(struct job *j) {
    free(j->csync);
    j->csync = NULL;
    j->fibers = NULL;
    j->arena = NULL;
    j->stacks = NULL;
}

/* One grid; `*work` receives what its blocks launched (devlaunch.c), for the caller to run once this
   launch's job slot is free again. */
static int32_t launch_grid(ptx_block_fn fn, const uint8_t *params,
                           uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                           uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes,
                           uint32_t flags, uint32_t depth, struct cdp_item **work) {
    *work = NULL;
    if (!fn || !gx || !gy || !gz || !bx || !by || !bz) return PTXRT_BAD_LAUNCH;
    pthread_once(&fault_once, fault_install);
    if (pool_init()) return PTXRT_BAD_LAUNCH;
    fault_thread_prepare(0);
    tls_last_faulted = 0;
    int coop = (flags & PTXRT_COOPERATIVE) != 0;
    int serial = coop || __atomic_load_n(&ptxrt_mc_on, __ATOMIC_ACQUIRE);
    if (serial) pthread_mutex_lock(&P.serial_mu);
    pthread_mutex_lock(&P.job_mu);
    uint32_t k;
    for (;;) {
        for (k = 0; k < P.max_jobs && (P.job_busy >> k & 1); k++) {}
        if (k < P.max_jobs) break;
        pthread_cond_wait(&P.job_cv, &P.job_mu);
    }
    P.job_busy |= 1u << k;
    pthread_mutex_unlock(&P.job_mu);
    struct slot *me = &P.lslots[k];
    atomic_store_explicit(&me->tid, tls_tid, memory_order_relaxed);   /* we run the launcher slot's blocks */
    struct job *j = &P.jobs[k];
    atomic_store_explicit(&j->fault_taken, 0, memory_order_relaxed);
    if (__atomic_load_n(&ptxrt_mc_on, __ATOMIC_ACQUIRE)) ptxrt_memcheck_launch_begin();
    j->fn = fn;
    j->flags = flags;
    j->L.params = params;
    j->L.grid[0] = gx; j->L.grid[1] = gy; j->L.grid[2] = gz;
    j->L.block[0] = bx; j->L.block[1] = by; j->L.block[2] = bz;
    j->L.dyn_shared = dyn_shared;
    j->L.static_shared = static_shared;
    j->L.state = &j->st;
    j->L.grid_workspace = NULL;
    for (int i = 0; i < 3; i++) {
        uint32_t d = flags >> (8 + 5 * i) & 31;
        j->cdim[i] = j->L.cluster[i] = d ? d : 1;
    }
    j->L.cluster_explicit = (flags & PTXRT_CLUSTER) != 0;
    j->csize = j->cdim[0] * j->cdim[1] * j->cdim[2];
    j->nclusters = ((uint64_t)gx * gy * gz) / j->csize;
    atomic_store(&j->st.flags, 0);
    atomic_store(&j->st.stop, 0);
    ptxrt_cdp_begin(&j->st.cdp, depth);
    j->nblocks = (uint64_t)gx * gy * gz;
    j->shared_bytes = (uint64_t)static_shared + dyn_shared;
    j->scratch_bytes = (uint64_t)frame_bytes * ((uint64_t)bx * by * bz);
    uint64_t parts = (uint64_t)P.nworkers * 8;
    j->chunk = j->nblocks / parts ? j->nblocks / parts : 1;
    j->group = 0;
    int interleave = -1;
    uint32_t probe = 0;
#ifdef PTXRT_FAST_CTX
    /* at most INTERLEAVE_GROUP blocks at a time, and no fewer groups than two per worker (load balance) */
    if (!(flags & (PTXRT_COOPERATIVE | PTXRT_CLUSTER)) && j->nblocks >= 4 * (uint64_t)P.nworkers) {
        interleave = ptxrt_kernel_interleave((uint64_t)(uintptr_t)fn, &probe);
        uint64_t g = j->nblocks / (2 * (uint64_t)P.nworkers);
        if (interleave > 0) j->group = g > INTERLEAVE_GROUP ? INTERLEAVE_GROUP : (uint32_t)g;
    }
#endif
    uint64_t t_start = interleave >= 0 ? now_ns(CLOCK_MONOTONIC) : 0;
    atomic_store_explicit(&j->next, 0, memory_order_relaxed);
    int32_t status = PTXRT_OK;
    if (j->csize > 1 && (j->csize > MAX_CLUSTER || gx % j->cdim[0] || gy % j->cdim[1] || gz % j->cdim[2])) {
        status = PTXRT_BAD_LAUNCH;
        goto out;
    }
    if (coop && setup_cooperative(j)) {
        teardown_cooperative(j);
        status = PTXRT_BAD_LAUNCH;
        goto out;
    }

    /* One block cannot be shared out: leave the helpers parked (the cheap path for tiny launches). */
    int share = P.nworkers > 1 && j->nblocks > 1;
    int counted = !(flags & PTXRT_RESERVED);
    if (counted) atomic_fetch_add(&P.running, 1);     /* before opening: helpers count this thread in */
    if (share) {
        atomic_fetch_add(&P.open, 1);
        atomic_store(&j->state, 0);  /* open: helpers may join */
        atomic_fetch_add(&P.gen, 1);
        if (atomic_load(&P.sleepers)) futex_wake_all(&P.gen);
    }
    run_job(me, j);
    if (share) {
        uint32_t st = atomic_fetch_or(&j->state, POOL_CLOSED) | POOL_CLOSED;
        atomic_fetch_sub(&P.open, 1);
        if (counted) runner_leaves();
        uint64_t t0 = 0;
        unsigned spins = 0;
        while (st & POOL_ACTIVE) {
            cpu_relax();
            st = atomic_load(&j->state);
            if ((++spins & 127) == 0) {
                uint64_t t = now_ns(CLOCK_MONOTONIC);
                if (!t0) t0 = t;
                else if (t - t0 > P.spin_ns / 4) {
                    if ((st & POOL_ACTIVE) &&
                        atomic_compare_exchange_strong(&j->state, &st, st | POOL_WAITING)) {
                        futex_wait(&j->state, st | POOL_WAITING, NULL);
                    }
                    st = atomic_load(&j->state);
                }
            }
        }
    }
    else if (counted)
        atomic_fetch_sub(&P.running, 1);
    if (coop) teardown_cooperative(j);
    if (interleave >= 0)
        ptxrt_kernel_timed((uint64_t)(uintptr_t)fn, interleave, probe, now_ns(CLOCK_MONOTONIC) - t_start);
    flush_printf(j);
    uint32_t f = atomic_load(&j->st.flags);
    status = (f & ST_ASSERT) ? PTXRT_ASSERT : (f & ST_FAULT) ? PTXRT_FAULT
           : (f & ST_MISALIGNED) ? PTXRT_MISALIGNED : (f & ST_TRAP) ? PTXRT_TRAP
           : (f & ST_BAD) ? PTXRT_BAD_LAUNCH : PTXRT_OK;
    /* a fault the generated code reported itself (a .trap surface access) left no address behind */
    if (status == PTXRT_FAULT && atomic_load(&j->fault_taken)) {
        tls_last_fault = j->fault;
        tls_last_faulted = 1;
    }
out:
    *work = ptxrt_cdp_take(&j->st.cdp);
    /* a stale id here could match another launcher's thread in the fault handler */
    atomic_store_explicit(&me->tid, 0, memory_order_relaxed);
    pthread_mutex_lock(&P.job_mu);
    P.job_busy &= ~(1u << k);
    pthread_cond_signal(&P.job_cv);
    pthread_mutex_unlock(&P.job_mu);
    if (serial) pthread_mutex_unlock(&P.serial_mu);
    return status;
}

int32_t ptxrt_launch_nested(ptx_block_fn fn, const uint8_t *params, uint32_t gx, uint32_t gy, uint32_t gz,
                            uint32_t bx, uint32_t by, uint32_t bz, uint32_t static_shared,
                            uint32_t dyn_shared, uint32_t frame_bytes, uint32_t flags, uint32_t depth) {
    struct cdp_item *work;
    int32_t status = launch_grid(fn, params, gx, gy, gz, bx, by, bz, static_shared, dyn_shared, frame_bytes,
                                 flags, depth, &work);
    /* the grid counts as complete once what it launched has run: that runs here, after it */
    return work ? ptxrt_cdp_run(work, status, depth, flags) : status;
}

int32_t ptx_rt_launch_ex(ptx_block_fn fn, const uint8_t *params,
                         uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                         uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes,
                         uint32_t flags) {
    return ptxrt_launch_nested(fn, params, gx, gy, gz, bx, by, bz, static_shared, dyn_shared, frame_bytes,
                               flags, 0);
}

struct ptxrt_cdp *ptxrt_cdp_of(ptx_worker *W) { return &W->state->cdp; }

void ptx_rt_reserve(int32_t delta) {
    if (delta > 0)
        atomic_fetch_add(&P.running, (uint32_t)delta);
    else
        for (; delta < 0; delta++) runner_leaves();
}

/* How many launches may run at once (1..MAX_JOBS); returns the value in effect. */
uint32_t ptx_rt_set_concurrency(uint32_t n) {
    if (n < 1) n = 1;
    if (n > MAX_JOBS) n = MAX_JOBS;
    pthread_mutex_lock(&P.job_mu);
    P.max_jobs = n;
    pthread_cond_broadcast(&P.job_cv);
    pthread_mutex_unlock(&P.job_mu);
    return n;
}

int32_t ptx_rt_launch(ptx_block_fn fn, const uint8_t *params, const uint32_t grid[3],
                      const uint32_t block[3], uint32_t static_shared, uint32_t dyn_shared,
                      uint32_t frame_bytes) {
    return ptx_rt_launch_ex(fn, params, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                            static_shared, dyn_shared, frame_bytes, 0);
}

/* ------------------------------------------------------------------ services for generated code */

static void fiber_yield(struct rt_ctx *c) {
    ctx_switch(&c->fiber->uc, &c->slot->sched);
}

int32_t ptx_rt_grid_sync(ptx_worker *W) {
    struct rt_ctx *c = W ? (struct rt_ctx *)W->rt_private : NULL;
    if (!c || !c->fiber) {
        if (W && W->state) set_flag(W->state, ST_TRAP);
        return PTXRT_TRAP;
    }
    struct job *j = c->job;
    uint32_t phase = atomic_load(&j->phase);
    coop_arrive(j, 0);
    while (atomic_load(&j->phase) == phase) {
        if (atomic_load(&j->st.stop)) return PTXRT_TRAP;
        fiber_yield(c);
    }
    W->grid_phase++;
    return atomic_load(&j->st.stop) ? PTXRT_TRAP : 0;
}

void ptx_rt_cluster_wait(ptx_worker *W) {
    struct rt_ctx *c = W ? (struct rt_ctx *)W->rt_private : NULL;
    if (!c || !c->cl) return;
    struct cluster_sync *cl = c->cl;
    uint32_t r = c->rank, n = c->job->csize;
    if (cl->inside[r]) return;       /* the block's first thread arrived for all of it */
    cl->inside[r] = 1;
    uint32_t p = ++cl->passed[r];
    for (;;) {
        uint32_t k = 0;
        while (k < n && (cl->done[k] || cl->passed[k] >= p)) k++;
        if (k == n) return;
        fiber_yield(c);              /* a stopped launch never resumes this fiber */
    }
}

uint32_t ptx_rt_cluster_rank_of(ptx_worker *W, uint64_t addr, uint32_t size) {
    for (uint32_t r = 0; r < W->cluster_size; r++)
        if (addr - (uint64_t)(uintptr_t)W->cluster_shared[r] < size) return r;
    return UINT32_MAX;
}

void ptx_rt_cluster_wait_end(ptx_worker *W) {
    struct rt_ctx *c = W ? (struct rt_ctx *)W->rt_private : NULL;
    if (c && c->cl) c->cl->inside[c->rank] = 0;
}

void ptx_rt_yield(ptx_worker *W) {
    struct rt_ctx *c = W ? (struct rt_ctx *)W->rt_private : NULL;
    if (c && c->fiber)
        fiber_yield(c);
    else
        cpu_relax();
}

void ptx_rt_rotate(ptx_worker *W) {
    struct rt_ctx *c = W ? (struct rt_ctx *)W->rt_private : NULL;
    if (!c || !c->fiber || !c->job->group) return;
    /* straight to the next block that has not finished (the scheduler's two switches would cost twice as much) */
    struct slot *s = c->slot;
    struct cluster_run *cl = s->cl;
    if (atomic_load_explicit(&c->job->st.stop, memory_order_relaxed)) {
        fiber_yield(c);              /* the scheduler drops the launch's parked blocks */
        return;
    }
    for (uint32_t k = 1, n = cl->n; k < n; k++) {
        uint32_t q = (cl->cur + k) % n;
        struct fiber *f = &cl->fibers[q];
        if (f->done) continue;
        cl->cur = q;
        arm_fiber(s, f, f->block);
        ctx_switch(&c->fiber->uc, &f->uc);
        return;
    }
}

void ptx_rt_trap(ptx_worker *W) {
    if (W && W->state) set_flag(W->state, ST_TRAP);
}

void ptx_rt_assertfail(ptx_worker *W, const char *msg, const char *file, uint32_t line,
                       const char *func, const uint32_t ctaid[3], const uint32_t tid[3]) {
    static const uint32_t zero[3] = {0, 0, 0};
    if (!ctaid) ctaid = zero;
    if (!tid) tid = zero;
    /* formatted first: a wild string pointer faults here, where no lock is held, not inside fprintf
       with stderr's lock taken */
    char text[4096];
    int n = snprintf(text, sizeof text, "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.\n",
                     file ? file : "", line, func ? func : "", ctaid[0], ctaid[1], ctaid[2], tid[0], tid[1],
                     tid[2], msg ? msg : "");
    if (n >= (int)sizeof text) {
        n = (int)sizeof text - 1;
        text[n - 1] = '\n';
    }
    tls_in_heap++;
    if (n > 0) fwrite(text, 1, (size_t)n, stderr);
    fflush(stderr);
    tls_in_heap--;
    if (W && W->state) set_flag(W->state, ST_ASSERT);
}

/* tls_in_heap: a fault in here is not recovered (see "memory faults in kernels") */
void *ptx_rt_malloc(uint64_t size) {
    tls_in_heap++;
    void *p = malloc(size ? size : 1);
    if (p && __atomic_load_n(&ptxrt_mc_on, __ATOMIC_RELAXED))
        ptx_rt_memcheck_add((uint64_t)(uintptr_t)p, size ? size : 1, PTXRT_MC_HEAP);
    tls_in_heap--;
    return p;
}

void ptx_rt_free(void *p) {
    tls_in_heap++;
    if (p && __atomic_load_n(&ptxrt_mc_on, __ATOMIC_RELAXED))
        ptx_rt_memcheck_remove_base((uint64_t)(uintptr_t)p);
    free(p);
    tls_in_heap--;
}

uint64_t ptx_rt_globaltimer(void) { return now_ns(CLOCK_REALTIME); }

void *const ptx_rt_membase = NULL;

void *ptx_rt_locals_base(void *first, ...) {
    (void)first;
    return NULL;
}

/* ------------------------------------------------------------------ device printf */

struct argreader {
    const uint8_t *args;
    size_t off;
    int count;
};

static const uint8_t *take(struct argreader *a, size_t size) {
    a->off = align_up(a->off, size);
    const uint8_t *p = a->args + a->off;
    a->off += size;
    a->count++;
    return p;
}

static int32_t take_i32(struct argreader *a) {
    int32_t v;
    memcpy(&v, take(a, 4), 4);
    return v;
}

static uint64_t take_u64(struct argreader *a) {
    uint64_t v;
    memcpy(&v, take(a, 8), 8);
    return v;
}

static void out_bytes(struct printbuf *pb, const char *s, size_t n) {
    if (!n || pb_reserve(pb, n)) return;
    memcpy(pb->buf + pb->len, s, n);
    pb->len += n;
}

/* snprintf one conversion straight into the buffer */
#define OUT_FMT(pb, spec, ...)                                                             \
    do {                                                                                   \
        int n_ = snprintf(NULL, 0, spec, __VA_ARGS__);                                     \
        if (n_ > 0 && !pb_reserve(pb, (size_t)n_ + 1)) {                                   \
            snprintf(pb->buf + pb->len, (size_t)n_ + 1, spec, __VA_ARGS__);                \
            pb->len += (size_t)n_;                                                         \
        }                                                                                  \
    } while (0)

static int format_into(struct printbuf *pb, const char *fmt, const uint8_t *args) {
    struct argreader a = {args, 0, 0};
    const char *p = fmt;
    while (*p) {
        const char *lit = p;
        while (*p && *p != '%') p++;
        out_bytes(pb, lit, (size_t)(p - lit));
        if (!*p) break;
        const char *start = p++;     /* at '%' */
        if (*p == '%') {
            out_bytes(pb, "%", 1);
            p++;
            continue;
        }
        char flags[8];
        int nflags = 0;
        while (*p && strchr("-+ #0'", *p)) {
            if (nflags < 7) flags[nflags++] = *p;
            p++;
        }
        flags[nflags] = 0;
        int have_width = 0, width = 0, have_prec = 0, prec = 0;
        if (*p == '*') {
            width = args ? take_i32(&a) : 0;
            have_width = 1;
            p++;
        } else if (*p >= '0' && *p <= '9') {
            have_width = 1;
            while (*p >= '0' && *p <= '9') width = width * 10 + (*p++ - '0');
        }
        if (*p == '.') {
            p++;
            have_prec = 1;
            if (*p == '*') {
                prec = args ? take_i32(&a) : 0;
                p++;
            } else {
                while (*p >= '0' && *p <= '9') prec = prec * 10 + (*p++ - '0');
            }
        }
        int longs = 0, shorts = 0;   /* 64-bit argument; hh/h truncation of the promoted int */
        for (;;) {
            if (*p == 'l' || *p == 'L' || *p == 'j' || *p == 'z' || *p == 't' || *p == 'q') {
                longs = 1;
                p++;
            } else if (*p == 'h') {
                shorts++;
                p++;
            } else {
                break;
            }
        }
        char conv = *p;
        if (!conv) {                 /* dangling spec at the end: print it as text */
            out_bytes(pb, start, (size_t)(p - start));
            break;
        }
        p++;
        /* Rebuild a spec without the length modifier; '*' are resolved to numbers. */
        char spec[64];
        int k = snprintf(spec, sizeof spec, "%%%s", flags);
        if (have_width) {
            if (width < 0) {         /* a negative '*' width means '-' flag, as in C */
                k += snprintf(spec + k, sizeof spec - k, "-");
                width = width == INT_MIN ? INT_MAX : -width;
            }
            k += snprintf(spec + k, sizeof spec - k, "%d", width);
        }
        if (have_prec && prec >= 0) k += snprintf(spec + k, sizeof spec - k, ".%d", prec);
        if (!args && conv != '%') {  /* conversions with no argument buffer print as written */
            out_bytes(pb, start, (size_t)(p - start));
            continue;
        }
        switch (conv) {
        case 'd': case 'i': {
            snprintf(spec + k, sizeof spec - k, "ll%c", conv);
            long long v = longs ? (long long)(int64_t)take_u64(&a) : (long long)take_i32(&a);
            if (!longs && shorts == 1) v = (short)v;
            if (!longs && shorts >= 2) v = (signed char)v;
            OUT_FMT(pb, spec, v);
            break;
        }
        case 'u': case 'o': case 'x': case 'X': {
            snprintf(spec + k, sizeof spec - k, "ll%c", conv);
            unsigned long long v = longs ? (unsigned long long)take_u64(&a)
                                         : (unsigned long long)(uint32_t)take_i32(&a);
            if (!longs && shorts == 1) v = (unsigned short)v;
            if (!longs && shorts >= 2) v = (unsigned char)v;
            OUT_FMT(pb, spec, v);
            break;
        }
        case 'c': {
            snprintf(spec + k, sizeof spec - k, "c");
            int v = take_i32(&a);
            /* a NUL char still prints one byte, which snprintf's counting handles */
            int n = snprintf(NULL, 0, spec, v);
            if (n > 0 && !pb_reserve(pb, (size_t)n + 1)) {
                snprintf(pb->buf + pb->len, (size_t)n + 1, spec, v);
                pb->len += (size_t)n;
            }
            break;
        }
        case 's': {
            snprintf(spec + k, sizeof spec - k, "s");
            const char *s = (const char *)(uintptr_t)take_u64(&a);
            OUT_FMT(pb, spec, s ? s : "(null)");
            break;
        }
        case 'p': {
            snprintf(spec + k, sizeof spec - k, "p");
            void *v = (void *)(uintptr_t)take_u64(&a);
            OUT_FMT(pb, spec, v);
            break;
        }
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'a': case 'A': {
            snprintf(spec + k, sizeof spec - k, "%c", conv);
            double v;
            uint64_t bits = take_u64(&a);
            memcpy(&v, &bits, 8);
            OUT_FMT(pb, spec, v);
            break;
        }
        case 'n':
            (void)take_u64(&a);      /* CUDA ignores %n; its pointer is still in the buffer */
            break;
        default:                     /* unknown conversion: print it as written, consume nothing */
            out_bytes(pb, start, (size_t)(p - start));
            break;
        }
    }
    return a.count;
}

int32_t ptx_rt_vprintf(ptx_worker *W, const char *fmt, const uint8_t *args) {
    if (!fmt) return -1;
    struct rt_ctx *c = W ? (struct rt_ctx *)W->rt_private : NULL;
    if (!c) {                        /* outside a launch: format and write at once */
        struct printbuf tmp = {0};
        int n = format_into(&tmp, fmt, args);
        if (tmp.len) {
            fwrite(tmp.buf, 1, tmp.len, stdout);
            fflush(stdout);
        }
        free(tmp.buf);
        return n;
    }
    struct printbuf *pb = c->slot->pb;
    if (!pb->seg_open) {
        if (pb->nseg == pb->capseg) {
            size_t cap = pb->capseg ? pb->capseg * 2 : 64;
            tls_in_heap++;
            struct print_seg *n = realloc(pb->segs, cap * sizeof *n);
            tls_in_heap--;
            if (!n) return -2;
            pb->segs = n;
            pb->capseg = cap;
        }
        pb->segs[pb->nseg++] = (struct print_seg){pb->cur_key, c->slot->id, pb->len, 0};
        pb->seg_open = 1;
    }
    size_t before = pb->len;
    int n = format_into(pb, fmt, args);
    pb->segs[pb->nseg - 1].len += pb->len - before;
    return n;
}
