"""Barrier kernels run as region loops (each region between bar.sync one loop over the block's
threads): values live across barriers, 3-D and odd block sizes, and threads that exit between
barriers (the block falls back to the general scheduler mid-kernel) give the exact results of the
numpy model and of the general scheduler."""

import numpy as np
import pytest

import ptx
from ptx.codegen.cpu import regions

# nvcc -ptx -arch=sm_86 -fmad=false of:
# extern "C" __global__ void mid_exit(const float *in, float *out, int live, int rounds) {
#     __shared__ float s[512];
#     unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
#     unsigned n = blockDim.x * blockDim.y * blockDim.z;
#     float v = in[blockIdx.x * n + t] * 3.0f + (float)t;
#     int acc = (int)t * 7;
#     s[t] = v;
#     __syncthreads();
#     float w = s[(t + 1) % n];
#     __syncthreads();
#     if ((int)t >= live) { out[blockIdx.x * n + t] = w + acc; return; }
#     for (int r = 0; r < rounds; r++) {
#         s[t] = w + r;
#         __syncthreads();
#         w = s[(t + 3) % n] * 0.5f + (float)acc;
#         acc += r;
#         __syncthreads();
#     }
#     out[blockIdx.x * n + t] = w + v + acc;
# }
MID_EXIT = r"""
.version 9.0
.target sm_86
.address_size 64


.visible .entry mid_exit(
	.param .u64 mid_exit_param_0,
	.param .u64 mid_exit_param_1,
	.param .u32 mid_exit_param_2,
	.param .u32 mid_exit_param_3
)
{
	.reg .pred 	%p<7>;
	.reg .f32 	%f<52>;
	.reg .b32 	%r<69>;
	.reg .b64 	%rd<8>;
	.shared .align 4 .b8 _ZZ8mid_exitE1s[2048];

	ld.param.u64 	%rd2, [mid_exit_param_0];
	ld.param.u64 	%rd3, [mid_exit_param_1];
	ld.param.u32 	%r26, [mid_exit_param_2];
	ld.param.u32 	%r25, [mid_exit_param_3];
	cvta.to.global.u64 	%rd4, %rd3;
	mov.u32 	%r27, %tid.z;
	mov.u32 	%r28, %ntid.y;
	mov.u32 	%r29, %tid.y;
	mad.lo.s32 	%r30, %r28, %r27, %r29;
	mov.u32 	%r31, %ntid.x;
	mov.u32 	%r32, %tid.x;
	mad.lo.s32 	%r1, %r30, %r31, %r32;
	mul.lo.s32 	%r33, %r31, %r28;
	mov.u32 	%r34, %ntid.z;
	mul.lo.s32 	%r2, %r33, %r34;
	mov.u32 	%r35, %ctaid.x;
	mad.lo.s32 	%r36, %r2, %r35, %r1;
	cvta.to.global.u64 	%rd5, %rd2;
	mul.wide.u32 	%rd6, %r36, 4;
	add.s64 	%rd7, %rd5, %rd6;
	ld.global.f32 	%f10, [%rd7];
	mul.rn.f32 	%f11, %f10, 0f40400000;
	cvt.rn.f32.u32 	%f12, %r1;
	add.rn.f32 	%f1, %f11, %f12;
	mul.lo.s32 	%r68, %r1, 7;
	shl.b32 	%r37, %r1, 2;
	mov.u32 	%r38, _ZZ8mid_exitE1s;
	add.s32 	%r4, %r38, %r37;
	st.shared.f32 	[%r4], %f1;
	bar.sync 	0;
	add.s32 	%r39, %r1, 1;
	rem.u32 	%r40, %r39, %r2;
	shl.b32 	%r41, %r40, 2;
	add.s32 	%r42, %r38, %r41;
	ld.shared.f32 	%f51, [%r42];
	bar.sync 	0;
	setp.lt.s32 	%p1, %r1, %r26;
	add.s64 	%rd1, %rd4, %rd6;
	@%p1 bra 	$L__BB0_2;
	bra.uni 	$L__BB0_1;

$L__BB0_2:
	setp.lt.s32 	%p2, %r25, 1;
	@%p2 bra 	$L__BB0_8;

	add.s32 	%r45, %r1, 3;
	rem.u32 	%r46, %r45, %r2;
	shl.b32 	%r47, %r46, 2;
	add.s32 	%r5, %r38, %r47;
	and.b32  	%r67, %r25, 3;
	add.s32 	%r49, %r25, -1;
	setp.lt.u32 	%p3, %r49, 3;
	mov.u32 	%r63, 0;
	@%p3 bra 	$L__BB0_6;

	sub.s32 	%r61, %r25, %r67;
	mov.u32 	%r63, 0;

$L__BB0_5:
	cvt.rn.f32.s32 	%f16, %r63;
	add.rn.f32 	%f17, %f51, %f16;
	st.shared.f32 	[%r4], %f17;
	bar.sync 	0;
	ld.shared.f32 	%f18, [%r5];
	mul.rn.f32 	%f19, %f18, 0f3F000000;
	cvt.rn.f32.s32 	%f20, %r68;
	add.rn.f32 	%f21, %f19, %f20;
	bar.sync 	0;
	add.s32 	%r51, %r63, 1;
	cvt.rn.f32.s32 	%f22, %r51;
	add.rn.f32 	%f23, %f21, %f22;
	st.shared.f32 	[%r4], %f23;
	bar.sync 	0;
	ld.shared.f32 	%f24, [%r5];
	mul.rn.f32 	%f25, %f24, 0f3F000000;
	add.s32 	%r52, %r63, %r68;
	cvt.rn.f32.s32 	%f26, %r52;
	add.rn.f32 	%f27, %f25, %f26;
	add.s32 	%r53, %r51, %r52;
	bar.sync 	0;
	add.s32 	%r54, %r63, 2;
	cvt.rn.f32.s32 	%f28, %r54;
	add.rn.f32 	%f29, %f27, %f28;
	st.shared.f32 	[%r4], %f29;
	bar.sync 	0;
	ld.shared.f32 	%f30, [%r5];
	mul.rn.f32 	%f31, %f30, 0f3F000000;
	cvt.rn.f32.s32 	%f32, %r53;
	add.rn.f32 	%f33, %f31, %f32;
	add.s32 	%r55, %r63, %r53;
	add.s32 	%r56, %r55, 2;
	bar.sync 	0;
	add.s32 	%r57, %r63, 3;
	cvt.rn.f32.s32 	%f34, %r57;
	add.rn.f32 	%f35, %f33, %f34;
	st.shared.f32 	[%r4], %f35;
	bar.sync 	0;
	ld.shared.f32 	%f36, [%r5];
	mul.rn.f32 	%f37, %f36, 0f3F000000;
	cvt.rn.f32.s32 	%f38, %r56;
	add.rn.f32 	%f51, %f37, %f38;
	add.s32 	%r58, %r63, %r56;
	add.s32 	%r68, %r58, 3;
	bar.sync 	0;
	add.s32 	%r63, %r63, 4;
	add.s32 	%r61, %r61, -4;
	setp.ne.s32 	%p4, %r61, 0;
	@%p4 bra 	$L__BB0_5;

$L__BB0_6:
	setp.eq.s32 	%p5, %r67, 0;
	@%p5 bra 	$L__BB0_8;

$L__BB0_7:
	.pragma "nounroll";
	cvt.rn.f32.s32 	%f39, %r63;
	add.rn.f32 	%f40, %f51, %f39;
	st.shared.f32 	[%r4], %f40;
	bar.sync 	0;
	ld.shared.f32 	%f41, [%r5];
	mul.rn.f32 	%f42, %f41, 0f3F000000;
	cvt.rn.f32.s32 	%f43, %r68;
	add.rn.f32 	%f51, %f42, %f43;
	add.s32 	%r68, %r63, %r68;
	bar.sync 	0;
	add.s32 	%r63, %r63, 1;
	add.s32 	%r67, %r67, -1;
	setp.ne.s32 	%p6, %r67, 0;
	@%p6 bra 	$L__BB0_7;

$L__BB0_8:
	cvt.rn.f32.s32 	%f44, %r68;
	add.rn.f32 	%f45, %f1, %f51;
	add.rn.f32 	%f46, %f45, %f44;
	st.global.f32 	[%rd1], %f46;
	bra.uni 	$L__BB0_9;

$L__BB0_1:
	cvt.rn.f32.s32 	%f13, %r68;
	add.rn.f32 	%f14, %f51, %f13;
	st.global.f32 	[%rd1], %f14;

$L__BB0_9:
	ret;

}
"""


