"""libnvrtc.so.13 beside the shim: NVRTC programs built for a real sm_XX run through the shim (their cubin
is PTX for compute_XX), every other answer is NVIDIA's NVRTC's, and a missing NVRTC is an error code."""

import ctypes
import glob
import os
import random
import subprocess
import sys
import sysconfig

import pytest

from chost import CUDA_INC, C_HOST, user_env

WHEEL = glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "lib", "libnvrtc.so.13"))
NVRTC_INC = [d for d in glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "include"))
             + [CUDA_INC] if os.path.isfile(os.path.join(d, "nvrtc.h"))]
pytestmark = C_HOST + [
    pytest.mark.skipif(not WHEEL, reason="NVIDIA's NVRTC (the nvidia-cuda-nvrtc wheel) is not installed"),
    pytest.mark.skipif(not NVRTC_INC, reason="nvrtc.h not installed"),
]
NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7


@pytest.fixture(scope="module")
def prog(shim_libdir, tmp_path_factory):
    exe = tmp_path_factory.mktemp("nvrtc") / "nvrtc_vector_add"
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvrtc_vector_add.c")
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", CUDA_INC, "-I", NVRTC_INC[0], src, "-o", str(exe),
                    "-L", shim_libdir, "-lnvrtc", "-lcuda", f"-Wl,-rpath,{shim_libdir}"], check=True)
    return str(exe)


def run(prog, *options, **env):
    n = random.randint(1000, 5000)
    return subprocess.run([prog, str(random.getrandbits(31)), str(n), *options], capture_output=True,
                          text=True, timeout=300, env=user_env(**env))


@pytest.mark.parametrize("options", [["-arch=sm_86"], ["--gpu-architecture=sm_86"], ["-arch", "sm_86"],
                                     ["-default-device", "--gpu-architecture", "sm_80"]])
def test_cubin_for_a_real_arch_runs_through_the_shim(prog, options):
    r = run(prog, *options)
    assert r.returncode == 0 and r.stdout.strip() == "PASS", r.stdout + r.stderr


def test_the_program_links_our_nvrtc(prog, shim_libdir):
    out = subprocess.run(["ldd", prog], capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if "libnvrtc.so.13" in x)
    assert os.path.realpath(line.split("=>")[1].split("(")[0].strip()) == \
        os.path.realpath(os.path.join(shim_libdir, "libnvrtc.so.13"))


def _cubin_answers(lib_path, arch):
    """(compile, cubin size) results of one library for a program compiled with -arch=<arch>."""
    lib = ctypes.CDLL(lib_path)
    p = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(p), b'extern "C" __global__ void k(int *x) { *x = 1; }',
                                  b"k.cu", 0, None, None) == 0
    opts = (ctypes.c_char_p * 1)(f"-arch={arch}".encode())
    rc = lib.nvrtcCompileProgram(p, 1, opts)
    size = ctypes.c_size_t(12345)
    sr = lib.nvrtcGetCUBINSize(p, ctypes.byref(size))
    assert lib.nvrtcDestroyProgram(ctypes.byref(p)) == 0
    return rc, sr


def test_virtual_arch_cubin_is_nvidias_answer(shim_libdir, tmp_path):
    """A program that asked for compute_XX has no cubin, with NVIDIA's library or ours in front of it."""
    code = ("import sys; sys.path.insert(0, %r); from test_nvrtc import _cubin_answers; "
            "print(_cubin_answers(sys.argv[1], 'compute_86'))" % os.path.dirname(os.path.abspath(__file__)))
    answers = [subprocess.run([sys.executable, "-c", code, lib], capture_output=True, text=True, timeout=120,
                              env=user_env()).stdout.strip()
               for lib in (WHEEL[0], os.path.join(shim_libdir, "libnvrtc.so.13"))]
    assert answers[0] and answers[0] == answers[1], answers


def _image_target(lib_path, arch):
    lib = ctypes.CDLL(lib_path)
    p = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(p), b'extern "C" __global__ void k(int *x) { *x = 1; }',
                                  b"k.cu", 0, None, None) == 0
    assert lib.nvrtcCompileProgram(p, 1, (ctypes.c_char_p * 1)(f"-arch={arch}".encode())) == 0
    size = ctypes.c_size_t()
    assert lib.nvrtcGetCUBINSize(p, ctypes.byref(size)) == 0
    image = ctypes.create_string_buffer(b"\x5a" * size.value, size.value)
    assert lib.nvrtcGetCUBIN(p, image) == 0
    assert image.raw[-1:] == b"\0" and b"\0" not in image.raw[:-1]
    return next(x.split()[1] for x in image.raw[:-1].decode().splitlines() if x.startswith(".target"))


@pytest.mark.parametrize("arch", ["sm_75", "sm_90a", "sm_100f"])
def test_cubin_is_ptx_for_the_same_arch(shim_libdir, arch):
    """The architecture-specific (a) and family (f) variants keep their suffix: their PTX may need it."""
    code = ("import sys; sys.path.insert(0, %r); from test_nvrtc import _image_target; "
            "print(_image_target(sys.argv[1], sys.argv[2]))" % os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code, os.path.join(shim_libdir, "libnvrtc.so.13"), arch],
                       capture_output=True, text=True, timeout=120, env=user_env())
    assert r.returncode == 0 and r.stdout.strip() == arch, r.stdout + r.stderr


@pytest.mark.parametrize("where", ["missing", "itself"])
def test_without_nvidias_nvrtc_calls_answer_an_error(prog, shim_libdir, where):
    target = "/nonexistent/libnvrtc.so.13" if where == "missing" else os.path.join(shim_libdir, "libnvrtc.so.13")
    r = run(prog, "-arch=sm_86", ZLUDA_NVRTC=target)
    assert r.returncode == 1
    assert r.stdout.startswith("nvrtcCreateProgram(") and \
        r.stdout.split("->")[1].split() == [str(NVRTC_ERROR_BUILTIN_OPERATION_FAILURE),
                                            "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE"], r.stdout
    lines = [x for x in r.stderr.splitlines() if x]
    assert len(lines) == 1 and "ZLUDA_NVRTC" in lines[0] and target in lines[0], r.stderr


def test_zluda_nvrtc_names_the_library_or_its_directory(prog):
    for target in (WHEEL[0], os.path.dirname(WHEEL[0])):
        r = run(prog, "-arch=sm_86", ZLUDA_NVRTC=target)
        assert r.returncode == 0 and r.stdout.strip() == "PASS", r.stdout + r.stderr
