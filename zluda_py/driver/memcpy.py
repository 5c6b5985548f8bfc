"""Copies and fills: every cuMemcpy*/cuMemset* form (sync, Async, 2D, 3D, peer, _ptds/_ptsz), checked
against the allocation index before anything is queued, then run in stream order by the backend.

Synchronous forms are ordered on the legacy (or, for _ptds, the per-thread) default stream and return
once done. Async forms follow CUDA's rules for pageable host memory: a copy to pageable memory completes
before returning, a copy from it has consumed the source before returning."""

from __future__ import annotations

from zluda_py import cmem, fastpath
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod
from zluda_py.driver.allocations import any_range, copy_ranges_ok, device_range
from zluda_py.driver.context import current_context
from zluda_py.driver.stream import legacy_stream, per_thread_stream, resolve_stream
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

CU_MEMORYTYPE_HOST = 1
CU_MEMORYTYPE_DEVICE = 2
CU_MEMORYTYPE_ARRAY = 3
CU_MEMORYTYPE_UNIFIED = 4


def _pair(name, impl, suffix):
    """Export impl(per_thread, *args) as `name` (legacy default stream) and name+suffix (per-thread)."""
    export(name)(lambda *a: impl(False, *a))
    export(name + suffix)(lambda *a: impl(True, *a))


def _run(stream, enqueue, sync: bool, src_pageable: bool = False, dst_pageable: bool = False) -> None:
    bs = stream.begin()
    enqueue(bs)
    if (sync or dst_pageable or src_pageable) and not bs.query():
        stream.synchronize()


def _pageable(alloc) -> bool:
    return alloc is None     # every kind of allocation in the index is page-locked or device memory


def _copy(per_thread, dst, src, n, hstream, sync, dst_kind, src_kind):
    """dst_kind/src_kind: 'device' (must be CUDA memory) or 'any' (unified addressing: host allowed)."""
    stream = resolve_stream(hstream, per_thread)
    if n == 0:
        return
    da = device_range(dst, n, "destination") if dst_kind == "device" else any_range(dst, n, "destination")
    sa = device_range(src, n, "source") if src_kind == "device" else any_range(src, n, "source")
    bs = stream.begin()
    bs.copy(dst, src, n)
    if (sync or da is None or sa is None) and not bs.query():
        stream.synchronize()


def _sync_copy(dst_kind, src_kind, per_thread):
    """The entry point for a synchronous copy: the hot path of many programs, so it is flat."""
    dst_device = dst_kind == "device"
    src_device = src_kind == "device"
    dst_check = device_range if dst_device else any_range
    src_check = device_range if src_device else any_range

    def copy(dst, src, n):
        ctx = current_context()
        if n == 0:
            return
        if not copy_ranges_ok(dst, dst_device, src, src_device, n):
            dst_check(dst, n, "destination")
            src_check(src, n, "source")
        waited = True
        if per_thread:
            stream = per_thread_stream(ctx)
            bs = stream.begin()
        else:
            stream = ctx.legacy or legacy_stream(ctx)
            # What begin() answers for the legacy stream when no other stream is busy or capturing.
            if not ctx.any_busy() and stream.capture is None:
                bs = stream.backend
                waited = False
            else:
                bs = stream.begin()
        # A backend copy may answer True when it already ran (inline on an idle stream).
        if not bs.copy(dst, src, n) and not bs.query():
            stream.synchronize()
        if waited:
            # The copy ran after other streams' work: a fault of that work is noticed when those streams
            # are next looked at (native launches), and a synchronous copy must return it.
            ctx.idle()
        if ctx.sticky_error:
            ctx.check_sticky()
        if fastpath.ON:
            fastpath.publish(ctx)   # re-arm the C fast path (it sends calls here after a generation change)
    return copy


