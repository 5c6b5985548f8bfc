"""CPU streams: kernels go to the native launch queue (launchq.c), other device work to an in-order queue
drained by a thread of the shared worker pool, so work runs asynchronously with the host; small work on an
idle stream runs inline, and a synchronize runs device work nobody has started itself (same order, no thread
hop). Host functions run only on pool threads, never inside the caller's API call, as CUDA's do."""

from __future__ import annotations

import threading
import time
from collections import deque

from zluda_py import log, profile
from zluda_py.backends.base import BackendStream
from zluda_py.backends.cpu import launchq, libc
from zluda_py.backends.cpu.event import Completion, CpuEvent
from zluda_py.backends.cpu.workers import POOL
from zluda_py.errors import (CudaError, CUDA_ERROR_ASSERT, CUDA_ERROR_LAUNCH_FAILED,
                             CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_UNKNOWN)

# Copies and fills up to this size run inline on an idle stream: a thread hop costs more than the work.
INLINE_BYTES = 64 * 1024

KernelFault = None      # ptx.errors.KernelFault, imported by the first launch
_copy_holding_gil = libc._copy_holding_gil
_null = libc._null

_DISABLE_TIMING = 0x2     # CU_EVENT_DISABLE_TIMING
_PROFILE = profile.ON     # time each launch of the Python path (ZLUDA_PROFILE)
_kernel_names: dict = {}  # kernel address -> name, for the message of a native launch's fault
_stamps: list = []        # (ticket, uint64_t[1]) time stamps the launch queue has yet to write
_W_STATE, _W_COUNTED, _W_SYNCED = launchq.W_STATE, launchq.W_COUNTED, launchq.W_SYNCED
_counters: dict = {}      # address -> int64_t * of a context's busy count (launchq_streams.c keeps them all)

_FAULT_CODES = {"trap": CUDA_ERROR_LAUNCH_FAILED, "assert": CUDA_ERROR_ASSERT,
                "fault": CUDA_ERROR_ILLEGAL_ADDRESS, "misaligned": CUDA_ERROR_MISALIGNED_ADDRESS}


