"""CuPy on NVIDIA's libraries through the shim: cupy.random (cuRAND), `@` (cuBLAS, served by the BLAS front),
cupy.fft (cuFFT), cupy.linalg.solve/cholesky/svd/eigh (cuSOLVER getrf/getrs, potrf, gesvd, gesvdjBatched, syevd), sparse
matrix-vector and matrix-matrix products (cuSPARSE SpMV, SpMM) and CUB sums, each on fresh random inputs
against numpy/scipy, every element checked. argv[1]: the seed."""

import sys

import numpy as np
import scipy.sparse as sp

import cupy as cp
import cupyx.scipy.sparse as csp

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
rng = np.random.default_rng(seed)
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


def attempt(name, fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - a library's error is this case's failure, reported
        check(name, False, f"{type(e).__name__}: {e}")


def random_uniform():
    x = cp.random.default_rng(seed).random(200_000).get()
    # the uniform distribution's mean and variance (1/12) within six standard errors of the estimates
    check("random_uniform", bool(x.min() >= 0 and x.max() < 1 and abs(x.mean() - 0.5) < 6 * (1 / 12 / x.size) ** 0.5
                                 and abs(x.var() - 1 / 12) < 6 * (1 / 180 / x.size) ** 0.5),
          f"mean {x.mean()}, var {x.var()}")
    y = cp.random.default_rng(seed).random(1000).get()
    check("random_reproducible", bool(np.array_equal(y, x[:1000])))


def matmul():
    for dt, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        m, k, n = (int(v) for v in rng.integers(20, 90, 3))
        a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
        got = (cp.asarray(a) @ cp.asarray(b)).get()
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = np.max(np.abs(got - ref) / (np.abs(a).astype(np.float64) @ np.abs(b)))
        check(f"matmul_{np.dtype(dt).name}", bool(err < tol), f"relative error {err}")


def fft():
    n = int(rng.integers(200, 1500))
    x = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    got, ref = cp.fft.fft(cp.asarray(x)).get(), np.fft.fft(x)
    check("fft_c2c", bool(np.allclose(got, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())))
    r = rng.standard_normal((16, n))
    got, ref = cp.fft.rfft(cp.asarray(r), axis=1).get(), np.fft.rfft(r, axis=1)
    check("fft_r2c_batched", bool(np.allclose(got, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())))


def solve():
    for dt, tol in ((np.float64, 1e-10), (np.float32, 1e-3)):
        n = int(rng.integers(30, 120))
        a = (rng.standard_normal((n, n)) + n * np.eye(n)).astype(dt)
        b = rng.standard_normal((n, 3)).astype(dt)
        got = cp.linalg.solve(cp.asarray(a), cp.asarray(b)).get()
        resid = np.max(np.abs(a.astype(np.float64) @ got - b)) / np.max(np.abs(b))
        check(f"linalg_solve_{np.dtype(dt).name}", bool(resid < tol), f"residual {resid}")


def factorizations():
    n = int(rng.integers(20, 80))
    m = rng.standard_normal((n, n))
    spd = m @ m.T + n * np.eye(n)
    l = cp.linalg.cholesky(cp.asarray(spd)).get()
    check("linalg_cholesky", bool(np.allclose(l, np.linalg.cholesky(spd), rtol=1e-10, atol=1e-10)
                                  and np.allclose(np.triu(l, 1), 0)))
    a = rng.standard_normal((n + 7, n))
    got = cp.linalg.svd(cp.asarray(a), compute_uv=False).get()
    check("linalg_svd_values", bool(np.allclose(got, np.linalg.svd(a, compute_uv=False), rtol=1e-10)))
    u, sv, vt = (x.get() for x in cp.linalg.svd(cp.asarray(a), full_matrices=False))
    check("linalg_svd_reconstructs", bool(np.allclose((u * sv) @ vt, a, atol=1e-10)))
    w, v = (x.get() for x in cp.linalg.eigh(cp.asarray(spd)))
    check("linalg_eigh", bool(np.allclose(w, np.linalg.eigvalsh(spd), rtol=1e-10)
                              and np.allclose(spd @ v, v * w, atol=1e-8 * np.abs(w).max())))
    # a batch of small matrices: cuSOLVER's batched Jacobi SVD (gesvdjBatched), whose svd_music_kernel relies
    # on a warp's lanes running in lockstep
    batch = rng.standard_normal((int(rng.integers(2, 6)), 6, 5)).astype(np.float32)
    u, sv, vt = (x.get() for x in cp.linalg.svd(cp.asarray(batch), full_matrices=False))
    check("linalg_svd_batched", bool(np.allclose(sv, np.linalg.svd(batch, compute_uv=False), rtol=1e-4, atol=1e-5)
                                     and np.allclose((u * sv[:, None, :]) @ vt, batch, atol=1e-4)))


def spmm():
    m, k, n = (int(v) for v in rng.integers(50, 200, 3))
    a = sp.random(m, k, density=0.05, format="csr", random_state=int(rng.integers(1 << 30)), dtype=np.float64)
    b = rng.standard_normal((k, n))
    got, ref = (csp.csr_matrix(a) @ cp.asarray(b)).get(), a @ b
    check("sparse_csr_matmat", bool(np.allclose(got, ref, rtol=1e-12, atol=1e-12)), f"{np.abs(got - ref).max()}")


def spmv():
    m, n = (int(v) for v in rng.integers(100, 400, 2))
    a = sp.random(m, n, density=0.05, format="csr", random_state=int(rng.integers(1 << 30)), dtype=np.float64)
    v = rng.standard_normal(n)
    got, ref = (csp.csr_matrix(a) @ cp.asarray(v)).get(), a @ v
    check("sparse_csr_matvec", bool(np.allclose(got, ref, rtol=1e-12, atol=1e-12)), f"{np.abs(got - ref).max()}")


def cub_sum():
    n = int(rng.integers(10_000, 100_000))
    x = rng.integers(-1000, 1000, n).astype(np.int64)
    check("cub_sum_int64", int(cp.asarray(x).sum()) == int(x.sum()))
    f = rng.standard_normal(n)
    check("cub_sum_float64", bool(abs(float(cp.asarray(f).sum()) - f.sum()) < 1e-9 * np.abs(f).sum()))


for name, fn in (("random", random_uniform), ("matmul", matmul), ("fft", fft), ("solve", solve),
                 ("factorizations", factorizations), ("spmv", spmv), ("spmm", spmm),
                 ("cub_sum", cub_sum)):
    attempt(name, fn)
print(f"failures {len(failures)}")
sys.exit(1 if failures else 0)
