"""Rounds of a lockstep loop inside one region call (ptx/codegen/cpu/round_loops.py): where every thread that stays
in the loop takes the same path through it, the region keeps its affine registers as one base for the block and runs
round after round itself; a branch on a lane-dependent value inside the loop keeps the round-at-a-time code. Each
kernel against a numpy model (fresh random inputs, poisoned outputs, every element checked) and against the code
without rounds: uniform and lane-dependent steps, trip counts that differ by thread (the threads still in the loop
when the others leave get their registers' slots back), 1-D and 2-D blocks, partial blocks."""

import re

import numpy as np
import pytest

import ptx
from ptx.codegen.cpu import block_prefetch, round_loops

# nvcc -arch=compute_86 -ptx (CUDA 13.0) of:
# extern "C" __global__ void uniform_steps(const int *x, int *out, int n, int rounds) {
#     unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
#     unsigned i = g;
#     int acc = (int)g;
#     for (int r = 0; r < rounds; r++) {
#         if (r % 3 == 1) i += 3 * blockDim.x; else i += blockDim.x + 1;
#         acc = acc * 31 + x[i % n];
#     }
#     out[g] = acc;
# }
#
# extern "C" __global__ void lane_steps(const int *x, int *out, int n, int rounds) {
#     unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
#     unsigned i = g;
#     int acc = (int)g;
#     for (int r = 0; r < rounds; r++) {
#         if ((threadIdx.x ^ r) & 2) { i += 5; acc ^= r; }
#         else i += 1;
#         acc = acc * 31 + x[i % n];
#     }
#     out[g] = acc;
# }
#
# extern "C" __global__ void uneven_counts(const int *cnt, const float *x, float *y, int n) {
#     unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
#     int c = cnt[g];
#     const float *p = x + g;
#     float acc = 0.0f;
#     for (int j = 0; j < c; j++) {
#         acc += p[0];
#         p += 3;
#     }
#     y[g] = acc;
# }
NVCC_PTX = r""".version 9.0
.target sm_86
.address_size 64

	// .globl	uniform_steps

.visible .entry uniform_steps(
	.param .u64 uniform_steps_param_0,
	.param .u64 uniform_steps_param_1,
	.param .u32 uniform_steps_param_2,
	.param .u32 uniform_steps_param_3
)
{
	.reg .pred 	%p<11>;
	.reg .b32 	%r<106>;
	.reg .b64 	%rd<27>;


	ld.param.u64 	%rd3, [uniform_steps_param_0];
	ld.param.u64 	%rd2, [uniform_steps_param_1];
	ld.param.u32 	%r37, [uniform_steps_param_2];
	ld.param.u32 	%r38, [uniform_steps_param_3];
	cvta.to.global.u64 	%rd1, %rd3;
	mov.u32 	%r1, %ntid.x;
	mov.u32 	%r39, %ctaid.x;
	mov.u32 	%r40, %tid.x;
	mad.lo.s32 	%r2, %r39, %r1, %r40;
	setp.lt.s32 	%p1, %r38, 1;
	mov.u32 	%r105, %r2;
	@%p1 bra 	$L__BB0_7;

	mul.lo.s32 	%r3, %r1, 3;
	add.s32 	%r4, %r1, 1;
	and.b32  	%r104, %r38, 3;
	add.s32 	%r43, %r38, -1;
	setp.lt.u32 	%p2, %r43, 3;
	mov.u32 	%r97, 0;
	mov.u32 	%r105, %r2;
	mov.u32 	%r99, %r2;
	@%p2 bra 	$L__BB0_4;

	sub.s32 	%r95, %r38, %r104;
	mov.u32 	%r97, 0;
	mov.u32 	%r91, 3;
	mov.u32 	%r45, 2;
	mov.u32 	%r44, 1;
	mov.u32 	%r89, %r44;
	mov.u32 	%r90, %r45;
	mov.u32 	%r105, %r2;
	mov.u32 	%r99, %r2;

$L__BB0_3:
	mul.wide.u32 	%rd4, %r91, -1431655765;
	shr.u64 	%rd5, %rd4, 33;
	cvt.u32.u64 	%r48, %rd5;
	mul.lo.s32 	%r49, %r48, 3;
	sub.s32 	%r51, %r45, %r49;
	mul.wide.u32 	%rd6, %r90, -1431655765;
	shr.u64 	%rd7, %rd6, 33;
	cvt.u32.u64 	%r52, %rd7;
	mul.lo.s32 	%r53, %r52, 3;
	sub.s32 	%r55, %r44, %r53;
	mul.wide.u32 	%rd8, %r89, -1431655765;
	shr.u64 	%rd9, %rd8, 33;
	cvt.u32.u64 	%r56, %rd9;
	mul.wide.u32 	%rd10, %r97, -1431655765;
	shr.u64 	%rd11, %rd10, 33;
	cvt.u32.u64 	%r57, %rd11;
	mul.lo.s32 	%r58, %r57, 3;
	not.b32 	%r59, %r58;
	add.s32 	%r60, %r97, %r59;
	setp.eq.s32 	%p3, %r60, 0;
	selp.b32 	%r61, %r3, %r4, %p3;
	add.s32 	%r62, %r61, %r99;
	rem.u32 	%r63, %r62, %r37;
	mul.wide.u32 	%rd12, %r63, 4;
	add.s64 	%rd13, %rd1, %rd12;
	ld.global.u32 	%r64, [%rd13];
	mad.lo.s32 	%r65, %r105, 31, %r64;
	mad.lo.s32 	%r66, %r56, -3, %r97;
	setp.eq.s32 	%p4, %r66, 0;
	selp.b32 	%r67, %r3, %r4, %p4;
	add.s32 	%r68, %r67, %r62;
	rem.u32 	%r69, %r68, %r37;
	mul.wide.u32 	%rd14, %r69, 4;
	add.s64 	%rd15, %rd1, %rd14;
	ld.global.u32 	%r70, [%rd15];
	mad.lo.s32 	%r71, %r65, 31, %r70;
	add.s32 	%r72, %r97, %r55;
	setp.eq.s32 	%p5, %r72, 0;
	selp.b32 	%r73, %r3, %r4, %p5;
	add.s32 	%r74, %r73, %r68;
	rem.u32 	%r75, %r74, %r37;
	mul.wide.u32 	%rd16, %r75, 4;
	add.s64 	%rd17, %rd1, %rd16;
	ld.global.u32 	%r76, [%rd17];
	mad.lo.s32 	%r77, %r71, 31, %r76;
	add.s32 	%r78, %r97, %r51;
	setp.eq.s32 	%p6, %r78, 0;
	selp.b32 	%r79, %r3, %r4, %p6;
	add.s32 	%r99, %r79, %r74;
	rem.u32 	%r80, %r99, %r37;
	mul.wide.u32 	%rd18, %r80, 4;
	add.s64 	%rd19, %rd1, %rd18;
	ld.global.u32 	%r81, [%rd19];
	mad.lo.s32 	%r105, %r77, 31, %r81;
	add.s32 	%r97, %r97, 4;
	add.s32 	%r91, %r91, 4;
	add.s32 	%r90, %r90, 4;
	add.s32 	%r89, %r89, 4;
	add.s32 	%r95, %r95, -4;
	setp.ne.s32 	%p7, %r95, 0;
	@%p7 bra 	$L__BB0_3;

$L__BB0_4:
	setp.eq.s32 	%p8, %r104, 0;
	@%p8 bra 	$L__BB0_7;

	neg.s32 	%r25, %r97;
	mov.u32 	%r100, 1;

$L__BB0_6:
	.pragma "nounroll";
	mul.wide.u32 	%rd20, %r97, -1431655765;
	shr.u64 	%rd21, %rd20, 33;
	cvt.u32.u64 	%r83, %rd21;
	mad.lo.s32 	%r84, %r83, 3, %r25;
	add.s32 	%r85, %r100, %r84;
	setp.eq.s32 	%p9, %r85, 0;
	selp.b32 	%r86, %r3, %r4, %p9;
	add.s32 	%r99, %r86, %r99;
	rem.u32 	%r87, %r99, %r37;
	mul.wide.u32 	%rd22, %r87, 4;
	add.s64 	%rd23, %rd1, %rd22;
	ld.global.u32 	%r88, [%rd23];
	mad.lo.s32 	%r105, %r105, 31, %r88;
	add.s32 	%r97, %r97, 1;
	add.s32 	%r100, %r100, -1;
	add.s32 	%r104, %r104, -1;
	setp.ne.s32 	%p10, %r104, 0;
	@%p10 bra 	$L__BB0_6;

$L__BB0_7:
	cvta.to.global.u64 	%rd24, %rd2;
	mul.wide.u32 	%rd25, %r2, 4;
	add.s64 	%rd26, %rd24, %rd25;
	st.global.u32 	[%rd26], %r105;
	ret;

}
	// .globl	lane_steps
.visible .entry lane_steps(
	.param .u64 lane_steps_param_0,
	.param .u64 lane_steps_param_1,
	.param .u32 lane_steps_param_2,
	.param .u32 lane_steps_param_3
)
{
	.reg .pred 	%p<11>;
	.reg .b32 	%r<103>;
	.reg .b64 	%rd<17>;


	ld.param.u64 	%rd3, [lane_steps_param_0];
	ld.param.u64 	%rd2, [lane_steps_param_1];
	ld.param.u32 	%r38, [lane_steps_param_2];
	ld.param.u32 	%r39, [lane_steps_param_3];
	cvta.to.global.u64 	%rd1, %rd3;
	mov.u32 	%r40, %ntid.x;
	mov.u32 	%r41, %ctaid.x;
	mul.lo.s32 	%r1, %r41, %r40;
	mov.u32 	%r2, %tid.x;
	add.s32 	%r3, %r1, %r2;
	setp.lt.s32 	%p1, %r39, 1;
	mov.u32 	%r102, %r3;
	@%p1 bra 	$L__BB1_6;

	add.s32 	%r44, %r39, -1;
	and.b32  	%r101, %r39, 3;
	setp.lt.u32 	%p2, %r44, 3;
	mov.u32 	%r95, 0;
	mov.u32 	%r102, %r3;
	mov.u32 	%r97, %r3;
	@%p2 bra 	$L__BB1_4;

	and.b32  	%r5, %r2, 2;
	shr.u32 	%r46, %r2, 1;
	and.b32  	%r47, %r46, 1;
	setp.eq.b32 	%p3, %r47, 1;
	mov.u32 	%r95, 0;
	selp.b32 	%r6, 5, 1, %p3;
	setp.eq.s32 	%p4, %r5, 0;
	selp.b32 	%r48, 5, 1, %p4;
	shl.b32 	%r49, %r48, 1;
	shl.b32 	%r50, %r6, 1;
	add.s32 	%r7, %r49, %r50;
	add.s32 	%r51, %r2, %r49;
	add.s32 	%r52, %r51, %r50;
	add.s32 	%r90, %r52, %r1;
	add.s32 	%r53, %r48, %r2;
	add.s32 	%r54, %r53, %r50;
	add.s32 	%r89, %r54, %r1;
	add.s32 	%r55, %r2, %r50;
	add.s32 	%r88, %r55, %r1;
	sub.s32 	%r11, %r101, %r39;
	mov.u32 	%r97, %r3;
	mov.u32 	%r102, %r3;

$L__BB1_3:
	setp.ne.s32 	%p5, %r5, 0;
	selp.b32 	%r56, %r95, 0, %p5;
	xor.b32  	%r57, %r56, %r102;
	add.s32 	%r58, %r6, %r97;
	rem.u32 	%r59, %r58, %r38;
	mul.wide.u32 	%rd4, %r59, 4;
	add.s64 	%rd5, %rd1, %rd4;
	ld.global.u32 	%r60, [%rd5];
	mad.lo.s32 	%r61, %r57, 31, %r60;
	add.s32 	%r62, %r95, 1;
	selp.b32 	%r63, %r62, 0, %p5;
	xor.b32  	%r64, %r63, %r61;
	rem.u32 	%r65, %r88, %r38;
	mul.wide.u32 	%rd6, %r65, 4;
	add.s64 	%rd7, %rd1, %rd6;
	ld.global.u32 	%r66, [%rd7];
	mad.lo.s32 	%r67, %r64, 31, %r66;
	add.s32 	%r68, %r95, 2;
	selp.b32 	%r69, %r68, 0, %p4;
	xor.b32  	%r70, %r69, %r67;
	rem.u32 	%r71, %r89, %r38;
	mul.wide.u32 	%rd8, %r71, 4;
	add.s64 	%rd9, %rd1, %rd8;
	ld.global.u32 	%r72, [%rd9];
	mad.lo.s32 	%r73, %r70, 31, %r72;
	add.s32 	%r74, %r95, 3;
	selp.b32 	%r75, %r74, 0, %p4;
	xor.b32  	%r76, %r75, %r73;
	rem.u32 	%r77, %r90, %r38;
	mul.wide.u32 	%rd10, %r77, 4;
	add.s64 	%rd11, %rd1, %rd10;
	ld.global.u32 	%r78, [%rd11];
	mad.lo.s32 	%r102, %r76, 31, %r78;
	add.s32 	%r97, %r97, %r7;
	add.s32 	%r90, %r90, %r7;
	add.s32 	%r89, %r89, %r7;
	add.s32 	%r88, %r88, %r7;
	add.s32 	%r95, %r95, 4;
	add.s32 	%r79, %r11, %r95;
	setp.ne.s32 	%p7, %r79, 0;
	@%p7 bra 	$L__BB1_3;

$L__BB1_4:
	setp.eq.s32 	%p8, %r101, 0;
	@%p8 bra 	$L__BB1_6;

$L__BB1_5:
	.pragma "nounroll";
	xor.b32  	%r80, %r95, %r2;
	shr.u32 	%r81, %r80, 1;
	and.b32  	%r82, %r81, 1;
	setp.eq.b32 	%p9, %r82, 1;
	selp.b32 	%r83, 5, 1, %p9;
	add.s32 	%r97, %r83, %r97;
	selp.b32 	%r84, %r95, 0, %p9;
	xor.b32  	%r85, %r84, %r102;
	rem.u32 	%r86, %r97, %r38;
	mul.wide.u32 	%rd12, %r86, 4;
	add.s64 	%rd13, %rd1, %rd12;
	ld.global.u32 	%r87, [%rd13];
	mad.lo.s32 	%r102, %r85, 31, %r87;
	add.s32 	%r95, %r95, 1;
	add.s32 	%r101, %r101, -1;
	setp.ne.s32 	%p10, %r101, 0;
	@%p10 bra 	$L__BB1_5;

$L__BB1_6:
	cvta.to.global.u64 	%rd14, %rd2;
	mul.wide.u32 	%rd15, %r3, 4;
	add.s64 	%rd16, %rd14, %rd15;
	st.global.u32 	[%rd16], %r102;
	ret;

}
	// .globl	uneven_counts
.visible .entry uneven_counts(
	.param .u64 uneven_counts_param_0,
	.param .u64 uneven_counts_param_1,
	.param .u64 uneven_counts_param_2,
	.param .u32 uneven_counts_param_3
)
{
	.reg .pred 	%p<6>;
	.reg .f32 	%f<25>;
	.reg .b32 	%r<15>;
	.reg .b64 	%rd<22>;


	ld.param.u64 	%rd10, [uneven_counts_param_0];
	ld.param.u64 	%rd8, [uneven_counts_param_1];
	ld.param.u64 	%rd9, [uneven_counts_param_2];
	mov.u32 	%r8, %ntid.x;
	mov.u32 	%r9, %ctaid.x;
	mov.u32 	%r10, %tid.x;
	mad.lo.s32 	%r11, %r9, %r8, %r10;
	cvt.u64.u32 	%rd1, %r11;
	cvta.to.global.u64 	%rd11, %rd10;
	mul.wide.u32 	%rd12, %r11, 4;
	add.s64 	%rd13, %rd11, %rd12;
	ld.global.u32 	%r1, [%rd13];
	setp.lt.s32 	%p1, %r1, 1;
	mov.f32 	%f24, 0f00000000;
	@%p1 bra 	$L__BB2_6;

	cvta.to.global.u64 	%rd14, %rd8;
	shl.b64 	%rd15, %rd1, 2;
	add.s64 	%rd20, %rd14, %rd15;
	add.s32 	%r12, %r1, -1;
	and.b32  	%r14, %r1, 3;
	setp.lt.u32 	%p2, %r12, 3;
	mov.f32 	%f24, 0f00000000;
	@%p2 bra 	$L__BB2_4;

	sub.s32 	%r13, %r1, %r14;
	mov.f32 	%f24, 0f00000000;

$L__BB2_3:
	ld.global.f32 	%f12, [%rd20];
	add.f32 	%f13, %f24, %f12;
	ld.global.f32 	%f14, [%rd20+12];
	add.f32 	%f15, %f13, %f14;
	ld.global.f32 	%f16, [%rd20+24];
	add.f32 	%f17, %f15, %f16;
	ld.global.f32 	%f18, [%rd20+36];
	add.f32 	%f24, %f17, %f18;
	add.s64 	%rd20, %rd20, 48;
	add.s32 	%r13, %r13, -4;
	setp.ne.s32 	%p3, %r13, 0;
	@%p3 bra 	$L__BB2_3;

$L__BB2_4:
	setp.eq.s32 	%p4, %r14, 0;
	@%p4 bra 	$L__BB2_6;

$L__BB2_5:
	.pragma "nounroll";
	ld.global.f32 	%f19, [%rd20];
	add.f32 	%f24, %f24, %f19;
	add.s64 	%rd20, %rd20, 12;
	add.s32 	%r14, %r14, -1;
	setp.ne.s32 	%p5, %r14, 0;
	@%p5 bra 	$L__BB2_5;

$L__BB2_6:
	cvta.to.global.u64 	%rd16, %rd9;
	shl.b64 	%rd17, %rd1, 2;
	add.s64 	%rd18, %rd16, %rd17;
	st.global.f32 	[%rd18], %f24;
	ret;

}

"""

