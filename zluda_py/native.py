"""The loaded shim's C side (its cffi `ffi`/`lib`): exported functions' addresses, static error strings
and whatever src/*.cdef declares. Set by the shim's init code; None while no shim is loaded."""

ffi = None
lib = None


def attach(shim_ffi, shim_lib) -> None:
    global ffi, lib
    ffi, lib = shim_ffi, shim_lib


def loaded() -> bool:
    return lib is not None
