"""Contexts: primary contexts (one per device, retained/released), created contexts, the per-thread context
stack, and the per-context state other areas hang off (streams, limits, the sticky error).

For other driver modules:
    current_context()              the calling thread's current Context, or the CUresult CUDA gives
    context_from_handle(h)         a live Context from a CUcontext (0 -> current)
    primary_context_handle(dev)    the primary context's handle without retaining it (export tables)
    ctx.set_sticky_error(code, m)  after a kernel trap: every later call in the context returns `code`; a
                                   fault (700, 719, 710...) poisons every context of the process, as NVIDIA's
    ctx.on_teardown(fn)            fn(ctx) runs when the context is destroyed / reset / finally released
    ctx.remove_teardown(fn)        the owner of fn went first
"""

from __future__ import annotations

import itertools
import threading
import weakref

from zluda_py import cmem, fastpath, handles, log
from zluda_py.dispatch import export, expected
from zluda_py.driver import init
from zluda_py.driver.device import device_props
from zluda_py.errors import (NAME_OF, CudaError, CUDA_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_INVALID_CONTEXT,
                             CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_UNSUPPORTED_LIMIT,
                             CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
                             CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE)

CU_CTX_SCHED_MASK = 0x07
CU_CTX_FLAGS_MASK = 0xFF
_VALID_SCHED = (0, 1, 2, 4)
API_VERSION = 3020            # what NVIDIA's driver reports for every context since CUDA 3.2
STREAM_PRIORITY_LEAST = 0
STREAM_PRIORITY_GREATEST = -5

# CUlimit -> (default, settable)
_LIMIT_DEFAULTS = {
    0: 1024,          # CU_LIMIT_STACK_SIZE
    1: 1 << 20,       # CU_LIMIT_PRINTF_FIFO_SIZE
    2: 8 << 20,       # CU_LIMIT_MALLOC_HEAP_SIZE
    3: 2,             # CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH
    4: 2048,          # CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT
    5: 128,           # CU_LIMIT_MAX_L2_FETCH_GRANULARITY
    6: 0,             # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
    7: 48 * 1024,     # CU_LIMIT_SHMEM_SIZE
    8: 0,             # CU_LIMIT_CIG_ENABLED
    9: 0,             # CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED
}

_ids = itertools.count(1)
_lock = threading.RLock()
_tls = threading.local()
_primary: dict = {}
_TEARDOWN_HOOKS: list = []   # module-level fn(ctx) hooks: memory, streams, events register here
_contexts: "weakref.WeakSet[Context]" = weakref.WeakSet()

# NVIDIA's driver takes these for the rest of the process: every context answers them, contexts made or
# reset afterwards too, and no new context can be made (checked on an H200: tests/data).
PROCESS_FATAL = frozenset({700, 702, 710, 714, 715, 716, 717, 718, 719})
_poison = [0, ""]            # the process's first fatal fault: code, message


def on_any_teardown(fn):
    """Register fn(ctx) to run for every context's teardown (driver areas that own per-context objects)."""
    _TEARDOWN_HOOKS.append(fn)
    return fn


