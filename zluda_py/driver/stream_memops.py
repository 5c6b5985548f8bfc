"""Stream memory operations: cuStreamWriteValue32/64, cuStreamWaitValue32/64 and cuStreamBatchMemOp
(all ABI versions, _ptsz forms): device-memory flags that order work across streams and with the host."""

from __future__ import annotations

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver.allocations import device_range
from zluda_py.driver.stream import resolve_stream
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

CU_STREAM_WAIT_VALUE_FLUSH = 1 << 30
CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER = 0x1
OP_WAIT_VALUE_32, OP_WRITE_VALUE_32, OP_FLUSH_REMOTE_WRITES = 1, 2, 3
OP_WAIT_VALUE_64, OP_WRITE_VALUE_64, OP_BARRIER = 4, 5, 6
BATCH_PARAM_SIZE = 48


def _check_address(addr, size):
    if addr % size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"address {addr:#x} is not {size}-byte aligned")
    device_range(addr, size, "address")   # device memory, or page-locked host memory


def _write(stream, addr, value, size, flags):
    if flags & ~CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid write flags {flags:#x}")
    _check_address(addr, size)
    stream.begin().write_value(addr, value & ((1 << (8 * size)) - 1), size)


def _wait(stream, addr, value, size, flags):
    op = flags & ~CU_STREAM_WAIT_VALUE_FLUSH
    if op not in (0, 1, 2, 3):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid wait flags {flags:#x}")
    _check_address(addr, size)
    stream.begin().wait_value(addr, value & ((1 << (8 * size)) - 1), size, op)


def _batch(stream, count, params, flags):
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, got {flags:#x}")
    if count == 0 or count > 256 or not params:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"count {count} (1..256) or NULL paramArray")
    ops = []
    for i in range(count):
        base = params + BATCH_PARAM_SIZE * i
        kind = cmem.read_u32(base)
        addr, value, op_flags = cmem.read_u64(base + 8), cmem.read_u64(base + 16), cmem.read_u32(base + 24)
        if kind not in (1, 2, 3, 4, 5, 6):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"paramArray[{i}]: unknown operation {kind}")
        ops.append((kind, addr, value, op_flags))
    for kind, addr, value, op_flags in ops:       # every entry checked before any is queued
        if kind in (OP_WAIT_VALUE_32, OP_WAIT_VALUE_64):
            _wait(stream, addr, value, 4 if kind == OP_WAIT_VALUE_32 else 8, op_flags)
        elif kind in (OP_WRITE_VALUE_32, OP_WRITE_VALUE_64):
            _write(stream, addr, value, 4 if kind == OP_WRITE_VALUE_32 else 8, op_flags)
        # FLUSH_REMOTE_WRITES and BARRIER: stream order already gives both on this device


def _entry(name, impl):
    """name, name_ptsz, and the _v2 pair: the v1 and v2 ABIs take the same arguments."""
    for n, pt in ((name, False), (name + "_ptsz", True), (name + "_v2", False), (name + "_v2_ptsz", True)):
        export(n)(lambda h, *a, _pt=pt: impl(resolve_stream(h, _pt), *a))


_entry("cuStreamWriteValue32", lambda s, addr, v, f: _write(s, addr, v, 4, f))
_entry("cuStreamWriteValue64", lambda s, addr, v, f: _write(s, addr, v, 8, f))
_entry("cuStreamWaitValue32", lambda s, addr, v, f: _wait(s, addr, v, 4, f))
_entry("cuStreamWaitValue64", lambda s, addr, v, f: _wait(s, addr, v, 8, f))
_entry("cuStreamBatchMemOp", _batch)
