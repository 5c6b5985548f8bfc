"""The native CPU runtime (ptx/runtime) on its own: block functions written in C stand in for generated code."""

import ctypes
import os
import random
import re
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from ptx import runtime as rt

KERNELS_C = r"""
#include "ptxrt.h"
#include <fenv.h>
#include <stdatomic.h>
#include <string.h>

typedef _Atomic uint32_t au32;

/* params: u32 *hits (one per block), u32 *errors, u64 fill */
int32_t count_blocks(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    uint32_t *hits, *errors;
    memcpy(&hits, L->params, 8);
    memcpy(&errors, L->params + 8, 8);
    uint64_t nblocks = (uint64_t)L->grid[0] * L->grid[1] * L->grid[2];
    if (first >= last || last > nblocks) atomic_fetch_add((au32 *)&errors[0], 1);
    if ((uintptr_t)W->shared % 128 || (uintptr_t)W->scratch % 64) atomic_fetch_add((au32 *)&errors[1], 1);
    uint64_t threads = (uint64_t)L->block[0] * L->block[1] * L->block[2];
    uint64_t shared = (uint64_t)L->static_shared + L->dyn_shared;
    for (uint64_t b = first; b < last; b++) {
        atomic_fetch_add((au32 *)&hits[b], 1);
        /* every byte of both buffers is ours while the block runs: fill, then check nobody else wrote */
        uint8_t tag = (uint8_t)(b * 131 + W->worker_id * 7 + 1);
        for (uint64_t i = 0; i < shared; i++) W->shared[i] = (uint8_t)(tag + i);
        for (uint64_t i = 0; i < W->scratch_bytes; i++) W->scratch[i] = (uint8_t)(tag ^ i);
        for (uint64_t i = 0; i < shared; i++)
            if (W->shared[i] != (uint8_t)(tag + i)) { atomic_fetch_add((au32 *)&errors[2], 1); break; }
        for (uint64_t i = 0; i < W->scratch_bytes; i++)
            if (W->scratch[i] != (uint8_t)(tag ^ i)) { atomic_fetch_add((au32 *)&errors[3], 1); break; }
        if (W->scratch_bytes != *(uint64_t *)(L->params + 16) * threads) atomic_fetch_add((au32 *)&errors[4], 1);
        void *m = ptx_rt_malloc(100);
        if (!m) atomic_fetch_add((au32 *)&errors[5], 1);
        memset(m, 1, 100);
        ptx_rt_free(m);
    }
    return 0;
}

/* params: u32 *hits, u64 trap_block, u32 how (0: return 1, 1: ptx_rt_trap, 2: assert) */
int32_t trap_at(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    uint32_t *hits;
    uint64_t at;
    uint32_t how;
    memcpy(&hits, L->params, 8);
    memcpy(&at, L->params + 8, 8);
    memcpy(&how, L->params + 16, 4);
    for (uint64_t b = first; b < last; b++) {
        atomic_fetch_add((au32 *)&hits[b], 1);
        if (b == at) {
            if (how == 0) return 1;
            if (how == 1) { ptx_rt_trap(W); return PTXRT_TRAP; }
            uint32_t ctaid[3] = {(uint32_t)(b % L->grid[0]), (uint32_t)(b / L->grid[0]), 0};
            uint32_t tid[3] = {5, 0, 0};
            ptx_rt_assertfail(W, "x == 1", "kern.cu", 12, "void k(int *)", ctaid, tid);
            return PTXRT_ASSERT;
        }
    }
    return 0;
}

/* params: const char *fmt, const uint8_t *args, i32 *ret  (block 0 prints once) */
int32_t print_one(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    const char *fmt;
    const uint8_t *args;
    int32_t *ret;
    memcpy(&fmt, L->params, 8);
    memcpy(&args, L->params + 8, 8);
    memcpy(&ret, L->params + 16, 8);
    if (first == 0) *ret = ptx_rt_vprintf(W, fmt, args);
    return 0;
}

/* params: u32 lines. Each "thread" of each block prints `lines` numbered lines. */
int32_t print_many(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    uint32_t lines;
    memcpy(&lines, L->params, 4);
    for (uint64_t b = first; b < last; b++)
        for (uint32_t t = 0; t < L->block[0]; t++)
            for (uint32_t i = 0; i < lines; i++) {
                struct { uint32_t b, t, i; } a = {(uint32_t)b, t, i};
                ptx_rt_vprintf(W, "b%u t%u l%u\n", (const uint8_t *)&a);
            }
    return 0;
}

/* params: u32 *arrivals (phases), u32 *errors, u32 phases. Checks that every block passes each
   grid barrier only after all blocks arrived, and that shared memory survives a suspension. */
int32_t grid_phases(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    uint32_t *arrivals, *errors, phases;
    memcpy(&arrivals, L->params, 8);
    memcpy(&errors, L->params + 8, 8);
    memcpy(&phases, L->params + 16, 4);
    uint64_t nblocks = (uint64_t)L->grid[0] * L->grid[1] * L->grid[2];
    if (last != first + 1) atomic_fetch_add((au32 *)&errors[0], 1);
    for (uint32_t p = 0; p < phases; p++) {
        memset(W->shared, (int)(first + p), L->static_shared);
        atomic_fetch_add((au32 *)&arrivals[p], 1);
        if (W->grid_phase != p) atomic_fetch_add((au32 *)&errors[1], 1);
        if (ptx_rt_grid_sync(W)) return PTXRT_TRAP;
        if (atomic_load((au32 *)&arrivals[p]) != nblocks) atomic_fetch_add((au32 *)&errors[2], 1);
        for (uint32_t i = 0; i < L->static_shared; i++)
            if (W->shared[i] != (uint8_t)(first + p)) { atomic_fetch_add((au32 *)&errors[3], 1); break; }
    }
    return 0;
}

/* nvcc's inline grid.sync(): block 0 adds 0x80000001 - nblocks, the others 1, to ws[1]; each spins
   (yielding) until the top bit flips. params: u32 *arrivals, u32 *errors, u32 phases */
int32_t nvcc_grid_sync(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    uint32_t *arrivals, *errors, phases;
    memcpy(&arrivals, L->params, 8);
    memcpy(&errors, L->params + 8, 8);
    memcpy(&phases, L->params + 16, 4);
    au32 *ws = (au32 *)L->grid_workspace;
    if (!ws) { ptx_rt_trap(W); return PTXRT_TRAP; }
    uint32_t nblocks = L->grid[0] * L->grid[1] * L->grid[2];
    for (uint32_t p = 0; p < phases; p++) {
        atomic_fetch_add((au32 *)&arrivals[p], 1);
        uint32_t inc = first == 0 ? 0x80000001u - nblocks : 1;
        uint32_t old = atomic_fetch_add(&ws[1], inc);
        while ((int32_t)(atomic_load(&ws[1]) ^ old) >= 0) ptx_rt_yield(W);
        if (atomic_load((au32 *)&arrivals[p]) != nblocks) atomic_fetch_add((au32 *)&errors[0], 1);
    }
    return 0;
}

/* Each block picks a rounding mode, yields a few times, and checks it still has its own mode.
   params: u32 *errors */
int32_t rounding_per_block(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    uint32_t *errors;
    memcpy(&errors, L->params, 8);
    static const int modes[4] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    if (fegetround() != FE_TONEAREST) atomic_fetch_add((au32 *)&errors[0], 1);
    int mode = modes[first % 4];
    fesetround(mode);
    for (int i = 0; i < 5; i++) {
        ptx_rt_yield(W);
        if (fegetround() != mode) atomic_fetch_add((au32 *)&errors[1], 1);
    }
    if (ptx_rt_grid_sync(W)) return PTXRT_TRAP;
    if (fegetround() != mode) atomic_fetch_add((au32 *)&errors[1], 1);
    fesetround(FE_TONEAREST);
    return 0;
}

/* Not cooperative: calling the grid barrier is an error. */
int32_t bad_grid_sync(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    return ptx_rt_grid_sync(W) ? PTXRT_TRAP : 0;
}

/* params: u64 *out (one per block) */
int32_t timer(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) {
    uint64_t *out;
    memcpy(&out, L->params, 8);
    for (uint64_t b = first; b < last; b++) out[b] = ptx_rt_globaltimer();
    return 0;
}

int32_t empty(const ptx_launch *L, uint64_t first, uint64_t last, ptx_worker *W) { return 0; }
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    rt.library()  # loaded RTLD_GLOBAL, so the test library's ptx_rt_* references resolve to it
    d = tmp_path_factory.mktemp("rtk")
    src = d / "kernels.c"
    src.write_text(KERNELS_C)
    so = d / "kernels.so"
    inc = os.path.dirname(rt.HEADER)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-std=gnu11", "-I", inc, str(src), "-o", str(so)],
                   check=True)
    lib = ctypes.CDLL(str(so))
    return {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
            for name in ("count_blocks", "trap_at", "print_one", "print_many", "grid_phases",
                         "bad_grid_sync", "timer", "empty", "nvcc_grid_sync", "rounding_per_block")}


def ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def test_symbols_are_the_callbacks():
    syms = rt.symbols()
    assert set(syms) == set(rt.CALLBACKS)
    assert all(isinstance(a, int) and a for a in syms.values())
    assert len(set(syms.values())) == len(syms)
    assert rt.num_workers() >= 1


GRIDS = [((1, 1, 1), (1, 1, 1)), ((2, 1, 1), (32, 1, 1)), ((3, 5, 7), (7, 3, 2)),
         ((1000, 1, 1), (256, 1, 1)), ((17, 1, 33), (1, 1, 64)), ((65535, 2, 1), (1, 1, 1)),
         ((1, 1, 4), (1024, 1, 1)), ((300001, 1, 1), (3, 1, 1))]


@pytest.mark.parametrize("grid,block", GRIDS)
def test_every_block_runs_once(kernels, grid, block):
    nblocks = grid[0] * grid[1] * grid[2]
    hits = np.full(nblocks, 0, np.uint32)
    errors = np.full(8, 0, np.uint32)
    frame = random.choice([0, 1, 8, 40])
    # every block writes and checks every byte: keep the big sizes to grids that stay quick
    sizes = [(0, 0), (16, 0), (1000, 24)] + ([(0, 48 * 1024 + 3)] if nblocks <= 5000 else [])
    static, dyn = random.choice(sizes)
    params = struct.pack("QQQ", ptr(hits), ptr(errors), frame)
    status = rt.launch(kernels["count_blocks"], params, grid, block, static, dyn, frame)
    assert status == rt.OK
    assert errors.tolist() == [0] * 8
    assert (hits == 1).all(), np.flatnonzero(hits != 1)[:10]


def test_buffers_grow_and_shrink_between_launches(kernels):
    errors = np.zeros(8, np.uint32)
    for static, dyn, frame, threads in [(64, 0, 4, 32), (100000, 5000, 200, 1024), (8, 0, 1, 1),
                                        (0, 0, 0, 1), (200000, 0, 64, 256)]:
        hits = np.zeros(257, np.uint32)
        params = struct.pack("QQQ", ptr(hits), ptr(errors), frame)
        assert rt.launch(kernels["count_blocks"], params, 257, threads, static, dyn, frame) == rt.OK
        assert (hits == 1).all()
    assert errors.tolist() == [0] * 8


def test_concurrent_launches_from_four_threads(kernels):
    failures = []

    def worker(seed):
        r = random.Random(seed)
        errors = np.zeros(8, np.uint32)
        for _ in range(25):
            grid = (r.randint(1, 300), r.randint(1, 3), 1)
            hits = np.zeros(grid[0] * grid[1], np.uint32)
            frame = r.randint(0, 16)
            params = struct.pack("QQQ", ptr(hits), ptr(errors), frame)
            st = rt.launch(kernels["count_blocks"], params, grid, (r.randint(1, 64), 1, 1),
                           r.randint(0, 4096), r.randint(0, 64), frame)
            if st != rt.OK or not (hits == 1).all() or errors.any():
                failures.append((seed, st, hits.tolist(), errors.tolist()))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


@pytest.mark.parametrize("how,expected", [(0, rt.TRAP), (1, rt.TRAP), (2, rt.ASSERT)])
def test_trap_stops_the_launch(kernels, capfd, how, expected):
    nblocks = 1 << 20
    hits = np.zeros(nblocks, np.uint32)
    params = struct.pack("QQI", ptr(hits), 3, how)
    assert rt.launch(kernels["trap_at"], params, nblocks, 32) == expected
    assert hits[3] == 1
    assert hits.max() <= 1
    assert hits.sum() < nblocks          # the rest of the grid was not run
    err = capfd.readouterr().err
    if how == 2:
        assert err == "kern.cu:12: void k(int *): block: [3,0,0], thread: [5,0,0] Assertion `x == 1` failed.\n"
    # the pool is fine afterwards
    hits[:] = 0
    params = struct.pack("QQI", ptr(hits), nblocks, 0)
    assert rt.launch(kernels["trap_at"], params, nblocks, 32) == rt.OK
    assert (hits == 1).all()


def test_bad_launches(kernels):
    assert rt.launch(kernels["empty"], None, (0, 1, 1), 1) == rt.BAD_LAUNCH
    assert rt.launch(kernels["empty"], None, 1, (1, 0, 1)) == rt.BAD_LAUNCH
    assert rt.launch(0, None, 1, 1) == rt.BAD_LAUNCH
    assert rt.launch(kernels["bad_grid_sync"], None, 4, 1) == rt.TRAP
    assert rt.launch(kernels["empty"], None, 70000, 1, cooperative=True) == rt.BAD_LAUNCH  # never co-resident
    with pytest.raises(ValueError):
        rt.launch(kernels["empty"], None, (1, 2, 3, 4), 1)


@pytest.mark.parametrize("nblocks,phases", [(1, 3), (2, 1), (37, 5), (300, 4)])
def test_grid_sync_cooperative(kernels, nblocks, phases):
    arrivals = np.zeros(phases, np.uint32)
    errors = np.zeros(4, np.uint32)
    params = struct.pack("QQI", ptr(arrivals), ptr(errors), phases)
    assert rt.launch(kernels["grid_phases"], params, nblocks, 64, 256, 0, 16, cooperative=True) == rt.OK
    assert errors.tolist() == [0, 0, 0, 0]
    assert (arrivals == nblocks).all()


@pytest.mark.parametrize("nblocks,phases", [(1, 2), (5, 3), (200, 4)])
def test_nvcc_inline_grid_sync_spins_with_yield(kernels, nblocks, phases):
    arrivals = np.zeros(phases, np.uint32)
    errors = np.zeros(4, np.uint32)
    params = struct.pack("QQI", ptr(arrivals), ptr(errors), phases)
    assert rt.launch(kernels["nvcc_grid_sync"], params, nblocks, 32, 0, 0, 0, cooperative=True) == rt.OK
    assert errors.tolist() == [0, 0, 0, 0]
    assert (arrivals == nblocks).all()
    # without a cooperative launch there is no workspace, and the kernel traps as on a GPU
    assert rt.launch(kernels["nvcc_grid_sync"], params, nblocks, 32) == rt.TRAP


def test_fibers_keep_their_own_rounding_mode(kernels):
    errors = np.zeros(2, np.uint32)
    assert rt.launch(kernels["rounding_per_block"], struct.pack("Q", ptr(errors)), 64, 1, cooperative=True) == rt.OK
    assert errors.tolist() == [0, 0]


def test_trap_in_a_cooperative_launch(kernels):
    hits = np.zeros(64, np.uint32)
    params = struct.pack("QQI", ptr(hits), 10, 1)
    assert rt.launch(kernels["trap_at"], params, 64, 1, cooperative=True) == rt.TRAP
    assert hits[10] == 1 and hits.max() == 1


def test_launch_in_a_forked_child(kernels):
    # the pool's helper threads do not survive fork(); the child must get a fresh pool, not hang
    hits = np.zeros(5000, np.uint32)
    errors = np.zeros(8, np.uint32)
    params = struct.pack("QQQ", ptr(hits), ptr(errors), 4)
    assert rt.launch(kernels["count_blocks"], params, 5000, 32, 0, 0, 4) == rt.OK
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            hits[:] = 0
            ok = rt.launch(kernels["count_blocks"], params, 5000, 32, 0, 0, 4) == rt.OK and (hits == 1).all()
            code = 0 if ok and not errors.any() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_globaltimer_is_ns_since_epoch(kernels):
    out = np.zeros(64, np.uint64)
    before = time.time_ns()
    assert rt.launch(kernels["timer"], struct.pack("Q", ptr(out)), 64, 1) == rt.OK
    after = time.time_ns()
    assert (out >= before - 1000).all() and (out <= after + 1000).all()


# ---------------------------------------------------------------- printf

class ArgPacker:
    """Packs arguments the way nvcc lays out vprintf's buffer: natural alignment from the start."""

    def __init__(self):
        self.buf = bytearray()
        self.keep = []

    def _put(self, fmt, value):
        size = struct.calcsize(fmt)
        self.buf += b"\0" * (-len(self.buf) % size)
        self.buf += struct.pack(fmt, value)

    def i32(self, v):
        self._put("<i", v)

    def i64(self, v):
        self._put("<q", v)

    def f64(self, v):
        self._put("<d", v)

    def string(self, s: bytes):
        b = ctypes.create_string_buffer(s)
        self.keep.append(b)
        self._put("<Q", ctypes.addressof(b))