class Context:
    def __init__(self, device: int, flags: int, primary: bool):
        self.device = device
        self.flags = flags
        self.primary = primary
        self.id = next(_ids)
        self.refcount = 0
        self.active = not primary
        self.destroyed = False
        self.released = False                     # a primary context released to zero (709 until retained)
        self.sticky_error, self.sticky_message = _poison
        self.limits = dict(_LIMIT_DEFAULTS)
        self.cache_config = 0
        self.shared_config = 0
        self.streams: set = set()                 # live user streams (driver Stream objects)
        self.events: set = set()                  # live events (driver Event objects)
        self.per_thread_streams: set = set()      # per-thread default streams, dropped at thread exit
        self.legacy = None                        # the legacy default stream, made on first use
        # The streams that may have work queued (their backend streams say when they turn busy and idle;
        # stream.py): what the legacy stream's implicit waits and idle() look at. Streams the shim's fast
        # path knows are counted in C instead: busy_cells is their context's count (an int64_t *).
        self.busy_streams: set = set()
        self.busy_cells = None
        self.generation = 0                       # bumped by teardown: per-thread streams made before are stale
        self._hooks: list = []
        handles.new(self)
        _contexts.add(self)

    def __repr__(self):
        return f"<Context {self.handle:#x} dev={self.device}{' primary' if self.primary else ''}>"

    # --- for other driver areas ------------------------------------------------------------------------
    def on_teardown(self, fn) -> None:
        self._hooks.append(fn)

    def remove_teardown(self, fn) -> None:
        try:
            self._hooks.remove(fn)
        except ValueError:
            pass

    def set_sticky_error(self, code: int, message: str = "") -> None:
        if not self.sticky_error:
            self.sticky_error = code
            self.sticky_message = message
            if code in PROCESS_FATAL and not _poison[0]:
                _poison[:] = code, message
                for other in list(_contexts):
                    if not other.sticky_error:
                        other.sticky_error, other.sticky_message = code, message
            fastpath.invalidate()       # before the faulting stream stops counting as busy
            log.error(f"context {self.handle:#x}: {NAME_OF.get(code, code)} is now sticky: {message}")

    def check_sticky(self) -> None:
        if self.sticky_error:
            raise CudaError(self.sticky_error, f"an earlier kernel failed: {self.sticky_message}")

    def all_streams(self) -> list:
        out = list(self.streams)
        if self.per_thread_streams:
            out.extend(self.per_thread_streams)
        if self.legacy is not None:
            out.append(self.legacy)
        return out

    def any_busy(self) -> bool:
        """Whether some stream may have work queued (busy_list says which; their query() for sure)."""
        return bool(self.busy_streams) or (self.busy_cells is not None and self.busy_cells[0] != 0)

    def busy_list(self) -> list:
        """The streams that may have work queued."""
        out = list(self.busy_streams)
        if self.busy_cells is not None and self.busy_cells[0]:
            out.extend(s for s in self.all_streams() if s.backend.counted())
        return out

    def idle(self) -> bool:
        """True when no stream of the context has work queued or running."""
        if self.any_busy():
            for s in self.busy_list():
                if not s.backend.query():
                    return False
        return True

    def synchronize(self, check: bool = True) -> None:
        """Wait for every stream of the context; raise the sticky error (if `check`)."""
        for s in self.all_streams():
            try:
                s.backend.synchronize()
            except CudaError as e:
                self.set_sticky_error(e.code, e.message)
        if check:
            self.check_sticky()

    def teardown(self) -> None:
        """Release everything the context owns (destroy, reset, last primary release)."""
        fastpath.invalidate()           # the C fast path stops allocating in it
        self.synchronize(check=False)
        for fn in self._hooks + _TEARDOWN_HOOKS:
            try:
                fn(self)
            except Exception as e:  # noqa: BLE001 - teardown must finish
                log.error(f"context teardown hook {fn!r} failed: {e}")
        self._hooks = []
        self.streams.clear()
        self.per_thread_streams.clear()
        self.busy_streams.clear()
        self.generation += 1
        self.legacy = None
        self.sticky_error, self.sticky_message = _poison
        self.limits = dict(_LIMIT_DEFAULTS)
        fastpath.invalidate()


def _stack() -> list:
    st = getattr(_tls, "stack", None)
    if st is None:
        st = _tls.stack = []
    return st


def current_context(check_sticky: bool = True) -> Context:
    """The calling thread's current context. INVALID_CONTEXT when none, CONTEXT_IS_DESTROYED when it was
    destroyed, its sticky error after a kernel fault (unless check_sticky is False)."""
    st = getattr(_tls, "stack", None)
    if not st:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "no current context on this thread")
    ctx = st[-1]
    if ctx.destroyed:
        raise CudaError(CUDA_ERROR_CONTEXT_IS_DESTROYED, f"the current context {ctx.handle:#x} was destroyed")
    if ctx.released:
        raise CudaError(CUDA_ERROR_CONTEXT_IS_DESTROYED,
                        f"the current context {ctx.handle:#x} is a primary context released to zero")
    if check_sticky and ctx.sticky_error:
        ctx.check_sticky()
    return ctx


