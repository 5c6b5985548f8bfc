"""tests/driver/test_c_api.c, compiled with gcc against cuda.h and linked with the built libcuda.so.1:
devices, contexts, memory, copies, streams, events, pointer attributes, pools, bad input and leaks."""

import subprocess

import pytest

from chost import C_HOST, user_env, build_c_host


pytestmark = C_HOST


@pytest.fixture(scope="module")
def c_api_exe(shim_libdir, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("capi") / "test_c_api")
    build_c_host(shim_libdir, "test_c_api.c", exe, ["-lpthread"])
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
