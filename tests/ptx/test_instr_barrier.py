"""Block barriers: bar.sync / barrier.sync inside loops (tree reduction), bar.red.popc/and/or, named
barriers with bar.arrive (producer/consumer), and threads that exit before a barrier releasing it.
References checked on an NVIDIA H200 (driver 580, PTX JIT for sm_86), 2026-11-29: every test here passed
with PTXKIT_BACKEND=cuda (see ptxkit.py); the corrections that hardware forced are noted where they apply.
Written after the hardware runs, so not run there: test_values_live_across_barriers,
test_two_named_barriers_with_partial_counts, test_barrier_and_shfl_inside_called_functions.
"""

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

# the numpy references divide by zero and overflow on purpose (inf/NaN inputs)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

KS = K.KernelSet()

REDUCE = """
.visible .entry {name}(.param .u64 src, .param .u64 dst)
{{
.reg .u32 %t, %nt, %c, %g, %s, %v, %w;
.reg .u64 %p, %off, %a, %b;
.reg .pred %active, %more, %zero;
.shared .align 4 .u32 buf[1024];
mov.u32 %t, %tid.x; mov.u32 %nt, %ntid.x; mov.u32 %c, %ctaid.x;
mad.lo.u32 %g, %c, %nt, %t;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %g, 4; add.u64 %p, %p, %off;
ld.global.u32 %v, [%p];
mov.u64 %a, buf;
mul.wide.u32 %off, %t, 4; add.u64 %a, %a, %off;
st.shared.u32 [%a], %v;
{bar};
shr.u32 %s, %nt, 1;
$LOOP:
setp.lt.u32 %active, %t, %s;
@!%active bra $SKIP;
mov.u64 %b, buf;
add.u32 %w, %t, %s;
mul.wide.u32 %off, %w, 4; add.u64 %b, %b, %off;
ld.shared.u32 %w, [%b];
ld.shared.u32 %v, [%a];
add.u32 %v, %v, %w;
st.shared.u32 [%a], %v;
$SKIP:
{bar};
shr.u32 %s, %s, 1;
setp.ne.u32 %more, %s, 0;
@%more bra $LOOP;
setp.eq.u32 %zero, %t, 0;
@!%zero bra $END;
ld.shared.u32 %v, [buf];
ld.param.u64 %p, [dst]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %c, 4; add.u64 %p, %p, %off;
st.global.u32 [%p], %v;
$END:
ret;
}}
"""
BARS = {"bar_sync": "bar.sync 0", "barrier_sync": "barrier.sync 0", "barrier_sync_aligned": "barrier.sync.aligned 0",
        "bar_sync_count": "bar.sync 0, %nt", "bar_cta_sync": "bar.cta.sync 0"}
for nm, bar in BARS.items():
    KS.add(f"reduce_{nm}", REDUCE.format(name=f"reduce_{nm}", bar=bar))


@pytest.mark.parametrize("block", [32, 256, 1024])
@pytest.mark.parametrize("bar", sorted(BARS))
def test_tree_reduction(bar, block, rng):
    blocks = 5
    src = rng.integers(0, 1 << 20, blocks * block).astype(np.uint32)
    dst = K.poison((blocks,), np.uint32, rng)
    K.launch(KS.kernel(f"reduce_{bar}"), blocks, block, [src, dst])
    K.check_equal(dst, src.reshape(blocks, block).sum(axis=1).astype(np.uint32), [], f"{bar} reduction")


KS.add("bar_red", K.elementwise("bar_red", """
bar.red.popc.u32 %d, 0, %a;
bar.red.and.pred %pa, 1, %a;
bar.red.or.pred %po, 2, !%a;
selp.u32 %q, 1, 0, %pa;
selp.u32 %t, 2, 0, %po;
or.b32 %q, %q, %t;
""", [("a", "pred")], [("d", "u32"), ("q", "u32")], temps=[("pa", "pred"), ("po", "pred"), ("t", "u32")]))


def test_bar_red(rng):
    block, blocks = 192, 6
    n = block * blocks
    density = np.repeat([0.0, 1.0, 0.5, 0.01, 0.99, 0.3], block)
    a = (rng.random(n) < density).astype(np.uint8)
    d, q = K.run_elementwise(KS, "bar_red", [a], ["u32", "u32"], rng, block=block)
    per = a.reshape(blocks, block)
    popc = per.sum(axis=1)
    alls = per.all(axis=1).astype(np.uint32)
    any_not = (~per.astype(bool)).any(axis=1).astype(np.uint32)
    K.check_equal(d, np.repeat(popc, block).astype(np.uint32), [a], "bar.red.popc")
    K.check_equal(q, np.repeat(alls | (any_not << 1), block).astype(np.uint32), [a], "bar.red.and/or")


