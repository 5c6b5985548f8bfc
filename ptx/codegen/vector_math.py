"""exp2, log2, sin, cos and tanh of f64 values (the f32 and f16 arguments of ex2/lg2/sin/cos/tanh.approx) as
straight-line IR (selects, no branches or calls), so a thread loop computing them vectorises: a libm call per
lane does not. Accurate to a few f64 ulps, which leaves the f32 result as nearly correctly rounded as libm's
(sin and cos only for |x| below 2^25 pi/2: see _reduce)."""

from __future__ import annotations

import math
import struct
from fractions import Fraction


def _hex(v):
    return "0x" + struct.pack(">d", v).hex().upper()


# 2^f = e^(f ln 2) for |f| <= 1/2: the Taylor series to degree 13 (truncation below 2e-17 relative)
_EXP2 = [_hex(math.log(2) ** k / math.factorial(k)) for k in range(14)]
# ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716 for m in [sqrt(1/2), sqrt(2)): 2 s (1 + z/3 + ...)
_ATANH = [_hex(1 / (2 * k + 1)) for k in range(10)]
_INV_LN2 = _hex(1 / math.log(2))
_SQRT2 = _hex(math.sqrt(2))

# pi to 192 bits (its hexadecimal digits), from which pi/2 is cut into Cody-Waite parts: three of 28 bits at
# fixed places (2^0..2^-27, 2^-28..2^-55, 2^-56..2^-83), so q * part is exact for an integer |q| <= 2^25,
# and the rest rounded to a double: ~136 bits of pi/2 in all
_PI = Fraction(int("3243F6A8885A308D313198A2E03707344A4093822299F31D0", 16), 16 ** 48)


def _pio2_parts():
    rest, parts = _PI / 2, []
    for last in (27, 55, 83):
        part = Fraction(math.floor(rest * 2 ** last), 2 ** last)
        parts.append(float(part))       # 28 bits: exact
        rest -= part
    return [_hex(v) for v in parts + [float(rest)]]


_PIO2 = _pio2_parts()
_TWO_OVER_PI = _hex(float(2 / _PI))
_PIO4, _MPIO4 = _hex(math.pi / 4), _hex(-math.pi / 4)
# |q| above this, q * part is no longer exact (see _reduce)
_REDUCE_LIMIT = _hex(2.0 ** 25)
# sin r = r + r z (-1/3! + z/5! - ...), cos r = 1 - z/2 + z^2 (1/4! - z/6! + ...), z = r^2, |r| <= pi/4:
# Taylor to degree 19/18, truncation below 2^-60 relative
_SIN = [_hex((-1) ** k / math.factorial(2 * k + 1)) for k in range(1, 10)]
_COS = [_hex((-1) ** k / math.factorial(2 * k)) for k in range(2, 10)]


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


def _reduce(em, x):
    """(r, quadrant): x = q pi/2 + r with |r| <= pi/4 (a hair more where q's rounding picked the far
    side), quadrant = q mod 4 as an i32 (0 for NaN and inf, whose r is NaN). Cody-Waite: x - q * part over
    the parts of pi/2, each product exact for |q| <= 2^25 (|x| up to 5e7). Beyond, the first product rounds:
    r is off by ~|x| 2^-53 (6e-8 at |x| = 1e9), then meaningless, so there it is clamped to [-pi/4, pi/4],
    which keeps sin/cos in [-1, 1]. The GPU's own answer out there is off by ~|x| 2^-22 anyway; a
    Payne-Hanek reduction would cost more than the whole of the rest."""
    f = em.f
    q = em.call("llvm.rint.f64", "double", [("double", f.op(f"fmul double {x}, {_TWO_OVER_PI}"))])
    r = x
    for part in _PIO2:
        r = f.op(f"fsub double {r}, {f.op(f'fmul double {q}, {part}')}")
    far = f.op(f"fcmp ogt double {em.call('llvm.fabs.f64', 'double', [('double', q)])}, {_REDUCE_LIMIT}")
    rc = f.op(f"select i1 {f.op(f'fcmp ogt double {r}, {_PIO4}')}, double {_PIO4}, double {r}")
    rc = f.op(f"select i1 {f.op(f'fcmp olt double {rc}, {_MPIO4}')}, double {_MPIO4}, double {rc}")
    r = f.op(f"select i1 {far}, double {rc}, double {r}")
    # q mod 4 in [-2, 2], exact for any q (q * 0.25 and its rint are exact); NaN (from inf, NaN) -> 0
    q4 = em.call("llvm.rint.f64", "double", [("double", f.op(f"fmul double {q}, 0.25"))])
    qm = f.op(f"fsub double {q}, {f.op(f'fmul double {q4}, 4.0')}")
    qm = f.op(f"select i1 {f.op(f'fcmp uno double {qm}, 0.0')}, double 0.0, double {qm}")
    return r, f.op(f"fptosi double {qm} to i32")


