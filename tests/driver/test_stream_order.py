"""Stream order from a C host through the real libcuda.so.1 (tests/driver/stream_order.c): kernels, host
functions and events on two streams with synchronizes in between, every element checked, then a trap;
with the CPU backend's native launch queue and without it (ZLUDA_CPU_NATIVE_QUEUE=0)."""

import os
import shutil
import subprocess

import pytest

CUDA_INC = "/usr/local/cuda/include"
HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = [
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed"),
    pytest.mark.skipif(not os.path.isfile(os.path.join(CUDA_INC, "cuda.h")), reason="cuda.h not installed"),
]


@pytest.fixture(scope="module")
def order_exe(shim_libdir, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("order") / "stream_order")
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", CUDA_INC, os.path.join(HERE, "stream_order.c"),
                    "-o", exe, "-L", shim_libdir, "-lcuda", f"-Wl,-rpath,{shim_libdir}"], check=True)
    return exe


@pytest.mark.parametrize("native", ["1", "0"])
def test_stream_order_from_c(order_exe, native):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("ZLUDA_")}
    env["ZLUDA_CPU_NATIVE_QUEUE"] = native
    for _ in range(2):      # timing-dependent hand-overs: twice
        r = subprocess.run([order_exe], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr
        assert "Traceback" not in r.stderr
