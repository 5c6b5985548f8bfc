"""Asynchronous copies against numpy: cp.async (every size, zero fill, ignore-src, commit/wait groups),
cp.async.mbarrier.arrive[.noinc] with mbarrier arrivals, the bulk copies with their transaction counts
(complete_tx against arrive.expect_tx, in either order), the bulk store groups, and cp.async.bulk.tensor
1d-5d tiles and im2col boxes, loads and stores, with out-of-bounds fill, element strides and swizzling.

Tensor maps are written here with ptx.tensor_map.pack the way cuTensorMapEncode* writes them
(tests/driver/test_tensor_map.py checks that the driver's maps are these bytes). Hardware reference: the
first tile of scripts/nvidia_tma_probe.cu on an H200 (tests/data/nvidia_tma_answers.json) is matched by
tests/driver/test_tensor_map.py; the rest of the tile and im2col semantics follow the PTX ISA and cuda.h.
"""

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

from ptx import tensor_map as TM

KS = K.KernelSet(target="sm_90")
SMEM = 16384
SLACK = 256


# ------------------------------------------------------------------ cp.async
def _cp_async_kernel(name, kind, size, mode):
    """Each thread copies `size` bytes from src[tid*size] into its slot of shared memory (poisoned first
    with 0xA5 by everyone), waits, and writes its slot to out. mode: plain, zfill (src-size from
    sizes[tid]) or ignore (ignore-src from flags[tid])."""
    extra = {"plain": "", "zfill": ", %ss", "ignore": ", %ig"}[mode]
    return f"""
.visible .entry {name}(.param .u64 out, .param .u64 src, .param .u64 sizes, .param .u64 flags, .param .u32 group)
{{
.reg .u64 %o, %s, %sz, %fl, %a, %off;
.reg .u32 %t, %ss, %v, %sh, %i, %f, %g;
.reg .pred %ig, %p;
.shared .align 16 .b8 buf[4096];
mov.u32 %t, %tid.x;
ld.param.u64 %o, [out]; ld.param.u64 %s, [src]; ld.param.u64 %sz, [sizes]; ld.param.u64 %fl, [flags];
ld.param.u32 %g, [group];
mov.u32 %sh, buf;
mad.lo.u32 %sh, %t, {size}, %sh;
mov.u32 %i, 0;
$POISON:
add.u32 %v, %sh, %i; st.shared.u8 [%v], 165;
add.u32 %i, %i, 1; setp.lt.u32 %p, %i, {size}; @%p bra $POISON;
bar.sync 0;
mul.wide.u32 %off, %t, 4;
add.u64 %a, %sz, %off; ld.global.u32 %ss, [%a];
add.u64 %a, %fl, %off; ld.global.u32 %f, [%a]; setp.ne.u32 %ig, %f, 0;
mul.wide.u32 %off, %t, {size};
add.u64 %a, %s, %off;
cp.async.{kind}.shared.global [%sh], [%a], {size}{extra};
setp.eq.u32 %p, %g, 0;
@%p cp.async.commit_group;
@%p cp.async.wait_group 0;
@!%p cp.async.commit_group;
@!%p cp.async.commit_group;
@!%p cp.async.wait_all;
mov.u32 %i, 0;
$OUT:
add.u32 %v, %sh, %i; ld.shared.u8 %f, [%v];
add.u64 %a, %o, %off; cvt.u64.u32 %s, %i; add.u64 %a, %a, %s; st.global.u8 [%a], %f;
add.u32 %i, %i, 1; setp.lt.u32 %p, %i, {size}; @%p bra $OUT;
ret;
}}"""


CP_CASES = [(k, s, m) for k, sizes in (("ca", (4, 8, 16)), ("cg", (16,))) for s in sizes
            for m in ("plain", "zfill", "ignore")]
for _k, _s, _m in CP_CASES:
    KS.add(f"cp_{_k}_{_s}_{_m}", _cp_async_kernel(f"cp_{_k}_{_s}_{_m}", _k, _s, _m))


