"""A slice of CuPy's own test suite through the shim (scripts/run_cupy_suite): CUB and CuPy's reductions and
elementwise kernels pass as on a GPU (tests/data/nvidia_cupy_slice.json, an H100's counts). CuPy's tests are
not in its wheel: ZLUDA_CUPY_SRC names a directory holding them (a checkout of github.com/cupy/cupy at the
wheel's tag, or its sdist); without it the test skips and says so."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARTS = ("cub", "reduction", "elementwise")


def test_cupy_slice_passes_what_a_gpu_passes(tmp_path):
    src = os.environ.get("ZLUDA_CUPY_SRC")
    if not src or not os.path.isfile(os.path.join(src, "tests", "conftest.py")):
        pytest.skip("ZLUDA_CUPY_SRC does not name CuPy's source (its tests are not in the wheel)")
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy (cupy-cuda13x) is not installed")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "run_cupy_suite"), src, "--out", str(tmp_path),
           "--timeout", "1500"] + [a for p in PARTS for a in ("--part", p)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3 * 1500)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(os.path.join(tmp_path, "summary.json")) as f:
        ours = json.load(f)["parts"]
    with open(os.path.join(ROOT, "tests", "data", "nvidia_cupy_slice.json")) as f:
        gpu = json.load(f)["parts"]
    for part in PARTS:
        assert ours[part]["failing"] == [] and ours[part]["passed"] == gpu[part]["passed"], (part, p.stdout)
