"""samples/blockscaled_mma.cu built for compute_120a (the samples' own builds target ZLUDA_CC, 8.6 by default,
where it has nothing to run) and run through the shim on a device reporting 12.0: an MXFP4 and an MXFP8 x MXFP4
GEMM on sm_120a's block-scaled mma (.kind::mxf4, .kind::mxf8f6f4), checked against the host's sums."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_blockscaled_sample_on_compute_120a(tmp_path, shim_libdir, nvcc):
    exe = tmp_path / "blockscaled_mma"
    subprocess.run([nvcc, "-gencode", "arch=compute_120a,code=compute_120a", "-o", str(exe),
                    str(ROOT / "samples" / "blockscaled_mma.cu")], check=True, capture_output=True, timeout=600)
    env = dict(os.environ, ZLUDA_CC="12.0")
    proc = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", str(exe)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0 and out.strip().endswith("PASS"), out[-2000:] + proc.stderr[-2000:]
    assert "nothing to run" not in out and out.count(" 0 wrong") == 2, out
