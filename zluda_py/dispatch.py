"""The dispatcher: every exported C symbol lands here with its function id; handlers register with @export.

Contract for handlers (zluda_py/driver/*.py):
    @export("cuMemAlloc_v2")
    def mem_alloc(dptr, bytesize): ...
Arguments arrive in declaration order as Python ints (signed where the C type is signed, pointers and
handles as unsigned addresses, 0 for NULL), floats for float/double, and the address of a copy for a
struct passed by value. A handler returns None (CUDA_SUCCESS) or a CUresult int, or raises CudaError.
Anything else it raises is logged and becomes CUDA_ERROR_UNKNOWN: no exception crosses into C.

How calls arrive: each C entry point calls the shim's `zluda_call_<sig>(fid, a0, ...)`, one cffi
extern per argument signature, which cffi converts to Python ints/floats in C; entry(n) is the Python
side of every signature of n arguments. dispatch(fid, args) is the generic form over a raw uint64_t
array (src/*.c code may use it through `zluda_dispatch`).
"""

import struct
import threading

from zluda_py import log, profile
from zluda_py.decls import FUNCTIONS
from zluda_py.errors import (CUDA_ERROR_NOT_READY, CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_UNKNOWN, NAME_OF,
                             CudaError)

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


def _f32(x):
    return struct.unpack("<f", struct.pack("<I", x & 0xFFFFFFFF))[0]


def _f64(x):
    return struct.unpack("<d", struct.pack("<Q", x))[0]


_SIGN = 1 << 63
_CONVERT = {"i8": "((a[{i}] ^ _SIGN) - _SIGN)", "i16": "((a[{i}] ^ _SIGN) - _SIGN)",
            "i32": "((a[{i}] ^ _SIGN) - _SIGN)", "i64": "((a[{i}] ^ _SIGN) - _SIGN)",
            "f32": "_f32(a[{i}])", "f64": "_f64(a[{i}])"}


def _make_converter(params):
    """`lambda a: (conv(a[0]), ...)`: raw uint64 slots -> the handler's argument values (generic path)."""
    parts = [_CONVERT.get(p.get("abi", "u64"), "a[{i}]").format(i=i) for i, p in enumerate(params)]
    return eval(f"lambda a: ({''.join(x + ', ' for x in parts)})", {"_SIGN": _SIGN, "_f32": _f32, "_f64": _f64})


# ---- the handler table: HANDLERS[fid](*values) -> None or CUresult ---------------------------------

_once_lock = threading.Lock()


def _unsupported(name):
    logged = []

    def handler(*values):
        if not logged:
            with _once_lock:
                if not logged:
                    logged.append(True)
                    log.error(f"{name}: not implemented, returning CUDA_ERROR_NOT_SUPPORTED")
        return CUDA_ERROR_NOT_SUPPORTED
    return handler


def _traced(fid, handler):
    from zluda_py.trace import call_line

    def traced(*values):
        r = handler(*values) or 0
        log.write(call_line(fid, values, r))
        return r
    return traced


def _first_call(fid):
    # Until the first call the table holds these: building it imports every driver module, which is
    # too slow for the moment the shim is loaded and must not happen when zluda_py is merely imported.
    def first(*values):
        _ensure_table()
        return HANDLERS[fid](*values)
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
            h = _registered.get(f["name"]) or _unsupported(f["name"])
            if profile.ON:      # chosen here, once: no cost per call without ZLUDA_PROFILE
                h = profile.wrap(f["name"], h)
            table.append(_traced(fid, h) if log.TRACE else h)
        if profile.ON:
            profile.install()
        HANDLERS[:] = table
        _ready = True


# ---- entries: what the C side calls ----------------------------------------------------------------

def fatal(e: CudaError, key: str) -> CudaError:
    """Mark `e` as a problem the program cannot get past (no device, no binary it can run): the first
    call failing with a `key` problem writes its line whatever ZLUDA_LOG says; re-raising the same error
    writes nothing more."""
    e.fatal = key
    return e


def expected(code: int, message: str) -> CudaError:
    """A failing answer that is part of normal operation (a probe for something optional, a question
    whose answer is "none"): traced like any other, but ZLUDA_LOG does not count it as an error."""
    e = CudaError(code, message)
    e.expected = True
    return e


def _failed(fid, e, values) -> int:
    """The CUresult for a handler's exception, logged as ZLUDA_LOG / ZLUDA_TRACE ask."""
    try:
        name = FUNCTIONS[fid]["name"] if 0 <= fid < len(FUNCTIONS) else str(fid)
        if isinstance(e, CudaError):
            line = f"{name}: {NAME_OF.get(e.code, e.code)}: {e.message}"
            key = getattr(e, "fatal", None)
            if key is not None and log.fatal(key, line):
                e.reported = True
                if not log.TRACE:
                    return e.code
            if log.TRACE:
                from zluda_py.trace import call_line
                log.write(call_line(fid, values, e.code, e.message))
            elif not (getattr(e, "reported", False) or getattr(e, "expected", False)
                      or e.code == CUDA_ERROR_NOT_READY):     # "not actually an error" (cuda.h)
                log.error(line)
            return e.code
        log.error(f"{name}: internal error {type(e).__name__}: {e}")
        if log.TRACE:
            import traceback
            log.write("".join(traceback.format_exception(type(e), e, e.__traceback__)))
    except BaseException:  # noqa: BLE001 - logging must not turn a failure into a crash
        pass
    return CUDA_ERROR_UNKNOWN


_ENTRIES: dict = {}


def entry(nargs: int):
    """The Python side of every C signature with `nargs` arguments: (fid, a0, ..., a{n-1}) -> CUresult."""
    fn = _ENTRIES.get(nargs)
    if fn is None:
        args = ", ".join(f"a{i}" for i in range(nargs))
        src = (f"def entry{nargs}(fid{', ' if nargs else ''}{args}):\n"
               f"    try:\n"
               f"        return HANDLERS[fid]({args}) or 0\n"
               f"    except BaseException as e:\n"
               f"        return _failed(fid, e, ({args}{',' if nargs else ''}))\n")
        scope = {"HANDLERS": HANDLERS, "_failed": _failed}
        exec(src, scope)
        fn = _ENTRIES[nargs] = scope[f"entry{nargs}"]
    return fn


_converters: dict = {}


def dispatch(fid: int, args) -> int:
    """Run the handler for function `fid` over a raw uint64 argument array; always returns a CUresult."""
    try:
        conv = _converters.get(fid)
        if conv is None:
            conv = _converters[fid] = _make_converter(FUNCTIONS[fid]["params"])
        values = conv(args)
    except BaseException as e:  # noqa: BLE001 - e.g. an unknown function id
        return _failed(fid, e, ())
    return entry(len(values))(fid, *values)
