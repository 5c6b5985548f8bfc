"""CPU events: each record creates a Completion that the stream's worker stamps with the time when all
earlier work on that stream has finished, or that stands for a ticket of the native launch queue (untimed
events recorded behind native launches); waiting blocks on a lock or, for a ticket, in C without the GIL."""

import threading
import time

from zluda_py.backends.base import BackendEvent
from zluda_py.backends.cpu import launchq
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_READY

_waiters_lock = threading.Lock()


class Completion:
    """One point in a stream's order: done once the worker reaches it; `time_ns` is when it did. With a
    `ticket`, done once the native launch queue has run that ticket, which wrote the time to `stamp` (a
    uint64_t[1], kept alive by the stream until then) or, without one, took none."""

    __slots__ = ("done", "time_ns", "_waiters", "ticket", "stamp")

    def __init__(self, ticket: int = 0, stamp=None):
        self.done = False
        self.time_ns = 0
        self._waiters = None
        self.ticket = ticket
        self.stamp = stamp

    def finished(self) -> bool:
        if self.done:
            return True
        if self.ticket and launchq.reached(self.ticket):
            self._reached()
            return True
        return False

    def _reached(self) -> None:
        if self.stamp is not None:
            self.time_ns = self.stamp[0]
            self.stamp = None
        self.done = True

    def complete(self) -> None:
        self.time_ns = time.perf_counter_ns()
        with _waiters_lock:
            self.done = True
            waiters, self._waiters = self._waiters, None
        if waiters:
            for lock in waiters:
                lock.release()

    def wait(self) -> None:
        if self.done:
            return
        if self.ticket:
            launchq.wait(self.ticket)
            self._reached()
            return
        lock = threading.Lock()
        lock.acquire()
        with _waiters_lock:
            if self.done:
                return
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(lock)
        lock.acquire()


class CpuEvent(BackendEvent):
    """flags are CUevent_flags; timing is always taken (it is one clock read), the driver enforces
    CU_EVENT_DISABLE_TIMING."""

    __slots__ = ("flags", "last")
    shared = None       # an interprocess event's counters (shared_event.SharedCpuEvent)

    def __init__(self, flags: int = 0):
        self.flags = flags
        self.last: Completion | None = None

    def query(self) -> bool:
        c = self.last
        return c is None or c.finished()

    def synchronize(self) -> None:
        c = self.last
        if c is not None:
            c.wait()

    def elapsed_ms(self, start: "CpuEvent") -> float:
        a, b = start.last, self.last
        if a is None or b is None:
            raise CudaError(CUDA_ERROR_INVALID_HANDLE, "event has not been recorded")
        if not (a.finished() and b.finished()):
            raise CudaError(CUDA_ERROR_NOT_READY, "event has not completed yet")
        return (b.time_ns - a.time_ns) / 1e6
