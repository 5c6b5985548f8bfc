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


# The reserved region (what cooperative groups' multi-warp scratch reads through %reserved_smem_offset_1)
# is CTA-shared memory of its own: every thread writes its slot in both halves, reads a neighbour's after
# bar.sync, and neither the kernel's static nor its dynamic shared memory is touched.
KS.add("reserved_smem", """
.extern .shared .align 16 .b8 dyn[];
.func (.reg .u32 r) res1()
{
mov.u32 r, %reserved_smem_offset_1;
ret;
}
.visible .entry reserved_smem(.param .u64 out, .param .u32 seed)
{
.shared .align 4 .b32 sv[33];
.reg .u32 %t, %s, %v, %a, %b, %r0, %r1, %n, %q;
.reg .u64 %p, %off;
.reg .pred %hasdyn;
mov.u32 %t, %tid.x;
ld.param.u32 %s, [seed];
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 64; add.u64 %p, %p, %off;
mov.u32 %v, %reserved_smem_offset_begin; st.global.u32 [%p], %v;
mov.u32 %v, %reserved_smem_offset_end; st.global.u32 [%p+4], %v;
mov.u32 %v, %reserved_smem_offset_cap; st.global.u32 [%p+8], %v;
mov.u32 %r0, %reserved_smem_offset_0; st.global.u32 [%p+12], %r0;
mov.u32 %r1, %reserved_smem_offset_1; st.global.u32 [%p+16], %r1;
mov.u32 %v, %total_smem_size; st.global.u32 [%p+20], %v;
mov.u32 %v, %aggr_smem_size; st.global.u32 [%p+24], %v;
mov.u32 %v, sv; st.global.u32 [%p+28], %v;
mov.u32 %v, dyn; st.global.u32 [%p+32], %v;
mov.u32 %n, %dynamic_smem_size; st.global.u32 [%p+36], %n;
call (%v), res1; st.global.u32 [%p+40], %v;
// each thread's words: seed ^ (tid * odd constant), one per region
mul.lo.u32 %q, %t, 2654435761; xor.b32 %q, %q, %s;
shl.b32 %a, %t, 2;
add.u32 %b, %a, %r0; st.shared.u32 [%b], %q;
add.u32 %b, %a, %r1; add.u32 %v, %q, 1; st.shared.u32 [%b], %v;
rem.u32 %b, %t, 33; shl.b32 %b, %b, 2; mov.u32 %v, sv; add.u32 %b, %b, %v; add.u32 %v, %q, 2;
st.shared.u32 [%b], %v;
setp.ge.u32 %hasdyn, %n, 256;
mov.u32 %v, dyn; add.u32 %b, %a, %v; add.u32 %v, %q, 3;
@%hasdyn st.shared.u32 [%b], %v;
bar.sync 0;
add.u32 %t, %t, 1; and.b32 %t, %t, 63; shl.b32 %a, %t, 2;
add.u32 %b, %a, %r0; ld.shared.u32 %v, [%b]; st.global.u32 [%p+44], %v;
add.u32 %b, %a, %r1; ld.shared.u32 %v, [%b]; st.global.u32 [%p+48], %v;
mov.u32 %v, sv; add.u32 %b, %v, 4; ld.shared.u32 %v, [%b]; st.global.u32 [%p+52], %v;
mov.u32 %v, dyn; add.u32 %b, %a, %v; mov.u32 %v, 0;
@%hasdyn ld.shared.u32 %v, [%b];
st.global.u32 [%p+56], %v;
ret;
}
""")


