"""Device memory of the CPU backend: host memory, 256-byte aligned like cudaMalloc, with a byte budget so
absurd requests fail with CUDA_ERROR_OUT_OF_MEMORY instead of crashing the process later."""

import os
import threading

from zluda_py import native
from zluda_py.backends.cpu import device_info, libc
from zluda_py.errors import CudaError, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_VALUE

ALIGNMENT = 256
# ZLUDA_MEM_POOL=1 keeps freed blocks up to this size for the next allocation of the same rounded size
# (src/devmem.c pools by size class; this fallback, used without the shim, by rounded size). Off, a
# free gives the block back at once.
CACHE_BLOCK_LIMIT = 256 << 20


def pool_enabled() -> bool:
    return os.environ.get("ZLUDA_MEM_POOL", "0") not in ("", "0")


class HostMemory:
    """Inside the shim this is a thin wrapper over the C allocator of src/devmem.c (native = True), which
    the C fast path of cuMemAlloc/cuMemFree shares: one allocator, one accounting. Elsewhere (no shim
    loaded) the same allocator in Python."""

    native = False

    def __init__(self):
        self.total = device_info.total_memory()
        lib = native.lib
        if lib is not None:
            self.native = True
            lib.zl_mem_set_total(self.total)
            self._lib = lib
            self._c_alloc = lib.zl_mem_alloc
            self._c_free = lib.zl_mem_free
            self.device_alloc = self._native_alloc
            self.free = self._native_free
            self.trim = lib.zl_mem_trim
            return
        self._lock = threading.Lock()
        self._sizes: dict = {}
        self.in_use = 0
        self._cache: dict = {}      # rounded size -> addresses of freed blocks of that size
        self._cached = 0
        self._pool = pool_enabled()
        self._cache_limit = self.total // 4

    def alloc(self, size: int) -> int:
        return self.device_alloc(0, size)

    @property
    def in_use(self) -> int:
        return self._lib.zl_mem_in_use() if self.native else self._in_use

    @in_use.setter
    def in_use(self, value: int) -> None:
        self._in_use = value

    def _native_alloc(self, device: int, size: int, kind: str = "device") -> int:
        addr = self._c_alloc(size) if size > 0 else 0
        if addr:
            return addr
        if size <= 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation size {size}")
        in_use = self.in_use
        if size > self.total or in_use + size > self.total:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY,
                            f"{size} bytes requested, {self.total - in_use} of {self.total} left")
        raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"host allocator refused {size} bytes")

    def _native_free(self, addr: int) -> None:
        if self._c_free(addr) != 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{addr:#x} was not allocated by the CPU backend")

    def device_alloc(self, device: int, size: int, kind: str = "device") -> int:
        """Backend.mem_alloc's signature (device and kind make no difference here), so the backend hands
        this bound method out as its own and cuMemAlloc makes one Python call less."""
        if size <= 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation size {size}")
        rounded = (size + ALIGNMENT - 1) & -ALIGNMENT
        with self._lock:
            blocks = self._cache.get(rounded)
            if blocks and self.in_use + size <= self.total:
                addr = blocks.pop()
                self._cached -= rounded
                self._sizes[addr] = size
                self.in_use += size
                return addr
        if size > self.total or self.in_use + size > self.total:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY,
                            f"{size} bytes requested, {self.total - self.in_use} of {self.total} left")
        addr = libc.aligned_alloc(rounded, ALIGNMENT)
        if not addr:
            self.trim()
            addr = libc.aligned_alloc(rounded, ALIGNMENT)
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
            rounded = (size + ALIGNMENT - 1) & -ALIGNMENT
            if self._pool and rounded <= CACHE_BLOCK_LIMIT and self._cached + rounded <= self._cache_limit:
                blocks = self._cache.get(rounded)
                if blocks is None:
                    blocks = self._cache[rounded] = []
                blocks.append(addr)
                self._cached += rounded
                return
        libc.free(addr)

    def trim(self) -> None:
        """Give the cached free blocks back to the host allocator."""
        with self._lock:
            blocks = [a for lst in self._cache.values() for a in lst]
            self._cache.clear()
            self._cached = 0
        for addr in blocks:
            libc.free(addr)

    def info(self) -> tuple:
        free = min(self.total - self.in_use, device_info.available_memory())
        return max(free, 0), self.total
