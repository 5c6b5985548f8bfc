"""The virtual memory API: cuMemAddressReserve/Free, cuMemCreate/Release, cuMemMap/Unmap, cuMemSetAccess/
GetAccess, granularity, properties and retained handles, and POSIX file descriptors that share physical
memory between processes, over the backend's ranges and blocks (backends/cpu/graph_memory.py on the CPU).

A reserved range is inaccessible until a block is mapped into it and cuMemSetAccess opens it, as on a GPU:
only then does it join the allocation index, so copies and kernels may use it."""

from __future__ import annotations

import mmap
import struct
import threading
from dataclasses import dataclass, field

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, init, memory
from zluda_py.driver.allocations import INDEX, Allocation, DetachedOwner
from zluda_py.driver.device import device_props
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_VALUE,
                             CUDA_ERROR_NOT_SUPPORTED)

GRANULARITY = 2 << 20               # NVIDIA's minimum and recommended granularity for device memory
# CUmemAllocationProp: type, requestedHandleTypes, location (type, id), win32HandleMetaData, allocFlags
# (compressionType, gpuDirectRDMACapable, usage, reserved[4])
_PROP = struct.Struct("<IIIiQBBH4x")
_ACCESS_DESC = struct.Struct("<IiI")     # CUmemAccessDesc: location (type, id), flags
_LOCATION = struct.Struct("<Ii")
PINNED, LOCATION_DEVICE, HANDLE_POSIX_FD = 1, 1, 1
_KNOWN_HANDLE_TYPES = 0x1 | 0x2 | 0x4 | 0x8     # POSIX fd, Win32, Win32 KMT, fabric
_PROT = {0: 0, 1: mmap.PROT_READ, 3: mmap.PROT_READ | mmap.PROT_WRITE}    # CUmemAccess_flags -> PROT_*

_lock = threading.RLock()


@dataclass
class Physical:
    block: object
    size: int
    prop: bytes
    refs: int = 1                   # cuMemCreate / Import and each cuMemRetainAllocationHandle
    mappings: int = 0


@dataclass
class Mapping:
    size: int
    handle: int
    phys: Physical                  # kept after cuMemRelease: the memory lives until the last unmap
    access: int = 0                 # CUmemAccess_flags


@dataclass
class Reservation:
    size: int
    maps: dict = field(default_factory=dict)    # base -> Mapping
    allocs: list = field(default_factory=list)  # its entries in the allocation index


def _reindex(r: Reservation, owner) -> None:
    """One allocation-index entry per run of adjacent accessible mappings: a copy or a kernel may span
    blocks mapped back to back, as the range is one to the device."""
    for a in r.allocs:
        INDEX.remove(a)
    r.allocs = []
    start = end = None
    for base in sorted(r.maps) + [None]:
        m = r.maps.get(base)
        if m is not None and m.access and base == end:
            end = base + m.size
            continue
        if start is not None:
            r.allocs.append(Allocation(start, end - start, "vmm", owner, owner.ctx.device))
            INDEX.add(r.allocs[-1])
        start, end = (base, base + m.size) if m is not None and m.access else (None, None)


_handles: dict = {}                 # CUmemGenericAllocationHandle -> Physical
_reserved: dict = {}                # base -> Reservation
_next_handle = [0x5A000001]


def _vm():
    init.require_init()
    vm = init.BACKEND.virtual_memory()
    if vm is None:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "this backend has no virtual memory management")
    return vm


def _check_location(ltype, lid, what="location"):
    if ltype != LOCATION_DEVICE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} type {ltype}: only CU_MEM_LOCATION_TYPE_DEVICE")
    try:
        device_props(lid)
    except CudaError:
        raise CudaError(CUDA_ERROR_INVALID_DEVICE, f"{what} device {lid} does not exist") from None


def _read_prop(pprop) -> tuple:
    if not pprop:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "prop is NULL")
    raw = cmem.read_bytes(pprop, _PROP.size)
    kind, handle_types, ltype, lid, _, _, _, _ = _PROP.unpack(raw)
    if kind != PINNED:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation type {kind}: only CU_MEM_ALLOCATION_TYPE_PINNED")
    _check_location(ltype, lid)
    if handle_types & ~_KNOWN_HANDLE_TYPES:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"requested handle types {handle_types:#x}")
    if handle_types & ~HANDLE_POSIX_FD:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"handle types {handle_types:#x}: only POSIX file descriptors")
    return raw, handle_types, lid


