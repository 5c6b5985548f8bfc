"""CUDA arrays: cuArrayCreate/cuArray3DCreate and their descriptors, destroy, and the array copies
(HtoA, AtoH, DtoA, AtoD, AtoA). An array is tightly packed device memory, row by row, slice by slice."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod
from zluda_py.driver import memory
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_HANDLE

FORMAT_BYTES = {0x01: 1, 0x02: 2, 0x03: 4, 0x08: 1, 0x09: 2, 0x0A: 4, 0x10: 2, 0x20: 4}
LAYERED, SURFACE_LDST, CUBEMAP, TEXTURE_GATHER = 0x1, 0x2, 0x4, 0x8
DEPTH_TEXTURE, COLOR_ATTACHMENT, SPARSE, DEFERRED_MAPPING = 0x10, 0x20, 0x40, 0x80
_KNOWN_FLAGS = LAYERED | SURFACE_LDST | CUBEMAP | TEXTURE_GATHER | DEPTH_TEXTURE | COLOR_ATTACHMENT
# the device limits an H200 reports (maxTexture1D/2D/3D, layered and cubemap sizes)
MAX_1D, MAX_2D, MAX_3D, MAX_LAYERS, MAX_CUBE = 131072, (131072, 65536), 16384, 2048, 32768
MAX_LAYERED = 32768     # maxTexture1DLayered/2DLayered width and height
_handles = itertools.count(0xA7A70001)


@dataclass
class Array:
    handle: int
    width: int
    height: int          # 0 for a 1D array
    depth: int           # 0 unless 3D, layered or cubemap (then the layer count, 6 per cube)
    format: int
    channels: int
    flags: int
    alloc: object
    owner: int = 0       # the mipmapped array this is a level of (mipmap.py), which alone frees it

    @property
    def elem(self) -> int:
        return FORMAT_BYTES[self.format] * self.channels

    @property
    def pitch(self) -> int:
        return self.width * self.elem

    @property
    def rows(self) -> int:
        return max(self.height, 1)

    @property
    def base(self) -> int:
        return self.alloc.base

    @property
    def size(self) -> int:
        return self.pitch * self.rows * max(self.depth, 1)


ARRAYS: dict[int, Array] = {}


def lookup(handle: int, what: str = "array") -> Array:
    a = ARRAYS.get(handle)
    if a is None:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"{what} {handle:#x} is not a live CUDA array")
    return a


def _check_shape(w, h, d, fmt, nch, flags):
    if fmt not in FORMAT_BYTES:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"array format {fmt:#x} is not a CUarray_format")
    if nch not in (1, 2, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"NumChannels {nch} is not 1, 2 or 4")
    if flags & ~_KNOWN_FLAGS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"array flags {flags:#x} not supported")
    if w == 0 or (h == 0 and d != 0 and flags & (LAYERED | CUBEMAP) != LAYERED):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"array extent {w}x{h}x{d}")
    if flags & CUBEMAP:
        if w != h or d == 0 or d % 6 or (d > 6 and not flags & LAYERED) or w > MAX_CUBE:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cubemap {w}x{h}x{d}: faces square, depth 6 "
                                                      "(a multiple of 6 when layered)")
    elif flags & LAYERED:
        if d == 0 or d > MAX_LAYERS or w > MAX_LAYERED or h > MAX_LAYERED:   # h 0: 1D layered
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"layered array {w}x{h} with {d} layers")
    elif d:
        if max(w, h, d) > MAX_3D:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"3D array {w}x{h}x{d} exceeds {MAX_3D}")
    elif h == 0 and w > MAX_1D or h and (w > MAX_2D[0] or h > MAX_2D[1]):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"array {w}x{h} exceeds the texture limits")


def create(w, h, d, fmt, nch, flags) -> Array:
    ctx = ctxmod.current_context()
    _check_shape(w, h, d, fmt, nch, flags)
    a = Array(next(_handles), w, h, d, fmt, nch, flags, None)
    a.alloc = memory.allocate(ctx, a.size, "device")
    ARRAYS[a.handle] = a
    return a


@export("cuArrayCreate_v2")
def array_create(phandle, pdesc):
    ctxmod.current_context()
    if not phandle or not pdesc:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pHandle or pAllocateArray is NULL")
    w, h = cmem.read_u64(pdesc), cmem.read_u64(pdesc + 8)
    fmt, nch = cmem.read_u32(pdesc + 16), cmem.read_u32(pdesc + 20)
    cmem.write_u64(phandle, create(w, h, 0, fmt, nch, 0).handle)


@export("cuArray3DCreate_v2")
def array3d_create(phandle, pdesc):
    ctxmod.current_context()
    if not phandle or not pdesc:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pHandle or pAllocateArray is NULL")
    w, h, d = (cmem.read_u64(pdesc + 8 * i) for i in range(3))
    fmt, nch, flags = (cmem.read_u32(pdesc + 24 + 4 * i) for i in range(3))
    cmem.write_u64(phandle, create(w, h, d, fmt, nch, flags).handle)


@export("cuArrayGetDescriptor_v2")
def array_get_descriptor(pdesc, handle):
    if not pdesc:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pArrayDescriptor is NULL")
    a = lookup(handle)
    cmem.write_u64(pdesc, a.width)
    cmem.write_u64(pdesc + 8, a.height)
    cmem.write_u32(pdesc + 16, a.format)
    cmem.write_u32(pdesc + 20, a.channels)


@export("cuArray3DGetDescriptor_v2")
def array3d_get_descriptor(pdesc, handle):
    if not pdesc:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pArrayDescriptor is NULL")
    a = lookup(handle)
    for i, v in enumerate((a.width, a.height, a.depth)):
        cmem.write_u64(pdesc + 8 * i, v)
    for i, v in enumerate((a.format, a.channels, a.flags)):
        cmem.write_u32(pdesc + 24 + 4 * i, v)


@export("cuArrayDestroy")
def array_destroy(handle):
    # NVIDIA's driver crashes on a second destroy (tests/data/nvidia_array_errors.json); refused here
    a = lookup(handle)
    if a.owner:
        from zluda_py.driver import mipmap
        return mipmap.destroy_level(a)
    del ARRAYS[a.handle]
    ctx = a.alloc.ctx
    if ctx is not None and not ctx.destroyed and not ctx.idle():
        ctx.synchronize(check=False)
    memory.release(a.alloc)


@ctxmod.on_any_teardown
def _forget_context_arrays(ctx) -> None:
    for h in [h for h, a in ARRAYS.items() if a.alloc.ctx is ctx]:
        del ARRAYS[h]       # their memory goes with the context's allocations


# --- 1D copies to and from arrays (the array's bytes as one linear range) --------------------------------
def _at(handle, offset, n, what):
    a = lookup(handle, what)
    if offset + n > a.size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what}: {offset}+{n} bytes past the array's {a.size}")
    return a.base + offset


def _copy(per_thread, dst, src, n, hstream, sync):
    from zluda_py.driver import memcpy
    memcpy._copy(per_thread, dst, src, n, hstream, sync, "any", "any")


def _pair(name, impl, suffix):
    export(name)(lambda *a: impl(False, *a))
    export(name + suffix)(lambda *a: impl(True, *a))


_pair("cuMemcpyHtoA_v2", lambda pt, da, do, src, n: _copy(pt, _at(da, do, n, "dstArray"), src, n, 0, True), "_ptds")
_pair("cuMemcpyAtoH_v2", lambda pt, dst, sa, so, n: _copy(pt, dst, _at(sa, so, n, "srcArray"), n, 0, True), "_ptds")
_pair("cuMemcpyDtoA_v2", lambda pt, da, do, src, n: _copy(pt, _at(da, do, n, "dstArray"), src, n, 0, True), "_ptds")
_pair("cuMemcpyAtoD_v2", lambda pt, dst, sa, so, n: _copy(pt, dst, _at(sa, so, n, "srcArray"), n, 0, True), "_ptds")
_pair("cuMemcpyAtoA_v2", lambda pt, da, do, sa, so, n:
      _copy(pt, _at(da, do, n, "dstArray"), _at(sa, so, n, "srcArray"), n, 0, True), "_ptds")
_pair("cuMemcpyHtoAAsync_v2", lambda pt, da, do, src, n, h:
      _copy(pt, _at(da, do, n, "dstArray"), src, n, h, False), "_ptsz")
_pair("cuMemcpyAtoHAsync_v2", lambda pt, dst, sa, so, n, h:
      _copy(pt, dst, _at(sa, so, n, "srcArray"), n, h, False), "_ptsz")
