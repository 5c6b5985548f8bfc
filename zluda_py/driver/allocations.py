"""The index of every memory range the driver handed out (device, page-locked host, managed, registered,
pool): a sorted list of base addresses, so any address maps to its allocation in O(log n). Copies, frees
and pointer attributes all check against it.

The shim's C fast path (src/fastpath.c) keeps a copy of the ranges: every add/remove here is mirrored to
it, and the device allocations it makes by itself are adopted (become Allocations here) the first time a
lookup here runs while any exist."""

from __future__ import annotations

import bisect
import itertools
import mmap
import threading
from time import monotonic as _monotonic

import cffi

from zluda_py import cffi_abi, handles, memcheck, native
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

_buffer_ids = itertools.count(1)
# base -> (Allocation, fn): allocations shared with other processes (driver/ipc.py); remove() calls fn(a)
# first, while the range is still the allocation's
SHARED: dict = {}
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


class DetachedOwner:
    """The context a range is indexed under, seen through a wrapper so context teardown's generic memory
    release (which frees backend allocations) leaves the range to the module that made it (IPC imports,
    virtual-memory mappings)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __getattr__(self, name):
        return getattr(self.ctx, name)


class _NoShim:
    """Stands in for the C range table when no shim is loaded (nothing to mirror, nothing to adopt)."""
    pending = (0,)

    @staticmethod
    def add(base, size, token):
        pass

    @staticmethod
    def remove(base, token):
        pass


_c = _NoShim
_pending = _NoShim.pending      # _pending[0]: how many C-only allocations wait to be adopted
_ADOPT_BATCH = 256
_adopt_buf = None


def attach_c() -> bool:
    """Mirror into the shim's range table from now on (at import, inside the shim: before any allocation);
    False when no shim is loaded."""
    global _c, _pending, _adopt_buf
    lib = native.lib
    if lib is None or _c is not _NoShim:
        return _c is not _NoShim

    class _C:
        add = lib.zl_range_add
        remove = lib.zl_range_remove
    _adopt_buf = native.ffi.new("uint64_t[]", 5 * _ADOPT_BATCH)
    _pending = lib.zl_range_pending()
    _c = _C
    return True


class AllocationIndex:
    """Readers take no lock: `_bases` and `_allocs` are parallel lists sorted by base, changed only under
    `_lock`, and `version` is odd while a change is under way, so a lookup that raced with an add or a
    remove can tell a real miss from a torn read (and then looks again under the lock)."""

    def __init__(self):
        # Re-entrant: a lookup that retries under the lock (find) adopts C-made allocations first, and
        # adopt() takes the lock too.
        self._lock = threading.RLock()
        self._bases: list = []
        self._allocs: list = []
        self._by_base: dict = {}
        self.version = 0

    def add(self, a: Allocation) -> None:
        with self._lock:
            self.version += 1
            self._insert(a)
            _c.add(a.base, a.size, a.buffer_id)
            if memcheck.ON:
                memcheck.added(a.base, a.size, a.kind)
            self.version += 1

    def _insert(self, a: Allocation) -> None:
        i = bisect.bisect_right(self._bases, a.base)
        self._bases.insert(i, a.base)
        self._allocs.insert(i, a)
        self._by_base[a.base] = a

    def remove(self, a: Allocation) -> None:
        if SHARED:
            hook = SHARED.get(a.base)
            if hook is not None and hook[0] is a:
                del SHARED[a.base]
                hook[1](a)
        with self._lock:
            if self._by_base.get(a.base) is a:
                self.version += 1
                del self._by_base[a.base]
                i = bisect.bisect_left(self._bases, a.base)
                while self._allocs[i] is not a:     # equal bases (a re-registered range) sit side by side
                    i += 1
                del self._bases[i]
                del self._allocs[i]
                _c.remove(a.base, a.buffer_id)
                if memcheck.ON:
                    memcheck.removed(a.base, a.size)
                self.version += 1

    def adopt(self) -> None:
        """Make Allocations of the device memory the C fast path handed out (lookups call this first
        whenever _pending[0] says there is some)."""
        with self._lock:
            if not _pending[0]:
                return
            self.version += 1
            try:
                buf = _adopt_buf
                while True:
                    k = native.lib.zl_range_adopt(buf, _ADOPT_BATCH)
                    for j in range(0, 5 * k, 5):
                        base, size, owner, device, token = buf[j], buf[j + 1], buf[j + 2], buf[j + 3], buf[j + 4]
                        ctx = handles.lookup(owner)
                        a = Allocation(base, size, "device", ctx, device)
                        a.buffer_id = token
                        self._insert(a)
                        if memcheck.ON:
                            memcheck.added(a.base, a.size, a.kind)
                    if k < _ADOPT_BATCH:
                        break
            finally:
                self.version += 1

    def at_base(self, base: int) -> Allocation | None:
        if _pending[0]:
            self.adopt()
        a = self._by_base.get(base)
        if a is None:
            with self._lock:    # an adoption may be inserting it right now
                a = self._by_base.get(base)
        return a

    def find(self, addr: int) -> Allocation | None:
        """The allocation containing `addr`, or None."""
        if _pending[0]:
            self.adopt()
        v = self.version
        i = _bisect_right(self._bases, addr) - 1
        if i >= 0:
            try:
                a = self._allocs[i]
            except IndexError:
                a = None
            if a is not None and a.base <= addr < a.end:
                return a
        if v == self.version and not v & 1:
            return None
        with self._lock:
            return self.find(addr)

    def holding(self, addr: int, size: int) -> Allocation | None:
        """The allocation holding all of [addr, addr+size) (size > 0), or None (then ask device_range or
        any_range for the reason)."""
        if _pending[0]:
            self.adopt()
        i = _bisect_right(self._bases, addr) - 1
        if i >= 0:
            try:
                a = self._allocs[i]
            except IndexError:
                return None
            if a.base <= addr and addr + size <= a.end:
                return a
        return None

    def owned_by(self, ctx) -> list:
        if _pending[0]:
            self.adopt()
        with self._lock:
            return [a for a in self._by_base.values() if a.ctx is ctx]

    def __len__(self):
        if _pending[0]:
            self.adopt()
        return len(self._by_base)


INDEX = AllocationIndex()


def device_range(addr: int, size: int, what: str = "device pointer") -> Allocation:
    """The allocation holding all of [addr, addr+size); INVALID_VALUE for freed, foreign or short ranges."""
    # The lookup of INDEX.holding, inlined: copies call this on every call.
    if _pending[0]:
        INDEX.adopt()
    i = _bisect_right(INDEX._bases, addr) - 1
    if i >= 0:
        try:
            a = INDEX._allocs[i]
        except IndexError:
            a = None
        if a is not None and a.base <= addr and addr + size <= a.end:
            return a
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
    index = INDEX
    if _pending[0]:
        index.adopt()
    v = index.version
    i = _bisect_right(index._bases, addr) - 1
    a = None
    if i >= 0:
        try:
            a = index._allocs[i]
        except IndexError:
            a = None
        if a is not None and not a.base <= addr < a.end:
            a = None
    if a is None and (v != index.version or v & 1):
        a = index.find(addr)        # raced with an allocation or a free: look again
    if a is None:
        if not addr:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} is NULL")
        if not host_range_mapped(addr, size):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} range {addr:#x}+{size} is not mapped memory")
        return None
    if addr + size > a.end:
        raise CudaError(CUDA_ERROR_INVALID_VALUE,
                        f"{what} range {addr:#x}+{size} runs past its allocation {a.base:#x}+{a.size}")
    return a


def copy_ranges_ok(dst: int, dst_device: bool, src: int, src_device: bool, n: int) -> bool:
    """Both sides of an n-byte copy (n > 0) in one call, for the synchronous copies' hot path: True when
    each side lies inside one allocation or (where allowed) in host pages recently seen mapped. False
    means "not sure": ask device_range / any_range, which also say what is wrong."""
    if _pending[0]:
        INDEX.adopt()
    bases = INDEX._bases
    allocs = INDEX._allocs
    v = INDEX.version
    i = _bisect_right(bases, dst) - 1
    try:
        a = allocs[i] if i >= 0 else None
    except IndexError:
        return False
    if a is not None and a.base <= dst < a.end:
        if dst + n > a.end:
            return False
    elif dst_device or not _seen_mapped(dst, n):
        return False
    i = _bisect_right(bases, src) - 1
    try:
        a = allocs[i] if i >= 0 else None
    except IndexError:
        return False
    if a is not None and a.base <= src < a.end:
        if src + n > a.end:
            return False
    elif src_device or not _seen_mapped(src, n):
        return False
    return v == INDEX.version and not v & 1


_ffi = cffi.FFI()
_ffi.cdef("int mincore(uintptr_t addr, size_t length, unsigned char *vec);")
_libc = cffi_abi.dlopen(_ffi, None)
_PAGE = mmap.PAGESIZE
_CHUNK_PAGES = 1 << 16
_vec = threading.local()


# Small copies in a loop touch the same few host pages again and again; a syscall per call would double
# their cost, so pages seen mapped are remembered for a short while (bounded staleness: a page unmapped
# within that window is not caught, as it would not be by a driver that copies through a staging buffer).
_seen_pages: set = set()
_SEEN_LIMIT = 4096
_SEEN_SECONDS = 0.25
_seen_until = [0.0]
_PAGE_MASK = ~(_PAGE - 1)


def host_range_mapped(addr: int, size: int) -> bool:
    """Whether every page of [addr, addr+size) is mapped in this process (mincore fails with ENOMEM on a
    hole), so a bad host pointer is an error code instead of a crash."""
    return _seen_mapped(addr, size) or _host_range_mapped(addr, size)


def _seen_mapped(addr: int, size: int) -> bool:
    page = addr & _PAGE_MASK
    last = (addr + size - 1) & _PAGE_MASK
    return size > 0 and last - page <= _PAGE and page in _seen_pages and last in _seen_pages \
        and _monotonic() < _seen_until[0]


def _host_range_mapped(addr: int, size: int) -> bool:
    if addr < _PAGE or size < 0 or addr + size > 1 << 64:
        return False
    page = addr & _PAGE_MASK
    end = addr + max(size, 1)
    buf = getattr(_vec, "buf", None)
    if buf is None:
        buf = _vec.buf = _ffi.new("unsigned char[]", _CHUNK_PAGES)
    first = page
    while page < end:
        pages = min((end - page + _PAGE - 1) // _PAGE, _CHUNK_PAGES)
        if _libc.mincore(page, pages * _PAGE, buf) != 0:
            return False
        page += pages * _PAGE
    if end - first <= 2 * _PAGE:
        now = _monotonic()
        if len(_seen_pages) >= _SEEN_LIMIT or now >= _seen_until[0]:
            _seen_pages.clear()
            _seen_until[0] = now + _SEEN_SECONDS
        _seen_pages.add(first)
        _seen_pages.add((end - 1) & _PAGE_MASK)
    return True


def mirrored() -> bool:
    """Whether the shim's range table holds every range of INDEX (what the C fast path checks copies by)."""
    return _c is not _NoShim


attach_c()
