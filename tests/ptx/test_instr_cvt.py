"""cvt between every integer and float type: int<->int (wrap, sign/zero extension, .sat), int->float with
.rn/.rz/.rm/.rp, float->int with .rni/.rzi/.rmi/.rpi (saturating, NaN per the GPU, .ftz), float<->float narrowing
and widening, same-type rounding to integral, .relu, and f16x2/bf16x2 packing.
References checked on an NVIDIA H200 (driver 580, PTX JIT for sm_86), 2026-11-29: every test here passed
with PTXKIT_BACKEND=cuda (see ptxkit.py); the corrections that hardware forced are noted where they apply.
Written after the hardware runs, so not run there: test_cvt_rna_tf32, test_cvt_satfinite, the
redundant-.sat float->int cases, the .relu packing cases and the sm_90 bf16 conversions (KS90).
"""

import math
from fractions import Fraction

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

# the numpy references divide by zero and overflow on purpose (inf/NaN inputs)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

N = 512
KS = K.KernelSet()
# kernel name -> the exact compiler gap it runs into (strict xfail; see ptxkit.cases)
XFAIL = {}
CASES = {}  # name -> (dst, src, rounding, ftz, sat, relu)

INTS = ["u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64"]
FLOATS = ["f16", "f32", "f64"]
IRND = ["rni", "rzi", "rmi", "rpi"]
FRND = ["rn", "rz", "rm", "rp"]


def _bits(tn):
    return K.TYPES[tn].bits


def _range(tn):
    b = _bits(tn)
    return (-(1 << (b - 1)), (1 << (b - 1)) - 1) if tn[0] == "s" else (0, (1 << b) - 1)


def _src_reg(src):
    # 8-bit sources live in 16-bit registers with a garbage high byte: cvt must read the low 8 bits only
    return "b16" if src in ("u8", "s8") else src


# conversions to and from bf16 beyond f32 <-> bf16 need sm_90: a module of their own
KS90 = K.KernelSet(target="sm_90")


def add_case(dst, src, rnd="", ftz=False, sat=False, relu=False, ks=KS):
    mods = "".join(f".{m}" for m in (rnd, "ftz" if ftz else "", "sat" if sat else "", "relu" if relu else "") if m)
    name = K.kname("cvt", rnd, "ftz" if ftz else "", "sat" if sat else "", "relu" if relu else "", dst, src)
    ks.add(name, K.elementwise(name, f"cvt{mods}.{dst}.{src} %d, %a;", [("a", _src_reg(src))], [("d", dst)]))
    CASES[name] = (dst, src, rnd, ftz, sat, relu)


for dst in INTS:
    for src in INTS:
        if dst == src:
            continue
        add_case(dst, src)
        lo_d, hi_d = _range(dst)
        lo_s, hi_s = _range(src)
        if lo_s < lo_d or hi_s > hi_d:
            add_case(dst, src, sat=True)
for dst in FLOATS:
    for src in INTS:
        for r in FRND:
            add_case(dst, src, r)
for dst in INTS:
    for src in FLOATS:
        for r in IRND:
            add_case(dst, src, r)
            if src == "f32":
                add_case(dst, src, r, ftz=True)
for r in FRND:
    add_case("f32", "f64", r)
    add_case("f32", "f64", r, ftz=True)
    add_case("f16", "f32", r)
    add_case("f16", "f64", r)
add_case("f32", "f64", "rn", sat=True)
add_case("f16", "f32", "rn", relu=True)
add_case("bf16", "f32", "rn")
add_case("bf16", "f32", "rz")
add_case("bf16", "f32", "rn", relu=True)
add_case("f32", "f16")
add_case("f64", "f16")
add_case("f64", "f32")
add_case("f64", "f32", ftz=True)
add_case("f32", "bf16")
for tn in ("f32", "f64"):
    for r in IRND:
        add_case(tn, tn, r)
        if tn == "f32":
            add_case(tn, tn, r, ftz=True)
