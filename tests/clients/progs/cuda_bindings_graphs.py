"""cuda.bindings driver calls through the shim: a hand-built graph (memset, memcpy, kernel, host and empty
nodes with dependencies), instantiated and launched twice with a kernel node's parameters changed in the
executable; stream capture across two streams (fork/join by events) into a graph; user objects; IPC memory
handles opened by a spawned child process that writes through them."""

import ctypes
import multiprocessing
import sys

import numpy as np
from cuda.bindings import driver as cu

PTX = rb"""
.version 8.0
.target sm_75
.address_size 64
.visible .entry add_k(.param .u64 p, .param .u32 n, .param .u32 k)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r2, [k];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r7, [%rd4];
    add.s32 %r7, %r7, %r2;
    st.global.u32 [%rd4], %r7;
DONE:
    ret;
}
"""

rng = np.random.default_rng()
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


def ok(result):
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA call failed: {err}")
    return result[1] if len(result) == 2 else result[1:]


class KernelArgs:
    """A kernelParams array (void *[]) whose pointees stay alive with this object."""

    def __init__(self, dptr, n, k):
        self.values = [ctypes.c_uint64(int(dptr)), ctypes.c_uint32(n), ctypes.c_uint32(k)]
        self.array = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in self.values])
        self.address = ctypes.addressof(self.array)


def kernel_params(fn, dptr, n, k, keep):
    args = KernelArgs(dptr, n, k)
    keep.append(args)
    p = cu.CUDA_KERNEL_NODE_PARAMS()
    p.func = fn
    p.gridDimX, p.gridDimY, p.gridDimZ = (n + 127) // 128, 1, 1
    p.blockDimX, p.blockDimY, p.blockDimZ = 128, 1, 1
    p.sharedMemBytes = 0
    p.kernelParams = args.address
    return p


def to_host(dptr, n):
    out = np.full(n, -12345, np.int32)
    ok(cu.cuMemcpyDtoH(out.ctypes.data, dptr, n * 4))
    return out


