/* The ABI between generated kernel code and the CPU runtime (ptxrt.c). Both sides follow this file. */
#ifndef PTXRT_H
#define PTXRT_H
#include <stdint.h>

struct ptx_launch_state;            /* runtime-private: error flags, printf buffer */

/* One launch, read-only for generated code. */
typedef struct ptx_launch {
    const uint8_t *params;          /* packed kernel parameters (offsets per the .entry's param list) */
    uint32_t grid[3];               /* %nctaid */
    uint32_t block[3];              /* %ntid */
    uint32_t dyn_shared;            /* dynamic shared bytes (%dynamic_smem_size) */
    uint32_t static_shared;         /* the kernel's static shared bytes */
    struct ptx_launch_state *state;
    uint8_t *grid_workspace;        /* cooperative launches: 64 zeroed bytes for nvcc's inline grid.sync
                                       (%envreg1 = high 32 bits, %envreg2 = low 32 bits); NULL otherwise,
                                       so the PTX's own `trap` on a non-cooperative launch fires as on a GPU */
    uint32_t cluster[3];            /* %cluster_nctaid: CTAs per cluster along x, y, z (1, 1, 1 without clusters) */
    uint32_t cluster_explicit;      /* %is_explicit_cluster: the launch named a cluster shape (PTXRT_CLUSTER) */
} ptx_launch;

/* One worker's resources while it runs blocks. */
typedef struct ptx_worker {
    uint8_t *shared;                /* static_shared (first) then dyn_shared bytes, 128-aligned,
                                       followed by at least 64 bytes of slack; NOT zeroed */
    uint8_t *scratch;               /* frame_bytes * threads-per-block, 64-aligned, for per-thread state;
                                       NOT zeroed, reused from launch to launch */
    uint64_t scratch_bytes;
    uint32_t worker_id;             /* 0 .. ptx_rt_num_workers()-1 */
    uint32_t grid_phase;            /* cooperative launches: grid barriers this block has passed (else 0) */
    struct ptx_launch_state *state;
    void *rt_private;               /* runtime-private (which worker/fiber this is); never touched by
                                       generated code. Last, so the fields above keep their offsets. */
    uint8_t *const *cluster_shared; /* the shared memory (as `shared` above) of each CTA of this block's cluster,
                                       by %cluster_ctarank; a cluster of one: &shared */
    uint32_t cluster_rank;          /* %cluster_ctarank */
    uint32_t cluster_size;          /* %cluster_nctarank */
} ptx_worker;

/* Generated per kernel: run linear blocks [first, last) (x fastest, then y, then z).
   Returns 0, or nonzero when a thread trapped/asserted (the runtime stops handing out blocks).
   Return PTXRT_TRAP after `trap`, PTXRT_ASSERT after calling ptx_rt_assertfail, PTXRT_FAULT or
   PTXRT_MISALIGNED (below) after a faulting surface access; any other nonzero value is reported as
   PTXRT_TRAP. */
typedef int32_t (*ptx_block_fn)(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W);

/* Run a whole grid on the persistent pool; the calling thread participates. Safe to call from several
   threads at once (launches are serialised on one pool). Returns 0, PTXRT_TRAP, PTXRT_ASSERT,
   PTXRT_BAD_LAUNCH, PTXRT_FAULT or PTXRT_MISALIGNED (below). */
#define PTXRT_OK 0
#define PTXRT_TRAP 1
#define PTXRT_ASSERT 2
#define PTXRT_BAD_LAUNCH 3          /* out of memory for shared/scratch, zero-sized dims */
int32_t ptx_rt_launch(ptx_block_fn fn, const uint8_t *params, const uint32_t grid[3],
                      const uint32_t block[3], uint32_t static_shared, uint32_t dyn_shared,
                      uint32_t frame_bytes);

/* The same with scalar dims (cheaper to call through ctypes) and flags. */
#define PTXRT_COOPERATIVE 1u        /* the kernel may call ptx_rt_grid_sync (see below) */
#define PTXRT_RESERVED 2u           /* the caller's core is already counted (ptx_rt_reserve) */
/* Thread-block clusters: PTXRT_CLUSTER | PTXRT_CLUSTER_DIMS(x, y, z) (each 1..16, the grid a multiple of them;
   0 counts as 1). The CTAs of one cluster run co-scheduled as fibers on one worker, each with its own shared
   memory, which the others reach through W->cluster_shared (distributed shared memory); a worker takes one
   cluster at a time. PTXRT_CLUSTER alone (dims 1, 1, 1) is an explicit cluster of one. Not with
   PTXRT_COOPERATIVE (PTXRT_BAD_LAUNCH). */