# by hand: a loop whose step differs by lane through a branch (%BIT: %tid.x; not provably uniform, so no rounds)
# or by round (%BIT: the round counter; rounds)
HAND = r""".visible .entry divergent_step(.param .u64 out, .param .u32 rounds) {
  .reg .pred %p<4>; .reg .b32 %r<12>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [rounds];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  mov.u32 %r6, %r5;
  mov.u32 %r7, 0;
  setp.lt.s32 %p1, %r1, 1;
  @%p1 bra $Done;
$L:
  and.b32 %r8, %BIT, 1;
  setp.eq.s32 %p2, %r8, 0;
  @%p2 bra $Even;
  add.s32 %r6, %r6, 3;
  bra.uni $Join;
$Even:
  add.s32 %r6, %r6, 1;
$Join:
  add.s32 %r7, %r7, 1;
  setp.lt.s32 %p3, %r7, %r1;
  @%p3 bra $L;
$Done:
  mul.wide.u32 %rd2, %r5, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
}
"""
HAND_PTX = (".version 9.0\n.target sm_86\n.address_size 64\n\n" +
            HAND.replace("divergent_step", "lane_branch").replace("%BIT", "%r2") + "\n" +
            HAND.replace("divergent_step", "round_branch").replace("%BIT", "%r7"))


