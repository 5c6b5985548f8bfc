"""cuPointerGetAttribute(s) / cuPointerSetAttribute: what the allocation index knows about an address."""

from __future__ import annotations

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver import init
from zluda_py.driver.allocations import INDEX
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED

CU_MEMORYTYPE_HOST = 1
CU_MEMORYTYPE_DEVICE = 2
CU_POINTER_ATTRIBUTE_P2P_TOKENS = 5
CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6
CU_POINTER_ACCESS_FLAG_READWRITE = 0x3

# attribute -> (C size in bytes, name): booleans are 4-byte unsigned ints, as client code declares them.
SIZES = {1: 8, 2: 4, 3: 8, 4: 8, 5: 16, 6: 4, 7: 8, 8: 4, 9: 4, 10: 4, 11: 8, 12: 8, 13: 4, 14: 8, 15: 4,
         16: 4, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4}


def _value(attr: int, ptr: int, a) -> int:
    """The value of `attr` for `ptr` inside allocation `a` (None: not CUDA memory -> INVALID_VALUE)."""
    if attr not in SIZES:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown pointer attribute {attr}")
    if attr == CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "P2P tokens (GPUDirect RDMA) are not supported")
    if a is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not memory CUDA knows")
    host_side = a.kind in ("host", "registered")
    if attr == 1:
        return a.ctx.handle
    if attr == 2:
        return CU_MEMORYTYPE_HOST if host_side else CU_MEMORYTYPE_DEVICE
    if attr == 3:
        return ptr
    if attr == 4:
        if not host_side and a.kind != "managed":
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is device memory: no host pointer")
        return ptr
    if attr == 6:
        return a.sync_memops
    if attr in (7, 20):
        return a.buffer_id
    if attr == 8:
        return int(a.kind == "managed")
    if attr == 9:
        return a.device
    if attr in (10, 15, 21):
        return 0
    if attr in (11, 19):
        return a.base
    if attr in (12, 18):
        return a.size
    if attr == 13:
        return 1
    if attr == 14:
        return 0       # CU_MEM_HANDLE_TYPE_NONE
    if attr == 16:
        return CU_POINTER_ACCESS_FLAG_READWRITE
    if attr == 17:
        if a.kind != "pool" or a.pool is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not from a memory pool")
        return a.pool.handle
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pointer attribute {attr}")


def _write(addr: int, attr: int, value: int) -> None:
    if SIZES[attr] == 8:
        cmem.write_u64(addr, value, "data")
    else:
        cmem.write_u32(addr, value & 0xFFFFFFFF, "data")


@export("cuPointerGetAttribute")
def pointer_get_attribute(data, attr, ptr):
    init.require_init()
    if not data:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "data is NULL")
    _write(data, attr, _value(attr, ptr, INDEX.find(ptr)))


@export("cuPointerGetAttributes")
def pointer_get_attributes(count, attrs, data, ptr):
    """Unlike the single form, unknown memory is not an error: every attribute reads as zero."""
    init.require_init()
    if count == 0 or not attrs or not data:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "numAttributes is 0 or attributes/data is NULL")
    a = INDEX.find(ptr)
    wanted = [cmem.read_u32(attrs + 4 * i) for i in range(count)]
    for i, attr in enumerate(wanted):
        if attr not in SIZES:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown pointer attribute {attr}")
    for i, attr in enumerate(wanted):
        out = cmem.read_ptr(data + 8 * i)
        if not out:
            continue
        try:
            value = _value(attr, ptr, a) if a is not None else 0
        except CudaError:
            value = 0
        if attr == CU_POINTER_ATTRIBUTE_P2P_TOKENS:
            cmem.write_bytes(out, b"\0" * 16)
        else:
            _write(out, attr, value)


@export("cuPointerSetAttribute")
def pointer_set_attribute(value, attr, ptr):
    init.require_init()
    a = INDEX.find(ptr)
    if a is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not memory CUDA knows")
    if attr != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"attribute {attr} cannot be set")
    # Every synchronous copy here already completes before returning; the flag is kept for reading back.
    a.sync_memops = 1 if cmem.read_u32(value, "value") else 0
