"""HipBackend: devices, memory, streams, events and modules of zluda_py/backends/base.py on HIP.
Kernels are PTX compiled by `ptx` for the device's gcnArchName and loaded as code objects."""

from __future__ import annotations

import ctypes
import os
import re

from zluda_py import log
from zluda_py.backends.base import (Backend, BackendEvent, BackendFunction, BackendModule, BackendStream,
                                    DeviceProperties, FunctionInfo, KernelParam)
from zluda_py.backends.hip import runtime
from zluda_py.backends.hip.attributes import compute_capability, hip_attributes
from zluda_py.backends.hip.runtime import call
from zluda_py.errors import CudaError, CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NOT_SUPPORTED

HIP_NOT_READY = 600
# HIP_LAUNCH_PARAM_*: CUDA's `extra` ends with 0, HIP's with 3 -- the array is rebuilt for every launch
BUFFER_POINTER, BUFFER_SIZE, END = 1, 2, 3
NAME_SUFFIX = " [ZLUDA]"


class HipEvent(BackendEvent):
    def __init__(self, hip, flags):
        self.hip = hip
        self.event = call(hip.hipEventCreateWithFlags, flags & 0x7)

    def query(self) -> bool:
        err = int(self.hip.hipEventQuery(self.event)[0])
        if err in (0, HIP_NOT_READY):
            return err == 0
        raise runtime.cuda_error(err, "hipEventQuery")

    def synchronize(self) -> None:
        call(self.hip.hipEventSynchronize, self.event)

    def elapsed_ms(self, start: "HipEvent") -> float:
        return float(call(self.hip.hipEventElapsedTime, start.event, self.event))

    def destroy(self) -> None:
        if self.event is not None:
            self.hip.hipEventDestroy(self.event)
            self.event = None


def launch_extra(params: bytes):
    """HIP's `extra` array for a packed parameter buffer: [1, &buf, 2, &size, 3] (CUDA's ends with 0, which
    HIP rejects). Returns (array, buffer, size); the caller keeps all three alive across the launch."""
    size = ctypes.c_size_t(len(params))
    buf = ctypes.create_string_buffer(bytes(params), max(len(params), 1))
    extra = (ctypes.c_void_p * 5)(BUFFER_POINTER, ctypes.addressof(buf), BUFFER_SIZE, ctypes.addressof(size), END)
    return extra, buf, size


class HipStream(BackendStream):
    def __init__(self, hip, device, flags, priority):
        self.hip = hip
        self.device = device
        call(hip.hipSetDevice, device)
        self.stream = call(hip.hipStreamCreateWithPriority, flags & 1, priority)

    def copy(self, dst, src, size):
        # hip-python takes the hipMemcpyKind enum only (an int is a TypeError, not a hipError_t)
        call(self.hip.hipMemcpyAsync, dst, src, size, self.hip.hipMemcpyKind.hipMemcpyDefault, self.stream)
        return False

    def copy_2d(self, dst, dpitch, src, spitch, width, height):
        call(self.hip.hipMemcpy2DAsync, dst, dpitch, src, spitch, width, height,
             self.hip.hipMemcpyKind.hipMemcpyDefault, self.stream)

    def memset(self, ptr, value, elem_size, count, pitch=0, height=1):
        fn = {1: self.hip.hipMemsetD8Async, 2: self.hip.hipMemsetD16Async, 4: self.hip.hipMemsetD32Async}[elem_size]
        if elem_size == 4 and value >= 1 << 31:
            value -= 1 << 32        # hip-python declares hipMemsetD32Async's value `int`: larger is OverflowError
        rows = max(height, 1)
        for r in range(rows):
            call(fn, ptr + r * pitch, value, count, self.stream, what=fn.__name__)

    def launch(self, function, grid, block, shared_bytes, params, cooperative=False):
        flags = int(cooperative)
        if (flags >> 8) & 0x7fff not in (0, 0x421):    # cluster dims other than (1, 1, 1) (ptx.runtime.cluster_flags)
            raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "thread-block clusters of more than one CTA run on the CPU "
                                                      "backend only")
        extra, buf, _size = launch_extra(params)
        if flags & 1:
            # hipModuleLaunchCooperativeKernel takes kernelParams only: one pointer per argument
            ptrs = (ctypes.c_void_p * max(len(function.info.params), 1))(
                *[ctypes.addressof(buf) + p.offset for p in function.info.params])
            call(self.hip.hipModuleLaunchCooperativeKernel, function.function, *grid, *block, shared_bytes,
                 self.stream, ctypes.addressof(ptrs))
            return
        call(self.hip.hipModuleLaunchKernel, function.function, *grid, *block, shared_bytes, self.stream,
             None, ctypes.addressof(extra))

    def host_func(self, fn):
        # run once earlier work is done; later work is queued only after this returns
        self.synchronize()
        fn()

    def record(self, event):
        call(self.hip.hipEventRecord, event.event, self.stream)

    def wait(self, event):
        call(self.hip.hipStreamWaitEvent, self.stream, event.event, 0)

    def query(self) -> bool:
        err = int(self.hip.hipStreamQuery(self.stream)[0])
        if err in (0, HIP_NOT_READY):
            return err == 0
        raise runtime.cuda_error(err, "hipStreamQuery")

    def synchronize(self):
        call(self.hip.hipStreamSynchronize, self.stream)

    def destroy(self):
        if self.stream is not None:
            self.hip.hipStreamDestroy(self.stream)
            self.stream = None