for _name, _dk, _sk in (("cuMemcpyHtoD_v2", "device", "any"), ("cuMemcpyDtoH_v2", "any", "device"),
                        ("cuMemcpyDtoD_v2", "device", "device"), ("cuMemcpy", "any", "any")):
    export(_name)(_sync_copy(_dk, _sk, False))
    export(_name + "_ptds")(_sync_copy(_dk, _sk, True))
_pair("cuMemcpyHtoDAsync_v2", lambda pt, d, s, n, h: _copy(pt, d, s, n, h, False, "device", "any"), "_ptsz")
_pair("cuMemcpyDtoHAsync_v2", lambda pt, d, s, n, h: _copy(pt, d, s, n, h, False, "any", "device"), "_ptsz")
_pair("cuMemcpyDtoDAsync_v2", lambda pt, d, s, n, h: _copy(pt, d, s, n, h, False, "device", "device"), "_ptsz")
_pair("cuMemcpyAsync", lambda pt, d, s, n, h: _copy(pt, d, s, n, h, False, "any", "any"), "_ptsz")


def _peer(per_thread, dst, dst_ctx, src, src_ctx, n, hstream, sync):
    ctxmod.context_from_handle(dst_ctx or -1)
    ctxmod.context_from_handle(src_ctx or -1)
    _copy(per_thread, dst, src, n, hstream, sync, "device", "device")


_pair("cuMemcpyPeer", lambda pt, d, dc, s, sc, n: _peer(pt, d, dc, s, sc, n, 0, True), "_ptds")
_pair("cuMemcpyPeerAsync", lambda pt, d, dc, s, sc, n, h: _peer(pt, d, dc, s, sc, n, h, False), "_ptsz")


# --- 2D / 3D --------------------------------------------------------------------------------------------
def _side(mem_type, host, device, what):
    if mem_type == CU_MEMORYTYPE_HOST:
        return host, "any"
    if mem_type in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
        return device, "device" if mem_type == CU_MEMORYTYPE_DEVICE else "any"
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what}: unknown memory type {mem_type}")


def _array_side(handle, x, y, z, width, height, depth, what):
    """A CUDA array as device memory of its own pitch (the copy's box checked against its extent)."""
    from zluda_py.driver.array import lookup
    a = lookup(handle, what)
    if x + width > a.pitch or y + height > a.rows or z + depth > max(a.depth, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what}: the copy's box leaves the array")
    return CU_MEMORYTYPE_DEVICE, a.base, a.pitch, a.rows


def _check_span(ptr, kind, span, what):
    if kind == "device":
        return device_range(ptr, span, what)
    return any_range(ptr, span, what)


def _copy_3d(per_thread, pcopy, hstream, sync, peer=False):
    stream = resolve_stream(hstream, per_thread)
    if not pcopy:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pCopy is NULL")
    q = [cmem.read_u64(pcopy + 8 * i) for i in range(25)]
    sx, sy, sz, slod = q[0:4]
    s_type = q[4] & 0xFFFFFFFF
    s_host, s_dev, s_array, s_reserved, s_pitch, s_height = q[5:11]
    dx, dy, dz, dlod = q[11:15]
    d_type = q[15] & 0xFFFFFFFF
    d_host, d_dev, d_array, d_reserved, d_pitch, d_height = q[16:22]
    width, height, depth = q[22:25]
    if not peer and (s_reserved or d_reserved):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "reserved0/reserved1 must be NULL")
    if peer:
        ctxmod.context_from_handle(s_reserved or -1)
        ctxmod.context_from_handle(d_reserved or -1)
    _copy_box(stream, sync,
              (s_type, s_host, s_dev, sx, sy, sz, s_pitch, s_height, s_array),
              (d_type, d_host, d_dev, dx, dy, dz, d_pitch, d_height, d_array),
              width, height, depth)


