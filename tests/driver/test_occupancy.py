"""cuOccupancy* and the per-kernel static shared size through the built libcuda.so.1: each kernel counts
only the .shared variables it (or a .func it calls) uses, launches may take the rest of the block's
shared memory, and the occupancy answers follow the occupancy calculator's rules (warps, block slots,
registers in 256-unit warp allocations over 4 sub-partitions, shared memory in 128-byte units plus the
1 KiB reserve) with the register estimate cuFuncGetAttribute reports, hand-computed below."""

import ctypes
import os

import pytest

MAX_THREADS, SHARED, NUM_REGS = 0, 1, 4
MAX_DYN_SHARED, CARVEOUT = 8, 9
INVALID_VALUE = 1

# every thread stores the same values (the block size's), so no race decides what is read back;
# two kernels, two variables each their own; `both` reaches `c` only through the .func it calls
SHARED_PTX = """
.version 8.0
.target sm_86
.address_size 64
.shared .align 4 .b8 a[100];
.shared .align 4 .b8 b[200];
.shared .align 16 .b8 c[64];
.extern .shared .align 16 .b8 dyn[];

.func (.reg .b32 r) touch_c(.reg .b32 v)
{
    st.shared.u32 [c+60], v;
    ld.shared.u32 r, [c+60];
    ret;
}

.visible .entry use_a(.param .u64 out_, .param .u32 last_)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out_];
    ld.param.u32 %r5, [last_];
    mov.u32 %r1, %ntid.x;
    add.s32 %r2, %r1, 7;
    st.shared.u8 [a+99], %r2;
    st.shared.u8 [dyn], %r2;
    mov.u64 %rd3, dyn;
    cvt.u64.u32 %rd2, %r5;
    add.s64 %rd3, %rd3, %rd2;
    st.shared.u8 [%rd3], %r2;
    ld.shared.u8 %r3, [a+99];
    ld.shared.u8 %r4, [%rd3];
    add.s32 %r3, %r3, %r4;
    st.global.u32 [%rd1], %r3;
    ret;
}

.visible .entry both(.param .u64 out_)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out_];
    mov.u32 %r1, %ntid.x;
    add.s32 %r1, %r1, 11;
    st.shared.u32 [b+196], %r1;
    call (%r2), touch_c, (%r1);
    ld.shared.u32 %r3, [b+196];
    add.s32 %r2, %r2, %r3;
    st.global.u32 [%rd1], %r2;
    ret;
}

.visible .entry own(.param .u64 out_)
{
    .shared .align 8 .b8 mine[24];
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out_];
    mov.u64 %rd2, a;
    st.shared.u32 [%rd2], 5;
    st.shared.u32 [mine+20], 6;
    ld.shared.u32 %r1, [a];
    ld.shared.u32 %r2, [mine+20];
    add.s32 %r1, %r1, %r2;
    st.global.u32 [%rd1], %r1;
    ret;
}

.visible .entry none(.param .u64 out_)
{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out_];
    st.global.u32 [%rd1], 3;
    ret;
}
"""

N_LIVE = 80      # u64 values live at once: 160 32-bit registers, beyond any .maxnreg below


def heavy_body():
    lines = [".reg .b32 %r<2>;", ".reg .b64 %rd<3>;", f".reg .b64 %v<{N_LIVE + 1}>;",
             "ld.param.u64 %rd1, [in_];", "ld.param.u64 %rd2, [out_];"]
    lines += [f"ld.global.u64 %v{j}, [%rd1+{8 * j}];" for j in range(N_LIVE)]
    lines += ["mov.u64 %v80, 0;"]
    lines += [f"xor.b64 %v80, %v80, %v{j};" for j in range(N_LIVE)]
    lines += ["st.global.u64 [%rd2], %v80;", "ret;"]
    return "\n".join(lines)


