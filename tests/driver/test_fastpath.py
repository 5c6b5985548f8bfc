"""The shim's C fast path (src/fastpath.c) for cuMemAlloc / cuMemFree / the synchronous cuMemcpy forms,
through tests/driver/test_fastpath.c compiled against the built libcuda.so.1: values, errors (still
returned and logged by Python), visibility of C-made allocations, ordering, sticky errors, threads, leaks,
contexts and capture (their speed is scripts/bench_api's job, not a test's)."""

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

PARTS = ["values", "errors", "visibility", "ordering", "sticky", "threads", "leaks", "contexts", "capture"]


def user_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("ZLUDA_")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def exe(shim_libdir, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fastpath") / "test_fastpath")
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", CUDA_INC, os.path.join(HERE, "test_fastpath.c"),
                    "-o", path, "-L", shim_libdir, "-lcuda", "-lpthread", f"-Wl,-rpath,{shim_libdir}"],
                   check=True)
    return path


def run(exe, part, **env):
    return subprocess.run([exe, part], env=user_env(**env), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("part", PARTS)
def test_part(exe, part):
    r = run(exe, part)
    assert r.returncode == 0 and f"PASSED {part}" in r.stdout, r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def test_errors_are_logged_once_each_by_python(exe):
    r = run(exe, "errors", ZLUDA_LOG="1")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("[zluda]")]

    def count(text):
        return sum(text in l for l in lines)
    assert count("cuMemFree_v2: CUDA_ERROR_INVALID_VALUE") == 4, lines
    assert count("cuMemcpyHtoD_v2: CUDA_ERROR_INVALID_VALUE") == 4, lines
    assert count("cuMemcpyDtoH_v2: CUDA_ERROR_INVALID_VALUE") == 3, lines
    assert count("cuMemcpyDtoD_v2: CUDA_ERROR_INVALID_VALUE") == 1, lines
    assert count("cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE") == 2, lines
    assert count("cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY") == 1, lines
    assert count("cuMemAlloc_v2: CUDA_ERROR_NOT_INITIALIZED") == 1, lines
    assert any("already freed" in l for l in lines) and any("runs past its allocation" in l for l in lines)
    assert "Traceback" not in r.stderr


def test_trace_sees_every_call(exe, tmp_path):
    """ZLUDA_TRACE=1 turns the fast path off: every call reaches Python and is traced."""
    log = tmp_path / "trace.log"
    r = run(exe, "values", ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(log))
    assert r.returncode == 0, r.stdout + r.stderr
    text = log.read_text()
    assert text.count("cuMemAlloc_v2(") == 3          # the one before cuInit, then two
    assert text.count("cuMemFree_v2(") == 3
    assert text.count("cuMemcpyHtoD_v2(") == 1 and text.count("cuMemcpyDtoH_v2(") == 2
    assert text.count("cuMemcpyDtoD_v2(") == 1 and text.count("cuMemcpy(") == 2
    assert text.count("cuMemcpyHtoD_v2_ptds(") == 1 and text.count("cuMemcpy_ptds(") == 1
