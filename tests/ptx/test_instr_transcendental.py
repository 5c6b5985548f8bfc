"""The .approx transcendentals (sin, cos, ex2, lg2, tanh; with and without .ftz) within the PTX ISA's
stated error bounds, and their exact special values (inf, NaN, zeros)."""

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

N = 1024
KS = K.KernelSet()
PI = np.pi

# op -> (numpy exact function, input sampler, tolerance, exact specials [(input, output)])
OPS = {
    "sin": (np.sin, lambda rng: np.concatenate([rng.uniform(-PI, PI, N // 2), rng.uniform(-100 * PI, 100 * PI, N // 2)]),
            dict(abs_err=2.0 ** -20.5), [(np.inf, np.nan), (-np.inf, np.nan), (np.nan, np.nan), (0.0, 0.0)]),
    "cos": (np.cos, lambda rng: np.concatenate([rng.uniform(-PI, PI, N // 2), rng.uniform(-100 * PI, 100 * PI, N // 2)]),
            dict(abs_err=2.0 ** -20.5), [(np.inf, np.nan), (np.nan, np.nan), (0.0, 1.0)]),
    "ex2": (np.exp2, lambda rng: np.concatenate([rng.uniform(-125, 127.9, N // 2), rng.uniform(-3, 3, N // 2)]),
            dict(ulps=2), [(-np.inf, 0.0), (np.inf, np.inf), (np.nan, np.nan), (0.0, 1.0), (200.0, np.inf),
                           (-200.0, 0.0)]),
    "lg2": (np.log2, lambda rng: np.abs(K.rand_floats(rng, "f32", N, specials=False).astype(np.float64)),
            dict(abs_err=2.0 ** -22.6, ulps=1), [(0.0, -np.inf), (np.inf, np.inf), (-1.0, np.nan),
                                                   (np.nan, np.nan), (1.0, 0.0)]),
    "tanh": (np.tanh, lambda rng: np.concatenate([rng.uniform(-10, 10, N // 2), rng.uniform(-1, 1, N // 2)]),
             dict(rel_err=2.0 ** -10.987), [(np.inf, 1.0), (-np.inf, -1.0), (np.nan, np.nan), (0.0, 0.0)]),
}

for op in OPS:
    for fz in ("", ".ftz"):
        if op == "tanh" and fz:
            continue  # tanh.approx.f32 has no .ftz form
        name = K.kname(op, fz, "f32")
        KS.add(name, K.elementwise(name, f"{op}.approx{fz}.f32 %d, %a;", [("a", "f32")], [("d", "f32")]))


@pytest.mark.parametrize("op,fz", [(op, fz) for op in sorted(OPS) for fz in ("", ".ftz")
                                   if not (op == "tanh" and fz)])  # tanh.approx.f32 has no .ftz form
def test_transcendental(op, fz, rng):
    fn, sample, tol, specials = OPS[op]
    x = sample(rng).astype(np.float32)
    for k, (v, _) in enumerate(specials):
        x[k] = v
    (got,) = K.run_elementwise(KS, K.kname(op, fz, "f32"), [x], ["f32"], rng)
    xv = K.ftz(x, "f32") if fz else x.astype(np.float64)
    with np.errstate(all="ignore"):
        exact = fn(xv)
    for k, (_, w) in enumerate(specials):
        exact[k] = w
    if fz:
        # a result below the normal range may be flushed: accept zero there
        tiny = np.abs(exact) < 2.0 ** -126
        got = np.where(tiny & (got == 0), exact.astype(np.float32), got).astype(np.float32)
    K.check_close(got, exact, "f32", [x], f"{op}.approx{fz}.f32", **tol)


def test_ftz_flushes_denormal_input(rng):
    """ex2.approx.ftz of a denormal is ex2(0) = 1 exactly; lg2.approx.ftz of a denormal is -inf."""
    x = (K.rand_floats(rng, "f32", N, specials=False) * np.float32(2.0 ** -130)).astype(np.float32)
    x[x == 0] = np.float32(1e-40)
    (e,) = K.run_elementwise(KS, "ex2_ftz_f32", [x], ["f32"], rng)
    (lg,) = K.run_elementwise(KS, "lg2_ftz_f32", [x], ["f32"], rng)
    K.check_float(e, np.ones(N, np.float32), "f32", [x], "ex2.approx.ftz")
    K.check_float(lg, np.full(N, -np.inf, np.float32), "f32", [x], "lg2.approx.ftz")
