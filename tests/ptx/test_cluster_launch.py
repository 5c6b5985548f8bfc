"""Thread-block clusters of several CTAs on the CPU executor: the special registers, mapa/getctarank/isspacep/
cvta of every CTA against what an H100 answered (tests/data/nvidia_cluster_answers.json, from
scripts/nvidia_cluster_probe.cu), barrier.cluster between all threads of all CTAs of a cluster, and
distributed shared memory (ld/st/atom.shared::cluster through mapa'd addresses, generic loads through the
generic mapa). Fresh random data each run, poisoned outputs, every element checked."""

import json
from pathlib import Path

import numpy as np
import pytest

import ptx
import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

HEADER = ".version 8.7\n.target sm_90\n.address_size 64\n"
ANSWERS = json.loads((Path(__file__).resolve().parent.parent / "data" / "nvidia_cluster_answers.json").read_text())
NREGS = 24


def compile_kernel(body, name="k"):
    return ptx.compile(HEADER + body, target="host").kernel(name)


_SREGS = ["%ctaid.x", "%ctaid.y", "%ctaid.z", "%clusterid.x", "%clusterid.y", "%clusterid.z", "%nclusterid.x",
          "%nclusterid.y", "%nclusterid.z", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z",
          "%cluster_nctaid.x", "%cluster_nctaid.y", "%cluster_nctaid.z", "%cluster_ctarank", "%cluster_nctarank"]


def _probe_ptx():
    lines = []
    for i, r in enumerate(_SREGS):
        lines.append(f"  mov.u32 %v, {r};\n  st.global.u32 [%rd3+{4 * i}], %v;")
    regs = "\n".join(lines)
    return r"""
.visible .entry k(.param .u64 out)
{
  .shared .align 16 .b32 sm[64];
  .reg .pred %p<8>;
  .reg .b32 %v, %r<32>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra $SYNC;
  // linear CTA index
  mov.u32 %r2, %ctaid.z;
  mov.u32 %r3, %nctaid.y;
  mov.u32 %r4, %ctaid.y;
  mad.lo.u32 %r2, %r2, %r3, %r4;
  mov.u32 %r3, %nctaid.x;
  mov.u32 %r4, %ctaid.x;
  mad.lo.u32 %r2, %r2, %r3, %r4;
  mul.wide.u32 %rd2, %r2, 96;
  add.s64 %rd3, %rd1, %rd2;
""" + regs + r"""
  mov.pred %p2, %is_explicit_cluster;
  selp.u32 %v, 1, 0, %p2;
  st.global.u32 [%rd3+68], %v;
  mov.u32 %r5, sm;
  add.u32 %r5, %r5, 12;
  mov.u32 %r6, %cluster_ctarank;
  mov.u32 %r7, %cluster_nctarank;
  add.u32 %r8, %r6, 1;
  rem.u32 %r8, %r8, %r7;
  mapa.shared::cluster.u32 %r9, %r5, %r6;
  mapa.shared::cluster.u32 %r10, %r5, %r8;
  getctarank.shared::cluster.u32 %r11, %r9;
  getctarank.shared::cluster.u32 %r12, %r10;
  setp.eq.u32 %p3, %r9, %r5;
  selp.u32 %v, 1, 0, %p3;
  st.global.u32 [%rd3+72], %v;
  st.global.u32 [%rd3+76], %r11;
  st.global.u32 [%rd3+80], %r12;
  cvta.shared.u64 %rd4, sm;
  add.s64 %rd4, %rd4, 12;
  mapa.u64 %rd5, %rd4, %r6;
  mapa.u64 %rd6, %rd4, %r8;
  setp.eq.u64 %p3, %rd5, %rd4;
  selp.u32 %r13, 1, 0, %p3;
  isspacep.shared::cta %p3, %rd4;
  selp.u32 %r14, 2, 0, %p3;
  isspacep.shared::cluster %p3, %rd4;
  selp.u32 %r15, 4, 0, %p3;
  isspacep.shared::cluster %p3, %rd6;
  selp.u32 %r16, 8, 0, %p3;
  isspacep.shared::cta %p3, %rd6;
  selp.u32 %r17, 16, 0, %p3;
  setp.ne.u64 %p3, %rd6, %rd4;
  setp.eq.u32 %p4, %r7, 1;
  or.pred %p3, %p3, %p4;
  selp.u32 %r18, 32, 0, %p3;
  or.b32 %r13, %r13, %r14;
  or.b32 %r13, %r13, %r15;
  or.b32 %r13, %r13, %r16;
  or.b32 %r13, %r13, %r17;
  or.b32 %r13, %r13, %r18;
  st.global.u32 [%rd3+84], %r13;
  cvta.to.shared::cluster.u64 %rd7, %rd6;
  cvt.u32.u64 %r19, %rd7;
  setp.eq.u32 %p3, %r19, %r10;
  selp.u32 %v, 1, 0, %p3;
  st.global.u32 [%rd3+88], %v;
  getctarank.u64 %r20, %rd6;
  st.global.u32 [%rd3+92], %r20;
$SYNC:
  barrier.cluster.arrive.aligned;
  barrier.cluster.wait.aligned;
  ret;
}
"""


