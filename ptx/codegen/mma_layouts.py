"""Which matrix element each register of a tensor-core fragment holds, lane by lane: mma.sync's as the PTX
ISA's figures give them, wmma's as an H200 loads them (the ISA leaves those to the hardware; measured with
scripts/gen_nvidia_mma_probe.py, checked by tests/ptx/test_mma_layouts.py). A layout is a list over the 32
lanes of a list over the fragment's slots (register-major, low element first) of (row, column)."""

from __future__ import annotations

import re
from functools import lru_cache

BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8,
        "s4": 4, "u4": 4, "b1": 1, "s32": 32, "e3m2": 8, "e2m3": 8, "e2m1": 8, "e2m1p": 4}


def shape_mnk(shape):
    m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape)
    return tuple(int(x) for x in m.groups()) if m else None


def dims(mat, shape):
    m, n, k = shape_mnk(shape)
    return {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[mat]


def _lanes(fn, slots):
    return tuple(tuple(fn(lane >> 2, lane & 3, s, lane) for s in range(slots)) for lane in range(32))


# ------------------------------------------------------------------ mma.sync (PTX ISA, "Matrix Fragments")

def mma_regs(shape, mat, ty):
    """Registers of an mma.sync fragment (64-bit ones for .f64)."""
    m, n, k = shape_mnk(shape)
    rows, cols = dims(mat, shape)
    if shape == "m8n8k4" and ty in ("f16", "f32") and mat in "ab":
        return 2
    if shape == "m8n8k4" and ty in ("f16", "f32"):
        return 4 if ty == "f16" else 8
    return max(1, rows * cols // 32 * BITS[ty] // (64 if ty == "f64" else 32))


@lru_cache(maxsize=None)
def mma_layout(shape, mat, ty, layout="row"):
    if shape == "m8n8k4" and (ty == "f16" or (mat in "cd" and ty == "f32")):
        return _m8n8k4_quadpair(mat, ty, layout)
    m, n, k = shape_mnk(shape)
    rows, cols = dims(mat, shape)
    slots = rows * cols // 32
    if mat in "cd":
        if m == 8:
            return _lanes(lambda g, t, i, _: (g, 2 * t + i), slots)
        return _lanes(lambda g, t, i, _: (g + 8 * (i >> 1), 2 * t + (i & 1)), slots)
    if ty in ("f16", "bf16"):
        if shape == "m16n8k8":
            fa = lambda g, t, i, _: (g + 8 * (i >> 1), 2 * t + (i & 1))
            fb = lambda g, t, i, _: (2 * t + i, g)
        else:
            fa = lambda g, t, i, _: (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2))
            fb = lambda g, t, i, _: (2 * t + (i & 1) + 8 * (i >> 1), g)
        return _lanes(fa if mat == "a" else fb, slots)
    if ty in ("tf32", "f64"):
        if shape == "m8n8k4":
            return _lanes((lambda g, t, i, _: (g, t)) if mat == "a" else (lambda g, t, i, _: (t, g)), slots)
        if mat == "a":
            return _lanes(lambda g, t, i, _: (g + 8 * (i & 1), t + 4 * (i >> 1)), slots)
        return _lanes(lambda g, t, i, _: (t + 4 * i, g), slots)
    per = 32 // BITS[ty]            # 8-, 4- and 1-bit elements: a register holds `per` consecutive k
    if m == 8:
        if mat == "a":
            return _lanes(lambda g, t, i, _: (g, per * t + i), slots)
        return _lanes(lambda g, t, i, _: (per * t + i, g), slots)
    half = k // 2
    if mat == "a":   # registers alternate rows g / g+8, then move on by half the k extent
        return _lanes(lambda g, t, i, _: (g + 8 * ((i // per) & 1), per * t + i % per + half * (i // per >> 1)),
                      slots)
    return _lanes(lambda g, t, i, _: (per * t + i % per + half * (i // per), g), slots)


def _m8n8k4_quadpair(mat, ty, layout):
    """mma.m8n8k4 .f16: four 8x8x4 products per warp, each by lanes 4q..4q+3 and 4q+16..4q+19 (q = 0..3);
    rows and columns are those of the lane's own product."""
    def fn(g, t, i, lane):
        hi = 4 * (lane >= 16)
        if mat == "a":
            return (lane % 4 + hi, i) if layout == "row" else (i + hi, lane % 4)
        if mat == "b":
            return (lane % 4, i + hi) if layout == "row" else (i, lane % 4 + hi)
        if ty == "f16":
            return (lane % 4 + hi, i)
        return ((lane & 1) + (i & 2) + hi, (i & 4) + (lane & 2) + (i & 1))
    return _lanes(fn, 4 if mat in "ab" else 8)


def m8n8k4_group(lane):
    """Which of mma.m8n8k4 .f16's four products a lane takes part in."""
    return (lane % 16) // 4


# ------------------------------------------------------------------ wmma (measured on an H200)

def wmma_regs(shape, mat, ty):
    if ty == "f16":
        return 8 if mat in "ab" else 4
    if mat in "cd":
        return 2 if ty == "f64" or shape in ("m8n8k32", "m8n8k128") else 8
    if ty in ("f64", "s4", "u4", "b1"):
        return 1
    if ty == "tf32":
        return 4
    big = {"m16n16k16": (4, 4), "m8n32k16": (2, 8), "m32n8k16": (8, 2)}[shape][mat == "b"]
    return big if ty == "bf16" else big // 2


def _f16a(g, t, s):     # mma.m16n8k16's A: rows g, g+8, k 0..15
    return (g + 8 * ((s >> 1) & 1), 2 * t + (s & 1) + 8 * ((s >> 2) & 1))


@lru_cache(maxsize=None)
def wmma_layout(shape, mat, ty):
    """The fragment map an H200 uses; the same for .row and .col memory layouts (the load transposes)."""
    slots = wmma_regs(shape, mat, ty) * (64 if ty == "f64" else 32) // BITS[ty]
    half = ty in ("f16", "bf16")
    if mat in "cd":
        if shape in ("m8n8k4", "m8n8k32", "m8n8k128"):
            return _lanes(lambda g, t, s, _: (g, 2 * t + s), slots)
        if shape == "m32n8k16":
            return _lanes(lambda g, t, s, _: (g + 8 * (s >> 1), 2 * t + (s & 1)), slots)
        if shape == "m8n32k16":
            return _lanes(lambda g, t, s, _: (2 * t + (s & 1), g + 8 * (s >> 1)), slots)
        return _lanes(lambda g, t, s, _: (g + 8 * ((s >> 1) & 1), 2 * t + (s & 1) + 8 * (s >> 2)), slots)
    if shape == "m8n8k4":
        return _lanes((lambda g, t, s, _: (g, t)) if mat == "a" else (lambda g, t, s, _: (t, g)), slots)
    if shape == "m16n16k8":
        if mat == "a":
            return _lanes(lambda g, t, s, _: (g + 8 * (s & 1), t + 4 * (s >> 1)), slots)
        return _lanes(lambda g, t, s, _: (t + 4 * (s & 1), g + 8 * (s >> 1)), slots)
    if ty in ("s4", "u4", "b1"):
        per = 32 // BITS[ty]
        return _lanes((lambda g, t, s, _: (g, per * t + s)) if mat == "a" else (lambda g, t, s, _: (per * t + s, g)),
                      slots)
    if ty in ("s8", "u8"):
        if mat == "a":   # row g (+8, +16, +24 every four slots), k 4t..4t+3
            return _lanes(lambda g, t, s, _: (g + 8 * (s >> 2), 4 * t + (s & 3)), slots)
        if shape == "m32n8k16":
            return _lanes(lambda g, t, s, _: (4 * t + s, g), slots)
        return _lanes(lambda g, t, s, _: (4 * t + (s & 3), g + 8 * (s >> 2)), slots)
    assert half
    # f16 fragments hold every element twice over (their 8 registers), bf16 ones once
    if mat == "a":
        if shape == "m8n32k16":
            return _lanes(lambda g, t, s, _: (g, 2 * t + (s & 1) + 8 * ((s >> 1) & 1)), slots)
        if shape == "m32n8k16":
            return _lanes(lambda g, t, s, _: (_f16a(g, t, s)[0] + 16 * (s >> 3), _f16a(g, t, s)[1]), slots)
        return _lanes(lambda g, t, s, _: _f16a(g, t, s % 8), slots)
    if shape == "m8n32k16":
        return _lanes(lambda g, t, s, _: (2 * t + (s & 1) + 8 * ((s >> 2) & 1), g + 8 * ((s >> 1) & 1) + 16 * (s >> 3)),
                      slots)
    if shape == "m32n8k16":
        return _lanes(lambda g, t, s, _: (2 * t + (s & 1) + 8 * ((s >> 1) & 1), g), slots)
    return _lanes(lambda g, t, s, _: (2 * t + (s & 1) + 8 * ((s >> 1) & 1), g + 8 * ((s >> 2) & 1)), slots)


# ------------------------------------------------------------------ mma.sp (measured on an H100)
# scripts/nvidia_mma_sp_probe.cu's answers (tests/data/nvidia_mma_sp_answers.json) fit these exactly: A's compressed
# fragment is the dense A fragment of half the k, B and C/D are the dense ones (8-bit B at k64 and 4-bit B at k128
# continue the pattern of half the k), and the metadata word's nibbles, each the two 2-bit column indices of a
# row's group of four (4-bit types: of a pair of columns among four pairs; .tf32: one index of a pair, in 16-bit
# halves: 0b0100 the first, 0b1110 the second), sit as metadata_layout says.

# sparsity selectors each form accepts
SPARSE_SHAPES = {"f16": {"m16n8k16": 4, "m16n8k32": 2}, "bf16": {"m16n8k16": 4, "m16n8k32": 2},
                 "tf32": {"m16n8k8": 4, "m16n8k16": 2}, "s8": {"m16n8k32": 2, "m16n8k64": 1},
                 "u8": {"m16n8k32": 2, "m16n8k64": 1}, "e4m3": {"m16n8k64": 1}, "e5m2": {"m16n8k64": 1},
                 "s4": {"m16n8k64": 2, "m16n8k128": 1}, "u4": {"m16n8k64": 2, "m16n8k128": 1}}


def _half_k(shape):
    m, n, k = shape_mnk(shape)
    return f"m{m}n{n}k{k // 2}"


def sparse_regs(shape, mat, ty):
    return mma_regs(_half_k(shape) if mat == "a" else shape, mat, ty)


@lru_cache(maxsize=None)
def sparse_layout(shape, mat, ty):
    """The fragment map of mma.sp: A's compressed k/2 columns, B's k rows, C/D."""
    m, n, k = shape_mnk(shape)
    if mat == "a":
        return mma_layout(_half_k(shape), "a", ty)
    if mat == "b" and BITS[ty] <= 8:      # the dense pattern of half the k, continued
        per = 32 // BITS[ty]
        return _lanes(lambda g, t, i, _: (per * t + i % per + 4 * per * (i // per), g), k * n // 32)
    return mma_layout(shape, mat, ty)


def sparse_groups(shape, ty):
    """Metadata nibbles per row of A: a group of four columns each (.tf32: a pair each; 4-bit types: eight, in
    pairs)."""
    k = shape_mnk(shape)[2]
    return k // 2 if ty == "tf32" else k // 8 if BITS[ty] == 4 else k // 4


@lru_cache(maxsize=None)
def metadata_layout(shape, ty, selector):
    """[32][8]: the (row, group) whose column indices each nibble of a lane's metadata word holds (None: a nibble
    this selector does not read). 16-bit and .tf32 forms: each lane of the chosen ones holds four groups of rows g
    and g + 8; 8- and 4-bit forms: eight groups of one row."""
    m = shape_mnk(shape)[0]
    groups = sparse_groups(shape, ty)
    out = [[None] * 8 for _ in range(32)]
    for r in range(m):
        g, hi = r % 8, r // 8
        for q in range(groups):
            if BITS[ty] <= 8:
                lane, nib = 4 * g + 2 * (selector + q // 8) + hi, q % 8
            else:
                lane, nib = 4 * g + selector * (groups // 4) + q // 4, 4 * hi + q % 4
            out[lane][nib] = (r, q)
    return tuple(tuple(row) for row in out)