#define PTXRT_CLUSTER 4u
#define PTXRT_CLUSTER_DIMS(x, y, z) (((uint32_t)(x) << 8) | ((uint32_t)(y) << 13) | ((uint32_t)(z) << 18))
int32_t ptx_rt_launch_ex(ptx_block_fn fn, const uint8_t *params,
                         uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                         uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes,
                         uint32_t flags);
uint32_t ptx_rt_num_workers(void);  /* threads that run blocks, the launching thread included */
/* How many launches may run at once, from as many threads (1, the default: one at a time; at most 16);
   returns the value in effect. */
uint32_t ptx_rt_set_concurrency(uint32_t n);
/* A thread that will launch again soon (a stream's launcher with work queued) keeps its core counted
   (+1) until it has none (-1), so helpers do not take that core between its launches; its launches pass
   PTXRT_RESERVED. */
void ptx_rt_reserve(int32_t delta);

/* Called by generated code. */
/* CUDA vprintf ABI: `args` packs each argument at its natural alignment from the buffer start:
   4-byte int (char/short promoted), 8-byte double (float promoted), 8-byte long/long long/pointer/
   string. Returns the number of arguments consumed, as CUDA's printf does (not the char count);
   -1 for a NULL format. Output is buffered per launch and written to stdout (FILE*) when the launch
   ends, ordered by block (each thread's lines in the order it printed them). */
int32_t  ptx_rt_vprintf(ptx_worker *W, const char *fmt, const uint8_t *args);
void    *ptx_rt_malloc(uint64_t size);
void     ptx_rt_free(void *p);
void     ptx_rt_trap(ptx_worker *W);  /* sets the trap flag and stops the launch; the block fn must
                                         still return nonzero (PTXRT_TRAP) promptly */
/* Prints CUDA's message to stderr at once, sets the assert flag; the block fn then returns
   PTXRT_ASSERT (device code does not continue after a failed assert). */
void     ptx_rt_assertfail(ptx_worker *W, const char *msg, const char *file, uint32_t line,
                           const char *func, const uint32_t ctaid[3], const uint32_t tid[3]);
uint64_t ptx_rt_globaltimer(void);  /* ns since the epoch */
/* Generated code addresses generic and global memory as ptx_rt_membase + the 64-bit address: NULL, but
   opaque to LLVM, so addresses stay analysable offsets from one base (ptx/codegen/function_emitter.py). */
extern void *const ptx_rt_membase;
/* Returns NULL: the same base for functions that take their own locals' addresses as integers, which
   it is given so that LLVM knows generic accesses may reach them. */
void *ptx_rt_locals_base(void *first, ...);

/* Grid-wide synchronisation (cooperative groups grid.sync()) and inter-block spin-waits.

   Design: in a PTXRT_COOPERATIVE launch the runtime runs every block on its own lightweight
   context (a fiber with its own stack, and its own shared and scratch buffers, which stay alive
   while the block is suspended). The block function is called with first+1 == last. A block may
   suspend itself at any point where its per-thread state is in scratch (or on its C stack, which
   is kept); other blocks run meanwhile on the same worker, so a grid with far more blocks than
   workers still reaches every barrier. Blocks stay on the worker that started them. Two calls:

   - ptx_rt_yield(W): "I am spinning on memory another block will write": lets the worker run
     its other blocks, returns later. nvcc compiles grid.sync() INLINE (CUDA 11+): thread 0 of each
     block does `atom.add.release.gpu [ws+4]` and spins `ld.acquire.gpu [ws+4]` until the top bit
     flips, with ws = %envreg1:%envreg2 = L->grid_workspace, between two bar.sync. The codegen
     supports that unchanged by (1) reading %envreg1/%envreg2 from L->grid_workspace and (2) calling
     ptx_rt_yield(W) once per iteration of any loop whose body does an ld.acquire/ld.volatile/
     ld.relaxed.gpu/.sys or atom (a spin loop). Outside cooperative launches ptx_rt_yield is a cpu
     pause, so the call is harmless there.
   - ptx_rt_grid_sync(W): an explicit grid barrier, for a codegen that recognises grid.sync (or
     cudadevrt's cudaCGSynchronizeGrid) itself: call it ONCE per block, from a point where the whole
     block has arrived (after its block-level barrier). It returns when every block has arrived or
     finished; W->grid_phase then counts the barriers passed. Blocks that finish without reaching
     the barrier do not hold it up. Returns 0; PTXRT_TRAP outside a cooperative launch (the trap
     flag is set) or when the launch was stopped by a trap elsewhere (return at once).
   Fiber stacks default to 1 MiB each (virtual, lazily committed; PTXRT_FIBER_STACK=bytes); switches
   cost about a microsecond (ucontext). */
