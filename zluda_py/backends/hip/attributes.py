"""CUDA device attributes answered from HIP (a table CUDA name -> hipDeviceAttribute_t name) and the
compute capability an AMD GPU reports (ZLUDA_CC, else a default per architecture family)."""

from __future__ import annotations

import os

# CU_DEVICE_ATTRIBUTE_<name> -> hipDeviceAttribute<name>
CUDA_TO_HIP = {
    "MAX_THREADS_PER_BLOCK": "MaxThreadsPerBlock", "MAX_BLOCK_DIM_X": "MaxBlockDimX",
    "MAX_BLOCK_DIM_Y": "MaxBlockDimY", "MAX_BLOCK_DIM_Z": "MaxBlockDimZ", "MAX_GRID_DIM_X": "MaxGridDimX",
    "MAX_GRID_DIM_Y": "MaxGridDimY", "MAX_GRID_DIM_Z": "MaxGridDimZ",
    "MAX_SHARED_MEMORY_PER_BLOCK": "MaxSharedMemoryPerBlock", "TOTAL_CONSTANT_MEMORY": "TotalConstantMemory",
    "MAX_PITCH": "MaxPitch", "MAX_REGISTERS_PER_BLOCK": "MaxRegistersPerBlock",
    "CLOCK_RATE": "ClockRate", "TEXTURE_ALIGNMENT": "TextureAlignment",
    "MULTIPROCESSOR_COUNT": "MultiprocessorCount", "KERNEL_EXEC_TIMEOUT": "KernelExecTimeout",
    "INTEGRATED": "Integrated", "CAN_MAP_HOST_MEMORY": "CanMapHostMemory", "COMPUTE_MODE": "ComputeMode",
    "CONCURRENT_KERNELS": "ConcurrentKernels", "PCI_BUS_ID": "PciBusId", "PCI_DEVICE_ID": "PciDeviceId",
    "PCI_DOMAIN_ID": "PciDomainId", "MEMORY_CLOCK_RATE": "MemoryClockRate",
    "GLOBAL_MEMORY_BUS_WIDTH": "MemoryBusWidth", "L2_CACHE_SIZE": "L2CacheSize",
    "MAX_THREADS_PER_MULTIPROCESSOR": "MaxThreadsPerMultiProcessor", "ASYNC_ENGINE_COUNT": "AsyncEngineCount",
    "UNIFIED_ADDRESSING": "UnifiedAddressing",
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": "MaxSharedMemoryPerMultiprocessor",
    "MAX_REGISTERS_PER_MULTIPROCESSOR": "MaxRegistersPerMultiprocessor", "MANAGED_MEMORY": "ManagedMemory",
    "MULTI_GPU_BOARD": "IsMultiGpuBoard", "MULTI_GPU_BOARD_GROUP_ID": "MultiGpuBoardGroupID",
    "PAGEABLE_MEMORY_ACCESS": "PageableMemoryAccess", "CONCURRENT_MANAGED_ACCESS": "ConcurrentManagedAccess",
    "COOPERATIVE_LAUNCH": "CooperativeLaunch", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": "SharedMemPerBlockOptin",
    "MAX_BLOCKS_PER_MULTIPROCESSOR": "MaxBlocksPerMultiProcessor",
    "STREAM_PRIORITIES_SUPPORTED": "StreamPrioritiesSupported",
    "GLOBAL_L1_CACHE_SUPPORTED": "GlobalL1CacheSupported", "LOCAL_L1_CACHE_SUPPORTED": "LocalL1CacheSupported",
    "HOST_NATIVE_ATOMIC_SUPPORTED": "HostNativeAtomicSupported",
    "DIRECT_MANAGED_MEM_ACCESS_FROM_HOST": "DirectManagedMemAccessFromHost",
    "MEMORY_POOLS_SUPPORTED": "MemoryPoolsSupported",
}
# what a CUDA program must see whatever HIP says (a CUDA warp is 32 lanes on every target we build for;
# the virtual memory API has no HIP lowering yet: driver/vmm.py answers CUDA_ERROR_NOT_SUPPORTED there)
FIXED = {"WARP_SIZE": 32, "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED": 0}
# Limits CUDA fixes for every compute capability: never reported above CUDA's value, even where HIP allows
# more (ROCm: block z 1024, grid y/z 65536, 64 KiB shared by default, 2 GiB "constant"), since the driver
# checks launches against them and CUDA programs rely on launches past them failing.
CUDA_CAPPED = ("MAX_THREADS_PER_BLOCK", "MAX_BLOCK_DIM_X", "MAX_BLOCK_DIM_Y", "MAX_BLOCK_DIM_Z", "MAX_GRID_DIM_X",
               "MAX_GRID_DIM_Y", "MAX_GRID_DIM_Z", "MAX_SHARED_MEMORY_PER_BLOCK", "TOTAL_CONSTANT_MEMORY",
               "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")

# family -> compute capability reported by default (ZLUDA's choice: 8.x, so apps take existing code paths)
DEFAULT_CC = {"RDNA1": (8, 6), "RDNA2": (8, 6), "RDNA3": (8, 8), "RDNA3.5": (8, 8), "RDNA4": (8, 8),
              "CDNA1": (8, 0), "CDNA2": (8, 0), "CDNA3": (8, 0), "CDNA4": (8, 0)}


def compute_capability(family: str) -> tuple:
    env = os.environ.get("ZLUDA_CC", "").strip()
    if env:
        try:
            major, _, minor = env.partition(".")
            return int(major), int(minor or 0)
        except ValueError:
            pass
    return DEFAULT_CC.get(family, (8, 6))


def hip_attributes(hip, device: int, base: dict) -> dict:
    """`base` (every CUDA attribute number -> a value) overridden by what HIP answers for `device`."""
    from zluda_py.backends.cpu.device_attributes import ATTRIBUTE
    out = dict(base)
    for cuda_name, hip_name in CUDA_TO_HIP.items():
        enum = getattr(hip.hipDeviceAttribute_t, "hipDeviceAttribute" + hip_name, None)
        number = ATTRIBUTE.get(cuda_name)
        if enum is None or number is None:
            continue
        try:
            r = hip.hipDeviceGetAttribute(enum, device)
        except RuntimeError:
            continue
        if int(r[0]) == 0:
            value = int(r[1])
            out[number] = min(value, base[number]) if cuda_name in CUDA_CAPPED and number in base else value
    for cuda_name, value in FIXED.items():
        out[ATTRIBUTE[cuda_name]] = value
    return out
