"""Stream capture: between cuStreamBeginCapture and cuStreamEndCapture a stream's work becomes graph nodes
instead of running. A capturing Stream's begin() hands out a CaptureRecorder (the BackendStream interface,
recording), so every enqueuing path of the driver is captured without knowing about capture."""

from __future__ import annotations

import itertools
import threading

from zluda_py import cmem, fastpath
from zluda_py.backends.base import BackendStream
from zluda_py.dispatch import export
from zluda_py.driver import graph as graphmod
from zluda_py.driver.stream import resolve_stream
from zluda_py.errors import (CudaError, CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_INVALID_VALUE,
                             CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
                             CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)

# CUstreamCaptureStatus
STATUS_NONE, STATUS_ACTIVE, STATUS_INVALIDATED = 0, 1, 2
# CUstreamCaptureMode
MODE_GLOBAL, MODE_THREAD_LOCAL, MODE_RELAXED = 0, 1, 2
# CUstreamUpdateCaptureDependencies_flags
ADD_CAPTURE_DEPENDENCIES, SET_CAPTURE_DEPENDENCIES = 0, 1

_ids = itertools.count(1)
_lock = threading.Lock()


class Capture:
    """One capture sequence: the graph it writes, the stream that began it and the streams that joined it."""

    def __init__(self, graph, origin, mode: int, owns_graph: bool):
        self.graph = graph
        self.origin = origin
        self.mode = mode
        self.id = next(_ids)
        self.owns_graph = owns_graph
        self.recorders: list = []
        self.active = True
        graph.capturing = self
        fastpath.capture(1)     # launches and synchronous copies go through Python, which records them

    def attach(self, stream, deps) -> "CaptureRecorder":
        rec = CaptureRecorder(self, stream, deps)
        self.recorders.append(rec)
        stream.capture = rec
        return rec

    def end(self) -> None:
        if self.active:
            fastpath.capture(-1)
        self.active = False
        self.graph.capturing = None
        for rec in self.recorders:
            if rec.stream.capture is rec:
                rec.stream.capture = None


class CaptureRecorder(BackendStream):
    """A capturing stream's view of the backend: each call appends a node that depends on the stream's
    current capture dependencies, and becomes the new one."""

    def __init__(self, capture: Capture, stream, deps):
        self.capture = capture
        self.stream = stream
        self.deps = list(deps)
        self.deps_buffer = self.edges_buffer = None      # C arrays handed out by cuStreamGetCaptureInfo

    def _add(self, node) -> None:
        self.capture.graph.add(node, self.deps)
        self.deps = [node]

    def _op(self, kind, op, *args) -> None:
        self._add(graphmod.backend_op_node(kind, op, args))

    def copy(self, dst, src, size):
        self._op(graphmod.MEMCPY, "copy", dst, src, size)

    def copy_2d(self, dst, dpitch, src, spitch, width, height):
        self._op(graphmod.MEMCPY, "copy_2d", dst, dpitch, src, spitch, width, height)

    def memset(self, ptr, value, elem_size, count, pitch=0, height=1):
        self._op(graphmod.MEMSET, "memset", ptr, value, elem_size, count, pitch, height)

    def launch(self, function, grid, block, shared_bytes, params, cooperative=False):
        # A backend function launched by the driver's own paths (not cuLaunchKernel*, which calls kernel()):
        # `cooperative` is the backend's launch flags, clusters included, replayed as they are.
        self._op(graphmod.KERNEL, "launch", function, tuple(grid), tuple(block), shared_bytes, bytes(params),
                 cooperative)

    def kernel(self, params: dict) -> None:
        """A launch of a driver Function: a kernel node like cuGraphAddKernelNode's (graph.kernel_node)."""
        self._add(graphmod.kernel_node(**params))

    def host_func(self, fn):
        self._op(graphmod.HOST, "host_func", fn)

    def write_value(self, addr, value, size):
        self._op(graphmod.BATCH_MEM_OP, "write_value", addr, value, size)

    def wait_value(self, addr, value, size, op):
        self._op(graphmod.BATCH_MEM_OP, "wait_value", addr, value, size, op)

    def record(self, event):
        # Inside a capture an event marks a point of the graph for other streams to join (fork/join),
        # it does not become a node.
        event.capture_point = (self.capture, list(self.deps))

    def wait(self, event):
        point = getattr(event, "capture_point", None)
        if point is not None and point[0] is self.capture and self.capture.active:
            self.deps = list(dict.fromkeys(self.deps + point[1]))
            return
        # An event recorded outside the capture: the replay waits for its latest record.
        self._op(graphmod.WAIT_EVENT, "wait", event)

    def query(self) -> bool:
        return True     # nothing runs while capturing: no caller may wait for it

    def synchronize(self) -> None:
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "synchronizing a capturing stream")


def join_if_captured(stream, event_backend) -> bool:
    """cuStreamWaitEvent on a stream that is not capturing, for an event recorded inside a capture: the
    stream joins that capture (CUDA's fork pattern). True when it did."""
    point = getattr(event_backend, "capture_point", None)
    if point is None or not point[0].active or stream.capture is not None:
        return False
    point[0].attach(stream, point[1])
    return True


def _capturable(h, per_thread):
    s = resolve_stream(h, per_thread)
    if s.kind == "legacy":
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the legacy default stream cannot be captured")
    return s


def _begin(pt, h, mode, graph=None, deps=()):
    s = _capturable(h, pt)
    if mode not in (MODE_GLOBAL, MODE_THREAD_LOCAL, MODE_RELAXED):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown capture mode {mode}")
    with _lock:
        if s.capture is not None:
            raise CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is already capturing")
        owns = graph is None
        if graph is None:
            graph = graphmod.Graph()
        elif graph.capturing is not None:
            raise CudaError(CUDA_ERROR_ILLEGAL_STATE, "the graph is already being captured into")
        Capture(graph, s, mode, owns).attach(s, deps)


