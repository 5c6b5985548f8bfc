"""tests/driver/test_c_api.c, compiled with gcc against cuda.h and linked with the built libcuda.so.1:
devices, contexts, memory, copies, streams, events, pointer attributes, pools, bad input and leaks."""

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


def user_env(**extra):
    """What a user who set nothing has: no PYTHONPATH, no ZLUDA_* settings."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("ZLUDA_")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def c_api_exe(shim_libdir, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("capi") / "test_c_api")
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", CUDA_INC, os.path.join(HERE, "test_c_api.c"),
                    "-o", exe, "-L", shim_libdir, "-lcuda", "-lpthread", f"-Wl,-rpath,{shim_libdir}"],
                   check=True)
    return exe


def test_c_api_program(c_api_exe):
    r = subprocess.run([c_api_exe], env=user_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ALL PASSED" in r.stdout, r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def test_c_api_failures_are_logged_one_line_each(c_api_exe):
    r = subprocess.run([c_api_exe], env=user_env(ZLUDA_LOG="1"), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("[zluda]")]
    assert any("cuMemFree_v2: CUDA_ERROR_INVALID_VALUE" in l for l in lines)
    assert any("cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY" in l for l in lines)
    assert any("cuCtxPushCurrent_v2: CUDA_ERROR_INVALID_CONTEXT" in l for l in lines)
    assert "Traceback" not in r.stderr
