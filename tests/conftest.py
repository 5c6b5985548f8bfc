"""Shared pytest fixtures: `shim_libdir` builds the libcuda.so.1 shim once per session and returns its
directory; `built_samples` builds the nvcc samples once per session and `nvcc` finds nvcc (both skip where nvcc
is absent)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shim_libdir() -> str:
    """The directory holding the built libcuda.so.1 / libcuda.so (built on demand, once per session)."""
    from zluda_py import _shim_build
    return str(_shim_build.ensure_built())


def _nvcc() -> str | None:
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


@pytest.fixture(scope="session")
def nvcc() -> str:
    """The nvcc that builds a test's own CUDA program (skips where there is none)."""
    path = _nvcc()
    if path is None:
        pytest.skip("nvcc not found")
    return path


@pytest.fixture(scope="session")
def built_samples() -> Path:
    """samples/build: every sample in every flavour, built (or brought up to date) once per session."""
    if _nvcc() is None:
        pytest.skip("nvcc not found: the samples cannot be built")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_samples"), "-q"], cwd=ROOT,
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        pytest.fail(f"scripts/build_samples failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return ROOT / "samples" / "build"
