"""References for the tensor-core tests, written from the PTX ISA's fragment figures (mma.sync, ldmatrix,
stmatrix, movmatrix) and the H200's measured wmma fragment maps (tests/data/nvidia_mma_answers.json):
fragment <-> matrix conversion of register words, and the exact numerics of each family as the H200
computes them (floating point: products exact, aligned to the largest exponent estimate with 25 bits below
it, each truncated toward zero, summed exactly, the sum truncated; see fused_dot; .e4m3/.e5m2: two such f16
steps and an add of C, see fp8_dot)."""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia_mma_answers.json"
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8,
        "s4": 4, "u4": 4, "b1": 1, "s32": 32}


@lru_cache(maxsize=1)
def answers():
    return json.loads(DATA.read_text())


# ------------------------------------------------------------------ mma.sync fragment layouts (PTX ISA)

def _gt(lane):
    return lane >> 2, lane & 3


def shape_mnk(shape):
    return tuple(int(x) for x in re.match(r"m(\d+)n(\d+)k(\d+)", shape).groups())


def mma_layout(shape, mat, ty, layout="row"):
    """[32][slots] -> (row, col) of each element of a fragment, slot = register * per-register + element."""
    if shape == "m8n8k4" and ty == "f16" or (shape == "m8n8k4" and mat in "cd" and ty == "f32"):
        return mma_m8n8k4_f16_layout(mat, layout, ty)
    out = []
    for lane in range(32):
        g, t = _gt(lane)
        out.append([_slot(shape, mat, ty, lane, g, t, i) for i in range(_nslots(shape, mat, ty))])
    return out


def _nslots(shape, mat, ty):
    m, n, k = shape_mnk(shape)
    rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[mat]
    return rows * cols // 32


