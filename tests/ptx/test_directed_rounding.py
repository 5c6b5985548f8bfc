"""f32 add/sub/mul/fma with .rz/.rm/.rp where the exact-in-f64 lowering (ptx/codegen/directed_rounding.py) is
easiest to get wrong: sums that cancel exactly (the sign of zero per rounding mode), results one ulp of f64
off an f32 midpoint or an f32 value (the sign of the sum's error decides), overflow past FLT_MAX, subnormal
results, infinities; random inputs around them. Exact references (ptxkit.exact_op), poisoned outputs, every
element checked by bits."""

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (the fixture)

KS = K.KernelSet()
CASES = {}
for _op, _arity in (("add", 2), ("sub", 2), ("mul", 2), ("fma", 3)):
    for _rnd in ("rz", "rm", "rp"):
        for _ftz in ("", "ftz"):
            _name = K.kname("dr", _op, _rnd, _ftz, "f32")
            _mods = f".{_rnd}" + (".ftz" if _ftz else "")
            _operands = ", ".join(["%d"] + [f"%{r}" for r in "abc"[:_arity]])
            KS.add(_name, K.elementwise(_name, f"{_op}{_mods}.f32 {_operands};",
                                        [(r, "f32") for r in "abc"[:_arity]], [("d", "f32")]))
            CASES[_name] = (_op, _arity, _rnd, bool(_ftz))

MAX = float(np.finfo(np.float32).max)
ULP1 = 2.0 ** -23
TINY = 2.0 ** -149


def _edge_inputs(rng, op, arity, n):
    """Columns of f32 operands: edge rows first, random ones after."""
    rows = []
    for _ in range(64):
        # a value with few significant bits, so its product is an exact f32 and can cancel exactly
        a = float(np.float32(rng.integers(1, 1 << 10) * 2.0 ** int(rng.integers(-30, 30))))
        b = float(np.float32(rng.integers(1, 1 << 10) * 2.0 ** int(rng.integers(-30, 30))))
        s = float(rng.choice([-1.0, 1.0]))
        if op == "fma":
            rows += [(a, s * b, -a * s * b), (-a, b, a * b), (a, b, 2.0 ** -60 * a * b),
                     (a, b, -2.0 ** -60 * a * b)]
        elif op == "add":
            rows += [(a, -a), (-a, a), (a, s * 2.0 ** -60 * a)]
        elif op == "sub":
            rows += [(a, a), (-a, -a), (a, s * 2.0 ** -60 * a)]
        else:
            rows += [(a, s * b), (s * TINY, 0.5), (s * TINY * 3, 0.5)]
    # f32 midpoints just missed, overflow, subnormals, zeros and infinities
    mid = (1 + ULP1, 2.0 ** -24 * (1 + ULP1), 1 + ULP1)
    rows += [mid, (-mid[0], mid[1], -mid[2]), (mid[0], -mid[1], mid[2])] if op == "fma" else []
    rows += [(MAX, 2.0, 0.0), (-MAX, 2.0, 0.0), (MAX, 1.0, MAX), (-MAX, 1.0, -MAX), (MAX, 1.0, 2.0 ** 103),
             (TINY, 0.5, 0.0), (-TINY, 0.5, 0.0), (TINY, 0.5, TINY), (0.0, -1.0, 0.0), (-0.0, 1.0, -0.0),
             (0.0, 1.0, -0.0), (np.inf, 1.0, -MAX), (-np.inf, 2.0, MAX), (np.inf, 0.0, 1.0), (np.nan, 1.0, 1.0),
             (2.0 ** 100, 2.0 ** -100, -1.0), (1.0, 2.0 ** -30, 1.0), (-1.0, 2.0 ** -30, -1.0)]
    cols = [np.array([r[k] for r in rows], dtype=np.float32) for k in range(arity)]
    extra = n - len(rows)
    rand = K.cross_specials(rng, "f32", arity, extra)
    return [np.concatenate([c, r.view(np.float32)]) for c, r in zip(cols, rand)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_directed(name, rng):
    op, arity, rnd, ftz = CASES[name]
    ins = _edge_inputs(rng, op, arity, 2048)
    (got,) = K.run_elementwise(KS, name, ins, ["f32"], rng)
    with np.errstate(invalid="ignore"):         # NaN operands
        cols = [K.ftz(x, "f32") if ftz else x.astype(np.float64) for x in ins]
        want = [K.exact_op(op, list(v), "f32", rnd, ftz=ftz) for v in zip(*[c.tolist() for c in cols])]
        first, second = K.split_either(want)
    K.check_float(got, K.float_to_bits(first, "f32"), "f32", ins, name, alt=K.float_to_bits(second, "f32"))