def run_printf(kernels, capfd, fmt: bytes, packer: ArgPacker):
    capfd.readouterr()
    fmt_buf = ctypes.create_string_buffer(fmt)
    args = ctypes.create_string_buffer(bytes(packer.buf) + b"\0" * 8)
    ret = np.array([-99], np.int32)
    params = struct.pack("QQQ", ctypes.addressof(fmt_buf), ctypes.addressof(args), ptr(ret))
    assert rt.launch(kernels["print_one"], params, 3, 1) == rt.OK
    return capfd.readouterr().out, int(ret[0])


SPEC = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|z)?([diuxXocsfeEgG%])")


def random_spec(r: random.Random, python_safe: bool) -> str:
    """A random conversion; python_safe avoids where Python's % differs from C's printf ('+' on
    unsigned, '#o' giving '0o', '#x' of 0, zero precision on integer 0, '0' padding of inf)."""
    conv = r.choice("diuxXocsfeEgG%")
    if conv == "%":
        return "%%"
    flags = "".join(r.sample("-+ #0", r.randint(0, 2)))
    if conv in "cs":
        flags = flags.replace("0", "").replace("#", "").replace("+", "").replace(" ", "")
    if conv in "diu":
        flags = flags.replace("#", "")
    if python_safe and conv in "uxXo":
        flags = flags.replace("+", "").replace(" ", "").replace("#", "")
    if python_safe and conv in "feEgG":
        flags = flags.replace("0", "")
    width = r.choice(["", "", str(r.randint(0, 25)), "*"])
    prec = "" if conv == "c" else r.choice(["", "", "." + str(r.randint(0, 12)), ".*", "."])
    if python_safe and conv in "diuxXo":
        prec = ""
    length = r.choice(["", "", "l", "ll"]) if conv in "diuxXo" else ""
    return f"%{flags}{width}{prec}{length}{conv}"


