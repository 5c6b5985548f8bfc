"""tests/driver/graph_conditional.c through the real libcuda.so.1: conditional graph nodes (IF/ELSE, SWITCH,
WHILE, nested) added with cuGraphAddNode, their conditions set by kernels through the device runtime's
cudaGraphSetConditional, CU_GRAPH_COND_ASSIGN_DEFAULT, and their errors; with the native launch queue and
without it."""

import random
import subprocess

import pytest

from chost import C_HOST, build_c_host, user_env

pytestmark = C_HOST


@pytest.fixture(scope="module")
def program(shim_libdir, tmp_path_factory):
    return build_c_host(shim_libdir, "graph_conditional.c", tmp_path_factory.mktemp("cond") / "graph_conditional")


@pytest.mark.parametrize("native", ["1", "0"])
def test_conditional_nodes(program, native):
    r = subprocess.run([program, str(random.randint(1, 10**6))], capture_output=True, text=True, timeout=300,
                       env=user_env(ZLUDA_CPU_NATIVE_QUEUE=native))
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr
    assert "Traceback" not in r.stderr
