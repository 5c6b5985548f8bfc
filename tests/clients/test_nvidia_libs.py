"""NVIDIA's own libraries from PyPI, unmodified, through the shim on the CPU backend: cuRAND (every generator,
each distribution, bit for bit against cuRAND's host generator) and cuFFT (1D/2D/3D, C2C/R2C/C2R, single and
double, batched, against numpy.fft). Each program runs in its own process via `zluda-py run` and checks its
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


def _run_program(program, lib, timeout):
    if not _wheel_lib(lib):
        pytest.skip(f"{lib} is not installed (scripts/setup --clients installs NVIDIA's wheels)")
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("numpy is not installed")
    env = dict(os.environ, ZLUDA_CC=LIBRARY_CC)
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
