"""Builds the native helpers generated code calls besides the runtime (the warp/barrier scheduler,
warp_scheduler.c) once per source hash, and gives their addresses for llvmlite.add_symbol."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "warp_scheduler.c", HERE.parent / "runtime" / "ptxrt.h")
CFLAGS = ["-O2", "-shared", "-fPIC", "-std=gnu11"]
EXPORTS = ("ptx_sched_resolve_warp", "ptx_sched_release_barrier")
_lock = threading.Lock()
_lib = None


def _build() -> Path:
    h = hashlib.sha256()
    for p in SOURCES:
        h.update(p.read_bytes())
    h.update(" ".join(CFLAGS).encode())
    name = f"libptxsched-{h.hexdigest()[:16]}.so"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    dirs = [Path(cache) / "zluda-py", Path(tempfile.gettempdir()) / f"zluda-py-{os.getuid()}"]
    for d in dirs:
        if (d / name).is_file():
            return d / name
    for d in dirs:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".tmp", dir=d)
        os.close(fd)
        try:
            cc = os.environ.get("CC", "cc")
            cmd = [cc, *CFLAGS, str(SOURCES[0]), "-o", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
            os.replace(tmp, d / name)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return d / name
    raise RuntimeError("no writable directory to build the warp scheduler")


def helper_symbols() -> dict:
    global _lib
    with _lock:
        if _lib is None:
            _lib = ctypes.CDLL(str(_build()))
    return {n: ctypes.cast(getattr(_lib, n), ctypes.c_void_p).value for n in EXPORTS}
