"""ZLUDA_STREAMS and ZLUDA_MEM_POOL from C hosts through the real libcuda.so.1: stream order exact with 1, 2
and 4 lanes (tests/driver/stream_lanes.c), two streams' one-block kernels overlapping only when lanes
allow it, and memory given back on cuMemFree with the pool off, reused and trimmed with it on
(tests/driver/mem_pool.c)."""

import os
import subprocess

import pytest

from chost import C_HOST, build_c_host

MB = 1024

pytestmark = C_HOST


def _build(shim_libdir, tmp_path_factory, name):
    exe = str(tmp_path_factory.mktemp(name) / name)
    build_c_host(shim_libdir, f"{name}.c", exe)
    return exe


@pytest.fixture(scope="module")
def lanes_exe(shim_libdir, tmp_path_factory):
    return _build(shim_libdir, tmp_path_factory, "stream_lanes")


@pytest.fixture(scope="module")
def pool_exe(shim_libdir, tmp_path_factory):
    return _build(shim_libdir, tmp_path_factory, "mem_pool")


def _run(exe, *args, **env):
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("ZLUDA_")}
    e.update(env)
    r = subprocess.run([exe, *args], env=e, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r


@pytest.mark.parametrize("streams", ["1", "2", "4"])
@pytest.mark.parametrize("native", ["1", "0"])
def test_order_exact(lanes_exe, streams, native):
    r = _run(lanes_exe, "order", ZLUDA_STREAMS=streams, ZLUDA_CPU_NATIVE_QUEUE=native)
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr


@pytest.mark.parametrize("streams", ["1", "2"])
def test_small_kernels_of_two_streams_overlap(lanes_exe, streams):
    """The %globaltimer intervals of the two streams' six 20 ms kernels: disjoint with one lane; with two,
    both streams run a kernel at once for at least one kernel's time (about 120 ms on an idle machine;
    the wall time is printed)."""
    r = _run(lanes_exe, "overlap", ZLUDA_STREAMS=streams, PTXRT_THREADS="2")
    assert r.returncode == 0 and "ALL PASSED" in r.stdout, r.stdout + r.stderr
    both = float(r.stdout.split("both ran ")[1].split()[0])
    print(r.stdout.splitlines()[0])
    assert both == 0 if streams == "1" else both >= 20, r.stdout


def _pool_figures(pool_exe, pool):
    r = _run(pool_exe, ZLUDA_MEM_POOL=pool)
    assert r.returncode == 0 and "ALL DONE" in r.stdout, r.stdout + r.stderr
    return {k: int(v) for k, v in (l.split() for l in r.stdout.splitlines() if l != "ALL DONE")}


def test_pool_off_returns_memory_on_free(pool_exe):
    f = _pool_figures(pool_exe, "0")
    assert f["allocated_rss"] - f["start_rss"] > 28 * MB, f
    for point in ("freed", "trimmed", "async_freed", "ctx_freed"):
        assert f[f"{point}_rss"] - f["start_rss"] < 8 * MB, (point, f)


def test_pool_on_reuses_then_trims(pool_exe):
    f = _pool_figures(pool_exe, "1")
    assert f["allocated_rss"] - f["start_rss"] > 28 * MB, f
    assert f["freed_rss"] - f["start_rss"] > 28 * MB, f          # kept for the next allocation
    assert f["reused"] == 32 and f["async_reused"] == 32, f
    assert f["async_freed_rss"] - f["start_rss"] > 28 * MB, f
    assert f["ctx_freed_rss"] - f["start_rss"] > 28 * MB, f
    for point in ("trimmed", "async_trimmed", "ctx_destroyed"):   # cuMemPoolTrimTo, cuCtxDestroy
        assert f[f"{point}_rss"] - f["start_rss"] < 8 * MB, (point, f)
