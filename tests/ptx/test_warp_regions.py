"""Kernels with shfl/vote/redux/match/activemask run as region loops split at the collectives
(ptx/codegen/cpu/): reductions in loops, clamp/segment operands and the predicate output, votes in a
loop, redux/match over full, per-half-warp and empty membermasks (32- and 64-bit match), partial last
warps, 2-D/3-D blocks, threads that exit before a collective (one live range: regions; scattered:
the general warp scheduler takes over mid-kernel) and divergent collectives (fallback), each against
a numpy model with fresh random inputs and against the general scheduler alone."""

import functools

import numpy as np
import pytest

import ptx
from ptx.codegen.cpu import module as cpu_module, regions

HEAD = ".version 8.0\n.target sm_86\n.address_size 64\n"
POISON = 0xDEADBEEF

# Every kernel: t = linear thread id, g = global index; %r11 = in[g]; the body leaves the outputs in
# %r30 and %r31; `exit` decides which threads return before the body.
TEMPLATE = """
.visible .entry {name}(.param .u64 pin, .param .u64 pout, .param .u64 pout2, .param .u32 pb,
                       .param .u32 pc, .param .u32 plive)
{{
.reg .pred %p<16>;
.reg .b32 %r<64>;
.reg .b64 %rd<16>;
.reg .f32 %f<16>;
ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout]; ld.param.u64 %rd3, [pout2];
ld.param.u32 %r20, [pb]; ld.param.u32 %r21, [pc]; ld.param.u32 %r22, [plive];
mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r3, %tid.z;
mov.u32 %r4, %ntid.x; mov.u32 %r5, %ntid.y; mov.u32 %r6, %ntid.z;
mad.lo.u32 %r40, %r3, %r5, %r2;
mad.lo.u32 %r7, %r40, %r4, %r1;
mul.lo.u32 %r41, %r4, %r5;
mul.lo.u32 %r8, %r41, %r6;
mov.u32 %r9, %ctaid.x;
mad.lo.u32 %r10, %r9, %r8, %r7;
mul.wide.u32 %rd4, %r10, 4;
add.s64 %rd5, %rd1, %rd4;
add.s64 %rd6, %rd2, %rd4;
add.s64 %rd7, %rd3, %rd4;
ld.global.u32 %r11, [%rd5];
{exit}
{body}
st.global.u32 [%rd6], %r30;
st.global.u32 [%rd7], %r31;
ret;
}}
"""
EXITS = {
    "none": "",
    "prefix": "setp.ge.u32 %p15, %r7, %r22;\n@%p15 ret;",                # t >= live: one live range
    "odd": "and.b32 %r23, %r7, 1;\nsetp.ne.u32 %p15, %r23, 0;\n@%p15 ret;",  # scattered: fallback
}
MODES = ["up", "down", "bfly", "idx"]


def shfl_body(mode, b):
    return f"shfl.sync.{mode}.b32 %r30|%p1, %r11, {b}, %r21, -1;\nselp.u32 %r31, 1, 0, %p1;"


BODIES = {f"shfl_{m}_{bk}": shfl_body(m, b) for m in MODES
          for bk, b in (("param", "%r20"), ("lane", "%r24"), ("imm", "3"))}
