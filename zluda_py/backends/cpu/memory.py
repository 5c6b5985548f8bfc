"""Device memory of the CPU backend: host memory, 256-byte aligned like cudaMalloc, with a byte budget so
absurd requests fail with CUDA_ERROR_OUT_OF_MEMORY instead of crashing the process later."""

import threading

from zluda_py.backends.cpu import device_info, libc
from zluda_py.errors import CudaError, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_VALUE

ALIGNMENT = 256


class HostMemory:
    def __init__(self):
        self.total = device_info.total_memory()
        self._lock = threading.Lock()
        self._sizes: dict = {}
        self.in_use = 0

    def alloc(self, size: int) -> int:
        if size <= 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation size {size}")
        if size > self.total or self.in_use + size > self.total:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY,
                            f"{size} bytes requested, {self.total - self.in_use} of {self.total} left")
        addr = libc.aligned_alloc(size, ALIGNMENT)
        if not addr:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"host allocator refused {size} bytes")
        with self._lock:
            self._sizes[addr] = size
            self.in_use += size
        return addr

    def free(self, addr: int) -> None:
        with self._lock:
            size = self._sizes.pop(addr, None)
            if size is None:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{addr:#x} was not allocated by the CPU backend")
            self.in_use -= size
        libc.free(addr)

    def info(self) -> tuple:
        free = min(self.total - self.in_use, device_info.available_memory())
        return max(free, 0), self.total
