"""A region that starts with a guard on threadIdx.x (`if (t < stride)` of a tree reduction, `if (t == 0)`) loops over
the threads that pass it only (ptx/codegen/cpu/thread_range.py). Each comparison and sign, the guard's sense, the
immediate on either side, blocks narrower than the guard's bound and 2-D blocks, a guard whose prelude writes a
register live after the barrier (must not narrow), and nvcc's unrolled shared-memory tree reduction: against numpy
with fresh random inputs and poisoned outputs, every element checked."""

import re

import numpy as np
import pytest

import ptx
from ptx import pipeline
from ptx.codegen.cpu.module import build_host_ir

HEAD = ".version 9.0\n.target sm_86\n.address_size 64\n\n"

# nvcc -arch=compute_86 -ptx (CUDA 13.0) of:
# extern "C" __global__ void reduce_smem(const float *in, float *out) {
#     __shared__ float s[256];
#     unsigned t = threadIdx.x;
#     s[t] = in[blockIdx.x * 256 + t];
#     __syncthreads();
#     for (unsigned stride = 128; stride > 0; stride >>= 1) {
#         if (t < stride) s[t] += s[t + stride];
#         __syncthreads();
#     }
#     if (t == 0) out[blockIdx.x] = s[0];
# }
REDUCE = HEAD + """.visible .entry reduce_smem(
	.param .u64 reduce_smem_param_0,
	.param .u64 reduce_smem_param_1
)
{
	.reg .pred 	%p<10>;
	.reg .f32 	%f<27>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<9>;
	.shared .align 4 .b8 _ZZ11reduce_smemE1s[1024];

	ld.param.u64 	%rd2, [reduce_smem_param_0];
	ld.param.u64 	%rd1, [reduce_smem_param_1];
	cvta.to.global.u64 	%rd3, %rd2;
	mov.u32 	%r1, %ctaid.x;
	shl.b32 	%r4, %r1, 8;
	mov.u32 	%r2, %tid.x;
	add.s32 	%r5, %r4, %r2;
	mul.wide.u32 	%rd4, %r5, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.f32 	%f1, [%rd5];
	shl.b32 	%r6, %r2, 2;
	mov.u32 	%r7, _ZZ11reduce_smemE1s;
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

	ld.shared.f32 	%f8, [%r3];
	ld.shared.f32 	%f9, [%r3+128];
	add.f32 	%f10, %f9, %f8;
	st.shared.f32 	[%r3], %f10;

$L__BB0_6:
	bar.sync 	0;
	setp.gt.u32 	%p4, %r2, 15;
	@%p4 bra 	$L__BB0_8;

	ld.shared.f32 	%f11, [%r3];
	ld.shared.f32 	%f12, [%r3+64];
	add.f32 	%f13, %f12, %f11;
	st.shared.f32 	[%r3], %f13;

$L__BB0_8:
	bar.sync 	0;
	setp.gt.u32 	%p5, %r2, 7;
	@%p5 bra 	$L__BB0_10;

	ld.shared.f32 	%f14, [%r3];
	ld.shared.f32 	%f15, [%r3+32];
	add.f32 	%f16, %f15, %f14;
	st.shared.f32 	[%r3], %f16;

$L__BB0_10:
	bar.sync 	0;
	setp.gt.u32 	%p6, %r2, 3;
	@%p6 bra 	$L__BB0_12;

	ld.shared.f32 	%f17, [%r3];
	ld.shared.f32 	%f18, [%r3+16];
	add.f32 	%f19, %f18, %f17;
	st.shared.f32 	[%r3], %f19;

$L__BB0_12:
	bar.sync 	0;
	setp.gt.u32 	%p7, %r2, 1;
	@%p7 bra 	$L__BB0_14;

	ld.shared.f32 	%f20, [%r3];
	ld.shared.f32 	%f21, [%r3+8];
	add.f32 	%f22, %f21, %f20;
	st.shared.f32 	[%r3], %f22;

$L__BB0_14:
	bar.sync 	0;
	setp.ne.s32 	%p8, %r2, 0;
	@%p8 bra 	$L__BB0_16;

	ld.shared.f32 	%f23, [_ZZ11reduce_smemE1s+4];
	ld.shared.f32 	%f24, [%r3];
	add.f32 	%f25, %f23, %f24;
	st.shared.f32 	[%r3], %f25;

$L__BB0_16:
	bar.sync 	0;
	@%p8 bra 	$L__BB0_18;

	cvta.to.global.u64 	%rd6, %rd1;
	ld.shared.f32 	%f26, [_ZZ11reduce_smemE1s];
	mul.wide.u32 	%rd7, %r1, 4;
	add.s64 	%rd8, %rd6, %rd7;
	st.global.f32 	[%rd8], %f26;

$L__BB0_18:
	ret;

}
"""

