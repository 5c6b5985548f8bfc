"""Modules, libraries, links and launches through the built libcuda.so.1 (ctypes in this process, a C
driver-API program, and unmodified nvcc-built runtime-API programs), including every bad-input path."""

import ctypes
import importlib.util
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
CUDA_INC = "/usr/local/cuda/include"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

needs_nvcc = pytest.mark.skipif(not os.path.exists(NVCC), reason="nvcc (CUDA toolkit) is not installed")
needs_compiler = pytest.mark.skipif(importlib.util.find_spec("ptx.host") is None,
                                    reason="the PTX compiler's host target (ptx.host) is not in this checkout")
pytestmark = needs_nvcc

KERNELS = r"""
#include <cassert>
__device__ int base_value;
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void mixed(char c, double d, short s, long long *out, int k) {
    out[0] = c; out[1] = (long long)(d * 4.0); out[2] = s; out[3] = k;
}
extern "C" __global__ void add_base(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i + base_value;
}
extern "C" __global__ void boom(int *p) {
    if (threadIdx.x == 3) __trap();
    p[threadIdx.x] = 1;
}
extern "C" __global__ void must_not_be_seven(int v) { assert(v != 7); }
"""

LINK_MAIN = r"""
extern __device__ float twice(float x);
extern "C" __global__ void use_twice(float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = twice(y[i]) + 1.0f;
}
"""
LINK_LIB = r"""
__device__ float twice(float x) { return 2.0f * x; }
"""

CUDA_SUCCESS = 0
INVALID_VALUE = 1
INVALID_IMAGE = 200
NO_BINARY_FOR_GPU = 209
INVALID_HANDLE = 400
NOT_FOUND = 500
ASSERT = 710
LAUNCH_FAILED = 719


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    d = tmp_path_factory.mktemp("modules")
    for name, src in (("k.cu", KERNELS), ("link_main.cu", LINK_MAIN), ("link_lib.cu", LINK_LIB)):
        (d / name).write_text(src)

    def run(out, src, *flags):
        path = d / out
        if not path.exists():
            subprocess.run([NVCC, *flags, "-o", str(path), str(d / src)], check=True, capture_output=True)
        return path
    run.dir = d
    return run


@pytest.fixture(scope="module")
def cu(shim_libdir):
    lib = ctypes.CDLL(os.path.join(shim_libdir, "libcuda.so.1"))
    assert lib.cuInit(0) == 0
    ctx = ctypes.c_uint64()
    assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert lib.cuCtxSetCurrent(ctypes.c_uint64(ctx.value)) == 0
    yield lib
    lib.cuDevicePrimaryCtxRelease_v2(0)


def ok(r):
    assert r == CUDA_SUCCESS, r


class Buf:
    """Device memory through the driver (allocation and copies), freed at exit."""

    def __init__(self, cu, array):
        self.cu, self.nbytes = cu, array.nbytes
        self.ptr = ctypes.c_uint64()
        ok(cu.cuMemAlloc_v2(ctypes.byref(self.ptr), ctypes.c_size_t(array.nbytes)))
        self.put(array)

    def put(self, array):
        ok(self.cu.cuMemcpyHtoD_v2(ctypes.c_uint64(self.ptr.value), array.ctypes.data_as(ctypes.c_void_p),
                                   ctypes.c_size_t(array.nbytes)))

    def get(self, dtype):
        out = np.empty(self.nbytes // np.dtype(dtype).itemsize, dtype)
        ok(self.cu.cuCtxSynchronize())
        ok(self.cu.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(self.ptr.value),
                                   ctypes.c_size_t(self.nbytes)))
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cu.cuMemFree_v2(ctypes.c_uint64(self.ptr.value))


def load_data(cu, image: bytes):
    buf = ctypes.create_string_buffer(image, len(image) + 1)
    mod = ctypes.c_uint64()
    r = cu.cuModuleLoadData(ctypes.byref(mod), buf)
    return r, mod.value


def get_function(cu, mod, name):
    f = ctypes.c_uint64()
    r = cu.cuModuleGetFunction(ctypes.byref(f), ctypes.c_uint64(mod), name.encode())
    return r, f.value


def launch(cu, f, grid, block, args=None, extra=None, shared=0, stream=0):
    g = list(grid) + [1] * (3 - len(grid))
    b = list(block) + [1] * (3 - len(block))
    return cu.cuLaunchKernel(ctypes.c_uint64(f), *[ctypes.c_uint(x) for x in g + b], ctypes.c_uint(shared),
                             ctypes.c_uint64(stream), args, extra)


def kernel_params(*values):
    """A void*[] of pointers to each ctypes value (kept alive by the returned tuple)."""
    arr = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    return arr, values


