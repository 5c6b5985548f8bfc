/* Between ptxrt.c and devlaunch.c (not part of the ABI): the device-side work a running grid queues, and
   how a launch hands it on when its last block is done. */
#ifndef PTXRT_DEVLAUNCH_H
#define PTXRT_DEVLAUNCH_H
#include <stdatomic.h>
#include <stdint.h>

#include "ptxrt.h"

struct cdp_item;

/* Part of a launch's state (struct ptx_launch_state): what its blocks launched, in order. */
struct ptxrt_cdp {
    atomic_flag lock;
    struct cdp_item *head, **tail;       /* child grids, copies and fills, in launch order */
    struct cdp_item *tails, **tails_end; /* cudaStreamTailLaunch grids: after everything else */
    _Atomic int32_t error;               /* the grid's last device-runtime error (cudaError_t) */
    uint32_t depth;                      /* 0: launched by the host; a child is its parent's + 1 */
};

/* A launch begins: nothing queued; `depth` is its nesting depth. */
void ptxrt_cdp_begin(struct ptxrt_cdp *c, uint32_t depth);
/* Its last block is done: everything it queued, tail launches last, in the order to run it. */
struct cdp_item *ptxrt_cdp_take(struct ptxrt_cdp *c);
/* Runs `work` (from ptxrt_cdp_take) while `status` is PTXRT_OK, freeing all of it; the resulting status.
   `flags`: the parent launch's PTXRT_RESERVED, passed on. */
int32_t ptxrt_cdp_run(struct cdp_item *work, int32_t status, uint32_t depth, uint32_t flags);

/* ptxrt.c: one launch at nesting depth `depth`, then the work it queued. */
int32_t ptxrt_launch_nested(ptx_block_fn fn, const uint8_t *params, uint32_t gx, uint32_t gy, uint32_t gz,
                            uint32_t bx, uint32_t by, uint32_t bz, uint32_t static_shared,
                            uint32_t dyn_shared, uint32_t frame_bytes, uint32_t flags, uint32_t depth);
/* ptxrt.c: the queue of the launch a worker is running blocks of. */
struct ptxrt_cdp *ptxrt_cdp_of(ptx_worker *W);
/* A launch of the kernel at fn: -1 where it cannot run interleaved (no PTXRT_HINT_INTERLEAVE), else whether it
   does (1) or not (0); *probe: this launch's time is to be reported (ptxrt_kernel_timed). */
int ptxrt_kernel_interleave(uint64_t fn, uint32_t *probe);
void ptxrt_kernel_timed(uint64_t fn, int interleaved, uint32_t probe, uint64_t ns);
#endif
