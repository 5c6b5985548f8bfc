"""cuInit and the driver's initialised state: the backend and its devices, fixed by the first cuInit."""

import threading

from zluda_py.dispatch import export, fatal
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_INITIALIZED,
                             CUDA_ERROR_NO_DEVICE)

_lock = threading.Lock()
BACKEND = None        # the Backend, set by a successful cuInit
DEVICES: list = []    # its DeviceProperties, one per CUdevice ordinal
_failure = None       # the CudaError of a failed cuInit, returned again by later cuInit calls


def require_init():
    """The backend; raises CUDA_ERROR_NOT_INITIALIZED before a successful cuInit."""
    b = BACKEND
    if b is None:
        raise CudaError(CUDA_ERROR_NOT_INITIALIZED, "cuInit has not been called (or failed)")
    return b


def initialize() -> None:
    global BACKEND, DEVICES, _failure
    if BACKEND is not None:
        return
    with _lock:
        if BACKEND is not None:
            return
        if _failure is not None:
            raise _failure
        from zluda_py.backends.select import backend
        try:
            b = backend()
            devices = list(b.devices())
            if not devices:
                raise CudaError(CUDA_ERROR_NO_DEVICE, f"backend {b.name} has no device")
        except CudaError as e:
            # Nothing can run without a backend and a device: say so once even without ZLUDA_LOG.
            _failure = fatal(e, "cuInit")
            raise
        DEVICES = devices
        BACKEND = b
        from zluda_py import native
        if native.loaded():     # the BLAS front (src/blas_*.c) computes on host memory only
            native.lib.zluda_set_host_memory_devices(int(getattr(b, "device_memory_is_host", False)))


@export("cuInit")
def cu_init(flags):
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, got {flags:#x}")
    initialize()