def reference(x, n, nb, live, rounds):
    f32 = np.float32
    out = np.zeros(nb * n, f32)
    t = np.arange(n)
    for b in range(nb):
        v = x[b * n:(b + 1) * n] * f32(3) + t.astype(f32)
        acc = t * 7
        s = v.copy()
        w = s[(t + 1) % n]
        live_n = min(max(live, 0), n)
        o = out[b * n:(b + 1) * n]
        o[live_n:] = w[live_n:] + acc[live_n:].astype(f32)
        ww, aa = w[:live_n].copy(), acc[:live_n].copy()
        for r in range(rounds):
            s[:live_n] = ww + f32(r)      # exited threads' slots keep their old value
            ww = s[(np.arange(live_n) + 3) % n] * f32(0.5) + aa.astype(f32)
            aa = aa + r
        o[:live_n] = ww + v[:live_n] + aa.astype(f32)
    return out


@pytest.fixture(scope="module")
def kernels():
    region = ptx.compile(MID_EXIT)
    saved = regions.MAX_REGIONS
    regions.MAX_REGIONS = 0          # the general scheduler only
    try:
        general = ptx.compile(MID_EXIT + "\n// general scheduler\n")
    finally:
        regions.MAX_REGIONS = saved
    assert '@"r0.mid_exit"' in region.ir and '@"r0.mid_exit"' not in general.ir
    return region.kernel("mid_exit"), general.kernel("mid_exit")


