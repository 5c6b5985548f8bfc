"""Next-block prefetch (ptx/codegen/cpu/block_prefetch.py): which loads of a region kernel get their lines a few
blocks ahead prefetched, and that kernels whose later blocks load nothing (the prefetched addresses lie past the
data, or nowhere) still compute every block right; fresh random inputs, poisoned outputs, every element checked."""

import numpy as np
import pytest

from ptxkit import HEADER, poison, rng  # noqa: F401  (rng: the fixture)

import ptx
from ptx import parse
from ptx.codegen.cpu import block_prefetch
from ptx.codegen.cpu import module as cpu_module

# out[b] = sum of 256 floats at in + b * stride (bytes), for the blocks b < n; the others load and store nothing.
# Thread 0 adds the block's values in shared memory after a barrier (a region kernel).
REDUCE = """
.visible .entry red(.param .u64 in, .param .u64 out, .param .u32 n, .param .u64 stride)
{
  .reg .pred %p<4>; .reg .b32 %r<12>; .reg .f32 %f<4>; .reg .b64 %rd<12>;
  .shared .align 4 .b8 s[1024];
  ld.param.u64 %rd1, [in]; ld.param.u64 %rd2, [out]; ld.param.u32 %r1, [n]; ld.param.u64 %rd3, [stride];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %tid.x;
  mov.u32 %r4, s; shl.b32 %r5, %r3, 2; add.s32 %r6, %r4, %r5;
  mov.f32 %f1, 0f00000000;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra $skip;
  cvt.u64.u32 %rd4, %r2; mul.lo.s64 %rd5, %rd4, %rd3;
  mul.wide.u32 %rd6, %r3, 4; add.s64 %rd7, %rd1, %rd5; add.s64 %rd8, %rd7, %rd6;
  ld.global.f32 %f1, [%rd8];
$skip:
  st.shared.f32 [%r6], %f1;
  bar.sync 0;
  setp.ne.u32 %p2, %r3, 0;
  @%p2 bra $done;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra $done;
  mov.u32 %r7, 0; mov.f32 %f2, 0f00000000;
$loop:
  shl.b32 %r8, %r7, 2; add.s32 %r9, %r4, %r8; ld.shared.f32 %f3, [%r9]; add.f32 %f2, %f2, %f3;
  add.u32 %r7, %r7, 1; setp.lt.u32 %p3, %r7, 256; @%p3 bra $loop;
  mul.wide.u32 %rd9, %r2, 4; add.s64 %rd10, %rd2, %rd9; st.global.f32 [%rd10], %f2;
$done:
  ret;
}
"""

# The same shape, but each thread loads through an index it loaded first (a gather): nothing to prefetch ahead
GATHER = """
.visible .entry gat(.param .u64 in, .param .u64 idx, .param .u64 out)
{
  .reg .b32 %r<12>; .reg .f32 %f<4>; .reg .b64 %rd<14>;
  .shared .align 4 .b8 s[1024];
  ld.param.u64 %rd1, [in]; ld.param.u64 %rd2, [idx]; ld.param.u64 %rd3, [out];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %tid.x; mad.lo.s32 %r10, %r2, 256, %r3;
  mul.wide.u32 %rd4, %r10, 4; add.s64 %rd5, %rd2, %rd4; ld.global.u32 %r11, [%rd5];
  mul.wide.u32 %rd6, %r11, 4; add.s64 %rd7, %rd1, %rd6; ld.global.f32 %f1, [%rd7];
  mov.u32 %r4, s; shl.b32 %r5, %r3, 2; add.s32 %r6, %r4, %r5;
  st.shared.f32 [%r6], %f1;
  bar.sync 0;
  xor.b32 %r7, %r3, 1; shl.b32 %r8, %r7, 2; add.s32 %r9, %r4, %r8; ld.shared.f32 %f2, [%r9];
  add.s64 %rd8, %rd3, %rd4; st.global.f32 [%rd8], %f2;
  ret;
}
"""


def _ir(text):
    return cpu_module.build_host_ir(parse(HEADER + text)).text


