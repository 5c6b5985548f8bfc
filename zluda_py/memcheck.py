"""ZLUDA_MEMCHECK=1: kernels are compiled to check every access (ptx/codegen/memcheck.py) against the CPU
runtime's range table, which this module keeps in step with the driver's allocation index."""

from __future__ import annotations

import os

ON = os.environ.get("ZLUDA_MEMCHECK", "0") == "1"
# Allocation.kind -> PTXRT_MC_* (ptx/runtime/ptxrt.h), for the report's "nearest ..." line
KINDS = {"device": 0, "pool": 1, "host": 2, "module": 3, "managed": 5, "registered": 6}
_lib = None


def _runtime():
    global _lib
    if _lib is None:
        import ctypes
        from ptx import runtime
        lib = runtime.library()
        lib.ptx_rt_memcheck_add.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32]
        lib.ptx_rt_memcheck_remove.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
        lib.ptx_rt_memcheck_enable(1)
        _lib = lib
    return _lib


def added(base: int, size: int, kind: str) -> None:
    _runtime().ptx_rt_memcheck_add(base, size, KINDS.get(kind, 0))


def removed(base: int, size: int) -> None:
    _runtime().ptx_rt_memcheck_remove(base, size)