BODIES.update({
    "shfl_nopred": "shfl.sync.bfly.b32 %r30, %r11, %r20, %r21, 0xffffffff;\nmov.u32 %r31, 7;",
    # shfl.down reduction, the loop not unrolled: the region after the shfl loops back to it
    "sum_down_loop": """mov.u32 %r12, 16;
$L1:
shfl.sync.down.b32 %r13, %r11, %r12, 31, -1;
add.s32 %r11, %r11, %r13;
shr.u32 %r12, %r12, 1;
setp.ne.u32 %p2, %r12, 0;
@%p2 bra $L1;
mov.u32 %r30, %r11;
mov.u32 %r31, %r12;""",
    "mix_bfly_loop": """mov.u32 %r12, 1;
$L1:
shfl.sync.bfly.b32 %r13, %r11, %r12, 31, -1;
mad.lo.u32 %r11, %r11, 3, %r13;
shl.b32 %r12, %r12, 1;
setp.lt.u32 %p2, %r12, 32;
@%p2 bra $L1;
mov.u32 %r30, %r11;
mov.u32 %r31, %r12;""",
    "vote_loop": """mov.u32 %r30, 0;
mov.u32 %r31, 0;
mov.u32 %r12, 0;
$L1:
and.b32 %r13, %r11, 1;
setp.ne.u32 %p1, %r13, 0;
vote.sync.ballot.b32 %r14, %p1, -1;
vote.sync.all.pred %p2, %p1, -1;
vote.sync.any.pred %p3, %p1, -1;
vote.sync.uni.pred %p4, !%p1, 0xffffffff;
mad.lo.u32 %r30, %r30, 7, %r14;
selp.u32 %r15, 1, 0, %p2;
selp.u32 %r16, 2, 0, %p3;
selp.u32 %r17, 4, 0, %p4;
or.b32 %r15, %r15, %r16;
or.b32 %r15, %r15, %r17;
shl.b32 %r31, %r31, 3;
or.b32 %r31, %r31, %r15;
shr.u32 %r11, %r11, 1;
add.u32 %r12, %r12, 1;
setp.lt.u32 %p5, %r12, 5;
@%p5 bra $L1;""",
    # registers set once from an immediate, live across shfls: the regions recompute them, the
    # fallback's frames get them from the compiler
    "const_regs": """mov.u32 %r50, 5;
mov.u32 %r51, 31;
shfl.sync.down.b32 %r30, %r11, %r50, %r51, -1;
add.u32 %r30, %r30, %r50;
shfl.sync.up.b32 %r31, %r30, %r50, 0, -1;
add.u32 %r31, %r31, %r51;""",
    # odd and even lanes at different shfls: the threads disagree on the next region (fallback)
    "divergent": """and.b32 %r13, %r7, 1;
setp.eq.u32 %p1, %r13, 0;
@%p1 bra $EVEN;
shfl.sync.down.b32 %r30, %r11, 1, 31, 0xaaaaaaaa;
bra.uni $DONE;
$EVEN:
shfl.sync.down.b32 %r30, %r11, 2, 31, 0x55555555;
$DONE:
mov.u32 %r31, 0;""",
})
# redux.sync, match.sync and activemask (cpu/warp_collectives.exchange_helper): %r25 = a per-half-warp
# membermask within the param c (lanes 0-15: c's low half, 16-31: its high half)
HALF_MASK = """and.b32 %r26, %r7, 16;
setp.ne.u32 %p6, %r26, 0;
selp.b32 %r25, 0xFFFF0000, 0x0000FFFF, %p6;
and.b32 %r25, %r25, %r21;
"""
REDUX_KEYS = ["add_u32", "add_s32", "min_u32", "min_s32", "max_u32", "max_s32", "and_b32", "or_b32", "xor_b32"]
for _key in REDUX_KEYS:
    _op, _t = _key.split("_")
    BODIES[f"redux_{_key}"] = (HALF_MASK + f"redux.sync.{_op}.{_t} %r30, %r11, 0xffffffff;\n"
                               f"redux.sync.{_op}.{_t} %r31, %r11, %r25;")
