"""Builds the native helpers generated code calls besides the runtime (the warp/barrier scheduler,
warp_scheduler.c) once per source hash, and gives their addresses for llvmlite.add_symbol."""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "warp_scheduler.c", HERE.parent / "runtime" / "ptxrt.h")
CFLAGS = ["-O2", "-shared", "-fPIC", "-std=gnu11"]
EXPORTS = ("ptx_sched_resolve_warp", "ptx_sched_release_barrier", "ptx_sched_xchg_area")
_lock = threading.Lock()
_lib = None


def _build() -> Path:
    from ptx.runtime.build import build_library
    return build_library("ptxsched", SOURCES[0], SOURCES, CFLAGS)


def helper_symbols() -> dict:
    global _lib
    with _lock:
        if _lib is None:
            # RTLD_GLOBAL: kernel shared objects (ptx/host_loader.py) bind to these names when dlopened
            _lib = ctypes.CDLL(str(_build()), mode=ctypes.RTLD_GLOBAL)
    return {n: ctypes.cast(getattr(_lib, n), ctypes.c_void_p).value for n in EXPORTS}
