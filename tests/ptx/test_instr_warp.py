"""Warp-collective instructions, bit-exact over 32-lane warps: shfl.sync in all four modes with the clamp /
segment operand c and the predicate output, full and partial member masks; vote.sync all/any/uni/ballot;
activemask; match.any/all (b32, b64); redux.sync (and full warps where lane 31 decides both); bar.warp.sync;
a block size that leaves a partial warp.
References checked on an NVIDIA H200 (driver 580, PTX JIT for sm_86), 2026-11-29: every test here passed
with PTXKIT_BACKEND=cuda (see ptxkit.py); the corrections that hardware forced are noted where they apply.
Written after the hardware runs, so not run there: test_warp_reduction_loops and test_warps_of_a_2d_block.
"""

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

# the numpy references divide by zero and overflow on purpose (inf/NaN inputs)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

WARPS = 8            # 2 blocks x 4 warps
BLOCK = 128
N = WARPS * 32
KS = K.KernelSet()
LANE = "mov.u32 %lane, %laneid;\n"
LANE_TEMPS = [("lane", "u32"), ("bit", "u32"), ("inmask", "pred")]


def _ew(name, body, ins, outs, temps=()):
    return K.elementwise(name, body, ins, outs, temps=[*LANE_TEMPS, *temps])


def _member(mask_reg):
    """Branch around the collective for lanes outside the member mask (they are not active in it)."""
    return (f"shr.b32 %bit, %{mask_reg}, %lane;\nand.b32 %bit, %bit, 1;\nsetp.eq.u32 %inmask, %bit, 1;\n"
            "@!%inmask bra $OUT;\n")


# ---------------------------------------------------------------- shfl

def shfl_ref(mode, a, b, c):
    """PTX ISA pseudocode, per warp (arrays of 32): returns (d, p)."""
    d = np.zeros(32, np.uint32)
    p = np.zeros(32, np.uint8)
    for lane in range(32):
        bval = int(b[lane]) & 31
        cval = int(c[lane]) & 31
        seg = (int(c[lane]) >> 8) & 31
        max_lane = (lane & seg) | (cval & ~seg & 31)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bval
            pval = j >= max_lane
        elif mode == "down":
            j = lane + bval
            pval = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            pval = j <= max_lane
        else:
            j = min_lane | (bval & ~seg & 31)
            pval = j <= max_lane
        if not pval:
            j = lane
        d[lane] = a[j]
        p[lane] = pval
    return d, p


MODES = ["up", "down", "bfly", "idx"]
for mode in MODES:
    name = f"shfl_{mode}"
    KS.add(name, _ew(name, f"shfl.sync.{mode}.b32 %d|%q, %a, %b, %c, 0xffffffff;",
                               [("a", "b32"), ("b", "u32"), ("c", "u32")], [("d", "b32"), ("q", "pred")]))
    name = f"shfl_{mode}_imm"  # immediate b and c, the form nvcc emits for __shfl_*_sync
    imm = {"up": (1, 0), "down": (2, 0x1F), "bfly": (4, 0x1F), "idx": (3, 0x1F)}[mode]
    KS.add(name, _ew(name, f"shfl.sync.{mode}.b32 %d|%q, %a, {imm[0]}, {imm[1]}, -1;",
                               [("a", "b32")], [("d", "b32"), ("q", "pred")]))
    name = f"shfl_{mode}_nopred"
    KS.add(name, _ew(name, f"shfl.sync.{mode}.b32 %d, %a, %b, %c, 0xffffffff;",
                               [("a", "b32"), ("b", "u32"), ("c", "u32")], [("d", "b32")]))

C_VALUES = [0x1F, 0x0, 0x0F, 0x07, 0x1F00 | 0x00, 0x1800 | 0x07, 0x1C00 | 0x03, 0x1000 | 0x0F, 0x1E1F]


def _per_warp(x):
    return x.reshape(WARPS, 32)


