"""The stream-ordered allocator: memory pools (a default one per device), cuMemAllocAsync/FreeAsync.

Allocation happens at once (memory that exists early is valid in stream order); a free runs when the
stream reaches it. Freed blocks stay cached in the pool while its reserved size is above the release
threshold (default 0: everything goes back at once, as on NVIDIA's driver)."""

from __future__ import annotations

import threading

from zluda_py import cmem, handles
from zluda_py.dispatch import export
from zluda_py.driver import graph_mem, init
from zluda_py.driver.allocations import INDEX, Allocation
from zluda_py.driver.device import device_props
from zluda_py.driver.stream import resolve_stream
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
                             CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_INVALID_DEVICE)

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1
ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2
ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3
ATTR_RELEASE_THRESHOLD = 4
ATTR_RESERVED_MEM_CURRENT = 5
ATTR_RESERVED_MEM_HIGH = 6
ATTR_USED_MEM_CURRENT = 7
ATTR_USED_MEM_HIGH = 8

_lock = threading.Lock()
_default_pools: dict = {}
_current_pools: dict = {}


class MemPool:
    def __init__(self, device: int, max_size: int = 0, is_default: bool = False):
        self.device = device
        self.max_size = max_size
        self.is_default = is_default
        self.reuse = {ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: 1, ATTR_REUSE_ALLOW_OPPORTUNISTIC: 1,
                      ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: 1}
        self.release_threshold = 0
        self.used = self.used_high = 0
        self.reserved = self.reserved_high = 0
        self._cached: list = []          # (base, block size) ready for reuse
        self._lock = threading.Lock()
        handles.new(self)

    def alloc(self, ctx, size: int) -> Allocation:
        if size <= 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation size {size}")
        with self._lock:
            block = None
            for i, (base, bsize) in enumerate(self._cached):
                if size <= bsize <= 2 * size:
                    block = self._cached.pop(i)
                    break
        if block is None:
            if self.max_size and self.reserved + size > self.max_size:
                raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"pool limit {self.max_size} reached")
            block = (init.BACKEND.mem_alloc(self.device, size, "device"), size)
            with self._lock:
                self.reserved += size
                self.reserved_high = max(self.reserved_high, self.reserved)
        a = Allocation(block[0], size, "pool", ctx, self.device, pool=self)
        a.flags = block[1]               # the block's real size, for reuse accounting
        INDEX.add(a)
        with self._lock:
            self.used += block[1]
            self.used_high = max(self.used_high, self.used)
        return a

    def give_back(self, a: Allocation) -> None:
        """A freed allocation: cache its block, then trim to the release threshold."""
        INDEX.remove(a)
        with self._lock:
            self.used -= a.flags
            self._cached.append((a.base, a.flags))
        self.trim(self.release_threshold)

    def discard(self, a: Allocation) -> None:
        """The allocation's context went away: release the block outright."""
        INDEX.remove(a)
        with self._lock:
            self.used -= a.flags
            self.reserved -= a.flags
        init.BACKEND.mem_free(a.base)

    def trim(self, keep: int) -> None:
        while True:
            with self._lock:
                if self.reserved <= keep or not self._cached:
                    return
                base, size = self._cached.pop()
                self.reserved -= size
            init.BACKEND.mem_free(base)

    def destroy(self) -> None:
        handles.remove(self.handle)
        self.trim(0)


def default_pool(dev: int) -> MemPool:
    pool = _default_pools.get(dev)
    if pool is None:
        device_props(dev)
        with _lock:
            pool = _default_pools.get(dev)
            if pool is None:
                pool = _default_pools[dev] = MemPool(dev, is_default=True)
    return pool


def current_pool(dev: int) -> MemPool:
    return _current_pools.get(dev) or default_pool(dev)


def pool_from_handle(h: int) -> MemPool:
    init.require_init()
    return handles.get(h, MemPool, CUDA_ERROR_INVALID_VALUE, "memory pool")


@export("cuDeviceGetDefaultMemPool")
def device_get_default_mem_pool(out, dev):
    pool = default_pool(dev)
    cmem.write_ptr(out, pool.handle, "pool_out")


