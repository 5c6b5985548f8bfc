"""NVIDIA's own libraries from PyPI, unmodified, through the shim on the CPU backend: cuRAND (every generator,
each distribution, bit for bit against cuRAND's host generator), cuFFT (1D/2D/3D, C2C/R2C/C2R, single and
double, batched, against numpy.fft), and CuPy on cuRAND, cuBLAS, cuFFT, cuSOLVER, cuSPARSE and CUB. Each program runs in its own process via `zluda-py run` and checks its
own results. Skipped, with the reason, when a wheel is not installed (scripts/setup --clients).

The device they see is compute capability 13.0: NVIDIA's libraries carry machine code for every architecture
they know and their PTX only for those after it, so only a device newer than all of them (12.x still gets
sm_120 machine code) makes them load PTX. Their kernels compile once into the kernel cache (a first run of
the cuRAND program compiles about ten minutes of kernels on two cores; later runs take seconds)."""

import glob
import importlib.util
import os
import random
import subprocess
import sys
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
LIBRARY_CC = "13.0"


def _wheel_lib(name):
    return glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "lib", name))


def _run_program(program, libs, timeout, modules=("numpy",), **extra_env):
    for lib in (libs,) if isinstance(libs, str) else libs:
        if not _wheel_lib(lib):
            pytest.skip(f"{lib} is not installed (scripts/setup --clients installs NVIDIA's wheels)")
    for m in modules:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"{m} is not installed")
    env = dict(os.environ, ZLUDA_CC=LIBRARY_CC, **extra_env)
    env.pop("ZLUDA_LOG", None)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "zluda_py.cli", "run", "--backend", "cpu", "--", sys.executable,
           os.path.join(PROGS, program), str(random.randint(1, 10**6))]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    lines = p.stdout.splitlines()
    passed = [ln for ln in lines if ln.startswith("PASS ")]
    failed = [ln for ln in lines if ln.startswith("FAIL ")]
    assert p.returncode == 0 and passed and not failed and "failures 0" in lines, (
        f"{program} exited {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr (tail)\n{p.stderr[-3000:]}")
    return passed


def test_curand_every_generator():
    passed = _run_program("curand_generators.py", "libcurand.so.10", timeout=1800)
    generators = {ln.split()[1] for ln in passed}
    assert generators == {"XORWOW", "MRG32K3A", "MTGP32", "MT19937", "PHILOX4_32_10", "SOBOL32",
                          "SCRAMBLED_SOBOL32", "SOBOL64", "SCRAMBLED_SOBOL64"}, generators
    assert len(passed) == 5 * 6 + 2 * 6 + 2 * 3


def test_cufft_transforms():
    passed = _run_program("cufft_transforms.py", "libcufft.so.12", timeout=1200)
    assert len(passed) == 18


def test_cupy_on_nvidia_libraries(tmp_path):
    """Issue 11's acceptance script: cupy.random, @, cupy.fft, cupy.linalg.solve, a CSR matvec and CUB sums,
    each against numpy/scipy. cuSOLVER and cuSPARSE need libnvJitLink.so.13 loaded: the shim's front serves it.
    CuPy's kernel cache is kept apart (one built by NVIDIA's NVRTC outside the shim holds machine code)."""
    passed = _run_program("cupy_libraries.py", ("libcusolver.so.12", "libcusparse.so.12", "libcurand.so.10",
                                                "libcufft.so.12", "libcublas.so.13"),
                          timeout=1800, modules=("numpy", "scipy", "cupy"), CUPY_ACCELERATORS="cub",
                          CUPY_CACHE_DIR=str(tmp_path))
    assert {ln.split()[1] for ln in passed} == {
        "random_uniform", "random_reproducible", "matmul_float32", "matmul_float64", "fft_c2c", "fft_r2c_batched",
        "linalg_solve_float64", "linalg_solve_float32", "linalg_cholesky", "linalg_svd_values",
        "linalg_svd_reconstructs", "linalg_svd_batched", "linalg_eigh", "sparse_csr_matvec", "sparse_csr_matmat", "cub_sum_int64",
        "cub_sum_float64"}
