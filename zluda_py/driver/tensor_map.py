"""Tensor maps: cuTensorMapEncodeTiled/Im2col and cuTensorMapReplaceAddress check their arguments as
NVIDIA's driver does (cuda.h's rules, corrected by what an H200 answered: tests/data/nvidia_tma_answers.json)
and write the 128-byte map that the bulk tensor copies read (its layout: ptx/tensor_map.py)."""

from __future__ import annotations

import struct

from ptx import tensor_map as TM
from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, init
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

# CUtensorMapDataType -> (bytes, is float, NaN fill pattern)
_TYPES = {0: (1, False, 0), 1: (2, False, 0), 2: (4, False, 0), 3: (4, False, 0), 4: (8, False, 0),
          5: (8, False, 0), 6: (2, True, 0x7FFF), 7: (4, True, 0x7FFFFFFF), 8: (8, True, 0x7FFFFFFFFFFFFFFF),
          9: (2, True, 0x7FFF), 10: (4, True, 0x7FFFFFFF), 11: (4, True, 0x7FFFFFFF), 12: (4, True, 0x7FFFFFFF)}
INTERLEAVE_NONE, INTERLEAVE_16B, INTERLEAVE_32B = 0, 1, 2
SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B = 0, 1, 2, 3
_SWIZZLE_SPAN = {SWIZZLE_32B: 32, SWIZZLE_64B: 64, SWIZZLE_128B: 128}
_IM2COL_CORNER = {3: 32768, 4: 128, 5: 16}   # corners lie in [-r, r - 1] for the tensor's rank


def _bad(why):
    raise CudaError(CUDA_ERROR_INVALID_VALUE, why)


def _array(ptr, n, fmt, what):
    if not ptr:                 # even an empty one (globalStrides of rank 1): NVIDIA's answer
        _bad(f"{what} is NULL")
    size = struct.calcsize(fmt)
    return list(struct.unpack(f"<{n}{fmt}", cmem.read_bytes(ptr, size * n, what))) if n else []


def _common(tmap, dtype, rank, addr, dims_ptr, strides_ptr, es_ptr, interleave, swizzle, l2, oob, ranks):
    """The checks both encoders share; returns (element size, fill, dims, strides, element strides).
    cuda.h asks for a 64-byte aligned map, but NVIDIA's driver takes a 32-byte aligned one: not checked."""
    ctxmod.current_context()        # NVIDIA's driver answers CUDA_ERROR_INVALID_CONTEXT without one
    if not tmap:
        _bad("tensorMap is NULL")
    if dtype not in _TYPES:
        # the packed 4- and 6-bit types (13-15) included: a device of compute capability 9.0 refuses them
        _bad(f"tensorDataType {dtype}")
    if rank not in ranks:
        _bad(f"tensorRank {rank} (must be {min(ranks)}-{max(ranks)})")
    if interleave not in (INTERLEAVE_NONE, INTERLEAVE_16B, INTERLEAVE_32B):
        _bad(f"interleave {interleave}")
    if interleave != INTERLEAVE_NONE and rank < 3:
        _bad("an interleaved layout needs a rank of at least 3")
    if swizzle not in (SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B):
        _bad(f"swizzle {swizzle}")
    if l2 not in range(4):
        _bad(f"l2Promotion {l2}")
    if oob not in (0, 1):
        _bad(f"oobFill {oob}")
    esize, is_float, nan = _TYPES[dtype]
    if oob == 1 and not is_float:
        _bad("a NaN fill needs a floating-point data type")
    align = 32 if interleave == INTERLEAVE_32B else 16
    if addr % align:
        _bad(f"globalAddress {addr:#x} is not {align}-byte aligned")
    dims = _array(dims_ptr, rank, "Q", "globalDim")
    strides = _array(strides_ptr, rank - 1, "Q", "globalStrides")
    es = _array(es_ptr, rank, "I", "elementStrides")
    for i, d in enumerate(dims):
        if not 0 < d <= 1 << 32:
            _bad(f"globalDim[{i}] = {d}")
    for i, s in enumerate(strides):
        if s % align or s >= 1 << 40:
            _bad(f"globalStrides[{i}] = {s} (a multiple of {align} below 2^40)")
    for i, e in enumerate(es):
        if not 1 <= e <= 8:
            _bad(f"elementStrides[{i}] = {e}")
    return esize, (nan if oob else 0), dims, strides, es


def _write(tmap, raw):
    cmem.write_bytes(tmap, raw, "tensorMap")