def _compile(src, enabled):
    saved = round_loops.ENABLED
    round_loops.ENABLED = enabled
    try:
        return ptx.compile(src + ("" if enabled else "\n// without rounds\n"))
    finally:
        round_loops.ENABLED = saved


def _rounds(ir, region):
    """Whether region function `region` (e.g. ru1.saxpy) runs its loop's rounds itself."""
    body = ir[ir.index(f'define internal i32 @"{region}"'):]
    return "\nround:" in body[:body.index("\n}\n")]


@pytest.fixture(scope="module")
def modules():
    on = {"nvcc": _compile(NVCC_PTX, True), "hand": _compile(HAND_PTX, True)}
    off = {"nvcc": _compile(NVCC_PTX, False), "hand": _compile(HAND_PTX, False)}
    assert "\nround:" not in off["nvcc"].ir + off["hand"].ir
    return {"rounds": on, "round at a time": off}


RNG = np.random.default_rng()


def test_which_loops_run_their_rounds(modules):
    """The three nvcc loops (a uniform branch in one, a lane-dependent select in another, per-thread trip counts
    in the third) and the hand-written loop whose branch depends on the round run their rounds in one call; the
    one whose branch depends on the lane does not."""
    nv, hand = modules["rounds"]["nvcc"].ir, modules["rounds"]["hand"].ir
    assert _rounds(nv, "ru1.uniform_steps") and _rounds(nv, "ru1.lane_steps") and _rounds(nv, "ru1.uneven_counts")
    assert _rounds(hand, "ru1.round_branch")
    assert not _rounds(hand, "ru1.lane_branch")


