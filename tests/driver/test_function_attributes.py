"""cuFuncGetAttribute / cuKernelGetAttribute through the built libcuda.so.1 report what the kernel's PTX
asks for: exact static shared bytes, the module's user constant bytes, local bytes, a register estimate
bounded by .maxnreg and by CU_JIT_MAX_REGISTERS (given to cuModuleLoadDataEx, cuLibraryLoadData or
cuLinkCreate), .maxntid/.reqntid, the PTX target; and the kernels still compute the right thing."""

import ctypes
import os
from fractions import Fraction

import numpy as np
import pytest

SHARED, CONST, LOCAL, NUM_REGS, PTX_VERSION, BINARY_VERSION, MAX_THREADS = 1, 2, 3, 4, 5, 6, 0
CU_JIT_MAX_REGISTERS = 0
N_LIVE = 40      # f64 values all live at once in `heavy`: 80 32-bit registers

HEAVY_BODY = "\n".join(
    [".reg .b32 %r<4>;", ".reg .b64 %rd<8>;", f".reg .f64 %fd<{N_LIVE + 2}>;",
     "ld.param.u64 %rd1, [in_];", "ld.param.u64 %rd2, [out_];",
     "mov.u32 %r1, %tid.x;", "mov.u32 %r2, %ctaid.x;", "mov.u32 %r3, %ntid.x;", "mad.lo.s32 %r1, %r2, %r3, %r1;"]
    + [f"ld.global.f64 %fd{j}, [%rd1+{8 * j}];" for j in range(N_LIVE)]
    + ["cvt.rn.f64.u32 %fd40, %r1;"]
    # every loaded value is still needed here: sum them weighted by position, the thread id first
    + [f"fma.rn.f64 %fd40, %fd{j}, 0d{np.float64(j + 1).view(np.uint64):016X}, %fd40;" for j in range(N_LIVE)]
    + ["mul.wide.u32 %rd3, %r1, 8;", "add.s64 %rd4, %rd2, %rd3;", "st.global.f64 [%rd4], %fd40;", "ret;"])

PTX = f"""
.version 8.0
.target sm_75
.address_size 64

.const .align 8 .b8 table[80];
.const .align 4 .u32 small[3] = {{1, 2, 3}};
.shared .align 4 .b8 scratch[40];

.visible .entry heavy(.param .u64 in_, .param .u64 out_)
{{
{HEAVY_BODY}
}}

.visible .entry capped(.param .u64 in_, .param .u64 out_) .maxnreg 24
{{
{HEAVY_BODY}
}}

.visible .entry light(.param .u64 out_) .maxntid 128, 1, 1
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .local .align 8 .b8 frame[1000];
    ld.param.u64 %rd1, [out_];
    mov.u32 %r1, %tid.x;
    st.local.u32 [frame+996], %r1;
    ld.local.u32 %r2, [frame+996];
    ld.const.u32 %r3, [small+8];
    add.s32 %r2, %r2, %r3;
    st.shared.u32 [scratch+36], %r2;
    ld.shared.u32 %r2, [scratch+36];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}}

.visible .entry shaped() .reqntid 32, 2, 1
{{
    ret;
}}
"""


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
    assert r == 0, r


def jit_options(max_regs):
    """CUjit_option[] and void*[] holding CU_JIT_MAX_REGISTERS (its value is the pointer slot itself)."""
    return (ctypes.c_uint * 1)(CU_JIT_MAX_REGISTERS), (ctypes.c_void_p * 1)(max_regs)


def load(cu, text, max_regs=None):
    buf = ctypes.create_string_buffer(text.encode())
    mod = ctypes.c_uint64()
    if max_regs is None:
        ok(cu.cuModuleLoadData(ctypes.byref(mod), buf))
    else:
        opts, vals = jit_options(max_regs)
        ok(cu.cuModuleLoadDataEx(ctypes.byref(mod), buf, 1, opts, vals))
    return mod.value


def func(cu, mod, name):
    f = ctypes.c_uint64()
    ok(cu.cuModuleGetFunction(ctypes.byref(f), ctypes.c_uint64(mod), name.encode()))
    return f.value


def attr(cu, f, which):
    v = ctypes.c_int(-12345)
    ok(cu.cuFuncGetAttribute(ctypes.byref(v), which, ctypes.c_uint64(f)))
    return v.value


def device_cc(cu):
    major, minor = ctypes.c_int(), ctypes.c_int()
    ok(cu.cuDeviceGetAttribute(ctypes.byref(major), 75, 0))
    ok(cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0))
    return major.value * 10 + minor.value