KS.add("producer_consumer", """
.visible .entry producer_consumer(.param .u64 src, .param .u64 dst)
{
.reg .u32 %t, %v, %r;
.reg .u64 %p, %off, %s;
.reg .pred %producer;
.shared .align 4 .u32 box[64];
mov.u32 %t, %tid.x;
setp.lt.u32 %producer, %t, 64;
@!%producer bra $CONSUME;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4; add.u64 %p, %p, %off;
ld.global.u32 %v, [%p];
mul.lo.u32 %v, %v, 3;
mov.u64 %s, box; add.u64 %s, %s, %off;
st.shared.u32 [%s], %v;
bar.arrive 1, 128;
bra.uni $END;
$CONSUME:
bar.sync 1, 128;
sub.u32 %r, %t, 64;
xor.b32 %r, %r, 63;
mul.wide.u32 %off, %r, 4;
mov.u64 %s, box; add.u64 %s, %s, %off;
ld.shared.u32 %v, [%s];
sub.u32 %r, %t, 64;
mul.wide.u32 %off, %r, 4;
ld.param.u64 %p, [dst]; cvta.to.global.u64 %p, %p;
add.u64 %p, %p, %off;
st.global.u32 [%p], %v;
$END:
ret;
}
""")


def test_named_barrier_arrive_then_sync(rng):
    """Warps 0-1 produce and bar.arrive on barrier 1; warps 2-3 bar.sync on it and consume."""
    src = K.rand_ints(rng, "u32", 64)
    dst = K.poison((64,), np.uint32, rng)
    K.launch(KS.kernel("producer_consumer"), 1, 128, [src, dst])
    want = (src.astype(np.uint64) * 3 & 0xFFFFFFFF).astype(np.uint32)[np.arange(64) ^ 63]
    K.check_equal(dst, want, [src], "consumer view")


KS.add("exit_before_barrier", """
.visible .entry exit_before_barrier(.param .u64 src, .param .u64 dst, .param .u32 live)
{
.reg .u32 %t, %v, %r, %nlive;
.reg .u64 %p, %off, %s;
.reg .pred %gone, %again;
.reg .u32 %round;
.shared .align 4 .u32 sbuf[256];
mov.u32 %t, %tid.x;
ld.param.u32 %nlive, [live];
setp.ge.u32 %gone, %t, %nlive;
@%gone exit;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4; add.u64 %p, %p, %off;
ld.global.u32 %v, [%p];
mov.u32 %round, 0;
$ROUND:
mov.u64 %s, sbuf; mul.wide.u32 %off, %t, 4; add.u64 %s, %s, %off;
st.shared.u32 [%s], %v;
bar.sync 0;
add.u32 %r, %t, 1;
rem.u32 %r, %r, %nlive;
mov.u64 %s, sbuf; mul.wide.u32 %off, %r, 4; add.u64 %s, %s, %off;
ld.shared.u32 %r, [%s];
bar.sync 0;
add.u32 %v, %v, %r;
add.u32 %round, %round, 1;
setp.lt.u32 %again, %round, 3;
@%again bra $ROUND;
ld.param.u64 %p, [dst]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4; add.u64 %p, %p, %off;
st.global.u32 [%p], %v;
ret;
}
""")


@pytest.mark.parametrize("live", [1, 40, 64, 200])
def test_exit_releases_barrier(live, rng):
    """Threads >= live exit at once; the others keep meeting at bar.sync (three rounds)."""
    src = rng.integers(0, 1 << 16, 256).astype(np.uint32)
    dst = K.poison((256,), np.uint32, rng)
    before = dst.copy()
    K.launch(KS.kernel("exit_before_barrier"), 1, 256, [src, dst, live])
    v = src[:live].astype(np.uint64)
    for _ in range(3):
        v = v + np.roll(v, -1)
    K.check_equal(dst[:live], (v & 0xFFFFFFFF).astype(np.uint32), [src], "live threads")
    K.check_equal(dst[live:], before[live:], [], "exited threads wrote nothing")


