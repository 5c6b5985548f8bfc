"""What the driver tests share for running programs through the real libcuda.so.1: a user's environment, C
hosts built with gcc against cuda.h, and Python (ctypes) scenarios each in a fresh process."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

CUDA_INC = "/usr/local/cuda/include"
HERE = os.path.dirname(os.path.abspath(__file__))

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
needs_cuda_h = pytest.mark.skipif(not os.path.isfile(os.path.join(CUDA_INC, "cuda.h")),
                                  reason="cuda.h not installed")
# For a module of C-host tests: `pytestmark = C_HOST`.
C_HOST = [needs_gcc, needs_cuda_h]


def user_env(**extra):
    """What a user who set nothing has: no PYTHONPATH, no ZLUDA_* or PTXRT_* settings."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith(("ZLUDA_", "PTXRT_"))}
    env.update(extra)
    return env


def build_c_host(shim_libdir, src, exe, libs=(), werror=True):
    """gcc `src` (a path; relative ones are under tests/driver) into `exe`, linked -lcuda against the shim
    with an rpath to it, the way a user's program links libcuda.so.1."""
    src = src if os.path.isabs(str(src)) else os.path.join(HERE, str(src))
    flags = ["-O1", "-Wall"] + (["-Werror"] if werror else [])
    subprocess.run(["gcc", *flags, "-I", CUDA_INC, str(src), "-o", str(exe), "-L", shim_libdir, "-lcuda",
                    *libs, f"-Wl,-rpath,{shim_libdir}"], check=True)
    return str(exe)


# The start of every ctypes scenario: the shim loaded by path (argv[1] is its directory) and a current
# primary context on request.
CTYPES_PRELUDE = """
import ctypes, sys, threading, time
lib = ctypes.CDLL(sys.argv[1] + "/libcuda.so.1")
P = ctypes.byref
def ok(r, what=""):
    assert r == 0, f"{what} -> {r}"
def primary():
    ok(lib.cuInit(0), "cuInit")
    ctx = ctypes.c_void_p()
    ok(lib.cuDevicePrimaryCtxRetain(P(ctx), 0))
    ok(lib.cuCtxSetCurrent(ctx))
    return ctx
"""


def run_py(shim_libdir, code, timeout=300, **env):
    """Run a ctypes scenario (CTYPES_PRELUDE + `code`) in a fresh interpreter with a user's environment."""
    return subprocess.run([sys.executable, "-c", CTYPES_PRELUDE + textwrap.dedent(code), shim_libdir],
                          env=user_env(**env), capture_output=True, text=True, timeout=timeout)
