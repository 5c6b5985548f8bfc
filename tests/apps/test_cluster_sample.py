"""samples/cluster_dsmem.cu built for compute_90 (the samples' own build targets ZLUDA_CC, 8.6 by default, where
the sample has nothing to run) and run through the shim on a device reporting 9.0: a cluster-wide histogram
through distributed shared memory, a __cluster_dims__ kernel launched with <<<>>>, and the launch errors NVIDIA's
driver answers (cudaErrorInvalidClusterSize); and the driver API's cluster answers against an H100's."""

import ctypes
import json
import os
import struct
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
ANSWERS = json.loads((ROOT / "tests" / "data" / "nvidia_cluster_answers.json").read_text())


def test_cluster_sample_on_compute_90(tmp_path, shim_libdir, nvcc):
    exe = tmp_path / "cluster_dsmem"
    subprocess.run([nvcc, "-gencode", "arch=compute_90,code=compute_90", "-o", str(exe),
                    str(ROOT / "samples" / "cluster_dsmem.cu")], check=True, capture_output=True, timeout=600)
    env = dict(os.environ, ZLUDA_CC="9.0")
    proc = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", str(exe)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("PASS"), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "nothing to run" not in proc.stdout      # the cluster kernels ran


def test_nvidia_answers_are_what_the_driver_checks_against():
    """The error table the driver follows (zluda_py/driver/launch.py cluster_shape) is the H100's."""
    e = ANSWERS["errors"]
    assert e["ok_x2"] == [0, 0] and e["size8"] == [0, 0] and e["size2x2x2"] == [0, 0]
    for bad in ("not_dividing_x", "not_dividing_y", "zero_dim", "size9", "size12_4x3", "size16_portable_attr",
                "fixed_attr_disagrees", "fixed_attr_1", "fixed_grid_not_dividing", "size16_4x4_portable"):
        assert e[bad][0] == 912, bad
    assert e["size16_non_portable"] == 0 and e["size17_non_portable"] == 912 and e["size32_non_portable"] == 912
    assert ANSWERS["ring"]["ok"] == 1
