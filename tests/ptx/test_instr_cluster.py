"""Thread-block cluster instructions on the CPU executor, where every CTA is a cluster of one: mapa (register,
variable and variable+offset forms, shared::cluster and generic), getctarank, ld/st.shared::cluster through a
mapa'd address, cvta with .shared::cta / .shared::cluster, isspacep.shared::cluster, barrier.cluster.arrive/
wait between the block's threads, and clusterlaunchcontrol (try_cancel completes its mbarrier transaction and
reports no canceled cluster). Fresh random data each run, poisoned outputs, every element checked."""

import numpy as np
import pytest

import ptx
import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

HEADER = ".version 8.7\n.target sm_100\n.address_size 64\n"


def compile_kernel(body, name="k"):
    return ptx.compile(HEADER + body, target="host").kernel(name)


MAPA = r"""
.visible .entry k(.param .u64 in, .param .u64 out, .param .u32 n)
{
  .shared .align 16 .b32 buf[256];
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r2, [%rd4];
  // this thread's word: its shared::cta address, mapped into the cluster's CTA 0 (this one)
  mov.u32 %r3, buf;
  shl.b32 %r4, %r1, 2;
  add.u32 %r5, %r3, %r4;
  mov.u32 %r12, %cluster_ctarank;
  mapa.shared::cluster.u32 %r6, %r5, %r12;
  st.shared::cluster.u32 [%r6], %r2;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  // the neighbour's word through the variable form (variable + offset), then the generic form
  add.u32 %r7, %r1, 1;
  and.b32 %r7, %r7, 255;
  shl.b32 %r8, %r7, 2;
  mapa.shared::cluster.u32 %r9, buf+4, 0;
  sub.u32 %r9, %r9, 4;
  add.u32 %r9, %r9, %r8;
  ld.shared::cluster.u32 %r10, [%r9];
  cvta.shared::cta.u64 %rd5, buf;
  cvt.u64.u32 %rd6, %r4;
  add.s64 %rd5, %rd5, %rd6;
  mapa.u64 %rd7, %rd5, 0;
  ld.u32 %r11, [%rd7];
  getctarank.shared::cluster.u32 %r13, %r6;
  isspacep.shared::cluster %p1, %rd7;
  cvta.to.shared::cluster.u64 %rd8, %rd7;
  cvt.u32.u64 %r14, %rd8;
  setp.eq.u32 %p2, %r14, %r5;
  and.pred %p1, %p1, %p2;
  selp.u32 %r15, 1, 0, %p1;
  mul.wide.u32 %rd9, %r1, 16;
  add.s64 %rd9, %rd2, %rd9;
  st.global.v4.u32 [%rd9], {%r10, %r11, %r13, %r15};
  ret;
}
"""


def test_mapa_and_cluster_shared_memory(rng):
    k = compile_kernel(MAPA)
    n = 256
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = K.poison((n, 4), np.uint32, rng)
    k.launch((1,), (n,), [x, out, n])
    assert np.array_equal(out[:, 0], np.roll(x, -1))      # the neighbour's word, stored by the other thread
    assert np.array_equal(out[:, 1], x)                    # its own word through the generic mapa
    assert np.array_equal(out[:, 2], np.zeros(n, np.uint32))   # rank 0
    assert np.array_equal(out[:, 3], np.ones(n, np.uint32))    # shared, and back to the same window address


def test_mapa_to_another_rank_traps():
    k = compile_kernel(r"""
.visible .entry k(.param .u32 rank)
{
  .shared .b32 buf[4];
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [rank];
  mapa.shared::cluster.u32 %r2, buf, %r1;
  st.shared::cluster.u32 [%r2], 7;
  ret;
}
""")
    k.launch((1,), (1,), [0])
    with pytest.raises(ptx.KernelFault):
        k.launch((1,), (1,), [1])


CANCEL = r"""
.visible .entry k(.param .u64 out)
{
  .shared .align 16 .b8 resp[16];
  .shared .align 8 .b64 bar;
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .reg .b128 %q;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra $WAIT;
  st.shared.v4.u32 [resp], {-1, -1, -1, -1};
  mbarrier.init.shared::cta.b64 [bar], 1;
  mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [bar], 16;
  clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [resp], [bar];
$WAIT:
  bar.sync 0;
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
  ld.shared.b128 %q, [resp];
  clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p3, %q;
  selp.u32 %r2, 1, 0, %p2;
  selp.u32 %r3, 1, 0, %p3;
  mul.wide.u32 %rd3, %r1, 8;
  add.s64 %rd3, %rd1, %rd3;
  st.global.v2.u32 [%rd3], {%r2, %r3};
  ret;
}
"""


def test_try_cancel_completes_and_cancels_nothing(rng):
    k = compile_kernel(CANCEL)
    n = int(rng.integers(1, 128))
    out = K.poison((n, 2), np.uint32, rng)
    k.launch((int(rng.integers(1, 5)),), (n,), [out])
    assert np.array_equal(out[:, 0], np.ones(n, np.uint32))     # the response's 16 bytes completed the phase
    assert np.array_equal(out[:, 1], np.zeros(n, np.uint32))    # no cluster was canceled