def uniform_steps_model(x, nthreads, block, rounds):
    n = len(x)
    out = np.zeros(nthreads, np.int64)
    for g in range(nthreads):
        i, acc = g, g
        for r in range(rounds):
            i = (i + (3 * block if r % 3 == 1 else block + 1)) & 0xFFFFFFFF
            acc = (acc * 31 + int(x[i % n])) & 0xFFFFFFFF
        out[g] = acc
    return out.astype(np.uint32).view(np.int32)


def lane_steps_model(x, nthreads, block, rounds):
    n = len(x)
    out = np.zeros(nthreads, np.int64)
    for g in range(nthreads):
        t = g % block
        i, acc = g, g
        for r in range(rounds):
            if (t ^ r) & 2:
                i += 5
                acc ^= r
            else:
                i += 1
            acc = (acc * 31 + int(x[i % n])) & 0xFFFFFFFF
        out[g] = acc
    return out.astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("kernel,model", [("uniform_steps", uniform_steps_model), ("lane_steps", lane_steps_model)])
@pytest.mark.parametrize("block,grid,rounds", [(256, 2, 37), (64, 3, 1), (33, 2, 0), (100, 1, 6), (7, 5, 13)])
def test_steps(modules, kernel, model, block, grid, rounds):
    nthreads = block * grid
    n = int(RNG.integers(1, 5000))
    x = RNG.integers(-1 << 30, 1 << 30, n).astype(np.int32)
    want = model(x, nthreads, block, rounds)
    for name, mods in modules.items():
        out = np.full(nthreads, 0x5EADBEEF, np.int32)
        mods["nvcc"].kernel(kernel).launch(grid, block, [x, out, n, rounds])
        assert np.array_equal(out, want), f"{name}: {int(np.sum(out != want))} of {nthreads} differ"