@pytest.mark.parametrize("block,live,rounds", [
    ((64, 1, 1), 64, 3), ((8, 4, 2), 64, 2), ((8, 4, 2), 40, 2), ((100, 1, 1), 100, 4),
    ((100, 1, 1), 37, 3), ((16, 16, 1), 256, 0), ((96, 1, 1), 95, 1), ((33, 1, 1), 0, 2),
    ((7, 3, 1), 20, 5)])
def test_region_loops_match_model_and_general_scheduler(kernels, block, live, rounds):
    rng = np.random.default_rng()
    n, nb = int(np.prod(block)), 5
    x = rng.standard_normal(nb * n).astype(np.float32)
    ref = reference(x, n, nb, live, rounds)
    for k in kernels:
        out = np.full(nb * n, np.nan, np.float32)
        k.launch(nb, block, [x, out, live, rounds])
        assert np.array_equal(out, ref), f"{int(np.sum(out != ref))} of {out.size} differ"


# a 16x16 tile copied from global to shared memory and back, transposed, through a generic pointer too
TILE = r"""
.version 8.0
.target sm_86
.address_size 64
.visible .entry tile(.param .u64 in, .param .u64 out, .param .u64 gen)
{
  .reg .b32 %r<12>; .reg .b64 %rd<12>; .reg .f32 %f<4>;
  .shared .align 4 .b8 t[1024];
  ld.param.u64 %rd1, [in]; ld.param.u64 %rd2, [out]; ld.param.u64 %rd9, [gen];
  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y;
  shl.b32 %r3, %r2, 4; add.s32 %r4, %r3, %r1;
  mul.wide.u32 %rd3, %r4, 4; add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  shl.b32 %r5, %r4, 2; mov.u32 %r6, t; add.s32 %r7, %r6, %r5;
  st.shared.f32 [%r7], %f1;
  bar.sync 0;
  shl.b32 %r8, %r1, 4; add.s32 %r9, %r8, %r2; shl.b32 %r9, %r9, 2; add.s32 %r10, %r6, %r9;
  ld.shared.f32 %f2, [%r10];
  add.s64 %rd5, %rd2, %rd3;
  st.global.f32 [%rd5], %f2;
  add.s64 %rd10, %rd9, %rd3;
  st.f32 [%rd10], %f2;
  ret;
}
"""


def test_global_and_shared_accesses_do_not_alias():
    """Plain global and shared accesses carry alias scopes that keep them apart (FunctionEmitter.space_scope), so a
    16-thread row copying a tile between them is vectorised without a runtime overlap check; a generic access
    carries none (it may be either). The result is checked too."""
    m = ptx.compile(TILE)
    lines = m.ir.splitlines()
    glob = [ln for ln in lines if "load float" in ln and "!alias.scope !99993, !noalias !99994" in ln]
    shared = [ln for ln in lines if "store float" in ln and "!alias.scope !99994, !noalias !99993" in ln]
    generic = [ln for ln in lines if "store float" in ln and "!99993" not in ln and "!99994" not in ln
               and "!alias.scope" not in ln]
    assert glob and shared and generic
    rng = np.random.default_rng()
    a = rng.standard_normal((16, 16)).astype(np.float32)
    out = np.full((16, 16), np.nan, np.float32)
    gen = np.full((16, 16), np.nan, np.float32)
    m.kernel("tile").launch(1, (16, 16, 1), [a, out, gen])
    assert np.array_equal(out, a.T) and np.array_equal(gen, a.T)


def test_block_wide_accumulators_start_again_at_each_row():
    """A region's block-wide accumulators (its threads' next sites' min and max) begin each row's thread loop at
    their identity and join the block's value at the row's end (region_loops.range_loops): carried into the row's
    vectorised loop, each row waited for the horizontal reduction of the row before it. The results of 2-D and
    3-D blocks are test_region_loops_match_model_and_general_scheduler's."""
    ir = ptx.compile(MID_EXIT).ir
    assert "%mn = phi i32 [ -1, %ty.head ]" in ir and "%mx = phi i32 [ 0, %ty.head ]" in ir
    assert "[ %mn.y, %ty.head ]" not in ir
    assert "%mn.r = call i32 @llvm.umin.i32(i32 %mn.y, i32 %mn.rr)" in ir
    assert "%mx.r = call i32 @llvm.umax.i32(i32 %mx.y, i32 %mx.rr)" in ir
