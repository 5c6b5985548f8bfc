"""An elastic pool of host threads shared by every CPU stream: a thread is started only when no idle one
exists, and exits after sitting idle, so streams cost no thread of their own and none leak."""

import threading

from zluda_py.backends.cpu import launchq

IDLE_EXIT_SECONDS = 2.0
# A task submitted with a claim word waits this long (in C, GIL released) for the host thread to take it
# back (take_back: a synchronize right after the enqueue runs the work itself, without a thread hop)
# before this thread takes the GIL to run it.
GRACE_NS = 30_000


class _Worker:
    __slots__ = ("task", "claim", "wake")

    def __init__(self, task, claim):
        self.task = task
        self.claim = claim
        self.wake = threading.Lock()
        self.wake.acquire()


class WorkerPool:
    """submit(fn) runs fn on some pool thread soon; fn may block (a stream waiting on another stream's
    event) without starving others, because a busy pool grows instead of queueing.

    Idle threads wait on a Python lock, not in C: a thread woken while the submitting thread still holds
    the GIL queues for the GIL at once and gets it within microseconds, where one that comes back from C
    later can wait a whole switch interval (5 ms) behind a host thread busy in Python."""

    def __init__(self, idle_exit_seconds: float = IDLE_EXIT_SECONDS):
        self._lock = threading.Lock()
        self._idle: list = []
        self._idle_exit = idle_exit_seconds
        self.threads_started = 0

    def submit(self, fn, claim=None) -> None:
        """claim: a uint32_t[1] cdata holding 0, or None; see take_back."""
        with self._lock:
            if self._idle:
                w = self._idle.pop()
                w.task = fn
                w.claim = claim
                w.wake.release()
                return
            self.threads_started += 1
        w = _Worker(fn, claim)
        threading.Thread(target=self._run, args=(w,), name="zluda-cpu-stream", daemon=True).start()

    @staticmethod
    def take_back(claim) -> bool:
        """The submitter runs the task itself: True when no pool thread has started it (none will)."""
        return bool(launchq._lib.zq_cas(claim, 0, 1))

    def idle_threads(self) -> int:
        return len(self._idle)

    def _run(self, w: _Worker) -> None:
        while True:
            task, w.task = w.task, None
            claim, w.claim = w.claim, None
            if claim is None or launchq._lib.zq_grace(claim, GRACE_NS):
                try:
                    task()
                except BaseException:  # noqa: BLE001 - tasks report their own errors; the worker must survive
                    pass
            del task, claim
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


POOL = WorkerPool()