def fill(spec_match, r: random.Random, packer: ArgPacker, py_args: list, c_args: list):
    """Random values for one conversion, packed for vprintf and listed for Python's % and libc."""
    flags, width, prec, length, conv = spec_match.groups()
    if conv == "%":
        return
    if width == "*":
        # glibc pads a '0'-flagged conversion with zeros on the right when '*' is negative (C says
        # '-' overrides '0'); we follow C, so the comparison avoids that corner.
        w = r.randint(0 if "0" in flags else -20, 20)
        packer.i32(w)
        py_args.append(w)
        c_args.append(ctypes.c_int(w))
    if prec == "*":
        p = r.randint(0, 10)
        packer.i32(p)
        py_args.append(p)
        c_args.append(ctypes.c_int(p))
    wide = length in ("l", "ll", "z")
    if conv in "di":
        v = r.choice([0, 1, -1, r.randint(-2**31, 2**31 - 1), -2**31, 2**31 - 1]) if not wide else \
            r.choice([r.randint(-2**63, 2**63 - 1), -2**63, 2**63 - 1, 0])
        (packer.i64 if wide else packer.i32)(v)
        py_args.append(v)
        c_args.append(ctypes.c_longlong(v) if wide else ctypes.c_int(v))
    elif conv in "uxXo":
        bits = 64 if wide else 32
        v = r.choice([0, 1, r.getrandbits(bits), 2**bits - 1])
        (packer.i64 if wide else packer.i32)(v - (1 << bits) if v >= 1 << (bits - 1) else v)
        py_args.append(v)
        c_args.append(ctypes.c_ulonglong(v) if wide else ctypes.c_uint(v))
    elif conv == "c":
        v = r.randint(32, 126)
        packer.i32(v)
        py_args.append(v)
        c_args.append(ctypes.c_int(v))
    elif conv == "s":
        s = "".join(r.choice("abcXYZ 019_") for _ in range(r.randint(0, 12)))
        packer.string(s.encode())
        py_args.append(s)
        c_args.append(ctypes.c_char_p(s.encode()))
    else:
        v = r.choice([0.0, -0.0, 1.5, -2.25, 1e300, 1e-300, 5e-324, float("inf"), float("-inf"),
                      r.uniform(-1e6, 1e6), r.uniform(-1, 1), float(np.float32(r.uniform(-100, 100)))])
        packer.f64(v)
        py_args.append(v)
        c_args.append(ctypes.c_double(v))