def test_which_loads_are_prefetched():
    red = _ir(REDUCE)
    assert 'define internal void @"pf.red"' in red and 'call void @"pf.red"(' in red
    assert red.count("call void @llvm.prefetch.p0(") == 1, "one site: the block's 256 floats"
    gat = _ir(GATHER)
    # the index load is consecutive in the thread and fixed by the block: prefetched; the gathered one is not
    assert gat.count("call void @llvm.prefetch.p0(") == 1


# a barrier-free kernel over a 2D image: blocks of a grid row run in groups (cpu/thread_loops.emit_group_loops), and
# the next group's rows are prefetched while one runs (its results: test_exit_guards.py::test_2d_guard)
IMAGE = """
.visible .entry img(.param .u64 src, .param .u64 dst, .param .u32 w)
{
  .reg .b32 %r<12>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [src]; ld.param.u64 %rd2, [dst]; ld.param.u32 %r1, [w];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x; mad.lo.s32 %r5, %r2, %r3, %r4;
  mov.u32 %r6, %ctaid.y; mov.u32 %r7, %ntid.y; mov.u32 %r8, %tid.y; mad.lo.s32 %r9, %r6, %r7, %r8;
  mad.lo.s32 %r10, %r9, %r1, %r5; mul.wide.u32 %rd3, %r10, 4;
  add.s64 %rd4, %rd1, %rd3; ld.global.u32 %r11, [%rd4]; add.u32 %r11, %r11, 7;
  add.s64 %rd5, %rd2, %rd3; st.global.u32 [%rd5], %r11;
  ret;
}
"""


def test_groups_of_blocks_prefetch_the_next_group():
    ir = _ir(IMAGE)
    assert 'define internal void @"pf.img"' in ir and "%pf.cx = add i32 %ctaid.x, %gn" in ir


# 13 blocks a grid row: a group of 8, then one of 5 whose next group is past the row's end
@pytest.mark.parametrize("w,h,block", [(256, 64, (16, 16, 1)), (208, 48, (16, 16, 1)), (96, 12, (32, 4, 1))])
def test_image_results(rng, w, h, block):
    k = ptx.compile(HEADER + IMAGE, target="host").kernel("img")
    grid = (w // block[0], h // block[1], 1)
    src = rng.integers(0, 1 << 30, (h, w), dtype=np.uint32)
    dst = poison((h, w), np.uint32, rng)
    k.launch(grid, block, [src, dst, w])
    assert np.array_equal(dst, src + np.uint32(7))


def test_disabled_leaves_no_prefetch(monkeypatch):
    monkeypatch.setattr(block_prefetch, "ENABLED", False)
    assert "pf.red" not in _ir(REDUCE)


# stride 1 KiB: the blocks' data side by side; 1 MiB and 64 GiB: the blocks ahead of the last loading one prefetch
# lines past the data or in no mapping at all (a prefetch must not fault)
@pytest.mark.parametrize("stride", [1024, 1 << 20, 1 << 36], ids=["packed", "sparse", "unmapped"])
@pytest.mark.parametrize("n,grid", [(40, 40), (5, 64), (1, 300)], ids=["all", "some", "one"])
def test_results(rng, stride, n, grid):
    k = ptx.compile(HEADER + REDUCE, target="host").kernel("red")
    floats = stride // 4 * (n - 1) + 256 if stride < (1 << 30) else 256
    if stride >= (1 << 30):
        n = 1
    data = rng.standard_normal(floats).astype(np.float32)
    out = poison((grid,), np.float32, rng)
    before = out.copy()
    k.launch((grid, 1, 1), (256, 1, 1), [data, out, n, stride])
    want = np.array([data[b * stride // 4:b * stride // 4 + 256].sum(dtype=np.float64) for b in range(n)])
    np.testing.assert_allclose(out[:n], want, rtol=1e-5, atol=1e-4)
    assert np.array_equal(out[n:].view(np.uint32), before[n:].view(np.uint32)), "a block past n stored"
