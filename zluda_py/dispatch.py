"""The dispatcher: every exported C symbol calls dispatch(fid, args); handlers are registered with @export.

Contract for handlers (zluda_py/driver/*.py):
    @export("cuMemAlloc_v2")
    def mem_alloc(dptr, bytesize): ...
Arguments arrive in declaration order as Python ints (signed where the C type is signed, pointers and
handles as unsigned addresses, 0 for NULL), floats for float/double, and the address of a copy for a
struct passed by value. A handler returns None (CUDA_SUCCESS) or a CUresult int, or raises CudaError.
Anything else it raises is logged and becomes CUDA_ERROR_UNKNOWN: no exception crosses into C.
"""

import struct
import threading

from zluda_py import log
from zluda_py.decls import FUNCTIONS
from zluda_py.errors import (CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_UNKNOWN, NAME_OF, CudaError)

FUNCTION_IDS = {f["name"]: i for i, f in enumerate(FUNCTIONS)}
_registered: dict = {}
HANDLERS: list = []
_table_lock = threading.Lock()


def export(*names):
    """Register the decorated function as the implementation of the named exported symbols."""
    def deco(fn):
        for n in names:
            _registered[n] = fn
        return fn
    return deco


def implemented(name: str) -> bool:
    _ensure_table()
    return name in _registered


def _s64(x):
    return x - (1 << 64) if x >> 63 else x


def _f32(x):
    return struct.unpack("<f", struct.pack("<I", x & 0xFFFFFFFF))[0]


def _f64(x):
    return struct.unpack("<d", struct.pack("<Q", x))[0]


_CONVERT = {"i8": "_s64", "i16": "_s64", "i32": "_s64", "i64": "_s64", "f32": "_f32", "f64": "_f64"}


def _make_adapter(name, params, fn):
    """Build `lambda a: fn(conv(a[0]), ...)` once per symbol so a call costs one indexing per argument."""
    parts = []
    for i, p in enumerate(params):
        conv = _CONVERT.get(p.get("abi", "u64"))
        parts.append(f"{conv}(a[{i}])" if conv else f"a[{i}]")
    src = f"lambda a: fn({', '.join(parts)})"
    return eval(src, {"fn": fn, "_s64": _s64, "_f32": _f32, "_f64": _f64})


def _unsupported(name):
    def handler(a):
        log.once(name, f"{name}: not implemented, returning CUDA_ERROR_NOT_SUPPORTED")
        return CUDA_ERROR_NOT_SUPPORTED
    return handler


def _ensure_table():
    if HANDLERS:
        return
    with _table_lock:
        if HANDLERS:
            return
        import zluda_py.driver  # noqa: F401  (registers every handler)
        table = []
        for f in FUNCTIONS:
            fn = _registered.get(f["name"])
            table.append(_make_adapter(f["name"], f["params"], fn) if fn else _unsupported(f["name"]))
        HANDLERS.extend(table)


def _trace_args(fid, args):
    f = FUNCTIONS[fid]
    return ", ".join(f"{p['name']}={args[i]:#x}" for i, p in enumerate(f["params"]))


def dispatch(fid: int, args) -> int:
    """Run the handler for function `fid` over the raw argument array; always returns a CUresult."""
    if not HANDLERS:
        _ensure_table()
    try:
        r = HANDLERS[fid](args)
        r = 0 if r is None else r
        if log.TRACE:
            log.write(f"{FUNCTIONS[fid]['name']}({_trace_args(fid, args)}) -> {NAME_OF.get(r, r)}")
        return r
    except CudaError as e:
        name = FUNCTIONS[fid]["name"]
        if log.TRACE:
            log.write(f"{name}({_trace_args(fid, args)}) -> {NAME_OF.get(e.code, e.code)}: {e.message}")
        else:
            log.error(f"{name}: {NAME_OF.get(e.code, e.code)}: {e.message}")
        return e.code
    except BaseException as e:  # noqa: BLE001 - nothing may escape into the host application
        name = FUNCTIONS[fid]["name"] if 0 <= fid < len(FUNCTIONS) else str(fid)
        log.error(f"{name}: internal error {type(e).__name__}: {e}")
        if log.TRACE:
            import traceback
            log.write(traceback.format_exc())
        return CUDA_ERROR_UNKNOWN