class _HostTask:
    """A host function or stream callback in a queue: only a pool thread may run it (it may wait for the
    thread that is synchronizing)."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        self.fn()


def _fill(ptr: int, value: int, elem_size: int, count: int, pitch: int, height: int) -> None:
    if elem_size == 1 and (height == 1 or pitch == count):
        libc.memset(ptr, value & 0xFF, count * height)
        return
    import numpy as np     # here, not above: a byte memset must not pay numpy's import (~0.1-0.3 s)
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
    is set; the stream itself also remembers the first fault and raises it from synchronize().

    Kernel launches on a stream with no Python work queued go to the native launch queue (launchq.c) and
    the stream keeps only the ticket of its last one: no thread hop, no GIL on the way; Python work queued
    behind them first waits for that ticket. A fault of a native launch is noticed when the host next looks
    at the stream (query, synchronize, the next launch, its worker).

    Once registered with the native queue (`register`, before any work) the stream's ticket, fault record
    and busy state live in C (launchq_streams.c's struct zq_stream, `_cell`; `_w` its words), changed only
    under its C lock, because the shim's fast path launches, synchronizes and queries it without entering
    Python. Busy transitions are then counted in C, per context (what `register` answers) and for the whole
    process, and `on_busy` is not called. Otherwise `_w` is a list of zeros (no ticket is ever taken:
    launches are Python's) and on_busy reports transitions."""

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
        self._busy = False       # the queue has a drain scheduled or running (set and cleared under _lock)
        self._claimed = False    # a thread is running the drain: the pool's, or a synchronize that took it
        self._waiting = 0
        self._reported = False   # what on_busy was last told (without the native queue)
        self._claim = None       # the claim (workers.py: word, open value) of the drain given to the pool
        self._worker = None      # and the pool thread it went to, while the drain may be taken back
        # words: [W_TICKET] the native ticket later work must wait for, [W_STATE...] the fault record,
        # [W_COUNTED] busy, [W_SYNCED] synchronize() was called since the last queue went to the pool
        self._q = self._cell = None
        self._w = [0] * launchq.WORDS

    def __del__(self):
        cell = self._cell
        if cell is not None:
            try:
                self._q.zq_stream_release(cell)     # C frees it once its launches can no longer write it
            except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone already
                pass

    @property
    def _ticket(self) -> int:
        return self._w[0]

    def register(self, ctx_handle: int, handle: int, blocking: bool, thread: int):
        """Give the stream its native state, known to the shim's fast path; the context's busy count (an
        int64_t *), or None when busy transitions go to on_busy instead (no native queue)."""
        q = launchq.get()
        if q is None or self._cell is not None:
            return None
        cell = q.zq_stream_create(ctx_handle, handle, thread, 1 if blocking else 0)
        if cell == launchq.ffi.NULL:
            return None
        self._q, self._cell = q, cell
        self._w = launchq.ffi.cast("uint64_t *", cell)
        address = self._w[launchq.W_CTX_BUSY]
        counter = _counters.get(address)
        if counter is None:
            counter = _counters[address] = launchq.ffi.cast("int64_t *", address)
        return counter

    def unregister(self, _destroyed=launchq.W_DESTROYED) -> None:
        # bound at definition: a thread's per-thread streams retire from a __del__ that may run at
        # interpreter exit, after this module's globals are gone
        if self._cell is not None:
            self._w[_destroyed] = 1    # C reaps it from its registry once its work has run

    def counted(self) -> bool:
        """Counted busy: it may have work (query() says for sure, and stops counting it when idle)."""
        return self._w[_W_COUNTED] != 0 if self._cell is not None else self._reported

    # --- queue machinery -------------------------------------------------------------------------------
    def _set_busy(self, busy: bool) -> None:     # under _lock
        if self._cell is not None:
            if busy:
                self._q.zq_stream_close(self._cell)
            else:
                self._q.zq_stream_open(self._cell)
        elif busy != self._reported:
            self._reported = busy
            if self.on_busy is not None:
                self.on_busy(busy)

    def _idle(self, ticket: int) -> None:
        """query()/synchronize() found the stream idle up to `ticket` (and looked at its fault record): it
        stops counting as busy, unless a launch came since."""
        if self._cell is not None:
            if self._w[_W_COUNTED]:
                with self._lock:
                    if not self._busy:
                        self._q.zq_stream_idle(self._cell, ticket)
        elif self._reported:
            with self._lock:    # another thread may have queued work since
                if not self._busy and launchq.reached(self._ticket):
                    self._set_busy(False)

    def _hold(self) -> bool:
        """Under _lock, with nothing queued in Python: whether the native work has all run, and if so no
        fast-path launch starts until _unhold (small work then runs inline, in order)."""
        cell = self._cell
        if cell is None:
            return True
        return self._q.zq_stream_hold(cell) != 0

    def _unhold(self) -> None:
        if self._cell is not None:
            self._q.zq_stream_unhold(self._cell)

    def enqueue(self, fn, inline: bool = False, hold: bool = True) -> None:
        """Queue fn (no arguments) behind earlier work. inline=True lets an idle stream run it right here,
        under the lock so that concurrent enqueuers line up behind it, and (hold) keeping the fast path's
        launches from starting before it ends; work no launch could see half done (marking an event
        complete) needs no hold. When the host has been waiting for
        this stream (a synchronize since the last queue was handed out), the pool thread first gives it
        workers.GRACE_NS to take the queue over: the host, which would only wait, then runs it itself,
        without a thread hop."""
        with self._lock:
            if not self._busy:
                if inline and launchq.reached(self._ticket) and (not hold or self._hold()):
                    try:
                        self._run(fn)
                    finally:
                        if hold:
                            self._unhold()
                    return
                self._busy = True
                self._set_busy(True)
                self._tasks.append(fn)
                claim = None
                w = self._w
                if w[_W_SYNCED]:
                    w[_W_SYNCED] = 0
                    if POOL.takes_claims:
                        # one word per stream, each post with the next number (see launchq.c's zq_grace)
                        word, open_ = self._claim or (libc.ffi.new("uint32_t[1]"), 0)
                        open_ = (open_ + 4) & 0xFFFFFFFC
                        word[0] = open_
                        claim = self._claim = (word, open_)
                w = POOL.submit(self._pool_drain, claim)
                self._worker = w if claim is not None else None
                return
            self._tasks.append(fn)

    def _run(self, fn) -> None:
        try:
            fn()
        except CudaError as e:
            self._report(e)
        except BaseException as e:  # noqa: BLE001 - a worker must never die or leak a Python error
            self._report(CudaError(CUDA_ERROR_UNKNOWN, f"stream task failed: {type(e).__name__}: {e}"))

    def _report(self, err: CudaError) -> None:
        if self.fault is None:
            self.fault = err
        cb = self.on_fault
        if cb is not None:
            try:
                cb(err)         # the driver's context takes the fault, and logs it as its sticky error
                return
            except BaseException:  # noqa: BLE001
                pass
        log.error(f"stream work failed: {err}")

    def _native_fault(self) -> None:
        """Report the fault a native launch of this stream wrote, once, as the Python path would have."""
        if self._w[_W_STATE] and self.fault is None:
            st = [self._w[_W_STATE + i] for i in range(launchq.W_COUNTED - _W_STATE)]
            status, name = st[0], _kernel_names.get(st[1], "?")
            if status == 3:
                err = CudaError(CUDA_ERROR_UNKNOWN, f"stream task failed: ValueError: launch of {name} "
                                                    "refused by the runtime (resources)")
            else:
                kind, what = {1: ("trap", f"kernel {name} executed trap"),
                              2: ("assert", f"assertion failed in kernel {name}"),
                              4: ("fault", _memory_fault(name, st)),
                              5: ("misaligned", f"kernel {name}: misaligned address")}.get(
                                  status, ("fault", f"kernel {name} status {status}"))
                err = CudaError(_FAULT_CODES[kind], f"kernel {name} stopped: {what}")
            self._report(err)

    def _pool_drain(self) -> None:
        with self._lock:
            if self._claimed or not self._busy:
                return          # a synchronize ran the queue itself before this thread got to it
            self._claimed = True
        self._drain()

    def _drain(self, host: bool = False) -> None:
        """Run the queue to its end; the caller has claimed it. host: the caller is an application thread
        (a synchronize), which hands the queue to the pool at the first host function."""
        launchq.wait(self._ticket)  # native launches queued before this Python work
        if self._w[_W_STATE]:
            self._native_fault()
        while True:
            with self._lock:
                if not self._tasks:
                    self._busy = self._claimed = False
                    self._worker = None
                    self._set_busy(False)
                    if self._waiting:
                        self._drained.notify_all()
                    return
                if host and type(self._tasks[0]) is _HostTask:
                    self._claimed = False
                    self._worker = None
                    POOL.submit(self._pool_drain)
                    return
                fn = self._tasks.popleft()
            self._run(fn)
            del fn

    # --- BackendStream ---------------------------------------------------------------------------------
    def copy(self, dst: int, src: int, size: int) -> bool:
        """True when the copy is already done (it ran inline on an idle stream)."""
        if not size:
            return True
        t = self._w[0]
        if size <= INLINE_BYTES and not self._busy and launchq.DONE[(t & 15) << 3] >= t:
            with self._lock:
                if not self._busy and self._hold():   # the common synchronous case, without building a task
                    try:
                        if size <= libc.SMALL_COPY:
                            _copy_holding_gil(_null + dst, _null + src, size)
                        else:
                            libc.memmove(dst, src, size)
                    finally:
                        self._unhold()
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
        native_for = getattr(function, "native_for", None)
        native = native_for(block) if native_for is not None else getattr(function, "native", None)
        if native is not None and not self._busy:
            q = launchq._launcher or launchq.launcher()
            if q is not None and self._submit(q, native, function, grid, block, shared_bytes, params,
                                              cooperative):
                return
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
                if _PROFILE:
                    t0 = time.perf_counter_ns()
                    try:
                        function.launch_raw(grid, block, address, shared_bytes, cooperative)
                    finally:
                        profile.kernel_ran(getattr(function, "name", "?"), time.perf_counter_ns() - t0)
                else:
                    function.launch_raw(grid, block, address, shared_bytes, cooperative)
            except KernelFault as e:
                raise CudaError(_FAULT_CODES.get(e.kind, CUDA_ERROR_LAUNCH_FAILED),
                                f"kernel {getattr(function, 'name', '?')} stopped: {e}") from None
        self.enqueue(run)

    def _submit(self, q, native, function, grid, block, shared_bytes, params, cooperative) -> bool:
        """Hand the launch to the native queue; False when it must take the Python path (which reports
        what HostKernel.launch_raw refuses, or there is Python work queued)."""
        address, static_shared, frame_bytes, param_size = native
        gx, gy, gz = grid
        bx, by, bz = block
        if (min(gx, gy, gz, bx, by, bz) <= 0 or (gx | gy | gz | bx | by | bz | frame_bytes) >> 32
                or bx * by * bz > 1024 or bx > 1024 or by > 1024 or bz > 64 or shared_bytes < 0
                or shared_bytes + static_shared > (1 << 30) or len(params) < param_size):
            return False
        cell = self._cell
        if cell is None:
            return False
        with self._lock:
            if self._busy:
                return False
            if self._w[_W_STATE]:
                self._native_fault()
                return True     # the context is dead after a fault, as on a GPU; later kernels do not run
            if self.fault is not None:
                return True
            if address not in _kernel_names:
                _kernel_names[address] = getattr(function, "name", "?")
            t = self._q.zq_stream_submit(cell, address, params, len(params), gx, gy, gz, bx, by, bz,
                                         static_shared, shared_bytes, frame_bytes, int(cooperative))
            return t != 0

    def host_func(self, fn) -> None:
        self.enqueue(_HostTask(fn))

    def record(self, event: CpuEvent) -> None:
        shared = event.shared
        if shared is not None:      # other processes look at it: stamp its page when this point is reached
            seq = shared.begin_record()
            self.enqueue(lambda: shared.complete(seq), inline=True)
            return
        if not launchq.reached(self._ticket) and not self._busy:
            with self._lock:
                if not self._busy:      # a point behind native launches: a ticket of the launch queue
                    t = self._ticket
                    if t and event.flags & _DISABLE_TIMING:
                        event.last = Completion(t)
                        return
                    stamp = libc.ffi.new("uint64_t[1]")
                    t = self._q.zq_stream_stamp(self._cell, stamp) if t else 0
                    if t:
                        if _stamps and launchq.reached(_stamps[0][0]):
                            _bury()
                        _stamps.append((t, stamp))    # until the launcher wrote it
                        event.last = Completion(t, stamp)
                        return
        c = Completion()
        event.last = c
        self.enqueue(c.complete, inline=True, hold=False)

    def wait(self, event: CpuEvent) -> None:
        shared = event.shared
        if shared is not None:      # the last record at this call, whichever process made it
            seq = shared.recorded()
            if not shared.reached(seq):
                self.enqueue(lambda: shared.wait(seq))
            return
        c = event.last
        if c is None or c.finished():
            return
        if c.ticket and not self._busy and self._cell is not None:
            with self._lock:
                if not self._busy:
                    # later native launches queue behind it (in its lane, or behind a waiting item in this
                    # stream's); Python work waits for the stream's ticket. 0: out of memory, or it has run.
                    t = self._q.zq_stream_after(self._cell, c.ticket)
                    if t or launchq.reached(c.ticket):
                        return
        self.enqueue(c.wait)

    def write_value(self, addr: int, value: int, size: int) -> None:
        data = value.to_bytes(size, "little")
        self.enqueue(lambda: libc.ffi.memmove(libc.ffi.cast("char *", addr), data, size), inline=True)

    def wait_value(self, addr: int, value: int, size: int, op: int) -> None:
        self.enqueue(lambda: _wait_until(addr, value, size, op), inline=_value_ready(addr, value, size, op))

    def query(self) -> bool:
        t = self._w[0]
        if self._busy or self._tasks or launchq.DONE[(t & 15) << 3] < t:
            return False
        # The fault first, then idle: the shim's fast path skips Python for sync copies only while no
        # stream counts as busy, so the sticky error must be set before this one stops counting.
        if self._w[_W_STATE]:
            self._native_fault()
        self._idle(t)
        return True

    def synchronize(self) -> None:
        self._w[_W_SYNCED] = 1
        if self._busy:
            with self._lock:
                steal = (self._busy and not self._claimed
                         and not (self._tasks and type(self._tasks[0]) is _HostTask))
                if steal:
                    self._claimed = True
                    if self._worker is not None:    # spares the pool thread a GIL round trip
                        POOL.take_back(self._worker, self._claim)
                        self._worker = None
            # Work no pool thread has started yet runs here: this thread would only wait for it, and a
            # thread hop costs more than a small host function (it still runs in stream order).
            if steal:
                self._drain(host=True)
        if self._busy:
            with self._lock:
                if self._drained is None:
                    self._drained = threading.Condition(self._lock)
                self._waiting += 1
                while self._busy:
                    self._drained.wait()
                self._waiting -= 1
        t = self._w[0]
        if t:
            if launchq.DONE[(t & 15) << 3] < t:     # lane t & 15's counter, read without a call
                launchq.wait(t)
            if self._w[_W_STATE]:      # before idle, as in query()
                self._native_fault()
            self._idle(t)
        if self.fault is not None:
            raise self.fault

    def destroy(self) -> None:
        # Pending work still runs (cuStreamDestroy returns at once on a GPU too); the pool thread holding
        # the drain keeps this object alive only until the queue is empty. The fast path no longer finds
        # it; C frees its native state once its launches have run.
        self.unregister()


def _memory_fault(name: str, st) -> str:
    """ptx.host's message for a memory fault, from the ptx_fault_info the launcher copied to st[4:10]."""
    addr, code, signo, access = st[4], st[8] >> 32, st[8] & 0xFFFFFFFF, st[9] & 0xFFFFFFFF
    first, last, gx, gy = st[6], st[7], st[2], st[3]
    if not signo:
        return f"kernel {name}: illegal memory access"
    import signal
    kind = {1: "read", 2: "write"}.get(access, "access")
    sig = "SIGBUS" if signo == signal.SIGBUS else "SIGSEGV"
    where = f"address 0x{addr:x}" if addr or code != 0x80 else "a non-canonical address"

    def coords(b):
        return f"({b % gx},{b // gx % gy},{b // (gx * gy)})"
    blocks = (f"block {coords(first)}" if last - first <= 1
              else f"one of blocks {coords(first)}..{coords(last - 1)}")
    return f"kernel {name}: illegal memory {kind} at {where} ({sig}) in {blocks}"


def _bury() -> None:
    """Drop the time stamps whose tickets have run."""
    _stamps[:] = [(t, x) for (t, x) in _stamps if not launchq.reached(t)]
