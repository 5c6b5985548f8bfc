"""f32/f64 arithmetic: add/sub/mul/fma/mad/div/rcp/sqrt with every rounding mode, .ftz and .sat, the .approx
and .full forms within their error bounds, min/max (NaN and signed-zero rules), abs/neg/copysign, testp.
References are exact: rationals rounded to the format in the requested direction.
References checked on an NVIDIA H200 (driver 580, PTX JIT for sm_86), 2026-11-29: every test here passed
with PTXKIT_BACKEND=cuda (see ptxkit.py); the corrections that hardware forced are noted where they apply.
Written after the hardware runs, so not run there: test_float_immediates, test_mul_add_contraction and the
f32 fma double-rounding inputs.
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
EXACT = {}   # name -> (arity, tn, op, mode, ftz, sat)
RNDS = ["rn", "rz", "rm", "rp"]


def _mods(*m):
    return "".join(f".{x}" for x in m if x)


def _add(name, text, ins, outs, temps=()):
    KS.add(name, K.elementwise(name, text, ins, outs, temps=temps))


def exact_case(op, tn, rnd, ftz=False, sat=False, arity=2, spelled=None):
    opname = spelled or op
    mods = _mods(rnd, "ftz" if ftz else "", "sat" if sat else "")
    name = K.kname(opname, rnd or "dflt", "ftz" if ftz else "", "sat" if sat else "", tn)
    operands = ", ".join(["%d"] + [f"%{r}" for r in "abc"[:arity]])
    _add(name, f"{opname}{mods}.{tn} {operands};", [(r, tn) for r in "abc"[:arity]], [("d", tn)])
    EXACT[name] = (arity, tn, op, rnd or "rn", ftz, sat)


for tn in ("f32", "f64"):
    for op in ("add", "sub", "mul"):
        for rnd in ["", *RNDS]:
            exact_case(op, tn, rnd)
            if tn == "f32":
                exact_case(op, tn, rnd, ftz=True)
        if tn == "f32":
            exact_case(op, tn, "", sat=True)
            exact_case(op, tn, "rz", ftz=True, sat=True)
    for rnd in RNDS:
        exact_case("fma", tn, rnd, arity=3)
        exact_case("div", tn, rnd)
        exact_case("rcp", tn, rnd, arity=1)
        exact_case("sqrt", tn, rnd, arity=1)
        if tn == "f32":
            exact_case("fma", tn, rnd, ftz=True, arity=3)
            exact_case("div", tn, rnd, ftz=True)
            exact_case("rcp", tn, rnd, ftz=True, arity=1)
            exact_case("sqrt", tn, rnd, ftz=True, arity=1)
    exact_case("fma", tn, "rn", arity=3, spelled="mad")
    exact_case("fma", tn, "rz", arity=3, spelled="mad")
exact_case("fma", "f32", "rn", ftz=True, sat=True, arity=3)
exact_case("fma", "f32", "rn", sat=True, arity=3, spelled="mad")


exact_ref = K.exact_op


def _inputs(rng, arity, tn, n=N):
    bits = K.cross_specials(rng, tn, arity, n)
    return [b.view(np.float32 if tn == "f32" else np.float64) for b in bits]


@pytest.mark.parametrize("name", K.cases(sorted(EXACT), XFAIL))
def test_float_exact(name, rng):
    arity, tn, op, mode, ftz, sat = EXACT[name]
    ins = _inputs(rng, arity, tn)
    if op in ("div", "rcp", "sqrt") and not ftz:
        # denormal operands/results are where exact division and sqrt are easiest to get wrong
        ins[0][-16:] = ins[0][-16:] * np.asarray(2.0 ** -140 if tn == "f32" else 2.0 ** -1060, ins[0].dtype)
    if op == "fma" and tn == "f32":
        # a*b+c just off a midpoint of f32 by less than an f64 ulp: an fma done in f64 and then rounded
        # to f32 would round twice (and .rz/.rm/.rp would see the f64 rounding instead of the exact value)
        for k, (sa, sc, d) in enumerate([(1, 1, -1), (1, 1, 1), (-1, 1, -1), (1, -1, 1), (-1, -1, -1)]):
            a, b, c = 1 + 2.0 ** -23, 2.0 ** -24 * (1 + d * 2.0 ** -23), 1 + 2.0 ** -23
            ins[0][-20 - k], ins[1][-20 - k], ins[2][-20 - k] = sa * a, sc * sa * b, sc * c
    (got,) = K.run_elementwise(KS, name, ins, [tn], rng)
    cols = [K.ftz(x, tn) if ftz else x.astype(np.float64) for x in ins]
    want = []
    for vals in zip(*[c.tolist() for c in cols]):
        r = exact_ref(op, list(vals), tn, mode, ftz=ftz)
        if sat:
            r = K.Either(*(_sat(x) for x in r)) if isinstance(r, K.Either) else _sat(r)
        want.append(r)
    first, second = K.split_either(want)
    K.check_float(got, K.float_to_bits(first, tn), tn, ins, name, alt=K.float_to_bits(second, tn))


def _sat(r):
    return 0.0 if (math.isnan(r) or r <= 0) else min(r, 1.0)


# ---------------------------------------------------------------- approximate division / reciprocal / roots

APPROX = {}  # name -> (arity, tn, exact fn on float64 arrays, tolerance kwargs)


def approx_case(text_op, tn, arity, fn, **tol):
    name = K.kname(text_op, tn)
    operands = ", ".join(["%d"] + [f"%{r}" for r in "ab"[:arity]])
    _add(name, f"{text_op}.{tn} {operands};", [(r, tn) for r in "ab"[:arity]], [("d", tn)])
    APPROX[name] = (arity, tn, fn, tol)


with np.errstate(all="ignore"):
    # PTX ISA error bounds: div.approx / div.full 2 ulp; rcp.approx.f32 1 ulp; sqrt.approx.f32 and
    # rsqrt.approx.f32 relative 2^-22.9 / 2^-23 class; the f64 approximations keep ~ 2^-22 relative
    for ftz in ("", ".ftz"):
        approx_case(f"div.approx{ftz}", "f32", 2, lambda a, b: a / b, ulps=2)
        approx_case(f"div.full{ftz}", "f32", 2, lambda a, b: a / b, ulps=2)
        approx_case(f"rcp.approx{ftz}", "f32", 1, lambda a: 1 / a, ulps=1)
        approx_case(f"sqrt.approx{ftz}", "f32", 1, np.sqrt, rel_err=2.0 ** -22)
        approx_case(f"rsqrt.approx{ftz}", "f32", 1, lambda a: 1 / np.sqrt(a), rel_err=2.0 ** -22)
    # rcp.approx.ftz.f64: H200 reaches a relative error of 2^-20.1 (it refines a ~20-bit estimate only once)
    approx_case("rcp.approx.ftz", "f64", 1, lambda a: 1 / a, rel_err=2.0 ** -19)
    approx_case("rsqrt.approx", "f64", 1, lambda a: 1 / np.sqrt(a), rel_err=2.0 ** -22)


@pytest.mark.parametrize("name", K.cases(sorted(APPROX), XFAIL))
def test_float_approx(name, rng):
    arity, tn, fn, tol = APPROX[name]
    ftz = "_ftz" in name
    dt = np.float32 if tn == "f32" else np.float64
    ins = [K.rand_float_bits(rng, tn, N, specials=False).view(dt) for _ in range(arity)]
    if name.startswith(("sqrt", "rsqrt")):
        ins[0] = np.abs(ins[0])
    if name.startswith("div_approx"):
        # the ISA bounds div.approx only for |b| in [2^-126, 2^126]
        b = ins[1]
        with np.errstate(invalid="ignore"):
            out = ~((np.abs(b) >= 2.0 ** -126) & (np.abs(b) <= 2.0 ** 126))
        b[out] = K.ordinary_floats(rng, int(out.sum())).astype(dt)
    # exact special cases every approximation must honour
    specials = {1: [(0.0,), (-0.0,), (np.inf,), (1.0,), (4.0,)], 2: [(1.0, np.inf), (np.inf, 2.0), (0.0, 3.0),
                                                                   (6.0, 3.0), (-8.0, 2.0)]}[arity]
    if name.startswith("rsqrt"):
        specials = [(np.inf,), (1.0,), (4.0,), (0.25,)]
    for k, vals in enumerate(specials):
        for j, v in enumerate(vals):
            ins[j][k] = v
    (got,) = K.run_elementwise(KS, name, ins, [tn], rng)
    xs = [K.ftz(x, tn) if ftz else x.astype(np.float64) for x in ins]
    with np.errstate(all="ignore"):
        exact = fn(*xs)
        g = got.astype(np.float64)
        # past the format's range infinity is the right answer; with .ftz so is zero below the normal range
        over = (np.abs(exact) > np.finfo(dt).max) & np.isinf(g) & (np.sign(g) == np.sign(exact))
        under = ftz & (np.abs(exact) < np.finfo(dt).tiny) & (g == 0)
    exact = np.where(over | under, g, exact)
    K.check_close(got, exact, tn, ins, name, **tol)


# ---------------------------------------------------------------- min / max / abs / neg / copysign / testp

BITWISE = {}  # name -> (arity, tn, fn(list of floats) -> float, ftz)


def _min(a, b, nan_mode=False):
    if math.isnan(a) or math.isnan(b):
        if nan_mode or (math.isnan(a) and math.isnan(b)):
            return math.nan
        return b if math.isnan(a) else a
    if a == b == 0:
        return a if math.copysign(1, a) < 0 else b
    return min(a, b)


def _max(a, b, nan_mode=False):
    if math.isnan(a) or math.isnan(b):
        if nan_mode or (math.isnan(a) and math.isnan(b)):
            return math.nan
        return b if math.isnan(a) else a
    if a == b == 0:
        return a if math.copysign(1, a) > 0 else b
    return max(a, b)


for tn in ("f32", "f64"):
    ftzs = ("", "ftz") if tn == "f32" else ("",)
    for fz in ftzs:
        for op, fn in [("min", _min), ("max", _max)]:
            name = K.kname(op, fz, tn)
            _add(name, f"{op}{_mods(fz)}.{tn} %d, %a, %b;", [("a", tn), ("b", tn)], [("d", tn)])
            BITWISE[name] = (2, tn, fn, bool(fz))
        for op, fn in [("abs", lambda a: abs(a)), ("neg", lambda a: -a)]:
            name = K.kname(op, fz, tn)
            _add(name, f"{op}{_mods(fz)}.{tn} %d, %a;", [("a", tn)], [("d", tn)])
            BITWISE[name] = (1, tn, fn, bool(fz))
    name = K.kname("copysign", tn)
    _add(name, f"copysign.{tn} %d, %a, %b;", [("a", tn), ("b", tn)], [("d", tn)])
    BITWISE[name] = (2, tn, lambda a, b: math.copysign(b, math.copysign(1, a)), False)
for op, fn in [("min", _min), ("max", _max)]:
    name = f"{op}_NaN_f32"
    _add(name, f"{op}.NaN.f32 %d, %a, %b;", [("a", "f32"), ("b", "f32")], [("d", "f32")])
    BITWISE[name] = (2, "f32", lambda a, b, fn=fn: fn(a, b, nan_mode=True), False)


@pytest.mark.parametrize("name", K.cases(sorted(BITWISE), XFAIL))
def test_float_minmax_sign(name, rng):
    arity, tn, fn, fz = BITWISE[name]
    ins = _inputs(rng, arity, tn)
    (got,) = K.run_elementwise(KS, name, ins, [tn], rng)
    cols = [K.ftz(x, tn) if fz else x.astype(np.float64) for x in ins]
    want = [fn(*vals) for vals in zip(*[c.tolist() for c in cols])]
    K.check_float(got, K.float_to_bits(want, tn), tn, ins, name)


TESTP = {
    "finite": np.isfinite,
    "infinite": np.isinf,
    "number": lambda x: ~np.isnan(x),
    "notanumber": np.isnan,
    # H200: testp.normal is true for +-0 as well (not subnormal, not inf, not NaN)
    "normal": lambda x: np.isfinite(x) & ((np.abs(x) >= np.finfo(x.dtype).tiny) | (x == 0)),
    "subnormal": lambda x: (np.abs(x) < np.finfo(x.dtype).tiny) & (x != 0),
}
for tn in ("f32", "f64"):
    for what in TESTP:
        name = K.kname("testp", what, tn)
        _add(name, f"testp.{what}.{tn} %d, %a;", [("a", tn)], [("d", "pred")])


@pytest.mark.parametrize("tn", ["f32", "f64"])
@pytest.mark.parametrize("what", sorted(TESTP))
def test_testp(what, tn, rng):
    (x,) = _inputs(rng, 1, tn)
    (got,) = K.run_elementwise(KS, K.kname("testp", what, tn), [x], ["pred"], rng)
    with np.errstate(invalid="ignore"):
        want = TESTP[what](x).astype(np.uint8)
    K.check_equal(got, want, [x], f"testp.{what}.{tn}")


# ---------------------------------------------------------------- float immediates (hex and decimal forms)

IMM = {
    "imm_add_hex_f32": ("add.rn.f32 %d, %a, 0f3FC00000;", "f32", lambda a: a + 1.5),
    "imm_mul_hex_f64": ("mul.rn.f64 %d, %a, 0dC004000000000000;", "f64", lambda a: a * -2.5),
    "imm_fma_dec_f32": ("fma.rn.f32 %d, %a, 0.5, 0f40000000;", "f32", lambda a: a * 0.5 + 2.0),
    "imm_sub_dec_f64": ("sub.rn.f64 %d, 1.25, %a;", "f64", lambda a: 1.25 - a),
    "imm_min_neg_f32": ("min.f32 %d, %a, 0fBF800000;", "f32", lambda a: np.minimum(a, -1.0)),
}
for nm, (text, tn, _) in IMM.items():
    _add(nm, text, [("a", tn)], [("d", tn)])


@pytest.mark.parametrize("name", K.cases(sorted(IMM), XFAIL))
def test_float_immediates(name, rng):
    text, tn, fn = IMM[name]
    dt = np.float32 if tn == "f32" else np.float64
    a = K.ordinary_floats(rng, N).astype(dt)
    (got,) = K.run_elementwise(KS, name, [a], [tn], rng)
    want = np.asarray(fn(a.astype(dt)), dtype=dt)  # one rounding in the operand type, as PTX does
    K.check_float(got, want, tn, [a], name)


# ---------------------------------------------------------------- no contraction of mul.rn + add.rn

for tn in ("f32", "f64"):
    for mods in (".rn", ""):
        nm = K.kname("mul_add", mods or "plain", tn)
        _add(nm, f"mul{mods}.{tn} %t, %a, %b;\nadd{mods}.{tn} %d, %t, %c;", [("a", tn), ("b", tn), ("c", tn)],
             [("d", tn)], temps=[("t", tn)])


@pytest.mark.parametrize("tn", ["f32", "f64"])
@pytest.mark.parametrize("mods", [".rn", ""])
def test_mul_add_contraction(tn, mods, rng):
    """mul.rn then add.rn round twice: fusing them into an fma is not allowed. Without rounding
    modifiers PTX lets the compiler fuse, so there either result is right."""
    dt = np.float32 if tn == "f32" else np.float64
    a = K.ordinary_floats(rng, N).astype(dt)
    b = K.ordinary_floats(rng, N).astype(dt)
    # c close to -a*b, where one rounding and two roundings differ most
    c = (-(a.astype(np.float64) * b.astype(np.float64)) * (1 + rng.uniform(-1e-6, 1e-6, N))).astype(dt)
    (got,) = K.run_elementwise(KS, K.kname("mul_add", mods or "plain", tn), [a, b, c], [tn], rng)
    two = [K.round_fraction(Fraction(K.round_fraction(Fraction(float(x)) * Fraction(float(y)), tn, "rn"))
                            + Fraction(float(z)), tn, "rn") for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    fused = [K.round_fraction(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), tn, "rn")
             for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    assert sum(1 for u, v in zip(two, fused) if u != v) > N // 4, "inputs must tell fused from unfused"
    K.check_float(got, np.array(two, dt), tn, [a, b, c], f"mul{mods}+add{mods}",
                  alt=None if mods else np.array(fused, dt))