@pytest.mark.parametrize("shape", ["x2", "2x2x2", "x3", "y2", "explicit1", "no_attribute"])
def test_special_registers_match_nvidia(shape, rng):
    ans = ANSWERS["regs"][shape]
    grid, cluster = tuple(ans["grid"]), tuple(ans["cluster"])
    k = compile_kernel(_probe_ptx())
    n = grid[0] * grid[1] * grid[2]
    out = K.poison((n, NREGS), np.uint32, rng)
    k.launch(grid, (32,), [out], cluster=None if cluster[0] < 0 else cluster)
    want = np.array(ans["ctas"], dtype=np.uint32)
    assert np.array_equal(out, want), (out, want)


RING = r"""
.visible .entry k(.param .u64 in, .param .u64 out, .param .u64 counts)
{
  .shared .align 16 .b32 buf[256];
  .shared .align 4 .b32 total;
  .reg .pred %p<4>;
  .reg .b32 %r<32>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  ld.param.u64 %rd10, [counts];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;          // global thread index
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r5, [%rd4];
  shl.b32 %r6, %r1, 2;
  mov.u32 %r7, buf;
  add.u32 %r7, %r7, %r6;
  st.shared.u32 [%r7], %r5;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra $A;
  st.shared.u32 [total], 0;
$A:
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  mov.u32 %r8, %cluster_ctarank;
  mov.u32 %r9, %cluster_nctarank;
  add.u32 %r10, %r8, 1;
  rem.u32 %r10, %r10, %r9;                // the next CTA of the cluster
  mapa.shared::cluster.u32 %r11, %r7, %r10;
  ld.shared::cluster.u32 %r12, [%r11];    // its word for this thread
  cvta.shared.u64 %rd5, buf;
  cvt.u64.u32 %rd6, %r6;
  add.s64 %rd5, %rd5, %rd6;
  sub.u32 %r13, %r9, 1;
  add.u32 %r13, %r8, %r13;
  rem.u32 %r13, %r13, %r9;                // the previous CTA
  mapa.u64 %rd7, %rd5, %r13;
  ld.u32 %r14, [%rd7];                    // its word, generically
  mapa.shared::cluster.u32 %r15, total, 0;
  atom.shared::cluster.add.u32 %r16, [%r15], %r5;   // every thread's word into rank 0's total
  red.shared::cluster.add.u32 [%r15], 1;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  mul.wide.u32 %rd8, %r4, 8;
  add.s64 %rd8, %rd2, %rd8;
  st.global.v2.u32 [%rd8], {%r12, %r14};
  setp.ne.u32 %p1, %r1, 0;
  setp.ne.u32 %p2, %r8, 0;
  or.pred %p1, %p1, %p2;
  @%p1 bra $END;
  ld.shared.u32 %r17, [total];
  mov.u32 %r18, %clusterid.x;
  mul.wide.u32 %rd9, %r18, 4;
  add.s64 %rd9, %rd10, %rd9;
  st.global.u32 [%rd9], %r17;
$END:
  ret;
}
"""


