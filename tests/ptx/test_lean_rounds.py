"""Lean rounds (ptx/codegen/cpu/lean_rounds.py): a grid-stride loop whose only way out is a branch on an affine
comparison runs its rounds without per-thread bookkeeping, and works out each thread's next site from the
comparison's lane-0 operands. Each kernel walks a loop per thread and stores its trip count and the sum of its
indices; checked against a Python model of every thread (wrap-around included) and against the tracked thread loop,
with fresh random starts and limits, poisoned outputs, partial rounds, 1-D and 2-D blocks, 32- and 64-bit indices,
ascending and descending ones, the comparison either way round, the branch taken or not to stay, and indices that
wrap inside a round (signed and unsigned); and a loop that counts its trips in shared memory (queued atomics) and
leaves to a barrier rather than the exit."""

import numpy as np
import pytest

import ptx
from ptx.codegen.cpu import lean_rounds

TEMPLATE = """.version 7.0
.target sm_80
.address_size 64
.visible .entry walk(.param .u64 out, .param .u32 start, .param .u32 lim, .param .u32 scale)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [start];
  ld.param.u32 %r2, [lim];
  ld.param.u32 %r12, [scale];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mov.u32 %r6, %nctaid.x;
  mad.lo.s32 %r7, %r3, %r4, %r5;
  mul.lo.s32 %r8, %r4, %r6;
  mul.lo.s32 %r8, %r8, %r12;
  mad.lo.s32 %r9, %r7, {slope}, %r1;
  mov.u32 %r10, 0;
  mov.u32 %r11, 0;
$LOOP:
  add.s32 %r10, %r10, 1;
  add.s32 %r11, %r11, %r9;
  add.s32 %r9, %r9, %r8;
{test}
  mul.wide.u32 %rd2, %r7, 8;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {{%r10, %r11}};
  ret;
}}
"""

# the same walk with a 64-bit index, widened from the 32-bit thread id as nvcc does for a size_t one
TEMPLATE64 = """.version 7.0
.target sm_80
.address_size 64
.visible .entry walk(.param .u64 out, .param .u64 start, .param .u64 lim, .param .u64 scale)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd4, [start];
  ld.param.u64 %rd5, [lim];
  ld.param.u64 %rd12, [scale];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mov.u32 %r6, %nctaid.x;
  mad.lo.s32 %r7, %r3, %r4, %r5;
  cvt.u64.u32 %rd6, %r7;
  mul.lo.s32 %r1, %r4, %r6;
  cvt.u64.u32 %rd7, %r1;
  mul.lo.s64 %rd8, %rd7, %rd12;
  mad.lo.s64 %rd9, %rd6, {slope}, %rd4;
  mov.u64 %rd10, 0;
  mov.u64 %rd11, 0;
$LOOP:
  add.s64 %rd10, %rd10, 1;
  add.s64 %rd11, %rd11, %rd9;
  add.s64 %rd9, %rd9, %rd8;
{test}
  mul.wide.u32 %rd2, %r7, 16;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v2.u64 [%rd3], {{%rd10, %rd11}};
  ret;
}}
"""

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1


def _s32(v):
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def _s64(v):
    v &= M64
    return v - (1 << 64) if v >> 63 else v


