"""The hip-python value types the backend touches, with hip-python's behaviour (Pointer-likes that int()
to their address, IntEnums, CStr, hipUUID_t whose .bytes stops at a NUL) and the double's gfx1100."""

from __future__ import annotations

import ctypes
import enum


class hipError_t(enum.IntEnum):
    # numbers as hip-python 7.2 has them (test_hip_emulated checks them against the real module)
    hipSuccess = 0
    hipErrorInvalidValue = 1
    hipErrorOutOfMemory = 2
    hipErrorNotInitialized = 3
    hipErrorInvalidConfiguration = 9
    hipErrorInvalidPitchValue = 12
    hipErrorInvalidDevicePointer = 17
    hipErrorInvalidMemcpyDirection = 21
    hipErrorNoDevice = 100
    hipErrorInvalidDevice = 101
    hipErrorInvalidImage = 200
    hipErrorInvalidContext = 201
    hipErrorNoBinaryForGpu = 209
    hipErrorInvalidHandle = 400
    hipErrorNotFound = 500
    hipErrorNotReady = 600
    hipErrorIllegalAddress = 700
    hipErrorLaunchOutOfResources = 701
    hipErrorHostMemoryAlreadyRegistered = 712
    hipErrorHostMemoryNotRegistered = 713
    hipErrorLaunchFailure = 719
    hipErrorCooperativeLaunchTooLarge = 720
    hipErrorNotSupported = 801


class hipMemcpyKind(enum.IntEnum):
    hipMemcpyHostToHost = 0
    hipMemcpyHostToDevice = 1
    hipMemcpyDeviceToHost = 2
    hipMemcpyDeviceToDevice = 3
    hipMemcpyDefault = 4


# hipDeviceAttribute<name>: (hip-python's number, what the double's gfx1100 answers). The values are an
# RX 7900 XTX's as ROCm 6 reports them, to the best of our reading -- a stand-in, not a measurement.
ATTRIBUTES = {
    "MaxThreadsPerBlock": (56, 1024), "MaxBlockDimX": (26, 1024), "MaxBlockDimY": (27, 1024),
    "MaxBlockDimZ": (28, 1024), "MaxGridDimX": (29, 2147483647), "MaxGridDimY": (30, 65536),
    "MaxGridDimZ": (31, 65536), "MaxSharedMemoryPerBlock": (74, 65536), "TotalConstantMemory": (83, 2147483647),
    "MaxPitch": (58, 2147483647), "MaxRegistersPerBlock": (71, 65536), "ClockRate": (5, 2482000),
    "TextureAlignment": (81, 256), "MultiprocessorCount": (63, 48), "KernelExecTimeout": (18, 0),
    "Integrated": (16, 0), "CanMapHostMemory": (3, 1), "ComputeMode": (6, 0), "ConcurrentKernels": (8, 1),
    "PciBusId": (67, 3), "PciDeviceId": (68, 0), "PciDomainId": (69, 0), "MemoryClockRate": (60, 1250000),
    "MemoryBusWidth": (59, 384), "L2CacheSize": (19, 6291456), "MaxThreadsPerMultiProcessor": (57, 2048),
    "AsyncEngineCount": (2, 2), "UnifiedAddressing": (85, 1), "MaxSharedMemoryPerMultiprocessor": (10002, 65536),
    "MaxRegistersPerMultiprocessor": (72, 65536), "ManagedMemory": (24, 1), "IsMultiGpuBoard": (17, 0),
    "MultiGpuBoardGroupID": (62, 0), "PageableMemoryAccess": (65, 0), "ConcurrentManagedAccess": (9, 0),
    "CooperativeLaunch": (10, 1), "SharedMemPerBlockOptin": (75, 65536), "MaxBlocksPerMultiProcessor": (25, 32),
    "StreamPrioritiesSupported": (78, 1), "GlobalL1CacheSupported": (14, 1), "LocalL1CacheSupported": (20, 1),
    "HostNativeAtomicSupported": (15, 1), "DirectManagedMemAccessFromHost": (13, 0),
    "MemoryPoolsSupported": (88, 1), "VirtualMemoryManagementSupported": (89, 1),
}
hipDeviceAttribute_t = enum.IntEnum("hipDeviceAttribute_t",
                                    {"hipDeviceAttribute" + k: n for k, (n, _) in ATTRIBUTES.items()})