# match.any over few distinct values; match.all over values mostly equal (1, sometimes 0); b64: values
# that differ in their high word only
MATCH_ALL_OUT2 = "selp.u32 %r27, 0x9E3779B9, 0, %p1;\nadd.u32 %r31, %r31, %r27;"
BODIES.update({
    "match_b32": HALF_MASK + """and.b32 %r12, %r11, 3;
match.any.sync.b32 %r30, %r12, %r25;
shr.u32 %r13, %r11, 28;
min.u32 %r13, %r13, 1;
setp.eq.u32 %p1, %r7, 9999;
match.all.sync.b32 %r31|%p1, %r13, %r25;
""" + MATCH_ALL_OUT2,
    "match_b64": HALF_MASK + """and.b32 %r12, %r11, 1;
bfe.u32 %r13, %r11, 29, 1;
mov.b64 %rd8, {%r12, %r13};
match.any.sync.b64 %r30, %rd8, 0xffffffff;
bfe.u32 %r15, %r11, 24, 4;
setp.eq.u32 %p7, %r15, 0;
selp.b32 %r15, 5, 0, %p7;
mov.u32 %r14, 1;
mov.b64 %rd9, {%r14, %r15};
setp.eq.u32 %p1, %r7, 9999;
match.all.sync.b64 %r31|%p1, %rd9, %r25;
""" + MATCH_ALL_OUT2,
    "activemask": """activemask.b32 %r30;
and.b32 %r12, %r11, 1;
setp.ne.u32 %p1, %r12, 0;
vote.sync.ballot.b32 %r31, %p1, %r30;""",
    # redux, activemask and shfl in a loop: the region after each collective loops back to them
    "redux_loop": HALF_MASK + """mov.u32 %r30, 0;
mov.u32 %r31, 0;
mov.u32 %r12, 0;
$L1:
redux.sync.add.u32 %r13, %r11, -1;
redux.sync.max.s32 %r14, %r11, %r25;
activemask.b32 %r16;
shfl.sync.bfly.b32 %r17, %r13, 1, 31, -1;
mad.lo.u32 %r30, %r30, 7, %r13;
xor.b32 %r31, %r31, %r14;
add.u32 %r31, %r31, %r16;
add.u32 %r31, %r31, %r17;
shr.u32 %r11, %r11, 3;
add.u32 %r12, %r12, 1;
setp.lt.u32 %p5, %r12, 4;
@%p5 bra $L1;""",
    # odd and even lanes at different reduxes: the threads disagree on the next region (fallback)
    "redux_divergent": """and.b32 %r13, %r7, 1;
setp.eq.u32 %p1, %r13, 0;
@%p1 bra $EVEN;
redux.sync.min.u32 %r30, %r11, 0xaaaaaaaa;
bra.uni $DONE;
$EVEN:
redux.sync.add.u32 %r30, %r11, 0x55555555;
$DONE:
mov.u32 %r31, 0;""",
})

# the per-lane shuffle distance
LANE_B = "shr.u32 %r24, %r11, 27;\n"


def text(body, exit_kind):
    name = "k"
    return HEAD + TEMPLATE.format(name=name, exit=EXITS[exit_kind], body=LANE_B + BODIES[body])


@functools.lru_cache(maxsize=None)
def compiled(body, exit_kind, general):
    src = text(body, exit_kind)
    if not general:
        m = ptx.compile(src)
        assert '@"r0.k"' in m.ir, "not compiled as region loops"
        return m
    saved = regions.MAX_REGIONS
    regions.MAX_REGIONS = 0          # the general scheduler only
    try:
        m = ptx.compile(src + "\n// general scheduler\n")
    finally:
        regions.MAX_REGIONS = saved
    assert '@"r0.k"' not in m.ir
    return m


# ------------------------------------------------------------------ numpy models (per block)

def shfl_model(mode, a, b, c, member):
    """PTX shfl for the threads in `member` (at this shfl); a source lane that is not (exited, or at
    another instruction) gives the thread its own value, as the general warp scheduler does."""
    n = len(a)
    d = np.full(n, POISON, np.uint32)
    p = np.zeros(n, np.uint32)
    for t in np.nonzero(member)[0]:
        lane, wb = t % 32, t - t % 32
        bval, cval, seg = int(b[t]) & 31, int(c[t]) & 31, (int(c[t]) >> 8) & 31
        maxl, minl = (lane & seg) | (cval & ~seg & 31), lane & seg
        if mode == "up":
            j = lane - bval
            pv = j >= maxl
        elif mode == "down":
            j = lane + bval
            pv = j <= maxl
        elif mode == "bfly":
            j = lane ^ bval
            pv = j <= maxl
        else:
            j = minl | (bval & ~seg & 31)
            pv = j <= maxl
        if not pv:
            j = lane
        src = wb + j
        d[t] = a[src] if src < n and member[src] else a[t]
        p[t] = pv
    return d, p


def ballot_model(pred, member, mask=0xFFFFFFFF):
    """Per thread: the ballot over the members of its warp (those at the vote, within `mask`)."""
    n = len(pred)
    out = np.zeros(n, np.uint32)
    for t in np.nonzero(member)[0]:
        wb = t - t % 32
        bits = 0
        for k in range(32):
            if wb + k < n and member[wb + k] and (mask >> k) & 1 and pred[wb + k]:
                bits |= 1 << k
        out[t] = bits
    return out


def members_count(member, t, mask=0xFFFFFFFF):
    wb = t - t % 32
    return sum(1 for k in range(32) if wb + k < len(member) and member[wb + k] and (mask >> k) & 1)


