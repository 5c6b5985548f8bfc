"""Lazy kernels from a C host through the real libcuda.so.1 (tests/driver/lazy_modules.c): LAZY compiles only
the kernels launched, EAGER all at load; a kernel using an instruction the compiler lacks fails alone."""

import os
import re
import subprocess

import pytest

from chost import C_HOST, build_c_host

NOT_SUPPORTED = 801

pytestmark = C_HOST


@pytest.fixture(scope="module")
def lazy_exe(shim_libdir, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("lazy") / "lazy_modules")
    build_c_host(shim_libdir, "lazy_modules.c", exe)
    return exe


def run(exe, tmp_path, kernels, launches, **env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "CUDA_MODULE_LOADING") and not k.startswith("ZLUDA_")}
    (tmp_path / "log").write_text("")
    e.update(ZLUDA_CACHE_DIR=str(tmp_path / "cache"), ZLUDA_LOG_FILE=str(tmp_path / "log"), ZLUDA_PROFILE="1",
             ZLUDA_LOG="1", **env)
    r = subprocess.run([exe, str(kernels), str(launches)], env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr
    figures = dict(re.findall(r"^(\w+) (-?[\d.]+)$", r.stdout, re.M))
    log = (tmp_path / "log").read_text()
    m = re.search(r"lazy kernels: (\d+) compiled .*?, (\d+) from the cache", log)
    return figures, (int(m.group(1)), int(m.group(2))) if m else (0, 0), log


def test_lazy_compiles_only_what_is_launched_and_the_gap_fails_its_launch(lazy_exe, tmp_path):
    figures, (compiled, hits), log = run(lazy_exe, tmp_path, 40, 4)
    assert figures["loaded_before_launch"] == "0"
    assert figures["gap_get"] == "0" and figures["gap_launch"] == str(NOT_SUPPORTED)
    assert "kernel gap: cannot be compiled" in log and "stacksave" in log
    assert (compiled, hits) == (4, 0), log          # k0 is launched again: compiled once
    # a second run: every kernel it launches is a cache hit, none compiled
    figures, (compiled, hits), log = run(lazy_exe, tmp_path, 40, 4)
    assert (compiled, hits) == (0, 4) and figures["gap_launch"] == str(NOT_SUPPORTED), log


def test_eager_compiles_everything_at_load_and_refuses_the_gap_at_get_function(lazy_exe, tmp_path):
    figures, _, log = run(lazy_exe, tmp_path, 6, 3, CUDA_MODULE_LOADING="EAGER")
    assert figures["loaded_before_launch"] == "1"
    assert figures["gap_get"] == str(NOT_SUPPORTED) and "gap_launch" not in figures
    assert "stacksave" in log
    assert "module loads: 1 compiled" in log        # the whole module, then kernel by kernel


def test_an_eagerly_loaded_module_with_a_gap_is_a_cache_hit_the_second_time(lazy_exe, tmp_path):
    run(lazy_exe, tmp_path, 3, 3, CUDA_MODULE_LOADING="EAGER")
    figures, _, log = run(lazy_exe, tmp_path, 3, 3, CUDA_MODULE_LOADING="EAGER")
    assert "module loads: 0 compiled" in log and figures["gap_get"] == str(NOT_SUPPORTED), log
