"""Stream order from a C host through the real libcuda.so.1 (tests/driver/stream_order.c): kernels, host
functions and events on two streams with synchronizes in between, every element checked, then a trap;
with the CPU backend's native launch queue and without it (ZLUDA_CPU_NATIVE_QUEUE=0)."""

import subprocess

import pytest

from chost import C_HOST, build_c_host, user_env


pytestmark = C_HOST


@pytest.fixture(scope="module")
def order_exe(shim_libdir, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("order") / "stream_order")
    build_c_host(shim_libdir, "stream_order.c", exe)
    return exe


@pytest.mark.parametrize("native", ["1", "0"])
def test_stream_order_from_c(order_exe, native):
    env = user_env(ZLUDA_CPU_NATIVE_QUEUE=native)
    for _ in range(2):      # timing-dependent hand-overs: twice
        r = subprocess.run([order_exe], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr
        assert "Traceback" not in r.stderr