# name: (the loop's test, its slope in %tid.x, the step's multiple of the grid's threads, the model's stay test)
CASES = {
    "lt": ("  setp.lt.s32 %p1, %r9, %r2;\n  @%p1 bra $LOOP;", 1, 1, lambda i, lim: _s32(i) < _s32(lim)),
    "mirrored": ("  setp.gt.s32 %p1, %r2, %r9;\n  @%p1 bra $LOOP;", 2, 1, lambda i, lim: _s32(lim) > _s32(i)),
    "negated": ("  setp.ge.s32 %p1, %r9, %r2;\n  @!%p1 bra $LOOP;", 1, 2, lambda i, lim: not _s32(i) >= _s32(lim)),
    "leave_taken": ("  setp.ge.s32 %p1, %r9, %r2;\n  @%p1 bra $DONE;\n  bra.uni $LOOP;\n$DONE:", 1, 1,
                    lambda i, lim: not _s32(i) >= _s32(lim)),
    "descending": ("  setp.gt.s32 %p1, %r9, %r2;\n  @%p1 bra $LOOP;", -3, -3, lambda i, lim: _s32(i) > _s32(lim)),
    "unsigned_wrap": ("  setp.hs.u32 %p1, %r9, %r2;\n  @%p1 bra $LOOP;", 1, 1, lambda i, lim: (i & M32) >= lim),
    "signed_wrap": ("  setp.gt.s32 %p1, %r9, %r2;\n  @%p1 bra $LOOP;", 1, 1, lambda i, lim: _s32(i) > _s32(lim)),
    # lanes a quarter of the range apart: a round's first and last lane can stay while lanes between them wrap
    # and leave (the step is about 2^27 whatever the grid)
    "wide_slope": ("  setp.hs.u32 %p1, %r9, %r2;\n  @%p1 bra $LOOP;", 1 << 30, None, lambda i, lim: (i & M32) >= lim),
    # 64-bit indices (TEMPLATE64)
    "lt64": ("  setp.lt.s64 %p1, %rd9, %rd5;\n  @%p1 bra $LOOP;", 1, 1, lambda i, lim: _s64(i) < _s64(lim)),
    "descending64": ("  setp.gt.s64 %p1, %rd9, %rd5;\n  @%p1 bra $LOOP;", -3, -3,
                     lambda i, lim: _s64(i) > _s64(lim)),
    "unsigned_wrap64": ("  setp.hs.u64 %p1, %rd9, %rd5;\n  @%p1 bra $LOOP;", 1, 1, lambda i, lim: i >= lim),
    "signed_wrap64": ("  setp.gt.s64 %p1, %rd9, %rd5;\n  @%p1 bra $LOOP;", 1, 1,
                      lambda i, lim: _s64(i) > _s64(lim)),
}


def _bits(case):
    return 64 if case.endswith("64") else 32

RNG = np.random.default_rng()
BLOCKS = [(64, 1, 1), (256, 1, 1), (33, 1, 1), (8, 4, 1), (1, 1, 1), (100, 1, 1)]