@pytest.mark.parametrize("c_kind", ["uniform", "per_lane"])
@pytest.mark.parametrize("mode", MODES)
def test_shfl(mode, c_kind, rng):
    a = K.rand_ints(rng, "b32", N)
    b = rng.integers(0, 40, N).astype(np.uint32)  # b >= 32 uses only its low five bits
    if c_kind == "uniform":
        c = np.repeat(rng.choice(C_VALUES, WARPS), 32).astype(np.uint32)
    else:
        c = rng.integers(0, 1 << 13, N).astype(np.uint32)
    d, q = K.run_elementwise(KS, f"shfl_{mode}", [a, b, c], ["b32", "pred"], rng, block=BLOCK)
    (d2,) = K.run_elementwise(KS, f"shfl_{mode}_nopred", [a, b, c], ["b32"], rng, block=BLOCK)
    wd, wq = zip(*[shfl_ref(mode, *(_per_warp(x)[w] for x in (a, b, c))) for w in range(WARPS)])
    K.check_equal(d, np.concatenate(wd), [a, b, c], f"shfl.{mode} d")
    K.check_equal(q, np.concatenate(wq), [a, b, c], f"shfl.{mode} p")
    K.check_equal(d2, np.concatenate(wd), [a, b, c], f"shfl.{mode} d (no predicate)")


@pytest.mark.parametrize("mode", MODES)
def test_shfl_immediates(mode, rng):
    a = K.rand_ints(rng, "b32", N)
    imm = {"up": (1, 0), "down": (2, 0x1F), "bfly": (4, 0x1F), "idx": (3, 0x1F)}[mode]
    d, q = K.run_elementwise(KS, f"shfl_{mode}_imm", [a], ["b32", "pred"], rng, block=BLOCK)
    bb = np.full(32, imm[0], np.uint32)
    cc = np.full(32, imm[1], np.uint32)
    wd, wq = zip(*[shfl_ref(mode, _per_warp(a)[w], bb, cc) for w in range(WARPS)])
    K.check_equal(d, np.concatenate(wd), [a], f"shfl.{mode} d")
    K.check_equal(q, np.concatenate(wq), [a], f"shfl.{mode} p")


KS.add("shfl_idx_partial", _ew("shfl_idx_partial", LANE + "mov.u32 %d, 0;\nsetp.eq.u32 %q, %lane, 99;\n"
                                         + _member("e") + "shfl.sync.idx.b32 %d|%q, %a, %b, 0x1f, %e;\n$OUT:",
                                         [("a", "b32"), ("b", "u32"), ("e", "b32")], [("d", "b32"), ("q", "pred")]))


def _warp_masks(rng):
    m = K.rand_ints(rng, "b32", WARPS, edges=False)
    m[m == 0] = 1
    m[0] = 0xFFFFFFFF
    m[1] = 0x0000FFFF
    m[2] = 0x80000001
    return np.repeat(m, 32)


def test_shfl_partial_mask(rng):
    """Lanes outside the member mask do not take part; a lane reading from a member lane gets its value."""
    a = K.rand_ints(rng, "b32", N)
    e = _warp_masks(rng)
    b = np.zeros(N, np.uint32)
    for w in range(WARPS):  # each lane reads from some member lane
        members = [i for i in range(32) if (int(e[w * 32]) >> i) & 1]
        b[w * 32:(w + 1) * 32] = rng.choice(members, 32)
    d, q = K.run_elementwise(KS, "shfl_idx_partial", [a, b, e], ["b32", "pred"], rng, block=BLOCK)
    for w in range(WARPS):
        mask = int(e[w * 32])
        for lane in range(32):
            i = w * 32 + lane
            if (mask >> lane) & 1:
                assert d[i] == a[w * 32 + b[i]] and q[i] == 1, (w, lane, hex(mask), d[i], a[w * 32 + b[i]])
            else:
                assert d[i] == 0 and q[i] == 0, (w, lane, "non-member lane changed")


# ---------------------------------------------------------------- vote / activemask

