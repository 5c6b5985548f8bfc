"""The CPU backend: device memory is host memory, streams are worker queues, kernels are host machine code."""

from __future__ import annotations

from zluda_py.backends.base import Backend, DeviceProperties
from zluda_py.backends.cpu import device_info
from zluda_py.backends.cpu.device_attributes import cpu_attributes
from zluda_py.backends.cpu.event import CpuEvent
from zluda_py.backends.cpu.memory import HostMemory
from zluda_py.backends.cpu.stream import CpuStream

_EVENT_INTERPROCESS = 0x4     # CU_EVENT_INTERPROCESS


class CpuBackend(Backend):
    name = "cpu"
    device_memory_is_host = True      # a device pointer is a host address: host code may read it (BLAS front)

    def __init__(self):
        self.memory = HostMemory()
        self._devices = None
        self._graph_memory = None
        self.mem_alloc = self.memory.device_alloc    # one Python call less on cuMemAlloc's path
        self.mem_free = self.memory.free            # and on cuMemFree's

    @classmethod
    def probe(cls) -> tuple[bool, str]:
        return True, "the CPU backend runs everywhere"

    def devices(self) -> list[DeviceProperties]:
        if self._devices is None:
            cc = device_info.compute_capability()
            pci = (0, 0, 0)
            attrs = cpu_attributes(cc, device_info.usable_cores(), device_info.clock_khz(),
                                   device_info.l2_cache_bytes(), pci)
            self._devices = [DeviceProperties(
                name=f"ZLUDA CPU ({device_info.cpu_model()})", uuid=device_info.device_uuid(0),
                pci_domain=pci[0], pci_bus=pci[1], pci_device=pci[2], total_mem=self.memory.total,
                cc_major=cc[0], cc_minor=cc[1], attributes=attrs)]
        return self._devices

    def mem_alloc(self, device: int, size: int, kind: str = "device") -> int:
        return self.memory.alloc(size)

    def mem_free(self, ptr: int) -> None:
        self.memory.free(ptr)

    def mem_trim(self) -> None:
        """Give pooled free blocks (ZLUDA_MEM_POOL=1) back to the host."""
        self.memory.trim()

    def mem_info(self, device: int) -> tuple[int, int]:
        return self.memory.info()

    def graph_memory(self):
        if self._graph_memory is None:
            from zluda_py.backends.cpu.graph_memory import HostGraphMemory
            self._graph_memory = HostGraphMemory()
        return self._graph_memory

    virtual_memory = graph_memory      # the same ranges and memfd blocks

    def stream_create(self, device: int, flags: int = 0, priority: int = 0) -> CpuStream:
        return CpuStream(flags, priority)

    def event_create(self, flags: int = 0) -> CpuEvent:
        if flags & _EVENT_INTERPROCESS:
            from zluda_py.backends.cpu import shared_event
            return shared_event.SharedCpuEvent(flags, shared_event.SharedCounters.create())
        return CpuEvent(flags)

    def event_export(self, event) -> bytes:
        if event.shared is None:
            return super().event_export(event)
        return event.shared.handle()

    def event_import(self, raw: bytes, flags: int):
        from zluda_py.backends.cpu import shared_event
        return shared_event.open_handle(raw, flags)

    def module_load(self, device: int, ptx_text: str, name: str = ""):
        from zluda_py.backends.cpu.module import load_module
        return load_module(ptx_text, name)