def _sin_quadrant(em, x, shift):
    """sin(x + shift pi/2): sin or +-cos of the reduced argument as the quadrant says."""
    f = em.f
    r, quad = _reduce(em, x)
    quad = f.op(f"add i32 {quad}, {shift}")
    z = f.op(f"fmul double {r}, {r}")
    rz = f.op(f"fmul double {r}, {z}")
    s = f.op(f"fadd double {r}, {f.op(f'fmul double {rz}, {_horner(f, z, _SIN)}')}")
    # 1 - z/2 loses the low bits of z/2: w + ((1 - w) - z/2) gets them back (fdlibm's __kernel_cos)
    hz = f.op(f"fmul double {z}, 0.5")
    w = f.op(f"fsub double 1.0, {hz}")
    tail = f.op(f"fmul double {f.op(f'fmul double {z}, {z}')}, {_horner(f, z, _COS)}")
    lost = f.op(f"fsub double {f.op(f'fsub double 1.0, {w}')}, {hz}")
    c = f.op(f"fadd double {w}, {f.op(f'fadd double {lost}, {tail}')}")
    odd = f.op(f"trunc i32 {quad} to i1")
    neg = f.op(f"icmp ne i32 {f.op(f'and i32 {quad}, 2')}, 0")
    v = f.op(f"select i1 {odd}, double {c}, double {s}")
    return f.op(f"select i1 {neg}, double {f.op(f'fneg double {v}')}, double {v}")


def sin(em, x):
    """sin(x) for x a double holding an f32 (or narrower) value: NaN for NaN and inf, sin(-0) = -0."""
    f = em.f
    v = _sin_quadrant(em, x, 0)
    # at x = -0, r = -0 - q * part = +0: the zero keeps x's sign
    return f.op(f"select i1 {f.op(f'fcmp oeq double {x}, 0.0')}, double {x}, double {v}")


def cos(em, x):
    """cos(x) for x a double holding an f32 (or narrower) value: NaN for NaN and inf."""
    return _sin_quadrant(em, x, 1)


def tanh(em, x):
    """tanh(x) for x a double holding an f32 (or narrower) value: +-1 at +-inf, -0 at -0, NaN for NaN.
    tanh|x| = E / (E + 2) with E = e^(2|x|) - 1 computed without cancellation (so small x keep their
    relative accuracy), |x| clamped to 22 where tanh is 1 in f64, then x's sign."""
    f = em.f
    a = em.call("llvm.fabs.f64", "double", [("double", x)])
    a = f.op(f"select i1 {f.op(f'fcmp ogt double {a}, 22.0')}, double 22.0, double {a}")
    # e^(2a) = 2^y, y = n + frac, |frac| <= 1/2: 2^frac - 1 = frac (ln2 + ...) from exp2's series, less its 1
    y = f.op(f"fmul double {a}, {_hex(2 / math.log(2))}")
    n = em.call("llvm.rint.f64", "double", [("double", y)])
    frac = f.op(f"fsub double {y}, {n}")
    pm1 = f.op(f"fmul double {frac}, {_horner(f, frac, _EXP2[1:])}")
    nan = f.op(f"fcmp uno double {n}, 0.0")
    ni = f.op(f"fptosi double {f.op(f'select i1 {nan}, double 0.0, double {n}')} to i64")
    bits = f.op(f"shl i64 {f.op(f'add i64 {ni}, 1023')}, 52")
    scale = f.op(f"bitcast i64 {bits} to double")
    # E = 2^n (1 + pm1) - 1 = 2^n pm1 + (2^n - 1): exact 2^n - 1, and no cancellation for n >= 0
    e = f.op(f"fadd double {f.op(f'fmul double {scale}, {pm1}')}, {f.op(f'fsub double {scale}, 1.0')}")
    t = f.op(f"fdiv double {e}, {f.op(f'fadd double {e}, 2.0')}")
    return em.call("llvm.copysign.f64", "double", [("double", t), ("double", x)])
