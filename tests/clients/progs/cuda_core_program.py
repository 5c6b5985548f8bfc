"""A cuda.core program through the shim: NVRTC compiles C++ to PTX (Program), the driver's cuLink* links it
(Linker: no nvJitLink installed), kernels launch from a stream-ordered allocation, and a graph built by
stream capture (GraphBuilder) replays the launch."""

import ctypes
import sys

import numpy as np
from cuda.core import (Device, LaunchConfig, LegacyPinnedMemoryResource, Linker, LinkerOptions, Program,
                       ProgramOptions, launch)

SOURCE = r"""
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void iota(int *out, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (int)i * 3 - 7;
}
"""

rng = np.random.default_rng()
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


def host_view(buf, dtype, n):
    return np.ctypeslib.as_array((ctypes.c_byte * (n * np.dtype(dtype).itemsize)).from_address(int(buf.handle))).view(dtype)


dev = Device()
dev.set_current()
stream = dev.create_stream()
arch = f"sm_{dev.arch}"
ptx = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=arch)).compile("ptx")
check("nvrtc_ptx", b".entry saxpy" in ptx.code or ".entry saxpy" in str(ptx.code))
linked = Linker(ptx, options=LinkerOptions(arch=arch)).link("cubin")
saxpy, iota = linked.get_kernel("saxpy"), linked.get_kernel("iota")

n = int(rng.integers(5000, 9000))
nbytes = n * 4
pinned_mr = LegacyPinnedMemoryResource()
hx, hy = pinned_mr.allocate(nbytes), pinned_mr.allocate(nbytes)
x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
host_view(hx, np.float32, n)[:] = x
host_view(hy, np.float32, n)[:] = y
dx = dev.memory_resource.allocate(nbytes, stream=stream)     # stream-ordered allocator (memory pool)
dy = dev.memory_resource.allocate(nbytes, stream=stream)
dx.copy_from(hx, stream=stream)
dy.copy_from(hy, stream=stream)
a = np.float32(rng.uniform(-3, 3))
config = LaunchConfig(grid=(n + 127) // 128, block=128)
launch(stream, config, saxpy, a, dx, dy, np.uint32(n))
out = pinned_mr.allocate(nbytes)
host_view(out, np.float32, n)[:] = np.nan
out.copy_from(dy, stream=stream)
stream.sync()
expect = (a * x + y).astype(np.float32)
got = host_view(out, np.float32, n)
check("saxpy", np.allclose(got, expect, rtol=1e-6, atol=1e-6), np.abs(got - expect).max())

di = dev.memory_resource.allocate(nbytes, stream=stream)
builder = dev.create_graph_builder()
builder.begin_building()
launch(builder, config, iota, di, np.uint32(n))
graph = builder.end_building().complete()
host_view(out, np.int32, n)[:] = -1
graph.launch(stream)
out.copy_from(di, stream=stream)
stream.sync()
check("graph_builder_launch", np.array_equal(host_view(out, np.int32, n), np.arange(n, dtype=np.int32) * 3 - 7))

for b in (dx, dy, di):
    b.close(stream)
stream.sync()
sys.exit(1 if failures else 0)
