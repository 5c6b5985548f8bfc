"""Loops run in lockstep (ptx/codegen/cpu/lockstep.py): a yield at each loop header without a barrier makes the
block's threads run a loop one iteration at a time, all together, as region loops; the registers a yield carries that
are affine in %tid are recomputed once checked (cpu/affine.py). Grid-stride loops (1-D: affine; 3-D blocks: not),
loops whose trip count differs per thread (all-on, partial and all-off passes, threads entering a loop at different
times, so the affine check fails), nested loops, a k loop over strength-reduced pointers, barriers around yields with
shared-memory atomics, and a thread spinning on a flag another thread of its block sets after a loop (thread at a
time, it would never finish). Each against numpy with fresh random inputs, poisoned outputs, every element checked,
and against the thread-at-a-time code."""

import numpy as np
import pytest

import ptx
from ptx.codegen.cpu import lockstep

# nvcc -arch=compute_86 -ptx -fmad=false (CUDA 13.0) of:
# extern "C" __global__ void grid_stride(const float *x, float *y, float a, int n) {
#     unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
#     unsigned nt = blockDim.x * blockDim.y * blockDim.z;
#     for (int i = blockIdx.x * nt + t; i < n; i += nt * gridDim.x)
#         y[i] = a * x[i] + y[i];
# }
#
# extern "C" __global__ void saxpy(const float *x, float *y, float a, int n) {
#     for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
#         y[i] = a * x[i] + y[i];
# }
#
# extern "C" __global__ void divergent(const int *cnt, const int *x, int *out, int n) {
#     unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
#     int acc = (int)g;
#     int c = cnt[g % n];
#     for (int j = 0; j < c; j++) {
#         acc = acc * 3 + (j ^ (int)g);
#         for (int k = 0; k < (j & 3); k++) acc += k * 5 + 1;
#     }
#     for (int i = g; i < n; i += blockDim.x * gridDim.x) acc ^= x[i] + i;
#     out[g] = acc;
# }
#
# extern "C" __global__ void naive_mm(const float *A, const float *B, float *C, int M, int N, int K) {
#     int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
#     if (row >= M || col >= N) return;
#     float s = 0.0f;
#     for (int k = 0; k < K; k++) s += A[row * K + k] * B[k * N + col];
#     C[row * N + col] = s;
# }
#
# extern "C" __global__ void histogram(const unsigned char *data, int n, unsigned *hist) {
#     __shared__ unsigned s[256];
#     for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) s[b] = 0;
#     __syncthreads();
#     for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
#         atomicAdd(&s[data[i]], 1u);
#     __syncthreads();
#     for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&hist[b], s[b]);
# }
#
# extern "C" __global__ void spin(int rounds, int *out) {
#     __shared__ volatile int flag;
#     __shared__ volatile int partial;
#     if (threadIdx.x == 0) { flag = 0; partial = 0; }
#     __syncthreads();
#     if (threadIdx.x == 0) {
#         while (flag == 0) {}
#         out[blockIdx.x] = partial;
#     } else if (threadIdx.x == 1) {
#         int acc = 0;
#         for (int r = 0; r < rounds; r++) acc += r * 7 + blockIdx.x;
#         partial = acc;
#         flag = 1;
#     }
# }
#
# extern "C" __global__ void reentry(const int *cnt, const int *x, int *out, int n) {
#     unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
#     unsigned stride = blockDim.x * gridDim.x;
#     unsigned i = g;
#     int acc = 0;
#     int c = cnt[g];
# #pragma unroll 1
#     for (int j = 0; j < 4; j++) {
# #pragma unroll 1
#         for (int k = 0; k < c; k++) i += stride;
#         acc = acc * 5 + x[i % n];
#     }
#     out[g] = acc;
# }
PTX = r"""
.version 9.0
.target sm_86
.address_size 64

	// .globl	grid_stride

.visible .entry grid_stride(
	.param .u64 grid_stride_param_0,
	.param .u64 grid_stride_param_1,
	.param .f32 grid_stride_param_2,
	.param .u32 grid_stride_param_3
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<6>;
	.reg .b32 	%r<19>;
	.reg .b64 	%rd<8>;


	ld.param.u64 	%rd3, [grid_stride_param_0];
	ld.param.u64 	%rd4, [grid_stride_param_1];
	ld.param.f32 	%f1, [grid_stride_param_2];
	ld.param.u32 	%r6, [grid_stride_param_3];
	mov.u32 	%r7, %tid.z;
	mov.u32 	%r8, %ntid.y;
	mov.u32 	%r9, %tid.y;
	mad.lo.s32 	%r10, %r8, %r7, %r9;
	mov.u32 	%r11, %ntid.x;
	mov.u32 	%r12, %tid.x;
	mad.lo.s32 	%r13, %r10, %r11, %r12;
	mul.lo.s32 	%r14, %r11, %r8;
	mov.u32 	%r15, %ntid.z;
	mul.lo.s32 	%r1, %r14, %r15;
	mov.u32 	%r16, %ctaid.x;
	mad.lo.s32 	%r18, %r1, %r16, %r13;
	setp.ge.s32 	%p1, %r18, %r6;
	@%p1 bra 	$L__BB0_3;

	mov.u32 	%r17, %nctaid.x;
	mul.lo.s32 	%r3, %r1, %r17;
	cvta.to.global.u64 	%rd1, %rd3;
	cvta.to.global.u64 	%rd2, %rd4;

$L__BB0_2:
	mul.wide.s32 	%rd5, %r18, 4;
	add.s64 	%rd6, %rd1, %rd5;
	ld.global.f32 	%f2, [%rd6];
	mul.rn.f32 	%f3, %f2, %f1;
	add.s64 	%rd7, %rd2, %rd5;
	ld.global.f32 	%f4, [%rd7];
	add.rn.f32 	%f5, %f3, %f4;
	st.global.f32 	[%rd7], %f5;
	add.s32 	%r18, %r18, %r3;
	setp.lt.s32 	%p2, %r18, %r6;
	@%p2 bra 	$L__BB0_2;

$L__BB0_3:
	ret;

}
	// .globl	saxpy
.visible .entry saxpy(
	.param .u64 saxpy_param_0,
	.param .u64 saxpy_param_1,
	.param .f32 saxpy_param_2,
	.param .u32 saxpy_param_3
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<6>;
	.reg .b32 	%r<11>;
	.reg .b64 	%rd<8>;


	ld.param.u64 	%rd3, [saxpy_param_0];
	ld.param.u64 	%rd4, [saxpy_param_1];
	ld.param.f32 	%f1, [saxpy_param_2];
	ld.param.u32 	%r6, [saxpy_param_3];
	mov.u32 	%r1, %ntid.x;
	mov.u32 	%r7, %ctaid.x;
	mov.u32 	%r8, %tid.x;
	mad.lo.s32 	%r10, %r7, %r1, %r8;
	setp.ge.s32 	%p1, %r10, %r6;
	@%p1 bra 	$L__BB1_3;

	mov.u32 	%r9, %nctaid.x;
	mul.lo.s32 	%r3, %r1, %r9;
	cvta.to.global.u64 	%rd1, %rd3;
	cvta.to.global.u64 	%rd2, %rd4;

$L__BB1_2:
	mul.wide.s32 	%rd5, %r10, 4;
	add.s64 	%rd6, %rd1, %rd5;
	ld.global.f32 	%f2, [%rd6];
	mul.rn.f32 	%f3, %f2, %f1;
	add.s64 	%rd7, %rd2, %rd5;
	ld.global.f32 	%f4, [%rd7];
	add.rn.f32 	%f5, %f3, %f4;
	st.global.f32 	[%rd7], %f5;
	add.s32 	%r10, %r10, %r3;
	setp.lt.s32 	%p2, %r10, %r6;
	@%p2 bra 	$L__BB1_2;

$L__BB1_3:
	ret;

}
	// .globl	divergent
.visible .entry divergent(
	.param .u64 divergent_param_0,
	.param .u64 divergent_param_1,
	.param .u64 divergent_param_2,
	.param .u32 divergent_param_3
)
{
	.reg .pred 	%p<11>;
	.reg .b16 	%rs<8>;
	.reg .b32 	%r<70>;
	.reg .b64 	%rd<13>;


	ld.param.u64 	%rd4, [divergent_param_0];
	ld.param.u64 	%rd2, [divergent_param_1];
	ld.param.u64 	%rd3, [divergent_param_2];
	ld.param.u32 	%r31, [divergent_param_3];
	mov.u32 	%r1, %ntid.x;
	mov.u32 	%r32, %ctaid.x;
	mov.u32 	%r33, %tid.x;
	mad.lo.s32 	%r2, %r32, %r1, %r33;
	rem.u32 	%r34, %r2, %r31;
	cvta.to.global.u64 	%rd5, %rd4;
	mul.wide.u32 	%rd6, %r34, 4;
	add.s64 	%rd7, %rd5, %rd6;
	ld.global.u32 	%r3, [%rd7];
	setp.lt.s32 	%p1, %r3, 1;
	mov.u32 	%r65, %r2;
	@%p1 bra 	$L__BB2_11;

	mov.u32 	%r56, 0;
	mov.u16 	%rs7, 0;
	mov.u32 	%r65, %r2;

$L__BB2_2:
	xor.b32  	%r36, %r56, %r2;
	mad.lo.s32 	%r65, %r65, 3, %r36;
	and.b32  	%r37, %r56, 3;
	setp.eq.s32 	%p2, %r37, 0;
	@%p2 bra 	$L__BB2_10;

	cvt.u32.u16 	%r40, %rs7;
	and.b32  	%r41, %r40, 3;
	add.s32 	%r42, %r41, -1;
	setp.lt.u32 	%p3, %r42, 3;
	mov.u32 	%r63, 0;
	@%p3 bra 	$L__BB2_6;

	mov.u32 	%r58, 0;
	mov.u32 	%r63, %r58;
	mov.u32 	%r61, %r58;

$L__BB2_5:
	add.s32 	%r46, %r65, %r58;
	add.s32 	%r47, %r46, %r58;
	add.s32 	%r48, %r47, %r58;
	add.s32 	%r49, %r48, %r58;
	add.s32 	%r65, %r49, 34;
	add.s32 	%r63, %r63, 4;
	add.s32 	%r58, %r58, 20;
	add.s32 	%r61, %r61, -4;
	setp.ne.s32 	%p4, %r61, 0;
	@%p4 bra 	$L__BB2_5;

$L__BB2_6:
	and.b16  	%rs4, %rs7, 3;
	setp.eq.s16 	%p5, %rs4, 0;
	@%p5 bra 	$L__BB2_10;

	mul.lo.s32 	%r18, %r63, 5;
	add.s32 	%r50, %r65, %r18;
	add.s32 	%r65, %r50, 1;
	setp.eq.s16 	%p6, %rs4, 1;
	@%p6 bra 	$L__BB2_10;

	add.s32 	%r51, %r65, %r18;
	add.s32 	%r65, %r51, 6;
	setp.eq.s16 	%p7, %rs4, 2;
	@%p7 bra 	$L__BB2_10;

	add.s32 	%r52, %r65, %r18;
	add.s32 	%r65, %r52, 11;

$L__BB2_10:
	add.s32 	%r56, %r56, 1;
	setp.lt.s32 	%p8, %r56, %r3;
	add.s16 	%rs7, %rs7, 1;
	@%p8 bra 	$L__BB2_2;

$L__BB2_11:
	setp.ge.s32 	%p9, %r2, %r31;
	@%p9 bra 	$L__BB2_14;

	mov.u32 	%r53, %nctaid.x;
	mul.lo.s32 	%r25, %r1, %r53;
	cvta.to.global.u64 	%rd1, %rd2;
	mov.u32 	%r67, %r2;

$L__BB2_13:
	mul.wide.s32 	%rd8, %r67, 4;
	add.s64 	%rd9, %rd1, %rd8;
	ld.global.u32 	%r54, [%rd9];
	add.s32 	%r55, %r54, %r67;
	xor.b32  	%r65, %r55, %r65;
	add.s32 	%r67, %r67, %r25;
	setp.lt.s32 	%p10, %r67, %r31;
	@%p10 bra 	$L__BB2_13;

$L__BB2_14:
	cvta.to.global.u64 	%rd10, %rd3;
	mul.wide.u32 	%rd11, %r2, 4;
	add.s64 	%rd12, %rd10, %rd11;
	st.global.u32 	[%rd12], %r65;
	ret;

}
	// .globl	naive_mm
.visible .entry naive_mm(
	.param .u64 naive_mm_param_0,
	.param .u64 naive_mm_param_1,
	.param .u64 naive_mm_param_2,
	.param .u32 naive_mm_param_3,
	.param .u32 naive_mm_param_4,
	.param .u32 naive_mm_param_5
)
{
	.reg .pred 	%p<9>;
	.reg .f32 	%f<35>;
	.reg .b32 	%r<32>;
	.reg .b64 	%rd<34>;


	ld.param.u64 	%rd18, [naive_mm_param_0];
	ld.param.u64 	%rd19, [naive_mm_param_1];
	ld.param.u64 	%rd17, [naive_mm_param_2];
	ld.param.u32 	%r14, [naive_mm_param_3];
	ld.param.u32 	%r12, [naive_mm_param_4];
	ld.param.u32 	%r13, [naive_mm_param_5];
	cvta.to.global.u64 	%rd1, %rd19;
	cvta.to.global.u64 	%rd2, %rd18;
	mov.u32 	%r15, %ntid.y;
	mov.u32 	%r16, %ctaid.y;
	mov.u32 	%r17, %tid.y;
	mad.lo.s32 	%r1, %r16, %r15, %r17;
	mov.u32 	%r18, %ntid.x;
	mov.u32 	%r19, %ctaid.x;
	mov.u32 	%r20, %tid.x;
	mad.lo.s32 	%r2, %r19, %r18, %r20;
	setp.ge.s32 	%p1, %r1, %r14;
	setp.ge.s32 	%p2, %r2, %r12;
	or.pred  	%p3, %p1, %p2;
	@%p3 bra 	$L__BB3_9;

	setp.lt.s32 	%p4, %r13, 1;
	mov.f32 	%f34, 0f00000000;
	@%p4 bra 	$L__BB3_8;

	add.s32 	%r22, %r13, -1;
	and.b32  	%r31, %r13, 3;
	setp.lt.u32 	%p5, %r22, 3;
	mov.f32 	%f34, 0f00000000;
	mov.u32 	%r30, 0;
	@%p5 bra 	$L__BB3_5;

	sub.s32 	%r29, %r13, %r31;
	mul.lo.s32 	%r24, %r13, %r1;
	mul.wide.s32 	%rd3, %r24, 4;
	mul.wide.s32 	%rd20, %r2, 4;
	add.s64 	%rd30, %rd1, %rd20;
	mul.wide.s32 	%rd5, %r12, 4;
	mov.f32 	%f34, 0f00000000;
	mov.u32 	%r30, 0;
	mov.u64 	%rd31, %rd2;

$L__BB3_4:
	add.s64 	%rd21, %rd31, %rd3;
	ld.global.f32 	%f12, [%rd30];
	ld.global.f32 	%f13, [%rd21];
	mul.rn.f32 	%f14, %f13, %f12;
	add.rn.f32 	%f15, %f34, %f14;
	add.s64 	%rd22, %rd30, %rd5;
	ld.global.f32 	%f16, [%rd22];
	ld.global.f32 	%f17, [%rd21+4];
	mul.rn.f32 	%f18, %f17, %f16;
	add.rn.f32 	%f19, %f15, %f18;
	add.s64 	%rd23, %rd22, %rd5;
	ld.global.f32 	%f20, [%rd23];
	ld.global.f32 	%f21, [%rd21+8];
	mul.rn.f32 	%f22, %f21, %f20;
	add.rn.f32 	%f23, %f19, %f22;
	add.s64 	%rd24, %rd23, %rd5;
	add.s64 	%rd30, %rd24, %rd5;
	ld.global.f32 	%f24, [%rd24];
	ld.global.f32 	%f25, [%rd21+12];
	mul.rn.f32 	%f26, %f25, %f24;
	add.rn.f32 	%f34, %f23, %f26;
	add.s32 	%r30, %r30, 4;
	add.s64 	%rd31, %rd31, 16;
	add.s32 	%r29, %r29, -4;
	setp.ne.s32 	%p6, %r29, 0;
	@%p6 bra 	$L__BB3_4;

$L__BB3_5:
	setp.eq.s32 	%p7, %r31, 0;
	@%p7 bra 	$L__BB3_8;

	mad.lo.s32 	%r25, %r30, %r12, %r2;
	mul.wide.s32 	%rd25, %r25, 4;
	add.s64 	%rd33, %rd1, %rd25;
	mul.wide.s32 	%rd11, %r12, 4;
	mad.lo.s32 	%r26, %r13, %r1, %r30;
	mul.wide.s32 	%rd26, %r26, 4;
	add.s64 	%rd32, %rd2, %rd26;

$L__BB3_7:
	.pragma "nounroll";
	ld.global.f32 	%f27, [%rd33];
	ld.global.f32 	%f28, [%rd32];
	mul.rn.f32 	%f29, %f28, %f27;
	add.rn.f32 	%f34, %f34, %f29;
	add.s64 	%rd33, %rd33, %rd11;
	add.s64 	%rd32, %rd32, 4;
	add.s32 	%r31, %r31, -1;
	setp.ne.s32 	%p8, %r31, 0;
	@%p8 bra 	$L__BB3_7;

$L__BB3_8:
	mad.lo.s32 	%r27, %r1, %r12, %r2;
	cvta.to.global.u64 	%rd27, %rd17;
	mul.wide.s32 	%rd28, %r27, 4;
	add.s64 	%rd29, %rd27, %rd28;
	st.global.f32 	[%rd29], %f34;

$L__BB3_9:
	ret;

}
	// .globl	histogram
.visible .entry histogram(
	.param .u64 histogram_param_0,
	.param .u32 histogram_param_1,
	.param .u64 histogram_param_2
)
{
	.reg .pred 	%p<7>;
	.reg .b16 	%rs<2>;
	.reg .b32 	%r<31>;
	.reg .b64 	%rd<9>;
	// demoted variable
	.shared .align 4 .b8 _ZZ9histogramE1s[1024];

	ld.param.u64 	%rd3, [histogram_param_0];
	ld.param.u32 	%r12, [histogram_param_1];
	ld.param.u64 	%rd4, [histogram_param_2];
	mov.u32 	%r30, %tid.x;
	setp.lt.u32 	%p1, %r30, 256;
	@%p1 bra 	$L__BB4_1;
	bra.uni 	$L__BB4_3;

$L__BB4_1:
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r14, _ZZ9histogramE1s;
	mov.u32 	%r28, %r30;

$L__BB4_2:
	shl.b32 	%r13, %r28, 2;
	add.s32 	%r15, %r14, %r13;
	mov.u32 	%r16, 0;
	st.shared.u32 	[%r15], %r16;
	add.s32 	%r28, %r28, %r2;
	setp.lt.u32 	%p2, %r28, 256;
	@%p2 bra 	$L__BB4_2;

$L__BB4_3:
	mov.u32 	%r5, %ntid.x;
	bar.sync 	0;
	mov.u32 	%r17, %ctaid.x;
	mad.lo.s32 	%r29, %r17, %r5, %r30;
	setp.ge.s32 	%p3, %r29, %r12;
	@%p3 bra 	$L__BB4_6;

	mov.u32 	%r18, %nctaid.x;
	mul.lo.s32 	%r7, %r5, %r18;
	cvta.to.global.u64 	%rd1, %rd3;

$L__BB4_5:
	cvt.s64.s32 	%rd5, %r29;
	add.s64 	%rd6, %rd1, %rd5;
	ld.global.u8 	%rs1, [%rd6];
	mul.wide.u16 	%r19, %rs1, 4;
	mov.u32 	%r20, _ZZ9histogramE1s;
	add.s32 	%r21, %r20, %r19;
	atom.shared.add.u32 	%r22, [%r21], 1;
	add.s32 	%r29, %r29, %r7;
	setp.lt.s32 	%p4, %r29, %r12;
	@%p4 bra 	$L__BB4_5;

$L__BB4_6:
	setp.gt.u32 	%p5, %r30, 255;
	bar.sync 	0;
	@%p5 bra 	$L__BB4_9;

	cvta.to.global.u64 	%rd2, %rd4;
	mov.u32 	%r24, _ZZ9histogramE1s;

$L__BB4_8:
	mul.wide.u32 	%rd7, %r30, 4;
	add.s64 	%rd8, %rd2, %rd7;
	shl.b32 	%r23, %r30, 2;
	add.s32 	%r25, %r24, %r23;
	ld.shared.u32 	%r26, [%r25];
	atom.global.add.u32 	%r27, [%rd8], %r26;
	add.s32 	%r30, %r30, %r5;
	setp.lt.u32 	%p6, %r30, 256;
	@%p6 bra 	$L__BB4_8;

$L__BB4_9:
	ret;

}
	// .globl	spin
.visible .entry spin(
	.param .u32 spin_param_0,
	.param .u64 spin_param_1
)
{
	.reg .pred 	%p<10>;
	.reg .b32 	%r<56>;
	.reg .b64 	%rd<5>;
	// demoted variable
	.shared .align 4 .u32 _ZZ4spinE4flag;
	// demoted variable
	.shared .align 4 .u32 _ZZ4spinE7partial;

	ld.param.u32 	%r22, [spin_param_0];
	ld.param.u64 	%rd2, [spin_param_1];
	mov.u32 	%r1, %tid.x;
	setp.ne.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__BB5_2;

	mov.u32 	%r23, 0;
	st.volatile.shared.u32 	[_ZZ4spinE4flag], %r23;
	st.volatile.shared.u32 	[_ZZ4spinE7partial], %r23;

$L__BB5_2:
	setp.eq.s32 	%p2, %r1, 0;
	bar.sync 	0;
	@%p2 bra 	$L__BB5_12;

	setp.ne.s32 	%p3, %r1, 1;
	@%p3 bra 	$L__BB5_15;

	setp.lt.s32 	%p4, %r22, 1;
	mov.u32 	%r55, 0;
	@%p4 bra 	$L__BB5_11;

	mov.u32 	%r2, %ctaid.x;
	and.b32  	%r54, %r22, 3;
	add.s32 	%r28, %r22, -1;
	setp.lt.u32 	%p5, %r28, 3;
	mov.u32 	%r50, 0;
	mov.u32 	%r55, %r50;
	@%p5 bra 	$L__BB5_8;

	sub.s32 	%r4, %r54, %r22;
	mov.u32 	%r50, 0;
	mov.u32 	%r46, 21;

$L__BB5_7:
	add.s32 	%r32, %r55, %r2;
	add.s32 	%r33, %r32, %r46;
	add.s32 	%r34, %r33, %r2;
	add.s32 	%r35, %r34, %r46;
	add.s32 	%r36, %r35, %r2;
	add.s32 	%r37, %r36, %r46;
	add.s32 	%r38, %r37, %r2;
	add.s32 	%r39, %r38, %r46;
	add.s32 	%r55, %r39, -42;
	add.s32 	%r46, %r46, 28;
	add.s32 	%r50, %r50, 4;
	add.s32 	%r40, %r4, %r50;
	setp.ne.s32 	%p6, %r40, 0;
	@%p6 bra 	$L__BB5_7;

$L__BB5_8:
	setp.eq.s32 	%p7, %r54, 0;
	@%p7 bra 	$L__BB5_11;

	mul.lo.s32 	%r52, %r50, 7;

$L__BB5_10:
	.pragma "nounroll";
	add.s32 	%r41, %r55, %r2;
	add.s32 	%r55, %r41, %r52;
	add.s32 	%r52, %r52, 7;
	add.s32 	%r54, %r54, -1;
	setp.ne.s32 	%p8, %r54, 0;
	@%p8 bra 	$L__BB5_10;

$L__BB5_11:
	st.volatile.shared.u32 	[_ZZ4spinE7partial], %r55;
	mov.u32 	%r42, 1;
	st.volatile.shared.u32 	[_ZZ4spinE4flag], %r42;
	bra.uni 	$L__BB5_15;

$L__BB5_12:
	cvta.to.global.u64 	%rd1, %rd2;

$L__BB5_13:
	ld.volatile.shared.u32 	%r43, [_ZZ4spinE4flag];
	setp.eq.s32 	%p9, %r43, 0;
	@%p9 bra 	$L__BB5_13;

	ld.volatile.shared.u32 	%r44, [_ZZ4spinE7partial];
	mov.u32 	%r45, %ctaid.x;
	mul.wide.u32 	%rd3, %r45, 4;
	add.s64 	%rd4, %rd1, %rd3;
	st.global.u32 	[%rd4], %r44;

$L__BB5_15:
	ret;

}
	// .globl	reentry
.visible .entry reentry(
	.param .u64 reentry_param_0,
	.param .u64 reentry_param_1,
	.param .u64 reentry_param_2,
	.param .u32 reentry_param_3
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<30>;
	.reg .b64 	%rd<14>;


	ld.param.u64 	%rd4, [reentry_param_0];
	ld.param.u64 	%rd5, [reentry_param_1];
	ld.param.u64 	%rd6, [reentry_param_2];
	ld.param.u32 	%r14, [reentry_param_3];
	cvta.to.global.u64 	%rd1, %rd5;
	cvta.to.global.u64 	%rd2, %rd6;
	mov.u32 	%r17, %ntid.x;
	mov.u32 	%r18, %ctaid.x;
	mov.u32 	%r19, %tid.x;
	mad.lo.s32 	%r29, %r18, %r17, %r19;
	mov.u32 	%r20, %nctaid.x;
	mul.lo.s32 	%r2, %r17, %r20;
	cvt.u64.u32 	%rd3, %r29;
	cvta.to.global.u64 	%rd7, %rd4;
	mul.wide.u32 	%rd8, %r29, 4;
	add.s64 	%rd9, %rd7, %rd8;
	ld.global.u32 	%r3, [%rd9];
	mov.u32 	%r24, 0;
	mov.u32 	%r25, %r24;

$L__BB6_1:
	.pragma "nounroll";
	setp.lt.s32 	%p1, %r3, 1;
	@%p1 bra 	$L__BB6_4;

	mov.u32 	%r27, 0;

$L__BB6_3:
	.pragma "nounroll";
	add.s32 	%r29, %r29, %r2;
	add.s32 	%r27, %r27, 1;
	setp.lt.s32 	%p2, %r27, %r3;
	@%p2 bra 	$L__BB6_3;

$L__BB6_4:
	rem.u32 	%r22, %r29, %r14;
	mul.wide.u32 	%rd10, %r22, 4;
	add.s64 	%rd11, %rd1, %rd10;
	ld.global.u32 	%r23, [%rd11];
	mad.lo.s32 	%r25, %r25, 5, %r23;
	add.s32 	%r24, %r24, 1;
	setp.lt.u32 	%p3, %r24, 4;
	@%p3 bra 	$L__BB6_1;

	shl.b64 	%rd12, %rd3, 2;
	add.s64 	%rd13, %rd2, %rd12;
	st.global.u32 	[%rd13], %r25;
	ret;

}
"""

