/* Warp collectives and block barriers for kernels with sync points. Every thread is a resumable function
   that returns at a block barrier or a warp collective, leaving its inputs in its frame header; the
   generated block loop runs the lanes and calls ptx_sched_resolve_warp (computes each collective over
   the 32 lanes exactly, with PTX semantics, and resumes the lanes) and ptx_sched_release_barrier
   (releases a barrier once every live thread waits).
   Frame header layout: ptx/codegen/function_emitter.py (FH_*). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "../runtime/ptxrt.h"

typedef struct frame_header {
    uint32_t resume;     /* 0: resume point, 0 = start */
    uint32_t state;      /* 4: RUN/DONE/AT_BAR/AT_WARP, kept by the block loop and this file */
    uint32_t kind;       /* 8: collective kind, or barrier id */
    uint32_t mode;       /* 12 */
    uint32_t mask;       /* 16: member mask */
    uint32_t b;          /* 20 */
    uint32_t c;          /* 24 */
    uint32_t site;       /* 28: which instruction */
    uint64_t a;          /* 32 */
    uint64_t result;     /* 40 */
    uint32_t pred_in;    /* 48 */
    uint32_t pred_out;   /* 52 */
    uint32_t count;      /* 56: barrier thread count (0 = all) */
    uint32_t pad;        /* 60 */
} frame_header;

enum { RUN = 0, DONE = 1, AT_BAR = 2, AT_WARP = 3 };
enum { K_SHFL = 1, K_VOTE = 2, K_MATCH = 3, K_REDUX = 4, K_ACTIVEMASK = 5, K_WARPSYNC = 6, K_XCHG = 7 };

/* K_XCHG, a warp-wide exchange of 32-bit words by source lane (what tensor-core instructions and
   ldmatrix/stmatrix/movmatrix move between lanes): each lane leaves its words at the start of its row of
   the worker's exchange area and suspends with `a` pointing at the site's table; lane l then receives in
   its row, from word out_off on, word src >> 5 of lane src & 31's row for each src of its table row.
   The area is per worker (and per fiber): a warp runs alone on it from its lanes' suspension to their
   resumption, and each lane reads its results back before running on. */
#define XCHG_WORDS 512           /* per lane: ptx/codegen/ops_warp.py's XCHG_WORDS */
typedef struct xchg_table {
    uint32_t n_out, out_off;
    uint16_t src[];              /* [32][n_out]: source lane | source word << 5 */
} xchg_table;

static pthread_mutex_t xchg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { const ptx_worker *W; uint32_t *area; } *xchg_areas;
static size_t xchg_n, xchg_cap;
static __thread const ptx_worker *xchg_last_W;
static __thread uint32_t *xchg_last_area;

/* The exchange area of worker W: 32 rows of XCHG_WORDS words, made at W's first use and kept (workers
   and fibers are few and live as long as the runtime). */
uint32_t *ptx_sched_xchg_area(const ptx_worker *W) {
    if (W == xchg_last_W && xchg_last_area) return xchg_last_area;
    uint32_t *a = NULL;
    pthread_mutex_lock(&xchg_lock);
    for (size_t i = 0; i < xchg_n; i++)
        if (xchg_areas[i].W == W) { a = xchg_areas[i].area; break; }
    if (!a && (xchg_n < xchg_cap || (xchg_areas = realloc(xchg_areas, (xchg_cap = xchg_cap * 2 + 8) *
                                                           sizeof *xchg_areas)) != NULL)) {
        a = aligned_alloc(64, (size_t)32 * XCHG_WORDS * 4);
        if (a) { xchg_areas[xchg_n].W = W; xchg_areas[xchg_n].area = a; xchg_n++; }
    }
    pthread_mutex_unlock(&xchg_lock);
    xchg_last_W = W;
    xchg_last_area = a;
    return a;
}

static inline frame_header *hdr(ptx_worker *W, uint32_t t, uint32_t fb) {
    return (frame_header *)(W->scratch + (uint64_t)t * fb);
}

