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
    uint8_t *shared;                /* static_shared (first) then dyn_shared bytes, 128-aligned */
    uint8_t *scratch;               /* frame_bytes * threads-per-block, 64-aligned, for per-thread state */
    uint64_t scratch_bytes;
    uint32_t worker_id;
    uint32_t pad;
    struct ptx_launch_state *state;
} ptx_worker;

/* Generated per kernel: run linear blocks [first, last) (x fastest, then y, then z).
   Returns 0, or nonzero when a thread trapped/asserted (the runtime stops handing out blocks). */
typedef int32_t (*ptx_block_fn)(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W);

/* Run a whole grid on the persistent pool; the calling thread participates. Safe to call from several
   threads at once. Returns 0, PTXRT_TRAP or PTXRT_ASSERT. */
#define PTXRT_OK 0
#define PTXRT_TRAP 1
#define PTXRT_ASSERT 2
int32_t ptx_rt_launch(ptx_block_fn fn, const uint8_t *params, const uint32_t grid[3],
                      const uint32_t block[3], uint32_t static_shared, uint32_t dyn_shared,
                      uint32_t frame_bytes);

/* Called by generated code. */
int32_t  ptx_rt_vprintf(ptx_worker *W, const char *fmt, const uint8_t *args);   /* CUDA vprintf ABI */
void    *ptx_rt_malloc(uint64_t size);
void     ptx_rt_free(void *p);
void     ptx_rt_trap(ptx_worker *W);
void     ptx_rt_assertfail(ptx_worker *W, const char *msg, const char *file, uint32_t line,
                           const char *func, const uint32_t ctaid[3], const uint32_t tid[3]);
uint64_t ptx_rt_globaltimer(void);  /* ns since the epoch */
#endif
