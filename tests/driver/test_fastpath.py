"""The shim's C fast path (src/fastpath.c) for cuMemAlloc / cuMemFree / the synchronous cuMemcpy forms and
the trivial getters, through tests/driver/test_fastpath.c compiled against the built libcuda.so.1: values,
errors (still returned and logged by Python), visibility of C-made allocations, ordering, sticky errors,
threads, leaks, contexts, capture, the getters' answers against the Python handlers' (their speed is
scripts/bench_api's job, not a test's)."""

import subprocess

import pytest

from chost import C_HOST, user_env, build_c_host


pytestmark = C_HOST

PARTS = ["values", "errors", "visibility", "ordering", "sticky", "sticky_idle", "threads", "leaks", "contexts",
         "capture"]


@pytest.fixture(scope="module")
def exe(shim_libdir, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fastpath") / "test_fastpath")
    build_c_host(shim_libdir, "test_fastpath.c", path, ["-lpthread"])
    return path


def run(exe, part, **env):
    return subprocess.run([exe, part], env=user_env(**env), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("pool", ["0", "1"])
@pytest.mark.parametrize("part", PARTS)
def test_part(exe, part, pool):
    """With ZLUDA_MEM_POOL off (blocks go back on free) and on (size classes): the same answers."""
    r = run(exe, part, ZLUDA_MEM_POOL=pool)
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


def test_getters_match_python(exe, tmp_path):
    """cuDriverGetVersion / cuDeviceGet / cuDeviceGetCount / cuDeviceGetAttribute / cuCtxGetDevice answered
    in C give exactly the values and codes of the Python handlers (ZLUDA_TRACE=1 turns the fast path off):
    every attribute number of every device, bad devices and attributes, NULL outputs, before cuInit,
    without a context, after the current context was destroyed."""
    fast = run(exe, "getters", ZLUDA_LOG="1")
    slow = run(exe, "getters", ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(tmp_path / "trace.log"))
    for r in (fast, slow):
        assert r.returncode == 0 and "PASSED getters" in r.stdout, r.stdout + r.stderr
        assert "Traceback" not in r.stderr
    fast_lines, slow_lines = fast.stdout.splitlines(), slow.stdout.splitlines()
    assert len(fast_lines) == len(slow_lines) > 3000
    diff = [(a, b) for a, b in zip(fast_lines, slow_lines) if a != b]
    assert not diff, diff[:20]
    lines = set(fast_lines)
    assert "version 0 13050" in lines and "version-null 1" in lines       # 1: CUDA_ERROR_INVALID_VALUE
    assert "attr 0 10 0 32" in lines and "attr 0 1 0 1024" in lines         # warp size, threads per block
    assert "attr 0 4096 1 1515870810" in lines and "attr 1 10 101 1515870810" in lines  # poison kept
    assert "ctxdev 0 0" in lines and "ctxdev 201 1515870810" in lines     # 201: CUDA_ERROR_INVALID_CONTEXT
    # Every error the fast run returned came from the Python handler, which logged it once.
    logged = [l for l in fast.stderr.splitlines() if l.startswith("[zluda]") and "cuDeviceGetAttribute:" in l]
    errors = [l for l in fast_lines if l.startswith("attr") and l.split()[-2 if l.startswith("attr ") else -1] != "0"]
    assert len(logged) == len(errors) > 100


def test_trace_sees_every_getter(exe, tmp_path):
    log = tmp_path / "trace.log"
    r = run(exe, "getters", ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(log))
    assert r.returncode == 0, r.stdout + r.stderr
    calls = sum(1 for l in r.stdout.splitlines() if l.startswith("attr"))
    assert log.read_text().count("cuDeviceGetAttribute(") == calls