/* Compute one collective for the lanes in `group` (all at the same site). */
static void resolve_group(ptx_worker *W, uint32_t base, uint32_t nlanes, uint32_t fb, uint32_t group) {
    frame_header *h[32];
    for (uint32_t l = 0; l < nlanes; l++) h[l] = hdr(W, base + l, fb);
    uint32_t first = __builtin_ctz(group);
    uint32_t kind = h[first]->kind, mode = h[first]->mode;
    for (uint32_t l = 0; l < nlanes; l++) {
        if (!(group >> l & 1)) continue;
        frame_header *me = h[l];
        uint32_t members = me->mask & group;
        switch (kind) {
        case K_SHFL: {
            int32_t lane = (int32_t)l;
            uint32_t bval = me->b & 31, cval = me->c & 31, segmask = (me->c >> 8) & 31;
            int32_t maxLane = (int32_t)((l & segmask) | (cval & ~segmask));
            int32_t minLane = (int32_t)(l & segmask);
            int32_t j = lane;
            int pval = 0;
            switch (mode) {
            case 0: j = lane - (int32_t)bval; pval = (j >= maxLane); break;
            case 1: j = lane + (int32_t)bval; pval = (j <= maxLane); break;
            case 2: j = lane ^ (int32_t)bval; pval = (j <= maxLane); break;
            default: j = minLane | (int32_t)(bval & ~segmask); pval = (j <= maxLane); break;
            }
            if (!pval) j = lane;
            uint64_t v;
            if (j >= 0 && j < (int32_t)nlanes && (group >> j & 1)) v = h[j]->a;
            else v = me->a;          /* source lane inactive: undefined in PTX, own value here */
            me->result = (uint32_t)v;
            me->pred_out = (uint32_t)pval;
            break;
        }
        case K_VOTE: {
            uint32_t ballot = 0, cnt = 0, n = 0;
            for (uint32_t k = 0; k < nlanes; k++)
                if (members >> k & 1) { n++; if (h[k]->pred_in) { ballot |= 1u << k; cnt++; } }
            if (mode == 3) me->result = ballot;
            else if (mode == 0) me->pred_out = (cnt == n);
            else if (mode == 1) me->pred_out = (cnt != 0);
            else me->pred_out = (cnt == 0 || cnt == n);
            break;
        }
        case K_MATCH: {
            uint32_t same = 0, all = 1;
            int wide = (mode & 256) != 0;
            for (uint32_t k = 0; k < nlanes; k++) {
                if (!(members >> k & 1)) continue;
                uint64_t x = h[k]->a, y = me->a;
                if (!wide) { x = (uint32_t)x; y = (uint32_t)y; }
                if (x == y) same |= 1u << k; else all = 0;
            }
            if ((mode & 1) == 0) me->result = same;
            else { me->result = all ? members : 0; me->pred_out = all; }
            break;
        }
        case K_REDUX: {
            int sgn = (mode & 256) != 0;
            uint32_t op = mode & 255;
            uint32_t acc_u = 0; int32_t acc_s = 0; int init = 0;
            for (uint32_t k = 0; k < nlanes; k++) {
                if (!(members >> k & 1)) continue;
                uint32_t x = (uint32_t)h[k]->a;
                if (!init) { acc_u = x; acc_s = (int32_t)x; init = 1; continue; }
                switch (op) {
                case 0: acc_u += x; break;
                case 1: if (sgn) { if ((int32_t)x < acc_s) acc_s = (int32_t)x; } else if (x < acc_u) acc_u = x; break;
                case 2: if (sgn) { if ((int32_t)x > acc_s) acc_s = (int32_t)x; } else if (x > acc_u) acc_u = x; break;
                case 3: acc_u &= x; break;
                case 4: acc_u |= x; break;
                default: acc_u ^= x; break;
                }
            }
            me->result = (sgn && (op == 1 || op == 2)) ? (uint32_t)acc_s : acc_u;
            break;
        }
        case K_ACTIVEMASK:
            me->result = group;
            break;
        case K_XCHG: {
            const xchg_table *tb = (const xchg_table *)(uintptr_t)me->a;
            uint32_t *area = ptx_sched_xchg_area(W);
            uint32_t *out = area + (size_t)l * XCHG_WORDS + tb->out_off;
            const uint16_t *src = tb->src + (size_t)l * tb->n_out;
            for (uint32_t j = 0; j < tb->n_out; j++) {
                uint32_t s = src[j], sl = s & 31;
                /* a source lane not in the exchange: undefined in PTX (every lane must take part), 0 here */
                out[j] = (group >> sl & 1) ? area[(size_t)sl * XCHG_WORDS + (s >> 5)] : 0;
            }
            break;
        }
        default:
            break;
        }
    }
}

/* Resolve every warp collective the lanes [base, base+nl) wait at, once no lane of the warp can run;
   returns how many lanes were resumed (0: none waits at a collective). */
uint32_t ptx_sched_resolve_warp(ptx_worker *W, uint32_t base, uint32_t nl, uint32_t fb) {
    uint32_t pending = 0, resumed = 0;
    for (uint32_t l = 0; l < nl; l++) {
        uint32_t st = hdr(W, base + l, fb)->state;
        if (st == RUN) return 0;
        if (st == AT_WARP) pending |= 1u << l;
    }
    while (pending) {
        uint32_t first = __builtin_ctz(pending);
        uint32_t site = hdr(W, base + first, fb)->site, group = 0;
        for (uint32_t l = first; l < nl; l++)
            if ((pending >> l & 1) && hdr(W, base + l, fb)->site == site) group |= 1u << l;
        resolve_group(W, base, nl, fb, group);
        for (uint32_t l = 0; l < nl; l++)
            if (group >> l & 1) { hdr(W, base + l, fb)->state = RUN; resumed++; }
        pending &= ~group;
    }
    return resumed;
}

/* Every thread is done or waits at a block barrier: release them (with the bar.red results).
   Returns 0 when no thread waits (the block is finished). */
uint32_t ptx_sched_release_barrier(ptx_worker *W, uint32_t n, uint32_t fb) {
    uint32_t waiting = 0, popc = 0, any = 0, all = 1;
    for (uint32_t t = 0; t < n; t++) {
        frame_header *h = hdr(W, t, fb);
        if (h->state == AT_BAR) {
            waiting++;
            if (h->pred_in) { popc++; any = 1; } else all = 0;
        }
    }
    if (!waiting) return 0;
    for (uint32_t t = 0; t < n; t++) {
        frame_header *h = hdr(W, t, fb);
        if (h->state == AT_BAR) {
            h->state = RUN;
            h->result = popc;
            h->pred_out = (h->mode == 2) ? all : any;
        }
    }
    return waiting;
}
