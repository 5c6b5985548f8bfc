"""An elastic pool of host threads shared by every CPU stream: a thread is started only when no idle one
exists, and exits after sitting idle, so streams cost no thread of their own and none leak. Idle threads
park in C (launchq.c's zq_park: a short spin, then a futex, GIL released) when the native library is there,
on a Python lock otherwise."""

import threading

from zluda_py.backends.cpu import launchq

IDLE_EXIT_SECONDS = 2.0
# A task with a claim word waits this long for the host thread to take it over (a synchronize right after
# the enqueue) before this worker takes the GIL to run it: the host then runs it without a thread hop.
GRACE_NS = 30_000


class _Worker:
    __slots__ = ("task", "wake", "slot")

    def __init__(self, task, q):
        self.task = task
        if q is not None:
            self.slot = launchq.ffi.new("uint64_t[2]")      # struct zq_slot
            self.wake = None
        else:
            self.slot = None
            self.wake = threading.Lock()
            self.wake.acquire()


class WorkerPool:
    """submit(fn) runs fn on some pool thread soon; fn may block (a stream waiting on another stream's
    event) without starving others, because a busy pool grows instead of queueing."""

    def __init__(self, idle_exit_seconds: float = IDLE_EXIT_SECONDS):
        self._lock = threading.Lock()
        self._idle: list = []
        self._idle_exit = idle_exit_seconds
        self.threads_started = 0

    def submit(self, fn, claim=None):
        """claim: a uint32_t[1] cdata (0 = open) the caller may later take with take_back(); the worker
        gives the caller GRACE_NS to do so. Returns the worker the task went to when it can be taken
        back (else None)."""
        q = launchq._lib or launchq.get()
        with self._lock:
            if self._idle:
                w = self._idle.pop()
                w.task = fn
                if w.slot is not None:
                    q.zq_post(w.slot, claim if claim is not None else launchq.ffi.NULL)
                    return w if claim is not None else None
                w.wake.release()
                return None
            self.threads_started += 1
        w = _Worker(fn, q)
        threading.Thread(target=self._run, args=(w,), name="zluda-cpu-stream", daemon=True).start()
        return None

    def take_back(self, w, claim) -> bool:
        """The caller runs the task itself: True when the worker had not started it (it is idle again)."""
        if w is None or not launchq._lib.zq_cas(claim, 0, 1):
            return False
        with self._lock:
            w.task = None
            self._idle.append(w)
        return True

    def idle_threads(self) -> int:
        return len(self._idle)

    def _run(self, w: _Worker) -> None:
        q = launchq._lib
        exit_ns = int(self._idle_exit * 1e9)
        while True:
            task, w.task = w.task, None
            try:
                task()
            except BaseException:  # noqa: BLE001 - tasks report their own errors; the worker must survive
                pass
            del task
            if w.slot is None:
                with self._lock:
                    self._idle.append(w)
                if w.wake.acquire(timeout=self._idle_exit):
                    continue
                with self._lock:
                    if w in self._idle:
                        self._idle.remove(w)
                        return
                # submit() handed us a task between the timeout and the lock: take it.
                w.wake.acquire()
                continue
            seen = launchq.ffi.cast("uint32_t *", w.slot)[0]
            with self._lock:
                self._idle.append(w)
            if q.zq_park(w.slot, seen, launchq.SPIN_NS, exit_ns, GRACE_NS):
                continue
            with self._lock:
                if w in self._idle:
                    self._idle.remove(w)
                    return
            # submit() handed us a task between the timeout and the lock: take it.
            q.zq_park(w.slot, seen, launchq.SPIN_NS, 0, GRACE_NS)


POOL = WorkerPool()
