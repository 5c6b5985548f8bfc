"""The tensor-core probe's input generator (scripts/nvidia_mma_probe_host.inc), replayed bit for bit: each
recorded trial's seed and distributions give the same A/B/C memory images (wmma) or per-lane register words
(mma.sync) the hardware was given; the recorded FNV-1a hash of those bytes proves it."""

from __future__ import annotations

import numpy as np

M64 = (1 << 64) - 1
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8,
        "s4": 4, "u4": 4, "b1": 1, "s32": 32}
FLOATS = {"f16": (5, 10, 15), "bf16": (8, 7, 127), "tf32": (8, 23, 127), "f32": (8, 23, 127),
          "f64": (11, 52, 1023), "e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}
BIG8 = (0x7F, 0x80, 0xFF, 0x81, 0x01, 0x00, 0xFE, 0x7E)
BIG4 = (0x7, 0x8, 0xF, 0x9, 0x1, 0x0, 0xE, 0x6)


class SplitMix:
    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


def fnv(data: bytes, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def _gen_float(eb, mb, bias, e4m3, dist, r):
    sign, mant = r >> 63, r & ((1 << mb) - 1)
    emax = (1 << eb) - 1
    if dist == "zero":
        return 0
    e = None
    if dist == "infnan":
        sel = (r >> 48) & 31
        if sel == 0 and not e4m3:
            e, mant = emax, 0
        elif sel <= 1:
            e, mant = emax, (7 if e4m3 else (1 << (mb - 1)) | (mant >> 1))
        elif sel == 2:
            return sign << (eb + mb)
    if e is None and dist == "subn" and ((r >> 50) & 3) == 0:
        e = 0
    if e is None:
        if dist == "spread":
            e = min(max(bias - 12 + (r >> 53) % 25, 1), emax - 1)
        else:
            e = bias - 3 + (r >> 53) % 7
    return (sign << (eb + mb)) | (e << mb) | mant


def gen_elem(ty, dist, r):
    if ty in FLOATS:
        eb, mb, bias = FLOATS[ty]
        return _gen_float(eb, mb, bias, ty == "e4m3", dist, r)
    if ty in ("s8", "u8"):
        return BIG8[(r >> 8) & 7] if dist == "big" else r & 0xFF
    if ty in ("s4", "u4"):
        return BIG4[(r >> 8) & 7] if dist == "big" else r & 0xF
    if ty == "b1":
        return r & 1
    if dist == "zero":
        return 0
    if dist == "extreme":
        return 0x7FFFFFFF - (r & 0xFFFF) if (r >> 40) & 1 else 0x80000000 + (r & 0xFFFF)
    if dist == "rand":
        return r & 0xFFFFFFFF
    return ((r & 0x1FFFFF) - 0x100000) & 0xFFFFFFFF


def put_elem(buf: bytearray, e, bits, v):
    if bits >= 8:
        n = bits // 8
        buf[e * n:(e + 1) * n] = int(v).to_bytes(n, "little")
    else:
        bit = e * bits
        buf[bit // 8] |= (v & ((1 << bits) - 1)) << (bit % 8)


def get_elem(buf, e, bits):
    if bits >= 8:
        n = bits // 8
        return int.from_bytes(bytes(buf[e * n:(e + 1) * n]), "little")
    bit = e * bits
    return (buf[bit // 8] >> (bit % 8)) & ((1 << bits) - 1)


def _round256(n):
    return (n + 255) & ~255


def wmma_buffers(form, trial):
    """(A, B, C) memory images (bytearrays) of one wmma trial, laid out as the probe laid them out, and
    the logical matrices (lists of raw element values, row-major)."""
    m, n, k = form["m"], form["n"], form["k"]
    at, bt, ct = form["atype"], form["btype"], form["ctype"]
    arow, brow = form["alayout"] == "row", form["blayout"] == "row"
    lda, ldb, ldc = form["lda"], form["ldb"], form["ldc"]
    ab, bb, cb = BITS[at], BITS[bt], BITS[ct]
    sa = _round256(((m if arow else k) * lda * ab + 7) // 8)
    sb = _round256(((k if brow else n) * ldb * bb + 7) // 8)
    sc = _round256((m * ldc * cb + 7) // 8)
    A, B, C = bytearray(sa), bytearray(sb), bytearray(sc)
    rng = SplitMix(int(trial["seed"], 16))
    da, db, dc = trial["dists"]
    la, lb, lc = [], [], []
    for r in range(m):
        for c in range(k):
            v = gen_elem(at, da, rng.next())
            la.append(v)
            put_elem(A, r * lda + c if arow else c * lda + r, ab, v)
    for r in range(k):
        for c in range(n):
            v = gen_elem(bt, db, rng.next())
            lb.append(v)
            put_elem(B, r * ldb + c if brow else c * ldb + r, bb, v)
    for r in range(m):
        for c in range(n):
            v = gen_elem(ct, dc, rng.next())
            lc.append(v)
            put_elem(C, r * ldc + c, cb, v)
    return (A, B, C), (la, lb, lc)


def wmma_hash(bufs):
    A, B, C = bufs
    return fnv(bytes(C), fnv(bytes(B), fnv(bytes(A))))


def mma_words(form, trial):
    """Per-lane register words of one mma.sync trial: uint32 array [32, (na+nb+nc)*words per register]."""
    rb = form["reg_bits"]
    wpr = rb // 32
    counts = (form["na"], form["nb"], form["nc"])
    types = (form["atype"], form["btype"], form["ctype"])
    nin = sum(counts) * wpr
    buf = bytearray(32 * nin * 4)
    rng = SplitMix(int(trial["seed"], 16))
    for lane in range(32):
        base = lane * nin * 4
        for mat in range(3):
            bits = BITS[types[mat]]
            per = rb // bits
            sub = bytearray(counts[mat] * wpr * 4)
            for e in range(counts[mat] * per):
                put_elem(sub, e, bits, gen_elem(types[mat], trial["dists"][mat], rng.next()))
            buf[base:base + len(sub)] = sub
            base += len(sub)
    return np.frombuffer(bytes(buf), dtype=np.uint32).reshape(32, nin)


def mma_hash(words):
    return fnv(words.tobytes())
