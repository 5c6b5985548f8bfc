"""Queued shared-memory atomics (ptx/codegen/cpu/rmw_queue.py): a region's `red/atom.shared` whose result nothing
reads records its address and operand in the vectorised thread loop and is applied after it, one record at a time.
Every operation the queue takes, against numpy, with fresh random inputs, many lanes on one word and threads that
skip the update; the bins in dynamic shared memory that ends where they end (the skipped threads' records go to the
runtime's slack past it); the cases the queue must leave alone; and the same kernels with the queue switched off."""

import numpy as np
import pytest

import ptx
from ptx import host_target, parse
from ptx.codegen.cpu import lockstep, module as cpu_module, rmw_queue
from ptx.host_llc import _optimised
from ptxkit import HEADER, poison, rng  # noqa: F401  (rng: the fixture)

# out[blk * nb + j] = the block's bins after a grid-stride loop of `red.shared.OP.TYPE [s + key[i] * SIZE], val[i]`
# over i < n, where only elements with key[i] != skip take part; s[j] starts as init[j]
BINS = HEADER + r"""
.visible .entry bins(.param .u64 key, .param .u64 val, .param .u32 n, .param .u32 skip, .param .u64 init,
                     .param .u64 out, .param .u32 nb)
{{
  .reg .pred %p<4>; .reg .b32 %r<30>; .reg .b64 %rd<30>; .reg .{reg} %v<4>;
  .shared .align 8 .b8 s[{bytes}];
  ld.param.u64 %rd1, [key]; ld.param.u64 %rd2, [val]; ld.param.u32 %r1, [n]; ld.param.u32 %r2, [skip];
  ld.param.u64 %rd3, [init]; ld.param.u64 %rd4, [out]; ld.param.u32 %r3, [nb];
  mov.u32 %r4, %tid.x; mov.u32 %r5, %ntid.x; mov.u32 %r6, %ctaid.x; mov.u32 %r7, %nctaid.x;
  mov.u32 %r8, s;
  mov.u32 %r9, %r4;
  setp.ge.u32 %p1, %r9, %r3;
  @%p1 bra $L_init_done;
$L_init:
  mul.wide.u32 %rd5, %r9, {size};
  add.s64 %rd6, %rd3, %rd5;
  ld.global.{ty} %v1, [%rd6];
  mul.lo.u32 %r10, %r9, {size};
  add.s32 %r11, %r8, %r10;
  st.shared.{ty} [%r11], %v1;
  add.s32 %r9, %r9, %r5;
  setp.lt.u32 %p1, %r9, %r3;
  @%p1 bra $L_init;
$L_init_done:
  bar.sync 0;
  mad.lo.s32 %r12, %r6, %r5, %r4;
  mul.lo.s32 %r13, %r5, %r7;
  setp.ge.u32 %p2, %r12, %r1;
  @%p2 bra $L_loop_done;
$L_loop:
  mul.wide.u32 %rd7, %r12, 4;
  add.s64 %rd8, %rd1, %rd7;
  ld.global.u32 %r14, [%rd8];
  setp.eq.u32 %p3, %r14, %r2;
  @%p3 bra $L_next;
  mul.wide.u32 %rd9, %r12, {size};
  add.s64 %rd10, %rd2, %rd9;
  ld.global.{ty} %v2, [%rd10];
  mul.lo.u32 %r15, %r14, {size};
  add.s32 %r16, %r8, %r15;
  {update}
$L_next:
  add.s32 %r12, %r12, %r13;
  setp.lt.u32 %p2, %r12, %r1;
  @%p2 bra $L_loop;
$L_loop_done:
  bar.sync 0;
  mov.u32 %r9, %r4;
  setp.ge.u32 %p1, %r9, %r3;
  @%p1 bra $L_end;
$L_copy:
  mul.lo.u32 %r10, %r9, {size};
  add.s32 %r11, %r8, %r10;
  ld.shared.{ty} %v3, [%r11];
  mad.lo.s32 %r17, %r6, %r3, %r9;
  mul.wide.u32 %rd11, %r17, {size};
  add.s64 %rd12, %rd4, %rd11;
  st.global.{ty} [%rd12], %v3;
  add.s32 %r9, %r9, %r5;
  setp.lt.u32 %p1, %r9, %r3;
  @%p1 bra $L_copy;
$L_end:
  ret;
}}
"""

# (ptx op.type, numpy dtype, reference ufunc.at or a callable(bins, keys, vals))
OPS = {
    "add.u32": (np.uint32, np.add.at),
    "add.u64": (np.uint64, np.add.at),
    "add.f32": (np.float32, np.add.at),     # integer-valued: exact in any order
    "min.s32": (np.int32, np.minimum.at),
    "max.u32": (np.uint32, np.maximum.at),
    "max.s64": (np.int64, np.maximum.at),
    "and.b32": (np.uint32, np.bitwise_and.at),
    "or.b32": (np.uint32, np.bitwise_or.at),
    "xor.b64": (np.uint64, np.bitwise_xor.at),
    "min.f32": (np.float32, np.fmin.at),
}
NB = 37
REG = {np.uint32: "b32", np.int32: "b32", np.float32: "f32", np.uint64: "b64", np.int64: "b64"}


