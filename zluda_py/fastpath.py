"""Keeps the shim's C fast path (src/fastpath.c) in step with the driver: which context each thread has
current, when contexts change state, how many streams are busy or capturing, the devices' fixed
attributes. No-ops without the shim."""

from zluda_py import log, native, profile

ON = False          # the fast path serves calls (decided when the first context becomes current)
_decided = False
_set_current = None
_busy = None
_invalidate = None
_devices_published = False


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
    or got a sticky error)."""
    if _invalidate is not None:
        _invalidate()
    elif not _decided and native.lib is not None:
        native.lib.zl_fast_invalidate()


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