def python_reference(fmt: str, py_args):
    # Python's % ignores h/l length modifiers and rejects 'll'; C's %u is Python's %d on a non-negative int.
    return SPEC.sub(_py_spec, fmt) % tuple(py_args)


def _py_spec(m):
    flags, width, prec, length, conv = m.groups()
    if conv == "%":
        return "%%"
    s = "%" + flags + (width or "")
    if prec is not None:
        s += "." + prec
    return s + ("d" if conv == "u" else conv)


def random_format(r: random.Random, python_safe: bool):
    specs = [random_spec(r, python_safe) for _ in range(r.randint(1, 6))]
    fmt = "[" + "|".join(specs) + "]\n"
    packer, py_args, c_args = ArgPacker(), [], []
    for m in SPEC.finditer(fmt):
        fill(m, r, packer, py_args, c_args)
    return fmt, packer, py_args, c_args


def test_printf_matches_python_formatting(kernels, capfd):
    r = random.Random(int.from_bytes(os.urandom(4), "little"))
    for _ in range(60):
        fmt, packer, py_args, _ = random_format(r, python_safe=True)
        out, ret = run_printf(kernels, capfd, fmt.encode(), packer)
        assert out == python_reference(fmt, py_args), (fmt, py_args)
        assert ret == len(py_args), fmt   # CUDA's printf returns the number of arguments it consumed


