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
                                       generated code. Appended after the original layout. */
} ptx_worker;

/* Generated per kernel: run linear blocks [first, last) (x fastest, then y, then z).
   Returns 0, or nonzero when a thread trapped/asserted (the runtime stops handing out blocks).
   Return PTXRT_TRAP after `trap` and PTXRT_ASSERT after calling ptx_rt_assertfail; any other
   nonzero value is reported as PTXRT_TRAP. */
typedef int32_t (*ptx_block_fn)(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W);

/* Run a whole grid on the persistent pool; the calling thread participates. Safe to call from several
   threads at once (launches are serialised on one pool). Returns 0, PTXRT_TRAP or PTXRT_ASSERT. */
#define PTXRT_OK 0
#define PTXRT_TRAP 1
#define PTXRT_ASSERT 2
#define PTXRT_BAD_LAUNCH 3          /* out of memory for shared/scratch, zero-sized dims */
int32_t ptx_rt_launch(ptx_block_fn fn, const uint8_t *params, const uint32_t grid[3],
                      const uint32_t block[3], uint32_t static_shared, uint32_t dyn_shared,
                      uint32_t frame_bytes);

/* The same with scalar dims (cheaper to call through ctypes) and flags. */
#define PTXRT_COOPERATIVE 1u        /* the kernel may call ptx_rt_grid_sync (see below) */
int32_t ptx_rt_launch_ex(ptx_block_fn fn, const uint8_t *params,
                         uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                         uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes,
                         uint32_t flags);
uint32_t ptx_rt_num_workers(void);  /* threads that run blocks, the launching thread included */

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

/* Grid-wide barrier (cooperative groups grid.sync(), i.e. the cudadevrt grid-sync path).

   Design: in a PTXRT_COOPERATIVE launch the runtime runs every block on its own lightweight
   context (a fiber with its own stack, and its own shared and scratch buffers, which stay alive
   while the block is suspended). The block function is called with first+1 == last. When the
   generated code reaches a grid barrier it must be at a point where the whole block has arrived
   (i.e. after its own block-level barrier: all threads' live values in scratch, exactly as at a
   bar.sync region boundary) and then calls ptx_rt_grid_sync(W) ONCE for the block. The call
   returns when every block of the grid has either arrived at the barrier or finished; then the
   code continues (W->grid_phase has been incremented). Block functions keep their C stack across
   the call, so the codegen needs nothing else: no state machine across grid barriers.
   Blocks that finish without reaching the barrier do not hold it up (no deadlock).
   Returns 0; returns PTXRT_TRAP when called outside a cooperative launch (the trap flag is set,
   and the block function should return PTXRT_TRAP), or when the launch was stopped by a trap
   elsewhere (the block should return at once; its result is discarded).
   Fiber stacks default to 1 MiB each (virtual, lazily committed; PTXRT_FIBER_STACK=bytes). */
int32_t  ptx_rt_grid_sync(ptx_worker *W);

/* Environment: PTXRT_THREADS=n (workers, default = usable cores), PTXRT_SPIN_US=us (how long idle
   workers spin before parking, default 200). */
#endif
