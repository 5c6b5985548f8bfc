"""The zluda-py command: libdir prints only the directory, run puts the shim first for C and Python
programs, info lists the device through the shim, doctor reports a healthy installation."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli(*args, env=None, cwd=REPO, timeout=300):
    return subprocess.run([sys.executable, "-m", "zluda_py.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def test_libdir_prints_only_the_directory(shim_libdir):
    r = cli("libdir")
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("\n") and r.stdout.count("\n") == 1
    d = r.stdout.strip()
    assert os.path.samefile(d, shim_libdir)
    assert os.path.isfile(os.path.join(d, "libcuda.so.1")) and os.path.exists(os.path.join(d, "libcuda.so"))


def test_run_python_program_sees_shim_first(shim_libdir, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent("""
        import ctypes, os, sys
        print(os.environ["LD_LIBRARY_PATH"].split(":")[0])
        print(os.environ.get("ZLUDA_BACKEND"))
        lib = ctypes.CDLL("libcuda.so.1")  # resolved through LD_LIBRARY_PATH, as cuda-python does
        v = ctypes.c_int()
        print(lib.cuDriverGetVersion(ctypes.byref(v)), v.value, sys.argv[1:])
    """))
    env = dict(os.environ, LD_LIBRARY_PATH="/nonexistent")
    r = cli("run", "--backend", "cpu", "--", sys.executable, str(script), "a", "--b", env=env)
    assert r.returncode == 0, r.stderr
    first, backend, result = r.stdout.splitlines()
    assert os.path.samefile(first, shim_libdir)
    assert backend == "cpu"
    assert result == "0 13050 ['a', '--b']"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_run_c_program_linked_without_rpath(shim_libdir, tmp_path):
    src = tmp_path / "prog.c"
    src.write_text(textwrap.dedent("""
        #include <stdio.h>
        int cuDriverGetVersion(int *);
        int main(void) { int v = 0; int r = cuDriverGetVersion(&v); printf("%d %d\\n", r, v); return r; }
    """))
    exe = tmp_path / "prog"
    subprocess.run(["gcc", str(src), "-o", str(exe), f"-L{shim_libdir}", "-lcuda"], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    alone = subprocess.run([str(exe)], capture_output=True, text=True, env=env)
    assert alone.returncode != 0  # without `run` the loader cannot find libcuda.so.1
    r = cli("run", "--", str(exe), env=env)
    assert r.returncode == 0 and r.stdout.strip() == "0 13050", r.stdout + r.stderr


def test_run_missing_program():
    r = cli("run", "--", "/nonexistent/program")
    assert r.returncode == 127 and "cannot run" in r.stderr
    r = cli("run")
    assert r.returncode == 2


def test_info_lists_devices_through_the_shim(shim_libdir):
    r = cli("info", env=dict(os.environ, ZLUDA_BACKEND="cpu"))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "driver version: 13050" in out
    assert "cpu: usable" in out
    assert "devices: " in out and "device 0: " in out
    assert "  warp_size = 32" in out
    assert "  max_threads_per_block = 1024" in out


def test_doctor_reports_healthy_installation(shim_libdir):
    r = cli("doctor")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[ok] shim loads from a C program (dlopen RTLD_LOCAL)" in r.stdout
    assert "[ok] shim loads in a running Python" in r.stdout
    assert "hip backend:" in r.stdout
    assert "no problems found" in r.stdout