# A thread spinning in the body's first loop until another thread, in a later loop, sets a flag (by hand: nvcc
# places a spin loop last). The first-yield-first order alone would run the spinner forever.
SPIN_FIRST = r"""
.version 8.0
.target sm_86
.address_size 64
.shared .align 4 .u32 flag_h;
.shared .align 4 .u32 part_h;
.visible .entry spin_hand(.param .u32 rounds, .param .u64 out)
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<4>;
ld.param.u32 %r1, [rounds];
ld.param.u64 %rd1, [out];
mov.u32 %r2, %tid.x;
setp.ne.u32 %p1, %r2, 0;
@%p1 bra SKIPINIT;
mov.u32 %r3, 0;
st.volatile.shared.u32 [flag_h], %r3;
st.volatile.shared.u32 [part_h], %r3;
SKIPINIT:
bar.sync 0;
setp.ne.u32 %p1, %r2, 0;
@%p1 bra WORKER;
SPIN:
ld.volatile.shared.u32 %r4, [flag_h];
setp.eq.u32 %p2, %r4, 0;
@%p2 bra SPIN;
ld.volatile.shared.u32 %r5, [part_h];
mov.u32 %r6, %ctaid.x;
mul.wide.u32 %rd2, %r6, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r5;
ret;
WORKER:
setp.ne.u32 %p1, %r2, 1;
@%p1 bra DONE;
mov.u32 %r7, 0;
mov.u32 %r8, 0;
mov.u32 %r9, %ctaid.x;
setp.eq.u32 %p3, %r1, 0;
@%p3 bra PUBLISH;
LOOP:
mad.lo.u32 %r10, %r8, 7, %r9;
add.u32 %r7, %r7, %r10;
add.u32 %r8, %r8, 1;
setp.lt.u32 %p3, %r8, %r1;
@%p3 bra LOOP;
PUBLISH:
st.volatile.shared.u32 [part_h], %r7;
mov.u32 %r11, 1;
st.volatile.shared.u32 [flag_h], %r11;
DONE:
ret;
}
"""


