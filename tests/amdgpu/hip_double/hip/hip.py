"""The hip-python calls zluda_py/backends/hip makes, with HIP's semantics on one emulated gfx1100: memory is
this process's memory (the emulator's global memory), kernels run through ptx.amdgpu_emulator.

Every call is recorded in CALLS and, with ZLUDA_HIP_DOUBLE_LOG=<file>, as one JSON line there. Return
shapes are hip-python's: a tuple (hipError_t, outputs...); argument types are checked as its Cython
wrappers check them (TypeError, OverflowError)."""

from __future__ import annotations

import bisect
import ctypes
import functools
import json
import os
import queue
import struct
import threading
import time

from hip._types import (ATTRIBUTES, GFX1100, CStr, DeviceArray, Handle, Pointer, address, hipDeviceAttribute_t,
                        hipDeviceProp_t, hipError_t, hipMemcpyKind, hipUUID_t, ihipEvent_t, ihipStream_t, signed,
                        unsigned)

__all__ = ["hipError_t", "hipMemcpyKind", "hipDeviceAttribute_t", "hipDeviceProp_t", "hipUUID_t", "CALLS"]
E = hipError_t
CALLS = []                 # [(name, args, result)]
_log_lock = threading.Lock()
_state = {"init": False}


# ------------------------------------------------------------------ recording

def _plain(v):
    if isinstance(v, Handle):
        return f"{type(v).__name__}@{v._ptr:#x}"
    if isinstance(v, (E, hipMemcpyKind)) or type(v).__name__ == "hipDeviceAttribute_t":
        return v.name
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, bytes):
        return v[:64].hex() if len(v) > 0 and not v.isascii() else v.decode("ascii", "replace")[:64]
    if isinstance(v, Pointer):
        return int(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return type(v).__name__


def record(name, args, result, **more):
    entry = {"call": name, "args": _plain(list(args)), "ret": _plain(result), **more}
    with _log_lock:
        CALLS.append(entry)
        path = os.environ.get("ZLUDA_HIP_DOUBLE_LOG")
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps(entry) + "\n")


