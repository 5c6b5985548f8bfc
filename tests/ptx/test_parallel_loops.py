"""Thread loops declared parallel (ptx/codegen/cpu/parallel_loops.py): every load and store of a kernel's thread
loops is in an access group the loops call parallel, so LLVM vectorizes a 5-point stencil with no runtime check that
its two pointers do not overlap; a block-private shared atomic and an mbarrier update stay out of that group, so
lanes of one vector that update the same word all count. Results against numpy, with fresh random inputs and
poisoned outputs; the structural checks read the optimised IR, and fail with the groups switched off."""

import functools

import numpy as np
import pytest

import ptx
from ptx import host_target, parse
from ptx.codegen.cpu import module as cpu_module, parallel_loops, rmw_queue
from ptx.host_llc import _optimised
from ptxkit import HEADER, poison, rng  # noqa: F401  (rng: the fixture)

# nvcc -arch=compute_86 -ptx (CUDA 13.0) of scripts/bench_kernels/stencil5.cu's kernel:
# if (x > 0 && y > 0 && x < nx - 1 && y < ny - 1)
#     out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);   (i = y * nx + x)
STENCIL = HEADER + r"""
.visible .entry stencil5(
.param .u64 stencil5_param_0,
.param .u64 stencil5_param_1,
.param .u32 stencil5_param_2,
.param .u32 stencil5_param_3
)
{
.reg .pred %p<8>;
.reg .f32 %f<11>;
.reg .b32 %r<15>;
.reg .b64 %rd<12>;
ld.param.u64 %rd1, [stencil5_param_0];
ld.param.u64 %rd2, [stencil5_param_1];
ld.param.u32 %r3, [stencil5_param_2];
ld.param.u32 %r4, [stencil5_param_3];
mov.u32 %r5, %ntid.x;
mov.u32 %r6, %ctaid.x;
mov.u32 %r7, %tid.x;
mad.lo.s32 %r1, %r6, %r5, %r7;
mov.u32 %r8, %ntid.y;
mov.u32 %r9, %ctaid.y;
mov.u32 %r10, %tid.y;
mad.lo.s32 %r2, %r9, %r8, %r10;
setp.lt.s32 %p1, %r1, 1;
setp.lt.s32 %p2, %r2, 1;
or.pred %p3, %p1, %p2;
add.s32 %r11, %r3, -1;
setp.ge.s32 %p4, %r1, %r11;
or.pred %p5, %p3, %p4;
add.s32 %r12, %r4, -1;
setp.ge.s32 %p6, %r2, %r12;
or.pred %p7, %p5, %p6;
@%p7 bra $L__BB0_2;
cvta.to.global.u64 %rd3, %rd1;
cvta.to.global.u64 %rd4, %rd2;
mad.lo.s32 %r13, %r2, %r3, %r1;
mul.wide.s32 %rd5, %r13, 4;
add.s64 %rd6, %rd3, %rd5;
ld.global.f32 %f1, [%rd6];
ld.global.f32 %f2, [%rd6+4];
ld.global.f32 %f3, [%rd6+-4];
add.f32 %f4, %f3, %f2;
sub.s32 %r14, %r13, %r3;
mul.wide.s32 %rd7, %r14, 4;
add.s64 %rd8, %rd3, %rd7;
ld.global.f32 %f5, [%rd8];
add.f32 %f6, %f4, %f5;
mul.wide.s32 %rd9, %r3, 4;
add.s64 %rd10, %rd6, %rd9;
ld.global.f32 %f7, [%rd10];
add.f32 %f8, %f6, %f7;
mul.f32 %f9, %f8, 0f3E000000;
fma.rn.f32 %f10, %f1, 0f3F000000, %f9;
add.s64 %rd11, %rd4, %rd5;
st.global.f32 [%rd11], %f10;
$L__BB0_2:
ret;
}
"""

AXPY = HEADER + r"""
.visible .entry axpy2(.param .u64 x, .param .u64 y, .param .u32 n)
{
  .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<4>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [x]; ld.param.u64 %rd2, [y]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x; mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.s32 %p1, %r5, %r1;
  @%p1 bra $L_done;
  mul.wide.s32 %rd3, %r5, 4; add.s64 %rd4, %rd1, %rd3; add.s64 %rd5, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4]; ld.global.f32 %f2, [%rd5];
  fma.rn.f32 %f3, %f1, 0f40000000, %f2;
  st.global.f32 [%rd5], %f3;
$L_done:
  ret;
}
"""