def _copy_2d(per_thread, pcopy, hstream, sync):
    stream = resolve_stream(hstream, per_thread)
    if not pcopy:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pCopy is NULL")
    q = [cmem.read_u64(pcopy + 8 * i) for i in range(16)]
    _copy_box(stream, sync,
              (q[2] & 0xFFFFFFFF, q[3], q[4], q[0], q[1], 0, q[6], 0, q[5]),
              (q[9] & 0xFFFFFFFF, q[10], q[11], q[7], q[8], 0, q[13], 0, q[12]),
              q[14], q[15], 1)


def _copy_box(stream, sync, src, dst, width, height, depth):
    s_type, s_host, s_dev, sx, sy, sz, s_pitch, s_height, s_array = src
    d_type, d_host, d_dev, dx, dy, dz, d_pitch, d_height, d_array = dst
    if s_type == CU_MEMORYTYPE_ARRAY:
        s_type, s_dev, s_pitch, s_height = _array_side(s_array, sx, sy, sz, width, height, depth, "source")
    if d_type == CU_MEMORYTYPE_ARRAY:
        d_type, d_dev, d_pitch, d_height = _array_side(d_array, dx, dy, dz, width, height, depth, "destination")
    s_ptr, s_kind = _side(s_type, s_host, s_dev, "source")
    d_ptr, d_kind = _side(d_type, d_host, d_dev, "destination")
    if width == 0 or height == 0 or depth == 0:
        return
    if (height > 1 or depth > 1) and (s_pitch < width or d_pitch < width):
        raise CudaError(CUDA_ERROR_INVALID_VALUE,
                        f"pitch (src {s_pitch}, dst {d_pitch}) smaller than WidthInBytes {width}")
    if depth > 1 and (s_height < height or d_height < height):
        raise CudaError(CUDA_ERROR_INVALID_VALUE,
                        f"srcHeight {s_height} / dstHeight {d_height} smaller than Height {height}")
    s_pitch = s_pitch or width
    d_pitch = d_pitch or width
    s_slice = s_pitch * max(s_height, height)
    d_slice = d_pitch * max(d_height, height)
    s_base = s_ptr + sz * s_slice + sy * s_pitch + sx
    d_base = d_ptr + dz * d_slice + dy * d_pitch + dx
    s_span = (depth - 1) * s_slice + (height - 1) * s_pitch + width
    d_span = (depth - 1) * d_slice + (height - 1) * d_pitch + width
    sa = _check_span(s_base, s_kind, s_span, "source")
    da = _check_span(d_base, d_kind, d_span, "destination")

    def enqueue(bs):
        if depth > 1 and s_slice == s_pitch * height and d_slice == d_pitch * height \
                and s_pitch == d_pitch:
            bs.copy_2d(d_base, d_pitch, s_base, s_pitch, width, height * depth)
            return
        for z in range(depth):
            bs.copy_2d(d_base + z * d_slice, d_pitch, s_base + z * s_slice, s_pitch, width, height)
    _run(stream, enqueue, sync, _pageable(sa), _pageable(da))


_pair("cuMemcpy2D_v2", lambda pt, p: _copy_2d(pt, p, 0, True), "_ptds")
_pair("cuMemcpy2DUnaligned_v2", lambda pt, p: _copy_2d(pt, p, 0, True), "_ptds")
_pair("cuMemcpy2DAsync_v2", lambda pt, p, h: _copy_2d(pt, p, h, False), "_ptsz")
_pair("cuMemcpy3D_v2", lambda pt, p: _copy_3d(pt, p, 0, True), "_ptds")
_pair("cuMemcpy3DAsync_v2", lambda pt, p, h: _copy_3d(pt, p, h, False), "_ptsz")
_pair("cuMemcpy3DPeer", lambda pt, p: _copy_3d(pt, p, 0, True, peer=True), "_ptds")
_pair("cuMemcpy3DPeerAsync", lambda pt, p, h: _copy_3d(pt, p, h, False, peer=True), "_ptsz")


