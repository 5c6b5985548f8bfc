"""The 128-byte CUtensorMap as this project lays it out: written by the driver's cuTensorMapEncode* and
read by the bulk tensor copies (ptx/codegen/tensor_copy.py). Programs treat it as opaque.

Dimensions sit in five canonical slots. A tiled map keeps the tensor's order (slot k = dimension k; a
slot past the rank has extent 1). An im2col map puts channels in slot 0, W, H, D in slots 1-3 and N in
slot 4, whatever the rank, so the copy code needs no rank cases."""

from __future__ import annotations

import struct

SIZE = 128
MAGIC = 0x414D545A          # "ZTMA": a map this driver encoded
MODE_TILE, MODE_IM2COL = 1, 2

# field offsets
ADDR = 0                    # u64 global address
DIM = 8                     # u64[5] extents, elements
STRIDE = 48                 # u64[5] strides in bytes (slot 0: the element size)
FILL = 88                   # u64 the bit pattern an out-of-bounds element reads as
COUNT = 96                  # u16[5] elements of the box along each slot (im2col: channels, W, H, D positions)
ESTRIDE = 106               # u8[5] traversal steps
RANK = 111                  # u8 the rank the map was encoded with
ELEM = 112                  # u8 element size in bytes
SWIZZLE = 113               # u8 0: none, 1/2/3: 16-byte chunks swizzled within 32/64/128-byte spans
MODE = 114                  # u8 MODE_*
INTERLEAVE = 115            # u8 CUtensorMapInterleave
LOWER = 116                 # i16[3] im2col: the bounding box's lower corner in W, H, D
PIXELS = 122                # u16 im2col: pixels per column
TAG = 124                   # u32 MAGIC

_LAYOUT = struct.Struct("<Q5Q5QQ5H5BBBBBB3hHI")
assert _LAYOUT.size == SIZE


def pack(*, addr, dims, strides, fill, counts, estrides, rank, elem, swizzle, mode, interleave,
         lower=(0, 0, 0), pixels=0) -> bytes:
    """The map's bytes; every sequence has 5 entries (slots), `lower` 3."""
    return _LAYOUT.pack(addr, *dims, *strides, fill, *counts, *estrides, rank, elem, swizzle, mode, interleave,
                        *lower, pixels, MAGIC)


def unpack(raw: bytes) -> dict | None:
    """The fields of a map this driver encoded; None for anything else."""
    if len(raw) < SIZE:
        return None
    v = _LAYOUT.unpack(bytes(raw[:SIZE]))
    if v[-1] != MAGIC:
        return None
    return dict(addr=v[0], dims=v[1:6], strides=v[6:11], fill=v[11], counts=v[12:17], estrides=v[17:22],
                rank=v[22], elem=v[23], swizzle=v[24], mode=v[25], interleave=v[26], lower=v[27:30], pixels=v[30])


def replace_address(raw: bytes, addr: int) -> bytes:
    return struct.pack("<Q", addr) + bytes(raw[8:SIZE])
