"""numba-cuda kernels with its device runtime (NRT) on: arrays allocated in the kernel (np.empty, np.arange,
np.ones), slices returned from device functions (reference counts), reshape, NRT's allocation statistics. The NRT
library (nrt.cu, built by NVRTC) reaches its memory through pointers loaded from globals and structs: the
code the compiler's address handling once broke. Fresh random inputs, poisoned outputs, every element checked."""

import os
import sys

os.environ["NUMBA_CUDA_ENABLE_NRT"] = "1"
os.environ["NUMBA_CUDA_NRT_STATS"] = "1"

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from numba.cuda.memory_management import rtsys  # noqa: E402

rng = np.random.default_rng()
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


@cuda.jit
def tail(x):
    return x[5:]


@cuda.jit
def slice_returned(out):
    x = np.empty(10, np.int64)
    for j in range(10):
        x[j] = 100 + j
    y = tail(x)
    out[0] = y[0]
    out[1] = y.size
    out[2] = y[4]


out = cuda.to_device(np.full(3, -7, np.int64))
slice_returned[1, 1](out)
got = out.copy_to_host()
check("slice_returned", list(got) == [105, 5, 109], got)


@cuda.jit
def per_thread_arrays(x, k, out):
    # each thread builds a k-element array of its own, fills it and reduces it
    i = cuda.grid(1)
    if i < x.size:
        buf = np.empty(k, np.float64)
        for j in range(k):
            buf[j] = x[i] * (j + 1)
        s = 0.0
        for j in range(k):
            s += buf[j]
        out[i] = s


n, k = int(rng.integers(200, 400)), int(rng.integers(3, 9))
x = rng.random(n)
out = cuda.to_device(np.full(n, np.nan))
rtsys.initialize()
rtsys.memsys_enable_stats()
before = rtsys.get_allocation_stats()
per_thread_arrays[(n + 63) // 64, 64](cuda.to_device(x), k, out)
cuda.synchronize()
after = rtsys.get_allocation_stats()
got = out.copy_to_host()
want = x * (k * (k + 1) / 2)
check("per_thread_arrays", np.allclose(got, want, rtol=1e-12, atol=0), (got[:4], want[:4]))
d = {f: getattr(after, f) - getattr(before, f) for f in ("alloc", "free", "mi_alloc", "mi_free")}
check("per_thread_arrays_stats", d == {"alloc": n, "free": n, "mi_alloc": n, "mi_free": n}, d)


@cuda.jit
def arange_first():
    x = np.arange(10)[0]  # noqa: F841


before = rtsys.get_allocation_stats()
arange_first[1, 1]()
cuda.synchronize()
after = rtsys.get_allocation_stats()
d = {f: getattr(after, f) - getattr(before, f) for f in ("alloc", "free", "mi_alloc", "mi_free")}
check("arange_stats", d == {"alloc": 1, "free": 1, "mi_alloc": 1, "mi_free": 1}, d)


@cuda.jit
def ones_then_arange(out):
    tmp = np.ones(3)
    arr = np.arange(5 * tmp[0])
    out[0] = arr.size
    out[1] = arr[4]


out = cuda.to_device(np.full(2, np.nan))
stats_off_before = rtsys.get_allocation_stats()
rtsys.memsys_disable_stats()
ones_then_arange[1, 1](out)
cuda.synchronize()
rtsys.memsys_enable_stats()
check("stats_disabled_unchanged", rtsys.get_allocation_stats() == stats_off_before,
      (rtsys.get_allocation_stats(), stats_off_before))
got = out.copy_to_host()
check("ones_then_arange", list(got) == [5.0, 4.0], got)
before = rtsys.get_allocation_stats()
ones_then_arange[1, 1](out)
cuda.synchronize()
after = rtsys.get_allocation_stats()
d = {f: getattr(after, f) - getattr(before, f) for f in ("alloc", "free", "mi_alloc", "mi_free")}
check("ones_then_arange_stats", d == {"alloc": 2, "free": 2, "mi_alloc": 2, "mi_free": 2}, d)



@cuda.jit
def reshape_same(out):
    # numba's reshape checks the new shape in the kernel and traps on a mismatch (the NRT suite's
    # test_nrt_toggle_enabled): it trapped when the compiler gave an address the wrong base pointer
    out = out.reshape(out.shape)
    out[0] = 1


out = cuda.to_device(np.full(1, np.nan))
reshape_same[1, 1](out)
got = out.copy_to_host()
check("reshape_same", list(got) == [1.0], got)


@cuda.jit
def reshape_copy(arr, newshape, got):
    y = arr.reshape(newshape)
    for i in range(y.shape[0]):
        got[i] = y[i]


m = int(rng.integers(20, 60))
arr = rng.integers(-1000, 1000, m)
got = cuda.to_device(np.full(m, -1, arr.dtype))
reshape_copy[1, 1](arr, (m,), got)
check("reshape_copy", np.array_equal(got.copy_to_host(), arr), got.copy_to_host())

sys.exit(1 if failures else 0)
