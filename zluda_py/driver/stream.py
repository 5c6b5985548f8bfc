"""Streams: CUstream handles over backend streams, with CUDA's default-stream rules layered on top.

The legacy default stream (handle 0 or CU_STREAM_LEGACY) waits for prior work of every blocking stream of
its context, and blocking streams wait for prior legacy work; CU_STREAM_NON_BLOCKING streams and nothing
else are exempt. The per-thread default stream (CU_STREAM_PER_THREAD, or handle 0 in a _ptsz/_ptds entry
point) is an ordinary blocking stream private to (thread, context).

For other driver modules:
    resolve_stream(h, per_thread=False)  -> Stream (h: 0 / 0x1 / 0x2 / a handle)
    stream.begin()                       -> the BackendStream, after CUDA's implicit waits: enqueue on it
    stream.launch(fn, grid, block, shared, params, cooperative)   a backend kernel launch in stream order
    default_stream(per_thread)           -> the stream synchronous calls (cuMemcpy...) are ordered on
"""

from __future__ import annotations

import itertools
import threading

from zluda_py import cmem, fastpath, handles
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, init
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY

CU_STREAM_LEGACY = 0x1
CU_STREAM_PER_THREAD = 0x2
CU_STREAM_NON_BLOCKING = 0x1
CU_EVENT_DISABLE_TIMING = 0x2

_ids = itertools.count(1)
_tls = threading.local()


class Stream:
    """kind: 'user' (has a handle), 'legacy' (handle 0x1), 'per_thread' (handle 0x2).
    `capture` is the CaptureRecorder (driver/capture.py) while the stream is being captured."""

    capture = None
    _counted_busy = False     # counted in the C fast path's busy-stream count

    def __init__(self, ctx, flags: int = 0, priority: int = 0, kind: str = "user"):
        self.ctx = ctx
        self.flags = flags
        self.priority = priority
        self.kind = kind
        self.id = next(_ids)
        self.generation = ctx.generation
        self.backend = init.BACKEND.stream_create(ctx.device, flags, priority)
        self.backend.on_fault = self._on_fault
        self.blocking = kind != "legacy" and not flags & CU_STREAM_NON_BLOCKING
        if kind == "user":
            handles.new(self)
            ctx.streams.add(self)
        else:
            self.handle = CU_STREAM_LEGACY if kind == "legacy" else CU_STREAM_PER_THREAD
        # Known to the shim's fast path, which launches on it and counts it busy without Python: the
        # context then asks it whenever its count says some stream may be busy (context.busy_list).
        counter = self.backend.register(ctx.handle, self.handle, self.blocking,
                                        threading.get_ident() if kind == "per_thread" else 0)
        if counter is not None:
            ctx.busy_cells = counter
        elif self.backend.reports_busy:
            self.backend.on_busy = self._on_busy
        else:
            ctx.busy_streams.add(self)      # never known idle: always asked
            self._on_busy(True)

    def _on_fault(self, err: CudaError) -> None:
        self.ctx.set_sticky_error(err.code, err.message)

    def _on_busy(self, busy: bool) -> None:
        # Called by the backend stream, in order, as it turns busy / idle. The C count follows the
        # stream's own transitions (not set membership: destroy and teardown drop streams that still run).
        if busy:
            self.ctx.busy_streams.add(self)
        else:
            self.ctx.busy_streams.discard(self)
        if busy != self._counted_busy:
            self._counted_busy = busy
            fastpath.stream_busy(1 if busy else -1)

    def _wait_for(self, other: "Stream") -> None:
        marker = init.BACKEND.event_create(CU_EVENT_DISABLE_TIMING)
        other.backend.record(marker)
        self.backend.wait(marker)

    def begin(self):
        """The backend stream, made to wait first for what CUDA's legacy-stream rules say it must."""
        if self.capture is not None:
            return self.capture
        if self.kind == "legacy":
            if self.ctx.any_busy():
                for s in self.ctx.busy_list():
                    if s.blocking and not s.backend.query():
                        self._wait_for(s)
        elif self.blocking:
            legacy = self.ctx.legacy
            if legacy is not None and not legacy.backend.query():
                self._wait_for(legacy)
        return self.backend

    def launch(self, function, grid, block, shared_bytes, params: bytes, cooperative=False) -> None:
        self.begin().launch(function, grid, block, shared_bytes, params, cooperative)

    def synchronize(self) -> None:
        try:
            self.backend.synchronize()
        except CudaError as e:
            self.ctx.set_sticky_error(e.code, e.message)
        self.ctx.check_sticky()

    def destroy(self) -> None:
        handles.remove(self.handle)
        self.ctx.streams.discard(self)
        self.ctx.busy_streams.discard(self)
        self.backend.destroy()

    def retire(self) -> None:
        """A default stream left its context (teardown, its thread's end): the fast path forgets it."""
        self.ctx.busy_streams.discard(self)
        self.backend.unregister()


