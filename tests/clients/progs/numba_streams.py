"""numba-cuda streams, events and device arrays through the shim: async copies on two streams ordered by an
event, pinned and mapped host memory, device array slicing/copies, event timing."""

import sys

import numpy as np
from numba import cuda

rng = np.random.default_rng()
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


@cuda.jit
def scale(x, k):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * k


@cuda.jit
def add_into(dst, src):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] += src[i]


n = int(rng.integers(20000, 40000))
a = rng.random(n)
b = rng.random(n)
s1, s2 = cuda.stream(), cuda.stream()
pinned = cuda.pinned_array(n, np.float64)
pinned[:] = a
da = cuda.to_device(pinned, stream=s1)
db = cuda.to_device(b, stream=s2)
scale[(n + 255) // 256, 256, s1](da, 3.0)
done = cuda.event()
done.record(s1)
done.wait(s2)
add_into[(n + 255) // 256, 256, s2](db, da)
out = cuda.pinned_array(n, np.float64)
out[:] = np.nan
db.copy_to_host(out, stream=s2)
s2.synchronize()
check("two_streams_event_order", np.array_equal(out, b + 3.0 * a), out[:3])

start, end = cuda.event(timing=True), cuda.event(timing=True)
start.record(s1)
scale[(n + 255) // 256, 256, s1](da, 0.5)
end.record(s1)
end.synchronize()
ms = cuda.event_elapsed_time(start, end)
check("event_timing", ms >= 0.0 and end.query(), ms)

host = da.copy_to_host()
check("device_array_roundtrip", np.array_equal(host, 1.5 * a), host[:3])

m = rng.integers(0, 1 << 30, (64, 48), dtype=np.int64)
dm = cuda.to_device(m)
sub = dm[5:40:3, 7:30]
check("device_array_slice_copy", np.array_equal(sub.copy_to_host(), m[5:40:3, 7:30]))
dm2 = cuda.device_array_like(m)
dm2.copy_to_device(dm)
check("device_to_device_copy", np.array_equal(dm2.copy_to_host(), m))
z = cuda.device_array(1000, np.float32)
z[:] = 7.5     # a device-side fill through a numba kernel
check("device_array_setitem", np.array_equal(z.copy_to_host(), np.full(1000, 7.5, np.float32)))

mapped = cuda.mapped_array(500, np.float64)
mapped[:] = rng.random(500)
ref = mapped.copy() * 4.0
scale[4, 128](mapped, 4.0)
cuda.synchronize()
check("mapped_array_kernel", np.array_equal(mapped, ref))

sys.exit(1 if failures else 0)