@export("cuDeviceGetMemPool")
def device_get_mem_pool(out, dev):
    device_props(dev)
    cmem.write_ptr(out, current_pool(dev).handle, "pool")


@export("cuDeviceSetMemPool")
def device_set_mem_pool(dev, hpool):
    device_props(dev)
    pool = pool_from_handle(hpool)
    if pool.device != dev:
        raise CudaError(CUDA_ERROR_INVALID_DEVICE, f"pool belongs to device {pool.device}, not {dev}")
    _current_pools[dev] = pool


@export("cuMemPoolCreate")
def mem_pool_create(out, props):
    init.require_init()
    if not out or not props:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pool or poolProps is NULL")
    alloc_type = cmem.read_u32(props)
    handle_types = cmem.read_u32(props + 4)
    loc_type = cmem.read_u32(props + 8)
    loc_id = cmem.read_i32(props + 12)
    max_size = cmem.read_u64(props + 24)
    if alloc_type != CU_MEM_ALLOCATION_TYPE_PINNED:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocType {alloc_type} (must be PINNED)")
    if loc_type != CU_MEM_LOCATION_TYPE_DEVICE:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"pools at location type {loc_type} are not implemented")
    if handle_types:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"shareable pool handles ({handle_types:#x}) are not implemented")
    try:
        device_props(loc_id)
    except CudaError:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"location id {loc_id} is not a device") from None
    cmem.write_ptr(out, MemPool(loc_id, max_size).handle)


@export("cuMemPoolDestroy")
def mem_pool_destroy(hpool):
    pool = pool_from_handle(hpool)
    if pool.is_default:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a device's default pool cannot be destroyed")
    if _current_pools.get(pool.device) is pool:
        del _current_pools[pool.device]
    pool.destroy()


@export("cuMemPoolSetAttribute")
def mem_pool_set_attribute(hpool, attr, value):
    pool = pool_from_handle(hpool)
    if not value:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "value is NULL")
    if attr in pool.reuse:
        pool.reuse[attr] = 1 if cmem.read_i32(value) else 0
    elif attr == ATTR_RELEASE_THRESHOLD:
        pool.release_threshold = cmem.read_u64(value)
        pool.trim(pool.release_threshold)
    elif attr in (ATTR_RESERVED_MEM_HIGH, ATTR_USED_MEM_HIGH):
        if cmem.read_u64(value) != 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "high-water marks can only be reset to 0")
        if attr == ATTR_RESERVED_MEM_HIGH:
            pool.reserved_high = pool.reserved
        else:
            pool.used_high = pool.used
    else:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pool attribute {attr} cannot be set")


@export("cuMemPoolGetAttribute")
def mem_pool_get_attribute(hpool, attr, value):
    pool = pool_from_handle(hpool)
    if not value:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "value is NULL")
    if attr in pool.reuse:
        cmem.write_i32(value, pool.reuse[attr])
        return
    numbers = {ATTR_RELEASE_THRESHOLD: pool.release_threshold, ATTR_RESERVED_MEM_CURRENT: pool.reserved,
               ATTR_RESERVED_MEM_HIGH: pool.reserved_high, ATTR_USED_MEM_CURRENT: pool.used,
               ATTR_USED_MEM_HIGH: pool.used_high}
    if attr not in numbers:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown pool attribute {attr}")
    cmem.write_u64(value, numbers[attr])


@export("cuMemPoolTrimTo")
def mem_pool_trim_to(hpool, keep):
    pool_from_handle(hpool).trim(keep)
    init.BACKEND.mem_trim()     # what the pool released may wait in the backend's size classes


@export("cuMemPoolSetAccess")
def mem_pool_set_access(hpool, desc, count):
    pool = pool_from_handle(hpool)
    if count and not desc:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "map is NULL")
    for i in range(count):
        base = desc + 12 * i            # CUmemAccessDesc: CUmemLocation (8 bytes) + flags (4)
        loc_type, loc_id, flags = cmem.read_u32(base), cmem.read_i32(base + 4), cmem.read_u32(base + 8)
        if loc_type != CU_MEM_LOCATION_TYPE_DEVICE or flags not in (0, 1, 3):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"access descriptor {i}: type {loc_type} flags {flags}")
        device_props(loc_id)
        if loc_id == pool.device and flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "a pool's own device always has read-write access")