for dst, src, r in (("s8", "f32", "rzi"), ("u16", "f64", "rni"), ("s32", "f32", "rmi"), ("u64", "f32", "rpi"),
                    ("u32", "f16", "rzi")):
    add_case(dst, src, r, sat=True)  # .sat is redundant for float -> int: same results
for r in ("rm", "rp"):
    add_case("bf16", "f32", r, ks=KS90)
for r in FRND:
    add_case("bf16", "f64", r, ks=KS90)
    for src in ("u8", "s16", "u32", "s32", "u64", "s64"):
        add_case("bf16", src, r, ks=KS90)
for r in FRND:
    add_case("bf16", "f16", r, ks=KS90)
    add_case("f16", "bf16", r, ks=KS90)
add_case("f64", "bf16", ks=KS90)
add_case("f32", "f32", ftz=True)  # cvt.ftz.f32.f32: flushes only
add_case("f32", "f32", sat=True)  # cvt.sat.f32.f32: clamps to [0, 1]


# ---------------------------------------------------------------- inputs

def _float_inputs(rng, src, dst):
    """Ordinary values, exact ties k+0.5, values spread over (and past) the destination's range,
    and the specials (NaN, inf, denormals, ±0)."""
    n = N
    x = K.bits_to_float(K.rand_float_bits(rng, src, n), src)
    if dst in INTS:
        lo, hi = _range(dst)
        span = rng.uniform(lo * 1.5 - 8, hi * 1.5 + 8, n)
        ties = rng.integers(-300, 300, n) + 0.5
        pick = rng.random(n)
        x = np.where(pick < 0.3, span, np.where(pick < 0.45, ties, x))
        extra = [lo, hi, lo - 1.0, hi + 1.0, hi + 0.5, lo - 0.5, -0.5, 0.5, 1.5, 2.5, -1.5, -2.5,
                 0.49999997, -0.9999, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 2.0 ** 32, 2.0 ** 31, -2.0 ** 31]
        x[len(K.float_specials_bits(src)) * 2:][:len(extra)] = extra
    elif src == "f64" and dst in ("f16", "bf16"):
        # a midpoint of the destination plus or minus a bit that f32 cannot hold: going through f32
        # would round twice and land on the wrong side
        p = K.FORMATS[dst][0]
        traps = []
        for e in (0, 5, -3, -20 if dst == "bf16" else -10):
            for sgn in (1.0, -1.0):
                for tiny in (2.0 ** -40, -2.0 ** -40):
                    traps.append(sgn * 2.0 ** e * (1 + 2.0 ** -p + tiny))
                    traps.append(sgn * 2.0 ** e * (1 + 3 * 2.0 ** -p + tiny))
        x[-len(traps):] = traps
    # make every value representable in the source format (e.g. f16 storage)
    return K.float_to_bits(x, src)


def _int_inputs(rng, src, dst):
    x = K.rand_ints(rng, src, N)
    if dst in FLOATS or dst == "bf16":
        # around the destination's precision limit, where rounding direction matters, and 64-bit values
        # that a conversion going through f64 would round twice
        p = K.FORMATS[dst][0]
        near = [(1 << p) + k for k in range(-3, 8)] + [(1 << (p + 1)) + k for k in (1, 2, 3, 5)]
        near += [(1 << 62) + 1, (1 << 63) - 1, (1 << 63) + 1, (1 << 64) - 1, (1 << 60) + (1 << 52) + 1]
        near += [-v for v in near] if src[0] == "s" else []
        near = [v for v in near if _range(src)[0] <= v <= _range(src)[1]]
        x[-len(near):] = np.array(near).astype(x.dtype) if near else x[-len(near):]
    if src in ("u8", "s8"):
        junk = rng.integers(0, 256, N).astype(np.uint16) << np.uint16(8)
        return x.view(np.uint8).astype(np.uint16) | junk
    return x


# ---------------------------------------------------------------- references

