"""Raw memory access at integer addresses (output parameters, host buffers) through an ABI-level cffi FFI."""

import _cffi_backend

from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

# The backend's own FFI parses type names in C; cffi.FFI() would import pycparser (~80 ms of the shim's
# start-up) for the same few primitive types.
ffi = _cffi_backend.FFI()

_u8p = ffi.typeof("uint8_t *")
_i32p = ffi.typeof("int32_t *")
_u32p = ffi.typeof("uint32_t *")
_i64p = ffi.typeof("int64_t *")
_u64p = ffi.typeof("uint64_t *")
_f32p = ffi.typeof("float *")
_f64p = ffi.typeof("double *")
_charp = ffi.typeof("char *")
_cast = ffi.cast


def _check(addr: int, what: str) -> None:
    if not addr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} is NULL")


# Indexing one pointer fixed at a small address is about twice as fast as casting every address anew,
# and cffi's cast was the largest cost of a trivial driver call. _BASE is non-NULL (cffi refuses to
# index NULL) and aligned for every scalar; unaligned or tiny addresses take the plain cast path.
_BASE = 64
_at = {t: _cast(t, _BASE) for t in (_i32p, _u32p, _i64p, _u64p, _f32p, _f64p)}
_i32_at, _u32_at, _i64_at, _u64_at, _f32_at, _f64_at = (_at[t] for t in (_i32p, _u32p, _i64p, _u64p,
                                                                           _f32p, _f64p))


def write_i32(addr: int, value: int, what: str = "output pointer") -> None:
    if addr & 3 or addr < _BASE:
        _check(addr, what)
        _cast(_i32p, addr)[0] = value
    else:
        _i32_at[(addr - _BASE) >> 2] = value


def write_u32(addr: int, value: int, what: str = "output pointer") -> None:
    if addr & 3 or addr < _BASE:
        _check(addr, what)
        _cast(_u32p, addr)[0] = value
    else:
        _u32_at[(addr - _BASE) >> 2] = value


def write_i64(addr: int, value: int, what: str = "output pointer") -> None:
    if addr & 7 or addr < _BASE:
        _check(addr, what)
        _cast(_i64p, addr)[0] = value
    else:
        _i64_at[(addr - _BASE) >> 3] = value


def write_u64(addr: int, value: int, what: str = "output pointer") -> None:
    if addr & 7 or addr < _BASE:
        _check(addr, what)
        _cast(_u64p, addr)[0] = value
    else:
        _u64_at[(addr - _BASE) >> 3] = value


write_ptr = write_u64


def write_f32(addr: int, value: float, what: str = "output pointer") -> None:
    if addr & 3 or addr < _BASE:
        _check(addr, what)
        _cast(_f32p, addr)[0] = value
    else:
        _f32_at[(addr - _BASE) >> 2] = value


def write_f64(addr: int, value: float, what: str = "output pointer") -> None:
    if addr & 7 or addr < _BASE:
        _check(addr, what)
        _cast(_f64p, addr)[0] = value
    else:
        _f64_at[(addr - _BASE) >> 3] = value


def read_i32(addr: int, what: str = "input pointer") -> int:
    if addr & 3 or addr < _BASE:
        _check(addr, what)
        return _cast(_i32p, addr)[0]
    return _i32_at[(addr - _BASE) >> 2]


def read_u32(addr: int, what: str = "input pointer") -> int:
    if addr & 3 or addr < _BASE:
        _check(addr, what)
        return _cast(_u32p, addr)[0]
    return _u32_at[(addr - _BASE) >> 2]


def read_u64(addr: int, what: str = "input pointer") -> int:
    if addr & 7 or addr < _BASE:
        _check(addr, what)
        return _cast(_u64p, addr)[0]
    return _u64_at[(addr - _BASE) >> 3]


read_ptr = read_u64


def read_i64(addr: int, what: str = "input pointer") -> int:
    if addr & 7 or addr < _BASE:
        _check(addr, what)
        return _cast(_i64p, addr)[0]
    return _i64_at[(addr - _BASE) >> 3]


def read_bytes(addr: int, n: int, what: str = "input pointer") -> bytes:
    _check(addr, what)
    return ffi.buffer(_cast(_u8p, addr), n)[:]


def write_bytes(addr: int, data: bytes, what: str = "output pointer") -> None:
    _check(addr, what)
    ffi.memmove(_cast(_u8p, addr), data, len(data))


def read_cstring(addr: int, what: str = "string pointer", limit: int = 1 << 20) -> str:
    _check(addr, what)
    return ffi.string(_cast(_charp, addr), limit).decode("utf-8", "replace")


def write_cstring(addr: int, text: str, capacity: int, what: str = "output buffer") -> None:
    """Write a NUL-terminated string truncated to `capacity` bytes (as the driver does for names)."""
    _check(addr, what)
    if capacity <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} length {capacity} <= 0")
    raw = text.encode()[: capacity - 1] + b"\0"
    ffi.memmove(_cast(_u8p, addr), raw, len(raw))


def memmove(dst: int, src: int, n: int) -> None:
    ffi.memmove(_cast(_u8p, dst), _cast(_u8p, src), n)


def buffer(addr: int, n: int):
    """A writable buffer over raw memory (for numpy.frombuffer and friends)."""
    return ffi.buffer(_cast(_u8p, addr), n)