@pytest.mark.parametrize("kind,size,mode", CP_CASES)
def test_cp_async(kind, size, mode, rng):
    n = 128
    src = rng.integers(0, 256, n * size, dtype=np.uint8)
    sizes = rng.integers(0, size + 1, n).astype(np.uint32)
    flags = (rng.random(n) < 0.5).astype(np.uint32)
    out = K.poison((n * size,), np.uint8, rng)
    K.launch(KS.kernel(f"cp_{kind}_{size}_{mode}"), 1, n, [out, src, sizes, flags, np.uint32(rng.integers(0, 2))])
    want = src.reshape(n, size).copy()
    cols = np.arange(size)[None, :]
    if mode == "zfill":
        want[cols >= sizes[:, None]] = 0
    elif mode == "ignore":
        want[flags.astype(bool)] = 0
    K.check_equal(out.reshape(n, size), want, [], f"cp.async.{kind} {size} {mode}")


# cp.async.mbarrier.arrive: the .noinc form is one of the phase's arrivals, the plain form none
KS.add("cp_mbar", """
.visible .entry cp_mbar(.param .u64 out, .param .u64 src, .param .u32 noinc, .param .u32 extra)
{
.reg .u64 %o, %s, %a, %off, %st;
.reg .u32 %t, %sh, %v, %n, %e, %cnt, %nt;
.reg .pred %p, %done, %leader;
.shared .align 16 .b8 buf[2048];
.shared .align 8 .b64 bar;
mov.u32 %t, %tid.x; mov.u32 %nt, %ntid.x;
ld.param.u64 %o, [out]; ld.param.u64 %s, [src]; ld.param.u32 %n, [noinc]; ld.param.u32 %e, [extra];
setp.eq.u32 %leader, %t, 0;
// expected arrivals: every thread's mbarrier.arrive, plus its .noinc arrive-on, plus `extra` never made
setp.ne.u32 %p, %n, 0;
selp.u32 %cnt, 2, 1, %p; mul.lo.u32 %cnt, %cnt, %nt; add.u32 %cnt, %cnt, %e;
@%leader mbarrier.init.shared.b64 [bar], %cnt;
bar.sync 0;
mul.wide.u32 %off, %t, 16; add.u64 %a, %s, %off;
mov.u32 %sh, buf; mad.lo.u32 %sh, %t, 16, %sh;
cp.async.cg.shared.global [%sh], [%a], 16;
@%p cp.async.mbarrier.arrive.noinc.shared.b64 [bar];
@!%p cp.async.mbarrier.arrive.shared.b64 [bar];
mbarrier.arrive.shared.b64 %st, [bar];
bar.sync 0;
mbarrier.test_wait.parity.shared.b64 %done, [bar], 0;
selp.u32 %v, 1, 0, %done;
mul.wide.u32 %off, %t, 20; add.u64 %a, %o, %off;
st.global.u32 [%a], %v;
// the data, read after the phase (or the barrier) as a consumer would
ld.shared.v4.u32 {%v, %n, %e, %cnt}, [%sh];
st.global.u32 [%a+4], %v; st.global.u32 [%a+8], %n; st.global.u32 [%a+12], %e; st.global.u32 [%a+16], %cnt;
ret;
}""")


@pytest.mark.parametrize("noinc", [0, 1])
@pytest.mark.parametrize("extra", [0, 1])
def test_cp_async_mbarrier_arrive(noinc, extra, rng):
    n = 96
    src = rng.integers(0, 2 ** 32, n * 4, dtype=np.uint32)
    out = K.poison((n, 5), np.uint32, rng)
    K.launch(KS.kernel("cp_mbar"), 1, n, [out, src, np.uint32(noinc), np.uint32(extra)])
    K.check_equal(out[:, 0], np.full(n, 0 if extra else 1, np.uint32), [], "phase complete")
    K.check_equal(out[:, 1:], src.reshape(n, 4), [], "copied data")


