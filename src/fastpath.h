/* The C fast path of the hottest trivial calls (src/fastpath.c), and the state Python keeps it in step
 * with (declared to cffi in src/fastpath.cdef; driven by zluda_py/fastpath.py). */
#ifndef ZLUDA_FASTPATH_H
#define ZLUDA_FASTPATH_H

#include <stddef.h>
#include <stdint.h>

/* Entry points called by the generated exports before Python: a CUresult when the call was answered in
 * C, -1 when it must go to the Python handler (anything unusual, every error included). */
int zl_fast_mem_alloc(uint64_t dptr, uint64_t size);
int zl_fast_mem_free(uint64_t dptr);
int zl_fast_copy(uint64_t dst, uint64_t src, uint64_t n, int dst_device, int src_device);
int zl_fast_driver_version(uint64_t out);
int zl_fast_device_get(uint64_t out, int64_t ordinal);
int zl_fast_device_count(uint64_t out);
int zl_fast_device_attribute(uint64_t out, int64_t attrib, int64_t dev);
int zl_fast_ctx_get_device(uint64_t out);
int zl_fast_ctx_get_current(uint64_t out);

/* The launch fast path (fastlaunch.c): cuLaunchKernel[Ex][_ptsz], cuCtxSynchronize[_v2],
 * cuStreamSynchronize[_ptsz] and cuStreamQuery[_ptsz] through the CPU backend's launch queue. */
int zl_fast_launch(uint64_t f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                   uint32_t shared, uint64_t hstream, uint64_t kernel_params, uint64_t extra, int per_thread);
int zl_fast_launch_ex(uint64_t config, uint64_t f, uint64_t kernel_params, uint64_t extra, int per_thread);
int zl_fast_ctx_synchronize(uint64_t ctx);
int zl_fast_stream_synchronize(uint64_t hstream, int per_thread);
int zl_fast_stream_query(uint64_t hstream, int per_thread);
void zl_fast_served(uint64_t *out);

/* Switches set by Python. */
void zl_fast_enable(int on);
void zl_fast_invalidate(void);
void zl_fast_set_current(uint64_t ctx, int32_t device);
void zl_fast_busy(int32_t delta);
int64_t zl_fast_busy_count(void);
int64_t *zl_fast_busy_address(void);
void zl_fast_capture(int32_t delta);
void zl_fast_set_queue(uint64_t launch, uint64_t sync, uint64_t query);
int zl_fast_publish_function(uint64_t handle, uint64_t ctx, uint64_t fn, uint32_t static_shared,
                             uint32_t frame_bytes, uint32_t param_size, uint32_t nparams, const uint32_t *plan,
                             const uint32_t *limits);
void zl_fast_forget_functions(void);

/* Between the fast paths: the calling thread's current context when the fast path may serve it (0: go to
 * Python; never while a stream capture is under way), and a wait for the work a synchronous copy
 * (ZL_QUIESCE_COPY) or a free (ZL_QUIESCE_ALL) must come after, 0 when it was all native and ran. */
#define ZL_QUIESCE_COPY 1
#define ZL_QUIESCE_ALL 2
uint64_t zl_fast_context(void);
int zl_fast_quiesce(uint64_t ctx, int what);
int zl_fast_publish_devices(int32_t n_devices, int32_t max_attr, const int32_t *values, const uint8_t *known,
                            int32_t version);

/* The allocator shared by the fast path and the CPU backend (src/devmem.c: 256-byte aligned blocks, a byte
 * budget; with ZLUDA_MEM_POOL=1 size-class pools of freed blocks). */
void zl_mem_set_total(uint64_t total);
uint64_t zl_mem_alloc(uint64_t size);
int zl_mem_free(uint64_t addr);
void zl_mem_trim(void);
uint64_t zl_mem_in_use(void);
/* ZLUDA_MEM_POOL: whether freed blocks are pooled; bytes pooled now; blocks given back to the host so far. */
int zl_mem_pool_enabled(void);
uint64_t zl_mem_cached(void);
uint64_t zl_mem_returned(void);

/* The range table: every allocation of the driver's allocation index, plus those made here. */
int zl_range_add(uint64_t base, uint64_t size, uint64_t token);
void zl_range_remove(uint64_t base, uint64_t token);
size_t zl_range_adopt(uint64_t *out, size_t max_entries);
int64_t *zl_range_pending(void);
size_t zl_range_count(void);

#endif