def _int_of(v, src):
    """The source register's value as a Python int (8-bit sources: the low byte)."""
    if src in ("u8", "s8"):
        v &= 0xFF
        return v - 256 if (src == "s8" and v >= 128) else v
    return int(v)


def _wrap(v, dst):
    b = _bits(dst)
    v &= (1 << b) - 1
    return v - (1 << b) if (dst[0] == "s" and v >> (b - 1)) else v


def _round_int(v, rnd):
    if rnd == "rni":
        return round(Fraction(v))  # half to even
    if rnd == "rzi":
        return math.trunc(v)
    if rnd == "rmi":
        return math.floor(v)
    return math.ceil(v)


def ref(case, v):
    dst, src, rnd, ftz, sat, relu = case
    if src in INTS and dst in INTS:
        x = _int_of(v, src)
        if sat:
            lo, hi = _range(dst)
            return min(max(x, lo), hi)
        return _wrap(x, dst)
    if src in INTS:  # -> float
        return K.round_fraction(Fraction(_int_of(v, src)), dst, rnd)
    if ftz and K.is_subnormal([v], src)[0]:
        v = math.copysign(0.0, v)
    if dst in INTS:  # float -> int saturates
        if math.isnan(v):
            # H200: NaN -> 0 from f16/f32 into <= 32 bits; from f64, or into 64 bits, NaN gives the
            # bit pattern 1 << (width-1) (0x80 for u8, 0x8000...0 for u64) -- the F2I "indefinite"
            return 0 if (src in ("f16", "f32", "bf16") and _bits(dst) <= 32) else _wrap(1 << (_bits(dst) - 1), dst)
        lo, hi = _range(dst)
        if math.isinf(v):
            return hi if v > 0 else lo
        return min(max(_round_int(v, rnd), lo), hi)
    # float -> float
    if math.isnan(v):
        return 0.0 if sat else math.nan  # .sat turns NaN into +0 (checked on H200)
    if rnd in IRND:
        r = v if math.isinf(v) or v == 0 else float(_round_int(v, rnd))
        r = math.copysign(r, v) if r == 0 else r   # integral rounding keeps the sign of zero
    elif math.isinf(v) or v == 0:
        r = v
    else:
        r = K.round_fraction(Fraction(v), dst, rnd or "rn")
    if ftz and dst == "f32" and K.is_subnormal([r], "f32")[0]:
        r = math.copysign(0.0, r)
    if sat:
        r = 0.0 if (math.isnan(r) or r <= 0) else min(r, 1.0)
    if relu and not math.isnan(r) and r <= 0:
        r = 0.0  # .relu: negative and -0 results become +0 (checked on H200)
    return r


@pytest.mark.parametrize("name", K.cases(sorted(CASES), XFAIL))
def test_cvt(name, rng):
    case = CASES[name]
    dst, src = case[0], case[1]
    if src in FLOATS or src == "bf16":
        x = _float_inputs(rng, src, dst)
        vals = K.bits_to_float(x, src).tolist()
        if src in ("f32", "f64"):
            x = x.view(K.TYPES[src].np)
    else:
        x = _int_inputs(rng, src, dst)
        vals = [int(v) for v in x.tolist()]
    (got,) = K.run_elementwise(KS90 if name in KS90.kernels else KS, name, [x], [dst], rng)
    want = [ref(case, v) for v in vals]
    if dst in INTS:
        K.check_equal(got, K.wrap(want, dst), [x], name)
    else:
        K.check_float(got, K.float_to_bits(want, dst), dst, [x], name)


# ---------------------------------------------------------------- packing conversions

PACK = {}
for dst, r in [("f16x2", "rn"), ("bf16x2", "rn"), ("f16x2", "rz"), ("bf16x2", "rz"), ("f16x2", "rn.relu"),
               ("bf16x2", "rn.relu")]:
    name = K.kname("cvt_pack", r, dst)
    KS.add(name, K.elementwise(name, f"cvt.{r}.{dst}.f32 %d, %a, %b;", [("a", "f32"), ("b", "f32")],
                               [("d", dst)]))
    PACK[name] = (dst[:-2], r)


