"""The index of every memory range the driver handed out (device, page-locked host, managed, registered,
pool): a sorted list of base addresses, so any address maps to its allocation in O(log n). Copies, frees
and pointer attributes all check against it."""

from __future__ import annotations

import bisect
import itertools
import mmap
import threading
from time import monotonic as _monotonic

import cffi

from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

_buffer_ids = itertools.count(1)
_bisect_right = bisect.bisect_right


class Allocation:
    """kind: 'device', 'host' (cuMemHostAlloc/cuMemAllocHost), 'managed', 'registered'
    (cuMemHostRegister), 'pool' (cuMemAllocAsync)."""

    __slots__ = ("base", "size", "kind", "ctx", "device", "flags", "buffer_id", "pool", "freeing", "sync_memops", "end", "advice")

    def __init__(self, base, size, kind, ctx, device, flags=0, pool=None):
        self.base = base
        self.size = size
        self.end = base + size
        self.kind = kind
        self.ctx = ctx
        self.device = device
        self.flags = flags
        self.pool = pool
        self.buffer_id = next(_buffer_ids)
        self.freeing = False
        self.sync_memops = 0
        self.advice = None          # managed memory: cuMemAdvise/cuMemPrefetchAsync state (memory.py)


class AllocationIndex:
    def __init__(self):
        self._lock = threading.Lock()
        self._bases: list = []
        self._by_base: dict = {}

    def add(self, a: Allocation) -> None:
        with self._lock:
            bisect.insort(self._bases, a.base)
            self._by_base[a.base] = a

    def remove(self, a: Allocation) -> None:
        with self._lock:
            if self._by_base.get(a.base) is a:
                del self._by_base[a.base]
                i = bisect.bisect_left(self._bases, a.base)
                del self._bases[i]

    def at_base(self, base: int) -> Allocation | None:
        return self._by_base.get(base)

    def find(self, addr: int) -> Allocation | None:
        """The allocation containing `addr`, or None."""
        bases = self._bases
        i = _bisect_right(bases, addr) - 1
        if i < 0:
            return None
        try:
            a = self._by_base.get(bases[i])
        except IndexError:      # removed concurrently
            return None
        return a if a is not None and addr < a.end else None

    def owned_by(self, ctx) -> list:
        with self._lock:
            return [a for a in self._by_base.values() if a.ctx is ctx]

    def __len__(self):
        return len(self._by_base)


INDEX = AllocationIndex()


def device_range(addr: int, size: int, what: str = "device pointer") -> Allocation:
    """The allocation holding all of [addr, addr+size); INVALID_VALUE for freed, foreign or short ranges."""
    a = INDEX.find(addr)
    if a is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} {addr:#x} is not allocated memory")
    if addr + size > a.end:
        raise CudaError(CUDA_ERROR_INVALID_VALUE,
                        f"{what} range {addr:#x}+{size} runs past its allocation "
                        f"{a.base:#x}+{a.size} by {addr + size - a.end} bytes")
    return a


def any_range(addr: int, size: int, what: str = "pointer") -> Allocation | None:
    """For pointers that may be pageable host memory (unified addressing): None when unknown (after
    checking the pages are mapped, as the driver's pinning would), else the allocation, checked to hold
    the whole range."""
    if not addr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} is NULL")
    a = INDEX.find(addr)
    if a is None:
        if not host_range_mapped(addr, size):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} range {addr:#x}+{size} is not mapped memory")
        return None
    if addr + size > a.end:
        raise CudaError(CUDA_ERROR_INVALID_VALUE,
                        f"{what} range {addr:#x}+{size} runs past its allocation {a.base:#x}+{a.size}")
    return a


_ffi = cffi.FFI()
_ffi.cdef("int mincore(uintptr_t addr, size_t length, unsigned char *vec);")
_libc = _ffi.dlopen(None)
_PAGE = mmap.PAGESIZE
_CHUNK_PAGES = 1 << 16
_vec = threading.local()


# Small copies in a loop touch the same few host pages again and again; a syscall per call would double
# their cost, so pages seen mapped are remembered for a short while (bounded staleness: a page unmapped
# within that window is not caught, as it would not be by a driver that copies through a staging buffer).
_seen_pages: set = set()
_SEEN_LIMIT = 4096
_SEEN_SECONDS = 0.25
_seen_since = [0.0]


def host_range_mapped(addr: int, size: int) -> bool:
    """Whether every page of [addr, addr+size) is mapped in this process (mincore fails with ENOMEM on a
    hole), so a bad host pointer is an error code instead of a crash."""
    if addr < _PAGE or size < 0 or addr + size > 1 << 64:
        return False
    page = addr & ~(_PAGE - 1)
    end = addr + max(size, 1)
    small = end - page <= 2 * _PAGE
    if small:
        last = (end - 1) & ~(_PAGE - 1)
        if page in _seen_pages and last in _seen_pages:
            if _monotonic() - _seen_since[0] < _SEEN_SECONDS:
                return True
            _seen_pages.clear()
            _seen_since[0] = _monotonic()
    buf = getattr(_vec, "buf", None)
    if buf is None:
        buf = _vec.buf = _ffi.new("unsigned char[]", _CHUNK_PAGES)
    first = page
    while page < end:
        pages = min((end - page + _PAGE - 1) // _PAGE, _CHUNK_PAGES)
        if _libc.mincore(page, pages * _PAGE, buf) != 0:
            return False
        page += pages * _PAGE
    if small:
        if len(_seen_pages) >= _SEEN_LIMIT or not _seen_pages:
            _seen_pages.clear()
            _seen_since[0] = _monotonic()
        _seen_pages.add(first)
        _seen_pages.add((end - 1) & ~(_PAGE - 1))
    return True
