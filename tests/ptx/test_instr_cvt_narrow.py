"""cvt to and from the narrow float pairs (.e4m3x2/.e5m2x2 from .f32 pairs and .f16x2, .e2m3x2/.e3m2x2/
.e2m1x2 from .f32 pairs, and each back to .f16x2), with .relu; cvt.pack.sat's integer packing (u16/s16, and
u8/s8/u4/s4/u2/s2 with the c operand); and .f32x2 add/sub/mul/fma in every rounding mode with .ftz/.sat.
The references are exact: every code of a format enumerated with its value, nearest (ties to even code),
clamped to the largest finite value, NaN to the format's NaN or (fp6/fp4) to its largest positive code, as
NVIDIA's cuda_fp8/fp6/fp4.hpp conversions define. Fresh random inputs, poisoned outputs, every element.
The fp8 and pack kernels target sm_89 so PTXKIT_BACKEND=cuda runs them on an H200."""

from fractions import Fraction

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

N = 4096
# (exponent bits, mantissa bits, bias, NaN code or None, has infinities, bits per packed lane)
FMT = {"e4m3": (4, 3, 7, 0x7F, False, 8), "e5m2": (5, 2, 15, 0x7F, True, 8), "e2m3": (2, 3, 1, None, False, 8),
       "e3m2": (3, 2, 3, None, False, 8), "e2m1": (2, 1, 1, None, False, 4)}


def code_values(fmt):
    """float64 value of each non-negative code (NaN for NaN/inf codes of fp8)."""
    e, m, bias, nan, has_inf, _ = FMT[fmt]
    vals = []
    for c in range(1 << (e + m)):
        ex, man = c >> m, c & ((1 << m) - 1)
        if fmt == "e4m3" and c == 0x7F or has_inf and ex == (1 << e) - 1:
            vals.append(np.nan)
            continue
        sig = Fraction(man, 1 << m) + (1 if ex else 0)
        vals.append(float(sig * Fraction(2) ** ((ex if ex else 1) - bias)))
    return np.array(vals)


def encode_ref(fmt, x, relu):
    """Codes (sign included) of float64 values x."""
    e, m, bias, nan, _, _ = FMT[fmt]
    vals = code_values(fmt)
    finite = np.where(np.isnan(vals), np.inf, vals)
    maxcode = int(np.nanargmax(np.where(np.isnan(vals), -1, vals)))
    x = np.where(relu & (x <= 0), 0.0, x) if relu else x
    a = np.minimum(np.abs(x), vals[maxcode])
    d = np.abs(a[:, None] - finite[None, :])
    best = d.min(axis=1)
    cand = d == best[:, None]
    codes = np.arange(len(vals))
    # nearest; on a tie the even code
    even = cand & (codes % 2 == 0)[None, :]
    pick = np.where(even.any(axis=1), even.argmax(axis=1), cand.argmax(axis=1))
    sign = (np.signbit(x) & ~np.isnan(x)).astype(np.int64) << (e + m)
    out = pick | sign
    return np.where(np.isnan(x), nan if nan is not None else maxcode, out)


def decode_ref(fmt, codes, relu):
    """f16 bit patterns of codes."""
    e, m, _, _, has_inf, _ = FMT[fmt]
    vals = code_values(fmt)
    mag = codes & ((1 << (e + m)) - 1)
    neg = (codes >> (e + m)) & 1
    v = vals[mag]
    v = np.where(neg == 1, -v, v)
    if has_inf:
        top = (mag >> m) == (1 << e) - 1
        v = np.where(top & ((mag & ((1 << m) - 1)) == 0), np.where(neg == 1, -np.inf, np.inf), v)
    if relu:
        v = np.where(v <= 0, 0.0, v)
    bits = v.astype(np.float16).view(np.uint16)
    return np.where(np.isnan(v), np.uint16(0x7FFF), bits)


def inputs(rng, fmt, n):
    """float32 values: codes' values, exact midpoints, nudges by one f32 ulp, tiny and huge, specials."""
    vals = code_values(fmt)
    fin = vals[~np.isnan(vals)]
    pick = rng.choice(fin, n)
    mids = (pick + rng.choice(fin, n)) / 2
    nxt = np.sort(fin)
    idx = rng.integers(0, len(nxt) - 1, n)
    ties = (nxt[idx] + nxt[idx + 1]) / 2
    x = np.select([rng.random(n) < p for p in (0.2, 0.35, 0.5)], [pick, mids, ties],
                  rng.uniform(-1, 1, n) * np.exp2(rng.integers(-12, 18, n)))
    x = x.astype(np.float32)
    nudge = rng.random(n) < 0.3
    x[nudge] = np.nextafter(x[nudge], np.where(rng.random(nudge.sum()) < 0.5, np.inf, -np.inf).astype(np.float32))
    x *= rng.choice(np.array([-1, 1], np.float32), n)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-30, -1e-30, 3e38, -3e38,
                   fin.max(), -fin.max(), fin.max() * 1.0625, fin[fin > 0].min() / 2], dtype=np.float32)
    pos = rng.choice(n, len(sp), replace=False)
    x[pos] = sp
    return x


