/* scripts/bench_cpu: the worker pool's own launch cost, timed from C around ptx_rt_launch_ex
   with a block function that does nothing (no Python, no ctypes in the loop). */
#include "ptxrt.h"
#include <time.h>

int32_t empty_block(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    (void)L; (void)first; (void)last; (void)W;
    return 0;
}

double pool_empty_launch_ns(int iters, uint32_t nblocks) {
    struct timespec t0, t1;
    ptx_rt_launch_ex(empty_block, 0, nblocks, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iters; i++) ptx_rt_launch_ex(empty_block, 0, nblocks, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / iters;
}