def _compile(enabled):
    saved = lockstep.ENABLED
    lockstep.ENABLED = enabled
    try:
        return ptx.compile(PTX + ("" if enabled else "\n// thread at a time\n"))
    finally:
        lockstep.ENABLED = saved


@pytest.fixture(scope="module")
def modules():
    on, off = _compile(True), _compile(False)
    assert '@"rm1.saxpy"' in on.ir and '@"ru1.saxpy"' in on.ir and '@"uc1.saxpy"' in on.ir
    assert '@"rm1.saxpy"' not in off.ir
    return {"lockstep": on, "thread at a time": off}


RNG = np.random.default_rng()
BLOCKS_3D = [(64, 1, 1), (8, 4, 2), (7, 3, 5), (33, 1, 1), (256, 1, 1), (1, 1, 1)]


@pytest.mark.parametrize("block", BLOCKS_3D)
def test_grid_stride_3d_blocks(modules, block):
    n = int(RNG.integers(1, 5000))
    grid = int(RNG.integers(1, 9))
    x = RNG.standard_normal(n).astype(np.float32)
    y0 = RNG.standard_normal(n).astype(np.float32)
    a = np.float32(RNG.standard_normal())
    want = a * x + y0
    for name, m in modules.items():
        y = y0.copy()
        m.kernel("grid_stride").launch(grid, block, [x, y, a, n])
        assert np.array_equal(y, want), f"{name}: {int(np.sum(y != want))} of {n} differ"