def test_printf_matches_libc_formatting(kernels, capfd):
    libc = ctypes.CDLL(None)
    r = random.Random(int.from_bytes(os.urandom(4), "little"))
    for _ in range(100):
        fmt, packer, py_args, c_args = random_format(r, python_safe=False)
        buf = ctypes.create_string_buffer(4096)
        libc.snprintf(buf, 4096, fmt.encode(), *c_args)
        out, ret = run_printf(kernels, capfd, fmt.encode(), packer)
        assert out == buf.value.decode(), (fmt, py_args)
        assert ret == len(py_args), fmt


def test_printf_against_libc_for_a_and_p(kernels, capfd):
    libc = ctypes.CDLL(None)
    for fmt, value in [("%a", 1.0), ("%a", -0.1), ("%A", 3e-310), ("%.3a", 2.0 / 3), ("%20.1a", 1e10),
                       ("%p", 0x1234), ("%p", 0), ("%-20p|", 0xdeadbeef)]:
        packer = ArgPacker()
        buf = ctypes.create_string_buffer(128)
        if "p" in fmt:
            packer._put("<Q", value)
            libc.snprintf(buf, 128, fmt.encode(), ctypes.c_void_p(value))
        else:
            packer.f64(value)
            libc.snprintf(buf, 128, fmt.encode(), ctypes.c_double(value))
        out, ret = run_printf(kernels, capfd, fmt.encode(), packer)
        assert out == buf.value.decode(), fmt
        assert ret == 1