def _end(pt, h, out):
    s = resolve_stream(h, pt, check_sticky=False)
    with _lock:
        rec = s.capture
        # a capture into the caller's graph (cuStreamBeginCaptureToGraph) needs no graph handed back
        if not out and (rec is None or rec.capture.owns_graph):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "phGraph is NULL")
        if rec is None:
            raise CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing")
        cap = rec.capture
        if cap.origin is not s:
            raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture must end on the stream that began it")
        cap.end()
    if out:
        cmem.write_ptr(out, cap.graph.handle)


export("cuStreamBeginCapture")(lambda h: _begin(False, h, MODE_GLOBAL))
export("cuStreamBeginCapture_ptsz")(lambda h: _begin(True, h, MODE_GLOBAL))
export("cuStreamBeginCapture_v2")(lambda h, mode: _begin(False, h, mode))
export("cuStreamBeginCapture_v2_ptsz")(lambda h, mode: _begin(True, h, mode))
export("cuStreamEndCapture")(lambda h, out: _end(False, h, out))
export("cuStreamEndCapture_ptsz")(lambda h, out: _end(True, h, out))


def _begin_to_graph(pt, h, hgraph, deps, dep_data, ndeps, mode):
    g = graphmod.graph_from_handle(hgraph)
    _begin(pt, h, mode, g, graphmod.read_nodes(deps, ndeps))


export("cuStreamBeginCaptureToGraph")(lambda *a: _begin_to_graph(False, *a))
export("cuStreamBeginCaptureToGraph_ptsz")(lambda *a: _begin_to_graph(True, *a))


def _status(s) -> int:
    rec = s.capture
    if rec is None:
        return STATUS_NONE
    return STATUS_ACTIVE if rec.capture.active else STATUS_INVALIDATED


def _is_capturing(pt, h, out):
    s = resolve_stream(h, pt, check_sticky=False)
    cmem.write_u32(out, _status(s), "captureStatus")


export("cuStreamIsCapturing")(lambda h, out: _is_capturing(False, h, out))
export("cuStreamIsCapturing_ptsz")(lambda h, out: _is_capturing(True, h, out))


def _capture_info(pt, h, status_out, id_out, graph_out=0, deps_out=0, edge_out=0, count_out=0):
    s = resolve_stream(h, pt, check_sticky=False)
    if not status_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "captureStatus_out is NULL")
    status = _status(s)
    cmem.write_u32(status_out, status)
    rec = s.capture
    if id_out:
        cmem.write_u64(id_out, rec.capture.id if rec else 0)
    if graph_out:
        cmem.write_ptr(graph_out, rec.capture.graph.handle if rec else 0)
    if deps_out or edge_out:
        addr = edges = 0
        if rec is not None and rec.deps:
            from zluda_py.cmem import ffi
            # The arrays must stay valid until the stream's next capture call: kept on the recorder. Edge
            # data (CUgraphEdgeData, 8 bytes) is all zero: default edges.
            rec.deps_buffer = ffi.new("uint64_t[]", [n.handle for n in rec.deps])
            rec.edges_buffer = ffi.new("uint64_t[]", len(rec.deps))
            addr = int(ffi.cast("uintptr_t", rec.deps_buffer))
            edges = int(ffi.cast("uintptr_t", rec.edges_buffer))
        if deps_out:
            cmem.write_ptr(deps_out, addr)
        if edge_out:
            cmem.write_ptr(edge_out, edges)
    if count_out:
        cmem.write_u64(count_out, len(rec.deps) if rec else 0)


export("cuStreamGetCaptureInfo")(lambda h, st, i: _capture_info(False, h, st, i))
export("cuStreamGetCaptureInfo_ptsz")(lambda h, st, i: _capture_info(True, h, st, i))
export("cuStreamGetCaptureInfo_v2")(lambda h, st, i, g, d, n: _capture_info(False, h, st, i, g, d, 0, n))
export("cuStreamGetCaptureInfo_v2_ptsz")(lambda h, st, i, g, d, n: _capture_info(True, h, st, i, g, d, 0, n))
export("cuStreamGetCaptureInfo_v3")(lambda h, st, i, g, d, e, n: _capture_info(False, h, st, i, g, d, e, n))
export("cuStreamGetCaptureInfo_v3_ptsz")(lambda h, st, i, g, d, e, n: _capture_info(True, h, st, i, g, d, e, n))


def _update_deps(pt, h, deps, ndeps, flags):
    s = resolve_stream(h, pt)
    rec = s.capture
    if rec is None:
        raise CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing")
    nodes = graphmod.read_nodes(deps, ndeps)
    if any(n.graph is not rec.capture.graph for n in nodes):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a dependency is not a node of the capture graph")
    if flags == SET_CAPTURE_DEPENDENCIES:
        rec.deps = nodes
    elif flags == ADD_CAPTURE_DEPENDENCIES:
        rec.deps = list(dict.fromkeys(rec.deps + nodes))
    else:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown flags {flags:#x}")


export("cuStreamUpdateCaptureDependencies")(lambda h, d, n, f: _update_deps(False, h, d, n, f))
export("cuStreamUpdateCaptureDependencies_ptsz")(lambda h, d, n, f: _update_deps(True, h, d, n, f))
export("cuStreamUpdateCaptureDependencies_v2")(lambda h, d, dd, n, f: _update_deps(False, h, d, n, f))
export("cuStreamUpdateCaptureDependencies_v2_ptsz")(lambda h, d, dd, n, f: _update_deps(True, h, d, n, f))
