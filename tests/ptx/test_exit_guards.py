"""Guard-versioned thread loops (ptx/codegen/cpu/thread_loops.py): a kernel that starts with exit guards
(`if (i < n)`) runs blocks where every thread passes them without the guard, blocks where some do not with
it. Blocks all-on, partial and all-off, one and several guards, 1-3 dimensional blocks, guards that most
threads take, and prologues the versioning must leave alone; fresh random inputs, poisoned outputs, every
element checked (elements no thread may write must keep their poison)."""

import functools
import platform

import numpy as np
import pytest

from ptxkit import HEADER, poison, rng  # noqa: F401  (rng: the fixture)

import ptx
from ptx import parse
from ptx.codegen.cpu import module as cpu_module

# Versioned on every target; the host and x86-64-v3 (AVX2, on any x86-64 machine) vectorise the copies differently
CPUS = [""] + (["x86-64-v3"] if platform.machine() in ("x86_64", "AMD64") else [])


@functools.lru_cache(maxsize=None)
def compile_text(text, cpu):
    return ptx.compile(text, target="host", cpu=cpu)

VEC = """
.visible .entry vec(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{
  .reg .pred %p<2>; .reg .b32 %r<8>; .reg .f32 %f<4>; .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b]; ld.param.u64 %rd3, [c]; ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x;
  mad.lo.s32 %r1, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r1, %r2;
  @%p1 bra $L_done;
  cvta.to.global.u64 %rd4, %rd1; cvta.to.global.u64 %rd5, %rd2; cvta.to.global.u64 %rd9, %rd3;
  mul.wide.s32 %rd6, %r1, 4;
  add.s64 %rd7, %rd4, %rd6; add.s64 %rd8, %rd5, %rd6; add.s64 %rd10, %rd9, %rd6;
  ld.global.f32 %f1, [%rd7]; ld.global.f32 %f2, [%rd8];
  add.f32 %f3, %f1, %f2;
  st.global.f32 [%rd10], %f3;
$L_done:
  ret;
}
"""

# if (x < w && y < h) out[y * w + x] = in[y * w + x] * 3 + y, with the guard negated (branch over the body
# when it holds) and the block in three dimensions: z counts block layers of the image's rows
GRID2D = """
.visible .entry img(.param .u64 src, .param .u64 dst, .param .u32 w, .param .u32 h)
{
  .reg .pred %p<5>; .reg .b32 %r<20>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [src]; ld.param.u64 %rd2, [dst]; ld.param.u32 %r1, [w]; ld.param.u32 %r2, [h];
  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x; mad.lo.s32 %r6, %r3, %r4, %r5;
  mov.u32 %r7, %ctaid.y; mov.u32 %r8, %ntid.y; mov.u32 %r9, %ntid.z; mul.lo.s32 %r8, %r8, %r9;
  mov.u32 %r10, %tid.z; mov.u32 %r11, %ntid.y; mov.u32 %r12, %tid.y; mad.lo.s32 %r13, %r10, %r11, %r12;
  mad.lo.s32 %r14, %r7, %r8, %r13;
  setp.lt.u32 %p1, %r6, %r1;
  setp.lt.u32 %p2, %r14, %r2;
  and.pred %p3, %p1, %p2;
  @!%p3 bra $L_out;
  mad.lo.s32 %r15, %r14, %r1, %r6;
  mul.wide.u32 %rd3, %r15, 4;
  cvta.to.global.u64 %rd4, %rd1; add.s64 %rd5, %rd4, %rd3;
  ld.global.u32 %r16, [%rd5];
  mad.lo.s32 %r17, %r16, 3, %r14;
  cvta.to.global.u64 %rd6, %rd2; add.s64 %rd7, %rd6, %rd3;
  st.global.u32 [%rd7], %r17;
$L_out:
  ret;
}
"""