def _granular(value, what):
    if value <= 0 or value % GRANULARITY:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} {value:#x} is not a positive multiple of the "
                                                  f"granularity ({GRANULARITY:#x})")


def _physical(handle) -> Physical:
    p = _handles.get(handle)
    if p is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation handle {handle:#x} is not live")
    return p


def _new_handle(p: Physical) -> int:
    h = _next_handle[0]
    _next_handle[0] += 1
    _handles[h] = p
    return h


def _drop_ref(handle, p: Physical) -> None:
    p.refs -= 1
    if p.refs == 0:
        del _handles[handle]
        if p.mappings == 0:
            p.block.close()


@export("cuMemGetAllocationGranularity")
def get_granularity(pgran, pprop, option):
    if not pgran:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "granularity is NULL")
    if option not in (0, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"granularity option {option}")
    _vm()
    _read_prop(pprop)
    cmem.write_u64(pgran, GRANULARITY)


@export("cuMemCreate")
def mem_create(phandle, size, pprop, flags):
    if not phandle:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "handle is NULL")
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x} must be 0")
    vm = _vm()
    raw, _, _ = _read_prop(pprop)
    _granular(size, "size")
    # no compression here: the properties read back say none was granted
    prop = raw[:24] + b"\0" + raw[25:]
    with _lock:
        cmem.write_u64(phandle, _new_handle(Physical(vm.block(size), size, prop)))


@export("cuMemRelease")
def mem_release(handle):
    with _lock:
        _drop_ref(handle, _physical(handle))


@export("cuMemRetainAllocationHandle")
def retain_handle(phandle, addr):
    if not phandle:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "handle is NULL")
    with _lock:
        m = _mapping_at(addr)[1]
        if m is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{addr:#x} is not mapped memory")
        m.phys.refs += 1
        _handles[m.handle] = m.phys         # live again if it had been released
        cmem.write_u64(phandle, m.handle)


@export("cuMemGetAllocationPropertiesFromHandle")
def properties_from_handle(pprop, handle):
    if not pprop:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "prop is NULL")
    with _lock:
        cmem.write_bytes(pprop, _physical(handle).prop)


@export("cuMemAddressReserve")
def address_reserve(pptr, size, alignment, addr, flags):
    if not pptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "ptr is NULL")
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x} must be 0")
    vm = _vm()
    _granular(size, "size")
    alignment = alignment or GRANULARITY
    if alignment & (alignment - 1) or alignment % GRANULARITY:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"alignment {alignment:#x}")
    # `addr` is a hint NVIDIA's driver need not honour; this one takes what the host gives
    base = vm.reserve(size, alignment, _PROT[0])
    with _lock:
        _reserved[base] = Reservation(size)
    cmem.write_ptr(pptr, base)


@export("cuMemAddressFree")
def address_free(ptr, size):
    vm = _vm()
    with _lock:
        r = _reserved.get(ptr)
        if r is None or r.size != size:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size:#x} is not a reserved range")
        if r.maps:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} still has {len(r.maps)} mappings")
        del _reserved[ptr]
    vm.release(ptr, size)


def _reservation_of(ptr, size):
    for base, r in _reserved.items():
        if base <= ptr and ptr + size <= base + r.size:
            return base, r
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size:#x} is not inside a reserved range")


def _mapping_at(addr):
    """(base, Mapping) of the mapping holding `addr`, or (None, None)."""
    for r in _reserved.values():
        for base, m in r.maps.items():
            if base <= addr < base + m.size:
                return base, m
    return None, None