# --- memset ---------------------------------------------------------------------------------------------
def _memset(per_thread, dst, value, elem_size, count, pitch, height, hstream, sync):
    stream = resolve_stream(hstream, per_thread)
    if dst % elem_size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dst:#x} is not {elem_size}-byte aligned")
    if count == 0 or height == 0:
        return
    row = count * elem_size
    if height > 1:
        if pitch < row:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dstPitch {pitch} < {row} bytes per row")
        if pitch % elem_size:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dstPitch {pitch} not a multiple of {elem_size}")
    span = (height - 1) * pitch + row if height > 1 else row
    device_range(dst, span, "destination")
    mask = (1 << (8 * elem_size)) - 1
    _run(stream, lambda bs: bs.memset(dst, value & mask, elem_size, count, pitch if height > 1 else 0, height),
         sync)


for _bits, _size in ((8, 1), (16, 2), (32, 4)):
    _pair(f"cuMemsetD{_bits}_v2",
          lambda pt, d, v, n, _e=_size: _memset(pt, d, v, _e, n, 0, 1, 0, True), "_ptds")
    _pair(f"cuMemsetD2D{_bits}_v2",
          lambda pt, d, p, v, w, h, _e=_size: _memset(pt, d, v, _e, w, p, h, 0, True), "_ptds")
    _pair(f"cuMemsetD{_bits}Async",
          lambda pt, d, v, n, s, _e=_size: _memset(pt, d, v, _e, n, 0, 1, s, False), "_ptsz")
    _pair(f"cuMemsetD2D{_bits}Async",
          lambda pt, d, p, v, w, h, s, _e=_size: _memset(pt, d, v, _e, w, p, h, s, False), "_ptsz")


# --- batches (CUDA 12.8+) -----------------------------------------------------------------------------
SIZE_MAX = (1 << 64) - 1


def _copy_batch(per_thread, dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, fail_idx, hstream):
    """Every copy is checked before any is queued; the attributes (access order, location hints) only
    steer a GPU's copy engines and are not needed here."""
    stream = resolve_stream(hstream, per_thread)
    if count == 0 or not dsts or not srcs or not sizes:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "count is 0 or dsts/srcs/sizes is NULL")
    if num_attrs == 0 or not attrs or not attr_idxs or cmem.read_u64(attr_idxs) != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "attributes must be given, the first for copy 0")
    copies = []
    for i in range(count):
        d, s, n = cmem.read_u64(dsts + 8 * i), cmem.read_u64(srcs + 8 * i), cmem.read_u64(sizes + 8 * i)
        try:
            da, sa = any_range(d, n, "destination"), any_range(s, n, "source")
        except CudaError:
            if fail_idx:
                cmem.write_u64(fail_idx, i)
            raise
        copies.append((d, s, n, da is None or sa is None))
    if fail_idx:
        cmem.write_u64(fail_idx, SIZE_MAX)
    bs = stream.begin()
    pageable = False
    for d, s, n, pg in copies:
        if n:
            bs.copy(d, s, n)
        pageable |= pg
    if pageable and not bs.query():
        stream.synchronize()


_pair("cuMemcpyBatchAsync", lambda pt, d, s, z, c, a, ai, na, fi, h:
      _copy_batch(pt, d, s, z, c, a, ai, na, fi, h), "_ptsz")
_pair("cuMemcpyBatchAsync_v2", lambda pt, d, s, z, c, a, ai, na, h:
      _copy_batch(pt, d, s, z, c, a, ai, na, 0, h), "_ptsz")


def _copy_with_attributes(per_thread, dst, src, n, attr, hstream):
    # CUDA 13.2: one copy with one CUmemcpyAttributes, whose hints steer a GPU's copy engines only
    if not attr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "attr is NULL")
    _copy(per_thread, dst, src, n, hstream, False, "any", "any")


_pair("cuMemcpyWithAttributesAsync", lambda pt, d, s, n, a, h: _copy_with_attributes(pt, d, s, n, a, h), "_ptsz")