def legacy_stream(ctx) -> Stream:
    s = ctx.legacy
    if s is None:
        with ctxmod._lock:
            s = ctx.legacy
            if s is None:
                s = ctx.legacy = Stream(ctx, kind="legacy")
    return s


class _ThreadStreams(dict):
    """ctx.id -> this thread's per-thread default stream; when the thread ends, thread-local storage drops
    this table and the streams leave their contexts."""

    def __del__(self):
        for s in self.values():
            s.ctx.per_thread_streams.discard(s)
            s.retire()


def per_thread_stream(ctx) -> Stream:
    table = getattr(_tls, "streams", None)
    if table is None:
        table = _tls.streams = _ThreadStreams()
    s = table.get(ctx.id)
    if s is None or s.generation != ctx.generation:
        if s is not None:
            s.retire()
        s = table[ctx.id] = Stream(ctx, kind="per_thread")
        ctx.per_thread_streams.add(s)
    return s


def default_stream(per_thread: bool = False) -> Stream:
    ctx = ctxmod.current_context()
    return per_thread_stream(ctx) if per_thread else legacy_stream(ctx)


def resolve_stream(h: int, per_thread: bool = False, check_sticky: bool = True) -> Stream:
    """The Stream for CUstream `h`; 0 is the legacy default stream, or the per-thread one in _ptsz/_ptds
    entry points. INVALID_HANDLE for anything else that is not a live stream."""
    if h == 0:
        return default_stream(per_thread) if check_sticky else _default_unchecked(per_thread)
    if h == CU_STREAM_LEGACY:
        return legacy_stream(ctxmod.current_context(check_sticky))
    if h == CU_STREAM_PER_THREAD:
        return per_thread_stream(ctxmod.current_context(check_sticky))
    init.require_init()
    s = handles.get(h, Stream, CUDA_ERROR_INVALID_HANDLE, "stream")
    if s.ctx.destroyed:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"stream {h:#x} belongs to a destroyed context")
    if check_sticky:
        s.ctx.check_sticky()
    return s


def _default_unchecked(per_thread):
    ctx = ctxmod.current_context(False)
    return per_thread_stream(ctx) if per_thread else legacy_stream(ctx)


@ctxmod.on_any_teardown
def _destroy_context_streams(ctx) -> None:
    for s in list(ctx.streams):
        s.destroy()
    for s in list(ctx.per_thread_streams) + ([ctx.legacy] if ctx.legacy is not None else []):
        s.retire()


# --- entry points --------------------------------------------------------------------------------------
def _create(ph, flags, priority):
    ctx = ctxmod.current_context()
    if not ph:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phStream is NULL")
    if flags & ~CU_STREAM_NON_BLOCKING:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid stream flags {flags:#x}")
    priority = min(max(priority, ctxmod.STREAM_PRIORITY_GREATEST), ctxmod.STREAM_PRIORITY_LEAST)
    s = Stream(ctx, flags, priority)
    cmem.write_ptr(ph, s.handle)


@export("cuStreamCreate")
def stream_create(ph, flags):
    _create(ph, flags, 0)


@export("cuStreamCreateWithPriority")
def stream_create_with_priority(ph, flags, priority):
    _create(ph, flags, priority)


@export("cuStreamDestroy", "cuStreamDestroy_v2")
def stream_destroy(h):
    init.require_init()
    if h in (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD):
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "a default stream cannot be destroyed")
    handles.get(h, Stream, CUDA_ERROR_INVALID_HANDLE, "stream").destroy()


