"""Interleaved launches (ptxrt.h PTXRT_HINT_INTERLEAVE): a kernel whose blocks run rounds of a loop (a grid-stride
loop) may run up to 8 consecutive blocks at once on a worker, a few rounds of each in turn; which way a launch runs is
the runtime's choice (a kernel's first 4 launches interleave, the 5th does not, the 6th and 7th do, the 8th does not,
then the faster way).
Each launch's results are checked whichever way it ran; the order in which blocks logged their rounds shows the first
launch interleaved; a fault in one block of an interleaved launch is reported for that block and the kernel still
runs afterwards."""

import ctypes

import numpy as np
import pytest

import ptx
from ptx import runtime
from ptx.errors import KernelFault

# nvcc -arch=compute_86 -ptx (CUDA 13.0) of:
# extern "C" __global__ void stride_log(const float *x, float *y, int n, float a, unsigned *counter, unsigned *log) {
#     int r = 0;
#     for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x, r++) {
#         y[i] = a * x[i] + y[i];
#         log[atomicAdd(counter, 1u)] = blockIdx.x * 65536u + r;
#     }
# }
# extern "C" __global__ void stride_fault(float *y, int n, int bad_block, int bad_round) {
#     int r = 0;
#     for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x, r++) {
#         float *p = (blockIdx.x == bad_block && r == bad_round) ? (float *)16 : y + i;
#         *p += 1.0f;
#     }
# }
NVCC_PTX = r""".version 9.0
.target sm_86
.address_size 64

	// .globl	stride_log

.visible .entry stride_log(
	.param .u64 stride_log_param_0,
	.param .u64 stride_log_param_1,
	.param .u32 stride_log_param_2,
	.param .f32 stride_log_param_3,
	.param .u64 stride_log_param_4,
	.param .u64 stride_log_param_5
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<18>;
	.reg .b64 	%rd<14>;


	ld.param.u64 	%rd5, [stride_log_param_0];
	ld.param.u64 	%rd6, [stride_log_param_1];
	ld.param.u32 	%r10, [stride_log_param_2];
	ld.param.f32 	%f1, [stride_log_param_3];
	ld.param.u64 	%rd7, [stride_log_param_4];
	ld.param.u64 	%rd8, [stride_log_param_5];
	mov.u32 	%r1, %ntid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r11, %tid.x;
	mad.lo.s32 	%r16, %r2, %r1, %r11;
	setp.ge.s32 	%p1, %r16, %r10;
	@%p1 bra 	$L__BB0_3;

	shl.b32 	%r4, %r2, 16;
	mov.u32 	%r13, %nctaid.x;
	mul.lo.s32 	%r5, %r1, %r13;
	cvta.to.global.u64 	%rd1, %rd5;
	cvta.to.global.u64 	%rd2, %rd6;
	cvta.to.global.u64 	%rd3, %rd7;
	cvta.to.global.u64 	%rd4, %rd8;
	mov.u32 	%r17, 0;

$L__BB0_2:
	mul.wide.s32 	%rd9, %r16, 4;
	add.s64 	%rd10, %rd1, %rd9;
	ld.global.f32 	%f2, [%rd10];
	add.s64 	%rd11, %rd2, %rd9;
	ld.global.f32 	%f3, [%rd11];
	fma.rn.f32 	%f4, %f2, %f1, %f3;
	st.global.f32 	[%rd11], %f4;
	atom.global.add.u32 	%r14, [%rd3], 1;
	mul.wide.u32 	%rd12, %r14, 4;
	add.s64 	%rd13, %rd4, %rd12;
	add.s32 	%r15, %r17, %r4;
	st.global.u32 	[%rd13], %r15;
	add.s32 	%r17, %r17, 1;
	add.s32 	%r16, %r16, %r5;
	setp.lt.s32 	%p2, %r16, %r10;
	@%p2 bra 	$L__BB0_2;

$L__BB0_3:
	ret;

}
	// .globl	stride_fault
.visible .entry stride_fault(
	.param .u64 stride_fault_param_0,
	.param .u32 stride_fault_param_1,
	.param .u32 stride_fault_param_2,
	.param .u32 stride_fault_param_3
)
{
	.reg .pred 	%p<6>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<20>;
	.reg .b64 	%rd<10>;


	ld.param.u64 	%rd4, [stride_fault_param_0];
	ld.param.u32 	%r11, [stride_fault_param_1];
	ld.param.u32 	%r12, [stride_fault_param_2];
	ld.param.u32 	%r13, [stride_fault_param_3];
	mov.u32 	%r1, %ntid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r14, %tid.x;
	mad.lo.s32 	%r17, %r2, %r1, %r14;
	setp.ge.s32 	%p1, %r17, %r11;
	@%p1 bra 	$L__BB1_8;

	setp.eq.s32 	%p2, %r2, %r12;
	mov.u32 	%r15, %nctaid.x;
	mul.lo.s32 	%r4, %r1, %r15;
	@%p2 bra 	$L__BB1_4;
	bra.uni 	$L__BB1_2;

$L__BB1_4:
	mov.u32 	%r19, 0;

$L__BB1_5:
	setp.eq.s32 	%p4, %r19, %r13;
	mov.u64 	%rd9, 16;
	@%p4 bra 	$L__BB1_7;

	mul.wide.s32 	%rd8, %r17, 4;
	add.s64 	%rd9, %rd4, %rd8;

$L__BB1_7:
	ld.f32 	%f3, [%rd9];
	add.f32 	%f4, %f3, 0f3F800000;
	st.f32 	[%rd9], %f4;
	add.s32 	%r19, %r19, 1;
	add.s32 	%r17, %r17, %r4;
	setp.lt.s32 	%p5, %r17, %r11;
	@%p5 bra 	$L__BB1_5;
	bra.uni 	$L__BB1_8;

$L__BB1_2:
	cvta.to.global.u64 	%rd1, %rd4;

$L__BB1_3:
	mul.wide.s32 	%rd5, %r17, 4;
	add.s64 	%rd6, %rd1, %rd5;
	ld.global.f32 	%f1, [%rd6];
	add.f32 	%f2, %f1, 0f3F800000;
	st.global.f32 	[%rd6], %f2;
	add.s32 	%r17, %r17, %r4;
	setp.lt.s32 	%p3, %r17, %r11;
	@%p3 bra 	$L__BB1_3;

$L__BB1_8:
	ret;

}
"""

