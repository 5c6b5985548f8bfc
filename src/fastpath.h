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

/* Switches set by Python. */
void zl_fast_enable(int on);
void zl_fast_invalidate(void);
void zl_fast_set_current(uint64_t ctx, int32_t device);
void zl_fast_busy(int32_t delta);
int64_t zl_fast_busy_count(void);
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
