"""The one interface every backend implements; the driver calls only this, never asks which backend it is on.

Addresses are plain ints. All sizes are bytes. Methods raise zluda_py.errors.CudaError with the CUresult
the driver should return (e.g. CUDA_ERROR_OUT_OF_MEMORY). Streams and events are backend objects; the
driver layers CUDA's rules (legacy default stream, per-thread stream, contexts) on top of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from zluda_py.errors import CudaError, CUDA_ERROR_NOT_SUPPORTED


@dataclass
class DeviceProperties:
    name: str
    uuid: bytes                      # 16 bytes, stable per machine
    pci_domain: int
    pci_bus: int
    pci_device: int
    total_mem: int
    cc_major: int
    cc_minor: int
    attributes: dict = field(default_factory=dict)   # CUdevice_attribute value -> int
    luid: bytes = b"\0" * 8


@dataclass
class KernelParam:
    offset: int       # byte offset in the packed parameter buffer
    size: int
    align: int


@dataclass
class FunctionInfo:
    name: str
    params: list                     # [KernelParam]
    param_size: int                  # packed buffer size
    max_threads_per_block: int = 1024
    static_shared_bytes: int = 0
    const_bytes: int = 0
    local_bytes: int = 0
    num_regs: int = 32
    reqntid: tuple | None = None
    maxntid: tuple | None = None


class BackendFunction(ABC):
    info: FunctionInfo


class BackendModule(ABC):
    @abstractmethod
    def functions(self) -> dict:
        """name -> BackendFunction for every .entry of the module."""

    @abstractmethod
    def global_symbol(self, name: str) -> tuple[int, int] | None:
        """(device address, size) of a .global/.const variable, or None."""

    @abstractmethod
    def unload(self) -> None: ...


class BackendEvent(ABC):
    @abstractmethod
    def query(self) -> bool:
        """True once all work captured by the last record has completed (or never recorded)."""

    @abstractmethod
    def synchronize(self) -> None: ...

    @abstractmethod
    def elapsed_ms(self, start: "BackendEvent") -> float:
        """Milliseconds from `start` to self; both must be recorded and complete."""

    def destroy(self) -> None:
        pass


class BackendStream(ABC):
    """An in-order queue of device work that runs asynchronously with the host.

    `on_fault`, when the driver sets it, is called with the CudaError of work that failed on the device
    (a kernel trap: CUDA_ERROR_LAUNCH_FAILED / CUDA_ERROR_ASSERT / CUDA_ERROR_ILLEGAL_ADDRESS /
    CUDA_ERROR_MISALIGNED_ADDRESS) as soon as the backend knows, so the context's sticky error is set before
    anyone synchronizes.

    A backend whose streams set `reports_busy = True` calls `on_busy(True)` when a stream turns from idle
    to having work queued and `on_busy(False)` when it drains, in that order per stream, so the driver
    asks only busy streams (legacy-stream waits, cuMemFree) instead of querying every stream each call.
    Work that completes before the call returns (a copy answering True) needs neither."""

    on_fault: Callable | None = None
    reports_busy = False
    on_busy: Callable | None = None

    @abstractmethod
    def copy(self, dst: int, src: int, size: int) -> bool | None:
        """May answer True when the copy has already completed (the driver then skips its wait)."""

    @abstractmethod
    def copy_2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int) -> None: ...

    @abstractmethod
    def memset(self, ptr: int, value: int, elem_size: int, count: int,
               pitch: int = 0, height: int = 1) -> None:
        """Fill `count` elements of `elem_size` (1, 2, 4) bytes; with pitch, `height` rows of `count`."""

    @abstractmethod
    def launch(self, function: BackendFunction, grid: tuple, block: tuple, shared_bytes: int,
               params: bytes, cooperative: bool = False) -> None: ...
    # `cooperative` is a bool, or an int of ptx.runtime launch flags: COOPERATIVE (1), or
    # ptx.runtime.cluster_flags(dims) for a thread-block cluster launch (a backend refuses shapes it cannot run).

    @abstractmethod
    def host_func(self, fn: Callable[[], None]) -> None:
        """Run fn on a host thread once prior work is done; later work waits for it."""

    @abstractmethod
    def record(self, event: BackendEvent) -> None: ...

    @abstractmethod
    def wait(self, event: BackendEvent) -> None:
        """Later work on this stream waits until `event`'s recorded work completes."""

    def write_value(self, addr: int, value: int, size: int) -> None:
        """Store a `size`-byte (4 or 8) little-endian value at device address `addr` in stream order."""
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "stream memory operations are not supported here")

    def wait_value(self, addr: int, value: int, size: int, op: int) -> None:
        """Later work waits until the `size`-byte value at `addr` satisfies CUstreamWaitValue_flags `op`
        (GEQ 0, EQ 1, AND 2, NOR 3) against `value`."""
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "stream memory operations are not supported here")

    @abstractmethod
    def query(self) -> bool: ...

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for all queued work; raises CudaError (e.g. CUDA_ERROR_LAUNCH_FAILED, ASSERT) on a fault."""

    def destroy(self) -> None:
        pass

    def register(self, ctx_handle: int, handle: int, blocking: bool, thread: int):
        """Name the stream for a fast path that works on it without the driver (CUstream `handle`, 1 for
        the legacy and 2 for a per-thread default stream, whose owner `thread` is threading.get_ident()).
        A backend that counts busy streams itself answers its context's count (an int64_t * that is 0 when
        no stream of it is busy; `counted()` says which) and never calls on_busy; None otherwise."""
        return None

    def unregister(self) -> None:
        """The stream left its context (destroyed, or a default stream dropped): fast paths forget it."""

    def counted(self) -> bool:
        """With register's count: this stream counts as busy."""
        return True