def run_saxpy(cu, f, n=1000, extra_mode=False):
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.standard_normal())
    with Buf(cu, x) as dx, Buf(cu, y) as dy:
        if extra_mode:
            packed = struct.pack("<f4xQQi4x", a, dx.ptr.value, dy.ptr.value, n)[:28]
            r = launch_extra(cu, f, ((n + 127) // 128,), (128,), packed)
        else:
            arr, keep = kernel_params(ctypes.c_float(a), ctypes.c_uint64(dx.ptr.value),
                                      ctypes.c_uint64(dy.ptr.value), ctypes.c_int(n))
            r = launch(cu, f, ((n + 127) // 128,), (128,), arr)
        ok(r)
        got = dy.get(np.float32)
    # nvcc contracts a*x + y into fma.rn.f32: the exact product (float64 holds it) plus y, rounded once
    want = (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def launch_extra(cu, f, grid, block, packed: bytes, size=None):
    pbuf = ctypes.create_string_buffer(packed, len(packed))
    psize = ctypes.c_size_t(len(packed) if size is None else size)
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(pbuf), 2, ctypes.addressof(psize), 0)
    return launch(cu, f, grid, block, None, extra)


@pytest.fixture(scope="module")
def kptx(build):
    return build("k.ptx", "k.cu", "-ptx", "-arch=compute_86").read_bytes()


# --- images that must be refused before any compiling -----------------------------------------------

def test_sass_only_newer_ptx_and_corrupt_images(cu, build):
    sass = build("k_sass.fatbin", "k.cu", "-fatbin", "-gencode", "arch=compute_86,code=sm_86").read_bytes()
    assert load_data(cu, sass)[0] == NO_BINARY_FOR_GPU
    newer = build("k90.fatbin", "k.cu", "-fatbin", "-gencode", "arch=compute_90,code=compute_90").read_bytes()
    assert load_data(cu, newer)[0] == NO_BINARY_FOR_GPU
    cubin = build("k.cubin", "k.cu", "-cubin", "-arch=sm_86").read_bytes()
    assert load_data(cu, cubin)[0] == NO_BINARY_FOR_GPU
    ptx90 = build("k90.ptx", "k.cu", "-ptx", "-arch=compute_90").read_bytes()
    assert load_data(cu, ptx90)[0] == 218                  # CUDA_ERROR_INVALID_PTX, as the JIT says
    good = build("k86.fatbin", "k.cu", "-fatbin", "-gencode", "arch=compute_86,code=compute_86").read_bytes()
    bad_magic = b"\x51" + good[1:]
    assert load_data(cu, bad_magic)[0] == INVALID_IMAGE
    lying = good[:8] + struct.pack("<Q", 1 << 40) + good[16:]
    assert load_data(cu, lying)[0] == INVALID_IMAGE
    bad_stream = bytearray(good)
    bad_stream[16 + 80:16 + 80 + 16] = b"\xee" * 16
    assert load_data(cu, bytes(bad_stream))[0] == INVALID_IMAGE
    lz4 = build("k86s.fatbin", "k.cu", "-fatbin", "-gencode", "arch=compute_86,code=compute_86",
                "--compress-mode=speed").read_bytes()
    bad_lz4 = bytearray(lz4)
    bad_lz4[16 + 80:16 + 80 + 8] = b"\xff" * 8
    assert load_data(cu, bytes(bad_lz4))[0] == INVALID_IMAGE
    mod = ctypes.c_uint64()
    assert cu.cuModuleLoadData(ctypes.byref(mod), None) == INVALID_VALUE
    assert cu.cuModuleLoad(ctypes.byref(mod), b"/nonexistent/k.ptx") == 301   # CUDA_ERROR_FILE_NOT_FOUND
    lib = ctypes.c_uint64()
    buf = ctypes.create_string_buffer(sass)
    assert cu.cuLibraryLoadData(ctypes.byref(lib), buf, None, None, 0, None, None, 0) == NO_BINARY_FOR_GPU
    # the older runtimes' path: CUDART_INTERFACE slots 1, 6 (wrapper) and 8 (fatbin header)
    slot1, slot6, slot8 = cudart_load_slots(cu)
    wrapper = ctypes.create_string_buffer(struct.pack("<IIQQ", 0x466243B1, 1, ctypes.addressof(buf), 0))
    assert slot1(ctypes.byref(mod), wrapper) == NO_BINARY_FOR_GPU
    assert slot6(ctypes.byref(mod), wrapper, None, None, 0) == NO_BINARY_FOR_GPU
    assert slot8(buf, ctypes.byref(mod), None, None, 0) == NO_BINARY_FOR_GPU
    assert slot8(ctypes.create_string_buffer(bad_magic), ctypes.byref(mod), None, None, 0) == INVALID_IMAGE


def cudart_load_slots(cu):
    table = ctypes.c_void_p()
    ok(cu.cuGetExportTable(ctypes.byref(table), bytes.fromhex("6bd5fb6c5bf4e74a8987d93912fd9df9")))
    slots = (ctypes.c_uint64 * 9).from_address(table.value)
    p, u64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)
    return (ctypes.CFUNCTYPE(ctypes.c_int, u64p, p)(slots[1]),
            ctypes.CFUNCTYPE(ctypes.c_int, u64p, p, p, p, ctypes.c_uint32)(slots[6]),
            ctypes.CFUNCTYPE(ctypes.c_int, p, u64p, p, p, ctypes.c_uint32)(slots[8]))


def test_bad_images_log_what_they_carry(shim_libdir, build, tmp_path):
    sass = build("k_sass.fatbin", "k.cu", "-fatbin", "-gencode", "arch=compute_86,code=sm_86")
    newer = build("k90.fatbin", "k.cu", "-fatbin", "-gencode", "arch=compute_90,code=compute_90")
    script = tmp_path / "bad.py"
    script.write_text(textwrap.dedent(f"""
        import ctypes
        cu = ctypes.CDLL({os.path.join(shim_libdir, "libcuda.so.1")!r})
        assert cu.cuInit(0) == 0
        ctx = ctypes.c_uint64()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
        for path in ({str(sass)!r}, {str(newer)!r}):
            data = open(path, "rb").read()
            mod = ctypes.c_uint64()
            print(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.create_string_buffer(data)))
    """))
    env = dict(os.environ, ZLUDA_LOG="1", ZLUDA_CC="8.6")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["209", "209"]
    lines = [ln for ln in p.stderr.splitlines() if "cuModuleLoadData" in ln]
    assert len(lines) == 2, p.stderr
    assert "SASS sm_86" in lines[0] and "no PTX" in lines[0]
    assert "sm_90" in lines[1] and "newer" in lines[1]


# --- loading and launching --------------------------------------------------------------------------

@needs_compiler
def test_ptx_text_kernel_params_and_extra(cu, kptx):
    r, mod = load_data(cu, kptx)
    ok(r)
    r, f = get_function(cu, mod, "saxpy")
    ok(r)
    run_saxpy(cu, f)
    run_saxpy(cu, f, n=777, extra_mode=True)
    assert get_function(cu, mod, "no_such_kernel")[0] == NOT_FOUND
    # parameter layout as the driver reports it
    offs = []
    for i in range(4):
        off, size = ctypes.c_size_t(), ctypes.c_size_t()
        ok(cu.cuFuncGetParamInfo(ctypes.c_uint64(f), ctypes.c_size_t(i), ctypes.byref(off), ctypes.byref(size)))
        offs.append((off.value, size.value))
    assert offs == [(0, 4), (8, 8), (16, 8), (24, 4)]
    off = ctypes.c_size_t()
    assert cu.cuFuncGetParamInfo(ctypes.c_uint64(f), ctypes.c_size_t(4), ctypes.byref(off), None) == INVALID_VALUE
    name = ctypes.c_char_p()
    ok(cu.cuFuncGetName(ctypes.byref(name), ctypes.c_uint64(f)))
    assert name.value == b"saxpy"
    owner = ctypes.c_uint64()
    ok(cu.cuFuncGetModule(ctypes.byref(owner), ctypes.c_uint64(f)))
    assert owner.value == mod
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))
    assert launch(cu, f, (1,), (1,), None) == INVALID_HANDLE
    assert cu.cuModuleUnload(ctypes.c_uint64(mod)) == INVALID_HANDLE


@needs_compiler
def test_extra_and_param_errors(cu, kptx):
    ok((r_mod := load_data(cu, kptx))[0])
    mod = r_mod[1]
    f = get_function(cu, mod, "mixed")[1]
    rng = random.Random()
    c, d, s, k = rng.randrange(-128, 128), rng.uniform(-1e6, 1e6), rng.randrange(-30000, 30000), rng.randrange(1 << 30)
    out = np.full(4, -12345, np.int64)
    with Buf(cu, out) as dout:
        # char@0, double@8, short@16, pointer@24, int@32: 36 bytes
        packed = struct.pack("<b7xdh6xQi", c, d, s, dout.ptr.value, k)
        assert len(packed) == 36
        ok(launch_extra(cu, f, (1,), (1,), packed))
        got = dout.get(np.int64)
        assert list(got) == [c, int(d * 4.0), s, k]
        # sizes that do not match the kernel's parameter buffer, as NVIDIA's driver answers them: a shorter
        # one launches with the rest zero (k loses its top byte), a longer one is LAUNCH_OUT_OF_RESOURCES
        ok(launch_extra(cu, f, (1,), (1,), packed, size=35))
        assert list(dout.get(np.int64)) == [c, int(d * 4.0), s, k & 0xFFFFFF]
        assert launch_extra(cu, f, (1,), (1,), packed, size=100) == 701
        # kernelParams and extra together, and neither for a kernel with parameters
        pbuf = ctypes.create_string_buffer(packed)
        psize = ctypes.c_size_t(36)
        extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(pbuf), 2, ctypes.addressof(psize), 0)
        arr, keep = kernel_params(ctypes.c_int(1))
        assert launch(cu, f, (1,), (1,), arr, extra) == INVALID_VALUE
        assert launch(cu, f, (1,), (1,), None, None) == INVALID_VALUE
        bad_key = (ctypes.c_void_p * 3)(7, 0, 0)
        assert launch(cu, f, (1,), (1,), None, bad_key) == INVALID_VALUE
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


