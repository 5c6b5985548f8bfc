"""Backend choice from ZLUDA_BACKEND (cpu | hip | auto; auto = HIP when usable, else the CPU)."""

from __future__ import annotations

import os
import threading

from zluda_py import log
from zluda_py.errors import CudaError, CUDA_ERROR_NO_DEVICE

CHOICES = ("auto", "cpu", "hip")
_lock = threading.Lock()
_chosen = None


def _hip_backend_class():
    """The HIP backend class, or None with the reason it cannot be used."""
    try:
        from zluda_py.backends.hip import HipBackend
    except ImportError as e:
        if "HipBackend" in str(e):
            return None, "the HIP backend is not written yet (zluda_py/backends/hip has no HipBackend)"
        return None, f"the HIP backend cannot be imported: {e}"
    usable, why = HipBackend.probe()
    return (HipBackend, why) if usable else (None, why)


def choose(name: str | None = None):
    """A new backend for ZLUDA_BACKEND (or `name`); raises CudaError(CUDA_ERROR_NO_DEVICE) saying why not."""
    name = (name or os.environ.get("ZLUDA_BACKEND") or "auto").strip().lower()
    if name not in CHOICES:
        # NO_DEVICE, as NVIDIA's driver answers a CUDA_VISIBLE_DEVICES that selects nothing: the program
        # passed no bad argument, the environment chose no device.
        raise CudaError(CUDA_ERROR_NO_DEVICE, f"ZLUDA_BACKEND={name!r} is not a backend: choose one of "
                                              f"{', '.join(CHOICES)}")
    if name in ("hip", "auto"):
        cls, why = _hip_backend_class()
        if cls is not None:
            return cls()
        if name == "hip":
            raise CudaError(CUDA_ERROR_NO_DEVICE, f"ZLUDA_BACKEND=hip: {why}")
        if log.TRACE:       # the normal outcome without an AMD GPU: no ZLUDA_LOG line (zluda-py doctor says why)
            log.once("backend-auto", f"backend auto: HIP unusable ({why}); using the CPU")
    from zluda_py.backends.cpu import CpuBackend
    return CpuBackend()


def backend():
    """The process's backend, chosen once (the first successful cuInit)."""
    global _chosen
    if _chosen is None:
        with _lock:
            if _chosen is None:
                _chosen = choose()
    return _chosen