# every thread adds to one of three shared words (lanes of one vector collide), exchanges into a fourth and
# takes a ticket with atom.inc; thread 0 copies the words out after a barrier
COLLIDE = HEADER + r"""
.visible .entry collide(.param .u64 out, .param .u64 tickets)
{
  .reg .pred %p<2>; .reg .b32 %r<12>; .reg .b64 %rd<8>;
  .shared .align 4 .b32 w[5];
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [tickets];
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra $L_init_done;
  st.shared.u32 [w], 0; st.shared.u32 [w+4], 0; st.shared.u32 [w+8], 0; st.shared.u32 [w+12], 0;
  st.shared.u32 [w+16], 0;
$L_init_done:
  bar.sync 0;
  rem.u32 %r2, %r1, 3;
  shl.b32 %r3, %r2, 2;
  mov.u32 %r4, w;
  add.s32 %r5, %r4, %r3;
  add.s32 %r6, %r1, 1;
  red.shared.add.u32 [%r5], %r6;
  bar.sync 0;
  atom.shared.exch.b32 %r8, [w+12], %r6;
  atom.shared.inc.u32 %r9, [w+16], 100000;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.u32 [%rd4], %r9;
  bar.sync 0;
  @%p1 bra $L_end;
  ld.shared.u32 %r10, [w]; st.global.u32 [%rd1], %r10;
  ld.shared.u32 %r10, [w+4]; st.global.u32 [%rd1+4], %r10;
  ld.shared.u32 %r10, [w+8]; st.global.u32 [%rd1+8], %r10;
  ld.shared.u32 %r10, [w+12]; st.global.u32 [%rd1+12], %r10;
  ld.shared.u32 %r10, [w+16]; st.global.u32 [%rd1+16], %r10;
$L_end:
  ret;
}
"""


@functools.lru_cache(maxsize=None)
def _optimised_ir(text, enabled):
    import llvmlite.binding as llvm
    saved = parallel_loops.ENABLED
    parallel_loops.ENABLED = enabled
    try:
        hir = cpu_module.build_host_ir(parse(text))
    finally:
        parallel_loops.ENABLED = saved
    return str(_optimised(llvm, host_target.machine("")[0], hir.text, 3, True))


def _kernel_fn(ir, symbol):
    return ir.split(f'@"{symbol}"(')[1].split("\n}\n")[0]


def test_stencil_vectorized_without_runtime_checks():
    on, off = _optimised_ir(STENCIL, True), _optimised_ir(STENCIL, False)
    assert "vector.memcheck" in off, "without the groups LLVM checks the pointers at run time"
    assert "vector.memcheck" not in on
    assert "llvm.loop.parallel_accesses" in on
    assert "<16 x float>" in on or "<8 x float>" in on or "<4 x float>" in on


def test_block_shared_updates_stay_out_of_the_group(monkeypatch):
    monkeypatch.setattr(rmw_queue, "ENABLED", False)       # (queued, the red.shared is not updated in the loop)
    text = cpu_module.build_host_ir(parse(COLLIDE)).text
    for line in text.splitlines():
        if "block-shared update" in line:
            assert "!llvm.access.group" not in line
    assert sum("block-shared update" in line for line in text.splitlines()) >= 6


def _launch_stencil(mod, src, dst, block, nx, ny):
    grid = ((nx + block[0] - 1) // block[0], (ny + block[1] - 1) // block[1], 1)
    mod.kernel("stencil5").launch(grid, block, [src, dst, nx, ny])


@pytest.mark.parametrize("block", [(16, 16, 1), (8, 4, 1), (33, 3, 1), (64, 1, 1)])
@pytest.mark.parametrize("nx,ny", [(61, 47), (128, 20)])
def test_stencil_results(rng, block, nx, ny):
    mod = ptx.compile(STENCIL)
    a = rng.uniform(-2, 2, (ny, nx)).astype(np.float32)
    out = poison((ny, nx), np.float32, rng)
    expect = out.copy()
    inner = 0.5 * a[1:-1, 1:-1] + 0.125 * (a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1])
    expect[1:-1, 1:-1] = inner
    _launch_stencil(mod, a, out, block, nx, ny)
    np.testing.assert_allclose(out[1:-1, 1:-1], inner, rtol=2e-6, atol=1e-6)
    assert out[0].tobytes() == expect[0].tobytes() and out[-1].tobytes() == expect[-1].tobytes()
    assert out[:, 0].tobytes() == expect[:, 0].tobytes() and out[:, -1].tobytes() == expect[:, -1].tobytes()


