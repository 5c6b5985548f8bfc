"""tests/driver/ipc_processes.c through the real libcuda.so.1: IPC memory and event handles between two
processes, the second forked before CUDA starts or exec'd after it has (as NVIDIA's simpleIPC), with the
native launch queue and without it."""

import random
import subprocess

import pytest

from chost import C_HOST, build_c_host, user_env

pytestmark = C_HOST


@pytest.fixture(scope="module")
def program(shim_libdir, tmp_path_factory):
    return build_c_host(shim_libdir, "ipc_processes.c", tmp_path_factory.mktemp("ipc") / "ipc_processes")


@pytest.mark.parametrize("mode,native", [("fork", "1"), ("exec", "1"), ("exec", "0")])
def test_ipc_between_processes(program, mode, native):
    seed = str(random.randint(1, 10**6))
    r = subprocess.run([program, mode, seed], capture_output=True, text=True, timeout=300,
                       env=user_env(ZLUDA_CPU_NATIVE_QUEUE=native))
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "child ok" in r.stdout and r.stdout.strip().endswith("ALL PASSED"), out
    assert "Traceback" not in out
