"""The native launch queue (launchq.c) seen from Python: built once per source hash with the system C compiler,
loaded through cffi's ABI mode (each call releases the GIL). `get()` is None when it cannot be built."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import cffi

from zluda_py import log

HERE = Path(__file__).resolve().parent
CFLAGS = ["-O2", "-shared", "-fPIC", "-pthread", "-std=gnu11"]
# How long a finished launcher, or a host thread waiting on a launch, spins before it sleeps: a loop of
# launch + synchronize comes back within this, and an idle process burns nothing after it.
SPIN_NS = 50_000

ffi = cffi.FFI()
ffi.cdef("""
    int zq_init(uintptr_t launch_ex, uintptr_t last_fault, uint64_t spin_ns);
    uint64_t zq_submit(uintptr_t fn, const char *params, uint32_t nparams, uint32_t gx, uint32_t gy, uint32_t gz,
                       uint32_t bx, uint32_t by, uint32_t bz, uint32_t static_shared, uint32_t dyn_shared,
                       uint32_t frame_bytes, uint32_t flags, uint64_t *state);
    void zq_wait(uint64_t ticket, uint64_t spin_ns);
    uint64_t *zq_done_address(void);
""")

_lock = threading.Lock()
_lib = None
_failed = False
STATE_WORDS = 10    # a stream's fault record, see zq_submit
DONE = (0,)         # DONE[0]: tickets run so far; a uint64_t* into the library once it is loaded


def done() -> int:
    return DONE[0]


def wait(ticket: int) -> None:
    """Return once `ticket` has run (GIL released while waiting)."""
    if DONE[0] < ticket:
        _lib.zq_wait(ticket, SPIN_NS)


def _build() -> Path:
    src = HERE / "launchq.c"
    digest = hashlib.sha256(src.read_bytes() + " ".join(CFLAGS).encode()).hexdigest()[:16]
    name = f"liblaunchq-{digest}.so"
    from ptx.runtime.build import _candidate_dirs, _compiler, _writable_dir
    dirs = [HERE / "_build"] + _candidate_dirs()[1:]
    for d in dirs:
        if (d / name).is_file():
            return d / name
    target_dir = next((d for d in dirs if _writable_dir(d)), None)
    if target_dir is None:
        raise OSError("no writable directory to build launchq.c in")
    fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".tmp", dir=target_dir)
    os.close(fd)
    try:
        cmd = [_compiler(), *CFLAGS, str(src), "-o", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise OSError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
        os.replace(tmp, target_dir / name)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target_dir / name


def get():
    """The loaded library (zq_* functions), or None: streams then run launches on their Python workers."""
    global _lib, _failed, DONE
    if _lib is not None or _failed:
        return _lib
    with _lock:
        if _lib is None and not _failed:
            try:
                import ctypes
                from ptx import runtime
                rt = runtime.library()
                launch_ex = ctypes.cast(rt.ptx_rt_launch_ex, ctypes.c_void_p).value
                last_fault = getattr(rt, "ptx_rt_last_fault", None)
                last_fault = ctypes.cast(last_fault, ctypes.c_void_p).value if last_fault is not None else 0
                lib = ffi.dlopen(str(_build()))
                lib.zq_init(launch_ex, last_fault or 0, SPIN_NS)
                DONE = lib.zq_done_address()
                _lib = lib
            except Exception as e:  # noqa: BLE001 - the Python path still works
                log.error(f"native launch queue unavailable, launches take the Python path: {e}")
                _failed = True
    return _lib