@export("cuMemPoolGetAccess")
def mem_pool_get_access(flags_out, hpool, location):
    pool = pool_from_handle(hpool)
    if not flags_out or not location:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "flags or location is NULL")
    loc_type, loc_id = cmem.read_u32(location), cmem.read_i32(location + 4)
    if loc_type != CU_MEM_LOCATION_TYPE_DEVICE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"location type {loc_type}")
    device_props(loc_id)
    cmem.write_u32(flags_out, CU_MEM_ACCESS_FLAGS_PROT_READWRITE if loc_id == pool.device else 0)


def _alloc_async(per_thread, dptr, size, pool, hstream):
    s = resolve_stream(hstream, per_thread)
    if not dptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "dptr is NULL")
    if s.capture is not None:       # captured: an allocation node, owned by the graph
        return graph_mem.capture_alloc(s, dptr, size, pool.device)
    cmem.write_ptr(dptr, pool.alloc(s.ctx, size).base)


def _free_async(per_thread, dptr, hstream):
    s = resolve_stream(hstream, per_thread)
    if s.capture is not None:       # captured: a free node of a graph allocation
        return graph_mem.capture_free(s, dptr)
    a = INDEX.at_base(dptr)
    if a is None or a.kind not in ("pool", "device") or a.freeing:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is not a live device allocation")
    a.freeing = True
    if a.kind == "pool" and a.pool is not None:
        done = a.pool.give_back
    else:
        from zluda_py.driver.memory import release
        done = release
    b = s.begin()
    if s.capture is None and b.query():
        done(a)     # nothing is queued ahead of the free: the stream has reached it (no thread hop)
    else:
        b.host_func(lambda: done(a))


export("cuMemAllocAsync")(lambda d, n, h: _alloc_async(False, d, n, _stream_pool(h, False), h))
export("cuMemAllocAsync_ptsz")(lambda d, n, h: _alloc_async(True, d, n, _stream_pool(h, True), h))
export("cuMemAllocFromPoolAsync")(lambda d, n, p, h: _alloc_async(False, d, n, pool_from_handle(p), h))
export("cuMemAllocFromPoolAsync_ptsz")(lambda d, n, p, h: _alloc_async(True, d, n, pool_from_handle(p), h))
export("cuMemFreeAsync")(lambda d, h: _free_async(False, d, h))
export("cuMemFreeAsync_ptsz")(lambda d, h: _free_async(True, d, h))


def _stream_pool(h, per_thread):
    return current_pool(resolve_stream(h, per_thread).ctx.device)




# --- the CUDA 13 location-based forms ---------------------------------------------------------------------
def _device_of_location(location, alloc_type):
    if not location:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "location is NULL")
    loc_type, loc_id = cmem.read_u32(location), cmem.read_i32(location + 4)
    if alloc_type != CU_MEM_ALLOCATION_TYPE_PINNED:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"pools of allocation type {alloc_type} are not implemented")
    if loc_type != CU_MEM_LOCATION_TYPE_DEVICE:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"pools at location type {loc_type} are not implemented")
    device_props(loc_id)
    return loc_id


@export("cuMemGetDefaultMemPool")
def mem_get_default_mem_pool(out, location, alloc_type):
    init.require_init()
    cmem.write_ptr(out, default_pool(_device_of_location(location, alloc_type)).handle, "pool_out")


@export("cuMemGetMemPool")
def mem_get_mem_pool(out, location, alloc_type):
    init.require_init()
    cmem.write_ptr(out, current_pool(_device_of_location(location, alloc_type)).handle, "pool")


@export("cuMemSetMemPool")
def mem_set_mem_pool(location, alloc_type, hpool):
    init.require_init()
    device_set_mem_pool(_device_of_location(location, alloc_type), hpool)
