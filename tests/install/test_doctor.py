"""The doctor's own judgements, against the checkout: the dependency floors it enforces are the ones
pyproject.toml declares, it refuses what is older, and its kernel check fails on any wrong element."""

import re
from pathlib import Path

import numpy as np
import pytest

from zluda_py import doctor

ROOT = Path(__file__).resolve().parents[2]


def test_floors_are_the_declared_ones():
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {}
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([\d.]+)", dep)
        assert m, f"{dep!r} declares no floor"
        declared[m.group(1)] = m.group(2)
    assert declared == doctor.FLOORS


@pytest.mark.parametrize("version, refused", [("0.44.0", True), ("0.47.0", True), ("0.48.0", False),
                                              ("0.48.0rc1", False), ("0.50.1", False), ("1.0", False)])
def test_llvmlite_below_the_floor_is_refused(version, refused):
    why = doctor.below_floor("llvmlite", version)
    assert (why is not None) == refused
    if refused:
        assert f"llvmlite {version} is older than {doctor.FLOORS['llvmlite']}" in why and "min/max" in why


def test_expected_results_round_to_nearest_even():
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, 1 + 3 * 2**-11, -2.5], np.float32)
    h, b, _ = doctor.expected_results(x)
    assert b.tolist() == [1.0, 1 + 2**-6, 1.0, 1.0, -2.5]
    assert h.tolist() == [1 + 2**-8, 1 + 3 * 2**-8, 1.0, 1 + 2**-9, -2.5]


def _probe_output(n, tamper=None):
    """What a correct probe prints for n inputs (the probe's own inputs), then changed by tamper(words)."""
    i = np.arange(n, dtype=np.float32)
    x = np.float32(-9) + np.float32(18) * i / np.float32(n) + i * np.float32(1e-7)
    h, b, _ = doctor.expected_results(x)
    e = np.exp(x.astype(np.float64)).astype(np.float32)
    words = np.stack([a.astype(np.float32).view(np.uint32) for a in (x, h, b, e)], axis=1)
    if tamper:
        tamper(words)
    return [f"ok {n}"] + [" ".join(f"{w:08x}" for w in row) for row in words]


def test_kernel_check_accepts_the_right_results():
    assert doctor.kernel_problems(_probe_output(1000), 1000) == []


@pytest.mark.parametrize("column, what", [(1, "f16 round trip"), (2, "bf16 round trip"), (3, "expf")])
def test_kernel_check_fails_on_one_wrong_element(column, what):
    def tamper(words):
        words[123, column] += 16 if column == 3 else 1     # expf is allowed a few ulp, not 16
    problems = doctor.kernel_problems(_probe_output(1000, tamper), 1000)
    assert len(problems) == 1 and problems[0].startswith(f"{what}: 1 of 1000 wrong"), problems


def test_kernel_check_fails_on_untouched_outputs_and_on_no_run():
    def poison(words):
        words[999, 1:] = 0x7fc00bad                         # the probe's poison: the kernel skipped it
    assert len(doctor.kernel_problems(_probe_output(1000, poison), 1000)) == 3
    assert doctor.kernel_problems(["fail cuModuleLoadData 218 CUDA_ERROR_INVALID_PTX"], 1000) == [
        "the kernel did not run: fail cuModuleLoadData 218 CUDA_ERROR_INVALID_PTX"]