@export("cuMemMap")
def mem_map(ptr, size, offset, handle, flags):
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x} must be 0")
    vm = _vm()
    _granular(size, "size")
    if ptr % GRANULARITY or offset % GRANULARITY:      # an H200 answers NOT_SUPPORTED (tests/driver/vmm.c)
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"address {ptr:#x} or offset {offset:#x} is not aligned to "
                                                  "the granularity")
    with _lock:
        p = _physical(handle)
        if offset + size > p.size:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"offset {offset:#x} + size {size:#x} runs past the "
                                                      f"allocation's {p.size:#x} bytes")
        _, r = _reservation_of(ptr, size)
        if any(b < ptr + size and ptr < b + m.size for b, m in r.maps.items()):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size:#x} overlaps a mapping")
        vm.map(ptr, size, p.block, offset, _PROT[0])
        r.maps[ptr] = Mapping(size, handle, p)
        p.mappings += 1


def _maps_covering(ptr, size):
    """The mappings [ptr, ptr+size) is made of, whole, in address order."""
    _, r = _reservation_of(ptr, size)
    out, at = [], ptr
    for base in sorted(b for b in r.maps if ptr <= b < ptr + size):
        if base != at:
            break
        out.append((base, r.maps[base]))
        at = base + r.maps[base].size
    if at != ptr + size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size:#x} is not whole mapped ranges")
    return r, out


def _quiesce_all():
    # a kernel still running may read the range (cuMemFree waits the same way)
    for ctx in list(ctxmod._contexts):
        memory._quiesce(ctx)


@export("cuMemUnmap")
def mem_unmap(ptr, size):
    vm = _vm()
    with _lock:
        r, maps = _maps_covering(ptr, size)
        _quiesce_all()
        owner = r.allocs[0].ctx if r.allocs else None
        for base, m in maps:
            vm.unmap(base, m.size, _PROT[0])
            del r.maps[base]
            m.phys.mappings -= 1
            if m.phys.refs == 0 and m.phys.mappings == 0:
                m.phys.block.close()
        if owner is not None:
            _reindex(r, owner)


@export("cuMemSetAccess")
def set_access(ptr, size, pdesc, count):
    if not pdesc or count == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "no access descriptors")
    vm = _vm()
    descs = [_ACCESS_DESC.unpack(cmem.read_bytes(pdesc + i * _ACCESS_DESC.size, _ACCESS_DESC.size))
             for i in range(count)]
    for ltype, lid, access in descs:
        _check_location(ltype, lid, "access location")
        if access not in _PROT:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"access flags {access:#x}")
    access = descs[-1][2]           # one device: the last word on it stands
    with _lock:
        r, maps = _maps_covering(ptr, size)
        for base, m in maps:
            vm.protect(base, m.size, _PROT[access])
            m.access = access
        _reindex(r, DetachedOwner(ctxmod.primary_context(descs[-1][1])))


@export("cuMemGetAccess")
def get_access(pflags, plocation, ptr):
    if not pflags or not plocation:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "flags or location is NULL")
    ltype, lid = _LOCATION.unpack(cmem.read_bytes(plocation, _LOCATION.size))
    _check_location(ltype, lid)
    with _lock:
        m = _mapping_at(ptr)[1]
        if m is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not mapped memory")
        cmem.write_u64(pflags, m.access)


@export("cuMemExportToShareableHandle")
def export_handle(pshareable, handle, handle_type, flags):
    if not pshareable:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "shareableHandle is NULL")
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x} must be 0")
    with _lock:
        p = _physical(handle)
        requested = _PROP.unpack(p.prop)[1]
        if handle_type != HANDLE_POSIX_FD or not requested & HANDLE_POSIX_FD:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"handle type {handle_type} was not requested at "
                                                      "cuMemCreate (only POSIX file descriptors are)")
        cmem.write_i32(pshareable, p.block.export())


@export("cuMemImportFromShareableHandle")
def import_handle(phandle, os_handle, handle_type):
    if not phandle:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "handle is NULL")
    if handle_type != HANDLE_POSIX_FD:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"handle type {handle_type}: only POSIX file descriptors")
    vm = _vm()
    fd = os_handle & 0xFFFFFFFF         # the descriptor itself, cast to a pointer
    try:
        block = vm.adopt(fd)
    except OSError as e:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"file descriptor {fd}: {e.strerror}") from None
    prop = _PROP.pack(PINNED, HANDLE_POSIX_FD, LOCATION_DEVICE, 0, 0, 0, 0, 0)
    with _lock:
        cmem.write_u64(phandle, _new_handle(Physical(block, block.size, prop)))
