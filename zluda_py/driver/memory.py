"""Memory allocation entry points: device, page-locked host, registered and managed memory, address ranges."""

from __future__ import annotations

from zluda_py import cmem, fastpath
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, init
from zluda_py.driver.allocations import INDEX, Allocation, host_range_mapped
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND,
                             CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
                             CUDA_ERROR_INVALID_DEVICE)

PITCH_ALIGNMENT = 512
CU_MEMHOSTALLOC_MASK = 0x7
CU_MEMHOSTREGISTER_MASK = 0xF
CU_MEM_ATTACH_GLOBAL = 0x1
CU_MEM_ATTACH_HOST = 0x2
CU_DEVICE_CPU = -1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_LOCATION_TYPE_HOST = 2
_DEVICE_SIDE = ("device", "managed", "pool")


def allocate(ctx, size: int, kind: str, flags: int = 0, pool=None) -> Allocation:
    """Backend memory of `size` bytes recorded in the allocation index as owned by `ctx`."""
    if size <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation size {size}")
    addr = init.BACKEND.mem_alloc(ctx.device, size, "device" if kind == "pool" else kind)
    a = Allocation(addr, size, kind, ctx, ctx.device, flags, pool)
    INDEX.add(a)
    return a


def release(a: Allocation) -> None:
    """Give an allocation back (after the work that may use it is done)."""
    INDEX.remove(a)
    if a.kind == "registered":
        init.BACKEND.host_unregister(a.base)
    else:
        init.BACKEND.mem_free(a.base)


def _quiesce(ctx) -> None:
    # cuMemFree waits for the device like NVIDIA's: a kernel still running may use the memory.
    if ctx is not None and not ctx.destroyed and not ctx.idle():
        ctx.synchronize(check=False)


@ctxmod.on_any_teardown
def _free_context_memory(ctx) -> None:
    for a in INDEX.owned_by(ctx):
        if a.kind == "pool" and a.pool is not None:
            a.pool.discard(a)
        else:
            release(a)
    init.BACKEND.mem_trim()     # ZLUDA_MEM_POOL's cached blocks go back with the context




@export("cuMemAlloc_v2")
def mem_alloc(dptr, size):
    ctx = ctxmod.current_context()
    if not dptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "dptr is NULL")
    if size <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation size {size}")
    # allocate(ctx, size, "device"), inlined: cuMemAlloc is hot
    addr = init.BACKEND.mem_alloc(ctx.device, size, "device")
    INDEX.add(Allocation(addr, size, "device", ctx, ctx.device))
    cmem.write_ptr(dptr, addr)
    if fastpath.ON:
        fastpath.publish(ctx)   # the C fast path sent this call here after a generation change: re-arm it


@export("cuMemAllocPitch_v2")
def mem_alloc_pitch(dptr, ppitch, width, height, elem_size):
    ctx = ctxmod.current_context()
    if not dptr or not ppitch:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "dptr or pPitch is NULL")
    if elem_size not in (4, 8, 16):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"ElementSizeBytes {elem_size} is not 4, 8 or 16")
    if width == 0 or height == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{width}x{height} allocation")
    pitch = (width + PITCH_ALIGNMENT - 1) // PITCH_ALIGNMENT * PITCH_ALIGNMENT
    a = allocate(ctx, pitch * height, "device")
    cmem.write_ptr(dptr, a.base)
    cmem.write_u64(ppitch, pitch)


