"""The loaded shim's C side (its cffi `ffi`/`lib`): exported functions' addresses, static error strings
and whatever src/*.cdef declares. Set by the shim's init code; None while no shim is loaded.

C code in src/ that needs Python declares the callback in a src/NAME.cdef file, e.g.
    extern "Python+C" int32_t zluda_dark_primary_ctx(uint64_t *out, int32_t dev);
and a Python module implements it with
    @native.def_extern("zluda_dark_primary_ctx", error=999)
    def dark_primary_ctx(out, dev): ...
The module must be imported before C first calls the callback (modules under zluda_py/driver/ are
imported before the first driver call is dispatched).
"""

ffi = None
lib = None
_pending: list = []


def attach(shim_ffi, shim_lib) -> None:
    global ffi, lib
    ffi, lib = shim_ffi, shim_lib
    for name, fn, error in _pending:
        _bind(name, fn, error)
    _pending.clear()


def loaded() -> bool:
    return lib is not None


def _swallow(exc_type, exc_value, tb):
    pass  # a callback's failure is its error value; no traceback may reach the host application


def _bind(name, fn, error):
    ffi.def_extern(name=name, error=error, onerror=_swallow)(fn)


def def_extern(name: str, error: int = 0):
    """Attach the decorated function to the shim's `extern "Python+C"` callback `name` (now if the shim
    is loaded, else when it attaches). Exceptions become `error`."""
    def deco(fn):
        if ffi is not None:
            _bind(name, fn, error)
        else:
            _pending.append((name, fn, error))
        return fn
    return deco
