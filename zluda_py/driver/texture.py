"""Texture objects: cuTexObjectCreate/Destroy and their resource, texture and view descriptors, over CUDA
arrays, mipmapped arrays (mipmap.py), linear and pitch2D memory. A handle is the address of the runtime's
descriptor (texture.h), kept in managed memory so kernel code reads it on every backend."""

from __future__ import annotations

import ctypes
import struct

from ptx.runtime.texture import Descriptor, MAGIC, TEX_CUBEMAP
from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod
from zluda_py.driver import memory
from zluda_py.driver.allocations import device_range
from zluda_py.driver.array import FORMAT_BYTES, CUBEMAP, lookup
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_HANDLE

RES_ARRAY, RES_MIPMAP, RES_LINEAR, RES_PITCH2D = 0, 1, 2, 3
RES_DESC_BYTES, TEX_DESC_BYTES, VIEW_DESC_BYTES = 144, 104, 112
TRSF_READ_AS_INTEGER, TRSF_NORMALIZED_COORDINATES = 0x1, 0x2
PITCH_ALIGNMENT = 32        # texturePitchAlignment
# handle -> (Descriptor, resource desc bytes[, texture desc bytes, view bytes], the descriptor's allocation)
OBJECTS: dict[int, tuple] = {}


def resource(pres, what="pResDesc") -> Descriptor:
    """A descriptor over the memory a CUDA_RESOURCE_DESC names, geometry filled, modes not."""
    if not pres:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} is NULL")
    raw = cmem.read_bytes(pres, RES_DESC_BYTES)
    kind, = struct.unpack_from("<I", raw, 0)
    d = Descriptor()
    d.magic = MAGIC
    if kind == RES_ARRAY:
        handle, = struct.unpack_from("<Q", raw, 8)
        if not handle:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "resource array is NULL")
        from zluda_py.driver import mipmap
        if handle in mipmap.MIPMAPS:    # as NVIDIA answers it
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"resource array {handle:#x} is a mipmapped array")
        return array_descriptor(lookup(handle))
    if kind == RES_MIPMAP:
        from zluda_py.driver import mipmap
        handle, = struct.unpack_from("<Q", raw, 8)
        return mipmap.descriptor(handle)
    if kind in (RES_LINEAR, RES_PITCH2D):
        ptr, fmt, nch = struct.unpack_from("<QII", raw, 8)
        if not ptr:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "resource devPtr is NULL")
        if fmt not in FORMAT_BYTES or nch not in (1, 2, 4):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"resource format {fmt:#x} x {nch}")
        elem = FORMAT_BYTES[fmt] * nch
        d.base, d.format, d.channels = ptr, fmt, nch
        if kind == RES_LINEAR:
            size, = struct.unpack_from("<Q", raw, 24)
            if size == 0 or size % elem:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"linear resource of {size} bytes")
            device_range(ptr, size, "resource devPtr")
            d.width, d.linear, d.pitch = size // elem, 1, size
            return d
        w, h, pitch = struct.unpack_from("<QQQ", raw, 24)
        if w == 0 or h == 0 or pitch < w * elem or pitch % PITCH_ALIGNMENT or ptr % PITCH_ALIGNMENT:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pitch2D resource {w}x{h} pitch {pitch} at {ptr:#x}")
        device_range(ptr, pitch * (h - 1) + w * elem, "resource devPtr")
        d.width, d.height, d.pitch, d.slice = w, h, pitch, pitch * h
        return d
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"resource type {kind} is not a CUresourcetype")


def array_descriptor(a) -> Descriptor:
    """A descriptor over a CUDA array's texels (geometry filled, modes not)."""
    d = Descriptor()
    d.magic = MAGIC
    d.base, d.pitch, d.slice = a.base, a.pitch, a.pitch * a.rows
    d.format, d.channels = a.format, a.channels
    d.width, d.height = a.width, a.height
    if a.flags & (0x1 | CUBEMAP):
        d.layers = a.depth
    else:
        d.depth = a.depth
    d.tex_flags = TEX_CUBEMAP if a.flags & CUBEMAP else 0
    return d


def _keep(d: Descriptor, *descs) -> int:
    """The handle of a new object: its descriptor copied into managed memory of the current context."""
    a = memory.allocate(ctxmod.current_context(), ctypes.sizeof(d), "managed")
    ctypes.memmove(a.base, ctypes.addressof(d), ctypes.sizeof(d))
    OBJECTS[a.base] = (d,) + descs + (a,)
    return a.base


def drop(handle, what="texture object") -> None:
    """Destroy an object: once its context's queued work is done (a kernel may still read it)."""
    a = _object(handle, what)[-1]
    del OBJECTS[handle]
    memory._quiesce(a.ctx)
    memory.release(a)


@ctxmod.on_any_teardown
def _forget_context_objects(ctx) -> None:
    for h in [h for h, got in OBJECTS.items() if got[-1].ctx is ctx]:
        del OBJECTS[h]      # their descriptors go with the context's allocations


@export("cuTexObjectCreate")
def tex_object_create(pobj, pres, ptex, pview):
    ctxmod.current_context()
    if not pobj or not ptex:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pTexObject or pTexDesc is NULL")
    d = resource(pres)
    tex = cmem.read_bytes(ptex, TEX_DESC_BYTES)
    a0, a1, a2, filt, flags = struct.unpack_from("<IIIII", tex, 0)
    if max(a0, a1, a2) > 3 or filt > 1:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"address modes {a0},{a1},{a2} / filter mode {filt}")
    d.address[:] = [a0, a1, a2]
    d.filter = filt
    d.normalized = 1 if flags & TRSF_NORMALIZED_COORDINATES else 0
    d.read_normalized = 0 if flags & TRSF_READ_AS_INTEGER or FORMAT_BYTES[d.format] == 4 \
        or d.format == 0x10 else 1
    d.border[:] = struct.unpack_from("<4f", tex, 40)
    if d.mip_levels:
        from zluda_py.driver import mipmap
        mipmap.sampling(d, tex, mipmap.lookup(struct.unpack_from("<Q", cmem.read_bytes(pres, 16), 8)[0]))
    view = cmem.read_bytes(pview, VIEW_DESC_BYTES) if pview else bytes(VIEW_DESC_BYTES)
    cmem.write_u64(pobj, _keep(d, cmem.read_bytes(pres, RES_DESC_BYTES), tex, view))


def _object(handle, what="texture object"):
    got = OBJECTS.get(handle)
    if got is None:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"{what} {handle:#x} is not live")
    return got


@export("cuTexObjectDestroy")
def tex_object_destroy(handle):
    if handle:      # NVIDIA answers success for 0
        drop(handle)


@export("cuTexObjectGetResourceDesc")
def tex_object_get_resource_desc(pres, handle):
    if not pres:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pResDesc is NULL")
    cmem.write_bytes(pres, _object(handle)[1])


@export("cuTexObjectGetTextureDesc")
def tex_object_get_texture_desc(ptex, handle):
    if not ptex:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pTexDesc is NULL")
    cmem.write_bytes(ptex, _object(handle)[2])


@export("cuTexObjectGetResourceViewDesc")
def tex_object_get_view_desc(pview, handle):
    if not pview:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pResViewDesc is NULL")
    cmem.write_bytes(pview, _object(handle)[3])