def test_printf_layout_mixed_sizes(kernels, capfd):
    # the buffer nvcc builds for printf("%d %f %f %s %lld %c %hd %*d %lu\n", ...): offsets 0,8,16,24,32,40,44,48,52,56
    p = ArgPacker()
    p.i32(-7); p.f64(1.5); p.f64(-2.0); p.string(b"str"); p.i64(-(1 << 40)); p.i32(ord("z")); p.i32(70000)
    p.i32(6); p.i32(42); p.i64(2**64 - 1 - (1 << 64))
    assert len(p.buf) == 64
    out, ret = run_printf(kernels, capfd, b"%d %f %f %s %lld %c %hd %*d %lu\n", p)
    assert out == "-7 1.500000 -2.000000 str -1099511627776 z 4464     42 18446744073709551615\n"
    assert ret == 10


def test_printf_special_cases(kernels, capfd):
    out, ret = run_printf(kernels, capfd, b"no args 100%% sure\n", ArgPacker())
    assert (out, ret) == ("no args 100% sure\n", 0)
    p = ArgPacker()
    p._put("<Q", 0)
    out, ret = run_printf(kernels, capfd, b"[%s]", p)
    assert (out, ret) == ("[(null)]", 1)
    p = ArgPacker()
    p.i32(300); p.i32(-1)
    out, _ = run_printf(kernels, capfd, b"%hhd %hhu", p)
    assert out == "44 255"