# Each thread stores its linear id in shared memory; after a barrier, the threads that do not take the guard add
# 1000 to their own slot (the rest only wait at the next barrier); then every thread writes its slot out.
GUARDED = HEAD + """.visible .entry guarded(.param .u64 out)
{
    .reg .u32 %r<6>;
    .reg .pred %p;
    .reg .u64 %rd<4>;
    .shared .align 4 .u32 s[1024];
    mov.u32 %r1, %tid.x;
    mov.u32 %r4, %tid.y;
    mov.u32 %r5, %ntid.x;
    mad.lo.u32 %r4, %r4, %r5, %r1;
    ld.param.u64 %rd1, [out];
    shl.b32 %r2, %r4, 2;
    mov.u32 %r3, s;
    add.u32 %r3, %r3, %r2;
    st.shared.u32 [%r3], %r4;
    bar.sync 0;
    PRELUDE
    setp.CMP.TY %p, A, B;
    @NEG%p bra SKIP;
    ld.shared.u32 %r2, [%r3];
    add.u32 %r2, %r2, 1000;
    st.shared.u32 [%r3], %r2;
SKIP:
    bar.sync 0;
    ld.shared.u32 %r2, [%r3];
    add.u32 %r2, %r2, %r5;
    cvt.u64.u32 %rd2, %r4;
    shl.b64 %rd2, %rd2, 2;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""

CMPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
        "ne": np.not_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}
UNSIGNED_ONLY = ("lo", "ls", "hi", "hs")


def narrowed(text):
    """The region functions whose thread loop the guard narrowed (their x loop ends at %xe)."""
    ir = pipeline.lower(text, build_host_ir).text
    return re.findall(r'define internal i32 @"(r\d+)\.[^"]+"[^\n]*\n(?:(?!\n}\n).)*?%xe = call i32 @llvm.umin',
                      ir, re.S)


def guarded(cmp, ty, c, tid_left=True, negated=False, prelude=""):
    a, b = ("%r1", str(c)) if tid_left else (str(c), "%r1")
    return (GUARDED.replace("CMP", cmp).replace("TY", ty).replace("A,", a + ",").replace(" B;", f" {b};")
            .replace("NEG", "!" if negated else "").replace("PRELUDE", prelude))


def expected(cmp, ty, c, tid_left, negated, bx, by, r5):
    tx = np.tile(np.arange(bx, dtype=np.int64), by)
    lin = np.arange(bx * by, dtype=np.int64)
    dt = np.int32 if ty == "s32" else np.uint32
    x, k = tx.astype(dt), np.array(c & 0xFFFFFFFF, dtype=np.uint32).astype(dt)
    p = CMPS[cmp](x, k) if tid_left else CMPS[cmp](k, x)
    runs = p if negated else ~p
    return (lin + 1000 * runs + r5).astype(np.uint32)


@pytest.mark.parametrize("ty", ["u32", "s32"])
@pytest.mark.parametrize("cmp", sorted(CMPS))
@pytest.mark.parametrize("c", [0, 1, 37, 128, -3])
@pytest.mark.parametrize("tid_left,negated", [(True, False), (False, False), (True, True)])
def test_each_guard_runs_the_threads_that_pass(cmp, ty, c, tid_left, negated):
    if ty == "s32" and cmp in UNSIGNED_ONLY:
        pytest.skip("lo/ls/hi/hs compare unsigned values only")
    text = guarded(cmp, ty, c, tid_left, negated)
    if not ((cmp == "ne" and negated) or (cmp == "eq" and not negated)) or c == 0:
        # x != C kept (or x == C skipped) is two intervals unless C is 0: the guard stays a branch
        assert narrowed(text) == ["r1"], "the guard did not narrow the region's thread loop"
    k = ptx.compile(text).kernel("guarded")
    rng = np.random.default_rng()
    for bx, by in [(256, 1), (100, 1), (16, 4), (1, 3)]:
        out = np.full(bx * by + int(rng.integers(1, 5)), 0xDEADBEEF, np.uint32)
        k.launch((int(rng.integers(1, 3)),), (bx, by, 1), [out])
        want = expected(cmp, ty, c, tid_left, negated, bx, by, bx)
        np.testing.assert_array_equal(out[:bx * by], want)
        assert (out[bx * by:] == 0xDEADBEEF).all()


def test_a_prelude_write_live_after_the_barrier_keeps_the_branch():
    # %r5 (read after the barrier) is written before the guard: a skipping thread would leave its slot stale
    text = guarded("gt", "u32", 63, prelude="add.u32 %r5, %r5, %r1;")
    assert narrowed(text) == []
    out = np.full(128, 0xDEADBEEF, np.uint32)
    ptx.compile(text).kernel("guarded").launch((1,), (128, 1, 1), [out])
    tx = np.arange(128)
    np.testing.assert_array_equal(out, tx + 1000 * (tx <= 63) + 128 + tx)


@pytest.mark.parametrize("blocks", [1, 3, 64])
def test_nvcc_tree_reduction(blocks):
    assert narrowed(REDUCE) == [f"r{k}" for k in range(1, 10)]
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, blocks * 256).astype(np.float32)
    out = np.full(blocks + 2, np.nan, np.float32)
    ptx.compile(REDUCE).kernel("reduce_smem").launch((blocks,), (256,), [x, out])
    # the tree's order of additions, in float32
    s = x.reshape(blocks, 256).copy()
    for stride in (128, 64, 32, 16, 8, 4, 2, 1):
        s[:, :stride] += s[:, stride:2 * stride]
    np.testing.assert_array_equal(out[:blocks], s[:, 0])
    assert np.isnan(out[blocks:]).all()
