"""Special registers: %tid/%ntid/%ctaid/%nctaid in 3-D launches, %laneid, %warpid/%nwarpid, %lanemask_*,
%clock/%clock64 (monotonic), %globaltimer, %smid/%nsmid, %dynamic_smem_size.
References checked on an NVIDIA H200 (driver 580, PTX JIT for sm_86), 2026-11-29: every test here passed
with PTXKIT_BACKEND=cuda (see ptxkit.py); the corrections that hardware forced are noted where they apply.
Written after the hardware runs, so not run there: test_grid_wider_than_16_bits.
"""

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

# the numpy references divide by zero and overflow on purpose (inf/NaN inputs)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

KS = K.KernelSet()
FIELDS = ["tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z", "ctaid.x", "ctaid.y", "ctaid.z",
          "nctaid.x", "nctaid.y", "nctaid.z", "laneid", "warpid", "nwarpid", "lanemask_eq", "lanemask_lt",
          "lanemask_le", "lanemask_gt", "lanemask_ge", "dynamic_smem_size", "smid", "nsmid"]
NF = len(FIELDS)

_movs = "\n".join(f"mov.u32 %v, %{f};\nst.global.u32 [%p+{4 * k}], %v;" for k, f in enumerate(FIELDS))
KS.add("sregs", f"""
.visible .entry sregs(.param .u64 out)
{{
.reg .u32 %v, %lin, %tx, %ty, %tz, %nx, %ny, %cx, %cy, %cz, %gx, %gy, %blk, %bs;
.reg .u64 %p, %off;
mov.u32 %tx, %tid.x; mov.u32 %ty, %tid.y; mov.u32 %tz, %tid.z;
mov.u32 %nx, %ntid.x; mov.u32 %ny, %ntid.y;
mov.u32 %cx, %ctaid.x; mov.u32 %cy, %ctaid.y; mov.u32 %cz, %ctaid.z;
mov.u32 %gx, %nctaid.x; mov.u32 %gy, %nctaid.y;
mad.lo.u32 %lin, %tz, %ny, %ty;
mad.lo.u32 %lin, %lin, %nx, %tx;
mad.lo.u32 %blk, %cz, %gy, %cy;
mad.lo.u32 %blk, %blk, %gx, %cx;
mul.lo.u32 %bs, %nx, %ny;
mov.u32 %v, %ntid.z;
mul.lo.u32 %bs, %bs, %v;
mad.lo.u32 %lin, %blk, %bs, %lin;
mul.wide.u32 %off, %lin, {4 * NF};
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
add.u64 %p, %p, %off;
{_movs}
ret;
}}
""")


@pytest.mark.parametrize("grid,block,dyn", [((2, 3, 2), (8, 4, 3), 0), ((3, 1, 1), (40, 1, 1), 256),
                                            ((1, 2, 1), (5, 7, 2), 1000)])
