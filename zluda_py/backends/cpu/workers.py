"""An elastic pool of host threads shared by every CPU stream: a thread is started only when no idle one
exists, and exits after sitting idle, so streams cost no thread of their own and none leak."""

import os
import threading

from zluda_py.backends.cpu import launchq

IDLE_EXIT_SECONDS = 2.0
# A task submitted with a claim word waits this long (in C, GIL released) for the submitter to take it
# back (take_back: a synchronize right after the enqueue runs the work itself, without a thread hop)
# before the pool thread takes the GIL to run it.
GRACE_NS = 30_000


class _Worker:
    __slots__ = ("task", "claim", "wake", "slot", "posted")

    def __init__(self, task, claim):
        self.task = task
        self.claim = claim
        self.posted = False     # given its task through zq_post (it waits for take_back in C)
        self.slot = None        # launchq.c's struct zq_slot, made the first time it parks in C
        self.wake = threading.Lock()
        self.wake.acquire()


class WorkerPool:
    """submit(fn) runs fn on some pool thread soon; fn may block (a stream waiting on another stream's
    event) without starving others, because a busy pool grows instead of queueing.

    Idle threads wait in one of two places. After a task without a claim word, on a Python lock: a thread
    woken there while the submitter still holds the GIL queues for it at once and gets it within
    microseconds, where one coming back from C later can wait a whole switch interval (5 ms) behind a host
    thread that keeps calling the driver. After a task with a claim word (a stream the host synchronizes
    on), in C (launchq.c's zq_park: a short spin, then a futex, GIL released): its next such task can be
    taken back by the host without this thread ever taking the GIL."""

    def __init__(self, idle_exit_seconds: float = IDLE_EXIT_SECONDS):
        self._lock = threading.Lock()
        self._idle: list = []       # parked on their lock
        self._idle_c: list = []     # parked in C
        self._idle_exit = idle_exit_seconds
        self.threads_started = 0
        self._claims = None

    @property
    def takes_claims(self) -> bool:
        """Whether submit() accepts claim words (the native library is there)."""
        if self._claims is None:
            self._claims = launchq.get() is not None
        return self._claims

    def submit(self, fn, claim=None):
        """claim: (a uint32_t[1] cdata, the value it holds now: its open state) (needs launchq), or None.
        Returns what take_back needs."""
        with self._lock:
            if claim is not None and self._idle_c:
                w = self._idle_c.pop()
                w.task = fn
                w.posted = True
                launchq._lib.zq_post(w.slot, *claim)
                return w
            idle = self._idle or self._idle_c
            if idle:
                w = idle.pop()
                w.task = fn
                if w.slot is not None and idle is self._idle_c:
                    w.posted = claim is not None
                    launchq._lib.zq_post(w.slot, *(claim if claim is not None else (launchq.ffi.NULL, 0)))
                else:
                    w.claim = claim
                    w.wake.release()
                return w
            self.threads_started += 1
        w = _Worker(fn, claim)
        threading.Thread(target=self._run, args=(w,), name="zluda-cpu-stream", daemon=True).start()
        return w

    def take_back(self, w, claim) -> bool:
        """The submitter runs the task itself: True when no pool thread has started it (none will)."""
        word, open_ = claim
        if not launchq._lib.zq_cas(word, open_, open_ | 1):
            return False
        if w.posted:     # it went back to waiting in C without the GIL: idle again
            with self._lock:
                w.task = None
                w.posted = False
                self._idle_c.append(w)
        return True

    def idle_threads(self) -> int:
        return len(self._idle) + len(self._idle_c)

    def _run(self, w: _Worker) -> None:
        exit_ns = int(self._idle_exit * 1e9)
        while True:
            task, w.task = w.task, None
            claim, w.claim = w.claim, None      # a task not given through zq_post: its grace is here
            claimed = claim is not None or w.posted
            if task is not None and (claim is None or launchq._lib.zq_grace(*claim, GRACE_NS)):
                try:
                    task()
                except BaseException:  # noqa: BLE001 - tasks report their own errors; the worker must survive
                    pass
            # Where to wait: in C after work the host waits on (claimed), else on the lock.
            del task, claim
            if not claimed:
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
            if w.slot is None:
                w.slot = launchq.ffi.new("uint64_t[3]")      # struct zq_slot
            seen = launchq.ffi.cast("uint32_t *", w.slot)[0]
            with self._lock:
                w.posted = False
                self._idle_c.append(w)
            if launchq._lib.zq_park(w.slot, seen, launchq.SPIN_NS, exit_ns, GRACE_NS):
                continue
            with self._lock:
                if w in self._idle_c:
                    self._idle_c.remove(w)
                    return
            # submit() handed us a task between the timeout and the lock: take it.
            launchq._lib.zq_park(w.slot, seen, launchq.SPIN_NS, 0, GRACE_NS)


POOL = WorkerPool()


def _forget_threads() -> None:
    # A forked child has none of the parent's pool threads: handing work to one would never run it.
    POOL._lock = threading.Lock()
    POOL._idle, POOL._idle_c = [], []


os.register_at_fork(after_in_child=_forget_threads)