@export("cuMemFree_v2")
def mem_free(dptr):
    ctx = ctxmod.current_context()
    if dptr == 0:
        return
    a = INDEX.at_base(dptr)
    if a is None or a.kind not in _DEVICE_SIDE or a.freeing:
        inside = INDEX.find(dptr)
        why = "inside an allocation, not its start" if inside is not None and inside.base != dptr else \
            "not device memory returned by cuMemAlloc (already freed?)"
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cuMemFree({dptr:#x}): {why}")
    a.freeing = True
    owner = a.ctx
    if owner is not None and owner.any_busy():     # what _quiesce asks: cuMemFree is hot
        _quiesce(owner)
    if a.kind == "device":
        INDEX.remove(a)
        init.BACKEND.mem_free(a.base)
    elif a.kind == "pool" and a.pool is not None:
        a.pool.give_back(a)
    else:
        release(a)
    if ctx.sticky_error:
        ctx.check_sticky()
    if fastpath.ON:
        fastpath.publish(ctx)


@export("cuMemGetInfo_v2")
def mem_get_info(free_out, total_out):
    ctx = ctxmod.current_context()
    free, total = init.BACKEND.mem_info(ctx.device)
    if free_out:
        cmem.write_u64(free_out, free)
    if total_out:
        cmem.write_u64(total_out, total)


@export("cuMemGetInfo")
def mem_get_info_v1(free_out, total_out):
    # The pre-3.2 ABI has 32-bit sizes: report what fits.
    ctx = ctxmod.current_context()
    free, total = init.BACKEND.mem_info(ctx.device)
    if free_out:
        cmem.write_u32(free_out, min(free, 0xFFFFFFFF))
    if total_out:
        cmem.write_u32(total_out, min(total, 0xFFFFFFFF))


@export("cuMemGetAddressRange_v2")
def mem_get_address_range(pbase, psize, dptr):
    ctxmod.current_context()
    a = INDEX.find(dptr)
    if a is None or a.kind == "registered":
        raise CudaError(CUDA_ERROR_NOT_FOUND, f"{dptr:#x} is not in any allocation")
    if pbase:
        cmem.write_ptr(pbase, a.base)
    if psize:
        cmem.write_u64(psize, a.size)


# --- page-locked host memory ----------------------------------------------------------------------------
def _host_alloc(pp, size, flags):
    ctx = ctxmod.current_context()
    if not pp:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pp is NULL")
    if flags & ~CU_MEMHOSTALLOC_MASK:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid cuMemHostAlloc flags {flags:#x}")
    # NVIDIA succeeds for 0 bytes (unlike cuMemAlloc): a real, freeable allocation of one byte here.
    cmem.write_ptr(pp, allocate(ctx, max(size, 1), "host", flags).base)


@export("cuMemAllocHost_v2", "cuMemAllocHost")
def mem_alloc_host(pp, size):
    _host_alloc(pp, size, 0)


@export("cuMemHostAlloc")
def mem_host_alloc(pp, size, flags):
    _host_alloc(pp, size, flags)


@export("cuMemFreeHost")
def mem_free_host(p):
    ctxmod.current_context()
    a = INDEX.at_base(p)
    if a is None or a.kind != "host" or a.freeing:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{p:#x} was not returned by cuMemHostAlloc/cuMemAllocHost")
    a.freeing = True
    _quiesce(a.ctx)
    release(a)


@export("cuMemHostGetDevicePointer_v2")
def mem_host_get_device_pointer(pdptr, p, flags):
    ctxmod.current_context()
    if not pdptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pdptr is NULL")
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, got {flags:#x}")
    a = INDEX.find(p)
    if a is None or a.kind not in ("host", "registered"):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{p:#x} is not page-locked host memory")
    # Unified addressing: the device sees host memory at the same address.
    cmem.write_ptr(pdptr, p)


@export("cuMemHostGetFlags")
def mem_host_get_flags(pflags, p):
    ctxmod.current_context()
    if not pflags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pFlags is NULL")
    a = INDEX.find(p)
    if a is None or a.kind not in ("host", "registered"):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{p:#x} is not page-locked host memory")
    cmem.write_u32(pflags, a.flags)


@export("cuMemHostRegister_v2", "cuMemHostRegister")
def mem_host_register(p, size, flags):
    ctx = ctxmod.current_context()
    if not p or size == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL pointer or zero size")
    if flags & ~CU_MEMHOSTREGISTER_MASK:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid cuMemHostRegister flags {flags:#x}")
    if not host_range_mapped(p, size):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{p:#x}+{size} is not mapped memory")
    if INDEX.find(p) is not None or INDEX.find(p + size - 1) is not None or _overlaps(p, size):
        raise CudaError(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, f"{p:#x}+{size} overlaps CUDA memory")
    addr = init.BACKEND.host_register(p, size)
    INDEX.add(Allocation(addr, size, "registered", ctx, ctx.device, flags))


def _overlaps(p, size):
    import bisect
    bases = INDEX._bases
    i = bisect.bisect_left(bases, p)
    return i < len(bases) and bases[i] < p + size


@export("cuMemHostUnregister")
def mem_host_unregister(p):
    ctxmod.current_context()
    a = INDEX.at_base(p)
    if a is None or a.kind != "registered":
        raise CudaError(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, f"{p:#x} is not a registered range's start")
    _quiesce(a.ctx)
    release(a)


# --- managed memory -------------------------------------------------------------------------------------
@export("cuMemAllocManaged")
def mem_alloc_managed(dptr, size, flags):
    ctx = ctxmod.current_context()
    if not dptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "dptr is NULL")
    if flags not in (CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be CU_MEM_ATTACH_GLOBAL or _HOST, got {flags:#x}")
    cmem.write_ptr(dptr, allocate(ctx, size, "managed", flags).base)


def _managed_range(ptr, count):
    """The allocation holding [ptr, ptr+count), or None for pageable memory (device-accessible here:
    CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 1)."""
    a = INDEX.find(ptr)
    if count == 0 or (a is not None and ptr + count > a.end):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"range {ptr:#x}+{count} is not within one allocation")
    return a


def _advice(a) -> dict:
    """Advice is kept per allocation (CUDA keeps it per page; whole allocations are the common case)."""
    if a.advice is None:
        a.advice = {"read_mostly": 0, "preferred": None, "accessed_by": [], "prefetched": None}
    return a.advice


def _location_of_device(dev):
    return (CU_MEM_LOCATION_TYPE_HOST, 0) if dev == CU_DEVICE_CPU else (CU_MEM_LOCATION_TYPE_DEVICE, dev)


def _record_advice(a, advice, loc):
    if a is None:
        return
    adv = _advice(a)
    if advice in (1, 2):
        adv["read_mostly"] = int(advice == 1)
    elif advice == 3:
        adv["preferred"] = loc
    elif advice == 4:
        adv["preferred"] = None
    elif advice == 5 and loc not in adv["accessed_by"]:
        adv["accessed_by"].append(loc)
    elif advice == 6 and loc in adv["accessed_by"]:
        adv["accessed_by"].remove(loc)


def _check_device_or_cpu(dev):
    if dev != CU_DEVICE_CPU and not 0 <= dev < len(init.DEVICES):
        raise CudaError(CUDA_ERROR_INVALID_DEVICE, f"device {dev}")


def _location(addr):
    """(type, id) of a CUmemLocation passed by value (the dispatcher hands us the address of a copy)."""
    return cmem.read_u32(addr, "location"), cmem.read_i32(addr + 4, "location")


def _check_location(loc):
    kind, ident = loc
    if kind == 1:       # CU_MEM_LOCATION_TYPE_DEVICE
        _check_device_or_cpu(ident)
    elif kind not in (2, 3, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memory location type {kind}")


def _prefetch(per_thread, ptr, count, dev, hstream):
    from zluda_py.driver.stream import resolve_stream
    resolve_stream(hstream, per_thread)
    a = _managed_range(ptr, count)
    _check_device_or_cpu(dev)
    if a is not None:
        _advice(a)["prefetched"] = _location_of_device(dev)


def _prefetch_v2(per_thread, ptr, count, location, flags, hstream):
    from zluda_py.driver.stream import resolve_stream
    resolve_stream(hstream, per_thread)
    a = _managed_range(ptr, count)
    loc = _location(location)
    _check_location(loc)
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, got {flags:#x}")
    if a is not None:
        _advice(a)["prefetched"] = loc


export("cuMemPrefetchAsync")(lambda *a: _prefetch(False, *a))
export("cuMemPrefetchAsync_ptsz")(lambda *a: _prefetch(True, *a))
export("cuMemPrefetchAsync_v2")(lambda *a: _prefetch_v2(False, *a))
export("cuMemPrefetchAsync_v2_ptsz")(lambda *a: _prefetch_v2(True, *a))


def _check_advice(advice):
    if advice not in range(1, 7):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown advice {advice}")


@export("cuMemAdvise")
def mem_advise(ptr, count, advice, dev):
    ctxmod.current_context()
    a = _managed_range(ptr, count)
    _check_advice(advice)
    _check_device_or_cpu(dev)
    _record_advice(a, advice, _location_of_device(dev))


@export("cuMemAdvise_v2")
def mem_advise_v2(ptr, count, advice, location):
    ctxmod.current_context()
    a = _managed_range(ptr, count)
    _check_advice(advice)
    loc = _location(location)
    _check_location(loc)
    _record_advice(a, advice, loc)


# --- cuMemRangeGetAttribute(s) ------------------------------------------------------------------------
CU_DEVICE_INVALID = -2
CU_MEM_LOCATION_TYPE_INVALID = 0


def _as_device(loc):
    if loc is None:
        return CU_DEVICE_INVALID
    return loc[1] if loc[0] == CU_MEM_LOCATION_TYPE_DEVICE else CU_DEVICE_CPU


def _range_attribute(data, size, attr, ptr, count):
    a = _managed_range(ptr, count)
    if a is None or a.kind != "managed":
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{count} is not managed memory")
    adv = _advice(a)
    if not data:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "data is NULL")
    if attr == 3:
        if size == 0 or size % 4:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dataSize {size} is not a positive multiple of 4")
        ids = [_as_device(loc) for loc in adv["accessed_by"]][: size // 4]
        ids += [CU_DEVICE_INVALID] * (size // 4 - len(ids))
        for i, v in enumerate(ids):
            cmem.write_i32(data + 4 * i, v)
        return
    values = {1: adv["read_mostly"], 2: _as_device(adv["preferred"]), 4: _as_device(adv["prefetched"]),
              5: adv["preferred"][0] if adv["preferred"] else CU_MEM_LOCATION_TYPE_INVALID,
              6: adv["preferred"][1] if adv["preferred"] else 0,
              7: adv["prefetched"][0] if adv["prefetched"] else CU_MEM_LOCATION_TYPE_INVALID,
              8: adv["prefetched"][1] if adv["prefetched"] else 0}
    if attr not in values:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown range attribute {attr}")
    if size != 4:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dataSize {size} must be 4 for attribute {attr}")
    cmem.write_i32(data, values[attr])


@export("cuMemRangeGetAttribute")
def mem_range_get_attribute(data, size, attr, ptr, count):
    ctxmod.current_context()
    _range_attribute(data, size, attr, ptr, count)


@export("cuMemRangeGetAttributes")
def mem_range_get_attributes(data, sizes, attrs, num, ptr, count):
    ctxmod.current_context()
    if num == 0 or not data or not sizes or not attrs:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "no attributes, or NULL arrays")
    for i in range(num):
        _range_attribute(cmem.read_ptr(data + 8 * i), cmem.read_u64(sizes + 8 * i),
                         cmem.read_u32(attrs + 4 * i), ptr, count)


# --- batched prefetch / discard (CUDA 13): validated, nothing to move on a CPU ---------------------------
def _batch_ranges(dptrs, sizes, count):
    if count == 0 or not dptrs or not sizes:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "count is 0 or dptrs/sizes is NULL")
    return [_managed_range(cmem.read_u64(dptrs + 8 * i), cmem.read_u64(sizes + 8 * i)) for i in range(count)]


def _prefetch_batch(per_thread, dptrs, sizes, count, locs, loc_idxs, num_locs, flags, hstream):
    from zluda_py.driver.stream import resolve_stream
    resolve_stream(hstream, per_thread)
    allocations = _batch_ranges(dptrs, sizes, count)
    if num_locs == 0 or not locs or not loc_idxs or cmem.read_u64(loc_idxs) != 0 or flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "prefetch locations must start at op 0; flags must be 0")
    starts = [cmem.read_u64(loc_idxs + 8 * j) for j in range(num_locs)]
    places = [_location(locs + 8 * j) for j in range(num_locs)]
    for loc in places:
        _check_location(loc)
    for i, a in enumerate(allocations):
        j = max(k for k, start in enumerate(starts) if start <= i)
        if a is not None:
            _advice(a)["prefetched"] = places[j]


def _discard_batch(per_thread, dptrs, sizes, count, flags, hstream):
    from zluda_py.driver.stream import resolve_stream
    resolve_stream(hstream, per_thread)
    _batch_ranges(dptrs, sizes, count)
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, got {flags:#x}")


def _discard_and_prefetch_batch(per_thread, dptrs, sizes, count, locs, loc_idxs, num_locs, flags, hstream):
    _prefetch_batch(per_thread, dptrs, sizes, count, locs, loc_idxs, num_locs, flags, hstream)


for _name, _impl in (("cuMemPrefetchBatchAsync", _prefetch_batch), ("cuMemDiscardBatchAsync", _discard_batch),
                     ("cuMemDiscardAndPrefetchBatchAsync", _discard_and_prefetch_batch)):
    export(_name)(lambda *a, _f=_impl: _f(False, *a))
    export(_name + "_ptsz")(lambda *a, _f=_impl: _f(True, *a))