@pytest.mark.parametrize("block,grid,maxc", [(256, 2, 40), (64, 3, 9), (33, 2, 6), (128, 1, 4), (17, 4, 70)])
@pytest.mark.parametrize("counts", ["all enter", "some skip", "same"])
def test_trip_counts_that_differ_by_thread(modules, block, grid, maxc, counts):
    """Threads leave the loop in different rounds: those still in it go on in the masked regions from the slots the
    rounds' last call wrote back ("all enter": every thread starts nvcc's 4x unrolled loop, so the block runs rounds
    until the first leaves; "some skip": threads with fewer trips start the block apart; "same": all leave
    together)."""
    nthreads = block * grid
    low = {"all enter": 4, "some skip": 0, "same": maxc}[counts]
    cnt = RNG.integers(low, maxc + 1, nthreads).astype(np.int32)
    x = RNG.standard_normal(nthreads + 3 * maxc + 1).astype(np.float32)
    want = np.zeros(nthreads, np.float32)
    for g in range(nthreads):
        acc = np.float32(0)
        for j in range(int(cnt[g])):
            acc = np.float32(acc + x[g + 3 * j])
        want[g] = acc
    for name, mods in modules.items():
        y = np.full(nthreads, np.nan, np.float32)
        mods["nvcc"].kernel("uneven_counts").launch(grid, block, [cnt, x, y, 0])
        assert np.array_equal(y, want), f"{name}: {int(np.sum(y != want))} of {nthreads} differ"


