"""Address ranges and physical blocks on the CPU, for graph allocations and the virtual memory API
(cuMemAddressReserve/cuMemCreate/cuMemMap): a range is reserved once and a block of shared memory (a memfd)
is mapped into it when needed, so allocations whose lifetimes do not overlap share the same pages.

A graph range with no block holds private zero pages that cost nothing until touched, so a stray access
between launches neither faults nor reaches another graph's data; a reserved virtual-memory range is
inaccessible (PROT_NONE) until mapped and given access, as on a GPU."""

from __future__ import annotations

import mmap
import os

import cffi

from zluda_py import cffi_abi
from zluda_py.errors import CudaError, CUDA_ERROR_OUT_OF_MEMORY

_ffi = cffi.FFI()
_ffi.cdef("""
    uintptr_t mmap(uintptr_t addr, size_t length, int prot, int flags, int fd, long offset);
    int munmap(uintptr_t addr, size_t length);
    int mprotect(uintptr_t addr, size_t length, int prot);
""")
_libc = cffi_abi.dlopen(_ffi, None)
_FAILED = (1 << 64) - 1                  # MAP_FAILED as an unsigned address
_PROT = mmap.PROT_READ | mmap.PROT_WRITE
_PRIVATE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0x4000)
_FIXED = 0x10                            # MAP_FIXED (Linux, every architecture)
ALIGNMENT = 2 << 20                      # ranges start on 2 MiB, as NVIDIA's graph allocations do


class Block:
    """Physical memory: `size` bytes of a memfd, shared by every range it is mapped into."""

    def __init__(self, size: int, fd: int | None = None):
        self.size = size
        if fd is not None:          # an imported block (another process's, through a descriptor)
            self.fd = fd
            return
        self.fd = os.memfd_create("zluda-device-memory", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
        except OSError as e:
            os.close(self.fd)
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"device memory block of {size} bytes: {e.strerror}") from None

    def export(self) -> int:
        """A new descriptor of the block for another process (cuMemExportToShareableHandle)."""
        return os.dup(self.fd)

    @classmethod
    def adopt(cls, fd: int) -> "Block":
        """The block a descriptor from export() names; the descriptor stays the caller's."""
        own = os.dup(fd)
        return cls(os.fstat(own).st_size, own)

    def close(self) -> None:
        """The pages go back to the host once no range maps them any more."""
        os.close(self.fd)


class HostGraphMemory:
    page = mmap.PAGESIZE

    def round(self, size: int) -> int:
        return -(-size // self.page) * self.page

    def reserve(self, size: int, alignment: int = ALIGNMENT, prot: int = _PROT) -> int:
        """A fresh range of `size` bytes (a multiple of the page), aligned to `alignment` (a power of 2 of
        at least the page); PROT_NONE (0) makes it inaccessible until mapped."""
        span = size + alignment
        raw = _libc.mmap(0, span, prot, _PRIVATE, -1, 0)
        if raw == _FAILED:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"no address range of {size} bytes")
        base = -(-raw // alignment) * alignment
        if base > raw:
            _libc.munmap(raw, base - raw)
        if raw + span > base + size:
            _libc.munmap(base + size, raw + span - base - size)
        return base

    def release(self, base: int, size: int) -> None:
        _libc.munmap(base, size)

    def block(self, size: int) -> Block:
        return Block(size)

    def adopt(self, fd: int) -> Block:
        return Block.adopt(fd)

    def map(self, base: int, size: int, block: Block, offset: int = 0, prot: int = _PROT) -> None:
        """`size` bytes of `block` from `offset` at `base` (the range's size: a block may be larger)."""
        if _libc.mmap(base, size, prot, mmap.MAP_SHARED | _FIXED, block.fd, offset) == _FAILED:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"cannot map a device memory block at {base:#x}")

    def unmap(self, base: int, size: int, prot: int = _PROT) -> None:
        """The range gets private zero pages again (the block's pages stay with its other ranges)."""
        if _libc.mmap(base, size, prot, _PRIVATE | _FIXED, -1, 0) == _FAILED:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"cannot unmap the device memory at {base:#x}")

    def protect(self, base: int, size: int, prot: int) -> None:
        """mmap's PROT_* bits for a mapped range (cuMemSetAccess)."""
        if _libc.mprotect(base, size, prot) != 0:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"cannot change the access of {base:#x}+{size}")
