"""A 32-bit register address plus an immediate offset wraps at 2^32, as the GPU's 32-bit .shared window
does: [%r+off] with %r just below 2^32 (an array's address minus a scaled index, as cuRAND's MT19937
jump-ahead computes) reaches the array. Fresh random data, poisoned output, every element checked."""

import numpy as np

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

KERNEL = r"""
.visible .entry wrap(.param .u64 in, .param .u64 out, .param .u32 k)
{
  .shared .align 4 .b32 buf[1024];
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [k];
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd3, %r2, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r3, [%rd4];
  mov.u32 %r4, buf;
  shl.b32 %r5, %r2, 2;
  add.u32 %r6, %r4, %r5;
  st.shared.u32 [%r6], %r3;
  bar.sync 0;
  // buf - 4k (below zero when buf is at the window's start) + 4 * (tid ^ 1), then + 4k as the offset
  shl.b32 %r7, %r1, 2;
  sub.u32 %r8, %r4, %r7;
  xor.b32 %r9, %r2, 1;
  shl.b32 %r10, %r9, 2;
  add.u32 %r11, %r8, %r10;
  ld.shared.u32 %r12, [%r11+4096];
  add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r12;
  ret;
}
"""


def test_32bit_register_plus_offset_wraps(rng):
    k = K.compile_text(K.module(KERNEL)).kernel("wrap")
    n = 256
    x = K.rand_ints(rng, "u32", n)
    out = K.poison((n,), np.uint32, rng)
    K.launch(k, (1,), (n,), [x, out, 1024])     # 4k = 4096: the register is buf - 4096
    assert np.array_equal(out, x[np.arange(n) ^ 1])
