"""Address ranges and physical blocks for graph allocations on the CPU: a range is reserved once (an
allocation node keeps its address for the graph's life) and a block of shared memory (a memfd) is mapped
into it when a launch needs it, so allocations whose lifetimes do not overlap share the same pages.

A range with no block holds private zero pages that cost nothing until touched, so a stray access between
launches neither faults nor reaches another graph's data."""

from __future__ import annotations

import mmap
import os

import cffi

from zluda_py.errors import CudaError, CUDA_ERROR_OUT_OF_MEMORY

_ffi = cffi.FFI()
_ffi.cdef("""
    uintptr_t mmap(uintptr_t addr, size_t length, int prot, int flags, int fd, long offset);
    int munmap(uintptr_t addr, size_t length);
""")
_libc = _ffi.dlopen(None)
_FAILED = (1 << 64) - 1                  # MAP_FAILED as an unsigned address
_PROT = mmap.PROT_READ | mmap.PROT_WRITE
_PRIVATE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0x4000)
_FIXED = 0x10                            # MAP_FIXED (Linux, every architecture)
ALIGNMENT = 2 << 20                      # ranges start on 2 MiB, as NVIDIA's graph allocations do


class Block:
    """Physical memory: `size` bytes of a memfd, shared by every range it is mapped into."""

    def __init__(self, size: int):
        self.size = size
        self.fd = os.memfd_create("zluda-graph-memory", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
        except OSError as e:
            os.close(self.fd)
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"graph memory block of {size} bytes: {e.strerror}") from None

    def close(self) -> None:
        """The pages go back to the host once no range maps them any more."""
        os.close(self.fd)


class HostGraphMemory:
    page = mmap.PAGESIZE

    def round(self, size: int) -> int:
        return -(-size // self.page) * self.page

    def reserve(self, size: int) -> int:
        """A fresh range of `size` bytes (a multiple of the page), aligned to ALIGNMENT."""
        span = size + ALIGNMENT
        raw = _libc.mmap(0, span, _PROT, _PRIVATE, -1, 0)
        if raw == _FAILED:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"no address range of {size} bytes for a graph allocation")
        base = -(-raw // ALIGNMENT) * ALIGNMENT
        if base > raw:
            _libc.munmap(raw, base - raw)
        if raw + span > base + size:
            _libc.munmap(base + size, raw + span - base - size)
        return base

    def release(self, base: int, size: int) -> None:
        _libc.munmap(base, size)

    def block(self, size: int) -> Block:
        return Block(size)

    def map(self, base: int, size: int, block: Block) -> None:
        """The first `size` bytes of `block` at `base` (the range's size: a block may be larger)."""
        if _libc.mmap(base, size, _PROT, mmap.MAP_SHARED | _FIXED, block.fd, 0) == _FAILED:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"cannot map a graph memory block at {base:#x}")

    def unmap(self, base: int, size: int) -> None:
        """The range gets private zero pages again (the block's pages stay with its other ranges)."""
        if _libc.mmap(base, size, _PROT, _PRIVATE | _FIXED, -1, 0) == _FAILED:
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"cannot unmap the graph memory at {base:#x}")