OCC_PTX = f"""
.version 8.0
.target sm_86
.address_size 64
.visible .entry light(.param .u64 out_)
{{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out_];
    mov.u32 %r1, %tid.x;
    st.global.u32 [%rd1], %r1;
    ret;
}}
.visible .entry heavy(.param .u64 in_, .param .u64 out_)
{{
{heavy_body()}
}}
.visible .entry heavy128(.param .u64 in_, .param .u64 out_) .maxnreg 128
{{
{heavy_body()}
}}
.visible .entry heavy72(.param .u64 in_, .param .u64 out_) .maxnreg 72
{{
{heavy_body()}
}}
.visible .entry bounded(.param .u64 in_, .param .u64 out_) .maxntid 1024, 1, 1
{{
{heavy_body()}
}}
.visible .entry bounded2(.param .u64 in_, .param .u64 out_) .maxntid 256, 2, 1 .minnctapersm 2
{{
{heavy_body()}
}}
.visible .entry small(.param .u64 out_) .maxntid 96, 1, 1
{{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out_];
    st.global.u32 [%rd1], 1;
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


def dev_attr(cu, which):
    v = ctypes.c_int(-1)
    ok(cu.cuDeviceGetAttribute(ctypes.byref(v), which, 0))
    return v.value


@pytest.fixture(scope="module")
def sms(cu):
    # the device the hand-computed values below assume (sm_86's limits); the SM count is the CPU's
    assert dev_attr(cu, 10) == 32                       # warp size
    assert dev_attr(cu, 39) == 1536                     # threads per SM: 48 warps
    assert dev_attr(cu, 106) == 16                      # blocks per SM
    assert dev_attr(cu, 82) == 65536 and dev_attr(cu, 12) == 65536   # registers per SM / per block
    assert dev_attr(cu, 81) == 100 * 1024               # shared per SM
    assert dev_attr(cu, 8) == 48 * 1024                 # shared per block
    assert dev_attr(cu, 97) == 99 * 1024                # opt-in
    assert dev_attr(cu, 111) == 1024                    # reserved per block
    assert dev_attr(cu, 75) == 8
    return dev_attr(cu, 16)


def load(cu, text, max_regs=None):
    buf = ctypes.create_string_buffer(text.encode())
    mod = ctypes.c_uint64()
    if max_regs is None:
        ok(cu.cuModuleLoadData(ctypes.byref(mod), buf))
    else:
        opts, vals = (ctypes.c_uint * 1)(0), (ctypes.c_void_p * 1)(max_regs)
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


def blocks(cu, f, block, dyn=0, flags=None):
    v = ctypes.c_int(-12345)
    if flags is None:
        ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(v), ctypes.c_uint64(f), block,
                                                           ctypes.c_size_t(dyn)))
    else:
        ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(ctypes.byref(v), ctypes.c_uint64(f), block,
                                                                    ctypes.c_size_t(dyn), flags))
    return v.value


B2D = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)


def potential(cu, f, dyn=0, limit=0, b2d=None, flags=None):
    grid, block = ctypes.c_int(-12345), ctypes.c_int(-12345)
    cb = B2D(b2d) if b2d else None
    args = (ctypes.byref(grid), ctypes.byref(block), ctypes.c_uint64(f), cb, ctypes.c_size_t(dyn), limit)
    if flags is None:
        ok(cu.cuOccupancyMaxPotentialBlockSize(*args))
    else:
        ok(cu.cuOccupancyMaxPotentialBlockSizeWithFlags(*args, flags))
    return grid.value, block.value


def avail(cu, f, nblocks, block):
    v = ctypes.c_size_t(12345678)
    ok(cu.cuOccupancyAvailableDynamicSMemPerBlock(ctypes.byref(v), ctypes.c_uint64(f), nblocks, block))
    return v.value


def launch_one(cu, f, args, dyn=0):
    """Run f on one 32-thread block; the u32 it stores."""
    d_out = ctypes.c_uint64()
    ok(cu.cuMemAlloc_v2(ctypes.byref(d_out), ctypes.c_size_t(4)))
    ok(cu.cuMemsetD32_v2(d_out, 0xDEADBEEF, 1))
    vals = [d_out] + list(args)
    ptrs = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
    r = cu.cuLaunchKernel(ctypes.c_uint64(f), 1, 1, 1, 32, 1, 1, dyn, None, ptrs, None)
    out = ctypes.c_uint32()
    if r == 0:
        ok(cu.cuCtxSynchronize())
        ok(cu.cuMemcpyDtoH_v2(ctypes.byref(out), d_out, ctypes.c_size_t(4)))
    cu.cuMemFree_v2(d_out)
    return r, out.value


# ------------------------------------------------------------------ static shared size per kernel

def test_shared_size_per_kernel(cu, sms):
    mod = load(cu, SHARED_PTX)
    use_a, both, own, none = (func(cu, mod, n) for n in ("use_a", "both", "own", "none"))
    assert attr(cu, use_a, SHARED) == 100
    assert attr(cu, both, SHARED) == 200 + 8 + 64        # b, then c at its 16-byte alignment
    assert attr(cu, own, SHARED) == 100 + 4 + 24         # a, then its own at 8
    assert attr(cu, none, SHARED) == 0
    assert attr(cu, use_a, MAX_DYN_SHARED) == 48 * 1024 - 100
    assert attr(cu, both, MAX_DYN_SHARED) == 48 * 1024 - 272
    # the kernels still compute with their variables (and the one the .func reaches)
    assert launch_one(cu, both, []) == (0, 2 * (32 + 11))
    assert launch_one(cu, own, []) == (0, 11)
    assert launch_one(cu, none, []) == (0, 3)
    # use_a may take all the dynamic shared memory its own size leaves, up to the last byte
    last = 48 * 1024 - 100
    assert launch_one(cu, use_a, [ctypes.c_uint32(last - 1)], dyn=last) == (0, 2 * (32 + 7))
    assert launch_one(cu, use_a, [ctypes.c_uint32(0)], dyn=last + 1)[0] == INVALID_VALUE
    # the opt-in maximum counts the kernel's own static bytes too
    ok(cu.cuFuncSetAttribute(ctypes.c_uint64(none), MAX_DYN_SHARED, 99 * 1024))
    assert cu.cuFuncSetAttribute(ctypes.c_uint64(both), MAX_DYN_SHARED, 99 * 1024 - 271) == INVALID_VALUE
    ok(cu.cuFuncSetAttribute(ctypes.c_uint64(both), MAX_DYN_SHARED, 99 * 1024 - 272))
    # occupancy sees each kernel's own size: 272 + 1024 reserved -> 1408 (11 units of 128) per block
    assert blocks(cu, none, 32, 0) == 16                 # block slots only
    assert blocks(cu, both, 32, 0) == 16
    assert blocks(cu, both, 32, 20 * 1024 - 272) == 4    # 21504 bytes a block: 102400 // 21504
    assert blocks(cu, use_a, 32, 20 * 1024 - 100 + 1) == 4   # rounds up to 21632 bytes: still 4
    assert blocks(cu, use_a, 32, 24 * 1024) == 3         # 25700 -> 25728: 102400 // 25728 = 3.98
    assert blocks(cu, use_a, 32, 24 * 1024 - 100) == 4   # exactly 25600
    assert blocks(cu, use_a, 32, 24 * 1024 - 100 + 1) == 3
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


# ------------------------------------------------------------------ occupancy

@pytest.fixture(scope="module")
def occ(cu):
    mod = load(cu, OCC_PTX)
    fs = {n: func(cu, mod, n) for n in ("light", "heavy", "heavy128", "heavy72", "bounded", "bounded2", "small")}
    yield fs
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


def test_register_counts_assumed(cu, occ):
    assert 8 <= attr(cu, occ["light"], NUM_REGS) <= 32    # never the register limit below
    assert attr(cu, occ["heavy"], NUM_REGS) >= 160
    assert attr(cu, occ["heavy128"], NUM_REGS) == 128
    assert attr(cu, occ["heavy72"], NUM_REGS) == 72
    assert attr(cu, occ["small"], MAX_THREADS) == 96
    # launch bounds: ptxas keeps the registers where the bounded block (times .minnctapersm) fits
    assert attr(cu, occ["bounded"], NUM_REGS) == 64
    assert attr(cu, occ["bounded2"], NUM_REGS) == 64


def test_launch_bounds_fit(cu, occ, sms):
    assert blocks(cu, occ["heavy"], 1024) == 0           # unbounded: 160+ registers, no 1024-thread block
    assert blocks(cu, occ["bounded"], 1024) == 1
    assert blocks(cu, occ["bounded2"], 512) == 2         # the .minnctapersm it asked for
    # 64 registers hold 32 warps a SM: 2 blocks of its 512 threads, which no smaller size beats
    assert potential(cu, occ["bounded2"]) == (2 * sms, 512)


def test_blocks_by_block_size(cu, occ, sms):
    light = occ["light"]
    assert blocks(cu, light, 1) == 16                    # block slots
    assert blocks(cu, light, 32) == 16
    assert blocks(cu, light, 96) == 16                   # 3 warps: 48 // 3 = 16
    assert blocks(cu, light, 128) == 12                  # warps: 48 // 4
    assert blocks(cu, light, 129) == 9                   # 5 warps: 48 // 5
    assert blocks(cu, light, 512) == 3
    assert blocks(cu, light, 768) == 2
    assert blocks(cu, light, 1024) == 1
    assert blocks(cu, light, 1025) == 0                  # over the block limit
    assert blocks(cu, occ["small"], 96) == 16
    assert blocks(cu, occ["small"], 97) == 0             # over .maxntid
    assert blocks(cu, light, 128, flags=1) == 12


def test_blocks_by_dynamic_shared(cu, occ, sms):
    light = occ["light"]
    assert blocks(cu, light, 32, 1) == 16                # 1025 -> 1152 bytes: 88 blocks' worth
    assert blocks(cu, light, 32, 20 * 1024) == 4         # (20 + 1) KiB a block
    assert blocks(cu, light, 32, 33 * 1024) == 2         # 34 KiB: 3 would need 102 KiB
    assert blocks(cu, light, 32, 48 * 1024) == 2         # 49 KiB: the per-block maximum, twice
    assert blocks(cu, light, 32, 48 * 1024 + 1) == 0     # over 48 KiB without opting in


def test_blocks_by_registers(cu, occ, sms):
    # 128 registers: a warp takes 4096, a sub-partition (16384) holds 4 warps, the SM 16
    h = occ["heavy128"]
    assert blocks(cu, h, 32) == 16
    assert blocks(cu, h, 128) == 4
    assert blocks(cu, h, 256) == 2
    assert blocks(cu, h, 512) == 1                       # 16 warps: all 65536 registers
    assert blocks(cu, h, 513) == 0                       # 17 warps (20 as the hardware counts) don't fit
    # 72 registers: 2304 a warp, 7 warps a sub-partition, 28 a SM
    h = occ["heavy72"]
    assert blocks(cu, h, 128) == 7
    assert blocks(cu, h, 96) == 9                        # 3 warps: 28 // 3
    assert blocks(cu, h, 224) == 4                       # 7 warps
    assert blocks(cu, h, 896) == 1                       # 28 warps: 64512 registers
    assert blocks(cu, h, 897) == 0                       # 29 warps rounded to 32 need 73728


def test_jit_register_cap_changes_occupancy(cu, sms):
    mod = load(cu, OCC_PTX, max_regs=64)
    heavy = func(cu, mod, "heavy")
    assert attr(cu, heavy, NUM_REGS) == 64
    # 2048 registers a warp: 8 a sub-partition, 32 a SM
    assert blocks(cu, heavy, 256) == 4
    assert blocks(cu, heavy, 1024) == 1
    assert blocks(cu, func(cu, mod, "heavy72"), 128) == 7     # its own .maxnreg stays
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


def test_potential_block_size(cu, occ, sms):
    # light: 1024..800 fit one block, 768 two: the whole SM (1536 threads), which ends the search
    assert potential(cu, occ["light"]) == (2 * sms, 768)
    assert potential(cu, occ["light"], flags=1) == (2 * sms, 768)
    # a limit is tried first as itself: 200 threads (7 warps) give 6 blocks, 192 (6 warps) fill the SM
    assert potential(cu, occ["light"], limit=200) == (8 * sms, 192)
    # .maxntid 96: 16 blocks of 3 warps fill the SM
    assert potential(cu, occ["small"]) == (16 * sms, 96)
    # 128 registers: 16 warps a SM at most, first reached with one block of 512
    assert potential(cu, occ["heavy128"]) == (1 * sms, 512)
    # 40 KiB a block: two blocks a SM, first full at 768
    assert potential(cu, occ["light"], dyn=40 * 1024) == (2 * sms, 768)
    # 100 bytes a thread: 512 needs too much; 480 takes 49024 bytes, 2 blocks -> 960 threads, which
    # no smaller size beats (448: 2 x 448; 320: 3 x 320; 224: 4 x 224)
    assert potential(cu, occ["light"], b2d=lambda n: 100 * n) == (2 * sms, 480)


def test_available_dynamic_shared(cu, occ, sms):
    light = occ["light"]
    assert avail(cu, light, 1, 128) == 48 * 1024         # one block: the per-block maximum
    assert avail(cu, light, 2, 128) == 48 * 1024
    assert avail(cu, light, 3, 128) == 34048 - 1024      # 102400 / 3 in 128-byte units, less the reserve
    assert avail(cu, light, 5, 128) == 20480 - 1024
    assert avail(cu, light, 13, 128) == 0                # 128 threads: 12 blocks at most
    # consistent with the block count: that much fits n blocks, a unit more does not
    for n in (3, 5, 7, 12):
        a = avail(cu, light, n, 128)
        assert blocks(cu, light, 128, a) >= n
        assert blocks(cu, light, 128, a + 128) < n
    # a register-heavy kernel: 2 blocks of 256 at most
    assert avail(cu, occ["heavy128"], 2, 256) == 48 * 1024
    assert avail(cu, occ["heavy128"], 3, 256) == 0


def test_carveout_preference(cu, sms):
    mod = load(cu, OCC_PTX)
    f = func(cu, mod, "light")
    assert blocks(cu, f, 32, 20 * 1024) == 4
    ok(cu.cuFuncSetAttribute(ctypes.c_uint64(f), CARVEOUT, 50))     # 50 KiB -> the 64 KiB split
    assert blocks(cu, f, 32, 20 * 1024) == 3
    ok(cu.cuFuncSetAttribute(ctypes.c_uint64(f), CARVEOUT, 25))     # 25 KiB -> 32 KiB
    assert blocks(cu, f, 32, 20 * 1024) == 1
    assert blocks(cu, f, 32, 40 * 1024) == 1     # a block needing more than the split still runs
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


def test_bad_input(cu, occ):
    v = ctypes.c_int()
    f = ctypes.c_uint64(occ["light"])
    assert cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(v), f, 0, ctypes.c_size_t(0)) \
        == INVALID_VALUE
    assert cu.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(ctypes.byref(v), f, 32, ctypes.c_size_t(0),
                                                                   2) == INVALID_VALUE
    assert cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(None, f, 32, ctypes.c_size_t(0)) == INVALID_VALUE
    s = ctypes.c_size_t()
    assert cu.cuOccupancyAvailableDynamicSMemPerBlock(ctypes.byref(s), f, 0, 32) == INVALID_VALUE


POINTER_PTX = """
.version 8.0
.target sm_86
.address_size 64
.shared .align 4 .b8 a[100];
.shared .align 8 .b8 b[16];
.func (.reg .b32 r) fa(.reg .b32 v)
{
    st.shared.u32 [a], v;
    ld.shared.u32 r, [a];
    ret;
}
.func (.reg .b32 r) fb(.reg .b32 v)
{
    st.shared.u32 [b+12], v;
    ld.shared.u32 r, [b+12];
    ret;
}
.visible .entry take(.param .u64 out_)
{
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out_];
    mov.u64 %rd2, fb;
    st.global.u64 [%rd1], %rd2;
    ret;
}
.visible .entry indirect(.param .u64 out_)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    proto: .callprototype (.reg .b32 _) _ (.reg .b32 _);
    ld.param.u64 %rd1, [out_];
    ld.global.u64 %rd2, [%rd1];
    mov.u32 %r1, 1;
    call (%r2), %rd2, (%r1), proto;
    st.global.u32 [%rd1], %r2;
    ret;
}
"""


def test_shared_size_through_function_pointers(cu):
    mod = load(cu, POINTER_PTX)
    # taking fb's address may hand it to a caller: its variable counts
    assert attr(cu, func(cu, mod, "take"), SHARED) == 16
    # a call through a pointer may reach any function of the module: a, then b at 8
    assert attr(cu, func(cu, mod, "indirect"), SHARED) == 104 + 16
    ok(cu.cuModuleUnload(ctypes.c_uint64(mod)))


def test_referenced_common_end():
    # the helper a compiler would use to reserve per kernel only up to the variables it can reach
    import ptx
    from ptx.resources import referenced_common_end
    offsets = {"a": 0, "b": 100, "c": 304}             # the module's common area, laid out once
    got = referenced_common_end(ptx.parse(SHARED_PTX, check=False), offsets)
    assert got == {"use_a": 100, "both": 368, "own": 100, "none": 0}