class Backend(ABC):
    name: str = "?"

    @classmethod
    @abstractmethod
    def probe(cls) -> tuple[bool, str]:
        """(usable, reason): whether this backend can run here and, if not, exactly why."""

    @abstractmethod
    def devices(self) -> list[DeviceProperties]: ...

    # memory -- all synchronous
    @abstractmethod
    def mem_alloc(self, device: int, size: int, kind: str = "device") -> int:
        """kind: 'device', 'host' (page-locked), 'managed'. Returns the address."""

    @abstractmethod
    def mem_free(self, ptr: int) -> None: ...

    @abstractmethod
    def mem_info(self, device: int) -> tuple[int, int]:
        """(free, total) bytes."""

    def mem_trim(self) -> None:
        """Give memory cached after frees back to the host (cuMemPoolTrimTo, context teardown)."""

    def graph_memory(self):
        """Address ranges with physical blocks mapped into them at will (reserve/release/block/map/unmap, as
        backends/cpu/graph_memory.py), for graph allocations; None: each range has memory of its own."""
        return None

    def virtual_memory(self):
        """The same for the virtual memory API (cuMemAddressReserve/cuMemCreate/cuMemMap, with reserve's
        alignment and prot, map's offset, protect, and blocks that export() to a descriptor and adopt()
        one), or None where the backend has none (the device attribute then says so)."""
        return None

    def host_register(self, ptr: int, size: int) -> int:
        """Make host memory device-accessible; returns the device address for it."""
        return ptr

    def host_unregister(self, ptr: int) -> None:
        pass

    @abstractmethod
    def stream_create(self, device: int, flags: int = 0, priority: int = 0) -> BackendStream: ...

    @abstractmethod
    def event_create(self, flags: int = 0) -> BackendEvent:
        """flags: CUevent_flags; with CU_EVENT_INTERPROCESS the event can be exported (event_export)."""

    def event_export(self, event: BackendEvent) -> bytes:
        """At most 56 bytes naming an interprocess event for event_import in another process."""
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "interprocess events are not supported here")

    def event_import(self, raw: bytes, flags: int) -> BackendEvent:
        """The event another process exported (raw: its 64-byte handle), usable here."""
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "interprocess events are not supported here")

    @abstractmethod
    def module_load(self, device: int, ptx_text: str, name: str = "") -> BackendModule:
        """Compile (or fetch from cache) PTX for this backend's target and load it."""

    def synchronize(self) -> None:
        """Wait for all streams of this backend."""
