"""Inter-process memory and event handles on a backend whose device memory is host memory.

Memory: cuIpcGetMemHandle moves the allocation's pages, in place and with their contents, onto a memfd
mapped MAP_SHARED at the same address; another process maps that memfd (through /proc/<pid>/fd) and sees
the same bytes. Allocations stay private anonymous memory until a handle is taken (no cost to cuMemAlloc,
and fork() keeps its copy-on-write meaning); freeing an exported one first gives its range private pages
again, so the block's next owner shares nothing with a process that still has the handle open.
Events: the backend keeps an interprocess event's state in shared memory and names it (event_export).

Limits: the shared range is the allocation rounded out to whole pages, so an allocation sharing a page with
another exported one cannot be exported (CUDA_ERROR_NOT_SUPPORTED), and the bytes of other allocations in
its first and last page are visible to the importer."""

from __future__ import annotations

import mmap
import os
import struct
import threading

import _cffi_backend
import cffi

from zluda_py import cffi_abi, cmem
from zluda_py.dispatch import export
from zluda_py.driver import allocations, context as ctxmod, init
from zluda_py.driver.allocations import INDEX, Allocation, DetachedOwner
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE,
                             CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_MAP_FAILED, CUDA_ERROR_NOT_SUPPORTED)

HANDLE_SIZE = 64
_MAGIC = b"ZLIPCMEM"
_EVENT_MAGIC = b"ZLIPCEVT"
_MEM = struct.Struct("<8siiQQQQQ")      # magic, pid, fd, offset of the allocation in the mapping, mapping
                                        # length, allocation size, export id, the memfd's inode
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1

_ffi = cffi.FFI()
_ffi.cdef("""
    void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset);
    int munmap(void *addr, size_t length);
""")
_libc = cffi_abi.dlopen(_ffi, None)
_PAGE = mmap.PAGESIZE
_MAP_FAILED = 2 ** 64 - 1
_MAP_FIXED = 0x10        # Linux; Python's mmap module does not export it
_lock = threading.Lock()
_memmove_holding_gil = _cffi_backend.memmove
_null = _ffi.cast("char *", 0)
_exports: dict = {}       # allocation base -> (fd, page start, length, export id, Allocation)
_imports: dict = {}       # imported address -> (mapping address, length, owner, refcount)
_export_ids = iter(range(1, 1 << 62))


def _mmap(addr, length, flags, fd):
    p = _libc.mmap(_ffi.cast("void *", addr), length, mmap.PROT_READ | mmap.PROT_WRITE, flags, fd, 0)
    got = int(_ffi.cast("uintptr_t", p))
    if got == _MAP_FAILED:
        raise CudaError(CUDA_ERROR_MAP_FAILED, f"mmap of {length} bytes failed: {os.strerror(_ffi.errno)}")
    return got


def _export(a: Allocation) -> tuple:
    """(fd, page start, length, export id) of the allocation's shared mapping, made on first use."""
    found = _exports.get(a.base)
    if found is not None and found[4] is a:
        return found[:4]
    start = a.base & ~(_PAGE - 1)
    length = (a.end - start + _PAGE - 1) & ~(_PAGE - 1)
    # Nothing may write the range while its pages are swapped: finish the device's work first.
    if a.ctx is not None and not a.ctx.destroyed:
        a.ctx.synchronize(check=False)
    for other in (INDEX.find(start), INDEX.find(start + length - 1)):
        if other is not None and other is not a and _exports.get(other.base, (None,) * 5)[4] is other:
            raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"{a.base:#x} shares a page with an exported allocation")
    fd = os.memfd_create("zluda-ipc", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, length)
        # The head and tail pages may hold the host allocator's other blocks: the copy and the swap happen
        # without releasing the GIL (no Python thread can write them meanwhile) and back to back.
        staging = _mmap(0, length, mmap.MAP_SHARED, fd)
        try:
            _memmove_holding_gil(_null + staging, _null + start, length)
            _mmap(start, length, mmap.MAP_SHARED | _MAP_FIXED, fd)
        finally:
            _libc.munmap(_ffi.cast("void *", staging), length)
    except BaseException:
        os.close(fd)
        raise
    # Keyed by base but tied to this Allocation: a later allocation at the same address is exported anew.
    old = _exports.get(a.base)
    _exports[a.base] = (fd, start, length, next(_export_ids), a)
    if old is not None:
        os.close(old[0])
    allocations.SHARED[a.base] = (a, _unexport)
    return _exports[a.base][:4]


def _swap_private(start: int, length: int, keep: bool) -> None:
    """Private anonymous pages in place of [start, start + length); keep: with the bytes they held."""
    anon = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    if not keep:
        _mmap(start, length, anon | _MAP_FIXED, -1)
        return
    staging = _mmap(0, length, anon, -1)
    try:
        _memmove_holding_gil(_null + staging, _null + start, length)
        _mmap(start, length, anon | _MAP_FIXED, -1)
        _memmove_holding_gil(_null + start, _null + staging, length)
    finally:
        _libc.munmap(_ffi.cast("void *", staging), length)