class HipFunction(BackendFunction):
    def __init__(self, name, function, kernel):
        self.name = name
        self.function = function
        params = [KernelParam(offset=o, size=s, align=a) for (o, s, a) in kernel.params]
        self.info = FunctionInfo(name=name, params=params, param_size=kernel.param_size,
                                 max_threads_per_block=kernel.max_threads,
                                 static_shared_bytes=kernel.static_shared_bytes,
                                 local_bytes=kernel.private_bytes, num_regs=max(kernel.vgpr_count, 1),
                                 reqntid=kernel.reqntid, maxntid=kernel.maxntid)


class HipModule(BackendModule):
    def __init__(self, hip, compiled):
        self.hip = hip
        self.compiled = compiled
        image = ctypes.create_string_buffer(compiled.code_object, len(compiled.code_object))
        self.module = call(hip.hipModuleLoadData, ctypes.addressof(image))
        self._functions = {}
        for name, k in compiled.kernels.items():
            f = call(hip.hipModuleGetFunction, self.module, name.encode(), what=f"hipModuleGetFunction({name})")
            self._functions[name] = HipFunction(name, f, k)

    def functions(self):
        return self._functions

    def global_symbol(self, name):
        r = self.hip.hipModuleGetGlobal(self.module, name.encode())
        if int(r[0]) != 0:
            return None
        return int(r[1]), int(r[2])

    def unload(self):
        if self.module is not None:
            self.hip.hipModuleUnload(self.module)
            self.module = None
            self._functions = {}


def _text(v) -> str:
    """A hip-python string result (bytes, or a CStr whose decode() gives the text) as str."""
    if hasattr(v, "decode"):
        v = v.decode()
    return str(v).split("\0", 1)[0]


def _uuid_bytes(u) -> bytes:
    """The 16 bytes of a hipUUID_t. Not `.bytes`: hip-python reads that char[16] as a C string, so a UUID
    with a zero byte came back short and cudart saw a different UUID on each call."""
    return ctypes.string_at(u.as_c_void_p().value, 16)


def _pci(bus_id: str):
    m = re.match(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)", bus_id or "")
    return (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)) if m else (0, 0, 0)