int32_t  ptx_rt_grid_sync(ptx_worker *W);
void     ptx_rt_yield(ptx_worker *W);

/* barrier.cluster.wait (ptx/codegen/ops_ctrl.py): every thread of a block calls ptx_rt_cluster_wait after a
   block barrier, then ptx_rt_cluster_wait_end after a second one. The first call of a block counts the
   block's arrival and returns once every CTA of its cluster has arrived as often or finished (other CTAs of
   the cluster run meanwhile); the block's other calls return at once. Outside cluster launches both return
   at once. A block counts as arrived when it reaches the wait: .arrive alone only orders memory. */
void     ptx_rt_cluster_wait(ptx_worker *W);
void     ptx_rt_cluster_wait_end(ptx_worker *W);
/* The %cluster_ctarank of the CTA whose shared memory (`size` bytes from its W->shared) holds the generic
   address `addr`, or UINT32_MAX (getctarank, isspacep/cvta/mapa on generic addresses, ops_cluster.py). */
uint32_t ptx_rt_cluster_rank_of(ptx_worker *W, uint64_t addr, uint32_t size);

/* Memory faults in kernels. A block that dereferences a wild pointer (SIGSEGV/SIGBUS on its worker)
   does not kill the process: the runtime's signal handler (installed at the first launch, chaining to
   whatever handler was there for every other fault) jumps back to the worker, the launch stops handing
   out blocks and returns PTXRT_FAULT, as a GPU reports an illegal address. Faults inside the runtime's
   malloc/free on a kernel's behalf are not recovered (the heap lock may be held): they crash as before.
   PTXRT_CATCH_FAULTS=0 disables the handler (core dumps / debuggers see the original fault). */
#define PTXRT_FAULT 4
/* A block stopped at an access not aligned to its size (a surface access: ptx/codegen/ops_surf.py), which a
   GPU reports as CUDA_ERROR_MISALIGNED_ADDRESS rather than an illegal address. No ptx_fault_info. */
#define PTXRT_MISALIGNED 5
typedef struct ptx_fault_info {
    uint64_t addr;                  /* the faulting address (si_addr; 0 when the kernel gives none,
                                       e.g. a non-canonical x86-64 address) */
    uint64_t pc;                    /* the faulting instruction, 0 if unknown */
    uint64_t first_block, last_block;  /* linear blocks [first, last) the faulting call was running */
    int32_t signo;                  /* SIGSEGV or SIGBUS */
    int32_t code;                   /* si_code (SEGV_MAPERR, SEGV_ACCERR, BUS_ADRERR, ...) */
    int32_t access;                 /* 1 read, 2 write, 0 unknown */
    uint32_t worker_id;
} ptx_fault_info;
/* The first fault of the last launch made by the calling thread that returned PTXRT_FAULT:
   returns 0 and fills *out, or -1 when that launch did not fault. */
int32_t ptx_rt_last_fault(ptx_fault_info *out);

/* ZLUDA_MEMCHECK (ptx/codegen/memcheck.py): code compiled with memcheck calls ptx_rt_memcheck before each
   global, generic, shared and local access. It checks the address against the ranges added here (the
   driver's allocations, module globals; device malloc adds its own once enabled), the block's shared
   memory, the thread's stack and scratch; the first bad access of a launch prints compute-sanitizer's
   report to stderr, and the block stops as after a memory fault (PTXRT_FAULT, signo 0). */
#define PTXRT_MC_DEVICE 0
#define PTXRT_MC_POOL 1
#define PTXRT_MC_HOST 2
#define PTXRT_MC_GLOBAL 3
#define PTXRT_MC_HEAP 4
#define PTXRT_MC_MANAGED 5
#define PTXRT_MC_REGISTERED 6
void     ptx_rt_memcheck_enable(int32_t on);
int32_t  ptx_rt_memcheck_add(uint64_t base, uint64_t size, uint32_t kind);
void     ptx_rt_memcheck_remove(uint64_t base, uint64_t size);
/* desc: access size (bits 0-23) | write << 24 | space << 25 (0 generic, 1 global, 2 shared, 3 local);
   site: PTX line | instruction index << 32; fn, file: names for the report */