def _params(case, threads):
    """(start, lim, scale) for at most about 40 rounds."""
    r = lambda lo, hi: int(RNG.integers(lo, hi))
    scale = CASES[case][2]
    if case == "wide_slope":
        return r(1 << 31, 1 << 32), 1 << 31, max(1, (1 << 27) // threads)
    bits = _bits(case)
    if case.startswith("descending"):
        start = r(-500, 500)
        return start, start - r(1, 120 * threads), scale
    if case.startswith("unsigned_wrap"):
        return (1 << bits) - r(1, 20 * threads), 1 << (bits - 1), scale
    if case.startswith("signed_wrap"):
        return (1 << (bits - 1)) - r(1, 20 * threads), r(-1000, 1000), scale
    start = r(-500, 500)
    return start, start + r(1, 40 * threads), scale


def _model(case, grid, block, start, lim, scale):
    _, slope, _, stay = CASES[case]
    mask = M64 if _bits(case) == 64 else M32
    threads = grid * block[0]
    step = threads * scale
    out = np.zeros(2 * threads, np.uint64 if mask == M64 else np.uint32)
    for g in range(threads):
        i, count, total = (start + g * slope) & mask, 0, 0
        while True:
            count += 1
            total = (total + i) & mask
            i = (i + step) & mask
            if not stay(i, lim & mask):
                break
        out[2 * g], out[2 * g + 1] = count, total
    return out


@pytest.fixture(scope="module")
def modules():
    got = {}
    for case, (test, slope, _, _) in CASES.items():
        src = (TEMPLATE64 if _bits(case) == 64 else TEMPLATE).format(slope=slope, test=test)
        saved = lean_rounds.ENABLED
        try:
            lean_rounds.ENABLED = True
            on = ptx.compile(src)
            lean_rounds.ENABLED = False
            off = ptx.compile(src + "\n// tracked\n")
        finally:
            lean_rounds.ENABLED = saved
        got[case] = {"lean": on, "tracked": off}
    return got


def test_every_case_takes_the_lean_rounds(modules):
    for case, m in modules.items():
        assert "\nlr.fix:" in m["lean"].ir, case
        assert "\nlr.fix:" not in m["tracked"].ir, case


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("case", list(CASES))
def test_grid_stride_walks_match_the_model(modules, case, block):
    grid = int(RNG.integers(1, 6))
    start, lim, scale = _params(case, grid * block[0])
    want = _model(case, grid, block, start, lim, scale)
    for name, m in modules[case].items():
        out = np.full(want.size, 0xDEADBEEF, want.dtype)
        m.kernel("walk").launch(grid, block, [out, start, lim, scale])
        bad = np.flatnonzero(out != want)
        assert bad.size == 0, f"{name}: {bad.size} of {want.size} differ, first {bad[:4]}: {out[bad[:4]]} " \
                              f"want {want[bad[:4]]} (start {start}, lim {lim}, grid {grid})"


# the same walk counting every trip of the block's threads in shared memory; the loop leaves to a barrier
COUNTED = """.version 7.0
.target sm_80
.address_size 64
.visible .entry walk(.param .u64 out, .param .u32 start, .param .u32 lim, .param .u32 scale)
{
  .reg .pred %p<3>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<4>;
  .shared .align 4 .u32 trips;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [start];
  ld.param.u32 %r2, [lim];
  ld.param.u32 %r12, [scale];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mov.u32 %r6, %nctaid.x;
  mov.u32 %r13, %tid.y;
  or.b32 %r13, %r13, %r5;
  setp.ne.u32 %p2, %r13, 0;
  @%p2 bra $INIT;
  mov.u32 %r14, 0;
  st.shared.u32 [trips], %r14;
$INIT:
  bar.sync 0;
  mad.lo.s32 %r7, %r3, %r4, %r5;
  mul.lo.s32 %r8, %r4, %r6;
  mul.lo.s32 %r8, %r8, %r12;
  add.s32 %r9, %r1, %r7;
  mov.u32 %r10, 0;
  mov.u32 %r11, 0;
$LOOP:
  add.s32 %r10, %r10, 1;
  add.s32 %r11, %r11, %r9;
  red.shared.add.u32 [trips], 1;
  add.s32 %r9, %r9, %r8;
  setp.lt.s32 %p1, %r9, %r2;
  @%p1 bra $LOOP;
  bar.sync 0;
  ld.shared.u32 %r15, [trips];
  mul.wide.u32 %rd2, %r7, 12;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r10;
  st.global.u32 [%rd3+4], %r11;
  st.global.u32 [%rd3+8], %r15;
  ret;
}
"""


@pytest.fixture(scope="module")
def counted():
    saved = lean_rounds.ENABLED
    try:
        lean_rounds.ENABLED = True
        on = ptx.compile(COUNTED)
        lean_rounds.ENABLED = False
        off = ptx.compile(COUNTED + "\n// tracked\n")
    finally:
        lean_rounds.ENABLED = saved
    assert "\nlr.fix:" in on.ir and "\nqf.q:" in on.ir and "\nlr.fix:" not in off.ir
    return {"lean": on, "tracked": off}


@pytest.mark.parametrize("block", BLOCKS)
def test_loop_leaving_to_a_barrier_with_queued_atomics(counted, block):
    grid = int(RNG.integers(1, 6))
    threads = grid * block[0]
    start, lim, _ = _params("lt", threads)
    walk = _model("lt", grid, block, start, lim, 1).reshape(-1, 2)
    # every thread of a block (its rows run the same walks) adds its trips to the block's count
    per_block = walk[:, 0].reshape(grid, block[0]).sum(axis=1, dtype=np.uint64) * block[1] * block[2]
    want = np.column_stack([walk, np.repeat(per_block.astype(np.uint32), block[0])]).ravel()
    for name, m in counted.items():
        out = np.full(want.size, 0xDEADBEEF, np.uint32)
        m.kernel("walk").launch(grid, block, [out, start, lim, 1])
        bad = np.flatnonzero(out != want)
        assert bad.size == 0, f"{name}: {bad.size} of {want.size} differ, first {bad[:4]}: {out[bad[:4]]} " \
                              f"want {want[bad[:4]]} (start {start}, lim {lim}, grid {grid})"