def warp_members(member, t, mask):
    """The lanes of thread t's warp in `mask` that are at the collective (resolve_group's members)."""
    wb = t - t % 32
    return [k for k in range(32) if wb + k < len(member) and member[wb + k] and (mask >> k) & 1]


def redux_model(key, a, mask, member):
    """redux.sync over each thread's members (none: 0, as the general warp scheduler gives)."""
    op, tn = key.split("_")
    out = np.full(len(a), POISON, np.uint32)
    for t in np.nonzero(member)[0]:
        wb = t - t % 32
        vals = [int(a[wb + k]) for k in warp_members(member, t, int(mask[t]))]
        if tn == "s32":
            vals = [v - (1 << 32) if v >> 31 else v for v in vals]
        if not vals:
            r = 0
        elif op == "add":
            r = sum(vals)
        elif op in ("min", "max"):
            r = min(vals) if op == "min" else max(vals)
        else:
            r = vals[0]
            for v in vals[1:]:
                r = r & v if op == "and" else r | v if op == "or" else r ^ v
        out[t] = r & 0xFFFFFFFF
    return out


def match_model(all_, a, mask, member):
    """match.sync: (result, predicate) per thread; .all compares the members with the thread's own value."""
    n = len(a)
    d = np.full(n, POISON, np.uint32)
    p = np.zeros(n, np.uint32)
    for t in np.nonzero(member)[0]:
        wb = t - t % 32
        ks = warp_members(member, t, int(mask[t]))
        same = [k for k in ks if a[wb + k] == a[t]]
        bits = sum(1 << k for k in ks)
        if all_:
            ok = len(same) == len(ks)
            d[t], p[t] = (bits if ok else 0), ok
        else:
            d[t] = sum(1 << k for k in same)
    return d, p


def live_lanes_model(member):
    n = len(member)
    out = np.full(n, POISON, np.uint32)
    for t in np.nonzero(member)[0]:
        out[t] = sum(1 << k for k in warp_members(member, t, 0xFFFFFFFF))
    return out