def module(kernels, target):
    return f".version 8.7\n.target {target}\n.address_size 64\n" + "\n".join(kernels)


F8_TARGET, F6_TARGET = "sm_89", "sm_100a"


def _encode_kernels(fmt, relu):
    lane = FMT[fmt][5]
    out = "b16" if lane == 8 else "u8"
    r = ".relu" if relu else ""
    name = K.kname("enc", fmt, "relu" if relu else "")
    body = (f"cvt.rn.satfinite{r}.{fmt}x2.f32 %d, %a, %b;" if lane == 8 else
            f".reg .b8 %q;\ncvt.rn.satfinite{r}.{fmt}x2.f32 %q, %a, %b;\ncvt.u16.u8 %d, %q;")
    return name, K.elementwise(name, body, [("a", "f32"), ("b", "f32")], [("d", "u16")])


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("fmt", list(FMT))
def test_encode_pairs_from_f32(fmt, relu, rng):
    name, text = _encode_kernels(fmt, relu)
    k = K.compile_text(module([text], F8_TARGET if fmt in ("e4m3", "e5m2") else F6_TARGET)).kernel(name)
    a, b = inputs(rng, fmt, N), inputs(rng, fmt, N)
    out = K.poison((N,), np.uint16, rng)
    K.launch(k, (N // 128,), (128,), [a, b, out, N])
    lane = FMT[fmt][5]
    want = (encode_ref(fmt, a.astype(np.float64), relu) << lane) | encode_ref(fmt, b.astype(np.float64), relu)
    bad = np.nonzero(out != want)[0]
    assert not len(bad), [(float(a[i]), float(b[i]), hex(out[i]), hex(want[i])) for i in bad[:8]]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_encode_fp8_pairs_from_f16x2(fmt, relu, rng):
    r = ".relu" if relu else ""
    name = K.kname("enc16", fmt, "relu" if relu else "")
    text = K.elementwise(name, f"cvt.rn.satfinite{r}.{fmt}x2.f16x2 %d, %a;", [("a", "b32")], [("d", "u16")])
    k = K.compile_text(module([text], F8_TARGET)).kernel(name)
    h = inputs(rng, fmt, 2 * N).astype(np.float16)
    h[rng.choice(2 * N, 40, replace=False)] = K.rand_floats(rng, "f16", 40)
    packed = h.view(np.uint16).astype(np.uint32)
    a = (packed[0::2] << 16) | packed[1::2]
    out = K.poison((N,), np.uint16, rng)
    K.launch(k, (N // 128,), (128,), [a, out, N])
    hi, lo = h[0::2].astype(np.float64), h[1::2].astype(np.float64)
    want = (encode_ref(fmt, hi, relu) << 8) | encode_ref(fmt, lo, relu)
    bad = np.nonzero(out != want)[0]
    assert not len(bad), [(float(hi[i]), float(lo[i]), hex(out[i]), hex(want[i])) for i in bad[:8]]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("fmt", list(FMT))
def test_decode_pairs_to_f16x2(fmt, relu, rng):
    lane = FMT[fmt][5]
    r = ".relu" if relu else ""
    name = K.kname("dec", fmt, "relu" if relu else "")
    src = "b16" if lane == 8 else "b8"
    body = (f"cvt.rn{r}.f16x2.{fmt}x2 %d, %a;" if lane == 8 else
            f".reg .b8 %q;\ncvt.u8.u16 %q, %a;\ncvt.rn{r}.f16x2.{fmt}x2 %d, %q;")
    text = K.elementwise(name, body, [("a", "u16")], [("d", "u32")])
    k = K.compile_text(module([text], F8_TARGET if fmt in ("e4m3", "e5m2") else F6_TARGET)).kernel(name)
    width = 1 + FMT[fmt][0] + FMT[fmt][1]
    lo, hi = rng.integers(0, 1 << width, N), rng.integers(0, 1 << width, N)
    lo[:1 << width] = np.arange(1 << width)
    noise = 0 if lane == 4 else rng.integers(0, 1 << 16, N) & 0     # fp6: the 2 bits above each value are 0
    a = ((hi << lane) | lo | noise).astype(np.uint16)
    if lane == 4:
        a |= (rng.integers(0, 256, N).astype(np.uint16) << 8)      # a .b8 source: the register's upper bits
    out = K.poison((N,), np.uint32, rng)
    K.launch(k, (N // 128,), (128,), [a, out, N])
    want = (decode_ref(fmt, hi, relu).astype(np.uint32) << 16) | decode_ref(fmt, lo, relu)
    bad = np.nonzero(out != want)[0]
    assert not len(bad), [(hex(a[i]), hex(out[i]), hex(want[i])) for i in bad[:8]]


PACK = {"u16": 16, "s16": 16, "u8": 8, "s8": 8, "u4": 4, "s4": 4, "u2": 2, "s2": 2}


@pytest.mark.parametrize("conv", list(PACK))
def test_cvt_pack_sat(conv, rng):
    w = PACK[conv]
    name = K.kname("pack", conv)
    if w == 16:
        text = K.elementwise(name, f"cvt.pack.sat.{conv}.s32 %d, %a, %b;", [("a", "s32"), ("b", "s32")],
                             [("d", "u32")])
    else:
        text = K.elementwise(name, f"cvt.pack.sat.{conv}.s32.b32 %d, %a, %b, %c;",
                             [("a", "s32"), ("b", "s32"), ("c", "b32")], [("d", "u32")])
    k = K.compile_text(module([text], "sm_89")).kernel(name)
    a, b = (K.rand_ints(rng, "s32", N) for _ in range(2))
    small = rng.random(N) < 0.5
    a[small] = rng.integers(-(1 << w), 1 << w, small.sum())
    b[~small] = rng.integers(-(1 << w), 1 << w, (~small).sum())
    c = K.rand_ints(rng, "b32", N)
    out = K.poison((N,), np.uint32, rng)
    K.launch(k, (N // 128,), (128,), [a, b, out, N] if w == 16 else [a, b, c, out, N])
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if conv[0] == "s" else (0, (1 << w) - 1)
    sat = lambda v: np.clip(v.astype(np.int64), lo, hi) & ((1 << w) - 1)  # noqa: E731
    want = (sat(a) << w) | sat(b)
    if w < 16:
        want |= c.astype(np.int64) << (2 * w)
    want = (want & 0xFFFFFFFF).astype(np.uint32)
    bad = np.nonzero(out != want)[0]
    assert not len(bad), [(int(a[i]), int(b[i]), hex(c[i]), hex(out[i]), hex(want[i])) for i in bad[:8]]


RND = ("rn", "rz", "rm", "rp")


def _round32(exact: Fraction, rnd: str) -> np.float32:
    """The f32 of an exact rational in direction rnd (nearest: ties to an even significand)."""
    x0 = np.float32(float(exact))
    cands = [x0, np.nextafter(x0, np.float32(np.inf)), np.nextafter(x0, np.float32(-np.inf))]
    cands = [c for c in cands if np.isfinite(c)]
    if rnd == "rn":
        def key(c):
            return (abs(Fraction(float(c)) - exact), int(np.float32(c).view(np.uint32)) & 1)
        return min(cands, key=key)
    below = max((c for c in cands if Fraction(float(c)) <= exact), key=float)
    above = min((c for c in cands if Fraction(float(c)) >= exact), key=float)
    if rnd == "rz":
        return below if exact >= 0 else above
    return below if rnd == "rm" else above


@pytest.mark.parametrize("rnd", RND)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma"])
def test_f32x2_lanewise(op, rnd, rng):
    """Each f32 lane as the scalar instruction: the exact result rounded once in the mode."""
    name = K.kname("x2", op, rnd)
    ins = [("a", "b64"), ("b", "b64")] + ([("c", "b64")] if op == "fma" else [])
    operands = ", ".join(f"%{r}" for r, _ in ins)
    text = K.elementwise(name, f"{op}.{rnd}.f32x2 %d, {operands};", ins, [("d", "b64")])
    k = K.compile_text(module([text], "sm_100")).kernel(name)
    n = 512
    vals = [K.ordinary_floats(rng, 2 * n, -20, 20).astype(np.float32) for _ in ins]
    out = K.poison((n,), np.uint64, rng)
    K.launch(k, (n // 128,), (128,), [*(v.view(np.uint64) for v in vals), out, n])
    got = out.view(np.float32)
    fr = [[Fraction(float(x)) for x in v] for v in vals]
    exact = {"add": lambda i: fr[0][i] + fr[1][i], "sub": lambda i: fr[0][i] - fr[1][i],
             "mul": lambda i: fr[0][i] * fr[1][i], "fma": lambda i: fr[0][i] * fr[1][i] + fr[2][i]}[op]
    bad = [(i, float(got[i]), float(_round32(exact(i), rnd))) for i in range(2 * n)
           if got.view(np.uint32)[i] != _round32(exact(i), rnd).view(np.uint32)]
    assert not bad, bad[:8]
