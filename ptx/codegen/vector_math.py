"""exp2 and log2 of f64 values (the f32 and f16 arguments of ex2/lg2.approx) as straight-line IR, so a thread
loop computing them vectorises: a libm call per lane does not. Accurate to a few f64 ulps, which leaves the
f32 result as nearly correctly rounded as libm's."""

from __future__ import annotations

import math
import struct


def _hex(v):
    return "0x" + struct.pack(">d", v).hex().upper()


# 2^f = e^(f ln 2) for |f| <= 1/2: the Taylor series to degree 13 (truncation below 2e-17 relative)
_EXP2 = [_hex(math.log(2) ** k / math.factorial(k)) for k in range(14)]
# ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716 for m in [sqrt(1/2), sqrt(2)): 2 s (1 + z/3 + ...)
_ATANH = [_hex(1 / (2 * k + 1)) for k in range(10)]
_INV_LN2 = _hex(1 / math.log(2))
_SQRT2 = _hex(math.sqrt(2))


def _horner(f, z, coeffs):
    acc = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        acc = f.op(f"fadd double {f.op(f'fmul double {acc}, {z}')}, {c}")
    return acc


def exp2(em, x):
    """2^x for x a double holding an f32 (or narrower) value: NaN stays NaN, overflow is inf and underflow 0
    after rounding to f32 (|x| is clamped to 200, beyond either limit)."""
    f = em.f
    hi = f.op(f"fcmp ogt double {x}, 200.0")
    lo = f.op(f"fcmp olt double {x}, -200.0")
    xc = f.op(f"select i1 {hi}, double 200.0, double {f.op(f'select i1 {lo}, double -200.0, double {x}')}")
    n = em.call("llvm.rint.f64", "double", [("double", xc)])
    frac = f.op(f"fsub double {xc}, {n}")
    p = _horner(f, frac, _EXP2)
    nan = f.op(f"fcmp uno double {x}, 0.0")
    ni = f.op(f"fptosi double {f.op(f'select i1 {nan}, double 0.0, double {n}')} to i64")
    bits = f.op(f"shl i64 {f.op(f'add i64 {ni}, 1023')}, 52")
    return f.op(f"fmul double {p}, {f.op(f'bitcast i64 {bits} to double')}")


def log2(em, x):
    """log2(x) for x a double holding an f32 (or narrower) value: NaN for NaN and negative x, -inf at zero,
    inf at inf."""
    f = em.f
    b = f.op(f"bitcast double {x} to i64")
    e = f.op(f"sub i64 {f.op(f'lshr i64 {b}, 52')}, 1023")
    mb = f.op(f"or i64 {f.op(f'and i64 {b}, 4503599627370495')}, 4607182418800017408")
    m = f.op(f"bitcast i64 {mb} to double")
    big = f.op(f"fcmp ogt double {m}, {_SQRT2}")
    m = f.op(f"select i1 {big}, double {f.op(f'fmul double {m}, 0.5')}, double {m}")
    e = f.op(f"select i1 {big}, i64 {f.op(f'add i64 {e}, 1')}, i64 {e}")
    s = f.op(f"fdiv double {f.op(f'fsub double {m}, 1.0')}, {f.op(f'fadd double {m}, 1.0')}")
    z = f.op(f"fmul double {s}, {s}")
    ln = f.op(f"fmul double {f.op(f'fmul double {s}, 2.0')}, {_horner(f, z, _ATANH)}")
    r = f.op(f"fadd double {f.op(f'sitofp i64 {e} to double')}, {f.op(f'fmul double {ln}, {_INV_LN2}')}")
    bad = f.op(f"fcmp ult double {x}, 0.0")            # negative or NaN
    r = f.op(f"select i1 {f.op(f'fcmp oeq double {x}, 0.0')}, double 0xFFF0000000000000, double {r}")
    r = f.op(f"select i1 {f.op(f'fcmp oeq double {x}, 0x7FF0000000000000')}, double 0x7FF0000000000000, double {r}")
    return f.op(f"select i1 {bad}, double 0x7FF8000000000000, double {r}")