@export("cuStreamQuery")
def stream_query(h):
    return _query(resolve_stream(h))


@export("cuStreamQuery_ptsz")
def stream_query_ptsz(h):
    return _query(resolve_stream(h, True))


def _query(s):
    if not s.backend.query():
        return CUDA_ERROR_NOT_READY
    s.synchronize()   # idle: returns at once, or raises the fault the stream's work hit
    _rearm()


def _rearm():
    if fastpath.ON:     # the C fast path sends calls here after a generation change: re-arm it
        fastpath.publish(ctxmod.current_context_or_none())


@export("cuStreamSynchronize")
def stream_synchronize(h):
    resolve_stream(h).synchronize()
    _rearm()


@export("cuStreamSynchronize_ptsz")
def stream_synchronize_ptsz(h):
    resolve_stream(h, True).synchronize()
    _rearm()


def _wait_event(s, hevent, flags):
    from zluda_py.driver.event import event_from_handle
    if flags & ~0x1:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid wait flags {flags:#x}")
    ev = event_from_handle(hevent)
    from zluda_py.driver.capture import join_if_captured
    if join_if_captured(s, ev.backend):
        return
    s.begin().wait(ev.backend)


@export("cuStreamWaitEvent")
def stream_wait_event(h, hevent, flags):
    _wait_event(resolve_stream(h), hevent, flags)


@export("cuStreamWaitEvent_ptsz")
def stream_wait_event_ptsz(h, hevent, flags):
    _wait_event(resolve_stream(h, True), hevent, flags)


def _add_callback(h, s, callback, user_data, flags):
    from zluda_py.cmem import ffi
    if not callback:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "callback is NULL")
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, got {flags:#x}")
    fn = ffi.cast("void(*)(void *, int, void *)", callback)
    ctx = s.ctx

    def run():
        fn(ffi.cast("void *", h), ctx.sticky_error, ffi.cast("void *", user_data))
    s.begin().host_func(run)


@export("cuStreamAddCallback")
def stream_add_callback(h, callback, user_data, flags):
    _add_callback(h, resolve_stream(h), callback, user_data, flags)


@export("cuStreamAddCallback_ptsz")
def stream_add_callback_ptsz(h, callback, user_data, flags):
    _add_callback(h, resolve_stream(h, True), callback, user_data, flags)


def _launch_host_func(s, fn_ptr, user_data):
    from zluda_py.cmem import ffi
    if not fn_ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "fn is NULL")
    fn = ffi.cast("void(*)(void *)", fn_ptr)
    ctx = s.ctx

    def run():
        if not ctx.sticky_error:  # unlike stream callbacks, host functions are skipped after an error
            fn(ffi.cast("void *", user_data))
    s.begin().host_func(run)


@export("cuLaunchHostFunc")
def launch_host_func(h, fn, user_data):
    _launch_host_func(resolve_stream(h), fn, user_data)


@export("cuLaunchHostFunc_ptsz")
def launch_host_func_ptsz(h, fn, user_data):
    _launch_host_func(resolve_stream(h, True), fn, user_data)


