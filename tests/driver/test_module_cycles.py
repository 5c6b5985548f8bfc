"""Unload frees, from a C host through the real libcuda.so.1 (tests/driver/module_cycles.c): 1,000 module
load/unload cycles, 500 library cycles and 500 context create/destroy cycles with a module each grow the
resident set by less than 8 MB; a second run of a program compiles nothing (ZLUDA_PROFILE says so)."""

import re
import subprocess

import pytest

from chost import C_HOST, build_c_host, user_env

LIMIT_KB = 8 * 1024

pytestmark = C_HOST


@pytest.fixture(scope="module")
def cycles_exe(shim_libdir, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("cycles") / "module_cycles")
    build_c_host(shim_libdir, "module_cycles.c", exe)
    return exe


def run(exe, tmp_path, *args, **env):
    e = user_env(ZLUDA_CACHE_DIR=str(tmp_path / "cache"), ZLUDA_LOG_FILE=str(tmp_path / "log"), **env)
    r = subprocess.run([exe, *map(str, args)], env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr
    return r.stdout


def test_unloads_and_context_destroys_free_what_they_loaded(cycles_exe, tmp_path):
    out = run(cycles_exe, tmp_path, 1000, 500, 500)
    growth = {m.group(1): int(m.group(3)) for m in re.finditer(r"^(\w+) (\d+): (-?\d+) KB$", out, re.M)}
    assert set(growth) == {"modules", "libraries", "contexts"}, out
    assert all(kb < LIMIT_KB for kb in growth.values()), growth


def test_a_second_run_compiles_nothing(cycles_exe, tmp_path):
    """ZLUDA_PROFILE's module lines: the first run compiles the module once (every later load is a hit),
    the second run compiles none."""
    def loads():
        (tmp_path / "log").write_text("")
        run(cycles_exe, tmp_path, 3, 2, 2, ZLUDA_PROFILE="1")
        text = (tmp_path / "log").read_text()
        m = re.search(r"module loads: (\d+) compiled .*?, (\d+) from the cache", text)
        assert m, text
        return int(m.group(1)), int(m.group(2))
    # after 50 warm-up cycles each: 53 modules, 52 libraries, 52 contexts' modules, of one PTX text
    assert loads() == (1, 156)
    assert loads() == (0, 157)


def test_the_cache_bound_comes_from_the_environment(monkeypatch):
    from zluda_py.backends.cpu.module import compile_options
    monkeypatch.setenv("ZLUDA_CACHE_MAX_MB", "5")
    assert compile_options()["cache_max_mb"] == 5
    monkeypatch.setenv("ZLUDA_CACHE_MAX_MB", "lots")
    assert "cache_max_mb" not in compile_options()          # the default applies (and a line says so)