# ---------------------------------------------------------------- many values live across barriers

_K = 16
_vals = "\n".join(f"mad.lo.u32 %v{k}, %a, {2 * k + 3}, {k * 977};" for k in range(_K))
_fold = "\n".join(f"mul.lo.u32 %h, %h, 31;\nadd.u32 %h, %h, %v{k};" for k in range(_K))
KS.add("live_across_barriers", f"""
.visible .entry live_across_barriers(.param .u64 src, .param .u64 out)
{{
.reg .u32 %t, %a, %h, %r, %n, {", ".join(f"%v{k}" for k in range(_K))};
.reg .f32 %f0, %f1;
.reg .f64 %g0;
.reg .u64 %p, %off, %w;
.reg .pred %odd, %more;
.shared .align 4 .u32 scratch[256];
mov.u32 %t, %tid.x;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4; add.u64 %p, %p, %off;
ld.global.u32 %a, [%p];
{_vals}
cvt.rn.f32.u32 %f0, %a;
mul.rn.f32 %f1, %f0, 0f3F000000;
cvt.f64.f32 %g0, %f1;
mul.wide.u32 %w, %a, %a;
and.b32 %r, %a, 1;
setp.eq.u32 %odd, %r, 1;
mov.u32 %n, 0;
$LOOP:
mov.u64 %p, scratch; add.u64 %p, %p, %off;
st.shared.u32 [%p], %n;
bar.sync 0;
add.u32 %v0, %v0, %n;
@%odd add.u32 %v1, %v1, 1;
add.rn.f32 %f1, %f1, 0f3F800000;
bar.sync 0;
add.u32 %n, %n, 1;
setp.lt.u32 %more, %n, 3;
@%more bra $LOOP;
mov.u32 %h, 0;
{_fold}
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 32; add.u64 %p, %p, %off;
st.global.u32 [%p], %h;
st.global.f32 [%p+4], %f1;
st.global.f64 [%p+8], %g0;
st.global.u64 [%p+16], %w;
selp.u32 %r, 1, 0, %odd;
st.global.u32 [%p+24], %r;
ret;
}}
""")


@pytest.mark.parametrize("block", [64, 256])
def test_values_live_across_barriers(block, rng):
    """Sixteen integers, floats, a double, a 64-bit product and a predicate computed before a barrier
    loop must all survive it (the CPU backend saves them per thread between barrier regions)."""
    a = rng.integers(0, 1 << 16, block).astype(np.uint32)
    out = K.poison((block, 8), np.uint32, rng)
    K.launch(KS.kernel("live_across_barriers"), 1, block, [a, out])
    odd = (a & 1) == 1
    v = [(a.astype(np.uint64) * (2 * k + 3) + k * 977) & 0xFFFFFFFF for k in range(_K)]
    v[0] = (v[0] + 0 + 1 + 2) & 0xFFFFFFFF
    v[1] = (v[1] + np.where(odd, np.uint64(3), np.uint64(0))) & 0xFFFFFFFF
    h = np.zeros(block, np.uint64)
    for k in range(_K):
        h = (h * 31 + v[k]) & 0xFFFFFFFF
    f1 = a.astype(np.float32) * np.float32(0.5)
    g0 = f1.astype(np.float64)
    for _ in range(3):
        f1 = (f1 + np.float32(1.0)).astype(np.float32)
    K.check_equal(out[:, 0], h.astype(np.uint32), [a], "integers")
    K.check_equal(out[:, 1], f1.view(np.uint32), [a], "f32")
    K.check_equal(np.ascontiguousarray(out[:, 2:4]).view(np.float64)[:, 0].view(np.uint64), g0.view(np.uint64),
                  [a], "f64")
    K.check_equal(np.ascontiguousarray(out[:, 4:6]).view(np.uint64)[:, 0], a.astype(np.uint64) ** 2, [a], "u64")
    K.check_equal(out[:, 6], odd.astype(np.uint32), [a], "predicate")