@pytest.mark.parametrize("block,n", [(256, 1 << 16), (256, 1000), (96, 4097), (32, 31), (1024, 70000), (5, 3)])
def test_grid_stride_1d_affine(modules, block, n):
    grid = int(RNG.integers(1, 7))
    x = RNG.standard_normal(n).astype(np.float32)
    y0 = RNG.standard_normal(n).astype(np.float32)
    a = np.float32(RNG.standard_normal())
    want = a * x + y0
    for name, m in modules.items():
        y = y0.copy()
        m.kernel("saxpy").launch(grid, block, [x, y, a, n])
        assert np.array_equal(y, want), f"{name}: {int(np.sum(y != want))} of {n} differ"


def divergent_model(cnt, x, nthreads):
    n = len(x)
    out = np.zeros(nthreads, np.int64)
    for g in range(nthreads):
        acc = g
        for j in range(int(cnt[g % n])):
            acc = (acc * 3 + (j ^ g)) & 0xFFFFFFFF
            for k in range(j & 3):
                acc = (acc + k * 5 + 1) & 0xFFFFFFFF
        for i in range(g, n, nthreads):
            acc ^= (int(x[i]) + i) & 0xFFFFFFFF
        out[g] = acc
    return out.astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("block,grid,maxc", [(64, 3, 12), (33, 2, 40), (256, 1, 1), (128, 2, 0), (17, 5, 9)])