def _unexport(a: Allocation) -> None:
    """An exported allocation is being freed (allocations.AllocationIndex.remove calls this before the
    backend gets the block back): its pages become private again. Pages wholly its own need no copy; the
    first and last may hold other blocks, whose bytes move across (GIL held, as in _export)."""
    with _lock:
        found = _exports.get(a.base)
        if found is None or found[4] is not a:
            return
        del _exports[a.base]
        fd, start, length = found[:3]
        end = start + length
        own_lo = (a.base + _PAGE - 1) & ~(_PAGE - 1)
        own_hi = a.end & ~(_PAGE - 1)
        try:
            if own_hi > own_lo:
                _swap_private(own_lo, own_hi - own_lo, keep=False)
                if start < own_lo:
                    _swap_private(start, own_lo - start, keep=True)
                if own_hi < end:
                    _swap_private(own_hi, end - own_hi, keep=True)
            else:
                _swap_private(start, length, keep=True)
        finally:
            os.close(fd)


@export("cuIpcGetMemHandle")
def ipc_get_mem_handle(out, dptr):
    init.require_init()
    if not out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pHandle is NULL")
    a = INDEX.find(dptr)
    if a is None or a.kind not in ("device", "pool"):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is not device memory")
    with _lock:
        fd, start, length, ident = _export(a)
    raw = _MEM.pack(_MAGIC, os.getpid(), fd, a.base - start, length, a.size, ident, os.fstat(fd).st_ino)
    cmem.write_bytes(out, raw + b"\0" * (HANDLE_SIZE - len(raw)))


def _open_mem(pdptr, handle_addr, flags):
    ctx = ctxmod.current_context()
    if not pdptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pdptr is NULL")
    if flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid flags {flags:#x}")
    magic, pid, fd, offset, length, size, ident, ino = _MEM.unpack(
        cmem.read_bytes(handle_addr, _MEM.size, "handle"))
    if magic != _MAGIC:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memory handle of this driver")
    if pid == os.getpid():
        # CUDA refuses to open a handle in the process that made it.
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "the handle was made by this process")
    with _lock:
        for addr, (base, mlen, owner, refs, key) in _imports.items():
            if key == (pid, ident):
                _imports[addr] = (base, mlen, owner, refs + 1, key)
                cmem.write_ptr(pdptr, addr)
                return
        try:
            local = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"cannot reach process {pid}'s memory: {e.strerror}") from None
        try:
            # the exporter freed the memory (and the descriptor number went to another file)?
            st = os.fstat(local)
            if st.st_ino != ino or st.st_size < length:
                raise CudaError(CUDA_ERROR_INVALID_HANDLE, "the handle no longer names exported memory")
            base = _mmap(0, length, mmap.MAP_SHARED, local)
        finally:
            os.close(local)
        owner = DetachedOwner(ctx)
        addr = base + offset
        INDEX.add(Allocation(addr, size, "device", owner, ctx.device))
        _imports[addr] = (base, length, owner, 1, (pid, ident))
    cmem.write_ptr(pdptr, addr)


export("cuIpcOpenMemHandle")(_open_mem)
export("cuIpcOpenMemHandle_v2")(_open_mem)


def _unmap(addr) -> None:
    base, length, owner, refs, key = _imports.pop(addr)
    a = INDEX.at_base(addr)
    if a is not None:
        INDEX.remove(a)
    _libc.munmap(_ffi.cast("void *", base), length)


@export("cuIpcCloseMemHandle")
def ipc_close_mem_handle(dptr):
    init.require_init()
    with _lock:
        entry = _imports.get(dptr)
        if entry is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is not an opened IPC memory handle")
        base, length, owner, refs, key = entry
        if not owner.ctx.destroyed and not owner.ctx.idle():
            owner.ctx.synchronize(check=False)
        if refs > 1:
            _imports[dptr] = (base, length, owner, refs - 1, key)
        else:
            _unmap(dptr)


@ctxmod.on_any_teardown
def _close_context_imports(ctx) -> None:
    with _lock:
        for addr in [addr for addr, e in _imports.items() if e[2].ctx is ctx]:
            _unmap(addr)


# --- events ---------------------------------------------------------------------------------------------
# The backend names the event's shared state; the handle adds a magic so a memory handle is told apart.
@export("cuIpcGetEventHandle")
def ipc_get_event_handle(out, hevent):
    from zluda_py.driver.event import CU_EVENT_INTERPROCESS, event_from_handle
    ev = event_from_handle(hevent)
    if not out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pHandle is NULL")
    if not ev.flags & CU_EVENT_INTERPROCESS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the event was not created with CU_EVENT_INTERPROCESS")
    raw = _EVENT_MAGIC + init.BACKEND.event_export(ev.backend)
    cmem.write_bytes(out, raw + b"\0" * (HANDLE_SIZE - len(raw)))


@export("cuIpcOpenEventHandle")
def ipc_open_event_handle(out, handle_addr):
    from zluda_py.driver.event import CU_EVENT_DISABLE_TIMING, CU_EVENT_INTERPROCESS, Event
    ctx = ctxmod.current_context()
    if not out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phEvent is NULL")
    raw = cmem.read_bytes(handle_addr, HANDLE_SIZE, "handle")
    if raw[:len(_EVENT_MAGIC)] != _EVENT_MAGIC:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not an event handle of this driver")
    flags = CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS
    backend = init.BACKEND.event_import(raw[len(_EVENT_MAGIC):], flags)
    cmem.write_ptr(out, Event(ctx, flags, backend).handle)
