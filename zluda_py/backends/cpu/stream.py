"""CPU streams: an in-order queue of device work drained by a thread of the shared worker pool, so work runs
asynchronously with the host; small work on an idle stream runs inline on the caller (same observable order,
no thread hop)."""

from __future__ import annotations

import threading
import time
from collections import deque

from zluda_py import log
from zluda_py.backends.base import BackendStream
from zluda_py.backends.cpu import libc
from zluda_py.backends.cpu.event import Completion, CpuEvent
from zluda_py.backends.cpu.workers import POOL
from zluda_py.errors import (CudaError, CUDA_ERROR_ASSERT, CUDA_ERROR_LAUNCH_FAILED,
                             CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_UNKNOWN)

# Copies and fills up to this size run inline on an idle stream: a thread hop costs more than the work.
INLINE_BYTES = 64 * 1024

KernelFault = None      # ptx.errors.KernelFault, imported by the first launch
_copy_holding_gil = libc._copy_holding_gil
_null = libc._null

_FAULT_CODES = {"trap": CUDA_ERROR_LAUNCH_FAILED, "assert": CUDA_ERROR_ASSERT,
                "fault": CUDA_ERROR_ILLEGAL_ADDRESS}


def _fill(ptr: int, value: int, elem_size: int, count: int, pitch: int, height: int) -> None:
    import numpy as np
    if elem_size == 1 and (height == 1 or pitch == count):
        libc.memset(ptr, value & 0xFF, count * height)
        return
    dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32}[elem_size]
    row_bytes = count * elem_size
    if height == 1:
        np.frombuffer(libc.ffi.buffer(libc.ffi.cast("char *", ptr), row_bytes), dtype)[:] = value
        return
    span = pitch * (height - 1) + row_bytes
    view = np.ndarray((height, count), dtype, libc.ffi.buffer(libc.ffi.cast("char *", ptr), span),
                      strides=(pitch, elem_size))
    view[...] = value


def _copy_2d(dst: int, dpitch: int, src: int, spitch: int, width: int, height: int) -> None:
    if height <= 1 or (dpitch == width and spitch == width):
        libc.memmove(dst, src, width * height)
        return
    for row in range(height):
        libc.memmove(dst + row * dpitch, src + row * spitch, width)


def _value_ready(addr: int, value: int, size: int, op: int) -> bool:
    bits = 8 * size
    mask = (1 << bits) - 1
    current = int.from_bytes(libc.ffi.buffer(libc.ffi.cast("char *", addr), size), "little")
    if op == 0:     # GEQ, in wrapping arithmetic: (intN)(*addr - value) >= 0
        return ((current - value) & mask) < (1 << (bits - 1))
    if op == 1:
        return current == value
    if op == 2:
        return (current & value) != 0
    return (~(current | value) & mask) != 0     # NOR


def _wait_until(addr: int, value: int, size: int, op: int) -> None:
    # Another stream or the host will write the value; poll with a growing sleep so the wait costs no CPU.
    delay = 0.0
    while not _value_ready(addr, value, size, op):
        time.sleep(delay)
        delay = min(delay * 2 or 1e-5, 1e-3)