def current_context_or_none():
    st = getattr(_tls, "stack", None)
    return st[-1] if st else None


def context_from_handle(h: int, check_sticky: bool = False, released_ok: bool = False) -> Context:
    """The live context behind CUcontext `h`; h == 0 means the current context. A primary context released
    to zero is INVALID_CONTEXT by handle (NVIDIA's answer), unless released_ok (making it current)."""
    if h == 0:
        return current_context(check_sticky)
    init.require_init()
    ctx = handles.get(h, Context, CUDA_ERROR_INVALID_CONTEXT, "context")
    if ctx.released and not released_ok:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, f"context {h:#x} is a primary context released to zero")
    if check_sticky:
        ctx.check_sticky()
    return ctx


def primary_context(dev: int) -> Context:
    ctx = _primary.get(dev)
    if ctx is None:
        device_props(dev)
        with _lock:
            ctx = _primary.get(dev)
            if ctx is None:
                ctx = _primary[dev] = Context(dev, 0, primary=True)
    return ctx


def primary_context_handle(device: int) -> int:
    """The device's primary context handle, without retaining or activating it (cudart's CUDART_INTERFACE
    slot 2); the handle works as the current context while inactive."""
    return primary_context(device).handle


def _check_flags(flags: int) -> None:
    if flags & ~CU_CTX_FLAGS_MASK or (flags & CU_CTX_SCHED_MASK) not in _VALID_SCHED:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid context flags {flags:#x}")


# --- primary contexts ----------------------------------------------------------------------------------
@export("cuDevicePrimaryCtxRetain")
def primary_ctx_retain(pctx, dev):
    if not pctx:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pctx is NULL")
    ctx = primary_context(dev)
    with _lock:
        if not ctx.active and _poison[0]:
            raise CudaError(_poison[0], f"no context can be made after a kernel fault: {_poison[1]}")
        ctx.refcount += 1
        ctx.active = True
        ctx.released = False
    cmem.write_ptr(pctx, ctx.handle)


@export("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2")
def primary_ctx_release(dev):
    ctx = primary_context(dev)
    with _lock:
        if ctx.refcount <= 0:
            raise CudaError(CUDA_ERROR_INVALID_CONTEXT, f"primary context of device {dev} is not retained")
        ctx.refcount -= 1
        last = ctx.refcount == 0 and ctx.active
        if ctx.refcount == 0:
            ctx.released = ctx.released or ctx.active
            ctx.active = False
    if last:
        ctx.teardown()


@export("cuDevicePrimaryCtxGetState")
def primary_ctx_get_state(dev, flags_out, active_out):
    ctx = primary_context(dev)
    if not flags_out or not active_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "flags/active is NULL")
    cmem.write_u32(flags_out, ctx.flags)
    cmem.write_i32(active_out, 1 if ctx.active else 0)


@export("cuDevicePrimaryCtxSetFlags_v2")
def primary_ctx_set_flags(dev, flags):
    ctx = primary_context(dev)
    _check_flags(flags)
    ctx.flags = flags


@export("cuDevicePrimaryCtxSetFlags")
def primary_ctx_set_flags_v1(dev, flags):
    ctx = primary_context(dev)
    _check_flags(flags)
    if ctx.active:
        raise CudaError(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "primary context is active (use the _v2 entry)")
    ctx.flags = flags


@export("cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2")
def primary_ctx_reset(dev):
    ctx = primary_context(dev)
    # The retain count stays (NVIDIA: a release after a reset succeeds); the context is unusable until
    # retained again, as after its last release.
    with _lock:
        ctx.released = ctx.released or ctx.active
        ctx.active = False
    ctx.teardown()
    ctx.flags = 0