def model(body, exit_kind, x, n, bparam, cparam, live):
    """Both outputs of one block (x: its n inputs)."""
    t = np.arange(n)
    member = {"none": np.ones(n, bool), "prefix": t < live, "odd": t % 2 == 0}[exit_kind]
    out = np.full(n, POISON, np.uint32)
    out2 = np.full(n, POISON, np.uint32)
    a = x.astype(np.uint32)
    c = np.full(n, cparam, np.uint32)
    if body.startswith("shfl_") and body != "shfl_nopred":
        _, mode, bk = body.split("_")
        b = {"param": np.full(n, bparam, np.uint32), "lane": a >> 27,
             "imm": np.full(n, 3, np.uint32)}[bk]
        d, p = shfl_model(mode, a, b, c, member)
        out[member], out2[member] = d[member], p[member]
    elif body == "shfl_nopred":
        d, _ = shfl_model("bfly", a, np.full(n, bparam, np.uint32), c, member)
        out[member], out2[member] = d[member], 7
    elif body in ("sum_down_loop", "mix_bfly_loop"):
        v = a.copy()
        offs = [16, 8, 4, 2, 1] if body == "sum_down_loop" else [1, 2, 4, 8, 16]
        for o in offs:
            mode = "down" if body == "sum_down_loop" else "bfly"
            s, _ = shfl_model(mode, v, np.full(n, o, np.uint32), np.full(n, 31, np.uint32), member)
            v = (v + s) if body == "sum_down_loop" else (v * np.uint32(3) + s)
        out[member] = v[member]
        out2[member] = 0 if body == "sum_down_loop" else 32
    elif body == "vote_loop":
        r30 = np.zeros(n, np.uint32)
        r31 = np.zeros(n, np.uint32)
        v = a.copy()
        for _ in range(5):
            pred = (v & 1) != 0
            bal = ballot_model(pred, member)
            for i in np.nonzero(member)[0]:
                cnt, m = bin(int(bal[i])).count("1"), members_count(member, i)
                allp, anyp = cnt == m, cnt != 0
                # uni of !p: all members agree
                uni = cnt == 0 or cnt == m
                r31[i] = (r31[i] << np.uint32(3)) | np.uint32(allp | anyp << 1 | uni << 2)
            r30 = r30 * np.uint32(7) + bal
            v = v >> np.uint32(1)
        out[member], out2[member] = r30[member], r31[member]
    elif body == "const_regs":
        five, c31 = np.full(n, 5, np.uint32), np.full(n, 31, np.uint32)
        d1, _ = shfl_model("down", a, five, c31, member)
        r30 = d1 + np.uint32(5)
        d2, _ = shfl_model("up", r30, five, np.zeros(n, np.uint32), member)
        out[member], out2[member] = r30[member], (d2 + np.uint32(31))[member]
    elif body.startswith("redux_") and body[6:] in REDUX_KEYS:
        full = np.full(n, 0xFFFFFFFF, np.uint32)
        half = np.where(t % 32 >= 16, 0xFFFF0000, 0x0000FFFF).astype(np.uint32) & np.uint32(cparam)
        out[member] = redux_model(body[6:], a, full, member)[member]
        out2[member] = redux_model(body[6:], a, half, member)[member]
    elif body in ("match_b32", "match_b64"):
        full = np.full(n, 0xFFFFFFFF, np.uint32)
        half = np.where(t % 32 >= 16, 0xFFFF0000, 0x0000FFFF).astype(np.uint32) & np.uint32(cparam)
        if body == "match_b32":
            d, _ = match_model(False, a & np.uint32(3), half, member)
            d2, p2 = match_model(True, np.minimum(a >> np.uint32(28), np.uint32(1)), half, member)
        else:
            hi1 = ((a >> np.uint32(29)) & np.uint32(1)).astype(np.uint64)
            v1 = (a & np.uint32(1)).astype(np.uint64) | hi1 << np.uint64(32)
            hi2 = np.where(((a >> np.uint32(24)) & np.uint32(15)) == 0, 5, 0).astype(np.uint64)
            v2 = np.uint64(1) | hi2 << np.uint64(32)
            d, _ = match_model(False, v1, full, member)
            d2, p2 = match_model(True, v2, half, member)
        out[member] = d[member]
        out2[member] = (d2 + p2 * np.uint32(0x9E3779B9))[member]
    elif body == "activemask":
        act = live_lanes_model(member)
        out[member] = act[member]
        bal = np.zeros(n, np.uint32)
        for i in np.nonzero(member)[0]:
            bal[i] = ballot_model(a & np.uint32(1), member, int(act[i]))[i]
        out2[member] = bal[member]
    elif body == "redux_loop":
        half = np.where(t % 32 >= 16, 0xFFFF0000, 0x0000FFFF).astype(np.uint32) & np.uint32(cparam)
        full = np.full(n, 0xFFFFFFFF, np.uint32)
        r30 = np.zeros(n, np.uint32)
        r31 = np.zeros(n, np.uint32)
        v = a.copy()
        act = live_lanes_model(member)
        for _ in range(4):
            r13 = redux_model("add_u32", v, full, member)
            r14 = redux_model("max_s32", v, half, member)
            r17, _ = shfl_model("bfly", r13, np.full(n, 1, np.uint32), np.full(n, 31, np.uint32), member)
            r30 = r30 * np.uint32(7) + r13
            r31 = (r31 ^ r14) + act + r17
            v = v >> np.uint32(3)
        out[member], out2[member] = r30[member], r31[member]
    elif body == "redux_divergent":
        odd = member & (t % 2 == 1)
        even = member & (t % 2 == 0)
        d1 = redux_model("min_u32", a, np.full(n, 0xAAAAAAAA, np.uint32), odd)
        d2 = redux_model("add_u32", a, np.full(n, 0x55555555, np.uint32), even)
        out[odd], out[even] = d1[odd], d2[even]
        out2[member] = 0
    elif body == "divergent":
        odd = member & (t % 2 == 1)
        even = member & (t % 2 == 0)
        d1, _ = shfl_model("down", a, np.full(n, 1, np.uint32), np.full(n, 31, np.uint32), odd)
        d2, _ = shfl_model("down", a, np.full(n, 2, np.uint32), np.full(n, 31, np.uint32), even)
        out[odd], out[even] = d1[odd], d2[even]
        out2[member] = 0
    return out, out2


BLOCKS = [(32, 1, 1), (48, 1, 1), (100, 1, 1), (8, 4, 2), (5, 7, 3), (256, 1, 1), (16, 4, 1)]
C_VALUES = [0x1F, 0x0, 0x0F, 0x1C03, 0x1807, 0x1E1F]


