"""Lazy kernels compiled for the block of their first launch (ptx/host_lazy.py): %ntid becomes a constant and a
thread loop's trip count is known. A launch of another block runs the kernel's code for any block, compiled then;
a kernel that reaches another kernel (a device-side launch's copy) is compiled for any block. Results of a tiled
matrix product against numpy, for the first block and others, fresh random inputs, poisoned outputs."""

import numpy as np
import pytest

import ptx
from ptx import host_lazy, parse
from ptx.codegen.cpu import module as cpu_module
from ptxkit import HEADER, poison, rng  # noqa: F401  (rng: the fixture)

# C[row, col] = sum_k A[row, k] * B[k, col] for n x n matrices, through T x T shared tiles where T = blockDim.x
# (= blockDim.y): each thread loads one element of each tile, then adds T products
TILED = HEADER + r"""
.visible .entry tiled(.param .u64 A, .param .u64 B, .param .u64 C, .param .u32 n)
{
  .reg .pred %p<3>; .reg .b32 %r<30>; .reg .f32 %f<6>; .reg .b64 %rd<16>;
  .shared .align 4 .b8 As[4096]; .shared .align 4 .b8 Bs[4096];
  ld.param.u64 %rd1, [A]; ld.param.u64 %rd2, [B]; ld.param.u64 %rd3, [C]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %tid.y; mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %ctaid.x; mov.u32 %r6, %ctaid.y;
  mad.lo.s32 %r7, %r6, %r4, %r3;        // row
  mad.lo.s32 %r8, %r5, %r4, %r2;        // col
  mov.f32 %f1, 0f00000000;
  mov.u32 %r9, 0;                       // t
  mov.u32 %r20, As; mov.u32 %r21, Bs;
  mad.lo.s32 %r22, %r3, %r4, %r2;       // ty * T + tx
  shl.b32 %r22, %r22, 2;
$L_tile:
  add.s32 %r10, %r9, %r2;               // A[row, t + tx]
  mad.lo.s32 %r11, %r7, %r1, %r10;
  mul.wide.s32 %rd4, %r11, 4; add.s64 %rd5, %rd1, %rd4; ld.global.f32 %f2, [%rd5];
  add.s32 %r23, %r20, %r22; st.shared.f32 [%r23], %f2;
  add.s32 %r12, %r9, %r3;               // B[t + ty, col]
  mad.lo.s32 %r13, %r12, %r1, %r8;
  mul.wide.s32 %rd6, %r13, 4; add.s64 %rd7, %rd2, %rd6; ld.global.f32 %f3, [%rd7];
  add.s32 %r24, %r21, %r22; st.shared.f32 [%r24], %f3;
  bar.sync 0;
  mov.u32 %r14, 0;                      // k
$L_k:
  mad.lo.s32 %r15, %r3, %r4, %r14;      // As[ty, k]
  shl.b32 %r15, %r15, 2; add.s32 %r15, %r15, %r20; ld.shared.f32 %f4, [%r15];
  mad.lo.s32 %r16, %r14, %r4, %r2;      // Bs[k, tx]
  shl.b32 %r16, %r16, 2; add.s32 %r16, %r16, %r21; ld.shared.f32 %f5, [%r16];
  fma.rn.f32 %f1, %f4, %f5, %f1;
  add.s32 %r14, %r14, 1;
  setp.lt.u32 %p1, %r14, %r4;
  @%p1 bra $L_k;
  bar.sync 0;
  add.s32 %r9, %r9, %r4;
  setp.lt.u32 %p2, %r9, %r1;
  @%p2 bra $L_tile;
  mad.lo.s32 %r17, %r7, %r1, %r8;
  mul.wide.s32 %rd8, %r17, 4; add.s64 %rd9, %rd3, %rd8; st.global.f32 [%rd9], %f1;
  ret;
}
"""

# a kernel that takes another's address (what a device-side launch does) and the other
REACHES = HEADER + r"""
.visible .entry child(.param .u64 out) { ret; }
.visible .entry parent(.param .u64 out)
{
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out];
  mov.u64 %rd2, child;
  st.global.u64 [%rd1], %rd2;
  ret;
}
"""


def test_the_block_is_a_constant():
    spec = cpu_module.build_host_ir(parse(TILED), block=(16, 16, 1)).text
    generic = cpu_module.build_host_ir(parse(TILED)).text
    assert "icmp ult i32 %tx.next, 16" in spec
    assert "icmp ult i32 %tx.next, 16" not in generic


def test_a_kernel_reaching_another_is_for_any_block():
    mod = parse(REACHES)
    assert not host_lazy.specializable(host_lazy.kernel_module(mod, "parent"), "parent")
    assert host_lazy.specializable(host_lazy.kernel_module(mod, "child"), "child")


def _run(kernel, rng, n, t):
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = poison((n, n), np.float32, rng)
    kernel.launch((n // t, n // t, 1), (t, t, 1), [a, b, c, n])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("first,others", [(16, (8, 4, 16, 32)), (8, (16, 8, 2))])
def test_first_block_then_others(rng, tmp_path, first, others):
    mod = ptx.compile(TILED, lazy=True, cache_dir=str(tmp_path))
    k = mod.kernel("tiled")
    _run(k, rng, 64, first)
    assert k.spec_block == (first, first, 1)
    for t in others:
        _run(k, rng, 64, t)
    assert k.spec_block == (first, first, 1)
    assert k.for_block((first, first, 1)) is k
    generic = k.for_block((others[0], others[0], 1))
    assert generic is not k and generic.spec_block is None
    # a second module from the same cache: the first block's code is a hit
    mod2 = ptx.compile(TILED, lazy=True, cache_dir=str(tmp_path))
    k2 = mod2.kernel("tiled")
    _run(k2, rng, 32, first)
    assert k2.spec_block == (first, first, 1) and k2.compile_hit


def test_switched_off(rng, tmp_path, monkeypatch):
    monkeypatch.setattr(host_lazy, "SPECIALIZE", False)
    k = ptx.compile(TILED + "\n// for any block\n", lazy=True, cache_dir=str(tmp_path)).kernel("tiled")
    _run(k, rng, 32, 16)
    assert k.spec_block is None
    _run(k, rng, 32, 8)
