"""Opaque handles for driver objects: pointer-looking integers that are never reused, so a destroyed
handle is always detected."""

import itertools
import threading

from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_HANDLE

_BASE = 0x5A1D_0000_0000
_counter = itertools.count(1)
_objects: dict = {}
_lock = threading.Lock()


def new(obj) -> int:
    """Give `obj` a fresh handle; obj.handle is set to it."""
    with _lock:
        h = _BASE + 16 * next(_counter)
    _objects[h] = obj
    obj.handle = h
    return h


def get(h: int, kind=None, code: int = CUDA_ERROR_INVALID_HANDLE, what: str = "handle"):
    """The live object behind `h`, checked to be a `kind` (class or tuple); else CudaError(code)."""
    obj = _objects.get(h)
    if obj is None or (kind is not None and not isinstance(obj, kind)):
        raise CudaError(code, f"{what} {h:#x} is not a valid {_kind_name(kind)}")
    return obj


def lookup(h: int):
    return _objects.get(h)


def remove(h: int) -> None:
    _objects.pop(h, None)


def _kind_name(kind):
    if kind is None:
        return "object"
    if isinstance(kind, tuple):
        return "/".join(k.__name__ for k in kind)
    return kind.__name__
