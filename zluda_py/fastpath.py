"""Keeps the shim's C fast path (src/fastpath.c, src/fastlaunch.c) in step with the driver: which context
each thread has current, when contexts change state, how many streams are busy or capturing, the devices'
fixed attributes, the functions launched so far and the launch queue that runs them. No-ops without the
shim."""

from zluda_py import log, native, profile

ON = False          # the fast path serves calls (decided when the first context becomes current)
_decided = False
_set_current = None
_busy = None
_invalidate = None
_devices_published = False
_queue_armed = False
_published: set = set()     # (function or kernel handle, context handle) the C launch path knows


def _decide() -> None:
    global ON, _decided, _set_current, _busy, _invalidate
    from zluda_py.driver import init
    lib = native.lib
    _decided = True
    if lib is None:
        return
    _busy = lib.zl_fast_busy
    _invalidate = lib.zl_fast_invalidate
    # Only when the backend's device memory is the shim's own allocator (the CPU backend): the fast path
    # allocates from it and copies with plain memmove. ZLUDA_TRACE and ZLUDA_PROFILE must see every call
    # in Python.
    memory = getattr(init.BACKEND, "memory", None)
    if log.TRACE or profile.ON or not getattr(memory, "native", False):
        return
    from zluda_py import memcheck
    if memcheck.ON:
        return      # its allocations would reach the memcheck table only when Python adopts them

    from zluda_py.driver import allocations
    if not allocations.mirrored():
        return      # the index does not mirror its ranges into C: C could not check a copy against it
    _set_current = lib.zl_fast_set_current
    ON = True
    lib.zl_fast_enable(1)
    publish_devices()
    _arm_queue()


def publish_devices() -> None:
    """Hand C the devices and their attribute tables once cuInit has fixed them, so cuDriverGetVersion,
    cuDeviceGet, cuDeviceGetCount and cuDeviceGetAttribute are answered there from then on (whatever
    backend: these never change for the process)."""
    global _devices_published
    if _devices_published:
        return
    from zluda_py.driver import init
    lib, ffi = native.lib, native.ffi
    devices = init.DEVICES
    if lib is None or init.BACKEND is None or not devices:
        return
    _devices_published = True
    if log.TRACE or profile.ON:
        return
    from zluda_py.driver.procaddr import DRIVER_VERSION
    # Only int32 values are published: anything else stays with the Python handler, which decides.
    tables = [{k: v for k, v in d.attributes.items() if type(v) is int and 0 <= k < 4096
               and -2**31 <= v < 2**31} for d in devices]
    width = max((max(t, default=0) for t in tables), default=0) + 1
    values = ffi.new("int32_t[]", len(devices) * width)
    known = ffi.new("uint8_t[]", len(devices) * width)
    for row, t in enumerate(tables):
        for k, v in t.items():
            values[row * width + k] = v
            known[row * width + k] = 1
    lib.zl_fast_publish_devices(len(devices), width - 1, values, known, DRIVER_VERSION)


def publish(ctx) -> None:
    """Tell C the calling thread's current context (None: none). Called wherever the thread's context
    stack changes, and by the Python handlers of fast-path calls (after a generation change every thread
    comes back through Python once)."""
    if not _decided:
        _decide()
    if not ON:
        return
    if ctx is None:
        _set_current(0, 0)
        return
    _set_current(ctx.handle, ctx.device)
    # Published with the generation current now: a context that turned sticky or was destroyed before
    # that is caught here, one that changes later has bumped the generation past it.
    if ctx.sticky_error or ctx.destroyed or ctx.released:
        _set_current(0, 0)


def refresh(ctx) -> None:
    if ON:
        publish(ctx)


def invalidate() -> None:
    """Every thread's published context must be checked by Python again (a context was destroyed, reset,
    or got a sticky error); the C launch path forgets the functions it was given."""
    if _invalidate is not None:
        _invalidate()
    elif not _decided and native.lib is not None:
        native.lib.zl_fast_invalidate()
    forget_functions()


def launched(hfunc: int, ctx, f) -> None:
    """A launch of `hfunc` (a CUfunction or CUkernel handle) in `ctx` passed every check and went to the
    stream on the Python path: later ordinary ones may be made in C. Re-arms the thread's context too."""
    if not ON:
        return
    if (hfunc, ctx.handle) not in _published and (_queue_armed or _arm_queue()):
        _publish_function(hfunc, ctx, f)
    publish(ctx)


def _arm_queue() -> bool:
    """Give C the launch queue's entry points: synchronize and query as soon as the queue's library is
    loaded, launches once it runs them (the CPU runtime is loaded). True when launches are armed."""
    global _queue_armed
    from zluda_py.backends.cpu import launchq
    q = launchq.get()
    if q is None:
        return False
    addr = [int(launchq.ffi.cast("uintptr_t", launchq.ffi.addressof(q, n)))
            for n in ("zq_fast_launch", "zq_fast_sync", "zq_fast_query")]
    _queue_armed = launchq._launcher is not None
    native.lib.zl_fast_set_queue(addr[0] if _queue_armed else 0, addr[1], addr[2])
    return _queue_armed


def _publish_function(hfunc: int, ctx, f) -> None:
    fn = f.backend_fn
    native_info = getattr(fn, "native", None)
    if native_info is None:
        return          # a kernel only its Python launcher runs
    address, static_shared, frame_bytes, native_size = native_info
    info = f.info
    if native_size > info.param_size:
        return
    gmax, bmax, max_threads, max_shared = f.launch_limits()
    limits = [*gmax, *bmax, max_threads, max_shared, *(getattr(fn, "spec_block", None) or (0, 0, 0))]
    if any(not 0 <= v < 2**32 for v in limits):
        return
    ffi = native.ffi
    plan = ffi.new("uint32_t[]", [x for p in info.params for x in (p.offset, p.size)] or [0])
    if native.lib.zl_fast_publish_function(hfunc, ctx.handle, address, static_shared, frame_bytes,
                                           info.param_size, len(info.params), plan,
                                           ffi.new("uint32_t[11]", limits)) == 0:
        _published.add((hfunc, ctx.handle))


def forget_functions() -> None:
    """A module was unloaded, a function's attributes changed, a context changed state: C forgets every
    function it was given (the next launch of each goes through Python, which gives it again)."""
    if _published:
        _published.clear()
        native.lib.zl_fast_forget_functions()


def capture(delta: int) -> None:
    """A stream capture began (+1) or ended (-1): launches, synchronizes and synchronous copies go through
    Python, which records or refuses them."""
    lib = native.lib
    if lib is not None:
        lib.zl_fast_capture(delta)


def stream_busy(delta: int) -> None:
    """A stream started (+1) or stopped (-1) having queued work, or a capture began (+1) or ended (-1):
    synchronous copies and frees go through Python while any is."""
    b = _busy
    if b is None:
        lib = native.lib
        if lib is None:
            return
        b = lib.zl_fast_busy
    b(delta)