def run(m, block, x, b, c, live, nb):
    n = int(np.prod(block))
    out = np.full(nb * n, POISON, np.uint32)
    out2 = np.full(nb * n, POISON, np.uint32)
    m.kernel("k").launch(nb, block, [x, out, out2, b, c, live])
    return out, out2


def check(body, exit_kind, block, c, live=0, nb=3, expect_fallback=False):
    rng = np.random.default_rng()
    n = int(np.prod(block))
    x = rng.integers(0, 2**32, nb * n, dtype=np.uint64).astype(np.uint32)
    b = int(rng.integers(0, 64))
    want = [model(body, exit_kind, x[i * n:(i + 1) * n], n, b, c, live) for i in range(nb)]
    want_out = np.concatenate([w[0] for w in want])
    want_out2 = np.concatenate([w[1] for w in want])
    for general in (False, True):
        m = compiled(body, exit_kind, general)
        out, out2 = run(m, block, x, b, c, live, nb)
        which = "general scheduler" if general else "region loops"
        bad = np.nonzero((out != want_out) | (out2 != want_out2))[0]
        assert bad.size == 0, (f"{which}: {bad.size} of {out.size} wrong, first at {bad[0]}: "
                               f"got {out[bad[0]]:#x}/{out2[bad[0]]}, want {want_out[bad[0]]:#x}/"
                               f"{want_out2[bad[0]]} (b={b}, c={c:#x})")
        if not general and expect_fallback:
            assert m._fallback.entries is not None, "the regions should have fallen back"
    return compiled(body, exit_kind, False)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("body", [k for k in BODIES if k.startswith("shfl_")])
def test_shfl_modes(body, block):
    for c in C_VALUES:
        m = check(body, "none", block, c)
    assert m._fallback.entries is None, "all threads agree: no fallback"


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("body", ["sum_down_loop", "mix_bfly_loop", "vote_loop", "const_regs"])
def test_loops(body, block):
    m = check(body, "none", block, 0x1F)
    assert m._fallback.entries is None


@pytest.mark.parametrize("block,live", [((64, 1, 1), 40), ((100, 1, 1), 33), ((48, 1, 1), 1),
                                        ((8, 4, 2), 17), ((256, 1, 1), 255), ((5, 7, 3), 0)])
@pytest.mark.parametrize("body", ["shfl_down_param", "shfl_idx_lane", "sum_down_loop", "vote_loop"])
def test_exit_before_collective_one_range(body, block, live):
    """Threads t >= live exit first: the others stay one range and go on in region loops."""
    m = check(body, "prefix", block, 0x1F, live=live)
    assert m._fallback.entries is None


@pytest.mark.parametrize("block", [(64, 1, 1), (100, 1, 1), (8, 4, 2)])
@pytest.mark.parametrize("body", ["shfl_up_param", "shfl_bfly_lane", "sum_down_loop", "vote_loop",
                                  "const_regs"])
def test_scattered_exits_fall_back(body, block):
    check(body, "odd", block, 0x1F, expect_fallback=True)


@pytest.mark.parametrize("block", [(64, 1, 1), (100, 1, 1), (5, 7, 3)])
def test_divergent_shfl_falls_back(block):
    check("divergent", "none", block, 0x1F, expect_fallback=True)


# ------------------------------------------------------------------ redux.sync, match.sync, activemask

MASK_C = [0xFFFFFFFF, 0x0F0F00FF, 0x00010001, 0x80000001, 0]


@pytest.mark.parametrize("block", [(32, 1, 1), (48, 1, 1), (100, 1, 1), (8, 4, 2), (5, 7, 3), (256, 1, 1)])
@pytest.mark.parametrize("body", [f"redux_{k}" for k in REDUX_KEYS] + ["match_b32", "match_b64", "activemask",
                                                                      "redux_loop"])
def test_redux_match_activemask(body, block):
    """In region loops (no fallback): full, per-half-warp and empty membermasks, partial last warps."""
    rng = np.random.default_rng()
    for c in MASK_C + [int(rng.integers(0, 2**32))]:
        m = check(body, "none", block, c)
    assert m._fallback.entries is None, "all threads agree: no fallback"