# GRID2D that also skips the rows above `lo`: in a block that straddles it only the first rows (or the first layer
# of tid.z) take the guard, so the pass over the threads must count a guard taken before its last row
GRID2D_LO = GRID2D.replace("img(", "img_lo(").replace(".param .u32 h)", ".param .u32 h, .param .u32 lo)").replace(
    "ld.param.u32 %r2, [h];", "ld.param.u32 %r2, [h]; ld.param.u32 %r18, [lo];").replace(
    "and.pred %p3, %p1, %p2;", "and.pred %p3, %p1, %p2; setp.ge.u32 %p4, %r14, %r18; and.pred %p3, %p3, %p4;")

# Two guards, the second an `exit` after more prologue (a predicated move among it): thread i < n with
# i < k writes i + (i == 7 ? 1000 : 1) + x[i]
TWO = """
.visible .entry two(.param .u64 x, .param .u64 out, .param .u32 n, .param .u32 k)
{
  .reg .pred %p<4>; .reg .b32 %r<12>; .reg .b64 %rd<8>;
  ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x; mad.lo.s32 %r1, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r1, %r2;
  @%p1 bra $L_end;
  setp.eq.s32 %p2, %r1, 7;
  mov.u32 %r6, 1;
  @%p2 mov.u32 %r6, 1000;
  ld.param.u32 %r7, [k];
  setp.ge.u32 %p3, %r1, %r7;
  @%p3 exit;
  ld.param.u64 %rd1, [x]; ld.param.u64 %rd2, [out];
  mul.wide.s32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3; add.s64 %rd5, %rd2, %rd3;
  ld.global.u32 %r8, [%rd4];
  add.s32 %r9, %r1, %r6; add.s32 %r10, %r9, %r8;
  st.global.u32 [%rd5], %r10;
$L_end:
  ret;
}
"""

# Not an exit guard: a store comes first, and the branch skips only part of the body
NOT_A_GUARD = """
.visible .entry partial(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>; .reg .b32 %r<8>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x; mad.lo.s32 %r1, %r3, %r4, %r5;
  mul.wide.s32 %rd2, %r1, 8; add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r1;
  setp.ge.s32 %p1, %r1, %r2;
  @%p1 bra $L_skip;
  st.global.u32 [%rd3+4], %r2;
  bra.uni $L_end;
$L_skip:
  st.global.u32 [%rd3+4], 77;
$L_end:
  ret;
}
"""


def _module(*kernels):
    return HEADER + "\n".join(kernels)


def _versioned(text, name):
    """Whether kernel `name` got a guard-free copy of its body (per block, or per group of blocks)."""
    hir = cpu_module.build_host_ir(parse(text))
    body = hir.text.split(f'define i32 @"k.{name}"')[1].split("\ndefine ")[0]
    return "a.tz.head:" in body or "a.tx.head:" in body


def test_blocks_run_in_groups():
    hir = cpu_module.build_host_ir(parse(_module(GRID2D)))
    assert "g.head:" in hir.text.split('define i32 @"k.img"')[1].split("\ndefine ")[0]


def test_which_kernels_are_versioned():
    assert _versioned(_module(VEC), "vec")
    assert _versioned(_module(GRID2D), "img")
    assert _versioned(_module(TWO), "two")
    assert not _versioned(_module(NOT_A_GUARD), "partial")


@pytest.mark.parametrize("blocks,n", [(8, 8 * 128), (8, 8 * 128 - 5), (8, 130), (8, 1), (8, 0), (3, 1000)],
                         ids=["all-on", "last-partial", "mostly-off", "one-thread", "all-off", "grid-short"])
@pytest.mark.parametrize("cpu", CPUS, ids=lambda c: c or "host")
def test_vector_add(rng, blocks, n, cpu):
    k = compile_text(_module(VEC), cpu).kernel("vec")
    size = blocks * 128 + 64
    a = rng.standard_normal(size).astype(np.float32)
    b = rng.standard_normal(size).astype(np.float32)
    c = poison((size,), np.float32, rng)
    before = c.copy()
    k.launch((blocks, 1, 1), (128, 1, 1), [a, b, c, n])
    m = min(n, blocks * 128)
    assert np.array_equal(c[:m], a[:m] + b[:m]), "sums"
    assert np.array_equal(c[m:].view(np.uint32), before[m:].view(np.uint32)), "written past the guard"