KS.add("two_named_groups", """
.visible .entry two_named_groups(.param .u64 src, .param .u64 dst)
{
.reg .u32 %t, %v, %r, %base;
.reg .u64 %p, %off, %s;
.reg .pred %low;
.shared .align 4 .u32 xbuf[128];
mov.u32 %t, %tid.x;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4; add.u64 %p, %p, %off;
ld.global.u32 %v, [%p];
mov.u64 %s, xbuf; add.u64 %s, %s, %off;
st.shared.u32 [%s], %v;
setp.lt.u32 %low, %t, 64;
@%low bra $LOW;
bar.sync 2, 64;
mov.u32 %base, 64;
bra.uni $READ;
$LOW:
bar.sync 1, 64;
mov.u32 %base, 0;
$READ:
sub.u32 %r, %t, %base;
xor.b32 %r, %r, 63;
add.u32 %r, %r, %base;
mul.wide.u32 %off, %r, 4;
mov.u64 %s, xbuf; add.u64 %s, %s, %off;
ld.shared.u32 %v, [%s];
ld.param.u64 %p, [dst]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4; add.u64 %p, %p, %off;
st.global.u32 [%p], %v;
ret;
}
""")


def test_two_named_barriers_with_partial_counts(rng):
    """Warps 0-1 meet at barrier 1 and warps 2-3 at barrier 2 (64 threads each); each half exchanges
    values within itself only."""
    src = K.rand_ints(rng, "u32", 128)
    dst = K.poison((128,), np.uint32, rng)
    K.launch(KS.kernel("two_named_groups"), 3, 128, [src, dst])
    t = np.arange(128)
    base = np.where(t < 64, 0, 64)
    K.check_equal(dst, src[((t - base) ^ 63) + base], [src], "exchange within each group")


# ---------------------------------------------------------------- collectives inside called functions

KS.add("sync_in_callee", """
.shared .align 4 .u32 xch[256];
.func (.param .b32 r) exchange_with_neighbour(.param .b32 v)
{
.reg .u32 %v, %t, %o;
.reg .u64 %s, %off;
ld.param.b32 %v, [v];
mov.u32 %t, %tid.x;
mul.wide.u32 %off, %t, 4;
mov.u64 %s, xch; add.u64 %s, %s, %off;
st.shared.u32 [%s], %v;
bar.sync 0;
xor.b32 %o, %t, 1;
mul.wide.u32 %off, %o, 4;
mov.u64 %s, xch; add.u64 %s, %s, %off;
ld.shared.u32 %v, [%s];
bar.sync 0;
st.param.b32 [r], %v;
ret;
}
.func (.param .b32 r) warp_total(.param .b32 v)
{
.reg .u32 %v, %w, %k;
.reg .pred %more;
ld.param.b32 %v, [v];
mov.u32 %k, 16;
$R:
shfl.sync.bfly.b32 %w, %v, %k, 0x1f, 0xffffffff;
add.u32 %v, %v, %w;
shr.u32 %k, %k, 1;
setp.ne.u32 %more, %k, 0;
@%more bra $R;
st.param.b32 [r], %v;
ret;
}
.visible .entry sync_in_callee(.param .u64 src, .param .u64 dst)
{
.reg .u32 %t, %v, %n;
.reg .u64 %p, %off;
.reg .pred %again;
mov.u32 %t, %tid.x;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4; add.u64 %p, %p, %off;
ld.global.u32 %v, [%p];
mov.u32 %n, 0;
$LOOP:
{
.param .b32 a;
.param .b32 b;
st.param.b32 [a], %v;
call.uni (b), exchange_with_neighbour, (a);
ld.param.b32 %v, [b];
}
add.u32 %v, %v, %n;
add.u32 %n, %n, 1;
setp.lt.u32 %again, %n, 3;
@%again bra $LOOP;
{
.param .b32 a;
.param .b32 b;
st.param.b32 [a], %v;
call.uni (b), warp_total, (a);
ld.param.b32 %v, [b];
}
ld.param.u64 %p, [dst]; cvta.to.global.u64 %p, %p;
add.u64 %p, %p, %off;
st.global.u32 [%p], %v;
ret;
}
""")


def test_barrier_and_shfl_inside_called_functions(rng):
    """bar.sync inside a .func called in a loop, and a shfl loop inside another .func."""
    block = 256
    src = rng.integers(0, 1 << 20, block).astype(np.uint32)
    dst = K.poison((block,), np.uint32, rng)
    K.launch(KS.kernel("sync_in_callee"), 2, block, [src, dst])
    v = src.astype(np.uint64)
    for n in range(3):
        v = v[np.arange(block) ^ 1] + n
    want = np.repeat(v.reshape(-1, 32).sum(axis=1), 32) & 0xFFFFFFFF
    K.check_equal(dst, want.astype(np.uint32), [src], "collectives in callees")