void     ptx_rt_memcheck(const ptx_launch *L, ptx_worker *W, uint64_t addr, uint32_t desc, uint64_t site,
                         const char *fn, const char *file, uint32_t tx, uint32_t ty, uint32_t tz,
                         uint32_t cx, uint32_t cy, uint32_t cz);

/* CUDA dynamic parallelism (CDP2, programs built with -rdc -lcudadevrt; devlaunch.c). Kernel code calls
   these for cudadevrt's device functions (ptx/codegen/ops_cdp.py); `func` is a kernel's block function
   (what `mov.u64 %rd, kernel` gives), registered with its sizes when its code was loaded.
   Semantics: a grid's device-side work (child grids, device cudaMemcpyAsync/cudaMemsetAsync) runs after
   the grid's last block, in the order it was launched, each child with everything it launched in turn
   before the next one starts; cudaStreamTailLaunch grids run after all of that. This is one order among
   those CUDA allows (a child may start any time after its launch and must finish before its parent
   counts as complete; streams order only their own work), so kernels that do not rely on a child running
   while they wait for it get the GPU's results. A fault in a child is the launch's fault. Errors are
   the cudaError_t values CUDA's device runtime returns; the last one is kept per grid. */
#define PTXRT_CDP_MAX_DEPTH 24      /* cudaLimitDevRuntimeSyncDepth's ceiling: deeper launches fail (65) */
void    *ptx_rt_cdp_param_buffer(ptx_worker *W, uint64_t alignment, uint64_t size);
void    *ptx_rt_cdp_param_buffer_v2(ptx_worker *W, uint64_t func, const uint32_t grid[3],
                                    const uint32_t block[3], uint32_t shared);
int32_t  ptx_rt_cdp_launch(ptx_worker *W, uint64_t func, void *buffer, const uint32_t grid[3],
                           const uint32_t block[3], uint32_t shared, uint64_t stream);
int32_t  ptx_rt_cdp_launch_v2(ptx_worker *W, void *buffer, uint64_t stream);
int32_t  ptx_rt_cdp_stream_create(ptx_worker *W, uint64_t *stream, uint32_t flags);
int32_t  ptx_rt_cdp_stream_destroy(ptx_worker *W, uint64_t stream);
int32_t  ptx_rt_cdp_memcpy(ptx_worker *W, uint64_t dst, uint64_t src, uint64_t n, uint32_t kind, uint64_t stream);
int32_t  ptx_rt_cdp_memset(ptx_worker *W, uint64_t dst, uint32_t value, uint64_t n, uint64_t stream);
int32_t  ptx_rt_cdp_last_error(ptx_worker *W, uint32_t clear);   /* cudaGetLastError / cudaPeekAtLastError */
const char *ptx_rt_cdp_error_text(int32_t error, uint32_t name); /* cudaGetErrorString / cudaGetErrorName */
/* cudaGraphSetConditional: a conditional handle is the address of the 32-bit value the graph reads */
void     ptx_rt_graph_set_conditional(uint64_t handle, uint32_t value);
/* What a device-side launch needs of a kernel besides its code; ptx.host registers each kernel it loads
   (again for each copy of a kernel compiled into another's object) and unregisters it when unloaded. */
void     ptx_rt_register_kernel(uint64_t func, uint32_t static_shared, uint32_t frame_bytes,
                                uint32_t param_size);
void     ptx_rt_unregister_kernel(uint64_t func);
/* What the code generator knows of a registered kernel that changes how its blocks are run (0 until set):
   PTXRT_HINT_INTERLEAVE: its blocks run loops of rounds that call ptx_rt_rotate between rounds (a grid-stride
   loop's); its launches may run up to 8 consecutive blocks at once on one worker as fibers, a few rounds of each in
   turn, so that together they sweep memory in order instead of in one block's 1 KiB pieces 64 KiB apart. That
   gains where the data comes from memory and costs where it is in the caches, so the runtime times the kernel's
   launches both ways now and then (devlaunch.c, ptxrt_kernel_interleave) and runs the others the faster way. */
#define PTXRT_HINT_INTERLEAVE 1u
void     ptx_rt_kernel_hints(uint64_t func, uint32_t hints);
/* Between two rounds of a block's loop: in an interleaved launch, lets the worker run its other blocks' next
   rounds first; anywhere else returns at once. */
void     ptx_rt_rotate(ptx_worker *W);

/* Environment: PTXRT_THREADS=n (workers; default: the usable cores, i.e. the affinity mask capped by
   a cgroup v2 CPU quota), PTXRT_SPIN_US=us (how long idle workers spin before parking, default 200),
   PTXRT_FIBER_STACK=bytes (cooperative launches). */
#endif
