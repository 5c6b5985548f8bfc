"""The texture probes (scripts/nvidia_texture_probe.cu, nvidia_address_mode_probe.cu) and the array/texture
error probe (scripts/nvidia_array_errors.c), built here and run unmodified through the shim, answer what the
H200 did."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _nvcc():
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and os.path.isfile(cand):
            return cand
    return None


def _run(argv, env=None, timeout=600):
    env = dict(os.environ if env is None else env)
    env.setdefault("ZLUDA_LOG", "1")
    return subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(_nvcc() is None, reason="nvcc not found")
def test_texture_probe_through_the_shim(tmp_path, shim_libdir):
    exe = tmp_path / "probe"
    subprocess.run([_nvcc(), "-O1", "-gencode", "arch=compute_86,code=compute_86", "-o", str(exe),
                    str(ROOT / "scripts" / "nvidia_texture_probe.cu")], check=True, timeout=600)
    proc = _run([str(exe)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = json.loads(proc.stdout)["cases"]
    theirs = json.loads((DATA / "nvidia_texture_answers.json").read_text())["cases"]
    assert len(ours) == len(theirs)
    point_bad, linear_exact, linear_total = [], 0, 0
    for o, t in zip(ours, theirs):
        assert (o["kind"], o["format"], o["data"], o["create"]) == (t["kind"], t["format"], t["data"], t["create"])
        assert o["coords"] == t["coords"]
        for c, a, b in zip(o["coords"], o["results"], t["results"]):
            if o["filter"] == "point":
                if a != b:
                    point_bad.append((o["kind"], o["format"], o["address"], c, a, b))
            else:
                linear_total += 1
                linear_exact += a == b
    assert not point_bad, f"{len(point_bad)} point samples differ, first: {point_bad[0]}"
    # the floor of tests/ptx/test_texture_hw.py (3461 + 261): kernels see what the runtime computes
    assert linear_total == 3872 and linear_exact >= 3722, (linear_exact, linear_total)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found")
def test_array_and_texture_error_codes(tmp_path, shim_libdir):
    exe = tmp_path / "errs"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(ROOT / "scripts" / "nvidia_array_errors.c"), "-ldl"],
                   check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=shim_libdir)
    proc = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = json.loads("{" + proc.stdout.strip().lstrip("{"))
    theirs = json.loads((DATA / "nvidia_array_errors.json").read_text())["answers"]
    assert set(ours) == set(theirs)
    # where NVIDIA's driver crashes (a second cuArrayDestroy) the shim answers INVALID_HANDLE
    theirs = {k: (400 if v == "crash" else v) for k, v in theirs.items()}
    diff = {k: (ours[k], theirs[k]) for k in theirs if ours[k] != theirs[k]}
    assert not diff, f"(ours, NVIDIA's): {diff}"


@pytest.mark.skipif(_nvcc() is None, reason="nvcc not found")
def test_address_modes_through_the_shim(tmp_path, shim_libdir):
    """Every address mode, with texel and normalised coordinates, point and linear, outside the texture
    (scripts/nvidia_address_mode_probe.cu): line for line what the H200 printed. Wrap and mirror clamp
    texel coordinates there."""
    exe = tmp_path / "modes"
    subprocess.run([_nvcc(), "-O1", "-gencode", "arch=compute_86,code=compute_86", "-o", str(exe),
                    str(ROOT / "scripts" / "nvidia_address_mode_probe.cu")], check=True, timeout=600)
    proc = _run([str(exe)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == (DATA / "nvidia_address_mode_answers.txt").read_text()