# --- created contexts ----------------------------------------------------------------------------------
def _create(pctx, flags, dev):
    if not pctx:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pctx is NULL")
    device_props(dev)
    _check_flags(flags)
    if _poison[0]:
        raise CudaError(_poison[0], f"no context can be made after a kernel fault: {_poison[1]}")
    ctx = Context(dev, flags, primary=False)
    _stack().append(ctx)
    fastpath.publish(ctx)
    cmem.write_ptr(pctx, ctx.handle)


@export("cuCtxCreate", "cuCtxCreate_v2")
def ctx_create(pctx, flags, dev):
    _create(pctx, flags, dev)


@export("cuCtxCreate_v3")
def ctx_create_v3(pctx, params, num_params, flags, dev):
    if num_params < 0 or (num_params and not params):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "bad execution affinity parameters")
    _create(pctx, flags, dev)


@export("cuCtxCreate_v4")
def ctx_create_v4(pctx, create_params, flags, dev):
    # Execution affinity and CIG parameters have no meaning on a CPU; they are accepted and ignored.
    _create(pctx, flags, dev)


@export("cuCtxDestroy", "cuCtxDestroy_v2")
def ctx_destroy(h):
    if not h:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "ctx is NULL")
    ctx = context_from_handle(h)
    if ctx.primary:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "a primary context cannot be destroyed with cuCtxDestroy")
    ctx.teardown()
    ctx.destroyed = True
    fastpath.invalidate()
    handles.remove(ctx.handle)
    st = _stack()
    if ctx in st:
        st.remove(ctx)
    fastpath.publish(st[-1] if st else None)


@export("cuCtxPushCurrent", "cuCtxPushCurrent_v2")
def ctx_push_current(h):
    if not h:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "ctx is NULL")
    ctx = context_from_handle(h, released_ok=True)
    _stack().append(ctx)
    fastpath.publish(ctx)


@export("cuCtxPopCurrent", "cuCtxPopCurrent_v2")
def ctx_pop_current(pctx):
    init.require_init()
    st = _stack()
    if not st:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "the context stack is empty")
    ctx = st.pop()
    fastpath.publish(st[-1] if st else None)
    if pctx:
        cmem.write_ptr(pctx, ctx.handle)


@export("cuCtxSetCurrent")
def ctx_set_current(h):
    init.require_init()
    st = _stack()
    if not h:
        if st:
            st.pop()
        fastpath.publish(st[-1] if st else None)
        return
    ctx = context_from_handle(h, released_ok=True)
    if st:
        st[-1] = ctx
    else:
        st.append(ctx)
    fastpath.publish(ctx)


@export("cuCtxGetCurrent")
def ctx_get_current(pctx):
    init.require_init()
    ctx = current_context_or_none()
    cmem.write_ptr(pctx, ctx.handle if ctx is not None and not ctx.destroyed else 0, "pctx")
    if ctx is not None and fastpath.ON:
        fastpath.publish(ctx)   # re-arm the C fast path (it sends calls here after a generation change)


def _current_for_get_device() -> Context:
    if current_context_or_none() is None:
        init.require_init()
        # cudart and cuda.core ask this to learn whether a context is current yet: "none" is an answer.
        raise expected(CUDA_ERROR_INVALID_CONTEXT, "no current context on this thread")
    ctx = current_context_or_none()
    if ctx.destroyed:
        current_context(False)      # raises CONTEXT_IS_DESTROYED; a released primary still names its device
    return ctx


@export("cuCtxGetDevice")
def ctx_get_device(device_out):
    if not device_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "device is NULL")
    cmem.write_i32(device_out, _current_for_get_device().device)


@export("cuCtxGetDevice_v2")
def ctx_get_device_v2(device_out, h):
    ctx = context_from_handle(h) if h else _current_for_get_device()
    cmem.write_i32(device_out, ctx.device, "device")


@export("cuCtxSynchronize")
def ctx_synchronize():
    ctx = current_context(False)
    ctx.synchronize()
    if fastpath.ON:
        fastpath.publish(ctx)


