"""Events: CUevent handles over backend events; record/query/synchronize/elapsed time with CUDA's errors."""

from __future__ import annotations

from zluda_py import cmem, handles
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, init
from zluda_py.driver.stream import resolve_stream
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY

CU_EVENT_BLOCKING_SYNC = 0x1
CU_EVENT_DISABLE_TIMING = 0x2
CU_EVENT_INTERPROCESS = 0x4
CU_EVENT_RECORD_EXTERNAL = 0x1


class Event:
    def __init__(self, ctx, flags: int, backend=None):
        """backend: an existing backend event (one another process exported), else a new one."""
        self.ctx = ctx
        self.flags = flags
        self.recorded = False
        self.backend = backend if backend is not None else init.BACKEND.event_create(flags)
        handles.new(self)
        ctx.events.add(self)

    def destroy(self) -> None:
        handles.remove(self.handle)
        self.ctx.events.discard(self)
        self.backend.destroy()


def event_from_handle(h: int) -> Event:
    init.require_init()
    ev = handles.get(h, Event, CUDA_ERROR_INVALID_HANDLE, "event")
    if ev.ctx.destroyed:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"event {h:#x} belongs to a destroyed context")
    return ev


@export("cuEventCreate")
def event_create(ph, flags):
    ctx = ctxmod.current_context()
    if not ph:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phEvent is NULL")
    if flags & ~0x7:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid event flags {flags:#x}")
    if flags & CU_EVENT_INTERPROCESS and not flags & CU_EVENT_DISABLE_TIMING:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "CU_EVENT_INTERPROCESS needs CU_EVENT_DISABLE_TIMING")
    cmem.write_ptr(ph, Event(ctx, flags).handle)


@export("cuEventDestroy", "cuEventDestroy_v2")
def event_destroy(h):
    event_from_handle(h).destroy()


def _record(h, hstream, per_thread, flags=0):
    ev = event_from_handle(h)
    if flags & ~CU_EVENT_RECORD_EXTERNAL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid record flags {flags:#x}")
    s = resolve_stream(hstream, per_thread)
    s.begin().record(ev.backend)
    ev.recorded = True


@export("cuEventRecord")
def event_record(h, hstream):
    _record(h, hstream, False)


@export("cuEventRecord_ptsz")
def event_record_ptsz(h, hstream):
    _record(h, hstream, True)


@export("cuEventRecordWithFlags")
def event_record_with_flags(h, hstream, flags):
    _record(h, hstream, False, flags)


@export("cuEventRecordWithFlags_ptsz")
def event_record_with_flags_ptsz(h, hstream, flags):
    _record(h, hstream, True, flags)


@export("cuEventQuery")
def event_query(h):
    ev = event_from_handle(h)
    ev.ctx.check_sticky()
    return None if ev.backend.query() else CUDA_ERROR_NOT_READY


@export("cuEventSynchronize")
def event_synchronize(h):
    ev = event_from_handle(h)
    ev.backend.synchronize()
    ev.ctx.check_sticky()


@export("cuEventElapsedTime", "cuEventElapsedTime_v2")
def event_elapsed_time(ms_out, hstart, hend):
    if not ms_out:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "pMilliseconds is NULL")    # NVIDIA's code for it
    start, end = event_from_handle(hstart), event_from_handle(hend)
    if (start.flags | end.flags) & CU_EVENT_DISABLE_TIMING:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "an event was created with CU_EVENT_DISABLE_TIMING")
    if not (start.recorded and end.recorded):
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "an event has not been recorded")
    if not (start.backend.query() and end.backend.query()):
        raise CudaError(CUDA_ERROR_NOT_READY, "an event has not completed")
    cmem.write_f32(ms_out, end.backend.elapsed_ms(start.backend))


@ctxmod.on_any_teardown
def _destroy_context_events(ctx) -> None:
    for ev in list(ctx.events):
        ev.destroy()


@export("cuCtxRecordEvent")
def ctx_record_event(hctx, hevent):
    """Record, in one event, the completion of all work queued so far in every stream of the context."""
    ctx = ctxmod.context_from_handle(hctx, check_sticky=True) if hctx else ctxmod.current_context()
    ev = event_from_handle(hevent)
    from zluda_py.driver.stream import legacy_stream
    legacy_stream(ctx).begin().record(ev.backend)
    ev.recorded = True


@export("cuCtxWaitEvent")
def ctx_wait_event(hctx, hevent):
    ctx = ctxmod.context_from_handle(hctx, check_sticky=True) if hctx else ctxmod.current_context()
    ev = event_from_handle(hevent)
    for s in ctx.all_streams():
        s.begin().wait(ev.backend)
