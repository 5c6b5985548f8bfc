"""ZLUDA_MEMCHECK=1 through the real libcuda.so.1 (tests/driver/memcheck.c): every kind of bad access gives
700 and compute-sanitizer's report; correct programs (the C host's own and nvcc-built samples) report nothing."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chost import C_HOST, user_env, build_c_host

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = Path(HERE).parents[1]

pytestmark = C_HOST


@pytest.fixture(scope="module")
def exe(shim_libdir, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("memcheck") / "memcheck")
    build_c_host(shim_libdir, "memcheck.c", path)
    return path


def run(exe, mode, memcheck=True):
    env = user_env(ZLUDA_MEMCHECK="1") if memcheck else user_env()
    r = subprocess.run([exe, mode], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    return int(re.search(r"rc=(\d+)", r.stdout).group(1)), r.stderr


# mode -> (space, read/write, thread, what the address is, the nearest-allocation line or None)
CASES = {
    "oob": ("__global__", "write", "(16,0,0)", "out of bounds",
            r"and is 0 bytes after the nearest allocation at 0x[0-9a-f]+ of size 64 bytes"),
    "read": ("__global__", "read", "(14,0,0)", "out of bounds",
             r"and is 0 bytes after the nearest allocation at 0x[0-9a-f]+ of size 64 bytes"),
    "generic": ("__global__", "write", "(15,0,0)", "out of bounds",
                r"and is 0 bytes after the nearest allocation at 0x[0-9a-f]+ of size 64 bytes"),
    "pinned": ("__global__", "write", "(16,0,0)", "out of bounds",
               r"and is 0 bytes after the nearest host allocation at 0x[0-9a-f]+ of size 64 bytes"),
    "host": ("__global__", "write", "(0,0,0)", "out of bounds", None),
    "freed": ("__global__", "write", "(0,0,0)", "out of bounds", None),
    "misaligned": ("__global__", "write", "(0,0,0)", "misaligned", None),
    "shared": ("__shared__", "write", "(0,0,0)", "out of bounds",
               r"and is 64 bytes from the start of the block's \d+ bytes of shared memory"),
    "local": ("__local__", "write", "(0,0,0)", "out of bounds", None),
}
KERNEL = {"read": "get", "generic": "gput", "shared": "sh", "local": "loc"}
LINE = {"put": 14, "gput": 27, "get": 41, "sh": 53, "loc": 66}     # the access's line in memcheck.c's PTX


@pytest.mark.parametrize("mode", sorted(CASES))
def test_bad_access_is_700_with_the_sanitizer_report(exe, mode):
    rc, err = run(exe, mode)
    space, rw, thread, what, near = CASES[mode]
    kernel = KERNEL.get(mode, "put")
    assert rc == 700, err
    lines = [l for l in err.splitlines() if l.startswith("=========")]
    assert lines[0] == f"========= Invalid {space} {rw} of size 4 bytes", err
    assert re.fullmatch(rf"=========     at {kernel}\+0x[0-9a-f]+ in module\.ptx:{LINE[kernel]}", lines[1]), err
    assert lines[2] == f"=========     by thread {thread} in block (0,0,0)", err
    assert re.fullmatch(rf"=========     Address 0x[0-9a-f]+ is {what}", lines[3]), err
    if near:
        assert re.fullmatch(rf"=========     {near}", lines[4]), err
    assert sum(l.startswith("========= Invalid") for l in lines) == 1, err     # the first one only


def test_correct_kernels_report_nothing(exe):
    rc, err = run(exe, "ok")
    assert rc == 0 and "=========" not in err, err


def test_without_the_knob_a_host_pointer_write_goes_through(exe):
    """What happens today without memcheck: host memory is the same address space, the store succeeds."""
    rc, err = run(exe, "host", memcheck=False)
    assert rc == 0 and "=========" not in err, err


@pytest.mark.parametrize("name", ["matmul_tiled", "reduce_shared", "scan", "histogram", "coop_grid_sync",
                                  "managed_memory", "mapped_host", "symbols", "dynamic_shared"])
def test_samples_report_nothing(built_samples, shim_libdir, name):
    binary = built_samples / "ptx" / name
    env = dict(os.environ, ZLUDA_MEMCHECK="1")
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", str(binary)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600, errors="replace")
    assert r.returncode == 0 and r.stdout.split()[-1] == "PASS", r.stdout[-2000:] + r.stderr[-2000:]
    assert "=========" not in r.stderr and "=========" not in r.stdout, r.stderr[-3000:]