VOTE_BODY = LANE + "mov.u32 %d, 0x12345;\n" + _member("e") + """
vote.sync.all.pred %pa, %a, %e;
vote.sync.any.pred %pn, %a, %e;
vote.sync.uni.pred %pu, %a, %e;
vote.sync.ballot.b32 %d, %a, %e;
vote.sync.ballot.b32 %q, !%a, %e;
selp.u32 %flags, 1, 0, %pa;
selp.u32 %bit, 2, 0, %pn;
or.b32 %flags, %flags, %bit;
selp.u32 %bit, 4, 0, %pu;
or.b32 %flags, %flags, %bit;
$OUT:
"""
KS.add("vote", _ew("vote", "mov.u32 %flags, 0xFF;\nmov.u32 %q, 0;\n" + VOTE_BODY,
                             [("a", "pred"), ("e", "b32")], [("d", "b32"), ("q", "b32"), ("flags", "u32")],
                             temps=[("pa", "pred"), ("pn", "pred"), ("pu", "pred")]))


def test_vote(rng):
    e = _warp_masks(rng)
    a = (rng.random(N) < rng.choice([0.0, 0.5, 0.97, 1.0], N // 32).repeat(32)).astype(np.uint8)
    a[64:96] = 1  # a warp where all members agree
    ball, nball, flags = K.run_elementwise(KS, "vote", [a, e], ["b32", "b32", "u32"], rng, block=BLOCK)
    for w in range(WARPS):
        mask = int(e[w * 32])
        bits = sum(int(a[w * 32 + i]) << i for i in range(32)) & mask
        nbits = ~bits & mask
        want_flags = int(bits == mask) | (int(bits != 0) << 1) | (int(bits in (0, mask)) << 2)
        for lane in range(32):
            i = w * 32 + lane
            if (mask >> lane) & 1:
                assert (ball[i], nball[i], flags[i]) == (bits, nbits, want_flags), (w, lane, hex(mask))
            else:
                assert (ball[i], nball[i], flags[i]) == (0x12345, 0, 0xFF), (w, lane, "non-member lane changed")


KS.add("activemask", _ew("activemask", LANE + "mov.u32 %d, 0;\n" + _member("e")
                                   + "activemask.b32 %d;\n$OUT:", [("e", "b32")], [("d", "b32")]))


def test_activemask_in_divergent_branch(rng):
    e = _warp_masks(rng)
    (got,) = K.run_elementwise(KS, "activemask", [e], ["b32"], rng, block=BLOCK)
    want = np.where([(int(e[i]) >> (i % 32)) & 1 for i in range(N)], e, 0).astype(np.uint32)
    K.check_equal(got, want, [e], "activemask")


KS90 = K.KernelSet(target="sm_90")       # elect.sync is sm_90's
KS90.add("elect", _ew("elect", LANE + "mov.u32 %d, 0x5A5A;\nsetp.eq.u32 %p, %lane, 99;\n" + _member("e")
                      + "elect.sync %d|%p, %e;\n$OUT:", [("e", "b32")], [("d", "b32"), ("p", "pred")]))
KS90.add("elect_sink", _ew("elect_sink", LANE + "setp.eq.u32 %p, %lane, 99;\n" + _member("e")
                           + "elect.sync _|%p, %e;\n$OUT:", [("e", "b32")], [("p", "pred")]))


def test_elect_leads_with_the_lowest_member(rng):
    """Each warp's members (a random mask, some lanes branching around) elect the lowest of them: d is its
    lane id in every member, p true in it alone; the other lanes keep their values."""
    e = _warp_masks(rng)
    d, p = K.run_elementwise(KS90, "elect", [e], ["b32", "pred"], rng, block=BLOCK)
    (q,) = K.run_elementwise(KS90, "elect_sink", [e], ["pred"], rng, block=BLOCK)
    for i in range(N):
        mask, lane = int(e[i]), i % 32
        leader = (mask & -mask).bit_length() - 1
        if (mask >> lane) & 1:
            assert (d[i], p[i], q[i]) == (leader, lane == leader, lane == leader), (i, hex(mask))
        else:
            assert (d[i], p[i], q[i]) == (0x5A5A, 0, 0), (i, hex(mask), "non-member lane changed")


def test_elect_matches_the_h200(rng):
    """The H200's leaders for its probed masks (tests/data/nvidia_elect_answers.json), lane by lane."""
    import json
    import os
    doc = json.load(open(os.path.join(os.path.dirname(__file__), "..", "data", "nvidia_elect_answers.json")))
    masks = sorted(doc["answers"])
    e = np.repeat(np.array([int(m, 16) for m in masks], np.uint32), 32)
    d, p = K.run_elementwise(KS90, "elect", [e], ["b32", "pred"], rng, block=32)
    for w, m in enumerate(masks):
        for lane, cell in enumerate(doc["answers"][m].split()):
            want_d, want_p = map(int, cell.split("/"))
            if want_p == 7:          # outside the mask: untouched (this kernel's own marker)
                want_d, want_p = 0x5A5A, 0
            assert (d[w * 32 + lane], p[w * 32 + lane]) == (want_d, want_p), (m, lane)


# a block of 40 threads: warp 1 holds 8 lanes
KS.add("activemask_partial_warp", _ew("activemask_partial_warp", "activemask.b32 %d;\n"
                                                "vote.sync.ballot.b32 %q, %a, %d;", [("a", "pred")],
                                                [("d", "b32"), ("q", "b32")]))


def test_partial_warp_block(rng):
    n = 40 * 3
    a = (rng.random(n) < 0.5).astype(np.uint8)
    outs = [K.poison((n,), np.uint32, rng) for _ in range(2)]
    K.launch(KS.kernel("activemask_partial_warp"), (3, 1, 1), (40, 1, 1), [a, *outs, n])
    act, ball = outs
    for blk in range(3):
        for t in range(40):
            i = blk * 40 + t
            lanes = range(32) if t < 32 else range(8)
            base = blk * 40 + (0 if t < 32 else 32)
            assert act[i] == (0xFFFFFFFF if t < 32 else 0xFF), (blk, t, hex(act[i]))
            assert ball[i] == sum(int(a[base + k]) << k for k in lanes), (blk, t)


# ---------------------------------------------------------------- match

for tn in ("b32", "b64"):
    KS.add(f"match_any_{tn}", _ew(f"match_any_{tn}", LANE + "mov.u32 %d, 0;\n" + _member("e")
                                            + f"match.any.sync.{tn} %d, %a, %e;\n$OUT:",
                                            [("a", tn), ("e", "b32")], [("d", "b32")]))
    KS.add(f"match_all_{tn}", _ew(f"match_all_{tn}", LANE + "mov.u32 %d, 7;\nsetp.ne.u32 %q, %lane, 99;\n"
                                            + _member("e") + f"match.all.sync.{tn} %d|%q, %a, %e;\n$OUT:",
                                            [("a", tn), ("e", "b32")], [("d", "b32"), ("q", "pred")]))


@pytest.mark.parametrize("tn", ["b32", "b64"])
def test_match(tn, rng):
    e = _warp_masks(rng)
    pool = np.array([5, 6, 7, (1 << 32) | 5, 0xFFFFFFFF], dtype=np.uint64)
    a = rng.choice(pool[:3] if tn == "b32" else pool, N).astype(K.TYPES[tn].np)
    a[96:128] = a[96]  # a warp where all members agree
    (anym,) = K.run_elementwise(KS, f"match_any_{tn}", [a, e], ["b32"], rng, block=BLOCK)
    allm, allp = K.run_elementwise(KS, f"match_all_{tn}", [a, e], ["b32", "pred"], rng, block=BLOCK)
    for w in range(WARPS):
        mask = int(e[w * 32])
        vals = [int(a[w * 32 + i]) for i in range(32)]
        members = [i for i in range(32) if (mask >> i) & 1]
        same = len({vals[i] for i in members}) == 1
        for lane in range(32):
            i = w * 32 + lane
            if lane in members:
                want = sum(1 << j for j in members if vals[j] == vals[lane])
                assert anym[i] == want, (w, lane, hex(anym[i]), hex(want))
                assert (allm[i], allp[i]) == ((mask, 1) if same else (0, 0)), (w, lane)
            else:
                assert (anym[i], allm[i], allp[i]) == (0, 7, 1), (w, lane, "non-member lane changed")


# ---------------------------------------------------------------- redux

REDUX = {"add": ("u32", lambda v: sum(v) & 0xFFFFFFFF), "min_u32": ("u32", min), "max_u32": ("u32", max),
         "min_s32": ("s32", min), "max_s32": ("s32", max), "and": ("b32", None), "or": ("b32", None),
         "xor": ("b32", None)}
for key, (tn, _) in REDUX.items():
    op = key.split("_")[0]
    KS.add(f"redux_{key}", _ew(f"redux_{key}", LANE + "mov.u32 %d, 0;\n" + _member("e")
                                         + f"redux.sync.{op}.{tn} %d, %a, %e;\n$OUT:",
                                         [("a", tn), ("e", "b32")], [("d", tn)]))


@pytest.mark.parametrize("key", sorted(REDUX))
def test_redux(key, rng):
    tn, f = REDUX[key]
    e = _warp_masks(rng)
    a = K.rand_ints(rng, tn, N)
    (got,) = K.run_elementwise(KS, f"redux_{key}", [a, e], [tn], rng, block=BLOCK)
    op = key.split("_")[0]
    for w in range(WARPS):
        mask = int(e[w * 32])
        vals = [int(a[w * 32 + i]) for i in range(32) if (mask >> i) & 1]
        if f is None:
            acc = vals[0]
            for v in vals[1:]:
                acc = acc & v if op == "and" else acc | v if op == "or" else acc ^ v
            want = acc
        else:
            want = f(vals)
        for lane in range(32):
            i = w * 32 + lane
            expect = want if (mask >> lane) & 1 else 0
            assert int(got[i]) == int(K.wrap([expect], tn)[0]), (key, w, lane, int(got[i]), expect)


def _lane31_warps(rng, tn, lane31):
    """WARPS full warps of random values where lane 31's value is chosen by lane31(warp values, w)."""
    a = K.rand_ints(rng, tn, N).reshape(WARPS, 32)
    for w in range(WARPS):
        a[w, 31] = lane31(a[w], w)
    return a.reshape(-1)


@pytest.mark.parametrize("tn", ["b32", "b64"])
def test_match_lane31_decides(tn, rng):
    """Full warps (mask 0xffffffff) whose answer turns on lane 31: all lanes equal (every bit set); all but
    lane 31 equal (bit 31 alone, and match.all fails); lane 31 equal to lane 0 only. A collective that
    leaves the last lane out gets each of them wrong (the amdgcn lane loop once did)."""
    e = np.full(N, 0xFFFFFFFF, np.uint32)
    dt = K.TYPES[tn].np
    base = K.rand_ints(rng, tn, WARPS)
    a = np.repeat(base, 32).reshape(WARPS, 32)
    a[1::3, 31] ^= dt.type(1 << 40 if tn == "b64" else 1 << 30)      # only lane 31 differs
    a[2::3, 1:31] = np.arange(1, 31, dtype=dt)[None, :] + a[2::3, :1]  # lanes 1..30 distinct, 31 == lane 0
    a[2::3, 31] = a[2::3, 0]
    a = a.reshape(-1)
    (anym,) = K.run_elementwise(KS, f"match_any_{tn}", [a, e], ["b32"], rng, block=BLOCK)
    allm, allp = K.run_elementwise(KS, f"match_all_{tn}", [a, e], ["b32", "pred"], rng, block=BLOCK)
    for w in range(WARPS):
        vals = [int(a[w * 32 + i]) for i in range(32)]
        same = len(set(vals)) == 1
        for lane in range(32):
            i = w * 32 + lane
            want = sum(1 << j for j in range(32) if vals[j] == vals[lane])
            assert anym[i] == want, (w, lane, hex(int(anym[i])), hex(want))
            assert (allm[i], allp[i]) == ((0xFFFFFFFF, 1) if same else (0, 0)), (w, lane, hex(int(allm[i])))


LANE31_REDUX = {   # lane 31's value, given the other lanes': it alone decides the result
    "add": lambda v, w: 0x7FFF0000 + w, "min_u32": lambda v, w: 0, "max_u32": lambda v, w: 0xFFFFFFFF,
    "min_s32": lambda v, w: -0x80000000, "max_s32": lambda v, w: 0x7FFFFFFF,
    "and": lambda v, w: ~(1 << (w % 32)) & 0xFFFFFFFF, "or": lambda v, w: 1 << (w % 32), "xor": lambda v, w: w,
}


@pytest.mark.parametrize("key", sorted(LANE31_REDUX))
def test_redux_lane31_decides(key, rng):
    """redux.sync over full warps where lane 31 holds the extreme (min/max), the only clear or set bit
    (and/or), or a value that changes the sum and xor."""
    tn, f = REDUX[key]
    e = np.full(N, 0xFFFFFFFF, np.uint32)
    a = _lane31_warps(rng, tn, LANE31_REDUX[key])
    if key in ("and", "or"):                 # every other lane all-ones (and) / zero (or) except one bit
        fill = 0xFFFFFFFF if key == "and" else 0
        a = a.reshape(WARPS, 32)
        a[:, :31] = fill
        a = a.reshape(-1)
    if key in ("min_u32", "max_u32", "min_s32", "max_s32"):   # no other lane reaches lane 31's value
        a = a.reshape(WARPS, 32)
        a[:, :31] = np.clip(a[:, :31], K.TYPES[tn].np.type(-0x7FFFFFFF if tn == "s32" else 1),
                            K.TYPES[tn].np.type(0x7FFFFFFE if tn == "s32" else 0xFFFFFFFE))
        a = a.reshape(-1)
    (got,) = K.run_elementwise(KS, f"redux_{key}", [a, e], [tn], rng, block=BLOCK)
    for w in range(WARPS):
        vals = [int(v) for v in a[w * 32:(w + 1) * 32]]
        if f is None:
            want = vals[0]
            for v in vals[1:]:
                want = want & v if key == "and" else want | v if key == "or" else want ^ v
        else:
            want = f(vals)
        assert all(int(g) == int(K.wrap([want], tn)[0]) for g in got[w * 32:(w + 1) * 32]), \
            (key, w, [int(g) for g in got[w * 32:(w + 1) * 32]][:4], want)


# ---------------------------------------------------------------- bar.warp.sync

KS.add("warp_sync_exchange", """
.visible .entry warp_sync_exchange(.param .u64 in0, .param .u64 out0)
{
.reg .u32 %t, %v, %other;
.reg .u64 %p, %q, %sh, %off;
.shared .align 4 .b32 buf[128];
mov.u32 %t, %tid.x;
ld.param.u64 %p, [in0];
cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4;
add.u64 %q, %p, %off;
ld.global.u32 %v, [%q];
mov.u64 %sh, buf;
add.u64 %sh, %sh, %off;
st.shared.u32 [%sh], %v;
bar.warp.sync 0xffffffff;
xor.b32 %other, %t, 31;
mul.wide.u32 %off, %other, 4;
mov.u64 %sh, buf;
add.u64 %sh, %sh, %off;
ld.shared.u32 %v, [%sh];
ld.param.u64 %p, [out0];
cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4;
add.u64 %q, %p, %off;
st.global.u32 [%q], %v;
ret;
}
""")


def test_bar_warp_sync_orders_shared_memory(rng):
    a = K.rand_ints(rng, "u32", 128)
    out = K.poison((128,), np.uint32, rng)
    K.launch(KS.kernel("warp_sync_exchange"), 1, 128, [a, out])
    K.check_equal(out, a[np.arange(128) ^ 31], [a], "lane^31 exchange")


# ---------------------------------------------------------------- the warp reduction idiom

KS.add("warp_sum_down", _ew("warp_sum_down", """
mov.u32 %off, 16;
$RED:
shfl.sync.down.b32 %t, %a, %off, 0x1f, 0xffffffff;
add.u32 %a, %a, %t;
shr.u32 %off, %off, 1;
setp.ne.u32 %more, %off, 0;
@%more bra $RED;
shfl.sync.idx.b32 %d, %a, 0, 0x1f, 0xffffffff;
""", [("a", "u32")], [("d", "u32")], temps=[("off", "u32"), ("t", "u32"), ("more", "pred")]))

KS.add("warp_max_bfly", _ew("warp_max_bfly", """
mov.b32 %off, 1;
$RED:
shfl.sync.bfly.b32 %t, %a, %off, 0x1f, 0xffffffff;
max.f32 %a, %a, %t;
shl.b32 %off, %off, 1;
setp.lt.u32 %more, %off, 32;
@%more bra $RED;
mov.f32 %d, %a;
""", [("a", "f32")], [("d", "f32")], temps=[("off", "u32"), ("t", "f32"), ("more", "pred")]))


@pytest.mark.parametrize("block", [BLOCK, 1024])
def test_warp_reduction_loops(block, rng):
    """shfl.down sum in a loop, broadcast from lane 0; shfl.bfly max: every lane ends with the total
    (also with 32 warps in a block)."""
    n = 2 * block
    warps = n // 32
    a = rng.integers(0, 1 << 20, n).astype(np.uint32)
    (s,) = K.run_elementwise(KS, "warp_sum_down", [a], ["u32"], rng, block=block)
    K.check_equal(s, np.repeat(a.reshape(warps, 32).sum(axis=1), 32).astype(np.uint32), [a], "warp sum")
    f = K.ordinary_floats(rng, n).astype(np.float32)
    (m,) = K.run_elementwise(KS, "warp_max_bfly", [f], ["f32"], rng, block=block)
    K.check_equal(m.view(np.uint32), np.repeat(f.reshape(warps, 32).max(axis=1), 32).view(np.uint32), [f],
                  "warp max")


# ---------------------------------------------------------------- warps of a 2-D block

KS.add("warp_2d", """
.visible .entry warp_2d(.param .u64 out)
{
.reg .u32 %tx, %ty, %nx, %lin, %lane, %v, %w, %ball;
.reg .u64 %p, %off;
.reg .pred %odd;
mov.u32 %tx, %tid.x; mov.u32 %ty, %tid.y; mov.u32 %nx, %ntid.x;
mad.lo.u32 %lin, %ty, %nx, %tx;
mov.u32 %lane, %laneid;
shl.b32 %v, %ty, 16;
or.b32 %v, %v, %tx;
shfl.sync.idx.b32 %w, %v, 0, 0x1f, 0xffffffff;
and.b32 %ball, %ty, 1;
setp.eq.u32 %odd, %ball, 1;
vote.sync.ballot.b32 %ball, %odd, 0xffffffff;
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %lin, 12; add.u64 %p, %p, %off;
st.global.u32 [%p], %lane;
st.global.u32 [%p+4], %w;
st.global.u32 [%p+8], %ball;
ret;
}
""")


def test_warps_of_a_2d_block(rng):
    """Warps are formed from the linear thread id (x fastest): with a 16x4 block, warp 0 holds rows 0-1."""
    out = K.poison((64, 3), np.uint32, rng)
    K.launch(KS.kernel("warp_2d"), 1, (16, 4, 1), [out])
    lin = np.arange(64)
    tx, ty = lin % 16, lin // 16
    first = (lin // 32) * 32
    K.check_equal(out[:, 0], lin % 32, [], "%laneid")
    K.check_equal(out[:, 1], ((first // 16) << 16) | (first % 16), [], "shfl.idx from lane 0")
    ball = np.array([sum(1 << k for k in range(32) if ((w * 32 + k) // 16) & 1) for w in range(2)])
    K.check_equal(out[:, 2], ball[lin // 32], [], "ballot of odd rows")
