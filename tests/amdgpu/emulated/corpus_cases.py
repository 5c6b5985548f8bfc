"""The samples' kernels (nvcc PTX from ZLUDA_EMU_PTX) on the emulated AMD target and the CPU backend, every
output checked against numpy and the CPU backend; run by tests/amdgpu/test_emulated.py."""

# Sizes are smaller than the samples' own: the emulator runs a few hundred thousand instructions a second.

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kit import Run, exact, poison, ulps, within  # noqa: E402

FULL = os.environ.get("ZLUDA_EMU_FULL") == "1"
_PTX = json.loads(Path(os.environ["ZLUDA_EMU_PTX"]).read_text()) if os.environ.get("ZLUDA_EMU_PTX") else {}


def ptx_of(sample):
    path = _PTX.get(f"samples/{sample}.cu-sm86")
    if path is None:
        pytest.skip(f"no nvcc PTX of samples/{sample}.cu (nvcc missing or ZLUDA_EMU_PTX unset)")
    return Path(path).read_text()


@pytest.fixture
def rng():
    seed = int(os.environ.get("ZLUDA_EMU_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"ZLUDA_EMU_SEED={seed}")
    return np.random.default_rng(seed)


def test_vector_add_full_grid_and_grid_stride(rng):
    t = ptx_of("vector_add")
    n = 3001
    a, b = rng.uniform(-100, 100, n).astype(np.float32), rng.uniform(-100, 100, n).astype(np.float32)
    for grid, block in (((n + 255) // 256, 256), (7, 128)):
        r = Run(t, "vector_add", grid, block, [a, b, poison(rng, n, np.float32), np.int32(n)])
        exact(r, 2, a + b, f"c<<<{grid},{block}>>>")


def test_reduce_sum_and_max(rng):
    t = ptx_of("reduce_shared")
    n, blocks = 9000, 8
    x = rng.integers(-1000000, 1000001, n).astype(np.int32)
    owner = np.arange(n)
    for block in (256, 64):                  # block b sums the chunks of 2*block elements k with k % blocks == b
        r = Run(t, f"_Z10reduce_sumILj{block}EEvPKiPxi", blocks, block, [x, poison(rng, blocks, np.int64),
                                                                         np.int32(n)])
        part = np.bincount((owner // (2 * block)) % blocks, weights=x.astype(np.float64), minlength=blocks)
        exact(r, 1, part.astype(np.int64), f"partial sums (block {block})")
    nb = (n + 127) // 128
    r = Run(t, "reduce_max", nb, 128, [x, poison(rng, nb, np.int32), np.int32(n)], shared_bytes=128 * 4)
    exact(r, 1, [x[b * 128:(b + 1) * 128].max() for b in range(nb)], "block maxima (dynamic shared)")


def test_warp_shuffles(rng):
    t = ptx_of("reduce_warp_shuffle")
    n, block = 2000, 256
    grid = (n + block - 1) // block
    x = rng.integers(-5000, 5001, n).astype(np.int32)
    total = np.zeros(1, np.uint64)
    r = Run(t, "block_sum_atomic", grid, block, [x, total, poison(rng, grid, np.int32), np.int32(n)])
    sums = [int(x[b * block:(b + 1) * block].sum()) for b in range(grid)]
    exact(r, 2, sums, "block sums")
    exact(r, 1, [sum(sums) % (1 << 64)], "atomic total")
    m = 512
    f = (rng.integers(-1000, 1000, m) + rng.random(m)).astype(np.float32)
    r = Run(t, "warp_ops", m // 128, 128, [f, poison(rng, m, np.float32), poison(rng, m, np.int32),
                                           poison(rng, m, np.float32), np.int32(m)])
    w = f.reshape(-1, 32)
    exact(r, 1, np.repeat(w.max(axis=1), 32), "shfl.bfly max")
    exact(r, 2, np.cumsum(w.astype(np.int32), axis=1, dtype=np.int32), "shfl.up prefix")
    exact(r, 3, np.repeat(w[:, 7], 32), "shfl.idx broadcast of lane 7")


def test_scan(rng):
    t = ptx_of("scan")
    n = 2500
    blocks = (n + 511) // 512
    x = rng.integers(0, 1000, n).astype(np.uint32)
    out, totals = poison(rng, n, np.uint32), poison(rng, blocks, np.uint32)
    r1 = Run(t, "scan_blocks", blocks, 256, [x, out, totals, np.int32(n)])
    excl = np.concatenate([np.cumsum(x[b:b + 512], dtype=np.uint32) - x[b:b + 512] for b in range(0, n, 512)])
    exact(r1, 1, excl, "per-block exclusive scan")
    exact(r1, 2, [x[b:b + 512].sum() for b in range(0, n, 512)], "block totals")
    offsets = poison(rng, blocks, np.uint32)
    r2 = Run(t, "scan_blocks", 1, 256, [r1.emu[2], offsets, np.zeros(0, np.uint32), np.int32(blocks)])
    exact(r2, 1, np.cumsum(r1.emu[2], dtype=np.uint32) - r1.emu[2], "scan of the totals (null totals pointer)")
    data = r1.emu[1].copy()
    r3 = Run(t, "add_block_offsets", blocks, 256, [data, r2.emu[1], np.int32(n)])
    exact(r3, 0, np.cumsum(x, dtype=np.uint32) - x, "whole exclusive scan")


def test_histograms_with_shared_atomics(rng):
    t = ptx_of("histogram")
    n = 6000
    d = rng.integers(0, 256, n).astype(np.uint8)
    d[:300] = 17                                            # one hot bin: many atomics on one address
    r = Run(t, "histogram_shared", 8, 256, [d, np.int32(n), np.zeros(256, np.uint32)])
    exact(r, 2, np.bincount(d, minlength=256), "256 bins")
    bins = 1000
    k = rng.integers(0, 65536, n).astype(np.uint16)
    r = Run(t, "histogram_dyn", 4, 128, [k, np.int32(n), np.zeros(bins, np.uint32), np.int32(bins)],
            shared_bytes=bins * 4)
    exact(r, 2, np.bincount(k % bins, minlength=bins), f"{bins} bins in dynamic shared memory")


def test_votes_ballots_and_match_any(rng):
    """Lane 31 decides some of these: its value is chosen apart from the others in half the warps."""
    t = ptx_of("warp_vote")
    n = 512
    v = rng.integers(-100, 101, n).astype(np.int32)
    w = v.reshape(-1, 32)
    even = w[::2, :31]
    even[(even & 3) == 3] -= 1                               # lane 31 alone in its class of v & 3 ...
    np.minimum(even, 90, out=even)
    w[::2, :31] = even
    w[::2, 31] = 99                                          # ... and the only lane making any(v > 90) true
    w[1::4, :31] = 50
    w[1::4, 31] = -99                                        # only lane 31 breaks all(v > -95)
    out = [poison(rng, n // 32, np.uint32), poison(rng, n // 32, np.int32), poison(rng, n // 32, np.int32),
           poison(rng, n, np.int32), poison(rng, n, np.uint32)]
    r = Run(t, "votes", n // 128, 128, [v, *out])
    bits = 1 << np.arange(32, dtype=np.uint64)
    ballot = ((w > 0) * bits).sum(axis=1).astype(np.uint32)
    exact(r, 1, ballot, "ballot(v > 0)")
    exact(r, 2, (w > 90).any(axis=1), "any(v > 90)")
    exact(r, 3, (w > -95).all(axis=1), "all(v > -95)")
    lanes = np.arange(32)
    rank = [[int(((w[i] > 0) == (w[i, j] > 0))[:j].sum()) for j in lanes] for i in range(len(w))]
    exact(r, 4, rank, "rank in its ballot group")
    match = [[int(((w[i] & 3) == (w[i, j] & 3)) @ bits) for j in lanes] for i in range(len(w))]
    exact(r, 5, match, "match.any(v & 3)")
    r = Run(t, "divergent_mask", 1, 256, [poison(rng, 16, np.uint32)])
    exact(r, 0, [0x11111111 if k % 2 == 0 else 0x55555555 for k in range(16)],
          "ballot/activemask in the even lanes")


def test_bit_ops_and_compaction(rng):
    t = ptx_of("warp_vote")
    n = 512
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    x[:4] = [0, 1, 0x80000000, 0xFFFFFFFF]
    out = [poison(rng, n, np.int32), poison(rng, n, np.int32), poison(rng, n, np.int32), poison(rng, n, np.uint32)]
    r = Run(t, "bits", n // 256, 256, [x, *out, np.int32(n)])
    b = [format(int(v), "032b") for v in x]
    exact(r, 1, [s.count("1") for s in b], "popc")
    exact(r, 2, [32 if v == 0 else s.index("1") for s, v in zip(b, x)], "clz")
    exact(r, 3, [0 if v == 0 else 32 - s.rindex("1") for s, v in zip(b, x)], "ffs")
    exact(r, 4, [int(s[::-1], 2) for s in b], "brev")
    v = rng.integers(-50, 51, n).astype(np.int32)
    count = np.zeros(1, np.int32)
    dst = np.full(n, -1000, np.int32)
    r = Run(t, "compact_positive", n // 256, 256, [v, np.int32(n), dst, count])
    keep = v[v > 0]
    exact(r, 3, [len(keep)], "count")
    # where each warp's run lands is the order warps win the atomicAdd: compare the runs as a multiset,
    # and each warp's values in lane order inside its run
    got = r.emu[2][:len(keep)]
    assert sorted(got.tolist()) == sorted(keep.tolist()) and (r.emu[2][len(keep):] == -1000).all()
    runs = {tuple(g[g > 0].tolist()) for g in v.reshape(-1, 32) if (g > 0).any()}
    assert all(any(tuple(got[s:s + len(run)]) == run for s in range(len(got))) for run in runs)


COUNTERS = np.dtype([("add_i", "<i4"), ("add_u", "<u4"), ("add_u64", "<u8"), ("add_f", "<f4"),
                     ("add_d_cas", "<f8"), ("sub_i", "<i4"), ("min_i", "<i4"), ("max_i", "<i4"), ("min_u", "<u4"),
                     ("max_u", "<u4"), ("and_u", "<u4"), ("or_u", "<u4"), ("xor_u", "<u4"), ("inc_u", "<u4"),
                     ("dec_u", "<u4"), ("cas_claims", "<i4")], align=True)


def test_every_atomic_of_the_atomics_sample(rng):
    t = ptx_of("atomics")
    n = 1024
    v = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)
    c = np.zeros(1, COUNTERS)
    c["min_i"], c["max_i"], c["min_u"], c["and_u"] = 2**31 - 1, -2**31, 0xFFFFFFFF, 0xFFFFFFFF
    slots = np.full(97, -1, np.int32)
    exch = np.zeros(n + 1, np.int32)
    exch[n] = -1
    r = Run(t, "atomics_kernel", n // 256, 256, [v, np.int32(n), c, slots, exch])
    i = np.arange(n)
    want = np.zeros(1, COUNTERS)
    want["add_i"] = np.int32(v.astype(np.int64).sum() & 0xFFFFFFFF)
    want["add_u"], want["add_u64"] = (v & 0xFF).sum(), ((v.astype(np.int64) & 0xFFFF) << 20).sum()
    want["add_f"], want["add_d_cas"], want["sub_i"] = (v & 7).sum(), ((v & 3) * 0.5).sum(), -(v & 0xF).sum()
    want["min_i"], want["max_i"] = v.min(), v.max()
    u = v.view(np.uint32) ^ np.uint32(0x80000000)
    want["min_u"], want["max_u"] = u.min(), u.max()
    want["and_u"] = np.bitwise_and.reduce((~(np.uint32(1) << (i & 31).astype(np.uint32))) | (i & ~31).astype(np.uint32))
    want["or_u"] = np.bitwise_or.reduce(np.uint32(1) << (v & 31).astype(np.uint32))
    want["xor_u"] = np.bitwise_xor.reduce(v.view(np.uint32))
    inc = dec = 0
    for _ in range(n):
        inc = 0 if inc >= 1000 else inc + 1
        dec = 999 if dec == 0 or dec > 999 else dec - 1
    want["inc_u"], want["dec_u"], want["cas_claims"] = inc, dec, 97
    exact(r, 2, want, "Counters (order-free results)")
    # which thread wins each CAS slot and where the exchange chain ends depend on the order threads run
    # (the emulator runs waves one after another): both backends are checked for a valid outcome
    for side, (owners, seen) in (("emulated", (r.emu[3], r.emu[4])), ("CPU", (r.cpu[3], r.cpu[4]))):
        assert all(o % 97 == s and 0 <= o < n for s, o in enumerate(owners)), (side, owners)
        assert 0 <= seen[n] < n and seen[seen[n]] == 0, (side, "the last value exchanged in is returned by none")
        assert sorted(seen[:n].tolist()) == [0] + [1] * (n - 1), (side, "every other value returned once")


def test_matmul_tiled(rng):
    t = ptx_of("matmul_tiled")
    m, n, k = 37, 45, 50
    a, b = rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, (k, n)).astype(np.float32)
    grid = ((n + 15) // 16, (m + 15) // 16, 1)
    r = Run(t, "matmul_tiled", grid, (16, 16, 1), [a, b, poison(rng, (m, n), np.float32), np.int32(m),
                                                    np.int32(n), np.int32(k)])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # float32 sums of k products in the kernel's order: within k ulps of the largest partial sum
    bound = k * ulps(np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    within(r, 2, ref, bound, "C = A B (float32 accumulation, bound k ulp of sum |a||b|)")


def test_transposes(rng):
    t = ptx_of("transpose")
    rows, cols = 45, 70
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    r = Run(t, "transpose_naive", ((cols + 15) // 16, (rows + 15) // 16, 1), (16, 16, 1),
            [x, poison(rng, (cols, rows), np.float32), np.int32(rows), np.int32(cols)])
    exact(r, 1, x.T, "naive")
    r = Run(t, "transpose_tiled", ((cols + 31) // 32, (rows + 31) // 32, 1), (32, 8, 1),
            [x, poison(rng, (cols, rows), np.float32), np.int32(rows), np.int32(cols)])
    exact(r, 1, x.T, "tiled through shared memory (padded rows)")


def test_jacobi_stencil(rng):
    t = ptx_of("stencil")
    w, h = 70, 20
    x = rng.uniform(0, 1, (h, w)).astype(np.float32)
    r = Run(t, "jacobi", ((w + 31) // 32, (h + 7) // 8, 1), (32, 8, 1),
            [x, poison(rng, (h, w), np.float32), np.int32(w), np.int32(h)])
    want = x.copy()
    s = (x[1:-1, :-2] + x[1:-1, 2:]) + (x[:-2, 1:-1] + x[2:, 1:-1])     # float32, rounded as the kernel does
    want[1:-1, 1:-1] = s * np.float32(0.25)
    exact(r, 1, want, "one Jacobi step (halo through shared memory)")


def test_bitonic_sort(rng):
    t = ptx_of("bitonic_sort")
    n = 2048
    keys = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    keys[:64] = keys[64]                                     # ties: the values decide
    vals = rng.permutation(n).astype(np.uint32)
    r = Run(t, "sort_shared", n // 1024, 256, [keys.copy(), vals.copy()])
    blocks = []
    for b in range(n // 1024):                               # block b ascending when b is even
        kb, vb = keys[b * 1024:(b + 1) * 1024], vals[b * 1024:(b + 1) * 1024]
        order = np.lexsort((vb, kb))
        blocks.append(order if b % 2 == 0 else order[::-1])
    idx = np.concatenate([o + b * 1024 for b, o in enumerate(blocks)])
    exact(r, 0, keys[idx], "keys after the per-block sorts")
    exact(r, 1, vals[idx], "values after the per-block sorts")
    r = Run(t, "merge_global", n // 2 // 256, 256, [r.emu[0].copy(), r.emu[1].copy(), np.uint32(n), np.uint32(1024)])
    r = Run(t, "merge_shared", n // 1024, 256, [r.emu[0].copy(), r.emu[1].copy(), np.uint32(n)])
    order = np.lexsort((vals, keys))
    exact(r, 0, keys[order], "keys sorted")
    exact(r, 1, vals[order], "values in key order (ties by value)")


def test_dynamic_shared_layouts(rng):
    t = ptx_of("dynamic_shared")
    n, bs = 1000, 96
    x = rng.integers(-10**6, 10**6, n).astype(np.int32)
    r = Run(t, "reverse_segments", (n + bs - 1) // bs, bs, [x, poison(rng, n, np.int32), np.int32(n)],
            shared_bytes=bs * 4)
    exact(r, 1, np.concatenate([x[b:b + bs][::-1] for b in range(0, n, bs)]), "reversed segments")
    B, m = 64, 256
    f = rng.integers(-100, 100, m).astype(np.float32) + np.float32(0.25)
    r = Run(t, "carved", m // B, B, [f, poison(rng, m, np.float64), poison(rng, m, np.int32),
                                      poison(rng, m, np.float32), np.int32(m)], shared_bytes=B * 16)
    blk = f.reshape(-1, B)
    exact(r, 1, (blk[:, ::-1].astype(np.float64) * 2).reshape(-1), "doubles in the first part")
    exact(r, 3, (np.roll(blk, -5, axis=1) + np.float32(1)).reshape(-1), "floats after them")
    exact(r, 2, np.repeat(blk.astype(np.int32).sum(axis=1), B), "static shared total beside them")
    p, elems = 4096, 2048
    q = rng.uniform(-1, 1, p).astype(np.float32)
    r = Run(t, "big_window", p // elems, 256, [q, poison(rng, p, np.float32), np.int32(p), np.int32(elems)],
            shared_bytes=elems * 4)
    qb = q.reshape(-1, elems)
    s = qb.copy()
    s[:, 1:] += qb[:, :-1]
    s[:, :-1] += qb[:, 1:]
    exact(r, 1, s.reshape(-1), f"{elems * 4} bytes of dynamic shared memory")


def test_recursion_and_locals_on_the_stack(rng):
    """Calls that recurse, and a local array passed down by pointer (flat accesses to private memory)."""
    t = ptx_of("templates_recursion")
    n = 128
    v = rng.integers(1, 10**6, n).astype(np.int32)
    outs = [poison(rng, n, np.uint64)] + [poison(rng, n, np.int32) for _ in range(4)]
    r = Run(t, "recursion_kernel", n // 64, 64, [v, *outs, np.int32(n)])
    fact = [int(np.prod(np.arange(1, x % 21 + 1, dtype=object))) if x % 21 > 1 else 1 for x in v]

    def fib(k):
        a, b = 0, 1
        for _ in range(k):
            a, b = b, a + b
        return a

    def digits(x):
        trail = [int(c) for c in str(x)[::-1]]
        p = len(trail)
        for d in trail:
            p = (p * 7 + d) & 0xFFFFFFFF
        return p - (1 << 32) if p >= 1 << 31 else p

    def collatz(x):
        s = 0
        while x != 1:
            x, s = (3 * x + 1 if x & 1 else x // 2), s + 1
        return s
    exact(r, 1, [f % (1 << 64) for f in fact], "factorial (recursive)")
    exact(r, 2, [fib(x % 16) for x in v], "fib (doubly recursive)")
    exact(r, 3, [np.gcd(int(x), 360360) for x in v], "gcd (tail recursive)")
    exact(r, 4, [digits(int(x)) for x in v], "digit path through a local array")
    exact(r, 5, [collatz(int(x) % 10000 + 1) for x in v], "collatz loop")


# ulp bounds of samples/math_float.cu (CUDA's documented maxima), index = the sample's Fn enum
MATH_F32 = ["sinf", "cosf", "tanf", "expf", "exp2f", "exp10f", "logf", "log2f", "log10f", "log1pf", "expm1f",
            "powf", "erff", "erfcf", "sqrtf", "rsqrtf", "cbrtf", "atan2f", "atanf", "asinf", "acosf", "sinhf",
            "coshf", "tanhf", "hypotf", "fmaf", "fmodf", "floorf", "ceilf", "roundf", "truncf", "x/y"]
MAX_ULP = [2, 2, 4, 2, 2, 2, 1, 1, 2, 1, 1, 4, 2, 4, 0, 2, 1, 3, 2, 2, 2, 3, 2, 2, 3, 0, 0, 0, 0, 0, 0, 0]


def test_float_math_library(rng):
    """nvcc's inlined libm (sinf ... x/y): within CUDA's documented ulp bound of the exact value (+0.5 for
    the rounding of that value), on the emulator and on the CPU backend; the two may differ within the sum of
    their bounds (the approximate instructions underneath are not the same code)."""
    import math
    t = ptx_of("math_float")
    n = 256
    x = rng.uniform(-100, 100, n).astype(np.float32)
    y = rng.uniform(-20, 20, n).astype(np.float32)
    x[:4], y[:4] = [0, 1, -1, np.float32(3.14159265)], [0, 1, -1, 0.5]
    r = Run(t, "eval", n // 128, 128, [x, y, poison(rng, (n, 32), np.float32), np.int32(n)])
    a, b = x.astype(np.float64), y.astype(np.float64)
    p = (np.abs(x) + np.float32(1e-3)).astype(np.float64)
    bq, bh = (y * np.float32(0.25)).astype(np.float64), (y * np.float32(0.5)).astype(np.float64)
    b20, b30 = (y / np.float32(20)).astype(np.float64), (y + np.float32(30)).astype(np.float64)
    erf = np.vectorize(math.erf)
    erfc = np.vectorize(math.erfc)
    ref = [np.sin(a), np.cos(a), np.tan(a), np.exp(b), np.exp2(b), 10.0 ** bq, np.log(p), np.log2(p), np.log10(p),
           np.log1p(p), np.expm1(b), p ** bh, erf(b), erfc(bq), np.sqrt(p), 1 / np.sqrt(p), np.cbrt(a),
           np.arctan2(a, b), np.arctan(a), np.arcsin(b20), np.arccos(b20), np.sinh(bq), np.cosh(bq), np.tanh(bq),
           np.hypot(a, b), None, np.fmod(a, b30), np.floor(a), np.ceil(a),
           np.round(x * np.float32(4)).astype(np.float64), np.trunc(a), a / b30]
    ref[29] = np.where(np.abs(ref[29] - (x * np.float32(4)).astype(np.float64)) == 0.5,   # round half away
                       np.trunc((x * np.float32(4)).astype(np.float64)) + np.sign(x), ref[29])
    for f, name in enumerate(MATH_F32):
        if name == "fmaf":          # numpy has no fused multiply-add: exact rationals, rounded once
            from fractions import Fraction
            sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ptx"))
            from ptxkit import round_fraction
            p32 = p.astype(np.float32)
            want = [round_fraction(Fraction(float(u)) * Fraction(float(w)) + Fraction(float(q)), "f32")
                    for u, w, q in zip(x, y, p32)]
            exact(_Column(r, 2, f), 0, want, name)
            continue
        want = ref[f]
        tol = (MAX_ULP[f] + 0.5) * ulps(want.astype(np.float32))
        col = _Column(r, 2, f)
        within(col, 0, want, tol, name, cpu_tol=2 * tol)


class _Column:
    """Output k's column f (out[i * 32 + f]) as an output of its own."""

    def __init__(self, run, k, f):
        self.kernel = run.kernel
        self._out = (np.ascontiguousarray(run.emu[k][:, f]), np.ascontiguousarray(run.cpu[k][:, f]))

    def out(self, _):
        return self._out