class HipBackend(Backend):
    name = "hip"

    def __init__(self):
        self.hip = runtime.load()
        call(self.hip.hipInit, 0)
        self._devices = None
        self._arch = {}
        self._kinds = {}       # address -> 'device' | 'host' | 'managed'

    @classmethod
    def probe(cls) -> tuple[bool, str]:
        try:
            hip = runtime.load()
        except CudaError as e:
            return False, e.message
        where = runtime.lib_path()
        try:
            err = int(hip.hipInit(0)[0])
            count = hip.hipGetDeviceCount()
        except RuntimeError as e:
            return False, f"libamdhip64 at {where} cannot be used: {e}"
        n = int(count[1]) if int(count[0]) == 0 else 0
        if err != 0 or n == 0:
            hint = "" if os.path.exists("/dev/kfd") else " (no /dev/kfd: the amdgpu kernel driver is not loaded)"
            return False, (f"ROCm is present ({where}) but no AMD GPU is usable: hipInit -> {err}, "
                           f"hipGetDeviceCount -> {int(count[0])}, {n} devices{hint}")
        return True, f"{n} AMD GPU(s) through {where}"

    # ------------------------------------------------------------ devices
    def arch(self, device: int) -> str:
        """gcnArchName, e.g. 'gfx1100' or 'gfx90a:sramecc+:xnack-'."""
        a = self._arch.get(device)
        if a is None:
            props = self.hip.hipDeviceProp_t()
            call(self.hip.hipGetDeviceProperties, props, device)
            a = _text(props.gcnArchName)
            self._arch[device] = a
        return a

    def devices(self) -> list:
        if self._devices is not None:
            return self._devices
        from ptx.amdgpu_targets import parse_target
        from zluda_py.backends.cpu.device_attributes import cpu_attributes
        hip = self.hip
        out = []
        for d in range(int(call(hip.hipGetDeviceCount))):
            name = _text(call(hip.hipDeviceGetName, 256, d))
            try:
                family = parse_target(self.arch(d)).family
            except Exception:  # noqa: BLE001 - an unknown GPU still lists, with the default capability
                family = "?"
            cc = compute_capability(family)
            pci = _pci(_text(call(hip.hipDeviceGetPCIBusId, 64, d)))
            total = int(call(hip.hipDeviceTotalMem, d))
            base = cpu_attributes(cc, 1, 1_000_000, 4 << 20, pci)
            attrs = hip_attributes(hip, d, base)
            try:
                uuid = _uuid_bytes(call(hip.hipDeviceGetUuid, d))
            except (CudaError, AttributeError, TypeError):
                uuid = (f"zluda-hip-{d}-{pci}".encode() + bytes(16))[:16]
            out.append(DeviceProperties(name=name + NAME_SUFFIX, uuid=uuid, pci_domain=pci[0], pci_bus=pci[1],
                                        pci_device=pci[2], total_mem=total, cc_major=cc[0], cc_minor=cc[1],
                                        attributes=attrs))
        self._devices = out
        return out

    # ------------------------------------------------------------ memory
    def mem_alloc(self, device, size, kind="device"):
        hip = self.hip
        call(hip.hipSetDevice, device)
        if kind == "host":
            p = call(hip.hipHostMalloc, max(size, 1), 0)
        elif kind == "managed":
            p = call(hip.hipMallocManaged, max(size, 1), 1)
        else:
            p = call(hip.hipMalloc, max(size, 1))
        addr = int(p)
        self._kinds[addr] = kind
        return addr

    def mem_free(self, ptr):
        kind = self._kinds.pop(ptr, "device")
        call(self.hip.hipHostFree if kind == "host" else self.hip.hipFree, ptr)

    def mem_info(self, device):
        call(self.hip.hipSetDevice, device)
        free, total = call(self.hip.hipMemGetInfo)
        return int(free), int(total)

    def host_register(self, ptr, size):
        call(self.hip.hipHostRegister, ptr, size, 0)
        return int(call(self.hip.hipHostGetDevicePointer, ptr, 0))

    def host_unregister(self, ptr):
        call(self.hip.hipHostUnregister, ptr)

    # ------------------------------------------------------------ work
    def stream_create(self, device, flags=0, priority=0):
        return HipStream(self.hip, device, flags, priority)

    def event_create(self, flags=0):
        return HipEvent(self.hip, flags)

    def module_load(self, device, ptx_text, name=""):
        from zluda_py.backends.cpu.module import compile_module
        compiled = compile_module(ptx_text, self.arch(device), name)
        if log.TRACE:
            log.write(f"module {name}: {len(compiled.kernels)} kernels for {compiled.target.cpu}"
                      f"{' (cached)' if compiled.cache_hit else ''}")
        call(self.hip.hipSetDevice, device)
        return HipModule(self.hip, compiled)

    def synchronize(self):
        call(self.hip.hipDeviceSynchronize)


__all__ = ["HipBackend", "CUDA_ERROR_NO_DEVICE"]