# the last two: 13 x 40 blocks, run in groups of up to 8 blocks of a grid row (thread_loops.emit_group_loops)
# whose ranges of blocks (32 to a chunk on two workers) start and end inside grid rows; all on, then partial
@pytest.mark.parametrize("w,h,block", [(64, 24, (16, 4, 2)), (50, 21, (16, 4, 2)), (33, 8, (8, 2, 4)),
                                       (16, 3, (16, 4, 1)), (13 * 16, 40 * 8, (16, 4, 2)),
                                       (13 * 16 - 5, 40 * 8 - 3, (16, 4, 2))])
@pytest.mark.parametrize("cpu", CPUS, ids=lambda c: c or "host")
def test_2d_guard(rng, w, h, block, cpu):
    k = compile_text(_module(GRID2D), cpu).kernel("img")
    bx, by, bz = block
    grid = ((w + bx - 1) // bx, (h + by * bz - 1) // (by * bz), 1)
    src = rng.integers(0, 1 << 30, (h, w), dtype=np.uint32)
    dst = poison((h + 4, w), np.uint32, rng)
    before = dst.copy()
    k.launch(grid, block, [src, dst, w, h])
    want = src * np.uint32(3) + np.arange(h, dtype=np.uint32)[:, None]
    assert np.array_equal(dst[:h], want), "image"
    assert np.array_equal(dst[h:], before[h:]), "rows past h written"


@pytest.mark.parametrize("lo,block", [(1, (16, 4, 2)), (3, (16, 4, 2)), (5, (16, 4, 2)), (4, (8, 2, 4)),
                                      (9, (16, 16, 1))])
@pytest.mark.parametrize("cpu", CPUS, ids=lambda c: c or "host")
def test_guard_in_first_rows(rng, lo, block, cpu):
    k = compile_text(_module(GRID2D_LO), cpu).kernel("img_lo")
    w, h = 13 * 16, 40 * 8
    bx, by, bz = block
    grid = ((w + bx - 1) // bx, (h + by * bz - 1) // (by * bz), 1)
    src = rng.integers(0, 1 << 30, (h, w), dtype=np.uint32)
    dst = poison((h + 4, w), np.uint32, rng)
    before = dst.copy()
    k.launch(grid, block, [src, dst, w, h, lo])
    want = src * np.uint32(3) + np.arange(h, dtype=np.uint32)[:, None]
    assert np.array_equal(dst[lo:h], want[lo:]), "image"
    assert np.array_equal(dst[:lo], before[:lo]), "rows above lo written"
    assert np.array_equal(dst[h:], before[h:]), "rows past h written"


@pytest.mark.parametrize("n,k", [(1024, 1024), (1024, 600), (1000, 2000), (1024, 0), (300, 129)])
@pytest.mark.parametrize("cpu", CPUS, ids=lambda c: c or "host")
def test_two_guards(rng, n, k, cpu):
    kern = compile_text(_module(TWO), cpu).kernel("two")
    blocks = 8
    total = blocks * 128
    x = rng.integers(0, 1 << 20, total, dtype=np.uint32)
    out = poison((total,), np.uint32, rng)
    before = out.copy()
    kern.launch((blocks, 1, 1), (128, 1, 1), [x, out, n, k])
    i = np.arange(total, dtype=np.uint32)
    on = (i < n) & (i < k)
    want = i + np.where(i == 7, 1000, 1).astype(np.uint32) + x
    assert np.array_equal(out[on], want[on]), "guarded threads' results"
    assert np.array_equal(out[~on], before[~on]), "a thread past a guard wrote"


@pytest.mark.parametrize("cpu", CPUS, ids=lambda c: c or "host")
def test_not_a_guard(rng, cpu):
    kern = compile_text(_module(NOT_A_GUARD), cpu).kernel("partial")
    blocks, n = 4, 300
    out = poison((blocks * 128, 2), np.uint32, rng)
    kern.launch((blocks, 1, 1), (128, 1, 1), [out, n])
    i = np.arange(blocks * 128, dtype=np.uint32)
    assert np.array_equal(out[:, 0], i)
    assert np.array_equal(out[:, 1], np.where(i < n, n, 77).astype(np.uint32))