def child(handle_bytes, n, queue):
    try:
        ok(cu.cuInit(0))
        ctx = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))
        ok(cu.cuCtxSetCurrent(ctx))
        h = cu.CUipcMemHandle()
        ctypes.memmove(h.getPtr(), handle_bytes, 64)
        ptr = ok(cu.cuIpcOpenMemHandle(h, cu.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        seen = to_host(ptr, n)
        ok(cu.cuMemsetD32(int(ptr) + 4 * (n // 2), 0x5A5A5A5A, n - n // 2))
        ok(cu.cuCtxSynchronize())
        ok(cu.cuIpcCloseMemHandle(ptr))
        queue.put(seen.tobytes())
    except Exception as e:  # noqa: BLE001 - reported to the parent
        queue.put(repr(e))


def main():
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    mod = ok(cu.cuModuleLoadData(PTX))
    fn = ok(cu.cuModuleGetFunction(mod, b"add_k"))
    stream = ok(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
    keep = []

    # --- a graph built node by node ------------------------------------------------------------------
    n = int(rng.integers(1000, 3000))
    init = rng.integers(-1000, 1000, n, dtype=np.int32)
    src = ok(cu.cuMemAlloc(n * 4))
    dst = ok(cu.cuMemAlloc(n * 4))
    ok(cu.cuMemcpyHtoD(src, init.ctypes.data, n * 4))
    graph = ok(cu.cuGraphCreate(0))
    ms = cu.CUDA_MEMSET_NODE_PARAMS()
    ms.dst, ms.pitch, ms.value, ms.elementSize, ms.width, ms.height = dst, 0, 0x7F7F7F7F, 4, n, 1
    memset_node = ok(cu.cuGraphAddMemsetNode(graph, None, 0, ms, ctx))
    cp = cu.CUDA_MEMCPY3D()
    cp.srcMemoryType = cp.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    cp.srcDevice, cp.dstDevice = src, dst
    cp.WidthInBytes, cp.Height, cp.Depth = n * 4, 1, 1
    copy_node = ok(cu.cuGraphAddMemcpyNode(graph, [memset_node], 1, cp, ctx))
    k1 = rng.integers(1, 100)
    kernel_node = ok(cu.cuGraphAddKernelNode(graph, [copy_node], 1, kernel_params(fn, dst, n, k1, keep)))
    calls = []
    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda arg: calls.append(arg))
    hp = cu.CUDA_HOST_NODE_PARAMS()
    hp.fn = ctypes.cast(callback, ctypes.c_void_p).value
    hp.userData = 0xC0FFEE
    host_node = ok(cu.cuGraphAddHostNode(graph, [kernel_node], 1, hp))
    empty = ok(cu.cuGraphAddEmptyNode(graph, None, 0))
    ok(cu.cuGraphAddDependencies(graph, [host_node], [empty], None, 1))
    nodes, count = ok(cu.cuGraphGetNodes(graph, 0))
    check("graph_node_count", count == 5, count)
    check("graph_node_type", ok(cu.cuGraphNodeGetType(kernel_node)) == cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL)
    exe = ok(cu.cuGraphInstantiate(graph, 0))
    ok(cu.cuGraphLaunch(exe, stream))
    ok(cu.cuStreamSynchronize(stream))
    check("graph_launch", np.array_equal(to_host(dst, n), init + k1))
    check("graph_host_node", calls == [0xC0FFEE], calls)
    k2 = rng.integers(100, 200)
    ok(cu.cuGraphExecKernelNodeSetParams(exe, kernel_node, kernel_params(fn, dst, n, k2, keep)))
    ok(cu.cuGraphLaunch(exe, stream))
    ok(cu.cuStreamSynchronize(stream))
    check("graph_exec_kernel_node_set_params", np.array_equal(to_host(dst, n), init + k2))
    ok(cu.cuGraphExecDestroy(exe))
    ok(cu.cuGraphDestroy(graph))

    # --- stream capture across two streams ----------------------------------------------------------
    side = ok(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
    fork, join = ok(cu.cuEventCreate(0)), ok(cu.cuEventCreate(0))
    a, b = ok(cu.cuMemAlloc(n * 4)), ok(cu.cuMemAlloc(n * 4))
    ok(cu.cuMemsetD32(a, 0, n))
    ok(cu.cuMemsetD32(b, 0, n))
    ok(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
    check("is_capturing", ok(cu.cuStreamIsCapturing(stream)) ==
          cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE)
    ok(cu.cuMemsetD32Async(a, 5, n, stream))
    ok(cu.cuEventRecord(fork, stream))
    ok(cu.cuStreamWaitEvent(side, fork, 0))
    ok(cu.cuLaunchKernel(fn, (n + 127) // 128, 1, 1, 128, 1, 1, 0, side,
                         ((int(a), n, 10), (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32)), 0))
    ok(cu.cuLaunchKernel(fn, (n + 127) // 128, 1, 1, 128, 1, 1, 0, stream,
                         ((int(b), n, 3), (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32)), 0))
    ok(cu.cuEventRecord(join, side))
    ok(cu.cuStreamWaitEvent(stream, join, 0))
    ok(cu.cuMemcpyDtoDAsync(b, a, (n // 2) * 4, stream))      # the first half of b takes a's values
    status, _id, _graph, _deps, _edges, ndeps = ok(cu.cuStreamGetCaptureInfo(stream))
    check("capture_info", status == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE and ndeps == 1,
          (status, ndeps))
    captured = ok(cu.cuStreamEndCapture(stream))
    check("capture_ran_nothing", not to_host(a, n).any() and not to_host(b, n).any())
    nodes, count = ok(cu.cuGraphGetNodes(captured, 0))
    check("captured_node_count", count == 4, count)
    exe = ok(cu.cuGraphInstantiate(captured, 0))
    ok(cu.cuGraphLaunch(exe, stream))
    ok(cu.cuStreamSynchronize(stream))
    expect_b = np.full(n, 3, np.int32)
    expect_b[:n // 2] = 15
    check("captured_graph_replay", np.array_equal(to_host(a, n), np.full(n, 15, np.int32))
          and np.array_equal(to_host(b, n), expect_b), to_host(b, n)[:4])

    # --- user objects: destroyed when the last reference (the graph's) goes --------------------------
    destroyed = []
    destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda p: destroyed.append(p))
    obj = ok(cu.cuUserObjectCreate(0xBEEF, ctypes.cast(destructor, ctypes.c_void_p).value, 1,
                                   cu.CUuserObject_flags.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC))
    ok(cu.cuGraphRetainUserObject(captured, obj, 1, cu.CUuserObjectRetain_flags.CU_GRAPH_USER_OBJECT_MOVE))
    ok(cu.cuGraphExecDestroy(exe))
    check("user_object_alive", destroyed == [], destroyed)
    ok(cu.cuGraphDestroy(captured))
    check("user_object_destroyed", destroyed == [0xBEEF], destroyed)

    # --- IPC: a child process reads and writes this process's device memory -------------------------
    m = 300000
    data = rng.integers(-2**31, 2**31 - 1, m, dtype=np.int32)
    shared = ok(cu.cuMemAlloc(m * 4))
    ok(cu.cuMemcpyHtoD(shared, data.ctypes.data, m * 4))
    handle = ok(cu.cuIpcGetMemHandle(shared))
    mp = multiprocessing.get_context("spawn")
    queue = mp.Queue()
    proc = mp.Process(target=child, args=(ctypes.string_at(handle.getPtr(), 64), m, queue))
    proc.start()
    reply = queue.get(timeout=120)
    proc.join(60)
    check("ipc_child_reads", isinstance(reply, bytes) and np.array_equal(np.frombuffer(reply, np.int32), data),
          reply if not isinstance(reply, bytes) else "data differs")
    expect = data.copy()
    expect[m // 2:] = 0x5A5A5A5A
    check("ipc_child_writes", np.array_equal(to_host(shared, m), expect))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