BLOCK = 128
ROUNDS = 11     # past a few rotations (every 4 rounds), with a partial last group of rounds
RNG = np.random.default_rng()


def _workers() -> int:
    lib = runtime.library()
    lib.ptx_rt_num_workers.restype = ctypes.c_uint32
    return int(lib.ptx_rt_num_workers())


def test_grid_stride_kernels_are_hinted():
    mod = ptx.compile(NVCC_PTX)
    for name in ("stride_log", "stride_fault"):
        assert mod.kernel(name).interleave, name
        body = mod.ir[mod.ir.index(f'define internal i32 @"ru1.{name}"'):]
        assert "call void @ptx_rt_rotate(ptr %W)" in body[:body.index("\n}\n")], name


def _blocks_overlap(log, grid):
    """Per even block 2k: whether block 2k + 1 logged a round before block 2k logged its last."""
    blocks = log >> 16
    first = np.array([np.flatnonzero(blocks == b)[0] for b in range(grid)])
    last = np.array([np.flatnonzero(blocks == b)[-1] for b in range(grid)])
    return first[1::2] < last[0::2]


def test_results_and_round_order():
    mod = ptx.compile(NVCC_PTX + "\n// interleave: results and order\n")    # a fresh kernel: its launches counted from 0
    k = mod.kernel("stride_log")
    workers = _workers()
    grid = 16 * workers         # plain launches take 2 blocks a chunk, interleaved ones 8 a group
    n = grid * BLOCK * ROUNDS - int(RNG.integers(0, BLOCK * grid // 2))
    overlaps = []
    for launch in range(5):
        x = RNG.uniform(-1, 1, n).astype(np.float32)
        y0 = RNG.uniform(-1, 1, n).astype(np.float32)
        y = y0.copy()
        counter = np.zeros(1, np.uint32)
        log = np.full(n, 0xFFFFFFFF, np.uint32)
        k.launch(grid, BLOCK, [x, y, n, 2.0, counter, log])
        np.testing.assert_array_equal(y, np.float32(2) * x + y0, err_msg=f"launch {launch}")
        assert counter[0] == n
        i = np.arange(n)
        want = np.sort(((i // BLOCK) % grid) * 65536 + i // (BLOCK * grid)).astype(np.uint32)
        np.testing.assert_array_equal(np.sort(log), want, err_msg=f"launch {launch}: the rounds logged")
        overlaps.append(_blocks_overlap(log, grid))
    # the first launch interleaves: every pair of blocks of a group alternates
    assert overlaps[0].all(), overlaps[0]
    # the fifth does not: a chunk's two blocks run one after the other
    assert not overlaps[4].any(), overlaps[4]


def test_fault_in_an_interleaved_launch():
    mod = ptx.compile(NVCC_PTX + "\n// interleave: a fault\n")
    k = mod.kernel("stride_fault")
    grid = 16 * _workers()
    n = grid * BLOCK * ROUNDS
    bad = int(RNG.integers(0, grid))
    y = np.zeros(n, np.float32)
    with pytest.raises(KernelFault) as ei:
        k.launch(grid, BLOCK, [y, n, bad, 6])       # the first launch: interleaved
    msg = str(ei.value)
    assert ei.value.kind == "fault" and "0x10 " in msg, msg
    assert f"({bad},0,0)" in msg or "one of blocks" in msg, msg
    for launch in range(8):                         # both ways (devlaunch.c's probes), then the faster
        y = RNG.uniform(-1, 1, n).astype(np.float32)
        want = y + np.float32(1)
        k.launch(grid, BLOCK, [y, n, -1, 0])
        np.testing.assert_array_equal(y, want, err_msg=f"launch {launch}")