def _slot(shape, mat, ty, lane, g, t, i):
    cd = mat in "cd"
    m, n, k = shape_mnk(shape)
    if shape == "m8n8k4" and ty == "f64":
        return {"a": (g, t), "b": (t, g)}.get(mat, (g, 2 * t + (i & 1)))
    if cd:
        if shape.startswith("m8n8"):
            return (g, 2 * t + i)
        return (g + 8 * (i >> 1), 2 * t + (i & 1))
    if ty in ("f16", "bf16"):
        if shape == "m16n8k8":
            return (g + 8 * (i >> 1), 2 * t + (i & 1)) if mat == "a" else (2 * t + i, g)
        if mat == "a":       # m16n8k16
            return (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2))
        return (2 * t + (i & 1) + 8 * (i >> 1), g)
    if ty in ("tf32", "f64"):
        if mat == "a":
            return (g + 8 * (i & 1), t + 4 * (i >> 1))
        return (t + 4 * i, g)
    bits = BITS[ty]
    if shape in ("m8n8k16", "m8n8k32", "m8n8k128"):
        per = 32 // bits
        return (g, per * t + i) if mat == "a" else (per * t + i, g)
    per = 32 // bits                                  # elements per register
    reg, j = divmod(i, per)
    if mat == "a":       # registers alternate rows g / g+8, then move on by half the k extent
        return (g + 8 * (reg & 1), per * t + j + (k // 2) * (reg >> 1))
    return (per * t + j + (k // 2) * reg, g)


def mma_m8n8k4_f16_layout(mat, layout, ty):
    """The m8n8k4 .f16 quad-pair layout (ISA figures 46-52) as [32][slots] -> (row, col) in the 8x8 (C/D)
    or 8x4 / 4x8 (A/B) matrix of the lane's own product; products: lanes 0-3+16-19, 4-7+20-23, ..."""
    out = []
    for lane in range(32):
        hi = lane >= 16
        row_slots = []
        if mat == "a":
            for i in range(4):
                row_slots.append((lane % 4 + 4 * hi, i) if layout == "row" else (i % 4 + 4 * hi, lane % 4))
        elif mat == "b":
            for i in range(4):
                row_slots.append((lane % 4, i + 4 * hi) if layout == "row" else (i, lane % 4 + 4 * hi))
        elif ty == "f16":
            for i in range(8):
                row_slots.append((lane % 4 + 4 * hi, i))
        else:
            for i in range(8):
                x = (lane & 1) + (i & 2)
                row_slots.append((x + 4 * hi, (i & 4) + (lane & 2) + (i & 1)))
        out.append(row_slots)
    return out


def m8n8k4_group(lane):
    """Which of the four m8n8k4 products a lane takes part in."""
    return (lane % 16) // 4


# ------------------------------------------------------------------ register words <-> elements

def unpack(words, bits):
    """[32, nwords] uint32 -> [32, nelems] raw element values (python ints), low elements first."""
    out = []
    for lane in range(words.shape[0]):
        raw = b"".join(int(w).to_bytes(4, "little") for w in words[lane])
        v = int.from_bytes(raw, "little")
        n = len(raw) * 8 // bits
        out.append([(v >> (bits * j)) & ((1 << bits) - 1) for j in range(n)])
    return out


def to_matrix(elems, layout, rows, cols):
    """Scatter per-lane elements into a rows x cols matrix of python ints (duplicates must agree)."""
    mat = [[None] * cols for _ in range(rows)]
    for lane, slots in enumerate(layout):
        for s, (r, c) in enumerate(slots):
            v = elems[lane][s]
            assert mat[r][c] in (None, v), "fragment copies of one element differ"
            mat[r][c] = v
    return mat


def pack_slots(slots, bits):
    """Per-lane slot values -> register words (uint32 [32, nwords]), low slots first."""
    nwords = max(1, len(slots[0]) * bits // 32)
    out = np.zeros((len(slots), nwords), np.uint32)
    for lane, vals in enumerate(slots):
        v = sum((x & ((1 << bits) - 1)) << (bits * s) for s, x in enumerate(vals))
        for w in range(nwords):
            out[lane, w] = (v >> (32 * w)) & 0xFFFFFFFF
    return out


def from_matrix(mat, layout, bits):
    """Gather a matrix into per-lane fragment words (uint32 [32, nwords])."""
    nslot = len(layout[0])
    nwords = max(1, nslot * bits // 32)
    out = np.zeros((32, nwords), np.uint32)
    for lane, slots in enumerate(layout):
        v = 0
        for s, (r, c) in enumerate(slots):
            v |= (mat[r][c] & ((1 << bits) - 1)) << (bits * s)
        for w in range(nwords):
            out[lane, w] = (v >> (32 * w)) & 0xFFFFFFFF
    return out


# ------------------------------------------------------------------ the numerics

FLOATS = {"f16": (5, 10, 15), "bf16": (8, 7, 127), "tf32": (8, 10, 127), "f32": (8, 23, 127),
          "f64": (11, 52, 1023), "e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}


def decode(raw, ty):
    """(kind, sign, significand, exponent of its lsb, exponent estimate): kind 'num', 'inf' or 'nan';
    value = (-1)^sign * significand * 2^lsb, estimate = the exponent field's (floor(log2|x|) for normals,
    emin for subnormals)."""
    eb, mb, bias = FLOATS[ty]
    total = 32 if ty in ("tf32", "f32") else eb + mb + 1
    if ty == "tf32":
        raw >>= 13                                # the unused low mantissa bits of an f32 register
        total = 19
    sign = (raw >> (total - 1)) & 1
    e = (raw >> mb) & ((1 << eb) - 1)
    m = raw & ((1 << mb) - 1)
    if ty == "e4m3" and e == 15 and m == 7:
        return "nan", sign, 0, 0, 0
    if ty != "e4m3" and e == (1 << eb) - 1:
        return ("nan" if m else "inf"), sign, 0, 0, 0
    if e == 0:
        return "num", sign, m, 1 - bias - mb, 1 - bias
    return "num", sign, m | (1 << mb), e - bias - mb, e - bias


NAN32, NAN16 = 0x7FFFFFFF, 0x7FFF


def _special(terms_raw, types, c_raw, ctype):
    """IEEE inf/NaN propagation when an input is not finite: 'nan', +1/-1 (an infinity) or None."""
    import math
    def f(raw, ty):
        kind, s, m, lsb, _ = decode(raw, ty)
        if kind == "nan":
            return math.nan
        if kind == "inf":
            return -math.inf if s else math.inf
        return (-1.0 if s else 1.0) * (1.0 if m else 0.0)     # only the class matters here
    if not any(decode(r, t)[0] != "num" for pair in terms_raw for r, t in zip(pair, types)) and \
            decode(c_raw, ctype)[0] == "num":
        return None
    tot = f(c_raw, ctype)
    for a, b in terms_raw:
        tot = tot + f(a, types[0]) * f(b, types[1])
    if math.isnan(tot):
        return "nan"
    return 1 if tot > 0 else -1


def _f32_rz(s, u):
    """Raw f32 bits of the integer s times 2^u, truncated toward zero."""
    if s == 0:
        return 0
    sign = 0x80000000 if s < 0 else 0
    a = abs(s)
    n = a.bit_length()
    e = n - 1 + u
    if e > 127:
        return sign | 0x7F7FFFFF
    if e < -126:                                   # subnormal: units of 2^-149
        sh = u + 149
        m = a << sh if sh >= 0 else a >> -sh
        return sign | m
    m = a >> (n - 24) if n > 24 else a << (24 - n)
    return sign | ((e + 127) << 23) | (m & 0x7FFFFF)


def fused_dot(pairs, c_raw, at, bt, ct, F=25, out="f32"):
    """One tensor-core dot product step: raw f32 bits of c + sum(a*b), as the H200 computes f16/bf16/tf32
    products: exact products; the largest exponent estimate E (the sum of the inputs' exponent fields,
    and c's) fixes a grid of 2^(E-F); every term is truncated toward zero onto it, the terms are summed
    exactly and the sum is truncated to f32."""
    sp = _special(pairs, (at, bt), c_raw, ct)
    if sp is not None:
        if out == "f16":
            return NAN16 if sp == "nan" else (0x7C00 if sp > 0 else 0xFC00)
        return NAN32 if sp == "nan" else (0x7F800000 if sp > 0 else 0xFF800000)
    terms = []
    for ra, rb in pairs:
        _, sa, ma, la, ea = decode(ra, at)
        _, sb, mb, lb, eb = decode(rb, bt)
        if ma and mb:
            terms.append((sa ^ sb, ma * mb, la + lb, ea + eb))
    _, sc, mc, lc, ec = decode(c_raw, ct)
    if mc:
        terms.append((sc, mc, lc, ec))
    if not terms:
        return 0
    u = max(t[3] for t in terms) - F
    total = 0
    for s, m, lsb, _ in terms:
        v = m << (lsb - u) if lsb >= u else m >> (u - lsb)
        total += -v if s else v
    if out == "f16":
        from fractions import Fraction
        return to_f16_exact(Fraction(total) * Fraction(2) ** u)
    return _f32_rz(total, u)


def f32_to_f16_rn(raw):
    """An f32 result rounded to the nearest f16 (ties to even), NaN canonical."""
    from fractions import Fraction
    k, s, m, lsb, _ = decode(raw, "f32")
    if k == "nan":
        return NAN16
    if k == "inf":
        return 0xFC00 if s else 0x7C00
    return to_f16_exact(Fraction(-m if s else m) * Fraction(2) ** lsb)


def f32_of(raw):
    return np.array([raw], np.uint32).view(np.float32)[0]


def f32_bits(x):
    return int(np.array([x], np.float32).view(np.uint32)[0])


def to_f16_exact(x, ties_away=False):
    """An exact Fraction rounded to the nearest f16 (ties to even, or away from zero), as raw bits;
    inf on overflow."""
    from fractions import Fraction
    if x == 0:
        return 0
    sign = 0x8000 if x < 0 else 0
    a = abs(x)
    e = max(a.numerator.bit_length() - a.denominator.bit_length(), -14)
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -14)
    q = a / Fraction(2) ** (e - 10)
    r = int(q)
    rem = q - r
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and (r & 1 or ties_away)):
        r += 1
    if r >= 2048:
        r //= 2
        e += 1
    if e > 15:
        return sign | 0x7C00
    if r < 1024:
        return sign | r
    return sign | ((e + 15) << 10) | (r - 1024)


def _signed(raw, ty):
    bits = BITS[ty]
    return raw - (1 << bits) if ty[0] == "s" and raw >> (bits - 1) else raw


def _f64_round(x, mode):
    """An exact Fraction rounded to f64 raw bits with rn/rz/rm/rp (inf on rn overflow)."""
    import math
    from fractions import Fraction
    if x == 0:
        return 0
    sign = 1 << 63 if x < 0 else 0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -1022)
    q = a / Fraction(2) ** (e - 52)
    up = {"rn": None, "rz": False, "rm": sign != 0, "rp": sign == 0}[mode]
    r = math.floor(q)
    rem = q - r
    if up is None:
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and r & 1):
            r += 1
    elif up and rem:
        r += 1
    if r >= 1 << 53:
        r >>= 1
        e += 1
    if e > 1023:
        return sign | (0x7FF0000000000000 if up is not False and (up or mode == "rn") else 0x7FEFFFFFFFFFFFFF)
    if r < 1 << 52:
        return sign | r
    return sign | ((e + 1023) << 52) | (r - (1 << 52))


def _f64_frac(raw):
    from fractions import Fraction
    return Fraction(float(np.array([raw], np.uint64).view(np.float64)[0]))


def dot(form, pairs, c_raw):
    """Raw result bits of one element of D = A*B + C: `pairs` the (a, b) raw elements along k, in order;
    `form` a dict with atype/btype/ctype/dtype and the PTX form string."""
    at, bt, ct, dt = form["atype"], form["btype"], form["ctype"], form["dtype"]
    name = form["form"]
    if at in ("s8", "u8", "s4", "u4"):
        tot = sum(_signed(a, at) * _signed(b, bt) for a, b in pairs) + _signed(c_raw, "s32")
        if "satfinite" in name:
            tot = max(-(1 << 31), min((1 << 31) - 1, tot))
        return tot & 0xFFFFFFFF
    if at == "b1":
        op = (lambda a, b: a ^ b) if ".xor." in name else (lambda a, b: a & b)
        return (sum(op(a, b) for a, b in pairs) + _signed(c_raw, "s32")) & 0xFFFFFFFF
    if at == "f64":
        mode = next((m for m in ("rz", "rm", "rp") if f".{m}." in name), "rn")
        isnan = lambda r: (r >> 52) & 0x7FF == 0x7FF and r & ((1 << 52) - 1)
        isinf = lambda r: (r >> 52) & 0x7FF == 0x7FF and not r & ((1 << 52) - 1)
        if any(isnan(r) or isinf(r) for r in [c_raw] + [x for p in pairs for x in p]):
            # a NaN operand comes out as it is (the accumulator's first, then a's, then b's); an invalid
            # operation gives the canonical NaN
            # sm_90's m16n8k8 / m16n8k16 give the x86-style default NaN for an invalid operation
            default = 0xFFF8000000000000 if re.search(r"mma\.sync\.aligned\.m16n8k(8|16)\.", name) \
                else 0x7FFFFFFFFFFFFFFF
            acc = c_raw
            for a, b in pairs:
                if isnan(acc):
                    continue
                if isnan(a) or isnan(b):
                    acc = a if isnan(a) else b
                    continue
                x = [float(np.array([r], np.uint64).view(np.float64)[0]) for r in (a, b, acc)]
                with np.errstate(all="ignore"):
                    if any(math.isinf(v) for v in x):
                        v = np.float64(x[0]) * np.float64(x[1]) + np.float64(x[2])
                        acc = default if math.isnan(v) else int(np.array([v], np.float64).view(np.uint64)[0])
                        continue
                acc = _f64_round(_f64_frac(acc) + _f64_frac(a) * _f64_frac(b), mode)
            return acc
        acc = c_raw
        for a, b in pairs:
            acc = _f64_round(_f64_frac(acc) + _f64_frac(a) * _f64_frac(b), mode)
        return acc
    if ".m8n8k4." in name:
        return _m8n8k4_f16(pairs, c_raw, ct, dt)
    if at in ("e4m3", "e5m2"):
        return fp8_dot(pairs, c_raw, at, bt, dt)
    block = 4 if (name.startswith("wmma") and at == "tf32") else len(pairs)
    acc, acc_t = c_raw, ct
    for s in range(0, len(pairs), block):
        last = s + block >= len(pairs)
        # an f16 accumulator rounds the grid sum to f16 itself; an f32 C with an f16 D is an f32 product
        # converted (f2f, ties to even)
        acc = fused_dot(pairs[s:s + block], acc, at, bt, acc_t, out="f16" if last and ct == dt == "f16" else "f32")
        acc_t = "f32"
    if dt == "f16" and ct == "f32":
        return f32_to_f16_rn(acc)
    return acc


def fp8_to_f16(raw, ty):
    """Raw f16 bits of an .e4m3/.e5m2 element: f16 holds every fp8 value exactly (an .e4m3 subnormal is an
    f16 normal, so its exponent estimate is its own exponent, not .e4m3's emin); NaN as 0x7E00."""
    if ty == "e5m2":
        return raw << 8
    from fractions import Fraction
    sign = (raw & 0x80) << 8
    e, m = (raw >> 3) & 15, raw & 7
    if e == 15 and m == 7:
        return sign | 0x7E00
    if e == 0:
        return sign | to_f16_exact(Fraction(m, 512))
    return sign | ((e + 8) << 10) | (m << 7)


def _ieee_add(x_raw, c_raw, ty):
    """x + c in the accumulator type (round to nearest even), NaN canonical: the sum of two f16 or two f32
    values is exact in f64, so converting it is the one rounding."""
    dt = {"f16": np.float16, "f32": np.float32}[ty]
    ut = {"f16": np.uint16, "f32": np.uint32}[ty]
    v = lambda r: np.float64(np.array([r], ut).view(dt)[0])
    with np.errstate(all="ignore"):
        s = dt(v(x_raw) + v(c_raw))
    if math.isnan(s):
        return NAN16 if ty == "f16" else NAN32
    return int(np.array([s], dt).view(ut)[0])


def fp8_dot(pairs, c_raw, at, bt, dt):
    """.e4m3/.e5m2 mma.sync as sm_90 runs it (every recorded H200 answer): the elements widened to f16 (exact)
    and two f16 tensor-core steps (fused_dot) from +0, first the products whose k is 0 or 1 mod 4 (the low
    half of each A/B register), then those at 2 or 3 mod 4 on the first step's result, each rounded to the
    accumulator type as that step rounds it (f32: truncated; f16: to nearest); C is added last, by an IEEE
    add in the accumulator type. A single grid sum over all k, or C inside the first step, or the high halves
    first, each miss thousands of the recorded results."""
    h = [(fp8_to_f16(a, at), fp8_to_f16(b, bt)) for a, b in pairs]
    acc = 0
    for half in (0, 1):
        acc = fused_dot([p for q, p in enumerate(h) if q % 4 // 2 == half], acc, "f16", "f16", dt, out=dt)
    return _ieee_add(acc, c_raw, dt)


def _m8n8k4_f16(pairs, c_raw, ct, dt):
    """mma.m8n8k4 with .f16 inputs, which sm_80+ runs in other units: .f32 results are c + the products
    added one by one in f32 (round to nearest); .f16 results add the two pair sums in f32 and round that
    plus c to f16 once. (3 of the H200's 81661 probed .f16 results differ from this by one ulp.)"""
    from fractions import Fraction
    import math
    h = lambda r: np.array([r], np.uint16).view(np.float16)[0].astype(np.float32)
    p = [np.float32(h(a) * h(b)) for a, b in pairs]
    c = h(c_raw) if ct == "f16" else f32_of(c_raw)
    with np.errstate(all="ignore"):
        if dt == "f32":
            acc = p[0]
            for x in p[1:]:
                acc = np.float32(acc + x)
            r = np.float32(acc + c)
            return NAN32 if math.isnan(r) else f32_bits(r)
        x = np.float32(np.float32(p[0] + p[1]) + np.float32(p[2] + p[3]))
        if not (math.isfinite(x) and math.isfinite(c)):
            r = np.float16(x + c)
            return NAN16 if math.isnan(r) else int(np.array([r], np.float16).view(np.uint16)[0])
    return to_f16_exact(Fraction(float(x)) + Fraction(float(c)))