@export("cuTensorMapEncodeTiled")
def tensor_map_encode_tiled(tmap, dtype, rank, addr, dims_ptr, strides_ptr, box_ptr, es_ptr, interleave,
                            swizzle, l2, oob):
    esize, fill, dims, strides, es = _common(tmap, dtype, rank, addr, dims_ptr, strides_ptr, es_ptr, interleave,
                                             swizzle, l2, oob, range(1, 6))
    box = _array(box_ptr, rank, "I", "boxDim")
    for i, b in enumerate(box):
        if not 1 <= b <= 256:
            _bad(f"boxDim[{i}] = {b}")
    inner = box[0] * esize
    if inner % 16:
        _bad(f"the box's inner dimension is {inner} bytes, not a multiple of 16")
    if interleave == INTERLEAVE_NONE:
        if swizzle != SWIZZLE_NONE and inner > _SWIZZLE_SPAN[swizzle]:
            _bad(f"the box's inner dimension ({inner} bytes) exceeds the swizzle span")
        es = [1] + es[1:]            # TMA has no stride along dimension 0
    counts = [-(-b // e) for b, e in zip(box, es)]
    pad = 5 - rank
    _write(tmap, TM.pack(addr=addr, dims=dims + [1] * pad, strides=[esize] + strides + [0] * pad, fill=fill,
                         counts=counts + [1] * pad, estrides=es + [1] * pad, rank=rank, elem=esize,
                         swizzle=swizzle, mode=TM.MODE_TILE, interleave=interleave))


@export("cuTensorMapEncodeIm2col")
def tensor_map_encode_im2col(tmap, dtype, rank, addr, dims_ptr, strides_ptr, lower_ptr, upper_ptr, channels,
                             pixels, es_ptr, interleave, swizzle, l2, oob):
    esize, fill, dims, strides, es = _common(tmap, dtype, rank, addr, dims_ptr, strides_ptr, es_ptr, interleave,
                                             swizzle, l2, oob, range(3, 6))
    spatial = rank - 2
    lower = _array(lower_ptr, spatial, "i", "pixelBoxLowerCorner")
    upper = _array(upper_ptr, spatial, "i", "pixelBoxUpperCorner")
    r = _IM2COL_CORNER[rank]
    for name, corner in (("pixelBoxLowerCorner", lower), ("pixelBoxUpperCorner", upper)):
        for i, v in enumerate(corner):
            if not -r <= v < r:
                _bad(f"{name}[{i}] = {v} (must lie in [{-r}, {r - 1}] for rank {rank})")
    if not 1 <= channels <= 256 or channels * esize % 16:
        _bad(f"channelsPerPixel {channels} (1-256, a multiple of 16 bytes)")
    if not 1 <= pixels <= 1024:
        _bad(f"pixelsPerColumn {pixels}")
    if interleave == INTERLEAVE_NONE and swizzle != SWIZZLE_NONE and channels * esize > _SWIZZLE_SPAN[swizzle]:
        _bad(f"a pixel's channels ({channels * esize} bytes) exceed the swizzle span")
    # the bounding box along W, H, D: positions lower .. dim - 1 + upper, every elementStrides-th
    positions = []
    for s in range(spatial):
        extent = dims[1 + s] - 1 + upper[s] - lower[s]
        if extent < 0:
            _bad(f"the bounding box is empty along spatial dimension {s}")
        positions.append(extent // es[1 + s] + 1)
    # canonical slots: C, W, H, D, N
    pad = 3 - spatial
    sdims = [dims[0]] + dims[1:-1] + [1] * pad + [dims[-1]]
    sstrides = [esize] + strides[:spatial] + [0] * pad + [strides[-1]]
    ses = [1] + es[1:-1] + [1] * pad + [es[-1]]
    counts = [channels] + positions + [1] * pad + [0]
    _write(tmap, TM.pack(addr=addr, dims=sdims, strides=sstrides, fill=fill, counts=counts, estrides=ses,
                         rank=rank, elem=esize, swizzle=swizzle, mode=TM.MODE_IM2COL, interleave=interleave,
                         lower=lower + [0] * pad, pixels=pixels))


@export("cuTensorMapReplaceAddress")
def tensor_map_replace_address(tmap, addr):
    """NVIDIA's driver looks only at the address (not NULL, 16-byte aligned), not at the map."""
    init.require_init()
    if not tmap:
        _bad("tensorMap is NULL")
    if not addr or addr % 16:
        _bad(f"globalAddress {addr:#x} is NULL or not 16-byte aligned")
    _write(tmap, TM.replace_address(cmem.read_bytes(tmap, TM.SIZE, "tensorMap"), addr))
