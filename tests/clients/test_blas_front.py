"""The BLAS front (libcublas.so.13 / libcublasLt.so.13 beside the shim) with NVIDIA's cuBLAS from PyPI behind
it: a C program through the shim (every GEMM entry point it serves, against double references, and calls it
forwards), and CuPy's `a @ b` against numpy's matmul in the same run. Skipped, with the reason, without the
wheels (scripts/setup --clients installs them)."""

import glob
import importlib.util
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
CUDA_INC = "/usr/local/cuda/include"
# NVIDIA's libraries take their PTX only on a device newer than every architecture they carry machine code
# for: 13.0 is such a device (12.0 gets sm_120 SASS, which cannot run here)
LIBRARY_CC = "13.0"


def _wheel_include():
    for d in glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "cu13")):
        if os.path.isfile(os.path.join(d, "lib", "libcublas.so.13")) and os.path.isfile(os.path.join(d, "include",
                                                                                                     "cublasLt.h")):
            return os.path.join(d, "include")
    return None


def _needs():
    if importlib.util.find_spec("scipy_openblas32") is None:
        return "scipy-openblas32 is not installed (scripts/setup --clients)"
    if _wheel_include() is None:
        return "NVIDIA's cuBLAS wheel (nvidia-cublas) is not installed (scripts/setup --clients)"
    return None


def _run(cmd, **env):
    e = dict(os.environ)
    e.pop("ZLUDA_LOG", None)
    e.update(env)
    e["PYTHONPATH"] = ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--backend", "cpu", "--", *cmd], cwd=ROOT,
                          env=e, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def program(shim_libdir, tmp_path_factory):
    missing = _needs()
    if missing:
        pytest.skip(missing)
    if shutil.which("gcc") is None or not os.path.isdir(os.path.join(CUDA_INC, "crt")):
        pytest.skip("gcc or the CUDA toolkit's headers are missing")
    exe = str(tmp_path_factory.mktemp("blas") / "blas_front")
    # linked against the front, as a program linked against NVIDIA's libcublas finds ours through `zluda-py run`
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", f"-I{CUDA_INC}", f"-I{_wheel_include()}",
                    os.path.join(PROGS, "blas_front.c"), "-o", exe, f"-L{shim_libdir}", "-lcublas", "-lcublasLt",
                    "-lcuda", "-lm"], check=True)
    return exe


SERVED = ("cublasSgemm_v2", "cublasDgemm_v2", "cublasCgemm_v2", "cublasZgemm_v2", "cublasHgemm", "cublasGemmEx",
          "cublasGemmStridedBatchedEx", "cublasSgemmStridedBatched", "cublasGemmBatchedEx", "cublasSgemm_v2_64",
          "cublasLtMatmul")


@pytest.mark.parametrize("cc", [LIBRARY_CC, "12.0"])
def test_gemms_from_c(program, cc):
    """Every case PASSes, each served entry point says it ran on the host BLAS, and (on a device NVIDIA's
    kernels run on) a forwarded BLAS-1 call and NVIDIA's answer to a bad argument come back."""
    args = [program, str(random.randint(1, 10**6))] + (["forwarded"] if cc == LIBRARY_CC else [])
    p = _run(args, ZLUDA_CC=cc, ZLUDA_TRACE="1")
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and "failures 0" in lines, p.stdout + p.stderr[-3000:]
    assert not [ln for ln in lines if ln.startswith("FAIL")]
    served = set(re.findall(r"\[zluda\] (\w+): host BLAS", p.stderr))
    assert set(SERVED) <= served, sorted(set(SERVED) - served)
    if cc == LIBRARY_CC:
        assert "PASS Snrm2_forwarded" in " ".join(lines) and any(ln.startswith("PASS bad_m_answer 7") for ln in lines)


CUPY_MATMUL = r"""
import time, numpy as np, cupy as cp
n = 2048
rng = np.random.default_rng()
a = rng.standard_normal((n, n), dtype=np.float32)
b = rng.standard_normal((n, n), dtype=np.float32)
best = lambda f: min(f() for _ in range(3))
def numpy_time():
    t = time.perf_counter(); a @ b; return time.perf_counter() - t
def cupy_time():
    t = time.perf_counter(); da @ db; cp.cuda.Device().synchronize(); return time.perf_counter() - t
da, db = cp.asarray(a), cp.asarray(b)
out = cp.full((n, n), np.nan, dtype=cp.float32)
cp.matmul(da, db, out=out)
got, ref = cp.asnumpy(out), a.astype(np.float64) @ b.astype(np.float64)
err = float(np.max(np.abs(got - ref) / (np.abs(a) @ np.abs(b))))
t_np, t_cp = best(numpy_time), best(cupy_time)
print(f"numpy {t_np * 1e3:.1f} ms cupy {t_cp * 1e3:.1f} ms ratio {t_np / t_cp:.2f} relerr {err:.2e}")
"""


def test_cupy_matmul_2048_against_numpy(shim_libdir, tmp_path):
    """CuPy's a @ b (float32, 2048 x 2048) goes to the BLAS front: the result checked against a float64
    reference, its time at least half of numpy's own matmul, measured in the same run."""
    missing = _needs() or (importlib.util.find_spec("cupy") is None and "CuPy (cupy-cuda13x) is not installed")
    if missing:
        pytest.skip(missing)
    # CuPy's own kernel cache is kept apart: one built by NVIDIA's NVRTC outside the shim holds machine code
    p = _run([sys.executable, "-c", CUPY_MATMUL], ZLUDA_CC="12.0", CUPY_CACHE_DIR=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    m = re.search(r"numpy ([\d.]+) ms cupy ([\d.]+) ms ratio ([\d.]+) relerr (\S+)", p.stdout)
    assert m, p.stdout
    print(p.stdout.strip())
    assert float(m.group(4)) < 1e-5
    assert float(m.group(3)) >= 0.5, p.stdout