@export("cuCtxSynchronize_v2")
def ctx_synchronize_v2(h):
    context_from_handle(h).synchronize()
    if fastpath.ON:
        fastpath.publish(current_context_or_none())


@export("cuCtxGetFlags")
def ctx_get_flags(flags_out):
    cmem.write_u32(flags_out, current_context(False).flags, "flags")


@export("cuCtxSetFlags")
def ctx_set_flags(flags):
    ctx = current_context()
    _check_flags(flags)
    ctx.flags = flags


@export("cuCtxGetId")
def ctx_get_id(h, id_out):
    ctx = context_from_handle(h)
    cmem.write_u64(id_out, ctx.id, "ctxId")


@export("cuCtxGetApiVersion")
def ctx_get_api_version(h, version_out):
    context_from_handle(h)
    cmem.write_u32(version_out, API_VERSION, "version")


@export("cuCtxGetLimit")
def ctx_get_limit(value_out, limit):
    ctx = current_context()
    if limit not in ctx.limits:
        raise CudaError(CUDA_ERROR_UNSUPPORTED_LIMIT, f"unknown limit {limit}")
    cmem.write_u64(value_out, ctx.limits[limit], "pvalue")


@export("cuCtxSetLimit")
def ctx_set_limit(limit, value):
    ctx = current_context()
    if limit not in ctx.limits:
        raise CudaError(CUDA_ERROR_UNSUPPORTED_LIMIT, f"unknown limit {limit}")
    if limit == 5 and value not in (0, 32, 64, 128):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"L2 fetch granularity {value} is not 0/32/64/128")
    if limit == 7:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "CU_LIMIT_SHMEM_SIZE is read-only")
    if limit in (8, 9) and value not in (0, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"limit {limit} is a flag")
    ctx.limits[limit] = value


@export("cuCtxGetCacheConfig")
def ctx_get_cache_config(out):
    cmem.write_u32(out, current_context().cache_config, "pconfig")


@export("cuCtxSetCacheConfig")
def ctx_set_cache_config(config):
    ctx = current_context()
    if config not in (0, 1, 2, 3):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown cache config {config}")
    ctx.cache_config = config


@export("cuCtxGetSharedMemConfig")
def ctx_get_shared_mem_config(out):
    cmem.write_u32(out, current_context().shared_config, "pConfig")


@export("cuCtxSetSharedMemConfig")
def ctx_set_shared_mem_config(config):
    ctx = current_context()
    if config not in (0, 1, 2):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown shared memory config {config}")
    ctx.shared_config = config


@export("cuCtxGetStreamPriorityRange")
def ctx_get_stream_priority_range(least_out, greatest_out):
    current_context(False)
    if least_out:
        cmem.write_i32(least_out, STREAM_PRIORITY_LEAST)
    if greatest_out:
        cmem.write_i32(greatest_out, STREAM_PRIORITY_GREATEST)


@export("cuCtxResetPersistingL2Cache")
def ctx_reset_persisting_l2_cache():
    current_context()


# --- peer access: there is one CPU device, and a device is never its own peer ---------------------------
def _peer_context(h):
    ctx = current_context()
    if not h:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "peerContext is NULL")
    peer = context_from_handle(h)
    if peer.device == ctx.device:
        raise CudaError(CUDA_ERROR_INVALID_DEVICE, "a context's own device cannot be its peer")
    return ctx, peer


@export("cuCtxEnablePeerAccess")
def ctx_enable_peer_access(h, flags):
    ctx, peer = _peer_context(h)
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, got {flags:#x}")
    peers = ctx.__dict__.setdefault("peers", set())
    if peer.id in peers:
        raise CudaError(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access already enabled")
    peers.add(peer.id)


@export("cuCtxDisablePeerAccess")
def ctx_disable_peer_access(h):
    ctx, peer = _peer_context(h)
    peers = ctx.__dict__.setdefault("peers", set())
    if peer.id not in peers:
        raise CudaError(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access was not enabled")
    peers.discard(peer.id)