@pytest.mark.parametrize("kernel", ["lane_branch", "round_branch"])
@pytest.mark.parametrize("block,grid,rounds", [(100, 3, 5), (256, 1, 1), (32, 4, 0), (9, 2, 40)])
def test_branches_in_the_loop(modules, kernel, block, grid, rounds):
    g = np.arange(block * grid, dtype=np.uint64)
    if kernel == "lane_branch":
        want = g + rounds * np.where((g % block) & 1, 3, 1)
    else:
        want = g + sum(3 if r & 1 else 1 for r in range(rounds))
    want = want.astype(np.uint32)
    for name, mods in modules.items():
        out = np.full(block * grid, 0xDEADBEEF, np.uint32)
        mods["hand"].kernel(kernel).launch(grid, block, [out, rounds])
        assert np.array_equal(out, want), f"{name}: {int(np.sum(out != want))} of {out.size} differ"


@pytest.mark.parametrize("block", [(16, 16, 1), (8, 4, 1), (5, 7, 1), (32, 1, 2)])
def test_rounds_in_blocks_of_rows(modules, block):
    """A 2-D (3-D) block: the base a round starts from is the block's, the same for every row."""
    grid = int(RNG.integers(1, 4))
    nthreads = block[0] * block[1] * block[2] * grid
    rounds = int(RNG.integers(1, 30))
    n = int(RNG.integers(1, 3000))
    x = RNG.integers(-1 << 30, 1 << 30, n).astype(np.int32)
    # g is blockIdx.x * blockDim.x + threadIdx.x: every row of a block computes and stores its first row's values
    bx = block[0]
    flat = uniform_steps_model(x, bx * grid, bx, rounds)
    for name, mods in modules.items():
        out = np.full(nthreads, 0x5EADBEEF, np.int32)
        mods["nvcc"].kernel("uniform_steps").launch(grid, block, [x, out, n, rounds])
        got = out[:bx * grid]
        assert np.array_equal(got, flat), f"{name}: {int(np.sum(got != flat))} of {got.size} differ"


def test_loads_through_a_lane0_address_prefetch_the_round_after_next(modules):
    """uneven_counts reads p[0], p[3], ... through a pointer 4 bytes apart per lane: the rounds record its lane-0
    address and, from the second round on, prefetch where two more steps of the same size put it (a grid-stride
    loop's next piece); x[i % n] has no lane-0 address, so uniform_steps prefetches nothing."""
    nv = modules["rounds"]["nvcc"].ir

    def body(region):
        b = nv[nv.index(f'define internal i32 @"{region}"'):]
        return b[:b.index("\n}\n")]

    assert "@llvm.prefetch.p0" in body("ru1.uneven_counts") and "%pfv = phi i1" in body("ru1.uneven_counts")
    assert "@llvm.prefetch" not in body("ru1.uniform_steps")
    saved = round_loops.PREFETCH, block_prefetch.ENABLED
    round_loops.PREFETCH = block_prefetch.ENABLED = False     # (the next block's lines: block_prefetch.py)
    try:
        off = ptx.compile(NVCC_PTX + "\n// no prefetch\n").ir
    finally:
        round_loops.PREFETCH, block_prefetch.ENABLED = saved
    assert "@llvm.prefetch" not in off and "\nround:" in off