def _host_func_v2(per_thread, h, fn, user_data, sync_mode):
    # CUhostTaskSyncMode: BLOCKING (0) or SPINWAIT (1), how the stream waits for the function; either way
    # the function runs in stream order, which is all this backend does
    if sync_mode not in (0, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown host task sync mode {sync_mode}")
    _launch_host_func(resolve_stream(h, per_thread), fn, user_data)


export("cuLaunchHostFunc_v2")(lambda *a: _host_func_v2(False, *a))
export("cuLaunchHostFunc_v2_ptsz")(lambda *a: _host_func_v2(True, *a))


def _info_stream(h, per_thread):
    return resolve_stream(h, per_thread, check_sticky=False)


def _exports_pair(base, impl):
    export(base)(lambda *a: impl(False, *a))
    export(base + "_ptsz")(lambda *a: impl(True, *a))


def _get_flags(pt, h, out):
    cmem.write_u32(out, _info_stream(h, pt).flags, "flags")


def _get_priority(pt, h, out):
    cmem.write_i32(out, _info_stream(h, pt).priority, "priority")


def _get_ctx(pt, h, out):
    cmem.write_ptr(out, _info_stream(h, pt).ctx.handle, "pctx")


def _get_ctx_v2(pt, h, out, green_out):
    if not out and not green_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pCtx and pGreenCtx are NULL")
    s = _info_stream(h, pt)
    green = getattr(s.ctx, "green", None)       # driver/green.py: a green context's stream
    if out:
        cmem.write_ptr(out, ctxmod.primary_context_handle(s.ctx.device) if green else s.ctx.handle)
    if green_out:
        cmem.write_ptr(green_out, green.handle if green else 0)


def _get_id(pt, h, out):
    cmem.write_u64(out, _info_stream(h, pt).id, "streamId")


def _get_device(pt, h, out):
    cmem.write_i32(out, _info_stream(h, pt).ctx.device, "device")


def _attach_mem_async(pt, h, dptr, length, flags):
    resolve_stream(h, pt)
    if flags not in (1, 2, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid attach flags {flags:#x}")


_exports_pair("cuStreamGetFlags", _get_flags)
_exports_pair("cuStreamGetPriority", _get_priority)
_exports_pair("cuStreamGetCtx", _get_ctx)
_exports_pair("cuStreamGetCtx_v2", _get_ctx_v2)
_exports_pair("cuStreamGetId", _get_id)
_exports_pair("cuStreamGetDevice", _get_device)
_exports_pair("cuStreamAttachMemAsync", _attach_mem_async)


# --- stream attributes (CUstreamAttrValue is a 64-byte union) -------------------------------------------
ATTR_VALUE_SIZE = 64
CU_LAUNCH_ATTRIBUTE_PRIORITY = 8
# The launch attributes CUDA accepts on streams: access policy window, synchronization policy, priority,
# memory sync domain map / domain. They change nothing on a CPU; their values are kept to be read back.
STREAM_ATTRIBUTES = (1, 3, 8, 9, 10)


def _get_attribute(pt, h, attr, out):
    s = _info_stream(h, pt)
    if attr not in STREAM_ATTRIBUTES:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"stream attribute {attr} is not a stream attribute")
    if not out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "value is NULL")
    if attr == CU_LAUNCH_ATTRIBUTE_PRIORITY:
        cmem.write_bytes(out, s.priority.to_bytes(4, "little", signed=True) + b"\0" * (ATTR_VALUE_SIZE - 4))
        return
    cmem.write_bytes(out, getattr(s, "attributes", {}).get(attr, b"\0" * ATTR_VALUE_SIZE))


def _set_attribute(pt, h, attr, value):
    s = _info_stream(h, pt)
    if attr not in STREAM_ATTRIBUTES:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"stream attribute {attr} is not a stream attribute")
    raw = cmem.read_bytes(value, ATTR_VALUE_SIZE, "value")
    if attr == CU_LAUNCH_ATTRIBUTE_PRIORITY:
        prio = int.from_bytes(raw[:4], "little", signed=True)
        s.priority = min(max(prio, ctxmod.STREAM_PRIORITY_GREATEST), ctxmod.STREAM_PRIORITY_LEAST)
        return
    if not hasattr(s, "attributes"):
        s.attributes = {}
    s.attributes[attr] = raw


def _copy_attributes(pt, dst, src):
    d, s = _info_stream(dst, pt), _info_stream(src, pt)
    d.priority = s.priority
    d.attributes = dict(getattr(s, "attributes", {}))


_exports_pair("cuStreamGetAttribute", _get_attribute)
_exports_pair("cuStreamSetAttribute", _set_attribute)
_exports_pair("cuStreamCopyAttributes", _copy_attributes)


# --- capture mode (stream capture itself lives in driver/capture.py) ------------------------------------
_capture_mode = threading.local()


@export("cuThreadExchangeStreamCaptureMode")
def thread_exchange_stream_capture_mode(mode_ptr):
    init.require_init()
    new = cmem.read_u32(mode_ptr, "mode")
    if new not in (0, 1, 2):      # GLOBAL, THREAD_LOCAL, RELAXED
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown capture mode {new}")
    cmem.write_u32(mode_ptr, getattr(_capture_mode, "mode", 0))
    _capture_mode.mode = new