@pytest.mark.parametrize("block", [16, 100, 256])
def test_one_buffer_as_both_pointers(rng, block):
    """y[i] = 2 * x[i] + y[i] with x and y one buffer: the pointers no runtime check compares now overlap
    exactly, each thread reading and writing only its own element."""
    n = 1001
    a = rng.uniform(-2, 2, n).astype(np.float32)
    b = a.copy()
    ptx.compile(AXPY).kernel("axpy2").launch(((n + block - 1) // block, 1, 1), (block, 1, 1), [b, b, n])
    np.testing.assert_array_equal(b, np.float32(2) * a + a)


@pytest.mark.parametrize("threads", [1, 7, 16, 64, 256, 1000])
def test_colliding_lanes_all_count(rng, threads):
    mod = ptx.compile(COLLIDE)
    out = poison((5,), np.uint32, rng)
    tickets = poison((threads,), np.uint32, rng)
    mod.kernel("collide").launch((3, 1, 1), (threads, 1, 1), [out, tickets])
    t = np.arange(threads) + 1
    assert out[:3].tolist() == [int(t[(t - 1) % 3 == r].sum()) for r in range(3)]
    assert 1 <= int(out[3]) <= threads
    assert int(out[4]) == threads
    assert sorted(tickets.tolist()) == list(range(threads))


def test_a_body_whose_thread_loops_all_stay_scalar_still_gets_its_group_defined():
    """A body with accesses in the group but no loop that lists it (only loops kept scalar, !8994) must still
    define the group (the warp_vote sample's compact_positive once failed to parse for want of it)."""
    import llvmlite.binding as llvm
    body = ('define i32 @f(ptr %p, i32 %n) {\nentry:\n  br label %gv.tx.head\ngv.tx.head:\n'
            '  %i = phi i32 [ 0, %entry ], [ %i1, %gv.tx.head ]\n'
            '  %v = load i32, ptr %p, align 4, !alias.scope !99993, !noalias !99994\n'
            '  %i1 = add i32 %i, 1\n  %gv.tx.c = icmp ult i32 %i1, %n\n'
            '  br i1 %gv.tx.c, label %gv.tx.head, label %out, !llvm.loop !8994\nout:\n  ret i32 %v\n}')
    helpers = ('!8994 = distinct !{!8994, !8995}\n!8995 = !{!"llvm.loop.vectorize.enable", i1 false}\n'
               '!99990 = distinct !{!99990, !"zluda.spaces"}\n!99991 = distinct !{!99991, !99990}\n'
               '!99992 = distinct !{!99992, !99990}\n!99993 = !{!99991}\n!99994 = !{!99992}\n')
    marked, md = parallel_loops.mark([body])
    assert "!llvm.access.group" in marked[0]
    llvm.parse_assembly(marked[0] + "\n" + helpers + md).verify()


def test_masked_regions_keep_their_own_analysis():
    """A masked region (the threads still at one site while the block's others are elsewhere) stays out: vectorised
    over every thread with masks, naive SGEMM at n=1000 (its edge blocks' rounds) took 4x as long as without."""
    from test_round_loops import NVCC_PTX
    text = cpu_module.build_host_ir(parse(NVCC_PTX)).text
    bodies = {b.split("(")[0].split()[-1]: b for b in text.split("\ndefine ")[1:]}
    masked = [name for name in bodies if name.startswith('@"rm')]
    assert masked and all("!llvm.access.group" not in bodies[name] for name in masked)
    assert any("!llvm.access.group" in bodies[name] for name in bodies if name.startswith('@"ru'))