def test_thread_and_block_indices(grid, block, dyn, rng):
    nthreads = int(np.prod(grid) * np.prod(block))
    out = K.poison((nthreads, NF), np.uint32, rng)
    K.launch(KS.kernel("sregs"), grid, block, [out], shared_bytes=dyn)
    col = {f: out[:, k].astype(np.int64) for k, f in enumerate(FIELDS)}
    bx, by, bz = block
    gx, gy, gz = grid
    lin = np.arange(nthreads)
    per_block = bx * by * bz
    t, blk = lin % per_block, lin // per_block
    for f, want in [("tid.x", t % bx), ("tid.y", (t // bx) % by), ("tid.z", t // (bx * by)),
                    ("ntid.x", bx), ("ntid.y", by), ("ntid.z", bz), ("ctaid.x", blk % gx),
                    ("ctaid.y", (blk // gx) % gy), ("ctaid.z", blk // (gx * gy)), ("nctaid.x", gx),
                    ("nctaid.y", gy), ("nctaid.z", gz), ("laneid", t % 32), ("dynamic_smem_size", dyn)]:
        K.check_equal(col[f], np.broadcast_to(want, (nthreads,)).astype(np.int64), [], f"%{f}")
    lane = t % 32
    K.check_equal(col["lanemask_eq"], (1 << lane), [], "%lanemask_eq")
    K.check_equal(col["lanemask_lt"], (1 << lane) - 1, [], "%lanemask_lt")
    K.check_equal(col["lanemask_le"], (1 << (lane + 1)) - 1, [], "%lanemask_le")
    K.check_equal(col["lanemask_gt"], 0xFFFFFFFF ^ ((1 << (lane + 1)) - 1), [], "%lanemask_gt")
    K.check_equal(col["lanemask_ge"], 0xFFFFFFFF ^ ((1 << lane) - 1), [], "%lanemask_ge")
    # %warpid is the warp's slot (volatile; the ISA does not promise tid/32): same in a warp, < %nwarpid
    warp_of = blk * ((per_block + 31) // 32) + t // 32
    for w in np.unique(warp_of):
        vals = np.unique(col["warpid"][warp_of == w])
        assert len(vals) == 1, ("%warpid differs inside a warp", w, vals)
    assert (col["warpid"] < col["nwarpid"]).all() and (col["nwarpid"] >= 1).all()
    assert (col["smid"] < col["nsmid"]).all() and (col["nsmid"] >= 1).all()


KS.add("clocks", """
.visible .entry clocks(.param .u64 out)
{
.reg .u64 %c0, %c1, %g0, %g1, %p, %acc, %k, %off;
.reg .u32 %s0, %s1, %t;
.reg .pred %more;
mov.u32 %t, %tid.x;
mov.u64 %c0, %clock64;
mov.u32 %s0, %clock;
mov.u64 %g0, %globaltimer;
mov.u64 %acc, 1;
mov.u64 %k, 0;
$SPIN:
mul.lo.u64 %acc, %acc, 6364136223846793005;
add.u64 %acc, %acc, 1442695040888963407;
add.u64 %k, %k, 1;
setp.lt.u64 %more, %k, 20000;
@%more bra $SPIN;
mov.u64 %c1, %clock64;
mov.u32 %s1, %clock;
mov.u64 %g1, %globaltimer;
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 48; add.u64 %p, %p, %off;
st.global.u64 [%p], %c0;
st.global.u64 [%p+8], %c1;
st.global.u64 [%p+16], %g0;
st.global.u64 [%p+24], %g1;
st.global.u32 [%p+32], %s0;
st.global.u32 [%p+36], %s1;
st.global.u64 [%p+40], %acc;
ret;
}
""")


def test_clocks_are_monotonic(rng):
    out = K.poison((64, 6), np.uint64, rng)
    K.launch(KS.kernel("clocks"), 1, 64, [out])
    c0, c1, g0, g1 = (out[:, k] for k in range(4))
    s = np.ascontiguousarray(out[:, 4]).view(np.uint32).reshape(64, 2)
    assert (c1 > c0).all(), "%clock64 must advance across 20000 loop iterations"
    assert ((s[:, 1] - s[:, 0]) > 0).all(), "%clock (32-bit, wraps) must advance"
    assert (g1 >= g0).all() and (g0 > 0).all(), "%globaltimer is a nonzero monotonic ns count"
    acc = 1
    for _ in range(20000):
        acc = (acc * 6364136223846793005 + 1442695040888963407) & (2 ** 64 - 1)
    assert (out[:, 5] == acc).all(), "the spin loop computed what it should"


KS.add("big_grid", K.elementwise("big_grid", "mov.u32 %d, %cx;\nmov.u32 %q, %nctaid.x;", [("a", "u8")],
                                 [("d", "u32"), ("q", "u32")]))


def test_grid_wider_than_16_bits(rng):
    """%ctaid.x goes past 65535 (grid x may reach 2^31-1)."""
    blocks, block = 70001, 2
    n = blocks * block
    a = np.zeros(n, np.uint8)
    cta, ncta = K.run_elementwise(KS, "big_grid", [a], ["u32", "u32"], rng, block=block)
    K.check_equal(cta, np.arange(n, dtype=np.uint32) // block, [], "%ctaid.x")
    K.check_equal(ncta, np.full(n, blocks, np.uint32), [], "%nctaid.x")