def run_heavy(cu, f):
    """Launch heavy/capped on 3x64 threads and check every output against numpy."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(N_LIVE)
    n = 3 * 64
    d_in, d_out = ctypes.c_uint64(), ctypes.c_uint64()
    ok(cu.cuMemAlloc_v2(ctypes.byref(d_in), ctypes.c_size_t(x.nbytes)))
    ok(cu.cuMemAlloc_v2(ctypes.byref(d_out), ctypes.c_size_t(8 * n)))
    ok(cu.cuMemcpyHtoD_v2(d_in, x.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(x.nbytes)))
    out = np.full(n, np.nan)
    ok(cu.cuMemcpyHtoD_v2(d_out, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(out.nbytes)))
    args = (ctypes.c_void_p * 2)(ctypes.addressof(d_in), ctypes.addressof(d_out))
    ok(cu.cuLaunchKernel(ctypes.c_uint64(f), 3, 1, 1, 64, 1, 1, 0, None, args, None))
    ok(cu.cuCtxSynchronize())
    ok(cu.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), d_out, ctypes.c_size_t(out.nbytes)))
    want = []
    for t in range(n):                        # the same fused multiply-adds, rounded once each
        acc = float(t)
        for j in range(N_LIVE):
            acc = float(Fraction(float(x[j])) * (j + 1) + Fraction(acc))
        want.append(acc)
    np.testing.assert_array_equal(out, np.array(want))
    cu.cuMemFree_v2(d_in)
    cu.cuMemFree_v2(d_out)


def test_sizes_versions_and_threads(cu):
    mod = load(cu, PTX)
    light, heavy, shaped = func(cu, mod, "light"), func(cu, mod, "heavy"), func(cu, mod, "shaped")
    assert attr(cu, light, SHARED) == 40              # exactly the variable, not rounded up
    assert attr(cu, light, CONST) == 92               # table (80) + small (12): the module's bank
    assert attr(cu, heavy, CONST) == 92
    assert attr(cu, light, LOCAL) >= 1000
    assert attr(cu, light, PTX_VERSION) == 75         # .target sm_75
    assert attr(cu, light, BINARY_VERSION) == device_cc(cu)
    assert attr(cu, light, MAX_THREADS) == 128        # .maxntid
    assert attr(cu, shaped, MAX_THREADS) == 64        # .reqntid 32x2
    assert attr(cu, heavy, MAX_THREADS) == 1024
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


def test_cuda_13_5_attributes_device_node_update_and_shared_memory_mode(cu):
    """The release the declarations are of (13.5) adds two attributes, both asked for by NVIDIA's cuSPARSE:
    device-side node updates (read-only: none here) and the shared memory mode (a CUsharedMemoryMode,
    settable 0..4, other values refused and the old one kept)."""
    node_update, mode = 16, 17
    mod = load(cu, PTX)
    f = func(cu, mod, "light")
    assert attr(cu, f, node_update) == 0
    assert attr(cu, f, mode) == 0
    for want in (4, 1):
        ok(cu.cuFuncSetAttribute(ctypes.c_uint64(f), mode, want))
        assert attr(cu, f, mode) == want
    assert cu.cuFuncSetAttribute(ctypes.c_uint64(f), mode, 5) == 1          # CUDA_ERROR_INVALID_VALUE
    assert cu.cuFuncSetAttribute(ctypes.c_uint64(f), node_update, 1) == 1
    assert attr(cu, f, mode) == 1
    v = ctypes.c_int(-1)
    assert cu.cuFuncGetAttribute(ctypes.byref(v), 18, ctypes.c_uint64(f)) == 1
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


def test_register_estimate_and_maxnreg(cu):
    mod = load(cu, PTX)
    light, heavy, capped = func(cu, mod, "light"), func(cu, mod, "heavy"), func(cu, mod, "capped")
    assert 8 <= attr(cu, light, NUM_REGS) <= 32
    assert 2 * N_LIVE <= attr(cu, heavy, NUM_REGS) <= 255
    assert 0 < attr(cu, capped, NUM_REGS) <= 24
    run_heavy(cu, heavy)
    run_heavy(cu, capped)
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


def test_jit_max_registers_at_load(cu):
    mod = load(cu, PTX, max_regs=32)
    assert 0 < attr(cu, func(cu, mod, "heavy"), NUM_REGS) <= 32
    assert attr(cu, func(cu, mod, "capped"), NUM_REGS) <= 24      # the kernel's own .maxnreg stays
    run_heavy(cu, func(cu, mod, "heavy"))
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))
    # a library's kernels, queried without a function of this context
    lib, kern = ctypes.c_uint64(), ctypes.c_uint64()
    opts, vals = jit_options(40)
    buf = ctypes.create_string_buffer(PTX.encode())
    ok(cu.cuLibraryLoadData(ctypes.byref(lib), buf, opts, vals, 1, None, None, 0))
    ok(cu.cuLibraryGetKernel(ctypes.byref(kern), lib, b"heavy"))
    v = ctypes.c_int(-1)
    ok(cu.cuKernelGetAttribute(ctypes.byref(v), NUM_REGS, kern, 0))
    assert 0 < v.value <= 40
    ok(cu.cuKernelGetAttribute(ctypes.byref(v), PTX_VERSION, kern, 0))
    assert v.value == 75
    ok(cu.cuLibraryUnload(lib))


def test_link_carries_max_registers(cu):
    state = ctypes.c_uint64()
    opts, vals = jit_options(36)
    ok(cu.cuLinkCreate_v2(1, opts, vals, ctypes.byref(state)))
    data = ctypes.create_string_buffer(PTX.encode())
    ok(cu.cuLinkAddData_v2(state, 1, data, ctypes.c_size_t(len(PTX)), b"k.ptx", 0, None, None))
    image, size = ctypes.c_void_p(), ctypes.c_size_t()
    ok(cu.cuLinkComplete(state, ctypes.byref(image), ctypes.byref(size)))
    text = ctypes.string_at(image, size.value).decode()
    assert text.count(".maxnreg 36") == 3 and text.count(".maxnreg 24") == 1   # capped keeps its own
    mod = ctypes.c_uint64()
    ok(cu.cuModuleLoadData(ctypes.byref(mod), image))
    ok(cu.cuLinkDestroy(state))
    heavy = func(cu, mod.value, "heavy")
    assert 0 < attr(cu, heavy, NUM_REGS) <= 36
    assert attr(cu, func(cu, mod.value, "capped"), NUM_REGS) <= 24
    run_heavy(cu, heavy)
    ok(cu.cuModuleUnload(mod))


ALIGNED = """
.version 8.0
.target sm_86
.address_size 64
.extern .shared .align 512 .b8 dyn[];
.visible .entry aligned(.param .u64 out_)
{
    .shared .align 1024 .b8 big[24];
    .reg .b32 %r<6>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [out_];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, 24;
    add.s64 %rd3, %rd1, %rd2;
    mov.u64 %rd4, big;
    cvta.shared.u64 %rd5, %rd4;
    st.global.u64 [%rd3], %rd5;
    mov.u64 %rd6, dyn;
    cvta.shared.u64 %rd7, %rd6;
    st.global.u64 [%rd3+8], %rd7;
    mul.wide.u32 %rd8, %r1, 8;
    add.s64 %rd9, %rd7, %rd8;
    st.u64 [%rd9], %rd3;
    bar.sync 0;
    ld.u64 %rd9, [%rd9];
    st.global.u64 [%rd3+16], %rd9;
    ret;
}
"""


def test_large_alignments_through_launches(cu):
    # launched through cuLaunchKernel (the stream's launch path), with dynamic shared memory
    mod = load(cu, ALIGNED)
    f = func(cu, mod, "aligned")
    assert attr(cu, f, SHARED) == 24
    blocks, threads = 4, 64
    n = blocks * threads
    d_out = ctypes.c_uint64()
    ok(cu.cuMemAlloc_v2(ctypes.byref(d_out), ctypes.c_size_t(24 * n)))
    out = np.full((n, 3), 0xDEADBEEFDEADBEEF, dtype=np.uint64)
    ok(cu.cuMemcpyHtoD_v2(d_out, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(out.nbytes)))
    args = (ctypes.c_void_p * 1)(ctypes.addressof(d_out))
    ok(cu.cuLaunchKernel(ctypes.c_uint64(f), blocks, 1, 1, threads, 1, 1, 8 * threads, None, args, None))
    ok(cu.cuCtxSynchronize())
    ok(cu.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), d_out, ctypes.c_size_t(out.nbytes)))
    assert np.all(out[:, 0] % 1024 == 0) and np.all(out[:, 1] % 512 == 0)
    assert np.all(out[:, 1] >= out[:, 0] + 24)       # the dynamic array after the static one
    # every thread's slot of the dynamic array held what it stored (its own output address)
    np.testing.assert_array_equal(out[:, 2], d_out.value + 24 * np.arange(n, dtype=np.uint64))
    cu.cuMemFree_v2(d_out)
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))
