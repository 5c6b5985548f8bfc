"""An elastic pool of host threads shared by every CPU stream: a thread is started only when no idle one
exists, and exits after sitting idle, so streams cost no thread of their own and none leak."""

import threading

IDLE_EXIT_SECONDS = 2.0


class _Worker:
    __slots__ = ("task", "wake")

    def __init__(self, task):
        self.task = task
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

    def submit(self, fn) -> None:
        with self._lock:
            if self._idle:
                w = self._idle.pop()
                w.task = fn
                w.wake.release()
                return
            self.threads_started += 1
        w = _Worker(fn)
        threading.Thread(target=self._run, args=(w,), name="zluda-cpu-stream", daemon=True).start()

    def idle_threads(self) -> int:
        return len(self._idle)

    def _run(self, w: _Worker) -> None:
        while True:
            task, w.task = w.task, None
            try:
                task()
            except BaseException:  # noqa: BLE001 - tasks report their own errors; the worker must survive
                pass
            del task
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