class CpuStream(BackendStream):
    """`on_fault(CudaError)` (set by the driver) is told when a kernel traps so the context's sticky error
    is set at once; the stream itself also remembers the first fault and raises it from synchronize()."""

    reports_busy = True

    def __init__(self, flags: int = 0, priority: int = 0):
        self.flags = flags
        self.priority = priority
        self.on_fault = None
        self.on_busy = None
        self.fault: CudaError | None = None
        self._lock = threading.Lock()
        self._drained = None     # a Condition on _lock, made by the first synchronize that has to wait
        self._tasks: deque = deque()
        self._busy = False       # a pool thread owns the queue (set and cleared under _lock)
        self._waiting = 0

    # --- queue machinery -------------------------------------------------------------------------------
    def enqueue(self, fn, inline: bool = False) -> None:
        """Queue fn (no arguments) behind earlier work. inline=True lets an idle stream run it right here,
        under the lock so that concurrent enqueuers line up behind it."""
        with self._lock:
            if inline and not self._busy:
                self._run(fn)
                return
            self._tasks.append(fn)
            if not self._busy:
                self._busy = True
                if self.on_busy is not None:
                    self.on_busy(True)
                POOL.submit(self._drain)

    def _run(self, fn) -> None:
        try:
            fn()
        except CudaError as e:
            self._report(e)
        except BaseException as e:  # noqa: BLE001 - a worker must never die or leak a Python error
            self._report(CudaError(CUDA_ERROR_UNKNOWN, f"stream task failed: {type(e).__name__}: {e}"))

    def _report(self, err: CudaError) -> None:
        log.error(f"stream work failed: {err}")
        if self.fault is None:
            self.fault = err
        cb = self.on_fault
        if cb is not None:
            try:
                cb(err)
            except BaseException:  # noqa: BLE001
                pass

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._tasks:
                    self._busy = False
                    if self.on_busy is not None:
                        self.on_busy(False)
                    if self._waiting:
                        self._drained.notify_all()
                    return
                fn = self._tasks.popleft()
            self._run(fn)
            del fn


    # --- BackendStream ---------------------------------------------------------------------------------
    def copy(self, dst: int, src: int, size: int) -> bool:
        """True when the copy is already done (it ran inline on an idle stream)."""
        if not size:
            return True
        if size <= INLINE_BYTES and not self._busy:
            with self._lock:
                if not self._busy:   # the common synchronous case, without building a task
                    if size <= libc.SMALL_COPY:
                        _copy_holding_gil(_null + dst, _null + src, size)
                    else:
                        libc.memmove(dst, src, size)
                    return True
        self.enqueue(lambda: libc.memmove(dst, src, size))
        return False

    def copy_2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int) -> None:
        if width and height:
            self.enqueue(lambda: _copy_2d(dst, dpitch, src, spitch, width, height),
                         inline=width * height <= INLINE_BYTES)

    def memset(self, ptr: int, value: int, elem_size: int, count: int, pitch: int = 0, height: int = 1) -> None:
        if count and height:
            pitch = pitch or count * elem_size
            self.enqueue(lambda: _fill(ptr, value, elem_size, count, pitch, height),
                         inline=count * elem_size * height <= INLINE_BYTES)

    def launch(self, function, grid: tuple, block: tuple, shared_bytes: int, params: bytes,
               cooperative: bool = False) -> None:
        # The packed parameters are copied now: the caller may reuse its buffer as soon as we return.
        buf = libc.ffi.new("char[]", max(len(params), 1))
        libc.ffi.memmove(buf, params, len(params))
        global KernelFault
        if KernelFault is None:     # an import statement per kernel was a tenth of a launch's cost
            from ptx.errors import KernelFault
        grid, block = tuple(grid), tuple(block)
        address = int(libc.ffi.cast("uintptr_t", buf))

        def run(_params=buf):   # the closure keeps the parameter buffer alive until the kernel ran
            if self.fault is not None:
                return  # the context is dead after a fault, as on a GPU; later kernels do not run
            try:
                function.launch_raw(grid, block, address, shared_bytes, cooperative)
            except KernelFault as e:
                raise CudaError(_FAULT_CODES.get(e.kind, CUDA_ERROR_LAUNCH_FAILED),
                                f"kernel {getattr(function, 'name', '?')} stopped: {e}") from None
        self.enqueue(run)

    def host_func(self, fn) -> None:
        self.enqueue(fn)

    def record(self, event: CpuEvent) -> None:
        c = Completion()
        event.last = c
        self.enqueue(c.complete, inline=True)

    def wait(self, event: CpuEvent) -> None:
        c = event.last
        if c is not None and not c.done:
            self.enqueue(c.wait)

    def write_value(self, addr: int, value: int, size: int) -> None:
        data = value.to_bytes(size, "little")
        self.enqueue(lambda: libc.ffi.memmove(libc.ffi.cast("char *", addr), data, size), inline=True)

    def wait_value(self, addr: int, value: int, size: int, op: int) -> None:
        self.enqueue(lambda: _wait_until(addr, value, size, op), inline=_value_ready(addr, value, size, op))

    def query(self) -> bool:
        return not self._busy and not self._tasks

    def synchronize(self) -> None:
        if self._busy:
            with self._lock:
                if self._drained is None:
                    self._drained = threading.Condition(self._lock)
                self._waiting += 1
                while self._busy:
                    self._drained.wait()
                self._waiting -= 1
        if self.fault is not None:
            raise self.fault

    def destroy(self) -> None:
        # Pending work still runs (cuStreamDestroy returns at once on a GPU too); the pool thread holding
        # the drain keeps this object alive only until the queue is empty.
        pass
