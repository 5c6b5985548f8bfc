"""Runtime objects through the real libcuda.so.1 from Python (ctypes), each scenario in a fresh process:
backend choice, ZLUDA_CC, UUID stability, kernel traps as sticky errors, per-thread streams across threads,
stream ordering under concurrency, that streams cost no threads of their own, and a lazy kernel's first launches
from many threads at once."""

import os
import re

import pytest

from chost import run_py

CUDA_H = "/usr/local/cuda/include/cuda.h"


def check(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_backend_hip_unavailable_is_no_device_with_reason(shim_libdir):
    r = run_py(shim_libdir, """
        n = ctypes.c_int()
        print(lib.cuInit(0), lib.cuInit(0), lib.cuDeviceGetCount(P(n)))
    """, ZLUDA_BACKEND="hip", ZLUDA_LOG="1")
    assert check(r).split() == ["100", "100", "3"]     # NO_DEVICE twice, then NOT_INITIALIZED
    # the log line names the choice and what is missing: ROCm itself, or (ROCm present) a usable device
    line = next(ln for ln in r.stderr.splitlines() if "cuInit" in ln)
    assert "ZLUDA_BACKEND=hip" in line and "ROCm" in line
    assert "ROCm is not installed" in line or "no AMD GPU is usable" in line, line


def test_backend_choices(shim_libdir):
    code = "print(lib.cuInit(0))"
    assert check(run_py(shim_libdir, code, ZLUDA_BACKEND="cpu")).strip() == "0"
    assert check(run_py(shim_libdir, code, ZLUDA_BACKEND="auto")).strip() == "0"
    r = run_py(shim_libdir, code, ZLUDA_BACKEND="gpu-please", ZLUDA_LOG="1")
    assert check(r).strip() == "100" and "choose one of" in r.stderr


def test_compute_capability_from_zluda_cc(shim_libdir):
    code = """
        lib.cuInit(0)
        a, b = ctypes.c_int(), ctypes.c_int()
        lib.cuDeviceGetAttribute(P(a), 75, 0); lib.cuDeviceGetAttribute(P(b), 76, 0)
        print(a.value, b.value)
    """
    assert check(run_py(shim_libdir, code, ZLUDA_CC="7.5")).split() == ["7", "5"]
    assert check(run_py(shim_libdir, code, ZLUDA_CC="9.0")).split() == ["9", "0"]
    assert check(run_py(shim_libdir, code, ZLUDA_CC="banana")).split() == ["8", "6"]
    assert check(run_py(shim_libdir, code)).split() == ["8", "6"]


def test_uuid_is_stable_and_v1_equals_v2(shim_libdir):
    code = """
        lib.cuInit(0)
        u1, u2 = ctypes.create_string_buffer(16), ctypes.create_string_buffer(16)
        ok(lib.cuDeviceGetUuid(u1, 0)); ok(lib.cuDeviceGetUuid_v2(u2, 0))
        assert u1.raw == u2.raw
        print(u1.raw.hex())
    """
    first, second = check(run_py(shim_libdir, code)).strip(), check(run_py(shim_libdir, code)).strip()
    assert first == second and len(first) == 32 and first != "0" * 32


def test_device_attribute_numbers_match_the_declarations():
    """Every CUdevice_attribute of the headers the declarations come from (CUDA 13.5) has its number and a
    value; an installed older cuda.h declares a subset with the same numbers."""
    from zluda_py.backends.cpu.device_attributes import ATTRIBUTE, cpu_attributes
    from zluda_py.decls import ENUMS
    declared = {n[len("CU_DEVICE_ATTRIBUTE_"):]: v for n, v in ENUMS["CUdevice_attribute"].items()}
    declared.pop("MAX", None)
    assert ATTRIBUTE == declared
    values = cpu_attributes((8, 6), 4, 3_000_000, 1 << 20, (0, 0, 0))
    assert set(values) == set(declared.values())
    if os.path.isfile(CUDA_H):
        body = re.search(r"typedef enum CUdevice_attribute_enum \{(.*?)\} CUdevice_attribute;",
                         open(CUDA_H).read(), re.S).group(1)
        older = {n[len("CU_DEVICE_ATTRIBUTE_"):]: int(v)
                 for n, v in re.findall(r"(CU_DEVICE_ATTRIBUTE_\w+)\s*=\s*(\d+)", body)}
        older.pop("MAX", None)
        assert all(ATTRIBUTE[n] == v for n, v in older.items())


TRAP_PTX = r"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry trapper(.param .u32 doit)
{
  .reg .u32 %r<2>;
  .reg .pred %p;
  ld.param.u32 %r1, [doit];
  setp.ne.u32 %p, %r1, 0;
  @%p trap;
  ret;
}
"""


def test_kernel_trap_becomes_sticky_launch_failed(shim_libdir):
    r = run_py(shim_libdir, f"""
        PTX = {TRAP_PTX!r}.encode()
        ctx = primary()
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        ok(lib.cuModuleLoadData(P(mod), PTX), "load")
        ok(lib.cuModuleGetFunction(P(fn), mod, b"trapper"), "get")
        def launch(doit, stream=None):
            val = ctypes.c_uint32(doit)
            params = (ctypes.c_void_p * 1)(ctypes.addressof(val))
            return lib.cuLaunchKernel(fn, 2, 1, 1, 32, 1, 1, 0, stream, params, None)
        s = ctypes.c_void_p()
        ok(lib.cuStreamCreate(P(s), 0))
        ok(launch(0, s)); ok(lib.cuStreamSynchronize(s), "harmless kernel")
        seen = []
        CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
        cb = CB(lambda st, status, u: seen.append(status))
        gate = threading.Event()
        HF = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        hold = HF(lambda u: gate.wait())
        ok(lib.cuLaunchHostFunc(s, hold, None))      # the trap runs only after the callback is queued
        ok(launch(1, s))
        ok(lib.cuStreamAddCallback(s, cb, None, 0))
        gate.set()
        d = ctypes.c_uint64()
        results = [lib.cuStreamSynchronize(s), lib.cuCtxSynchronize(), lib.cuMemAlloc_v2(P(d), 16),
                   lib.cuStreamQuery(s), launch(0, s)]
        print(results, seen)
        ok(lib.cuDevicePrimaryCtxReset_v2(0), "reset")
        c2 = ctypes.c_void_p()
        print(lib.cuDevicePrimaryCtxRetain(P(ctx), 0), lib.cuCtxCreate_v2(P(c2), 0, 0))
    """)
    lines = check(r).splitlines()
    assert lines[0] == "[719, 719, 719, 719, 719] [719]"     # CUDA_ERROR_LAUNCH_FAILED everywhere
    assert lines[1] == "719 719"      # as on NVIDIA's driver: the process makes no context any more


def test_threads_have_their_own_per_thread_streams(shim_libdir):
    r = run_py(shim_libdir, """
        ctx = primary()
        import zluda_py.driver.context as cm
        import zluda_py.driver.stream as sm
        N, WORDS = 8, 4096
        bufs = []
        for i in range(N):
            d = ctypes.c_uint64(); ok(lib.cuMemAlloc_v2(P(d), WORDS * 4)); bufs.append(d.value)
        errors = []
        def worker(i):
            try:
                ok(lib.cuCtxSetCurrent(ctx))
                for rep in range(20):
                    ok(lib.cuMemsetD32Async_ptsz(ctypes.c_uint64(bufs[i]), (i << 16) | rep, WORDS, None))
                host = (ctypes.c_uint32 * WORDS)()
                ok(lib.cuMemcpyDtoHAsync_v2_ptsz(host, ctypes.c_uint64(bufs[i]), WORDS * 4, None))
                ok(lib.cuStreamSynchronize_ptsz(None))
                assert set(host) == {(i << 16) | 19}, set(host)
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(N)]
        [t.start() for t in threads]; [t.join() for t in threads]
        assert not errors, errors
        import gc; gc.collect()
        c = cm.current_context()
        print(len(c.per_thread_streams))
    """)
    assert check(r).strip() == "0"      # the streams of finished threads left the context


def test_streams_keep_order_under_concurrency_and_cost_no_threads(shim_libdir):
    r = run_py(shim_libdir, """
        primary()
        log = {}
        lock = threading.Lock()
        HF = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        def record(u):
            with lock:
                log.setdefault((u >> 16) - 1, []).append(u & 0xFFFF)   # u is never 0: ctypes gives None
        hf = HF(record)
        base_threads = threading.active_count()
        streams = []
        for i in range(16):
            s = ctypes.c_void_p(); ok(lib.cuStreamCreate(P(s), 1)); streams.append(s)
        for k in range(50):
            for i, s in enumerate(streams):
                ok(lib.cuLaunchHostFunc(s, hf, ctypes.c_void_p(((i + 1) << 16) | k)))
        ok(lib.cuCtxSynchronize())
        assert sorted(log) == list(range(16)) and all(v == list(range(50)) for v in log.values()), log
        peak = threading.active_count()
        for s in streams:
            ok(lib.cuStreamDestroy_v2(s))
        for _ in range(2000):
            s = ctypes.c_void_p(); ok(lib.cuStreamCreate(P(s), 0)); ok(lib.cuStreamDestroy_v2(s))
        print(base_threads, peak, threading.active_count())
    """)
    base, peak, after = map(int, check(r).split())
    assert peak - base <= 17 and after <= peak


def test_destroyed_stream_finishes_its_work(shim_libdir):
    r = run_py(shim_libdir, """
        primary()
        HF = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        done = []
        hf = HF(lambda u: (time.sleep(0.05), done.append(u)))
        s = ctypes.c_void_p(); ok(lib.cuStreamCreate(P(s), 0))
        ok(lib.cuLaunchHostFunc(s, hf, ctypes.c_void_p(7)))
        ok(lib.cuStreamDestroy_v2(s))          # returns at once, like CUDA; the work still runs
        print(len(done), lib.cuStreamQuery(s))
        ok(lib.cuCtxSynchronize())
        time.sleep(0.2)
        print(done)
    """)
    assert check(r).splitlines() == ["0 400", "[7]"]


def test_random_2d_3d_copies_and_fills_match_numpy(shim_libdir):
    """Random boxes, offsets and pitches, host<->device<->device, checked element by element against
    numpy slicing; outputs poisoned before every copy."""
    r = run_py(shim_libdir, """
        import numpy as np, struct
        primary()
        rng = np.random.default_rng()
        HOST, DEVICE = 1, 2
        def memcpy3d(src, dst, w, h, d):
            # src/dst: (memtype, address, x, y, z, pitch, height); CUDA_MEMCPY3D is 25 u64 slots
            q = [0] * 25
            for base, (mt, addr, x, y, z, pitch, height) in ((0, src), (11, dst)):
                q[base:base + 4] = [x, y, z, 0]
                q[base + 4] = mt
                q[base + 5 if mt == HOST else base + 6] = addr
                q[base + 9], q[base + 10] = pitch, height
            q[22:25] = [w, h, d]
            buf = ctypes.create_string_buffer(struct.pack("<25Q", *q))
            return lib.cuMemcpy3D_v2(buf)
        for case in range(120):
            D, H, W = (int(v) for v in rng.integers(1, 9, 3))
            spitch, dpitch = W + int(rng.integers(0, 40)), W + int(rng.integers(0, 40))
            sheight, dheight = H + int(rng.integers(0, 4)), H + int(rng.integers(0, 4))
            sx, sy, sz = int(rng.integers(0, 5)), int(rng.integers(0, 3)), int(rng.integers(0, 2))
            dx, dy, dz = int(rng.integers(0, 5)), int(rng.integers(0, 3)), int(rng.integers(0, 2))
            spitch, dpitch = max(spitch, sx + W), max(dpitch, dx + W)
            sheight, dheight = max(sheight, sy + H), max(dheight, dy + H)
            src = rng.integers(0, 256, (sz + D, sheight, spitch), dtype=np.uint8)
            dst = np.full((dz + D, dheight, dpitch), 0xEE, np.uint8)
            want = dst.copy()
            want[dz:dz + D, dy:dy + H, dx:dx + W] = src[sz:sz + D, sy:sy + H, sx:sx + W]
            kind = case % 3      # 0: device->host, 1: device->device, 2: host->device
            dsrc, ddst = ctypes.c_uint64(), ctypes.c_uint64()
            ok(lib.cuMemAlloc_v2(P(dsrc), ctypes.c_size_t(src.nbytes)))
            ok(lib.cuMemAlloc_v2(P(ddst), ctypes.c_size_t(dst.nbytes)))
            ok(lib.cuMemcpyHtoD_v2(dsrc, src.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(src.nbytes)))
            ok(lib.cuMemcpyHtoD_v2(ddst, dst.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(dst.nbytes)))
            s_side = (DEVICE, dsrc.value, sx, sy, sz, spitch, sheight)
            if kind == 2:
                s_side = (HOST, src.ctypes.data, sx, sy, sz, spitch, sheight)
            if kind == 0:
                host_dst = dst.copy()
                ok(memcpy3d(s_side, (HOST, host_dst.ctypes.data, dx, dy, dz, dpitch, dheight), W, H, D))
                assert np.array_equal(host_dst, want), f"case {case}"
                ok(lib.cuMemcpyHtoD_v2(ddst, host_dst.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(dst.nbytes)))
            else:
                ok(memcpy3d(s_side, (DEVICE, ddst.value, dx, dy, dz, dpitch, dheight), W, H, D), f"case {case}")
            got = np.full_like(dst, 0x11)
            ok(lib.cuMemcpyDtoH_v2(got.ctypes.data_as(ctypes.c_void_p), ddst, ctypes.c_size_t(got.nbytes)))
            assert np.array_equal(got, want), f"case {case}: {(D, H, W, spitch, dpitch, sx, sy, sz, dx, dy, dz)}"
            # and a 2D fill of random u16 over a random sub-rectangle of the destination (an even pitch: at
            # least one u16 a row)
            if dpitch % 2 == 0:
                rows, cols = int(rng.integers(1, dheight + 1)), int(rng.integers(1, dpitch // 2 + 1))
                value = int(rng.integers(0, 1 << 16))
                ok(lib.cuMemsetD2D16_v2(ddst, ctypes.c_size_t(dpitch), ctypes.c_ushort(value),
                                        ctypes.c_size_t(cols), ctypes.c_size_t(rows)))
                ok(lib.cuMemcpyDtoH_v2(got.ctypes.data_as(ctypes.c_void_p), ddst, ctypes.c_size_t(got.nbytes)))
                view = want.reshape(-1, dpitch)[:rows, :2 * cols].view(np.uint16)
                view[...] = value
                assert np.array_equal(got, want), f"fill case {case}"
            ok(lib.cuMemFree_v2(dsrc)); ok(lib.cuMemFree_v2(ddst))
        print("ok")
    """)
    assert check(r).strip() == "ok"


FILL_PTX = r"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry fill(.param .u64 out, .param .u32 n, .param .u32 k)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    .reg .pred %p;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r2, [k];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r3, %r3, %r4, %r5;
    setp.ge.u32 %p, %r3, %r1;
    @%p bra DONE;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    mad.lo.s32 %r5, %r3, 3, %r2;
    st.global.u32 [%rd3], %r5;
DONE:
    ret;
}
"""


@pytest.mark.parametrize("loading", ["LAZY", "EAGER"])
def test_first_launches_of_one_kernel_from_many_threads(shim_libdir, loading):
    # each thread's first launch races the others' to compile the kernel, for its own block shape (the first
    # compile specialises on one, the rest need the code for any block): every result must be whole
    r = run_py(shim_libdir, f"""
        ctx = primary()
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        ok(lib.cuModuleLoadData(P(mod), {FILL_PTX!r}.encode()), "load")
        ok(lib.cuModuleGetFunction(P(fn), mod, b"fill"), "get")
        N, T = 5000, 6
        bufs = []
        for i in range(T):
            d = ctypes.c_uint64(); ok(lib.cuMemAlloc_v2(P(d), N * 4)); bufs.append(d)
        gate, errors = threading.Barrier(T), []
        def worker(i):
            try:
                ok(lib.cuCtxSetCurrent(ctx))
                out, n, k = ctypes.c_uint64(bufs[i].value), ctypes.c_uint32(N), ctypes.c_uint32(1000 * i + 7)
                params = (ctypes.c_void_p * 3)(*(ctypes.addressof(v) for v in (out, n, k)))
                block = 32 * (i + 1)
                gate.wait()
                ok(lib.cuLaunchKernel(fn, (N + block - 1) // block, 1, 1, block, 1, 1, 0, None, params, None))
                ok(lib.cuStreamSynchronize(None))
                host = (ctypes.c_uint32 * N)()
                ok(lib.cuMemcpyDtoH_v2(host, bufs[i], N * 4))
                bad = [j for j in range(N) if host[j] != (3 * j + 1000 * i + 7) & 0xFFFFFFFF]
                assert not bad, (i, bad[:5])
            except BaseException as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(T)]
        [t.start() for t in threads]; [t.join() for t in threads]
        print("errors", errors)
    """, CUDA_MODULE_LOADING=loading)
    assert check(r).strip() == "errors []"