def test_printf_order_per_thread_and_block(kernels, capfd):
    capfd.readouterr()
    nblocks, threads, lines = 500, 3, 4
    assert rt.launch(kernels["print_many"], struct.pack("I", lines), nblocks, threads) == rt.OK
    out = capfd.readouterr().out
    expected = "".join(f"b{b} t{t} l{i}\n" for b in range(nblocks) for t in range(threads) for i in range(lines))
    assert out == expected


def test_printf_interleaves_with_host_stdout(kernels, tmp_path):
    # the host's own printf and the kernel's output land in program order on the same FILE*
    code = f"""
import ctypes, struct, sys
from ptx import runtime as rt
rt.library()
lib = ctypes.CDLL({str(tmp_path / 'k.so')!r})
libc = ctypes.CDLL(None)
fn = ctypes.cast(lib.print_many, ctypes.c_void_p).value
libc.printf(b"host before\\n")
rt.launch(fn, struct.pack("I", 1), 2, 1)
libc.printf(b"host after\\n")
libc.fflush(None)
"""
    inc = os.path.dirname(rt.HEADER)
    src = tmp_path / "k.c"
    src.write_text(KERNELS_C)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-I", inc, str(src), "-o", str(tmp_path / "k.so")], check=True)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(rt.__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out == "host before\nb0 t0 l0\nb1 t0 l0\nhost after\n"


# ---------------------------------------------------------------- build

def test_concurrent_builds_into_a_fresh_cache(tmp_path):
    code = ("import os, ctypes; from ptx.runtime import build; "
            "build._candidate_dirs = lambda: [__import__('pathlib').Path(os.environ['XDG_CACHE_HOME'])]; "
            "p = build.ensure_built(); ctypes.CDLL(str(p)); print(p)")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path),
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(rt.__file__))))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = [p.communicate()[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] and outs[0].startswith(str(tmp_path))
    assert [f.name for f in tmp_path.iterdir()] == [os.path.basename(outs[0])]   # no temp files left
