"""numba-cuda kernels through the shim: vector add, shared-memory reduction with cuda.atomic, warp shuffles,
cuda.local.array, math functions, float16, a grid-wide barrier. Fresh random inputs, poisoned outputs, every element checked."""

import math
import sys

import numpy as np
from numba import cuda, float32, int32

rng = np.random.default_rng()
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


n = int(rng.integers(3000, 5000))
a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
out = cuda.to_device(np.full(n, np.nan, np.float32))
vector_add[(n + 127) // 128, 128](cuda.to_device(a), cuda.to_device(b), out)
got = out.copy_to_host()
check("vector_add", np.array_equal(got, a + b), got[:4])

BLOCK = 128


@cuda.jit
def block_sum(x, total):
    tile = cuda.shared.array(BLOCK, int32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    tile[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    step = BLOCK // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(total, 0, tile[0])


x = rng.integers(-1000, 1000, int(rng.integers(5000, 9000)), dtype=np.int32)
total = cuda.to_device(np.zeros(1, np.int32))
block_sum[(x.size + BLOCK - 1) // BLOCK, BLOCK](cuda.to_device(x), total)
check("shared_reduction_atomic", int(total.copy_to_host()[0]) == int(x.sum()), (total.copy_to_host(), x.sum()))


@cuda.jit
def atomic_max_min(x, res):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.max(res, 0, x[i])
        cuda.atomic.min(res, 1, x[i])


res = cuda.to_device(np.array([-2**31, 2**31 - 1], np.int32))
atomic_max_min[(x.size + 63) // 64, 64](cuda.to_device(x), res)
r = res.copy_to_host()
check("atomic_max_min", r[0] == x.max() and r[1] == x.min(), r)


@cuda.jit
def warp_ops(x, sums, bcast, xors):
    i = cuda.grid(1)
    v = x[i]
    s = v
    offset = 16
    while offset > 0:
        s += cuda.shfl_down_sync(0xFFFFFFFF, s, offset)
        offset //= 2
    lane = cuda.laneid
    if lane == 0:
        sums[i // 32] = s
    bcast[i] = cuda.shfl_sync(0xFFFFFFFF, v, 5)
    xors[i] = cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)


w = rng.integers(-100, 100, 32 * 8, dtype=np.int32)
sums = cuda.to_device(np.full(8, -7, np.int32))
bcast = cuda.to_device(np.full(w.size, -7, np.int32))
xors = cuda.to_device(np.full(w.size, -7, np.int32))
warp_ops[4, 64](cuda.to_device(w), sums, bcast, xors)
warps = w.reshape(8, 32)
check("warp_shfl_down_sum", np.array_equal(sums.copy_to_host(), warps.sum(axis=1)), sums.copy_to_host())
check("warp_shfl_broadcast", np.array_equal(bcast.copy_to_host(), np.repeat(warps[:, 5], 32)))
check("warp_shfl_xor", np.array_equal(xors.copy_to_host(), w.reshape(-1, 2)[:, ::-1].reshape(-1)))

LOCAL = 16


@cuda.jit
def local_reverse(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        buf = cuda.local.array(LOCAL, float32)
        for k in range(LOCAL):
            buf[k] = x[i, k] * 2
        for k in range(LOCAL):
            out[i, k] = buf[LOCAL - 1 - k]


m = rng.random((300, LOCAL), dtype=np.float32)
lo = cuda.to_device(np.full_like(m, np.nan))
local_reverse[5, 64](cuda.to_device(m), lo)
check("local_array", np.array_equal(lo.copy_to_host(), (m * 2)[:, ::-1]))


@cuda.jit
def math_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[0, i] = math.sin(v)
        out[1, i] = math.exp(v)
        out[2, i] = math.sqrt(v)
        out[3, i] = math.log(v)
        out[4, i] = math.atan2(v, 1.5)
        out[5, i] = math.pow(v, 2.5)


xm = rng.uniform(0.1, 10.0, 1000)
mo = cuda.to_device(np.full((6, xm.size), np.nan))
math_kernel[8, 128](cuda.to_device(xm), mo)
ref = np.stack([np.sin(xm), np.exp(xm), np.sqrt(xm), np.log(xm), np.arctan2(xm, 1.5), np.power(xm, 2.5)])
check("math_f64", np.allclose(mo.copy_to_host(), ref, rtol=1e-13, atol=0), np.abs(mo.copy_to_host() - ref).max())


@cuda.jit
def half_fma(a, b, c, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.fp16.hfma(a[i], b[i], c[i])


h = [rng.uniform(-4, 4, 700).astype(np.float16) for _ in range(3)]
ho = cuda.to_device(np.full(700, np.nan, np.float16))
half_fma[6, 128](*[cuda.to_device(v) for v in h], ho)
# hfma rounds once: the float32 product-sum of float16 values is exact, then rounded to float16.
exact = (h[0].astype(np.float64) * h[1].astype(np.float64) + h[2].astype(np.float64)).astype(np.float16)
check("float16_hfma", np.array_equal(ho.copy_to_host(), exact), ho.copy_to_host()[:4])

@cuda.jit
def rotate_rows(table):
    # Each row reads the previous row's neighbour, written by another block: needs the grid-wide barrier
    # (cooperative launch, cudadevrt's cudaCGSynchronize).
    grid = cuda.cg.this_grid()
    i = cuda.grid(1)
    n = table.shape[1]
    for r in range(1, table.shape[0]):
        if i < n:
            table[r, i] = table[r - 1, (i + 1) % n] + 1
        grid.sync()


rows = np.full((12, 256), -1, np.int32)
rows[0] = rng.integers(-1000, 1000, 256)
dr = cuda.to_device(rows)
rotate_rows[4, 64](dr)
ref = rows.copy()
for r in range(1, ref.shape[0]):
    ref[r] = np.roll(ref[r - 1], -1) + 1
check("grid_sync", np.array_equal(dr.copy_to_host(), ref))

sys.exit(1 if failures else 0)
