"""libnvJitLink.so.13 beside the shim: a C program built against NVIDIA's nvJitLink.h links PTX modules and an
NVRTC-made LTO-IR kernel for a real sm_XX and runs the images through the shim; bad links get the answers an
H200 with NVIDIA's nvJitLink gave the same program (tests/data/nvidia_nvjitlink_answers.json); numba-cuda,
which compiles to LTO-IR whenever a working nvJitLink is loaded, links through the front."""

import glob
import json
import os
import random
import subprocess
import sys
import sysconfig

import pytest

from chost import CUDA_INC, C_HOST, user_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PURELIB = sysconfig.get_paths()["purelib"]
INCLUDE = [d for d in glob.glob(os.path.join(PURELIB, "nvidia", "*", "include"))
           if os.path.isfile(os.path.join(d, "nvJitLink.h")) and os.path.isfile(os.path.join(d, "nvrtc.h"))]
NVIDIA_LIB = glob.glob(os.path.join(PURELIB, "nvidia", "*", "lib", "libnvJitLink.so.13"))
pytestmark = C_HOST + [
    pytest.mark.skipif(not INCLUDE or not NVIDIA_LIB,
                       reason="NVIDIA's nvJitLink and NVRTC wheels (nvidia-nvjitlink, nvidia-cuda-nvrtc) are not "
                              "installed (scripts/setup --clients)"),
]
with open(os.path.join(ROOT, "tests", "data", "nvidia_nvjitlink_answers.json")) as f:
    NVIDIA = json.load(f)


@pytest.fixture(scope="module")
def prog(shim_libdir, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("nvjitlink") / "nvjitlink_link")
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", CUDA_INC, "-I", INCLUDE[0],
                    os.path.join(HERE, "nvjitlink_link.c"), "-o", exe, "-L", shim_libdir, "-lnvJitLink", "-lnvrtc",
                    "-lcuda", f"-Wl,-rpath,{shim_libdir}"], check=True)
    return exe


def answers(prog, **env):
    r = subprocess.run([prog, str(random.getrandbits(20)), "sm_86"], capture_output=True, text=True, timeout=300,
                       env=user_env(**env))
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[-1:] == ["DONE"], r.stdout + r.stderr
    return dict(ln.split(" ", 1) for ln in lines[:-1]), r.stderr


def test_the_program_links_our_front(prog, shim_libdir):
    out = subprocess.run(["ldd", prog], capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if "libnvJitLink.so.13" in x)
    assert os.path.realpath(line.split("=>")[1].split("(")[0].strip()) == \
        os.path.realpath(os.path.join(shim_libdir, "libnvJitLink.so.13"))


def test_links_run_and_bad_links_get_nvidias_answers(prog):
    got, logs = answers(prog)
    assert got.pop("link_ptx") == "PASS" and got.pop("lto") == "PASS", (got, logs)
    assert got == NVIDIA["answers"], logs
    assert "unknown instruction 'frob'" in logs and "nowhere" in logs


def test_without_nvidias_library_ptx_still_links_and_lto_ir_is_an_error(prog):
    got, logs = answers(prog, ZLUDA_NVJITLINK="/nonexistent")
    assert got["link_ptx"] == "PASS" and got["lto"] == "FAIL", (got, logs)
    assert got["version"].split()[0] != "0"      # a framework then takes the driver's linker (numba does)
    assert got["bad_ptx"] == NVIDIA["answers"]["bad_ptx"]


NUMBA = r"""
import numpy as np
from numba import cuda
@cuda.jit
def axpb(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * a[i] + 1     # exact product: the same with or without contraction into an fma
a = np.random.default_rng().standard_normal(1000).astype(np.float32)
out = cuda.to_device(np.full(1000, np.nan, np.float32))
axpb[8, 128](cuda.to_device(a), out)
print("PASS" if np.array_equal(out.copy_to_host(), 2 * a + 1) else "FAIL")
"""


def test_numba_links_its_lto_ir_through_the_front(shim_libdir):
    pytest.importorskip("numba.cuda", reason="numba-cuda not installed")
    env = user_env(ZLUDA_TRACE="1", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--backend", "cpu", "--", sys.executable, "-c",
                        NUMBA], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "PASS", r.stdout + r.stderr[-3000:]
    # the front hands the driver's linker the PTX NVIDIA's nvJitLink made of numba's LTO-IR
    assert "name='lto.ptx'" in r.stderr