@pytest.mark.parametrize("dyn", [0, 256, 1000])
def test_reserved_shared_memory(dyn, rng):
    seed = int(rng.integers(0, 2 ** 32))
    out = K.poison((64, 16), np.uint32, rng)
    K.launch(KS.kernel("reserved_smem"), 1, 64, [out, np.uint32(seed)], shared_bytes=dyn)
    o = out.astype(np.int64)
    begin, end, cap, r0, r1, total, aggr, sv, dbase, dsize, fr1 = (o[:, k] for k in range(11))
    for col in (begin, end, cap, r0, r1, total, aggr, sv, dbase, dsize, fr1):
        assert (col == col[0]).all(), "every thread of the CTA reads the same value"
    begin, end, cap, r0, r1, total, aggr, sv, dbase, dsize, fr1 = (int(c[0]) for c in
                                                                    (begin, end, cap, r0, r1, total, aggr,
                                                                     sv, dbase, dsize, fr1))
    assert end - begin == cap == 1024, "the 1 KiB the driver reports as reserved per block"
    assert begin <= r0 < r1 < end and r1 - r0 >= 288 and end - r1 >= 288, "cooperative groups need 288 B"
    assert fr1 == r1, "a .func reads the same region"
    assert end <= sv or sv + 132 <= begin, "the reservation overlaps the static shared variable"
    assert dyn == 0 or end <= dbase or dbase + dyn <= begin, "the reservation overlaps dynamic shared memory"
    assert dsize == dyn
    assert dyn + 132 <= total <= dyn + 132 + 16 and aggr == total + 1024
    t = np.arange(64, dtype=np.uint64)
    q = ((t * 2654435761) & 0xFFFFFFFF) ^ seed
    nb = np.roll(q, -1)
    K.check_equal(out[:, 11], nb.astype(np.uint32), [], "reserved_smem_offset_0 neighbour")
    K.check_equal(out[:, 12], ((nb + 1) & 0xFFFFFFFF).astype(np.uint32), [], "reserved_smem_offset_1 neighbour")
    # sv[1] was written by threads 1 and 34 (tid % 33 == 1): either one's word, intact
    assert set(out[:, 13].tolist()) <= {int((q[1] + 2) & 0xFFFFFFFF), int((q[34] + 2) & 0xFFFFFFFF)}
    if dyn >= 256:
        K.check_equal(out[:, 14], ((nb + 3) & 0xFFFFFFFF).astype(np.uint32), [], "dynamic shared neighbour")


# %envreg0..31 are driver-defined: each reads one value for the whole launch. %globaltimer_lo/_hi are the
# halves of %globaltimer: a read of the whole between two reads of the halves bounds them.
_envs = "\n".join(f"mov.u32 %v, %envreg{k};\nst.global.u32 [%p+{4 * k}], %v;" for k in range(32))
KS.add("envregs_timer", f"""
.visible .entry envregs_timer(.param .u64 out)
{{
.reg .u32 %v, %lo0, %hi0, %lo1, %hi1, %t;
.reg .u64 %p, %off, %g;
mov.u32 %t, %tid.x; mov.u32 %v, %ctaid.x; mov.u32 %lo0, %ntid.x; mad.lo.u32 %t, %v, %lo0, %t;
mul.wide.u32 %off, %t, 152;
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p; add.u64 %p, %p, %off;
{_envs}
mov.u32 %hi0, %globaltimer_hi;
mov.u32 %lo0, %globaltimer_lo;
mov.u64 %g, %globaltimer;
mov.u32 %hi1, %globaltimer_hi;
mov.u32 %lo1, %globaltimer_lo;
st.global.u32 [%p+128], %lo0; st.global.u32 [%p+132], %hi0;
st.global.u64 [%p+136], %g;
st.global.u32 [%p+144], %lo1; st.global.u32 [%p+148], %hi1;
ret;
}}
""")


def test_envregs_and_globaltimer_halves(rng):
    blocks, block = 3, 40
    n = blocks * block
    out = K.poison((n, 38), np.uint32, rng)
    K.launch(KS.kernel("envregs_timer"), blocks, block, [out])
    env = out[:, :32]
    assert (env == env[0]).all(), "every %envreg reads one value for the whole launch"
    lo0, hi0 = out[:, 32].astype(np.uint64), out[:, 33].astype(np.uint64)
    g = np.ascontiguousarray(out[:, 34:36]).view(np.uint64)[:, 0]
    lo1, hi1 = out[:, 36].astype(np.uint64), out[:, 37].astype(np.uint64)
    assert (g > 0).all()
    assert ((hi0 == g >> np.uint64(32)) | (hi1 == g >> np.uint64(32))).all(), "%globaltimer_hi is its upper half"
    same = hi0 == hi1
    assert ((lo0 <= (g & np.uint64(0xFFFFFFFF))) | ~same).all() and \
           (((g & np.uint64(0xFFFFFFFF)) <= lo1) | ~same).all(), "%globaltimer_lo is its lower half"