# ------------------------------------------------------------------ bulk copies
KS.add("bulk", """
.visible .entry bulk(.param .u64 out, .param .u64 src, .param .u64 dst, .param .u32 nbytes, .param .u32 expect,
                     .param .u32 order, .param .u32 mask)
{
.reg .u64 %o, %s, %d, %a, %off, %st;
.reg .u32 %t, %nb, %ex, %ord, %half, %v, %i, %sh, %m;
.reg .b16 %mk;
.reg .pred %p, %leader, %done, %first;
.shared .align 128 .b8 buf[8192];
.shared .align 8 .b64 bar;
mov.u32 %t, %tid.x;
ld.param.u64 %o, [out]; ld.param.u64 %s, [src]; ld.param.u64 %d, [dst];
ld.param.u32 %nb, [nbytes]; ld.param.u32 %ex, [expect]; ld.param.u32 %ord, [order]; ld.param.u32 %m, [mask];
cvt.u16.u32 %mk, %m;
setp.eq.u32 %leader, %t, 0;
mov.u32 %i, %t;
$POISON:
setp.lt.u32 %p, %i, 8192; @!%p bra $POISONED;
mov.u32 %sh, buf; add.u32 %sh, %sh, %i; st.shared.u8 [%sh], 90;
add.u32 %i, %i, 128; bra $POISON;
$POISONED:
@%leader mbarrier.init.shared.b64 [bar], 1;
fence.proxy.async.shared::cta;
bar.sync 0;
@!%leader bra $WAIT;
// two copies of half the bytes each; order 0: expect_tx first, 1: the copies complete first
shr.u32 %half, %nb, 1;
and.b32 %half, %half, -16;
setp.eq.u32 %first, %ord, 0;
@%first mbarrier.arrive.expect_tx.shared.b64 %st, [bar], %ex;
mov.u32 %sh, buf;
cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%sh], [%s], %half, [bar];
add.u32 %sh, %sh, %half; cvt.u64.u32 %off, %half; add.u64 %a, %s, %off; sub.u32 %v, %nb, %half;
cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%sh], [%a], %v, [bar], %mk;
@!%first mbarrier.arrive.expect_tx.shared.b64 %st, [bar], %ex;
$WAIT:
bar.sync 0;
mbarrier.test_wait.parity.shared.b64 %done, [bar], 0;
selp.u32 %v, 1, 0, %done;
mul.wide.u32 %off, %t, 4; add.u64 %a, %o, %off; st.global.u32 [%a], %v;
// shared -> global: the whole buffer region as one bulk group
@!%leader bra $END;
mov.u32 %sh, buf;
add.u32 %v, %nb, 64;
cp.async.bulk.global.shared::cta.bulk_group [%d], [%sh], %v;
cp.async.bulk.prefetch.L2.global [%s], %nb;
cp.async.bulk.commit_group;
cp.async.bulk.wait_group.read 0;
cp.async.bulk.wait_group 0;
$END:
ret;
}""")


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("short", [0, 16])
@pytest.mark.parametrize("mask", [1, 3, 2])
def test_bulk_copy_transactions(order, short, mask, rng):
    nbytes = int(rng.integers(4, 400)) * 16
    src = rng.integers(0, 256, nbytes, dtype=np.uint8)
    dst = K.poison((nbytes + 64,), np.uint8, rng)
    out = K.poison((128,), np.uint32, rng)
    half = (nbytes // 2) & ~15
    copied = nbytes if mask & 1 else half
    expect = copied + short
    K.launch(KS.kernel("bulk"), 1, 128, [out, src, dst, np.uint32(nbytes), np.uint32(expect), np.uint32(order),
                                        np.uint32(mask)])
    complete = short == 0
    K.check_equal(out, np.full(128, int(complete), np.uint32), [], "phase complete once every byte arrived")
    want = np.full(nbytes + 64, 90, np.uint8)
    want[:copied] = src[:copied]
    K.check_equal(dst, want, [], "shared memory written back by the bulk store")


# ------------------------------------------------------------------ tensor maps and their numpy model
ELEM = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
NAN = {2: 0x7FFF, 4: 0x7FFFFFFF, 8: 0x7FFFFFFFFFFFFFFF}
SPAN = {1: 32, 2: 64, 3: 128}


def tiled_map(addr, esize, dims, strides, box, es, swizzle=0, nan=False):
    """The map cuTensorMapEncodeTiled writes (interleave none: no stride along dimension 0)."""
    rank = len(dims)
    es = [1] + list(es[1:])
    counts = [-(-b // e) for b, e in zip(box, es)]
    pad = 5 - rank
    return TM.pack(addr=addr, dims=list(dims) + [1] * pad, strides=[esize] + list(strides) + [0] * pad,
                   fill=NAN[esize] if nan else 0, counts=counts + [1] * pad, estrides=es + [1] * pad, rank=rank,
                   elem=esize, swizzle=swizzle, mode=TM.MODE_TILE, interleave=0), counts


def im2col_map(addr, esize, dims, strides, lower, upper, channels, pixels, es, swizzle=0, nan=False):
    rank = len(dims)
    sp = rank - 2
    pos = [(dims[1 + s] - 1 + upper[s] - lower[s]) // es[1 + s] + 1 for s in range(sp)]
    pad = 3 - sp
    raw = TM.pack(addr=addr, dims=[dims[0]] + list(dims[1:-1]) + [1] * pad + [dims[-1]],
                  strides=[esize] + list(strides[:sp]) + [0] * pad + [strides[-1]],
                  fill=NAN[esize] if nan else 0, counts=[channels] + pos + [1] * pad + [0],
                  estrides=[1] + list(es[1:-1]) + [1] * pad + [es[-1]], rank=rank, elem=esize, swizzle=swizzle,
                  mode=TM.MODE_IM2COL, interleave=0, lower=list(lower) + [0] * pad, pixels=pixels)
    return raw, pos


def swizzled(offsets, base, swizzle):
    """Shared-memory byte positions (relative to the box) of box byte offsets: 16-byte chunks XORed with
    bits 7.. of the shared address, within 32/64/128-byte spans."""
    if not swizzle:
        return offsets
    a = base + offsets
    mask = (1 << swizzle) - 1
    return (a ^ (((a >> 7) & mask) << 4)) - base


def tensor(rng, esize, dims, pad_bytes):
    """Random elements; rows (dimension 1's stride) padded by pad_bytes, a multiple of 16."""
    row = -(-dims[0] * esize // 16) * 16 + pad_bytes
    strides = []
    s = row
    for d in dims[1:]:
        strides.append(s)
        s *= d
    total = s if len(dims) > 1 else row
    data = rng.integers(0, 256, total, dtype=np.uint8)
    return data, strides


def ref_tile(data, esize, dims, strides, counts, es, coords, fill):
    """(element bytes of the box in order, in-bounds mask, global byte addresses) of a tile."""
    rank = len(dims)
    es = [1] + list(es[1:])
    idx = np.indices(counts[::-1]).reshape(rank, -1)[::-1]       # slot 0 fastest
    g = np.array(coords, np.int64)[:, None] + idx * np.array(es, np.int64)[:, None]
    inb = np.all((g >= 0) & (g < np.array(dims, np.int64)[:, None]), axis=0)
    st = np.array([esize] + list(strides), np.int64)[:, None]
    addr = np.where(inb, (g * st).sum(axis=0), 0)
    return inb, addr


def gather(data, esize, inb, addr, fill):
    n = len(addr)
    out = np.empty((n, esize), np.uint8)
    cols = addr[:, None] + np.arange(esize)[None, :]
    out[inb] = data[cols[inb]]
    out[~inb] = np.frombuffer(int(fill).to_bytes(8, "little")[:esize], np.uint8)
    return out.reshape(-1)


def ref_im2col(esize, dims, strides, lower, pos, channels, pixels, es, coords, offsets):
    rank = len(dims)
    sp = rank - 2
    cnt = list(pos) + [1] * (3 - sp)
    low = list(lower) + [0] * (3 - sp)
    est = list(es[1:-1]) + [1] * (3 - sp)
    c = list(coords[1:-1]) + [0] * (3 - sp)
    off = list(offsets) + [0] * (3 - sp)
    first = coords[-1]
    for s in (2, 1, 0):
        first = first * cnt[s] + (c[s] - low[s]) // est[s]
    L = first + np.arange(pixels, dtype=np.int64)
    g = []
    for s in range(3):
        i = L % cnt[s]
        L = L // cnt[s]
        g.append(low[s] + i * est[s] + off[s])
    n = L
    gd = [coords[0] + np.arange(channels)[None, :]] + [x[:, None] for x in g[:sp]] + [n[:, None]]
    inb = np.ones((pixels, channels), bool)
    addr = np.zeros((pixels, channels), np.int64)
    st = [esize] + list(strides)
    for k, (gk, dk) in enumerate(zip(gd, dims)):
        inb &= (gk >= 0) & (gk < dk)
        addr = addr + gk * st[k]
    return inb.reshape(-1), np.where(inb, addr, 0).reshape(-1)


def _load_kernel(name, rank, im2col):
    cs = ", ".join(f"%c{k}" for k in range(rank))
    mode = "im2col" if im2col else "tile"
    offs = ""
    if im2col:
        offs = ", {" + ", ".join(f"%h{s}" for s in range(rank - 2)) + "}"
    return f"""
.visible .entry {name}(.param .u64 out, .param .align 64 .b8 tmap[128], .param .u64 co, .param .u32 box_bytes,
                       .param .u32 smem_off, .param .u32 dump)
{{
.reg .u64 %o, %c, %a, %off, %st, %tm;
.reg .u32 %t, %bb, %so, %du, %i, %sh, %v, %dst, %c0, %c1, %c2, %c3, %c4, %w;
.reg .b16 %h0, %h1, %h2;
.reg .pred %p, %leader, %done;
.shared .align 1024 .b8 sm[{SMEM}];
.shared .align 8 .b64 bar;
mov.u32 %t, %tid.x;
ld.param.u64 %o, [out]; ld.param.u64 %c, [co];
ld.param.u32 %bb, [box_bytes]; ld.param.u32 %so, [smem_off]; ld.param.u32 %du, [dump];
ld.global.u32 %c0, [%c]; ld.global.u32 %c1, [%c+4]; ld.global.u32 %c2, [%c+8]; ld.global.u32 %c3, [%c+12];
ld.global.u32 %c4, [%c+16];
ld.global.u32 %w, [%c+20]; cvt.u16.u32 %h0, %w;
ld.global.u32 %w, [%c+24]; cvt.u16.u32 %h1, %w;
ld.global.u32 %w, [%c+28]; cvt.u16.u32 %h2, %w;
setp.eq.u32 %leader, %t, 0;
mov.u32 %i, %t;
$POISON:
setp.lt.u32 %p, %i, {SMEM}; @!%p bra $POISONED;
mov.u32 %sh, sm; add.u32 %sh, %sh, %i; st.shared.u8 [%sh], 165;
add.u32 %i, %i, 128; bra $POISON;
$POISONED:
@%leader mbarrier.init.shared.b64 [bar], 1;
fence.proxy.async.shared::cta;
bar.sync 0;
mov.u32 %dst, sm; add.u32 %dst, %dst, %so;
mov.u64 %tm, tmap;
@%leader mbarrier.arrive.expect_tx.shared.b64 _, [bar], %bb;
@%leader cp.async.bulk.tensor.{rank}d.shared::cluster.global.{mode}.mbarrier::complete_tx::bytes [%dst], [%tm, {{{cs}}}], [bar]{offs};
$SPIN:
mbarrier.try_wait.parity.shared.b64 %done, [bar], 0;
@!%done bra $SPIN;
mov.u32 %i, %t;
$DUMP:
setp.lt.u32 %p, %i, %du; @!%p bra $END;
add.u32 %sh, %dst, %i; ld.shared.u8 %v, [%sh];
cvt.u64.u32 %off, %i; add.u64 %a, %o, %off; st.global.u8 [%a], %v;
add.u32 %i, %i, 128; bra $DUMP;
$END:
ret;
}}"""


def _store_kernel(name, rank):
    cs = ", ".join(f"%c{k}" for k in range(rank))
    return f"""
.visible .entry {name}(.param .u64 box, .param .align 64 .b8 tmap[128], .param .u64 co, .param .u32 box_bytes,
                       .param .u32 smem_off)
{{
.reg .u64 %b, %c, %a, %off;
.reg .u32 %t, %bb, %so, %i, %sh, %v, %src, %c0, %c1, %c2, %c3, %c4;
.reg .pred %p;
.shared .align 1024 .b8 sm[{SMEM}];
mov.u32 %t, %tid.x;
ld.param.u64 %b, [box]; ld.param.u64 %c, [co];
ld.param.u32 %bb, [box_bytes]; ld.param.u32 %so, [smem_off];
ld.global.u32 %c0, [%c]; ld.global.u32 %c1, [%c+4]; ld.global.u32 %c2, [%c+8]; ld.global.u32 %c3, [%c+12];
ld.global.u32 %c4, [%c+16];
mov.u32 %src, sm; add.u32 %src, %src, %so;
mov.u32 %i, %t;
$FILL:
setp.lt.u32 %p, %i, %bb; @!%p bra $FILLED;
cvt.u64.u32 %off, %i; add.u64 %a, %b, %off; ld.global.u8 %v, [%a];
add.u32 %sh, %src, %i; st.shared.u8 [%sh], %v;
add.u32 %i, %i, 128; bra $FILL;
$FILLED:
fence.proxy.async.shared::cta;
bar.sync 0;
setp.ne.u32 %p, %t, 0;
@%p bra $END;
cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group [tmap, {{{cs}}}], [%src];
cp.async.bulk.commit_group;
cp.async.bulk.wait_group 0;
$END:
ret;
}}"""


for _r in range(1, 6):
    KS.add(f"tile_load_{_r}d", _load_kernel(f"tile_load_{_r}d", _r, False))
    KS.add(f"tile_store_{_r}d", _store_kernel(f"tile_store_{_r}d", _r))
for _r in range(3, 6):
    KS.add(f"im2col_load_{_r}d", _load_kernel(f"im2col_load_{_r}d", _r, True))


def _random_tile(rng, rank, esize, swizzle, box_limit=4096):
    """dims, box, element strides and coordinates (some boxes partly or wholly outside the tensor)."""
    while True:
        inner_max = SPAN[swizzle] // esize if swizzle else 64 // esize * 2
        step = 16 // esize
        box0 = int(rng.integers(1, max(2, inner_max // step + 1))) * step
        box = [box0] + [int(rng.integers(1, 6)) for _ in range(rank - 1)]
        es = [int(rng.integers(1, 4)) for _ in range(rank)]
        counts = [box[0]] + [-(-b // e) for b, e in zip(box[1:], es[1:])]
        if int(np.prod(counts)) * esize <= box_limit:
            break
    dims = [int(rng.integers(1, 3 * box0))] + [int(rng.integers(1, 9)) for _ in range(rank - 1)]
    coords = [int(rng.integers(-b - 2, d + 2)) for b, d in zip(box, dims)]
    return dims, box, es, coords


def _coords_buf(coords, offsets=()):
    c = list(coords) + [0] * (5 - len(coords)) + list(offsets) + [0] * (3 - len(offsets))
    return np.array([x & 0xFFFFFFFF for x in c], np.uint32)


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("esize", [1, 2, 4, 8])
def test_tile_load(rank, esize, rng):
    for _ in range(4):
        swizzle = int(rng.integers(0, 4)) if rank > 1 else 0
        dims, box, es, coords = _random_tile(rng, rank, esize, swizzle)
        data, strides = tensor(rng, esize, dims, int(rng.integers(0, 3)) * 16)
        nan = esize > 1 and rng.random() < 0.5
        raw, counts = tiled_map(data.ctypes.data, esize, dims, strides, box, es, swizzle, nan)
        box_bytes = int(np.prod(counts)) * esize
        smem_off = int(rng.choice([0, 1024, 2048])) if swizzle else int(rng.integers(0, 16)) * 128
        out = K.poison((box_bytes + SLACK,), np.uint8, rng)
        K.launch(KS.kernel(f"tile_load_{rank}d"), 1, 128,
                 [out, raw, _coords_buf(coords), np.uint32(box_bytes), np.uint32(smem_off), np.uint32(len(out))])
        inb, addr = ref_tile(data, esize, dims, strides, counts, es, coords, 0)
        elems = gather(data, esize, inb, addr, NAN[esize] if nan else 0)
        want = np.full(box_bytes + SLACK, 165, np.uint8)
        want[swizzled(np.arange(box_bytes), smem_off, swizzle)] = elems
        K.check_equal(out, want, [], f"tile {rank}d e{esize} dims={dims} box={box} es={es} c={coords} swz={swizzle}")


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_tile_store(rank, rng):
    for _ in range(4):
        esize = int(rng.choice([1, 2, 4, 8]))
        swizzle = int(rng.integers(0, 4)) if rank > 1 else 0
        dims, box, es, coords = _random_tile(rng, rank, esize, swizzle)
        data, strides = tensor(rng, esize, dims, 16)
        raw, counts = tiled_map(data.ctypes.data, esize, dims, strides, box, es, swizzle)
        box_bytes = int(np.prod(counts)) * esize
        smem_off = int(rng.choice([0, 1024]))
        # a swizzled box whose rows are narrower than the span leaves holes and ends inside its last line
        fill = -(-box_bytes // 128) * 128
        box_data = rng.integers(0, 256, fill, dtype=np.uint8)
        before = data.copy()
        K.launch(KS.kernel(f"tile_store_{rank}d"), 1, 128,
                 [box_data, raw, _coords_buf(coords), np.uint32(fill), np.uint32(smem_off)])
        inb, addr = ref_tile(before, esize, dims, strides, counts, es, coords, 0)
        # the element at box offset k sits at the swizzled position in shared memory
        pos = swizzled(np.arange(box_bytes), smem_off, swizzle).reshape(-1, esize)
        elems = box_data[pos]
        want = before.copy()
        cols = addr[inb][:, None] + np.arange(esize)[None, :]
        want[cols] = elems[inb]
        K.check_equal(data, want, [], f"store {rank}d e{esize} dims={dims} box={box} es={es} c={coords}")


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_im2col_load(rank, rng):
    for _ in range(4):
        esize = int(rng.choice([2, 4]))
        sp = rank - 2
        channels = int(rng.integers(1, 5)) * (16 // esize)
        dims = [channels + int(rng.integers(0, 8))] + [int(rng.integers(2, 7)) for _ in range(sp)] + \
            [int(rng.integers(1, 4))]
        lim = {3: 4, 4: 3, 5: 2}[rank]
        lower = [int(rng.integers(-lim, 1)) for _ in range(sp)]
        upper = [int(rng.integers(-lim, lim)) for _ in range(sp)]
        upper = [max(u, lo - d + 1) for u, lo, d in zip(upper, lower, dims[1:-1])]
        es = [1] + [int(rng.integers(1, 3)) for _ in range(sp)] + [1]
        pixels = int(rng.integers(1, 40))
        data, strides = tensor(rng, esize, dims, 0)
        swizzle = int(rng.integers(0, 4)) if channels * esize <= 32 else 0
        nan = rng.random() < 0.5
        raw, pos = im2col_map(data.ctypes.data, esize, dims, strides, lower, upper, channels, pixels, es,
                              swizzle, nan)
        # start on the traversal grid of the bounding box, in some image
        start = [lower[s] + int(rng.integers(0, pos[s])) * es[1 + s] for s in range(sp)]
        coords = [int(rng.integers(0, dims[0] - channels + 1))] + start + [int(rng.integers(0, dims[-1]))]
        offsets = [int(rng.integers(0, 3)) for _ in range(sp)]
        box_bytes = pixels * channels * esize
        if box_bytes + SLACK > SMEM:
            continue
        out = K.poison((box_bytes + SLACK,), np.uint8, rng)
        K.launch(KS.kernel(f"im2col_load_{rank}d"), 1, 128,
                 [out, raw, _coords_buf(coords, offsets), np.uint32(box_bytes), np.uint32(0), np.uint32(len(out))])
        inb, addr = ref_im2col(esize, dims, strides, lower, pos, channels, pixels, es, coords, offsets)
        elems = gather(data, esize, inb, addr, NAN[esize] if nan else 0)
        want = np.full(box_bytes + SLACK, 165, np.uint8)
        want[swizzled(np.arange(box_bytes), 0, swizzle)] = elems
        K.check_equal(out, want, [], f"im2col {rank}d dims={dims} lower={lower} upper={upper} es={es} "
                                     f"c={coords} off={offsets} px={pixels}")


def test_tensor_copy_of_no_map_traps(rng):
    """A tensor-map operand that no cuTensorMapEncode* wrote stops the launch, as the GPU's illegal
    instruction does, instead of copying from a garbage address."""
    out = K.poison((512 + SLACK,), np.uint8, rng)
    junk = rng.integers(0, 256, 128, dtype=np.uint8).tobytes()
    with pytest.raises(Exception, match="(?i)trap"):
        K.launch(KS.kernel("tile_load_2d"), 1, 128,
                 [out, junk, _coords_buf([0, 0]), np.uint32(512), np.uint32(0), np.uint32(len(out))])


# the spellings and operands compilers emit: .shared::cta, prefetch sizes, a cache policy after the sizes
KS.add("cp_hints", """
.visible .entry cp_hints(.param .u64 out, .param .u64 src, .param .u64 sizes)
{
.reg .u64 %o, %s, %sz, %a, %off, %pol;
.reg .u32 %t, %sh, %ss, %v0, %v1, %v2, %v3;
.shared .align 16 .b8 buf[4096];
mov.u32 %t, %tid.x;
ld.param.u64 %o, [out]; ld.param.u64 %s, [src]; ld.param.u64 %sz, [sizes];
mul.wide.u32 %off, %t, 4; add.u64 %a, %sz, %off; ld.global.u32 %ss, [%a];
mul.wide.u32 %off, %t, 32; add.u64 %a, %s, %off;
mov.u32 %sh, buf; mad.lo.u32 %sh, %t, 32, %sh;
createpolicy.fractional.L2::evict_last.b64 %pol, 1.0;
cp.async.cg.shared::cta.global.L2::cache_hint.L2::128B [%sh], [%a], 16, %ss, %pol;
cp.async.ca.shared.global.L2::cache_hint [%sh+16], [%a+16], 16, %pol;
cp.async.commit_group;
cp.async.wait_all;
add.u64 %a, %o, %off;
ld.shared.v4.u32 {%v0, %v1, %v2, %v3}, [%sh]; st.global.v4.u32 [%a], {%v0, %v1, %v2, %v3};
ld.shared.v4.u32 {%v0, %v1, %v2, %v3}, [%sh+16]; st.global.v4.u32 [%a+16], {%v0, %v1, %v2, %v3};
ret;
}""")


def test_cp_async_cache_hints(rng):
    n = 64
    src = rng.integers(0, 256, n * 32, dtype=np.uint8)
    sizes = rng.integers(0, 17, n).astype(np.uint32)
    out = K.poison((n, 32), np.uint8, rng)
    K.launch(KS.kernel("cp_hints"), 1, n, [out, src, sizes])
    want = src.reshape(n, 32).copy()
    want[:, :16][np.arange(16)[None, :] >= sizes[:, None]] = 0
    K.check_equal(out, want, [], "cp.async with a cache policy")