def test_divergent_trip_counts(modules, block, grid, maxc):
    nthreads = block * grid
    n = int(RNG.integers(1, 3 * nthreads))
    cnt = RNG.integers(0, maxc + 1, n).astype(np.int32)
    if maxc:
        cnt[RNG.integers(0, n, max(1, n // 4))] = 0           # some threads skip the loops
    x = RNG.integers(-1 << 20, 1 << 20, n).astype(np.int32)
    want = divergent_model(cnt, x, nthreads)
    for name, m in modules.items():
        out = np.full(nthreads, 0x5EADBEEF, np.int32)
        m.kernel("divergent").launch(grid, block, [cnt, x, out, n])
        assert np.array_equal(out, want), f"{name}: {int(np.sum(out != want))} of {nthreads} differ"


@pytest.mark.parametrize("block", [(16, 16, 1), (8, 4, 1), (32, 3, 1), (5, 7, 1)])
def test_naive_matmul(modules, block):
    M, N, K = (int(v) for v in RNG.integers(1, 70, 3))
    A = RNG.standard_normal((M, K)).astype(np.float32)
    B = RNG.standard_normal((K, N)).astype(np.float32)
    want = np.zeros((M, N), np.float32)
    for k in range(K):                  # the kernel's order and rounding: s += a * b, each step in f32
        want = want + A[:, k:k + 1] * B[k:k + 1, :]
    grid = ((N + block[0] - 1) // block[0], (M + block[1] - 1) // block[1], 1)
    for name, m in modules.items():
        C = np.full((M, N), np.nan, np.float32)
        m.kernel("naive_mm").launch(grid, block, [A, B, C, M, N, K])
        assert np.array_equal(C, want), f"{name}: {int(np.sum(C != want))} of {C.size} differ"


@pytest.mark.parametrize("block,grid", [(256, 4), (64, 3), (100, 2), (512, 1), (1024, 2)])
def test_histogram_with_barriers(modules, block, grid):
    n = int(RNG.integers(1, 200000))
    data = RNG.integers(0, 256, n).astype(np.uint8)
    if n > 10:
        data[: n // 3] = RNG.integers(0, 4)                    # many lanes on one bin
    want = np.bincount(data, minlength=256).astype(np.uint32)
    for name, m in modules.items():
        hist = np.zeros(256, np.uint32)
        m.kernel("histogram").launch(grid, block, [data, n, hist])
        assert np.array_equal(hist, want), f"{name}: {int(np.sum(hist != want))} bins differ"


@pytest.mark.parametrize("first", [False, True])
@pytest.mark.parametrize("block,rounds", [(2, 5), (64, 1000), (33, 0), (256, 17)])
def test_a_thread_spins_until_another_sets_a_flag(modules, block, rounds, first):
    """Thread at a time, the spinning thread would never let the other one run."""
    grid = int(RNG.integers(1, 6))
    want = np.array([sum(r * 7 + b for r in range(rounds)) for b in range(grid)], np.int64)
    want = (want & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    out = np.full(grid, 0x5EADBEEF, np.int32)
    if first:
        k = ptx.compile(SPIN_FIRST).kernel("spin_hand")
    else:
        k = modules["lockstep"].kernel("spin")
    k.launch(grid, block, [rounds, out])
    assert np.array_equal(out, want)


@pytest.mark.parametrize("block,grid,maxc", [(64, 2, 6), (32, 1, 3), (100, 3, 9), (8, 1, 2)])
def test_affine_check_fails_where_threads_advanced_apart(modules, block, grid, maxc):
    """All threads meet at the outer loop's header, but each advanced its index a different number of times in the
    inner loop: the index is not affine in %tid there, the check says so, and the generic region runs."""
    nthreads = block * grid
    n = int(RNG.integers(1, 4 * nthreads))
    cnt = RNG.integers(1, maxc + 1, nthreads).astype(np.int32)     # all reach the inner loop: they meet there
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    want = np.zeros(nthreads, np.int64)
    for g in range(nthreads):
        i, acc = g, 0
        for _ in range(4):
            i = (i + int(cnt[g]) * nthreads) & 0xFFFFFFFF
            acc = (acc * 5 + int(x[i % n])) & 0xFFFFFFFF
        want[g] = acc
    want = want.astype(np.uint32).view(np.int32)
    for name, m in modules.items():
        out = np.full(nthreads, 0x5EADBEEF, np.int32)
        m.kernel("reentry").launch(grid, block, [cnt, x, out, n])
        assert np.array_equal(out, want), f"{name}: {int(np.sum(out != want))} of {nthreads} differ"


# nvcc -arch=compute_86 -ptx -O3 (CUDA 13.0) of:
# extern "C" __global__ void lockstep_rows(int *t, const int *seed, int rounds) {
#     int i = threadIdx.x;
#     if (i >= 16) return;
#     int *base = t + blockIdx.x * rounds * 48;
#     int v = seed[blockIdx.x * 16 + i];
# #pragma unroll 1
#     for (int r = 0; r < rounds; r++) {
#         int *a = base + r * 48, *b = a + 16, *c = a + 32;
#         a[i] = v * 3 + r;
#         b[i] = a[(i + 1) & 15] - a[i];
#         c[i] = b[(i + 15) & 15] ^ (i == 15 ? a[0] : b[i + 1]);
#         v = c[i] + b[i];
#     }
# }
# Each round a lane reads what its neighbours stored earlier in the same round, with no __syncwarp: it relies on
# a converged warp's lanes running in lockstep, as cuSOLVER's svd_music_kernel does.
ROWS = ".version 9.0\n.target sm_86\n.address_size 64\n\n" + """.visible .entry lockstep_rows(
	.param .u64 lockstep_rows_param_0,
	.param .u64 lockstep_rows_param_1,
	.param .u32 lockstep_rows_param_2
)
{
	.reg .pred 	%p<5>;
	.reg .b32 	%r<32>;
	.reg .b64 	%rd<40>;


	ld.param.u64 	%rd16, [lockstep_rows_param_0];
	ld.param.u64 	%rd15, [lockstep_rows_param_1];
	ld.param.u32 	%r10, [lockstep_rows_param_2];
	cvta.to.global.u64 	%rd1, %rd16;
	mov.u32 	%r1, %tid.x;
	setp.gt.s32 	%p1, %r1, 15;
	@%p1 bra 	$L__BB0_4;

	mov.u32 	%r2, %ctaid.x;
	mul.lo.s32 	%r11, %r2, %r10;
	mul.lo.s32 	%r12, %r11, 48;
	cvt.u64.u32 	%rd38, %r12;
	setp.lt.s32 	%p2, %r10, 1;
	@%p2 bra 	$L__BB0_4;

	shl.b32 	%r15, %r2, 4;
	add.s32 	%r16, %r15, %r1;
	cvta.to.global.u64 	%rd17, %rd15;
	mul.wide.u32 	%rd18, %r16, 4;
	add.s64 	%rd19, %rd17, %rd18;
	ld.global.u32 	%r31, [%rd19];
	add.s32 	%r17, %r1, 1;
	and.b32  	%r18, %r17, 15;
	cvt.u64.u32 	%rd20, %r18;
	add.s32 	%r19, %r1, -1;
	and.b32  	%r20, %r19, 15;
	cvt.u64.u32 	%rd21, %r20;
	cvt.s64.s32 	%rd22, %r17;
	add.s64 	%rd23, %rd38, %rd20;
	shl.b64 	%rd24, %rd23, 2;
	add.s64 	%rd39, %rd1, %rd24;
	add.s64 	%rd4, %rd22, 16;
	add.s64 	%rd25, %rd38, %rd21;
	shl.b64 	%rd26, %rd25, 2;
	add.s64 	%rd27, %rd1, %rd26;
	add.s64 	%rd37, %rd27, 64;
	cvt.s64.s32 	%rd28, %r1;
	add.s64 	%rd29, %rd28, %rd38;
	shl.b64 	%rd30, %rd29, 2;
	add.s64 	%rd31, %rd1, %rd30;
	add.s64 	%rd36, %rd31, 64;
	mov.u32 	%r29, 0;
	mov.u32 	%r30, %r29;

$L__BB0_3:
	.pragma "nounroll";
	mul.lo.s32 	%r21, %r31, 3;
	add.s32 	%r22, %r30, %r21;
	st.global.u32 	[%rd36+-64], %r22;
	ld.global.u32 	%r23, [%rd39];
	sub.s32 	%r24, %r23, %r21;
	add.s32 	%r25, %r29, %r24;
	st.global.u32 	[%rd36], %r25;
	add.s64 	%rd32, %rd4, %rd38;
	setp.eq.s32 	%p3, %r1, 15;
	selp.b64 	%rd33, %rd38, %rd32, %p3;
	shl.b64 	%rd34, %rd33, 2;
	add.s64 	%rd35, %rd1, %rd34;
	ld.global.u32 	%r26, [%rd35];
	ld.global.u32 	%r27, [%rd37];
	xor.b32  	%r28, %r26, %r27;
	st.global.u32 	[%rd36+64], %r28;
	add.s32 	%r31, %r25, %r28;
	add.s64 	%rd39, %rd39, 192;
	add.s64 	%rd38, %rd38, 48;
	add.s64 	%rd37, %rd37, 192;
	add.s64 	%rd36, %rd36, 192;
	add.s32 	%r29, %r29, -1;
	add.s32 	%r30, %r30, 1;
	setp.lt.s32 	%p4, %r30, %r10;
	@%p4 bra 	$L__BB0_3;

$L__BB0_4:
	ret;

}
"""


def rows_model(seed, blocks, rounds):
    """What a converged warp computes: each statement for all 16 lanes before the next."""
    out = np.zeros((blocks, rounds, 48), np.int32)
    i = np.arange(16)
    with np.errstate(over="ignore"):
        for blk in range(blocks):
            v = seed[blk * 16:(blk + 1) * 16].astype(np.int32)
            for r in range(rounds):
                a = (v * np.int32(3) + np.int32(r)).astype(np.int32)
                b = (a[(i + 1) & 15] - a).astype(np.int32)
                c = (b[(i + 15) & 15] ^ np.where(i == 15, a[0], b[np.minimum(i + 1, 15)])).astype(np.int32)
                v = (c + b).astype(np.int32)
                out[blk, r] = np.concatenate([a, b, c])
    return out.ravel()


def test_stores_a_later_load_reads_get_a_yield():
    from ptx import parse
    from ptx.passes.flatten_scopes import flatten_function
    flat = flatten_function(next(i for i in parse(ROWS).items if getattr(i, "name", "") == "lockstep_rows"))
    spans = lockstep.loop_spans(flat.body)
    hazards = lockstep.store_hazards(flat.body, spans)
    # a[i] and b[i] are read back (by neighbours) in the same round; c[i] is not before the round ends
    assert len(spans) == 1 and len(hazards) == 2, (spans, hazards)
    yields = [st for st in lockstep.with_yields(flat).body if getattr(st, "mods", ()) == ("sync", "yield")]
    assert len(yields) == 3


@pytest.mark.parametrize("blocks,rounds,block", [(4, 20, 32), (3, 7, 16), (5, 1, 64), (2, 33, 17)])
def test_lanes_read_what_neighbours_stored_this_round(blocks, rounds, block):
    k = ptx.compile(ROWS).kernel("lockstep_rows")
    seed = RNG.integers(-2**31, 2**31, blocks * 16, dtype=np.int64).astype(np.int32)
    out = np.full(blocks * rounds * 48 + 5, 0x7EADBEEF, np.int32)
    k.launch((blocks,), (block,), [out, seed, rounds])
    np.testing.assert_array_equal(out[:-5], rows_model(seed, blocks, rounds))
    assert (out[-5:] == 0x7EADBEEF).all()


def test_lockstep_rows_as_an_h200_computes_them():
    import json
    from pathlib import Path
    got = json.loads((Path(__file__).resolve().parent.parent / "data" / "nvidia_lockstep_rows.json").read_text())
    blocks, rounds = got["blocks"], got["rounds"]
    seed = (np.arange(blocks * 16, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(np.uint32).view(np.int32)
    want = np.array(got["out"], np.int32)
    np.testing.assert_array_equal(want, rows_model(seed, blocks, rounds))     # the model is the GPU's order
    out = np.full(want.size, -1, np.int32)
    ptx.compile(ROWS).kernel("lockstep_rows").launch((blocks,), (32,), [out, seed, rounds])
    np.testing.assert_array_equal(out, want)


# nvcc -arch=compute_86 -ptx -O3 (CUDA 13.0) of:
# __device__ void warp_reduce(volatile float *s, unsigned t) {
#     s[t] += s[t + 32]; s[t] += s[t + 16]; s[t] += s[t + 8]; s[t] += s[t + 4]; s[t] += s[t + 2]; s[t] += s[t + 1];
# }
# extern "C" __global__ void reduce_volatile(const float *in, float *out) {
#     __shared__ float s[256];
#     unsigned t = threadIdx.x;
#     s[t] = in[blockIdx.x * 256 + t];
#     __syncthreads();
#     for (unsigned stride = 128; stride > 32; stride >>= 1) {
#         if (t < stride) s[t] += s[t + stride];
#         __syncthreads();
#     }
#     if (t < 32) warp_reduce(s, t);
#     if (t == 0) out[blockIdx.x] = s[0];
# }
# extern "C" __global__ void scan_volatile(const int *in, int *out) {
#     __shared__ volatile int s[64];
#     unsigned lane = threadIdx.x, t = lane + 32;
#     s[lane] = 0;
#     s[t] = in[blockIdx.x * 32 + lane];
#     s[t] += s[t - 1]; s[t] += s[t - 2]; s[t] += s[t - 4]; s[t] += s[t - 8]; s[t] += s[t - 16];
#     out[blockIdx.x * 32 + lane] = s[t];
# }
# Warp-synchronous code on volatile shared memory with no __syncwarp (the classic last-warp reduction and a padded
# Hillis-Steele scan): a converged warp runs each statement's loads for all its lanes, then the stores.
VOLATILE = ".version 9.0\n.target sm_86\n.address_size 64\n\n" + """.visible .entry reduce_volatile(
	.param .u64 reduce_volatile_param_0,
	.param .u64 reduce_volatile_param_1
)
{
	.reg .pred 	%p<5>;
	.reg .f32 	%f<27>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<9>;
	.shared .align 4 .b8 _ZZ15reduce_volatileE1s[1024];

	ld.param.u64 	%rd2, [reduce_volatile_param_0];
	ld.param.u64 	%rd1, [reduce_volatile_param_1];
	mov.u32 	%r1, %ctaid.x;
	shl.b32 	%r4, %r1, 8;
	mov.u32 	%r2, %tid.x;
	add.s32 	%r5, %r4, %r2;
	cvta.to.global.u64 	%rd3, %rd2;
	mul.wide.u32 	%rd4, %r5, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.f32 	%f1, [%rd5];
	shl.b32 	%r6, %r2, 2;
	mov.u32 	%r7, _ZZ15reduce_volatileE1s;
	add.s32 	%r3, %r7, %r6;
	st.shared.f32 	[%r3], %f1;
	bar.sync 	0;
	setp.gt.u32 	%p1, %r2, 127;
	@%p1 bra 	$L__BB0_2;

	ld.shared.f32 	%f2, [%r3];
	ld.shared.f32 	%f3, [%r3+512];
	add.f32 	%f4, %f3, %f2;
	st.shared.f32 	[%r3], %f4;

$L__BB0_2:
	bar.sync 	0;
	setp.gt.u32 	%p2, %r2, 63;
	@%p2 bra 	$L__BB0_4;

	ld.shared.f32 	%f5, [%r3];
	ld.shared.f32 	%f6, [%r3+256];
	add.f32 	%f7, %f6, %f5;
	st.shared.f32 	[%r3], %f7;

$L__BB0_4:
	bar.sync 	0;
	setp.gt.u32 	%p3, %r2, 31;
	@%p3 bra 	$L__BB0_6;

	ld.volatile.shared.f32 	%f8, [%r3];
	ld.volatile.shared.f32 	%f9, [%r3+128];
	add.f32 	%f10, %f9, %f8;
	st.volatile.shared.f32 	[%r3], %f10;
	ld.volatile.shared.f32 	%f11, [%r3];
	ld.volatile.shared.f32 	%f12, [%r3+64];
	add.f32 	%f13, %f12, %f11;
	st.volatile.shared.f32 	[%r3], %f13;
	ld.volatile.shared.f32 	%f14, [%r3];
	ld.volatile.shared.f32 	%f15, [%r3+32];
	add.f32 	%f16, %f15, %f14;
	st.volatile.shared.f32 	[%r3], %f16;
	ld.volatile.shared.f32 	%f17, [%r3];
	ld.volatile.shared.f32 	%f18, [%r3+16];
	add.f32 	%f19, %f18, %f17;
	st.volatile.shared.f32 	[%r3], %f19;
	ld.volatile.shared.f32 	%f20, [%r3];
	ld.volatile.shared.f32 	%f21, [%r3+8];
	add.f32 	%f22, %f21, %f20;
	st.volatile.shared.f32 	[%r3], %f22;
	ld.volatile.shared.f32 	%f23, [%r3];
	ld.volatile.shared.f32 	%f24, [%r3+4];
	add.f32 	%f25, %f24, %f23;
	st.volatile.shared.f32 	[%r3], %f25;

$L__BB0_6:
	setp.ne.s32 	%p4, %r2, 0;
	@%p4 bra 	$L__BB0_8;

	ld.shared.f32 	%f26, [_ZZ15reduce_volatileE1s];
	cvta.to.global.u64 	%rd6, %rd1;
	mul.wide.u32 	%rd7, %r1, 4;
	add.s64 	%rd8, %rd6, %rd7;
	st.global.f32 	[%rd8], %f26;

$L__BB0_8:
	ret;

}
.visible .entry scan_volatile(
	.param .u64 scan_volatile_param_0,
	.param .u64 scan_volatile_param_1
)
{
	.reg .b32 	%r<26>;
	.reg .b64 	%rd<8>;
	.shared .align 4 .b8 _ZZ13scan_volatileE1s[256];

	ld.param.u64 	%rd1, [scan_volatile_param_0];
	ld.param.u64 	%rd2, [scan_volatile_param_1];
	cvta.to.global.u64 	%rd3, %rd2;
	cvta.to.global.u64 	%rd4, %rd1;
	mov.u32 	%r1, %tid.x;
	shl.b32 	%r2, %r1, 2;
	mov.u32 	%r3, _ZZ13scan_volatileE1s;
	add.s32 	%r4, %r3, %r2;
	mov.u32 	%r5, 0;
	st.volatile.shared.u32 	[%r4], %r5;
	mov.u32 	%r6, %ctaid.x;
	shl.b32 	%r7, %r6, 5;
	add.s32 	%r8, %r7, %r1;
	mul.wide.u32 	%rd5, %r8, 4;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.u32 	%r9, [%rd6];
	st.volatile.shared.u32 	[%r4+128], %r9;
	ld.volatile.shared.u32 	%r10, [%r4+124];
	ld.volatile.shared.u32 	%r11, [%r4+128];
	add.s32 	%r12, %r11, %r10;
	st.volatile.shared.u32 	[%r4+128], %r12;
	ld.volatile.shared.u32 	%r13, [%r4+120];
	ld.volatile.shared.u32 	%r14, [%r4+128];
	add.s32 	%r15, %r14, %r13;
	st.volatile.shared.u32 	[%r4+128], %r15;
	ld.volatile.shared.u32 	%r16, [%r4+112];
	ld.volatile.shared.u32 	%r17, [%r4+128];
	add.s32 	%r18, %r17, %r16;
	st.volatile.shared.u32 	[%r4+128], %r18;
	ld.volatile.shared.u32 	%r19, [%r4+96];
	ld.volatile.shared.u32 	%r20, [%r4+128];
	add.s32 	%r21, %r20, %r19;
	st.volatile.shared.u32 	[%r4+128], %r21;
	ld.volatile.shared.u32 	%r22, [%r4+64];
	ld.volatile.shared.u32 	%r23, [%r4+128];
	add.s32 	%r24, %r23, %r22;
	st.volatile.shared.u32 	[%r4+128], %r24;
	ld.volatile.shared.u32 	%r25, [%r4+128];
	add.s64 	%rd7, %rd3, %rd5;
	st.global.u32 	[%rd7], %r25;
	ret;

}
"""


def reduce_volatile_model(x):
    s = x.reshape(-1, 256).astype(np.float32).copy()
    for stride in (128, 64):
        s[:, :stride] += s[:, stride:2 * stride]
    for off in (32, 16, 8, 4, 2, 1):
        s[:, :32] = s[:, :32] + s[:, off:off + 32]
    return s[:, 0].copy()


@pytest.mark.parametrize("blocks", [1, 5, 64])
def test_volatile_warp_reduction(blocks):
    x = RNG.uniform(-1, 1, blocks * 256).astype(np.float32)
    out = np.full(blocks + 3, np.nan, np.float32)
    ptx.compile(VOLATILE).kernel("reduce_volatile").launch((blocks,), (256,), [x, out])
    np.testing.assert_array_equal(out[:blocks], reduce_volatile_model(x))
    assert np.isnan(out[blocks:]).all()


@pytest.mark.parametrize("blocks", [1, 7, 40])
def test_volatile_warp_scan(blocks):
    a = RNG.integers(-50000, 50000, blocks * 32).astype(np.int32)
    out = np.full(blocks * 32 + 3, 0x7EADBEEF, np.int32)
    ptx.compile(VOLATILE).kernel("scan_volatile").launch((blocks,), (32,), [a, out])
    np.testing.assert_array_equal(out[:-3], np.cumsum(a.reshape(blocks, 32), axis=1, dtype=np.int32).ravel())
    assert (out[-3:] == 0x7EADBEEF).all()


def test_volatile_steps_split_loads_from_stores():
    from ptx import parse
    from ptx.passes.flatten_scopes import flatten_function
    fn = next(i for i in parse(VOLATILE).items if getattr(i, "name", "") == "scan_volatile")
    before, after = lockstep.volatile_steps(flatten_function(fn).body)
    # five steps, each with a yield before its store (after its loads) and one after it (the next step's loads,
    # and the final read of s[t], follow), and one after the store of the input (the first step's loads follow)
    assert len(before) == 5 and len(after) == 6, (before, after)


def test_volatile_warp_code_as_an_h100_computes_it():
    import json
    from pathlib import Path
    got = json.loads((Path(__file__).resolve().parent.parent / "data" / "nvidia_volatile_warp.json").read_text())
    m = ptx.compile(VOLATILE)
    x = np.array([float.fromhex(v) for v in got["x"]], np.float32)
    want = np.array([float.fromhex(v) for v in got["reduce"]], np.float32)
    out = np.full(want.size, np.nan, np.float32)
    m.kernel("reduce_volatile").launch((want.size,), (256,), [x, out])
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(reduce_volatile_model(x), want)     # the model is the GPU's order
    a, want = np.array(got["a"], np.int32), np.array(got["scan"], np.int32)
    out = np.full(want.size, -1, np.int32)
    m.kernel("scan_volatile").launch((want.size // 32,), (32,), [a, out])
    np.testing.assert_array_equal(out, want)


def test_slopes_of_registers_updated_in_a_cycle():
    """nvcc's 4x unrolled k loop steps the B pointer through %rd22..%rd24 back to %rd30 (never `add r, r, s`):
    the fixed point still finds its slope (4 bytes per tid.x); the A pointer's row part (row * K, K a parameter)
    is anything, its slope in tid.x 0; a register updated by a non-uniform step or a conditional self-update is not
    affine."""
    from ptx import parse
    from ptx.codegen.cpu import affine
    from ptx.passes.flatten_scopes import flatten_function
    fn = next(i for i in parse(PTX).items if getattr(i, "name", "") == "naive_mm")
    flat = flatten_function(fn)
    sl = affine.Slopes(flat.body, lambda r: flat.lookup(r) is not None and flat.lookup(r).space == "reg")
    # (slope in tid.x, whether the rest varies from row to row)
    assert sl.of_reg("%rd30") == (4, False)
    assert sl.of_reg("%rd22") == (4, False) and sl.of_reg("%rd24") == (4, False)
    assert sl.of_reg("%rd31") == (0, False)         # the A pointer steps by 16 bytes for every thread
    assert sl.of_reg("%rd3") == (0, True)           # row * K * 4: the same along a row
    assert sl.of_reg("%rd33") == (4, False)
    assert sl.of_reg("%f12") is None                # loaded
    src = """.version 9.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 p) {
  .reg .pred %p<3>; .reg .b32 %r<9>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %r1;
  mov.u32 %r3, %r1;
  mov.u32 %r4, %tid.y;
  mul.lo.s32 %r5, %r4, %r1;
$L:
  add.s32 %r2, %r2, %r1;
  setp.lt.u32 %p1, %r1, 5;
  @%p1 add.s32 %r3, %r3, 1;
  setp.lt.u32 %p2, %r2, 100;
  @%p2 bra $L;
  ret;
}"""
    flat = flatten_function(parse(src).items[0])
    sl = affine.Slopes(flat.body, lambda r: flat.lookup(r) is not None and flat.lookup(r).space == "reg")
    assert sl.of_reg("%r1") == (1, False) and sl.of_reg("%r4") == (0, True)
    assert sl.of_reg("%r2") is None and sl.of_reg("%r3") is None
    assert sl.of_reg("%r5") is None                 # tid.y * tid.x: the slope differs from row to row


def test_lockstep_loops_check_their_affine_registers_as_they_run(modules):
    """A region that loops back to its own yield verifies its affine registers' next values in its thread loop (over
    the block here; per row where their rest varies by row) and tells the block function (the word after the uniform
    parts), which then skips the separate check. Without rounds in one call (cpu/round_loops.py), the exit of a
    grid-stride loop stores what the loop's back edge stores, so those stores need no mask; with them, neither
    stores the loop's index: the next round starts from the block's base, and the threads still in the loop when
    the rounds end get their slots from it. Its rounds are lean (cpu/lean_rounds.py): no thread's site or check in
    the thread loop, but a test of the loop's comparison after it."""
    from ptx.codegen.cpu import lean_rounds, round_loops

    def region(ir):
        body = ir[ir.index('define internal i32 @"ru1.saxpy"'):]
        return body[:body.index("\n}\n")]

    def without(switch):
        saved = switch.ENABLED
        switch.ENABLED = False
        try:
            return _compile(True).ir
        finally:
            switch.ENABLED = saved

    ir = modules["lockstep"].ir
    body = region(ir)
    assert "%uflag = and i32" in body and "%bgood = xor i1" in body and "\nlr.fix:" in body
    assert "%un0.next" not in body and "ptr %sitep" not in body
    tracked = region(without(lean_rounds))
    assert "%un0.next = and i32" in tracked and "store i32 %site, ptr %sitep" in tracked
    block = ir[ir.index('define i32 @"k.saxpy"'):]
    assert "%fresh = phi i32" in block and "br i1 %fr.1, label %ureg.1, label %ucheck.1" in block
    assert "\nround:" in body and "\nmat.st:" in body

    def stores(region, label):
        part = region[region.index(f"\n{label}:"):]
        part = part[:part.index("br label %tx.latch")]
        return part.replace("store i32 0, ptr %sitep", "").count("store i32")

    assert stores(body, "save.1") == 0 and stores(body, "thread.exit") == 0
    body = region(without(round_loops))
    assert "\nround:" not in body and stores(body, "thread.exit") > 0


# nvcc -arch=compute_86 -ptx (CUDA 13.0) of:
# extern "C" __global__ void atomic_walk(const int *cnt, int n, unsigned *bins, int m) {
#     unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
#     int c = cnt[g % n];
#     for (int j = 0; j < c; j++) atomicAdd(&bins[(g * 7 + j * 13) % m], (unsigned)(j + 1));
# }
ATOMIC_WALK = """.version 8.0
.target sm_86
.address_size 64

.visible .entry atomic_walk(
	.param .u64 atomic_walk_param_0,
	.param .u32 atomic_walk_param_1,
	.param .u64 atomic_walk_param_2,
	.param .u32 atomic_walk_param_3
)
{
	.reg .pred 	%p<6>;
	.reg .b32 	%r<54>;
	.reg .b64 	%rd<17>;


	ld.param.u64 	%rd2, [atomic_walk_param_0];
	ld.param.u32 	%r23, [atomic_walk_param_1];
	ld.param.u64 	%rd3, [atomic_walk_param_2];
	ld.param.u32 	%r22, [atomic_walk_param_3];
	cvta.to.global.u64 	%rd1, %rd3;
	mov.u32 	%r24, %ntid.x;
	mov.u32 	%r25, %ctaid.x;
	mov.u32 	%r26, %tid.x;
	mad.lo.s32 	%r1, %r25, %r24, %r26;
	rem.u32 	%r27, %r1, %r23;
	cvta.to.global.u64 	%rd4, %rd2;
	mul.wide.u32 	%rd5, %r27, 4;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.u32 	%r2, [%rd6];
	setp.lt.s32 	%p1, %r2, 1;
	@%p1 bra 	$L__BB0_7;

	mul.lo.s32 	%r3, %r1, 7;
	and.b32  	%r53, %r2, 3;
	add.s32 	%r29, %r2, -1;
	setp.lt.u32 	%p2, %r29, 3;
	mov.u32 	%r50, 0;
	@%p2 bra 	$L__BB0_4;

	add.s32 	%r48, %r3, 39;
	sub.s32 	%r6, %r53, %r2;
	mov.u32 	%r50, 0;
	mov.u32 	%r47, %r3;

$L__BB0_3:
	rem.u32 	%r31, %r47, %r22;
	mul.wide.u32 	%rd7, %r31, 4;
	add.s64 	%rd8, %rd1, %rd7;
	add.s32 	%r32, %r50, 1;
	atom.global.add.u32 	%r33, [%rd8], %r32;
	add.s32 	%r34, %r47, 13;
	rem.u32 	%r35, %r34, %r22;
	mul.wide.u32 	%rd9, %r35, 4;
	add.s64 	%rd10, %rd1, %rd9;
	add.s32 	%r36, %r50, 2;
	atom.global.add.u32 	%r37, [%rd10], %r36;
	add.s32 	%r38, %r47, 26;
	rem.u32 	%r39, %r38, %r22;
	mul.wide.u32 	%rd11, %r39, 4;
	add.s64 	%rd12, %rd1, %rd11;
	add.s32 	%r40, %r50, 3;
	atom.global.add.u32 	%r41, [%rd12], %r40;
	rem.u32 	%r42, %r48, %r22;
	mul.wide.u32 	%rd13, %r42, 4;
	add.s64 	%rd14, %rd1, %rd13;
	add.s32 	%r50, %r50, 4;
	atom.global.add.u32 	%r43, [%rd14], %r50;
	add.s32 	%r48, %r48, 52;
	add.s32 	%r47, %r47, 52;
	add.s32 	%r44, %r6, %r50;
	setp.ne.s32 	%p3, %r44, 0;
	@%p3 bra 	$L__BB0_3;

$L__BB0_4:
	setp.eq.s32 	%p4, %r53, 0;
	@%p4 bra 	$L__BB0_7;

	add.s32 	%r52, %r50, 1;
	mad.lo.s32 	%r51, %r50, 13, %r3;

$L__BB0_6:
	.pragma "nounroll";
	rem.u32 	%r45, %r51, %r22;
	mul.wide.u32 	%rd15, %r45, 4;
	add.s64 	%rd16, %rd1, %rd15;
	atom.global.add.u32 	%r46, [%rd16], %r52;
	add.s32 	%r52, %r52, 1;
	add.s32 	%r51, %r51, 13;
	add.s32 	%r53, %r53, -1;
	setp.ne.s32 	%p5, %r53, 0;
	@%p5 bra 	$L__BB0_6;

$L__BB0_7:
	ret;

}

"""


@pytest.mark.parametrize("block,grid,maxc", [(64, 3, 40), (33, 2, 9), (256, 2, 1), (100, 1, 0), (17, 5, 70)])
def test_loops_of_atomics_run_several_iterations_a_thread(block, grid, maxc):
    """Loops that update memory only with atomics (lockstep.atomic_loop): each thread runs up to ATOMIC_STEPS
    iterations before it yields, trip counts differing per thread (the masked regions), the unrolled loop's
    remainder loop too; the grid-stride shared-memory histogram with its ragged end is test_histogram_with_barriers."""
    m = ptx.compile(ATOMIC_WALK)
    assert "%st.more" in m.ir
    nthreads = block * grid
    n = int(RNG.integers(1, 2 * nthreads))
    cnt = RNG.integers(0, maxc + 1, n).astype(np.int32)
    nb = int(RNG.integers(1, 300))
    want = np.zeros(nb, np.uint64)
    for g in range(nthreads):
        for j in range(int(cnt[g % n])):
            want[(g * 7 + j * 13) % nb] += j + 1
    bins = np.zeros(nb, np.uint32)
    m.kernel("atomic_walk").launch(grid, block, [cnt, n, bins, nb])
    assert np.array_equal(bins, want.astype(np.uint32)), f"{int(np.sum(bins != want))} of {nb} bins differ"


def test_histogram_loop_queues_its_atomics(modules):
    """The histogram's loop region queues its shared atomics (cpu/rmw_queue.py) and runs an iteration a round; its
    masked copy (threads that disagree) runs several iterations a thread instead."""
    ir = modules["lockstep"].ir
    def fn(name):
        return ir.split(f'define internal i32 @"{name}"')[1].split("\ndefine ")[0]
    assert "%qf.loop" in fn("ru3.histogram") and "%st.more" not in fn("ru3.histogram")
    assert "%st.more" in fn("rm3.histogram") and "%qf.loop" not in fn("rm3.histogram")
    assert "%st.more" not in fn("ru1.histogram")        # the loop clearing s[] stores: an iteration at a time
    assert "%st.more" not in fn("ru1.saxpy")