GFX1100 = dict(name=b"AMD Radeon RX 7900 XTX", gcnArchName=b"gfx1100", totalGlobalMem=24 << 30,
               pciBusId="0000:03:00.0",
               # a NUL inside, as real UUIDs may have: hipUUID_t.bytes stops there
               uuid=bytes.fromhex("5a4c554441000044f00d2024aabbccdd"))
HIP_LAUNCH_PARAM_BUFFER_POINTER, HIP_LAUNCH_PARAM_BUFFER_SIZE, HIP_LAUNCH_PARAM_END = 1, 2, 3


class Pointer:
    """hip._util.types.Pointer: an address; int() gives it."""

    def __init__(self, addr=0):
        self._ptr = int(addr or 0)

    def __int__(self):
        return self._ptr

    def as_c_void_p(self):
        return ctypes.c_void_p(self._ptr or None)

    def is_ptr_null(self):
        return self._ptr == 0

    def __repr__(self):
        return f"<{type(self).__name__} object, ptr: {self._ptr:#x}>"


class DeviceArray(Pointer):
    pass


class CStr(Pointer):
    def __init__(self, text: bytes):
        self._buf = ctypes.create_string_buffer(text)
        super().__init__(ctypes.addressof(self._buf))

    def decode(self, *a):
        return self._buf.value.decode(*a)


class Handle(Pointer):
    """ihipStream_t, ihipEvent_t, ihipModule_t, ihipModuleSymbol_t: opaque pointers to the double's objects."""
    _next = 0x5000

    def __init__(self, obj):
        Handle._next += 0x40
        super().__init__(Handle._next)
        self.obj = obj


class ihipStream_t(Handle):
    pass


class ihipEvent_t(Handle):
    pass


class ihipModule_t(Handle):
    pass


class ihipModuleSymbol_t(Handle):
    pass


class hipUUID_t(Pointer):
    def __init__(self):
        self._raw = ctypes.create_string_buffer(16)
        super().__init__(ctypes.addressof(self._raw))

    @property
    def bytes(self):
        # hip-python reads the char[16] as a C string: it ends at the first NUL
        return self._raw.value[:16]


class hipDeviceProp_t(Pointer):
    def __init__(self):
        super().__init__(0)
        self.name = b""
        self.gcnArchName = b""
        self.totalGlobalMem = 0
        self.warpSize = 0


def address(obj) -> int:
    """The address hip-python's Pointer.fromPyobj takes from `obj` (None, int, c_void_p, a Pointer, a
    ctypes object or buffer, a numpy array); TypeError for anything else, as hip-python raises."""
    if obj is None:
        return 0
    if isinstance(obj, ctypes.c_void_p):
        return obj.value or 0
    if isinstance(obj, Pointer):
        return obj._ptr
    if isinstance(obj, bool):
        raise TypeError(f"unsupported input type: '{type(obj)}'")
    if isinstance(obj, int):
        return obj
    if isinstance(obj, bytes):
        return ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0
    if isinstance(obj, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure, ctypes.Union)):
        return ctypes.addressof(obj)
    iface = getattr(obj, "__array_interface__", None) or getattr(obj, "__cuda_array_interface__", None)
    if iface:
        return int(iface["data"][0])
    if isinstance(obj, (bytearray, memoryview)):
        return ctypes.addressof((ctypes.c_char * len(obj)).from_buffer(obj))
    raise TypeError(f"unsupported input type: '{type(obj)}'")


def c_string(obj) -> bytes:
    """What CStr.fromPyobj passes for a name: bytes or str as text, else a NUL-ended string at an address."""
    if isinstance(obj, str):
        return obj.encode()
    if isinstance(obj, bytes):
        return obj.split(b"\0", 1)[0]
    return ctypes.string_at(address(obj))


def unsigned(value, bits, what):
    """Cython's conversion of a Python int to an unsigned C parameter: OverflowError outside the range."""
    v = int(value)
    if v < 0:
        raise OverflowError(f"can't convert negative value to unsigned {what}")
    if v >> bits:
        raise OverflowError(f"value too large to convert to {what}")
    return v


def signed(value, bits, what):
    v = int(value)
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise OverflowError(f"value too large to convert to {what}")
    return v
