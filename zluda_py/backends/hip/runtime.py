"""Finding and calling libamdhip64 through hip-python: which library, whether a GPU is there, and one
`call` that turns a hipError_t into the CudaError the driver returns."""

from __future__ import annotations

import glob
import os
import threading

from zluda_py.backends.hip.errors import cuda_error
from zluda_py.errors import CudaError, CUDA_ERROR_NO_DEVICE

LIB_NAMES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5")
_lock = threading.Lock()
_hip = None            # the hip-python `hip` module, once its library is chosen
_lib_path = None


def library_dirs() -> list:
    dirs = []
    for var in ("ZLUDA_HIP_LIB_DIR", "ROCM_PATH", "HIP_PATH"):
        v = os.environ.get(var)
        if v:
            dirs += [v, os.path.join(v, "lib")]
    dirs += sorted(glob.glob("/opt/rocm*/lib"), reverse=True)
    dirs += os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    dirs += ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu"]
    return [d for d in dirs if d]


def find_library():
    """Path of a libamdhip64 on this machine ($ZLUDA_HIP_LIB names one file), or None."""
    if os.environ.get("ZLUDA_HIP_LIB"):
        p = os.environ["ZLUDA_HIP_LIB"]
        return p if os.path.exists(p) else None
    for d in library_dirs():
        for n in LIB_NAMES:
            p = os.path.join(d, n)
            if os.path.exists(p):
                return p
    return None


def load():
    """The hip-python `hip` module bound to libamdhip64; raises CudaError(NO_DEVICE) saying what is missing."""
    global _hip, _lib_path
    if _hip is not None:
        return _hip
    with _lock:
        if _hip is not None:
            return _hip
        try:
            from hip import hip, chip
        except ImportError as e:
            raise CudaError(CUDA_ERROR_NO_DEVICE, f"hip-python is not installed ({e}): pip install "
                                                  "'hip-python~=X.Y' with X.Y your ROCm version") from None
        path = find_library()
        if path is None:
            where = os.environ.get("ZLUDA_HIP_LIB") or ", ".join(library_dirs()[:6]) + ", ..."
            raise CudaError(CUDA_ERROR_NO_DEVICE, f"ROCm is not installed: no libamdhip64 in {where}")
        chip.DLL = path.encode()
        _hip, _lib_path = hip, path
        return hip


def lib_path():
    return _lib_path


def call(fn, *args, what=None):
    """Call a hip-python wrapper; returns its outputs (None, one value, or a tuple)."""
    try:
        r = fn(*args)
    except RuntimeError as e:         # hip-python: the library or a symbol cannot be loaded
        raise CudaError(CUDA_ERROR_NO_DEVICE, f"{what or fn.__name__}: {e}") from None
    err, outs = (r[0], r[1:]) if isinstance(r, tuple) else (r, ())
    code = int(err)
    if code != 0:
        raise cuda_error(code, what or getattr(fn, "__name__", "hip call"))
    if not outs:
        return None
    return outs[0] if len(outs) == 1 else outs
