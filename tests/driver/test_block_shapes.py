"""A lazy kernel compiled for the block of its first launch (ptx/host_lazy.py, SPECIALIZE), from a C host through
the real libcuda.so.1 (tests/driver/block_shapes.c): one kernel launched with 13 blocks in turn, back to the first
shape, through cuLaunchKernel and cuLaunchKernelEx, every thread's output checked. The first shape's code and the
code for any block are the two compiles; ZLUDA_SPECIALIZE=0 makes it one, and a second run takes both from the
cache."""

import os
import re
import subprocess

import pytest

from chost import C_HOST, build_c_host, user_env

pytestmark = C_HOST


@pytest.fixture(scope="module")
def shapes_exe(shim_libdir, tmp_path_factory):
    return build_c_host(shim_libdir, "block_shapes.c", str(tmp_path_factory.mktemp("shapes") / "block_shapes"))


def run(exe, tmp_path, **env):
    log = tmp_path / "log"
    log.write_text("")
    e = user_env(ZLUDA_CACHE_DIR=str(tmp_path / "cache"), ZLUDA_LOG_FILE=str(log), ZLUDA_PROFILE="1", **env)
    r = subprocess.run([exe], env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr
    m = re.search(r"lazy kernels: (\d+) compiled .*?, (\d+) from the cache", log.read_text())
    assert m, log.read_text()
    return int(m.group(1)), int(m.group(2))


def test_one_kernel_many_blocks(shapes_exe, tmp_path):
    assert run(shapes_exe, tmp_path) == (2, 0)      # (16, 16, 1)'s code, then the code for any block
    assert run(shapes_exe, tmp_path) == (0, 2)


def test_without_specialization(shapes_exe, tmp_path):
    assert run(shapes_exe, tmp_path, ZLUDA_SPECIALIZE="0") == (1, 0)


def test_eager_modules_compile_for_any_block(shapes_exe, tmp_path):
    log = tmp_path / "log"
    e = user_env(ZLUDA_CACHE_DIR=str(tmp_path / "cache"), ZLUDA_LOG_FILE=str(log), ZLUDA_PROFILE="1",
                 CUDA_MODULE_LOADING="EAGER")
    r = subprocess.run([shapes_exe], env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr
    assert "lazy kernels" not in log.read_text() or "lazy kernels: 0 compiled" in log.read_text()
