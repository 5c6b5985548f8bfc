/* What launchq.c (the native launch queue) shares with launchq_streams.c (streams' native state and the
   shim's fast path into the queue): tickets, the lanes' done counters, the queue's entry points. */
#ifndef ZLUDA_LAUNCHQ_H
#define ZLUDA_LAUNCHQ_H

#include <stdatomic.h>
#include <stdint.h>

#define MAX_LANES 16
#define LANE_OF(t) ((uint32_t)((t) & (MAX_LANES - 1)))
#define DONE_STRIDE 8               /* uint64_t words between lanes' done counters: one cache line each */
#define ZQ_STATE_WORDS 10           /* a stream's fault record, see zq_submit */

/* lane l's done counter is zq_done[l * DONE_STRIDE]: the ticket of its last item run (Python reads it) */
extern _Atomic uint64_t zq_done[MAX_LANES * DONE_STRIDE];

/* Whether ticket t has run (0, a fresh stream's, always has). */
static inline int zq_reached(uint64_t ticket) {
    return atomic_load_explicit(&zq_done[LANE_OF(ticket) * DONE_STRIDE], memory_order_acquire) >= ticket;
}

uint64_t zq_submit(uint64_t prev, void *fn, const uint8_t *params, uint32_t nparams, uint32_t gx, uint32_t gy,
                   uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t static_shared,
                   uint32_t dyn_shared, uint32_t frame_bytes, uint32_t flags, uint64_t *state);
uint64_t zq_stamp(uint64_t prev, uint64_t *dst);
uint64_t zq_after(uint64_t prev, uint64_t ticket);
void zq_wait(uint64_t ticket, uint64_t spin_ns);
uint64_t zq_spin_ns(void);          /* how long a waiting host thread spins before it sleeps (zq_init) */

#endif