@pytest.mark.parametrize("block,live", [((64, 1, 1), 40), ((100, 1, 1), 33), ((48, 1, 1), 1),
                                        ((8, 4, 2), 17), ((256, 1, 1), 255), ((5, 7, 3), 0)])
@pytest.mark.parametrize("body", ["redux_add_u32", "redux_min_s32", "redux_xor_b32", "match_b32", "match_b64",
                                  "activemask", "redux_loop"])
def test_redux_match_activemask_after_exits(body, block, live):
    """Threads t >= live exit first: the collectives reduce over the live lanes only, in region loops."""
    for c in (0xFFFFFFFF, 0x7F3F1F0F):
        m = check(body, "prefix", block, c, live=live)
    assert m._fallback.entries is None


@pytest.mark.parametrize("block", [(64, 1, 1), (100, 1, 1), (8, 4, 2)])
@pytest.mark.parametrize("body", ["redux_max_u32", "redux_and_b32", "match_b32", "match_b64", "activemask",
                                  "redux_loop"])
def test_redux_match_scattered_exits_fall_back(body, block):
    """Odd threads exit: the general scheduler takes over with the inputs the regions left (64-bit too)."""
    check(body, "odd", block, 0xFFFF7FFF, expect_fallback=True)


@pytest.mark.parametrize("block", [(64, 1, 1), (100, 1, 1), (5, 7, 3)])
def test_divergent_redux_falls_back(block):
    check("redux_divergent", "none", block, 0x1F, expect_fallback=True)


# ------------------------------------------------------------------ the bench kernel: shfl + barrier

def reduce_shfl_model(x):
    """scripts/bench_kernels/reduce_shfl.cu in float32, in the kernel's order."""
    nb = x.size // 256
    v = x.reshape(nb, 256).copy()
    lane = np.arange(256) % 32
    for o in (16, 8, 4, 2, 1):
        src = np.where(lane + o <= 31, np.arange(256) + o, np.arange(256))
        v = v + v[:, src]
    ws = v[:, ::32]                       # 8 warp sums
    w = np.zeros((nb, 32), np.float32)
    w[:, :8] = ws
    for o in (4, 2, 1):
        src = np.where(np.arange(32) + o <= 31, np.arange(32) + o, np.arange(32))
        w = w + w[:, src]
    return w[:, 0]


def test_bench_reduce_shfl_regions():
    """shfl.down, a barrier, then only warp 0 (the rest exited) shuffles again: all region loops."""
    from pathlib import Path
    src = (Path(__file__).resolve().parents[2] / "scripts/bench_kernels/reduce_shfl.ptx").read_text()
    m = ptx.compile(src)
    assert '@"r0.reduce_shfl"' in m.ir
    rng = np.random.default_rng()
    for nb in (1, 7, 64):
        x = rng.standard_normal(nb * 256).astype(np.float32)
        out = np.full(nb, np.nan, np.float32)
        m.kernel("reduce_shfl").launch(nb, 256, [x, out])
        want = reduce_shfl_model(x)
        assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), \
            f"{int(np.sum(out != want))} of {nb} block sums differ"
    assert m._fallback.entries is None


def test_warp_regions_flag():
    """The kernel info says which path a kernel with collectives takes."""
    from ptx import parse
    hir = cpu_module.build_host_ir(parse(text("sum_down_loop", "none")))
    assert hir.kernels["k"].warp_regions
    # redux, match and activemask split regions too
    for ins in ("match.any.sync.b32 %r30, %r11, 0xffffffff;", "redux.sync.add.s32 %r30, %r11, %r21;",
                "activemask.b32 %r30;"):
        src = text("shfl_nopred", "none").replace("shfl.sync.bfly.b32 %r30, %r11, %r20, %r21, 0xffffffff;", ins)
        assert cpu_module.build_host_ir(parse(src)).kernels["k"].warp_regions, ins
    # and bar.warp.sync (tests/ptx/test_warp_chain.py runs it)
    src = text("shfl_nopred", "none").replace(
        "shfl.sync.bfly.b32 %r30, %r11, %r20, %r21, 0xffffffff;",
        "bar.warp.sync 0xffffffff;\nmov.u32 %r30, %r11;")
    hir = cpu_module.build_host_ir(parse(src))
    assert hir.kernels["k"].warp_regions