@pytest.mark.parametrize("cooperative", [False, True])
@pytest.mark.parametrize("csize", [2, 4, 8, 16])
def test_ring_exchange_and_cluster_atomics(csize, cooperative, rng):
    """cooperative: the clusters' CTAs run as the fibers of a cooperative launch (all blocks co-resident)."""
    k = compile_kernel(RING)
    block = int(rng.integers(1, 9)) * 32
    nclusters = int(rng.integers(1, 4))
    grid = csize * nclusters
    x = rng.integers(0, 2**20, grid * block, dtype=np.uint64).astype(np.uint32)
    out = K.poison((grid * block, 2), np.uint32, rng)
    counts = K.poison(nclusters, np.uint32, rng)
    k.launch((grid,), (block,), [x, out, counts], cluster=(csize,), cooperative=cooperative)
    xs = x.reshape(nclusters, csize, block)
    nxt = np.roll(xs, -1, axis=1).reshape(-1)
    prv = np.roll(xs, 1, axis=1).reshape(-1)
    assert np.array_equal(out[:, 0], nxt)
    assert np.array_equal(out[:, 1], prv)
    want = (xs.astype(np.uint64).sum(axis=(1, 2)) + csize * block) % 2**32
    assert np.array_equal(counts, want.astype(np.uint32))


@pytest.mark.parametrize("cooperative", [False, True])
def test_cluster_barrier_orders_all_ctas(cooperative, rng):
    """Each CTA publishes a round number in its shared memory, then every CTA checks all the others' after a
    cluster barrier, over several rounds: a CTA that ran ahead would be seen."""
    k = compile_kernel(r"""
.visible .entry k(.param .u64 out, .param .u32 rounds)
{
  .shared .align 4 .b32 round;
  .reg .pred %p<4>;
  .reg .b32 %r<32>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [rounds];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %cluster_nctarank;
  mov.u32 %r4, 0;                    // round
  mov.u32 %r5, 0;                    // mismatches seen by this thread
$LOOP:
  setp.ne.u32 %p1, %r2, 0;
  @!%p1 st.shared.u32 [round], %r4;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  rem.u32 %r6, %r2, %r3;             // a CTA to look at
  mapa.shared::cluster.u32 %r7, round, %r6;
  ld.shared::cluster.u32 %r8, [%r7];
  setp.ne.u32 %p2, %r8, %r4;
  selp.u32 %r9, 1, 0, %p2;
  add.u32 %r5, %r5, %r9;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  add.u32 %r4, %r4, 1;
  setp.lt.u32 %p3, %r4, %r1;
  @%p3 bra $LOOP;
  mov.u32 %r10, %ctaid.x;
  mov.u32 %r11, %ntid.x;
  mad.lo.u32 %r12, %r10, %r11, %r2;
  mul.wide.u32 %rd2, %r12, 4;
  add.s64 %rd2, %rd1, %rd2;
  st.global.u32 [%rd2], %r5;
  ret;
}
""")
    csize = int(rng.integers(2, 9))
    grid, block = csize * 3, 64
    out = K.poison(grid * block, np.uint32, rng)
    k.launch((grid,), (block,), [out, 20], cluster=(csize,), cooperative=cooperative)
    assert np.array_equal(out, np.zeros(grid * block, np.uint32))


def test_mapa_past_the_cluster_traps():
    k = compile_kernel(r"""
.visible .entry k(.param .u32 rank)
{
  .shared .b32 buf[4];
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [rank];
  mapa.shared::cluster.u32 %r2, buf, %r1;
  st.shared::cluster.u32 [%r2], 7;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  ret;
}
""")
    k.launch((4,), (1,), [3], cluster=(4,))
    with pytest.raises(ptx.KernelFault):
        k.launch((4,), (1,), [4], cluster=(4,))


def test_runtime_refuses_bad_cluster_shapes():
    from ptx import runtime
    k = compile_kernel(".visible .entry k()\n{\n  ret;\n}\n")
    with pytest.raises(ValueError, match="refused by the runtime"):   # the grid is no multiple of the cluster
        k.launch_raw((3,), (1,), bytes(8), 0, runtime.cluster_flags((2,)))
    with pytest.raises(ValueError):
        runtime.cluster_flags((17,))