def _bins_kernel(optype, update=None, nb=NB):
    op, ty = optype.split(".")
    dt = OPS.get(optype, (np.uint32,))[0]
    size = np.dtype(dt).itemsize
    ldty = {"f32": "f32", "u32": "u32", "s32": "u32", "b32": "b32", "u64": "u64", "s64": "u64", "b64": "b64"}[ty]
    update = update or f"red.shared.{optype} [%r16], %v2;"
    return BINS.format(reg=REG[dt], bytes=nb * size, size=size, ty=ldty, update=update)


def _inputs(rng, dt, n, nb):
    key = rng.integers(0, nb, n).astype(np.uint32)
    key[: n // 3] = rng.integers(0, 3)                # a third of the lanes on one word
    if np.dtype(dt).kind == "f":
        val = rng.integers(-50, 50, n).astype(dt)
        init = rng.integers(-50, 50, nb).astype(dt)
    else:
        info = np.iinfo(dt)
        val = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        init = rng.integers(info.min, info.max, nb, dtype=dt, endpoint=True)
    return key, val, init


def _run(text, grid, block, key, val, init, skip, dt, nb=NB):
    out = np.zeros(grid * nb, dt)
    out.view(np.uint8)[:] = 0xA5                    # poisoned
    ptx.compile(text).kernel("bins").launch(grid, block, [key, val, len(key), skip, init, out, nb])
    return out.reshape(grid, nb)


def _reference(ufunc_at, grid, block, key, val, init, skip):
    """Each block's bins: the elements its threads visit in the grid-stride loop."""
    nthreads = grid * block
    want = np.tile(init, (grid, 1))
    idx = np.arange(len(key))
    blk = (idx % nthreads) // block
    for b in range(grid):
        sel = (blk == b) & (key != skip)
        ufunc_at(want[b], key[sel].astype(np.int64), val[sel])
    return want


@pytest.mark.parametrize("optype", sorted(OPS))
@pytest.mark.parametrize("block,grid", [(256, 3), (33, 2), (100, 1), (1024, 1), (17, 5)])
def test_every_queued_operation_against_numpy(rng, optype, block, grid):
    dt, at = OPS[optype]
    n = int(rng.integers(1, 6 * block * grid))
    key, val, init = _inputs(rng, dt, n, NB)
    skip = int(rng.integers(0, NB)) if rng.integers(0, 2) else NB        # some lanes skip the update, or none
    text = _bins_kernel(optype)
    assert "%qf.loop" in cpu_module.build_host_ir(parse(text)).text
    got = _run(text, grid, block, key, val, init, skip, dt)
    want = _reference(at, grid, block, key, val, init, skip)
    assert np.array_equal(got, want), f"{int(np.sum(got != want))} of {got.size} bins differ"


@pytest.mark.parametrize("op,bound", [("inc", 9), ("dec", 6)])
def test_wrapping_inc_dec(rng, op, bound):
    """inc/dec with one bound: the result depends only on how many updates a word gets."""
    grid, block = 2, int(rng.integers(1, 300))
    n = int(rng.integers(1, 4 * block * grid))
    key, _, _ = _inputs(rng, np.uint32, n, NB)
    init = rng.integers(0, bound + 1, NB).astype(np.uint32)
    text = _bins_kernel(f"{op}.u32", update=f"atom.shared.{op}.u32 %r20, [%r16], {bound};")
    assert "%qf.loop" in cpu_module.build_host_ir(parse(text)).text
    got = _run(text, grid, block, key, np.zeros(n, np.uint32), init, NB, np.uint32)
    counts = np.zeros((grid, NB), np.int64)
    _ = _reference(np.add.at, grid, block, key, np.ones(n, np.int64), np.zeros(NB, np.int64), NB)
    counts = _
    step = 1 if op == "inc" else -1
    want = ((init.astype(np.int64) + step * counts) % (bound + 1)).astype(np.uint32)
    assert np.array_equal(got, want)


def test_exchange_leaves_one_of_the_values(rng):
    grid, block = 1, 128
    n = 5000
    key = rng.integers(0, NB, n).astype(np.uint32)
    val = rng.permutation(n).astype(np.uint32) + 1000
    init = np.arange(NB, dtype=np.uint32)
    text = _bins_kernel("exch.b32", update="atom.shared.exch.b32 %r20, [%r16], %v2;")
    assert "%qf.loop" in cpu_module.build_host_ir(parse(text)).text
    got = _run(text, grid, block, key, val, init, NB, np.uint32)[0]
    for j in range(NB):
        allowed = set(val[key == j].tolist()) or {int(init[j])}
        assert int(got[j]) in allowed


# one update per thread, not in a loop: bins in dynamic shared memory that ends where they do, so that the records
# of the threads that skip (odd %tid.x) land in the runtime's slack past it
DYN = HEADER + r"""
.extern .shared .align 4 .b8 dyn[];
.visible .entry onceper(.param .u64 key, .param .u64 out, .param .u32 nb)
{
  .reg .pred %p<3>; .reg .b32 %r<20>; .reg .b64 %rd<10>;
  ld.param.u64 %rd1, [key]; ld.param.u64 %rd2, [out]; ld.param.u32 %r1, [nb];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x;
  mov.u32 %r5, dyn;
  setp.ge.u32 %p1, %r2, %r1;
  shl.b32 %r6, %r2, 2;
  add.s32 %r7, %r5, %r6;
  @!%p1 st.shared.u32 [%r7], 0;
  bar.sync 0;
  and.b32 %r8, %r2, 1;
  setp.ne.u32 %p2, %r8, 0;
  @%p2 bra $L_skip;
  mad.lo.s32 %r9, %r3, %r4, %r2;
  mul.wide.u32 %rd3, %r9, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r10, [%rd4];
  shl.b32 %r11, %r10, 2;
  add.s32 %r12, %r5, %r11;
  atom.shared.add.u32 %r13, [%r12], %r2;
$L_skip:
  bar.sync 0;
  @%p1 bra $L_end;
  ld.shared.u32 %r14, [%r7];
  mad.lo.s32 %r15, %r3, %r1, %r2;
  mul.wide.u32 %rd5, %r15, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.u32 [%rd6], %r14;
$L_end:
  ret;
}
"""


@pytest.mark.parametrize("block,nb", [(256, 256), (1024, 5), (31, 31), (64, 1)])
def test_once_a_thread_with_threads_that_skip(rng, block, nb):
    grid = int(rng.integers(1, 4))
    key = rng.integers(0, nb, grid * block).astype(np.uint32)
    out = poison((grid * nb,), np.uint32, rng)
    assert "%qf.loop" in cpu_module.build_host_ir(parse(DYN)).text
    ptx.compile(DYN).kernel("onceper").launch(grid, block, [key, out, nb], shared_bytes=4 * nb)
    want = np.zeros((grid, nb), np.uint64)
    for b in range(grid):
        for t in range(0, block, 2):
            want[b, key[b * block + t]] += t
    assert np.array_equal(out.reshape(grid, nb), want.astype(np.uint32))


def _region_with_queue(ir):
    return [part for part in ir.split("\ndefine ") if "qf.loop" in part]


def test_the_thread_loop_around_a_queued_update_is_vectorized():
    import llvmlite.binding as llvm
    text = _bins_kernel("add.u32")
    ir = str(_optimised(llvm, host_target.machine("")[0], cpu_module.build_host_ir(parse(text)).text, 3, True))
    fns = _region_with_queue(ir)
    assert fns and all("vector.body" in fn for fn in fns)


@pytest.mark.parametrize("case", ["result read", "shared read", "loop without a yield"])
def test_what_the_queue_leaves_alone(rng, monkeypatch, case):
    """An atomic whose old value is read, a region that reads shared memory after its update (the thread must see
    it), and an update in a loop with no sync point in it (it would need a record per iteration) keep the update in
    place, and are still right."""
    update = "atom.shared.add.u32 %r20, [%r16], %v2;"
    if case == "result read":
        update += "\n  add.u32 %r21, %r20, 1;\n  st.global.u32 [%rd8], %r21;"
    elif case == "shared read":
        update += "\n  ld.shared.u32 %r21, [%r16];"
    else:
        monkeypatch.setattr(lockstep, "ENABLED", False)
    text = _bins_kernel("add.u32", update=update)
    assert "%qf.loop" not in cpu_module.build_host_ir(parse(text)).text
    if case == "result read":
        return                                      # (it overwrites the keys)
    grid, block = 2, 96
    n = 3000
    key, val, init = _inputs(rng, np.uint32, n, NB)
    got = _run(text, grid, block, key, val, init, NB, np.uint32)
    assert np.array_equal(got, _reference(np.add.at, grid, block, key, val, init, NB))


def test_same_answers_without_the_queue(rng, monkeypatch):
    grid, block = 3, 160
    n = 20000
    key, val, init = _inputs(rng, np.uint32, n, NB)
    text = _bins_kernel("add.u32")
    queued = _run(text, grid, block, key, val, init, 5, np.uint32)
    monkeypatch.setattr(rmw_queue, "ENABLED", False)
    assert "%qf.loop" not in cpu_module.build_host_ir(parse(text)).text
    in_place = _run(text, grid, block, key, val, init, 5, np.uint32)
    assert np.array_equal(queued, in_place)
    assert np.array_equal(queued, _reference(np.add.at, grid, block, key, val, init, 5))