def _api(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        r = fn(*args)
        record(fn.__name__, args, r[0] if isinstance(r, tuple) else r)
        return r
    return wrapper


# ------------------------------------------------------------------ memory: host memory, as the emulator sees it

class _Memory:
    def __init__(self):
        self.lock = threading.Lock()
        self.starts, self.ranges = [], {}     # start -> (end, kind, keepalive)

    def add(self, start, size, kind, keep=None):
        with self.lock:
            bisect.insort(self.starts, start)
            self.ranges[start] = (start + size, kind, keep)

    def remove(self, start, kinds):
        with self.lock:
            r = self.ranges.get(start)
            if r is None or r[1] not in kinds:
                return False
            del self.ranges[start]
            self.starts.remove(start)
            return True

    def kind(self, addr):
        """'device', 'managed', 'pinned', 'registered' or 'pageable' (memory HIP did not allocate)."""
        with self.lock:
            i = bisect.bisect_right(self.starts, addr) - 1
            if i >= 0:
                end, kind, _ = self.ranges[self.starts[i]]
                if addr < end:
                    return kind
        return "pageable"

    def alloc(self, size, kind, align=4096):
        raw = ctypes.create_string_buffer(size + align)
        start = (ctypes.addressof(raw) + align - 1) & ~(align - 1)
        self.add(start, size, kind, raw)
        return start


MEM = _Memory()
TOTAL_MEM = GFX1100["totalGlobalMem"]


def _device_used():
    with MEM.lock:
        return sum(end - s for s, (end, kind, _) in MEM.ranges.items() if kind in ("device", "managed"))


# ------------------------------------------------------------------ streams and events

class _Stream:
    """In-order queue with its own worker thread, so work really runs after the call returns."""

    def __init__(self, flags=0, priority=0):
        self.flags, self.priority = flags, priority
        self.q = queue.Queue()
        self.cv = threading.Condition()
        self.pending = 0
        self.error = E.hipSuccess
        self.thread = threading.Thread(target=self._run, daemon=True, name="hip-double-stream")
        self.thread.start()

    def put(self, op):
        with self.cv:
            self.pending += 1
        self.q.put(op)

    def _run(self):
        while True:
            op = self.q.get()
            if op is None:
                return
            try:
                err = op()
            except Exception as e:  # noqa: BLE001 - a device fault: sticky on the stream, as HIP keeps it
                record("device-fault", [repr(e)], E.hipErrorLaunchFailure)
                err = E.hipErrorLaunchFailure
            with self.cv:
                if err and not self.error:
                    self.error = err
                self.pending -= 1
                self.cv.notify_all()

    def drain(self):
        with self.cv:
            while self.pending:
                self.cv.wait()
            return self.error

    def stop(self):
        self.drain()
        self.q.put(None)


_streams = set()
_streams_lock = threading.Lock()


def _all_streams():
    with _streams_lock:
        return list(_streams)


def _stream_of(s):
    """The _Stream of an ihipStream_t; None for the null stream (None or 0)."""
    if s is None or (isinstance(s, int) and s == 0):
        return None
    if isinstance(s, ihipStream_t) and isinstance(s.obj, _Stream):
        return s.obj
    raise _Bad(E.hipErrorInvalidHandle)


class _Bad(Exception):
    def __init__(self, code):
        self.code = code


def _errors(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        try:
            return fn(*args)
        except _Bad as b:
            return (b.code,)
    return wrapper


def _enqueue(stream, op):
    """Run `op` in stream order; the null stream is the legacy one: it waits for every stream first."""
    st = _stream_of(stream)
    if st is None:
        for other in _all_streams():
            other.drain()
        return op() or E.hipSuccess
    st.put(op)
    return E.hipSuccess


class _Event:
    def __init__(self, flags):
        self.flags = flags
        self.done = None          # threading.Event of the last record, None before any
        self.when = None


# ------------------------------------------------------------------ the API: device

@_api
def hipInit(flags):
    unsigned(flags, 32, "unsigned int")
    _state["init"] = True
    return (E.hipSuccess,)


@_api
def hipGetDeviceCount():
    return (E.hipSuccess, 1)


def _device_ok(d):
    return isinstance(d, int) and d == 0


@_api
def hipSetDevice(deviceId):
    return (E.hipSuccess if _device_ok(deviceId) else E.hipErrorInvalidDevice,)


@_api
def hipGetDeviceProperties(prop, deviceId):
    if not isinstance(prop, hipDeviceProp_t):
        raise TypeError("argument 'prop' must be a hipDeviceProp_t")
    if not _device_ok(deviceId):
        return (E.hipErrorInvalidDevice,)
    prop.name, prop.gcnArchName = GFX1100["name"], GFX1100["gcnArchName"]
    prop.totalGlobalMem, prop.warpSize = TOTAL_MEM, 32
    return (E.hipSuccess,)


@_api
def hipDeviceGetAttribute(attr, deviceId):
    if not isinstance(attr, hipDeviceAttribute_t):
        raise TypeError("argument 'attr' must be of type '_hipDeviceAttribute_t__Base'")
    if not _device_ok(deviceId):
        return (E.hipErrorInvalidDevice, 0)
    return (E.hipSuccess, ATTRIBUTES[attr.name[len("hipDeviceAttribute"):]][1])


@_api
def hipDeviceGetName(len, device):  # noqa: A002 - hip-python's parameter name
    if not _device_ok(device):
        return (E.hipErrorInvalidDevice, CStr(b""))
    return (E.hipSuccess, CStr(GFX1100["name"][:max(len - 1, 0)]))


@_api
def hipDeviceGetPCIBusId(len, device):  # noqa: A002
    if not _device_ok(device):
        return (E.hipErrorInvalidDevice, CStr(b""))
    return (E.hipSuccess, CStr(GFX1100["pciBusId"].encode()[:max(len - 1, 0)]))


@_api
def hipDeviceTotalMem(device):
    return (E.hipSuccess, TOTAL_MEM) if _device_ok(device) else (E.hipErrorInvalidDevice, 0)


@_api
def hipDeviceGetUuid(device):
    u = hipUUID_t()
    if not _device_ok(device):
        return (E.hipErrorInvalidDevice, u)
    ctypes.memmove(int(u), GFX1100["uuid"], 16)
    return (E.hipSuccess, u)


@_api
def hipMemGetInfo():
    return (E.hipSuccess, TOTAL_MEM - _device_used(), TOTAL_MEM)


@_api
def hipDeviceSynchronize():
    errs = [s.drain() for s in _all_streams()]
    return (next((e for e in errs if e), E.hipSuccess),)


# ------------------------------------------------------------------ memory

@_api
def hipMalloc(size):
    size = unsigned(size, 64, "unsigned long")
    if size == 0:
        return (E.hipSuccess, None)
    if _device_used() + size > TOTAL_MEM:
        return (E.hipErrorOutOfMemory, None)
    return (E.hipSuccess, DeviceArray(MEM.alloc(size, "device")))


@_api
def hipMallocManaged(size, flags):
    size, flags = unsigned(size, 64, "unsigned long"), unsigned(flags, 32, "unsigned int")
    if size == 0 or flags not in (1, 2):          # hipMemAttachGlobal, hipMemAttachHost
        return (E.hipErrorInvalidValue, None)
    return (E.hipSuccess, DeviceArray(MEM.alloc(size, "managed")))


@_api
def hipHostMalloc(size, flags):
    size, _ = unsigned(size, 64, "unsigned long"), unsigned(flags, 32, "unsigned int")
    return (E.hipSuccess, Pointer(MEM.alloc(max(size, 1), "pinned")))


@_api
def hipFree(ptr):
    p = address(ptr)
    if p == 0:
        return (E.hipSuccess,)
    for s in _all_streams():          # hipFree synchronizes the device, as HIP's does
        s.drain()
    return (E.hipSuccess if MEM.remove(p, ("device", "managed")) else E.hipErrorInvalidDevicePointer,)


@_api
def hipHostFree(ptr):
    p = address(ptr)
    if p == 0:
        return (E.hipSuccess,)
    for s in _all_streams():
        s.drain()
    return (E.hipSuccess if MEM.remove(p, ("pinned",)) else E.hipErrorInvalidValue,)


@_api
def hipHostRegister(hostPtr, sizeBytes, flags):
    p, n = address(hostPtr), unsigned(sizeBytes, 64, "unsigned long")
    unsigned(flags, 32, "unsigned int")
    if p == 0 or n == 0:
        return (E.hipErrorInvalidValue,)
    if MEM.kind(p) != "pageable":
        return (E.hipErrorHostMemoryAlreadyRegistered,)
    MEM.add(p, n, "registered")
    return (E.hipSuccess,)


@_api
def hipHostUnregister(hostPtr):
    return (E.hipSuccess if MEM.remove(address(hostPtr), ("registered",)) else E.hipErrorHostMemoryNotRegistered,)


@_api
def hipHostGetDevicePointer(hstPtr, flags):
    p = address(hstPtr)
    unsigned(flags, 32, "unsigned int")
    if MEM.kind(p) not in ("pinned", "registered"):
        return (E.hipErrorInvalidValue, None)
    return (E.hipSuccess, Pointer(p))      # one address space: the device sees host memory where it is


def _kind_arg(kind):
    if not isinstance(kind, hipMemcpyKind):
        raise TypeError("argument 'kind' must be of type '_hipMemcpyKind__Base'")
    return kind


def _copy_op(dst, dpitch, src, spitch, width, height):
    def op():
        for r in range(height):
            ctypes.memmove(dst + r * dpitch, src + r * spitch, width)
    return op


def _async_copy(stream, dst, src, op):
    # ROCm stages copies touching pageable host memory synchronously: the call returns after the copy
    # (HtoD: once the source is read; DtoH: once the data is there). Device and pinned memory copy in order.
    if "pageable" in (MEM.kind(dst), MEM.kind(src)):
        st = _stream_of(stream)
        if st is not None:
            err = st.drain()
            if err:
                return err
        return _enqueue(stream, op) if st is None else (op() or E.hipSuccess)
    return _enqueue(stream, op)


@_api
@_errors
def hipMemcpyAsync(dst, src, sizeBytes, kind, stream):
    _kind_arg(kind)
    d, s, n = address(dst), address(src), unsigned(sizeBytes, 64, "unsigned long")
    if n and (d == 0 or s == 0):
        return (E.hipErrorInvalidValue,)
    return (_async_copy(stream, d, s, _copy_op(d, 0, s, 0, n, 1)),)


@_api
@_errors
def hipMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream):
    _kind_arg(kind)
    d, s = address(dst), address(src)
    dpitch, spitch, width, height = (unsigned(v, 64, "unsigned long") for v in (dpitch, spitch, width, height))
    if width > dpitch or width > spitch:
        return (E.hipErrorInvalidPitchValue,)
    return (_async_copy(stream, d, s, _copy_op(d, dpitch, s, spitch, width, height)),)


def _memset(dest, value, count, stream, size, fmt):
    d = address(dest)
    if count and d == 0:
        return (E.hipErrorInvalidValue,)
    pattern = struct.pack(fmt, value) * count

    def op():
        ctypes.memmove(d, pattern, len(pattern))
    return (_enqueue(stream, op),)


@_api
@_errors
def hipMemsetD8Async(dest, value, count, stream):
    return _memset(dest, unsigned(value, 8, "unsigned char"), unsigned(count, 64, "unsigned long"), stream, 1, "<B")


@_api
@_errors
def hipMemsetD16Async(dest, value, count, stream):
    return _memset(dest, unsigned(value, 16, "unsigned short"), unsigned(count, 64, "unsigned long"), stream, 2,
                   "<H")


@_api
@_errors
def hipMemsetD32Async(dst, value, count, stream):
    # hip-python declares `int value`: a pattern of 0x80000000 and above must come as a negative int
    return _memset(dst, signed(value, 32, "int"), unsigned(count, 64, "unsigned long"), stream, 4, "<i")


# ------------------------------------------------------------------ streams and events

@_api
def hipStreamCreateWithPriority(flags, priority):
    flags = unsigned(flags, 32, "unsigned int")
    if flags not in (0, 1):                      # hipStreamDefault, hipStreamNonBlocking
        return (E.hipErrorInvalidValue, None)
    st = _Stream(flags, signed(priority, 32, "int"))
    with _streams_lock:
        _streams.add(st)
    return (E.hipSuccess, ihipStream_t(st))


@_api
@_errors
def hipStreamSynchronize(stream):
    st = _stream_of(stream)
    if st is None:
        return hipDeviceSynchronize()
    return (st.drain(),)


@_api
@_errors
def hipStreamQuery(stream):
    st = _stream_of(stream)
    busy = [st] if st is not None else _all_streams()
    return (E.hipErrorNotReady if any(s.pending for s in busy) else E.hipSuccess,)


@_api
@_errors
def hipStreamDestroy(stream):
    st = _stream_of(stream)
    if st is None:
        return (E.hipErrorInvalidHandle,)
    with _streams_lock:
        if st not in _streams:
            return (E.hipErrorInvalidHandle,)
        _streams.discard(st)
    st.stop()                    # HIP lets queued work finish
    return (E.hipSuccess,)


@_api
@_errors
def hipStreamWaitEvent(stream, event, flags):
    ev = _event_of(event)
    unsigned(flags, 32, "unsigned int")
    done = ev.done
    if done is None:             # never recorded: nothing to wait for
        return (E.hipSuccess,)
    return (_enqueue(stream, lambda: done.wait() and None),)


def _event_of(e):
    if isinstance(e, ihipEvent_t) and isinstance(e.obj, _Event):
        return e.obj
    raise _Bad(E.hipErrorInvalidHandle)


@_api
def hipEventCreateWithFlags(flags):
    flags = unsigned(flags, 32, "unsigned int")
    if flags & ~0x7:
        return (E.hipErrorInvalidValue, None)
    return (E.hipSuccess, ihipEvent_t(_Event(flags)))


@_api
@_errors
def hipEventRecord(event, stream):
    ev = _event_of(event)
    done = threading.Event()
    ev.done, ev.when = done, None

    def op():
        ev.when = time.perf_counter()
        done.set()
    return (_enqueue(stream, op),)


@_api
@_errors
def hipEventQuery(event):
    ev = _event_of(event)
    return (E.hipSuccess if ev.done is None or ev.done.is_set() else E.hipErrorNotReady,)


@_api
@_errors
def hipEventSynchronize(event):
    ev = _event_of(event)
    if ev.done is not None:
        ev.done.wait()
    return (E.hipSuccess,)


@_api
def hipEventElapsedTime(start, stop):
    try:
        a, b = _event_of(start), _event_of(stop)
    except _Bad as e:
        return (e.code, 0.0)
    if (a.flags | b.flags) & 2 or a.done is None or b.done is None:   # hipEventDisableTiming, never recorded
        return (E.hipErrorInvalidHandle, 0.0)
    if not (a.done.is_set() and b.done.is_set()):
        return (E.hipErrorNotReady, 0.0)
    return (E.hipSuccess, (b.when - a.when) * 1000.0)


@_api
@_errors
def hipEventDestroy(event):
    ev = _event_of(event)
    event.obj = None
    del ev
    return (E.hipSuccess,)


from hip._module import (hipModuleGetFunction, hipModuleGetGlobal, hipModuleLaunchCooperativeKernel,  # noqa: E402
                         hipModuleLaunchKernel, hipModuleLoadData, hipModuleUnload)

__all__ += ["hipModuleGetFunction", "hipModuleGetGlobal", "hipModuleLaunchCooperativeKernel",
            "hipModuleLaunchKernel", "hipModuleLoadData", "hipModuleUnload"]