@needs_compiler
def test_launch_configuration_errors(cu, kptx):
    mod = load_data(cu, kptx)[1]
    f = get_function(cu, mod, "saxpy")[1]
    x = np.zeros(4, np.float32)
    with Buf(cu, x) as dx:
        arr, keep = kernel_params(ctypes.c_float(1), ctypes.c_uint64(dx.ptr.value), ctypes.c_uint64(dx.ptr.value),
                                  ctypes.c_int(0))
        assert launch(cu, f, (1,), (1025,), arr) == INVALID_VALUE
        assert launch(cu, f, (1,), (1, 1, 65), arr) == INVALID_VALUE
        assert launch(cu, f, (1,), (64, 32), arr) == INVALID_VALUE          # 2048 threads
        assert launch(cu, f, (0,), (32,), arr) == INVALID_VALUE
        assert launch(cu, f, (1, 65536), (32,), arr) == INVALID_VALUE
        assert launch(cu, f, (1,), (0,), arr) == INVALID_VALUE
        assert launch(cu, f, (1,), (32,), arr, shared=48 * 1024 + 1) == INVALID_VALUE
        maxdyn = ctypes.c_int()
        ok(cu.cuFuncGetAttribute(ctypes.byref(maxdyn), 8, ctypes.c_uint64(f)))
        assert maxdyn.value == 48 * 1024
        optin = ctypes.c_int()
        ok(cu.cuDeviceGetAttribute(ctypes.byref(optin), 97, 0))
        if optin.value > 48 * 1024:
            ok(cu.cuFuncSetAttribute(ctypes.c_uint64(f), 8, optin.value))
            ok(launch(cu, f, (1,), (32,), arr, shared=optin.value))
            assert cu.cuFuncSetAttribute(ctypes.c_uint64(f), 8, optin.value + 1) == INVALID_VALUE
        ok(launch(cu, f, (1,), (1024,), arr))
        ok(cu.cuCtxSynchronize())
        threads = ctypes.c_int()
        ok(cu.cuFuncGetAttribute(ctypes.byref(threads), 0, ctypes.c_uint64(f)))
        assert threads.value == 1024
        nblocks = ctypes.c_int()
        ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(nblocks), ctypes.c_uint64(f), 256,
                                                            ctypes.c_size_t(0)))
        assert nblocks.value >= 1
        grid, block = ctypes.c_int(), ctypes.c_int()
        ok(cu.cuOccupancyMaxPotentialBlockSize(ctypes.byref(grid), ctypes.byref(block), ctypes.c_uint64(f), None,
                                               ctypes.c_size_t(0), 0))
        assert 32 <= block.value <= 1024 and grid.value >= 1
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


@needs_compiler
@pytest.mark.parametrize("mode", ["default", "speed", "none"])
def test_fatbin_modules(cu, build, mode):
    image = build(f"k86_{mode}.fatbin", "k.cu", "-fatbin", "-gencode", "arch=compute_86,code=compute_86",
                  f"--compress-mode={mode}").read_bytes()
    r, mod = load_data(cu, image)
    ok(r)
    run_saxpy(cu, get_function(cu, mod, "saxpy")[1])
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))
    # cudart's way: a fatbin wrapper pointing at the fatbin, through cuModuleLoadFatBinary
    fb = ctypes.create_string_buffer(image)
    wrapper = ctypes.create_string_buffer(struct.pack("<IIQQ", 0x466243B1, 1, ctypes.addressof(fb), 0))
    m2 = ctypes.c_uint64()
    ok(cu.cuModuleLoadFatBinary(ctypes.byref(m2), wrapper))
    run_saxpy(cu, get_function(cu, m2.value, "saxpy")[1])
    ok(cu.cuModuleUnload(m2))
    _slot1, slot6, slot8 = cudart_load_slots(cu)
    ok(slot6(ctypes.byref(m2), wrapper, None, None, 0))
    run_saxpy(cu, get_function(cu, m2.value, "saxpy")[1])
    ok(cu.cuModuleUnload(m2))
    ok(slot8(fb, ctypes.byref(m2), None, None, 0))
    run_saxpy(cu, get_function(cu, m2.value, "saxpy")[1])
    ok(cu.cuModuleUnload(m2))


