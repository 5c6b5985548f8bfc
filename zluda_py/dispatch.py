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


_SIGN = 1 << 63
# Per-argument conversion written inline into each adapter: a function call per argument would cost as
# much as the rest of a trivial call. (x ^ 2**63) - 2**63 reinterprets a sign-extended u64 as signed.
_CONVERT = {"i8": "((a[{i}] ^ _SIGN) - _SIGN)", "i16": "((a[{i}] ^ _SIGN) - _SIGN)",
            "i32": "((a[{i}] ^ _SIGN) - _SIGN)", "i64": "((a[{i}] ^ _SIGN) - _SIGN)",
            "f32": "_f32(a[{i}])", "f64": "_f64(a[{i}])"}


def _make_adapter(name, params, fn):
    """Build `lambda a: fn(conv(a[0]), ...) or 0` once per symbol: one indexing per argument, and the
    handler's None (success) becomes 0 without a test in dispatch()."""
    parts = [_CONVERT.get(p.get("abi", "u64"), "a[{i}]").format(i=i) for i, p in enumerate(params)]
    src = f"lambda a: fn({', '.join(parts)}) or 0"
    return eval(src, {"fn": fn, "_SIGN": _SIGN, "_f32": _f32, "_f64": _f64})


_once_lock = threading.Lock()


def _unsupported(name):
    logged = []

    def handler(a):
        if not logged:
            with _once_lock:
                if not logged:
                    logged.append(True)
                    log.error(f"{name}: not implemented, returning CUDA_ERROR_NOT_SUPPORTED")
        return CUDA_ERROR_NOT_SUPPORTED
    return handler


def _traced(fid, handler):
    def traced(a):
        r = handler(a)
        log.write(f"{FUNCTIONS[fid]['name']}({_trace_args(fid, a)}) -> {NAME_OF.get(r, r)}")
        return r
    return traced


def _first_call(fid):
    # Until the first call the table holds these: building it imports every driver module, which is
    # too slow for the moment the shim is loaded and must not happen when zluda_py is merely imported.
    def first(a):
        _ensure_table()
        return HANDLERS[fid](a)
    return first


HANDLERS: list = [_first_call(i) for i in range(len(FUNCTIONS))]
_ready = False


def _ensure_table():
    global _ready
    if _ready:
        return
    with _table_lock:
        if _ready:
            return
        import zluda_py.driver  # noqa: F401  (registers every handler)
        table = []
        for fid, f in enumerate(FUNCTIONS):
            fn = _registered.get(f["name"])
            h = _make_adapter(f["name"], f["params"], fn) if fn else _unsupported(f["name"])
            table.append(_traced(fid, h) if log.TRACE else h)
        HANDLERS[:] = table
        _ready = True


def _trace_value(param, raw):
    abi = param.get("abi", "u64")
    if abi in ("i8", "i16", "i32", "i64"):
        return str((raw ^ _SIGN) - _SIGN)
    if abi in ("f32", "f64"):
        return repr((_f32 if abi == "f32" else _f64)(raw))
    if raw and param.get("ctype") == "const char *":
        from zluda_py import cmem
        return repr(cmem.read_cstring(raw, limit=200))  # names (cuGetProcAddress, cuModuleGetFunction)
    return f"{raw:#x}"


def _trace_args(fid, args):
    f = FUNCTIONS[fid]
    return ", ".join(f"{p['name']}={_trace_value(p, args[i])}" for i, p in enumerate(f["params"]))


def dispatch(fid: int, args) -> int:
    """Run the handler for function `fid` over the raw argument array; always returns a CUresult."""
    try:
        return HANDLERS[fid](args)
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
