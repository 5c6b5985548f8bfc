"""tests/driver/graph_mem.c through the real libcuda.so.1: allocation and free nodes around kernels, address
reuse inside a graph, allocations that outlive their launch (a relaunch refused until they are freed,
AUTO_FREE_ON_LAUNCH), the footprint in NVIDIA's 32 MiB blocks, physical memory shared by launches in
stream order and kept apart across streams until the frees have run, and stream capture of
cuMemAllocAsync/cuMemFreeAsync."""

import random
import subprocess

import pytest

from chost import C_HOST, build_c_host, user_env

pytestmark = C_HOST
MIB = 1 << 20


@pytest.fixture(scope="module")
def program(shim_libdir, tmp_path_factory):
    return build_c_host(shim_libdir, "graph_mem.c", tmp_path_factory.mktemp("graph_mem") / "graph_mem",
                        libs=["-lpthread"])


def test_graph_memory_nodes(program):
    r = subprocess.run([program, str(random.randint(1, 10 ** 6))], capture_output=True, text=True, timeout=600,
                       env=user_env(ZLUDA_LOG="1"))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok 0"), r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    v = {k: int(x) for k, x in (line.split() for line in r.stdout.split("\n") if line)}
    want = {
        "start_used": 0,
        "kernels_between_alloc_and_free": 1,
        "freed_in_graph_cuMemFree": 1,          # CUDA_ERROR_INVALID_VALUE: its graph frees it
        "va_reused": 1, "va_unordered_distinct": 1,
        "unfreed_data": 1, "unfreed_relaunch": 1, "relaunch_after_free_async": 0,
        "outlives_graph_data": 1, "outlives_graph_free": 0, "outlives_graph_free_twice": 1,
        "autofree_relaunch": 0, "autofree_free": 0,
        "trimmed_used": 0, "instantiated_used": 0,
        "big_used": 64 * MIB, "big_reserved": 64 * MIB, "small_used": 32 * MIB, "high": 64 * MIB,
        "high_reset": 32 * MIB,
        "graphs_distinct_va": 1,
        "one_stream_used": 64 * MIB,            # three 40 MiB graphs in one stream: one 64 MiB block
        "second_stream_used": 128 * MIB,        # another stream while their frees are queued: a second
        "after_completion_used": 64 * MIB,      # once they ran, the other stream shares the block
        "end_used": 0,
        "shared_pages": 1,
        "capture_free_plain": 1, "capture_still_active": 1,
        "captured_nodes": 4, "captured_type0": 10, "captured_type1": 0, "captured_type2": 1, "captured_type3": 11,
        "captured_data": 1,
    }
    assert {k: v.get(k) for k in want} == want
    # every refusal logged one line, naming the call
    assert "cuGraphLaunch: CUDA_ERROR_INVALID_VALUE" in r.stderr
    assert "cuMemFreeAsync: CUDA_ERROR_INVALID_VALUE" in r.stderr