@needs_compiler
def test_globals_library_and_kernel_handles(cu, build):
    image = build("k_default.fatbin", "k.cu", "-fatbin").read_bytes()   # SASS + PTX for 75
    code = ctypes.create_string_buffer(image)
    lib = ctypes.c_uint64()
    ok(cu.cuLibraryLoadData(ctypes.byref(lib), code, None, None, 0, None, None, 0))
    count = ctypes.c_uint()
    ok(cu.cuLibraryGetKernelCount(ctypes.byref(count), lib))
    assert count.value == 5
    kernels = (ctypes.c_uint64 * 5)()
    ok(cu.cuLibraryEnumerateKernels(kernels, 5, lib))
    names = set()
    for k in kernels:
        name = ctypes.c_char_p()
        ok(cu.cuKernelGetName(ctypes.byref(name), ctypes.c_uint64(k)))
        names.add(name.value.decode())
    assert names == {"saxpy", "mixed", "add_base", "boom", "must_not_be_seven"}
    k = ctypes.c_uint64()
    ok(cu.cuLibraryGetKernel(ctypes.byref(k), lib, b"add_base"))
    assert cu.cuLibraryGetKernel(ctypes.byref(ctypes.c_uint64()), lib, b"nope") == NOT_FOUND
    gptr, gsize = ctypes.c_uint64(), ctypes.c_size_t()
    ok(cu.cuLibraryGetGlobal(ctypes.byref(gptr), ctypes.byref(gsize), lib, b"base_value"))
    assert gsize.value == 4
    assert cu.cuLibraryGetGlobal(ctypes.byref(gptr), ctypes.byref(gsize), lib, b"nope") == NOT_FOUND
    base = random.randrange(1 << 20)
    ok(cu.cuMemcpyHtoD_v2(gptr, ctypes.byref(ctypes.c_int(base)), ctypes.c_size_t(4)))
    n = 3000
    out = np.full(n, -1, np.int32)
    with Buf(cu, out) as dout:
        arr, keep = kernel_params(ctypes.c_uint64(dout.ptr.value), ctypes.c_int(n))
        ok(launch(cu, k.value, ((n + 255) // 256,), (256,), arr))      # the CUkernel itself, as cudart does
        # a bad shape through the CUkernel (cudart's path) is CUDA_ERROR_INVALID_VALUE, as an H200 answers
        assert launch(cu, k.value, (1,), (2048,), arr) == INVALID_VALUE
        assert launch(cu, k.value, (0,), (32,), arr) == INVALID_VALUE
        np.testing.assert_array_equal(dout.get(np.int32), np.arange(n) + base)
        dout.put(out)
        f = ctypes.c_uint64()
        ok(cu.cuKernelGetFunction(ctypes.byref(f), k))
        ok(launch(cu, f.value, ((n + 255) // 256,), (256,), arr))
        np.testing.assert_array_equal(dout.get(np.int32), np.arange(n) + base)
    mod = ctypes.c_uint64()
    ok(cu.cuLibraryGetModule(ctypes.byref(mod), lib))
    mptr, msize = ctypes.c_uint64(), ctypes.c_size_t()
    ok(cu.cuModuleGetGlobal_v2(ctypes.byref(mptr), ctypes.byref(msize), mod, b"base_value"))
    assert (mptr.value, msize.value) == (gptr.value, 4)
    v = ctypes.c_int()
    ok(cu.cuKernelGetAttribute(ctypes.byref(v), 0, k, 0))
    assert v.value == 1024
    off, size = ctypes.c_size_t(), ctypes.c_size_t()
    ok(cu.cuKernelGetParamInfo(k, ctypes.c_size_t(1), ctypes.byref(off), ctypes.byref(size)))
    assert (off.value, size.value) == (8, 4)
    ok(cu.cuLibraryUnload(lib))
    assert launch(cu, k.value, (1,), (1,), None) == INVALID_HANDLE
    assert cu.cuLibraryUnload(lib) == INVALID_HANDLE


@needs_compiler
def test_link_ptx_inputs(cu, build):
    main = build("link_main.ptx", "link_main.cu", "-ptx", "-rdc=true", "-arch=compute_86").read_bytes()
    dep = build("link_lib.ptx", "link_lib.cu", "-ptx", "-rdc=true", "-arch=compute_86").read_bytes()
    state = ctypes.c_uint64()
    ok(cu.cuLinkCreate_v2(0, None, None, ctypes.byref(state)))
    for data, name in ((main, b"main.ptx"), (dep, b"lib.ptx")):
        buf = ctypes.create_string_buffer(data)
        ok(cu.cuLinkAddData_v2(state, 1, buf, ctypes.c_size_t(len(data) + 1), name, 0, None, None))
    cubin, size = ctypes.c_void_p(), ctypes.c_size_t()
    ok(cu.cuLinkComplete(state, ctypes.byref(cubin), ctypes.byref(size)))
    assert size.value > 0
    lib = ctypes.c_uint64()
    ok(cu.cuLibraryLoadData(ctypes.byref(lib), cubin, None, None, 0, None, None, 0))
    mod = ctypes.c_uint64()
    ok(cu.cuModuleLoadData(ctypes.byref(mod), cubin))
    ok(cu.cuLinkDestroy(state))
    f = get_function(cu, mod.value, "use_twice")[1]
    n = 500
    y = np.random.default_rng().standard_normal(n).astype(np.float32)
    with Buf(cu, y) as dy:
        arr, keep = kernel_params(ctypes.c_uint64(dy.ptr.value), ctypes.c_int(n))
        ok(launch(cu, f, (4,), (128,), arr))
        np.testing.assert_array_equal(dy.get(np.float32), (2.0 * y + 1.0).astype(np.float32))
    ok(cu.cuModuleUnload(mod))
    ok(cu.cuLibraryUnload(lib))
    # a link fed something that is not PTX fails cleanly, at cuLinkAddData as NVIDIA's (which compiles
    # each PTX input as it comes)
    ok(cu.cuLinkCreate_v2(0, None, None, ctypes.byref(state)))
    junk = b"this is not ptx { at all"
    assert cu.cuLinkAddData_v2(state, 1, junk, ctypes.c_size_t(len(junk)), None, 0, None, None) == 218
    ok(cu.cuLinkDestroy(state))
    assert cu.cuLinkDestroy(state) == INVALID_HANDLE
    # main.ptx alone calls a function nothing defines: nvlink's undefined reference at cuLinkComplete, with
    # CUDA_ERROR_INVALID_SOURCE (300) and its line in the error log, as NVIDIA's driver answers
    log = ctypes.create_string_buffer(1024)
    opts = (ctypes.c_int * 2)(5, 6)         # CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
    vals = (ctypes.c_void_p * 2)(ctypes.addressof(log), 1024)
    ok(cu.cuLinkCreate_v2(2, opts, vals, ctypes.byref(state)))
    buf = ctypes.create_string_buffer(main)
    ok(cu.cuLinkAddData_v2(state, 1, buf, ctypes.c_size_t(len(main) + 1), b"main.ptx", 0, None, None))
    assert cu.cuLinkComplete(state, ctypes.byref(cubin), ctypes.byref(size)) == 300
    assert re.fullmatch(r"error   : Undefined reference to '\w*twice\w*' in 'main.ptx'", log.value.decode()), log.value
    ok(cu.cuLinkDestroy(state))


# --- faults, a C driver-API program, unmodified runtime-API programs --------------------------------

@needs_compiler
@pytest.mark.parametrize("kernel,arg,code", [("boom", "ptr", LAUNCH_FAILED), ("must_not_be_seven", 7, ASSERT)])
def test_kernel_fault_makes_context_sticky(shim_libdir, kptx, tmp_path, kernel, arg, code):
    (tmp_path / "k.ptx").write_bytes(kptx)
    script = tmp_path / "fault.py"
    script.write_text(textwrap.dedent(f"""
        import ctypes
        cu = ctypes.CDLL({os.path.join(shim_libdir, "libcuda.so.1")!r})
        assert cu.cuInit(0) == 0
        ctx = ctypes.c_uint64()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
        mod, f, p = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        assert cu.cuModuleLoad(ctypes.byref(mod), {str(tmp_path / "k.ptx").encode()!r}) == 0
        assert cu.cuModuleGetFunction(ctypes.byref(f), mod, {kernel.encode()!r}) == 0
        assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(4096)) == 0
        arg = ctypes.c_uint64(p.value) if {arg!r} == "ptr" else ctypes.c_int({arg if arg != "ptr" else 0})
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(arg), ctypes.c_void_p))
        r = cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, None, params, None)
        print(r, cu.cuCtxSynchronize(), cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(16)),
              cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, None, params, None))
    """))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, ZLUDA_LOG="1"))
    assert p.returncode == 0, p.stderr
    first, sync, later_alloc, later_launch = map(int, p.stdout.split())
    assert first in (0, code) and sync == code and later_alloc == code and later_launch == code
    assert "sticky" in p.stderr


DRIVER_PROGRAM = r"""
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d\n", #x, (int)r_); return 1; } } while (0)
int main(int argc, char **argv) {
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction f;
    CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuCtxCreate(&ctx, NULL, 0, dev));
    CK(cuModuleLoad(&mod, argv[1]));
    CK(cuModuleGetFunction(&f, mod, "saxpy"));
    int n = 4099; size_t bytes = n * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes), *out = malloc(bytes), a = 1.5f + (float)(rand() % 7);
    srand(atoi(argv[2]));
    for (int i = 0; i < n; i++) { x[i] = (float)rand() / RAND_MAX; y[i] = (float)rand() / RAND_MAX; out[i] = -7.0f; }
    CUdeviceptr dx, dy;
    CK(cuMemAlloc(&dx, bytes)); CK(cuMemAlloc(&dy, bytes));
    CK(cuMemcpyHtoD(dx, x, bytes)); CK(cuMemcpyHtoD(dy, y, bytes));
    void *args[] = {&a, &dx, &dy, &n};
    CK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    /* the same launch again through extra: y = a*x + (a*x + y) */
    struct { float a; int pad; CUdeviceptr x, y; int n; } __attribute__((packed)) buf = {a, 0, dx, dy, n};
    size_t size = 28;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    CK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, NULL, extra));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(out, dy, bytes));
    for (int i = 0; i < n; i++) {
        float want = fmaf(a, x[i], fmaf(a, x[i], y[i]));   /* nvcc emits fma.rn.f32 for a*x + y */
        if (out[i] != want) { printf("FAIL at %d: %f != %f\n", i, out[i], want); return 1; }
    }
    CUfunction missing;
    if (cuModuleGetFunction(&missing, mod, "nope") != CUDA_ERROR_NOT_FOUND) { printf("FAIL missing kernel\n"); return 1; }
    CK(cuModuleUnload(mod)); CK(cuCtxDestroy(ctx));
    printf("PASS\n");
    return 0;
}
"""


@needs_compiler
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_c_driver_api_program(shim_libdir, kptx, tmp_path):
    (tmp_path / "k.ptx").write_bytes(kptx)
    (tmp_path / "prog.c").write_text(DRIVER_PROGRAM)
    exe = tmp_path / "prog"
    subprocess.run(["gcc", "-O1", "-Wall", "-I", CUDA_INC, str(tmp_path / "prog.c"), "-o", str(exe),
                    "-L", shim_libdir, "-lcuda", "-lm", f"-Wl,-rpath,{shim_libdir}"], check=True)
    p = subprocess.run([str(exe), str(tmp_path / "k.ptx"), str(random.randrange(1 << 30))], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "PASS", p.stdout + p.stderr


VECTOR_ADD = r"""
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void vectorAdd(const float *A, const float *B, float *C, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) C[i] = A[i] + B[i];
}
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    printf("FAIL %s: %s (%d)\n", #x, cudaGetErrorString(e), (int)e); return 1; } } while (0)
int main(int argc, char **argv) {
    const int n = 50000; size_t sz = n * sizeof(float);
    float *a = (float *)malloc(sz), *b = (float *)malloc(sz), *c = (float *)malloc(sz);
    srand(atoi(argv[1]));
    for (int i = 0; i < n; i++) { a[i] = rand() / (float)RAND_MAX; b[i] = rand() / (float)RAND_MAX; c[i] = -1; }
    float *da, *db, *dc;
    CK(cudaMalloc(&da, sz)); CK(cudaMalloc(&db, sz)); CK(cudaMalloc(&dc, sz));
    CK(cudaMemcpy(da, a, sz, cudaMemcpyHostToDevice)); CK(cudaMemcpy(db, b, sz, cudaMemcpyHostToDevice));
    CK(cudaMemset(dc, 0xff, sz));
    vectorAdd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(c, dc, sz, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (c[i] != a[i] + b[i]) { printf("FAIL at %d: %f != %f\n", i, c[i], a[i] + b[i]); return 1; }
    CK(cudaFree(da)); CK(cudaFree(db)); CK(cudaFree(dc));
    printf("PASS vectorAdd %d\n", n);
    return 0;
}
"""


@needs_compiler
@pytest.mark.parametrize("flavour,flags", [
    ("ptx86", ["-gencode", "arch=compute_86,code=compute_86"]),
    ("default", []),
    ("lz4", ["-gencode", "arch=compute_86,code=compute_86", "--compress-mode=speed"]),
])
def test_unmodified_nvcc_vector_add(shim_libdir, build, flavour, flags):
    (build.dir / "vectorAdd.cu").write_text(VECTOR_ADD)
    exe = build(f"vectorAdd_{flavour}", "vectorAdd.cu", *flags)
    env = dict(os.environ, LD_LIBRARY_PATH=shim_libdir)
    p = subprocess.run([str(exe), str(random.randrange(1 << 30))], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "PASS vectorAdd 50000", p.stdout + p.stderr


@needs_compiler
def test_kernel_cache_dump_and_corrupt_entry(shim_libdir, build, tmp_path):
    """A second run takes the kernel from ZLUDA_CACHE_DIR; a corrupt entry is rebuilt; ZLUDA_DUMP_DIR gets
    the PTX and LLVM IR; ZLUDA_JIT_CACHE=0 writes no cache."""
    (build.dir / "vectorAdd.cu").write_text(VECTOR_ADD)
    exe = build("vectorAdd_ptx86", "vectorAdd.cu", "-gencode", "arch=compute_86,code=compute_86")
    cache, dump = tmp_path / "cache", tmp_path / "dump"

    def run(**env):
        e = dict(os.environ, LD_LIBRARY_PATH=shim_libdir, ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(tmp_path / "log"),
                 **env)
        (tmp_path / "log").write_text("")
        p = subprocess.run([str(exe), str(random.randrange(1 << 30))], capture_output=True, text=True, env=e,
                           timeout=300)
        assert p.returncode == 0 and "PASS" in p.stdout, p.stdout + p.stderr
        return [ln for ln in (tmp_path / "log").read_text().splitlines() if ": 1 kernels," in ln]

    assert [ln.split(", ")[-1] for ln in run(ZLUDA_CACHE_DIR=str(cache), ZLUDA_DUMP_DIR=str(dump))] == ["compiled"]
    assert [ln.split(", ")[-1] for ln in run(ZLUDA_CACHE_DIR=str(cache))] == ["from the cache"]
    entries = list(cache.glob("*.zk"))
    assert len(entries) == 1
    entries[0].write_bytes(os.urandom(200))
    assert [ln.split(", ")[-1] for ln in run(ZLUDA_CACHE_DIR=str(cache))] == ["compiled"]
    assert [ln.split(", ")[-1] for ln in run(ZLUDA_CACHE_DIR=str(cache))] == ["from the cache"]
    dumped = sorted(p.suffix for p in dump.iterdir())
    assert dumped == [".ll", ".ptx"]
    assert ".entry _Z9vectorAddPKfS0_Pfi" in next(dump.glob("*.ptx")).read_text()
    off = tmp_path / "off"
    run(ZLUDA_CACHE_DIR=str(off), ZLUDA_JIT_CACHE="0")
    assert not off.exists() or not any(off.iterdir())


def launch_config(grid, block, shared=0, stream=0, attrs=()):
    """A CUlaunchConfig and its CUlaunchAttribute array (id, then the 64-byte value union)."""
    raw = b"".join(struct.pack("<I4x", i) + value.ljust(64, b"\0") for i, value in attrs)
    attr_buf = ctypes.create_string_buffer(raw, max(len(raw), 1))
    cfg = ctypes.create_string_buffer(struct.pack("<7I4xQQI4x", *grid, *block, shared, stream,
                                                  ctypes.addressof(attr_buf) if attrs else 0, len(attrs)))
    return cfg, attr_buf


def _launch_ex_checked(cu, f, grid, attrs, want, n=700):
    """cuLaunchKernelEx of add_base over `grid` blocks of 128 with these attributes answers `want`; when it
    launches, the output is i + base_value, whatever base_value holds."""
    out = np.full(n, -1, np.int32)
    with Buf(cu, out) as dout:
        arr, keep = kernel_params(ctypes.c_uint64(dout.ptr.value), ctypes.c_int(n))
        cfg, keep2 = launch_config(grid, (128, 1, 1), attrs=attrs)
        assert cu.cuLaunchKernelEx(cfg, ctypes.c_uint64(f), arr, None) == want, attrs
        if want == CUDA_SUCCESS:
            got = dout.get(np.int32)
            assert (got - np.arange(n) == got[0]).all()


@needs_compiler
def test_launch_kernel_ex_attributes_and_per_thread_stream(cu, kptx):
    mod = load_data(cu, kptx)[1]
    f = get_function(cu, mod, "add_base")[1]
    n = 700
    for attrs, want in (((), CUDA_SUCCESS),
                        (((8, struct.pack("<i", -1)),), CUDA_SUCCESS),                     # priority
                        (((4, struct.pack("<3I", 1, 1, 1)),), CUDA_SUCCESS),               # 1x1x1 cluster
                        (((2, struct.pack("<i", 1)),), CUDA_SUCCESS),                      # cooperative
                        (((4, struct.pack("<3I", 2, 1, 1)),), CUDA_SUCCESS),               # clusters of 2
                        (((4, struct.pack("<3I", 3, 1, 1)),), CUDA_SUCCESS),               # clusters of 3
                        # NVIDIA's answers (tests/data/nvidia_cluster_answers.json): CUDA_ERROR_INVALID_CLUSTER_SIZE
                        (((4, struct.pack("<3I", 4, 1, 1)),), 912),                        # 4 does not divide 6
                        (((4, struct.pack("<3I", 0, 1, 1)),), 912),                        # a zero dimension
                        (((4, struct.pack("<3I", 1, 1, 1)), (2, struct.pack("<i", 1))), CUDA_SUCCESS),
                        (((4, struct.pack("<3I", 2, 1, 1)), (2, struct.pack("<i", 1))), CUDA_SUCCESS),
                        (((99, b""),), INVALID_VALUE)):                                    # unknown id
        _launch_ex_checked(cu, f, (6, 1, 1), attrs, want, n)
    # cudaStreamPerThread's entry point: stream 0 means this thread's stream
    out = np.full(n, -1, np.int32)
    with Buf(cu, out) as dout:
        arr, keep = kernel_params(ctypes.c_uint64(dout.ptr.value), ctypes.c_int(n))
        ok(cu.cuLaunchKernel_ptsz(ctypes.c_uint64(f), 6, 1, 1, 128, 1, 1, 0, None, arr, None))
        ok(cu.cuStreamSynchronize_ptsz(None))
        got = dout.get(np.int32)
        assert (got - np.arange(n) == got[0]).all()
    # a cooperative grid larger than what can be co-resident
    sms, per_sm = ctypes.c_int(), ctypes.c_int()
    ok(cu.cuDeviceGetAttribute(ctypes.byref(sms), 16, 0))
    ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(per_sm), ctypes.c_uint64(f), 1024,
                                                        ctypes.c_size_t(0)))
    with Buf(cu, np.zeros(4, np.int32)) as d:
        arr, keep = kernel_params(ctypes.c_uint64(d.ptr.value), ctypes.c_int(0))
        too_many = sms.value * per_sm.value + 1
        assert cu.cuLaunchCooperativeKernel(ctypes.c_uint64(f), too_many, 1, 1, 1024, 1, 1, 0, None, arr) == 720
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


@needs_compiler
def test_launch_kernel_ex_portable_cluster_size_mode(cu, kptx):
    """CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE (CUDA 13 headers, id 17): 16 CTAs need a non-portable size,
    allowed by the mode (2) or by CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED under the default mode (0),
    never under REQUIRE_PORTABLE (1); CU_LAUNCH_ATTRIBUTE_SHARED_MEMORY_MODE (18) is a hint; 19 is past the enum."""
    mod = load_data(cu, kptx)[1]
    f = get_function(cu, mod, "add_base")[1]
    c16, c8 = (4, struct.pack("<3I", 16, 1, 1)), (4, struct.pack("<3I", 8, 1, 1))
    mode = lambda m: (17, struct.pack("<i", m))
    cases = [((c16,), 912), ((c16, mode(0)), 912), ((c16, mode(1)), 912), ((c16, mode(2)), CUDA_SUCCESS),
             ((c8, mode(1)), CUDA_SUCCESS), ((c8, mode(3)), INVALID_VALUE), ((c8, (18, struct.pack("<i", 0))), CUDA_SUCCESS),
             ((c8, (19, b"")), INVALID_VALUE), ("allow", None), ((c16,), CUDA_SUCCESS), ((c16, mode(1)), 912)]
    for attrs, want in cases:
        if attrs == "allow":
            ok(cu.cuFuncSetAttribute(ctypes.c_uint64(f), 14, 1))    # NON_PORTABLE_CLUSTER_SIZE_ALLOWED
            continue
        _launch_ex_checked(cu, f, (16, 1, 1), attrs, want)
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


@needs_compiler
def test_load_data_ex_error_log(cu):
    bad = b".version 8.0\n.target sm_86\n.address_size 64\n.visible .entry k() { bogus.instruction; }\n"
    log_buf = ctypes.create_string_buffer(512)
    options = (ctypes.c_uint * 2)(5, 6)                 # CU_JIT_ERROR_LOG_BUFFER, _SIZE_BYTES
    values = (ctypes.c_void_p * 2)(ctypes.addressof(log_buf), 512)
    mod = ctypes.c_uint64()
    r = cu.cuModuleLoadDataEx(ctypes.byref(mod), bad, 2, options, values)
    assert r in (218, 801)      # CUDA_ERROR_INVALID_PTX (or NOT_SUPPORTED for an unknown instruction)
    assert b"bogus" in log_buf.value
    assert 0 < values[1] <= 512


@needs_compiler
def test_sass_only_program_fails_cleanly(shim_libdir, build, tmp_path):
    (build.dir / "vectorAdd.cu").write_text(VECTOR_ADD)
    exe = build("vectorAdd_sass", "vectorAdd.cu", "-gencode", "arch=compute_86,code=sm_86")
    env = dict(os.environ, LD_LIBRARY_PATH=shim_libdir, ZLUDA_LOG="1")
    p = subprocess.run([str(exe), "1"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 1 and "FAIL" in p.stdout and "(209)" in p.stdout, p.stdout + p.stderr
    assert "SASS sm_86" in p.stderr and "Traceback" not in p.stderr


RDC_MAIN = r"""
#include <cstdio>
#include <cstdlib>
extern __device__ float twice(float x);
__global__ void k(float *y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = twice(y[i]) + 1.0f; }
int main(int argc, char **argv) {
    const int n = 1000; float h[n], want[n];
    srand(atoi(argv[1]));
    for (int i = 0; i < n; i++) { h[i] = rand() % 10000; want[i] = 2.0f * h[i] + 1.0f; }
    float *d; cudaMalloc(&d, sizeof h); cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    k<<<4, 256>>>(d, n); cudaError_t e = cudaGetLastError();
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++) if (h[i] != want[i]) { printf("FAIL %d %f (%s)\n", i, h[i], cudaGetErrorString(e)); return 1; }
    printf("PASS\n"); return 0; }
"""


@needs_compiler
@pytest.mark.parametrize("flavour,flags", [("ptx86", ["-gencode", "arch=compute_86,code=compute_86"]),
                                           ("default", [])])
def test_relocatable_device_code_program(shim_libdir, build, flavour, flags):
    """-rdc: each translation unit's PTX sits in its own fatbin (__nv_relfatbin, a version 2 wrapper at run
    time) and the PTX entries are linked into one module."""
    (build.dir / "rdc_main.cu").write_text(RDC_MAIN)
    (build.dir / "rdc_lib.cu").write_text(LINK_LIB)
    exe = build.dir / f"rdc_{flavour}"
    if not exe.exists():
        subprocess.run([NVCC, "-rdc=true", *flags, "-o", str(exe), str(build.dir / "rdc_main.cu"),
                        str(build.dir / "rdc_lib.cu")], check=True, capture_output=True)
    from zluda_py import fatbin
    img = fatbin.parse_image(exe.read_bytes())
    assert img.link_groups and ".visible .func" in fatbin.select_ptx(img, 86)
    p = subprocess.run([str(exe), str(random.randrange(1 << 30))], capture_output=True, text=True,
                       env=dict(os.environ, LD_LIBRARY_PATH=shim_libdir), timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "PASS", p.stdout + p.stderr


@needs_compiler
def test_warm_cache_offline_then_run(shim_libdir, build, tmp_path):
    """python3 -m zluda_py.warm compiles a program's modules from its executable; the run then compiles
    nothing (plain and -rdc programs)."""
    (build.dir / "vectorAdd.cu").write_text(VECTOR_ADD)
    (build.dir / "rdc_main.cu").write_text(RDC_MAIN)
    (build.dir / "rdc_lib.cu").write_text(LINK_LIB)
    exe = build("vectorAdd_ptx86", "vectorAdd.cu", "-gencode", "arch=compute_86,code=compute_86")
    rdc = build.dir / "rdc_ptx86"
    if not rdc.exists():
        subprocess.run([NVCC, "-rdc=true", "-gencode", "arch=compute_86,code=compute_86", "-o", str(rdc),
                        str(build.dir / "rdc_main.cu"), str(build.dir / "rdc_lib.cu")], check=True)
    cache = tmp_path / "cache"
    env = dict(os.environ, ZLUDA_CACHE_DIR=str(cache))
    env.pop("ZLUDA_JIT_CACHE", None)
    w = subprocess.run([sys.executable, "-m", "zluda_py.warm", str(exe), str(rdc)], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=300)
    assert w.returncode == 0, w.stdout + w.stderr
    assert "vectorAdd_ptx86[0]: 1 kernels, compiled" in w.stdout and "rdc_ptx86[rdc]: 1 kernels, compiled" in w.stdout
    for program in (exe, rdc):
        log = tmp_path / f"{program.name}.log"
        p = subprocess.run([str(program), "7"], capture_output=True, text=True, timeout=300,
                           env=dict(env, LD_LIBRARY_PATH=shim_libdir, ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(log)))
        assert p.returncode == 0, p.stdout + p.stderr
        loads = [ln for ln in log.read_text().splitlines() if " kernels, " in ln]
        assert loads and all(ln.endswith("from the cache") for ln in loads), loads


RESET_PROGRAM = r"""
#include <cstdio>
__device__ int counter = 5;
__global__ void inc(int *out) { out[0] = ++counter; }
int main() {
    for (int round = 0; round < 3; round++) {
        int *d, h = -1;
        cudaMalloc(&d, 4);
        inc<<<1, 1>>>(d);
        inc<<<1, 1>>>(d);
        cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost);
        if (h != 7) { printf("FAIL round %d: %d (%s)\n", round, h, cudaGetErrorString(cudaGetLastError())); return 1; }
        cudaFree(d);
        cudaDeviceReset();
    }
    printf("PASS\n");
    return 0;
}
"""


@needs_compiler
def test_device_reset_reloads_globals(shim_libdir, build):
    """cudart keeps its library across cudaDeviceReset; the new context must see the module's globals as
    initialised, not as the previous context left them."""
    (build.dir / "reset.cu").write_text(RESET_PROGRAM)
    exe = build("reset", "reset.cu", "-gencode", "arch=compute_86,code=compute_86")
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, LD_LIBRARY_PATH=shim_libdir))
    assert p.returncode == 0 and p.stdout.strip() == "PASS", p.stdout + p.stderr


@needs_compiler
def test_files_kernel_attributes_and_occupancy(cu, build, kptx, tmp_path):
    fat = build("k86_default.fatbin", "k.cu", "-fatbin", "-gencode", "arch=compute_86,code=compute_86",
                "--compress-mode=default")
    lib = ctypes.c_uint64()
    ok(cu.cuLibraryLoadFromFile(ctypes.byref(lib), str(fat).encode(), None, None, 0, None, None, 0))
    assert cu.cuLibraryLoadFromFile(ctypes.byref(ctypes.c_uint64()), b"/nonexistent.fatbin", None, None, 0,
                                    None, None, 0) == 301
    k = ctypes.c_uint64()
    ok(cu.cuLibraryGetKernel(ctypes.byref(k), lib, b"saxpy"))
    optin = ctypes.c_int()
    ok(cu.cuDeviceGetAttribute(ctypes.byref(optin), 97, 0))
    ok(cu.cuKernelSetAttribute(8, optin.value, k, 0))          # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    v = ctypes.c_int()
    ok(cu.cuKernelGetAttribute(ctypes.byref(v), 8, k, 0))
    assert v.value == optin.value
    f = ctypes.c_uint64()
    ok(cu.cuKernelGetFunction(ctypes.byref(f), k))
    ok(cu.cuFuncGetAttribute(ctypes.byref(v), 8, f))
    assert v.value == optin.value                              # the function in this context sees it too
    assert cu.cuKernelSetAttribute(8, optin.value + 1, k, 0) == INVALID_VALUE
    assert cu.cuKernelSetAttribute(0, 5, k, 0) == INVALID_VALUE   # read-only attribute
    ok(cu.cuFuncSetCacheConfig(f, 1))
    assert cu.cuFuncSetCacheConfig(f, 9) == INVALID_VALUE
    # occupancy: with flags, the block-size callback, dynamic shared memory per block, clusters
    blocks = ctypes.c_int()
    ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(ctypes.byref(blocks), f, 128, ctypes.c_size_t(0), 0))
    fewer = ctypes.c_int()
    ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(fewer), f, 128, ctypes.c_size_t(optin.value)))
    assert blocks.value >= 1 and 0 <= fewer.value <= blocks.value
    calls = []
    b2d_t = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)
    b2d = b2d_t(lambda bs: calls.append(bs) or bs * 16)
    grid, block = ctypes.c_int(), ctypes.c_int()
    ok(cu.cuOccupancyMaxPotentialBlockSizeWithFlags(ctypes.byref(grid), ctypes.byref(block), f, b2d,
                                                    ctypes.c_size_t(0), 256, 0))
    assert calls and max(calls) <= 256 and 32 <= block.value <= 256 and grid.value >= 1
    avail = ctypes.c_size_t()
    ok(cu.cuOccupancyAvailableDynamicSMemPerBlock(ctypes.byref(avail), f, 1, 128))
    assert 0 < avail.value <= optin.value
    clusters = ctypes.c_int()
    cfg, keep = launch_config((8, 1, 1), (128, 1, 1))
    ok(cu.cuOccupancyMaxActiveClusters(ctypes.byref(clusters), f, cfg))
    assert clusters.value >= 1
    ok(cu.cuLibraryUnload(lib))
    # cuLinkAddFile with a PTX file, then the linked image from cuModuleLoadData
    (tmp_path / "k.ptx").write_bytes(kptx)
    state = ctypes.c_uint64()
    ok(cu.cuLinkCreate_v2(0, None, None, ctypes.byref(state)))
    ok(cu.cuLinkAddFile_v2(state, 1, str(tmp_path / "k.ptx").encode(), 0, None, None))
    assert cu.cuLinkAddFile_v2(state, 1, b"/nonexistent.ptx", 0, None, None) == 301
    cubin, size = ctypes.c_void_p(), ctypes.c_size_t()
    ok(cu.cuLinkComplete(state, ctypes.byref(cubin), ctypes.byref(size)))
    mod = ctypes.c_uint64()
    ok(cu.cuModuleLoadData(ctypes.byref(mod), cubin))
    ok(cu.cuLinkDestroy(state))
    run_saxpy(cu, get_function(cu, mod.value, "saxpy")[1])
    ok(cu.cuModuleUnload(mod))
