"""Mipmapped CUDA arrays: cuMipmappedArrayCreate/GetLevel/Destroy/GetMemoryRequirements, and the descriptor of
a texture object over one. Each level is a CUDA array of its own (array.py), so copies, descriptors and surface
objects take a level as any other array."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field

from ptx.runtime.texture import MAX_LEVELS
from zluda_py import cmem, log
from zluda_py.dispatch import export
from zluda_py.driver import array as arrays
from zluda_py.driver import context as ctxmod
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE,
                             CUDA_ERROR_NOT_SUPPORTED)

MAX_1D, MAX_2D = 32768, 32768       # maxTexture1DMipmap, maxTexture2DMipmap (H100/H200)
TRSF_SEAMLESS_CUBEMAP = 0x40
_handles = itertools.count(0x3A7A0001)


@dataclass
class Mipmap:
    handle: int
    width: int
    height: int
    depth: int
    format: int
    channels: int
    flags: int
    levels: list = field(default_factory=list)     # array.Array per level, level 0 first


MIPMAPS: dict[int, Mipmap] = {}


def lookup(handle: int) -> Mipmap:
    m = MIPMAPS.get(handle)
    if m is None:
        if handle in arrays.ARRAYS:     # an array where a mipmapped array belongs: NVIDIA answers INVALID_VALUE
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{handle:#x} is a CUDA array, not a mipmapped array")
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"{handle:#x} is not a live mipmapped array")
    return m


def level_extents(w, h, d, flags, level):
    """A level's (width, height, depth): each halved per level down to 1; no height stays no height, and the
    layer count of a layered or cubemap array is every level's."""
    w = max(1, w >> level)
    h = max(1, h >> level) if h else 0
    if d and not flags & (arrays.LAYERED | arrays.CUBEMAP):
        d = max(1, d >> level)
    return w, h, d


def max_levels(w, h, d, flags) -> int:
    """floor(log2(the largest extent)) + 1: levels until every extent is 1 (layers do not count: not probed)."""
    largest = max(w, h, d if d and not flags & (arrays.LAYERED | arrays.CUBEMAP) else 0)
    return largest.bit_length()


def _check(w, h, d, fmt, nch, flags):
    if flags & (arrays.SPARSE | arrays.DEFERRED_MAPPING):
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "sparse and deferred-mapping mipmapped arrays are not supported")
    arrays._check_shape(w, h, d, fmt, nch, flags)
    if not d and (h == 0 and w > MAX_1D or h and max(w, h) > MAX_2D):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"mipmapped array {w}x{h} exceeds the mipmapped texture limits "
                                                  f"({MAX_1D} in 1D, {MAX_2D}x{MAX_2D} in 2D)")


@export("cuMipmappedArrayCreate")
def mipmapped_array_create(phandle, pdesc, levels):
    ctxmod.current_context()
    if not phandle or not pdesc:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pHandle or pMipmappedArrayDesc is NULL")
    w, h, d = (cmem.read_u64(pdesc + 8 * i) for i in range(3))
    fmt, nch, flags = (cmem.read_u32(pdesc + 24 + 4 * i) for i in range(3))
    _check(w, h, d, fmt, nch, flags)
    # NVIDIA clamps numMipmapLevels to [1, the full chain] (cudaMallocMipmappedArray documents it; the driver
    # answers success for 0 and for too many, tests/data/nvidia_mipmap_answers.json)
    levels = min(max(levels, 1), max_levels(w, h, d, flags))
    m = Mipmap(next(_handles), w, h, d, fmt, nch, flags)
    try:
        for level in range(levels):
            a = arrays.create(*level_extents(w, h, d, flags, level), fmt, nch, flags)
            a.owner = m.handle
            m.levels.append(a)
    except BaseException:
        _free(m)
        raise
    MIPMAPS[m.handle] = m
    cmem.write_u64(phandle, m.handle)


@export("cuMipmappedArrayGetLevel")
def mipmapped_array_get_level(plevel, handle, level):
    if not plevel:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pLevelArray is NULL")
    m = lookup(handle)
    if level >= len(m.levels):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"level {level} of a mipmapped array of {len(m.levels)} levels")
    cmem.write_u64(plevel, m.levels[level].handle)


def _free(m: Mipmap) -> None:
    for a in m.levels:
        a.owner = 0
        arrays.array_destroy(a.handle)
    m.levels.clear()


def destroy_level(a) -> None:
    """cuArrayDestroy of a level: NVIDIA answers success and the level lives on until its mipmapped array is
    destroyed (nvidia_mipmap_answers.json: the chain is destroyed without error afterwards)."""
    log.error(f"cuArrayDestroy: array {a.handle:#x} is level of mipmapped array {a.owner:#x}; "
              "it is freed with the mipmapped array")


@export("cuMipmappedArrayDestroy")
def mipmapped_array_destroy(handle):
    # NVIDIA's driver crashes on a second destroy (nvidia_mipmap_answers.json); INVALID_HANDLE here
    m = lookup(handle)
    del MIPMAPS[m.handle]
    _free(m)


@export("cuMipmappedArrayGetMemoryRequirements")
def mipmapped_array_get_memory_requirements(preq, handle, device):
    if not preq:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "memoryRequirements is NULL")
    lookup(handle)
    # only arrays made with CUDA_ARRAY3D_DEFERRED_MAPPING have requirements, and those are not made here
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"mipmapped array {handle:#x} was not created with "
                                              "CUDA_ARRAY3D_DEFERRED_MAPPING")


@ctxmod.on_any_teardown
def _forget_context_mipmaps(ctx) -> None:
    for h in [h for h, m in MIPMAPS.items() if m.levels and m.levels[0].alloc.ctx is ctx]:
        del MIPMAPS[h]      # the level arrays go with array.py's own teardown


# --- texture objects over a mipmapped array ------------------------------------------------------------
def descriptor(handle):
    """texture.h's descriptor over every level of a mipmapped array (level 0 in the plain fields)."""
    from zluda_py.driver.texture import array_descriptor
    if not handle:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "resource mipmapped array is NULL")
    m = lookup(handle)
    d = array_descriptor(m.levels[0])
    d.mip_levels = len(m.levels)
    for i, a in enumerate(m.levels[:MAX_LEVELS]):
        lv = d.level[i]
        lv.base, lv.pitch, lv.slice = a.base, a.pitch, a.pitch * a.rows
        lv.width, lv.height = a.width, a.height
        lv.depth = 0 if a.flags & (arrays.LAYERED | arrays.CUBEMAP) else a.depth
    return d


def sampling(d, tex: bytes, m: Mipmap) -> None:
    """The CUDA_TEXTURE_DESC's mipmap fields into the descriptor of a texture over m."""
    flags, aniso, mip_filter, bias, lo, hi = struct.unpack_from("<IIIfff", tex, 16)
    if mip_filter > 1:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"mipmapFilterMode {mip_filter}")
    if flags & TRSF_SEAMLESS_CUBEMAP and not m.flags & arrays.CUBEMAP:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "CU_TRSF_SEAMLESS_CUBEMAP over a mipmapped array that is not "
                                                  "a cubemap")
    d.mip_filter = mip_filter
    d.lod_bias, d.min_lod, d.max_lod = bias, lo, hi
    d.max_anisotropy = min(max(aniso, 1), 16)