def _pack_ref(v, half, r):
    relu = r.endswith(".relu")
    r = r.split(".")[0]
    out = K.round_fraction(Fraction(v), half, r) if math.isfinite(v) and v != 0 else v
    if relu and not math.isnan(out) and out <= 0:
        out = 0.0  # .relu: negatives and -0 become +0 (the scalar form was checked on H200)
    return out


@pytest.mark.parametrize("name", K.cases(sorted(PACK), XFAIL))
def test_cvt_pack(name, rng):
    """cvt.rn.f16x2.f32 d, a, b puts cvt(a) in the upper half and cvt(b) in the lower half."""
    half, r = PACK[name]
    a, b = (K.bits_to_float(K.rand_float_bits(rng, "f32", N), "f32").astype(np.float32) for _ in range(2))
    (got,) = K.run_elementwise(KS, name, [a, b], [half + "x2"], rng)
    hi = K.float_to_bits([_pack_ref(v, half, r) for v in a.astype(np.float64).tolist()], half)
    lo = K.float_to_bits([_pack_ref(v, half, r) for v in b.astype(np.float64).tolist()], half)
    K.check_float(got >> np.uint32(16), hi, half, [a, b], name + " upper")
    K.check_float(got & np.uint32(0xFFFF), lo, half, [a, b], name + " lower")


# ---------------------------------------------------------------- tf32 (sm_80): 10 mantissa bits, ties away

KS.add("cvt_rna_tf32", K.elementwise("cvt_rna_tf32", "cvt.rna.tf32.f32 %d, %a;", [("a", "f32")], [("d", "b32")]))


@pytest.mark.parametrize("name", K.cases(["cvt_rna_tf32"], XFAIL))
def test_cvt_rna_tf32(name, rng):
    """The result is an f32 bit pattern whose low 13 mantissa bits are zero, rounded to nearest with ties
    away from zero. Normal inputs below the tf32 maximum only (written after the H200 runs)."""
    x = K.ordinary_floats(rng, N, -60, 60).astype(np.float32)
    # exact ties at the 13th bit
    x[:32] = (x[:32].view(np.uint32) & np.uint32(0xFFFFE000) | np.uint32(0x1000)).view(np.float32)
    (got,) = K.run_elementwise(KS, name, [x], ["b32"], rng)
    want = np.array([K.round_fraction(Fraction(float(v)), "tf32", "rna") for v in x.tolist()], np.float32)
    K.check_equal(got, want.view(np.uint32), [x], "cvt.rna.tf32.f32")


# ---------------------------------------------------------------- .satfinite narrowing (PTX 8.1)

SATFINITE = {}
for dst in ("f16", "bf16"):
    name = K.kname("cvt_rn_satfinite", dst, "f32")
    KS.add(name, K.elementwise(name, f"cvt.rn.satfinite.{dst}.f32 %d, %a;", [("a", "f32")], [("d", dst)]))
    SATFINITE[name] = dst


@pytest.mark.parametrize("name", K.cases(sorted(SATFINITE), XFAIL))
def test_cvt_satfinite(name, rng):
    """Overflow and infinities clamp to the largest finite value of the sign; NaN stays NaN
    (written after the H200 runs)."""
    dst = SATFINITE[name]
    x = K.bits_to_float(K.rand_float_bits(rng, "f32", N), "f32").astype(np.float32)
    x[:4] = [np.inf, -np.inf, 1e6, -7e38 if dst == "f16" else -3.4e38]
    (got,) = K.run_elementwise(KS, name, [x], [dst], rng)
    big = float(K._max_finite(dst))
    want = []
    for v in x.astype(np.float64).tolist():
        if math.isnan(v) or v == 0:
            want.append(v)
            continue
        r = K.round_fraction(Fraction(v), dst, "rn") if math.isfinite(v) else v
        want.append(math.copysign(big, r) if math.isinf(r) else r)
    K.check_float(got, K.float_to_bits(want, dst), dst, [x], name)
