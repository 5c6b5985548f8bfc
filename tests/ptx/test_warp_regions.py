"""Kernels with shfl/vote run as region loops split at the collectives (ptx/codegen/cpu/):
reductions in loops, clamp/segment operands and the predicate output, votes in a loop, partial last
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
    # match is not a region split point: the general path
    src = text("shfl_nopred", "none").replace(
        "shfl.sync.bfly.b32 %r30, %r11, %r20, %r21, 0xffffffff;",
        "match.any.sync.b32 %r30, %r11, 0xffffffff;")
    hir = cpu_module.build_host_ir(parse(src))
    assert not hir.kernels["k"].warp_regions and hir.kernels["k"].fallback_slot is None
