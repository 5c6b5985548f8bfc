"""hipError_t -> CUresult: HIP numbers its errors after the CUDA runtime, not the driver API."""

from __future__ import annotations

from zluda_py import errors as E
from zluda_py.errors import CudaError

HIP_TO_CU = {
    0: E.CUDA_SUCCESS,
    1: E.CUDA_ERROR_INVALID_VALUE,            # hipErrorInvalidValue
    2: E.CUDA_ERROR_OUT_OF_MEMORY,            # hipErrorOutOfMemory
    3: E.CUDA_ERROR_NOT_INITIALIZED,          # hipErrorNotInitialized
    4: E.CUDA_ERROR_DEINITIALIZED,            # hipErrorDeinitialized
    9: E.CUDA_ERROR_INVALID_VALUE,            # hipErrorInvalidConfiguration
    12: E.CUDA_ERROR_INVALID_VALUE,           # hipErrorInvalidPitchValue
    13: E.CUDA_ERROR_INVALID_VALUE,           # hipErrorInvalidSymbol
    17: E.CUDA_ERROR_INVALID_VALUE,           # hipErrorInvalidDevicePointer
    21: E.CUDA_ERROR_INVALID_VALUE,           # hipErrorInvalidMemcpyDirection
    35: E.CUDA_ERROR_INVALID_VALUE,           # hipErrorInsufficientDriver
    98: E.CUDA_ERROR_INVALID_HANDLE,          # hipErrorInvalidDeviceFunction
    100: E.CUDA_ERROR_NO_DEVICE,              # hipErrorNoDevice
    101: E.CUDA_ERROR_INVALID_DEVICE,         # hipErrorInvalidDevice
    200: E.CUDA_ERROR_INVALID_IMAGE,          # hipErrorInvalidImage
    201: E.CUDA_ERROR_INVALID_CONTEXT,        # hipErrorInvalidContext
    202: E.CUDA_ERROR_CONTEXT_ALREADY_CURRENT,
    205: E.CUDA_ERROR_MAP_FAILED,
    206: E.CUDA_ERROR_UNMAP_FAILED,
    208: E.CUDA_ERROR_ALREADY_MAPPED,
    209: E.CUDA_ERROR_NO_BINARY_FOR_GPU,      # hipErrorNoBinaryForGpu
    210: E.CUDA_ERROR_ALREADY_ACQUIRED,
    211: E.CUDA_ERROR_NOT_MAPPED,
    215: E.CUDA_ERROR_UNSUPPORTED_LIMIT,
    216: E.CUDA_ERROR_CONTEXT_ALREADY_IN_USE,
    217: E.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
    218: E.CUDA_ERROR_INVALID_PTX,            # hipErrorInvalidKernelFile
    300: E.CUDA_ERROR_INVALID_SOURCE,
    301: E.CUDA_ERROR_FILE_NOT_FOUND,
    302: E.CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND,
    303: E.CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
    400: E.CUDA_ERROR_INVALID_HANDLE,
    500: E.CUDA_ERROR_NOT_FOUND,
    600: E.CUDA_ERROR_NOT_READY,
    700: E.CUDA_ERROR_ILLEGAL_ADDRESS,
    701: E.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
    702: E.CUDA_ERROR_LAUNCH_TIMEOUT,
    704: E.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
    705: E.CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
    708: E.CUDA_ERROR_CONTEXT_IS_DESTROYED,
    709: E.CUDA_ERROR_CONTEXT_IS_DESTROYED,   # hipErrorContextIsDestroyed
    710: E.CUDA_ERROR_ASSERT,                 # hipErrorAssert
    712: E.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
    713: E.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
    719: E.CUDA_ERROR_LAUNCH_FAILED,          # hipErrorLaunchFailure
    720: E.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
    801: E.CUDA_ERROR_NOT_SUPPORTED,
    900: E.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    999: E.CUDA_ERROR_UNKNOWN,
}


def cu_result(hip_code: int) -> int:
    return HIP_TO_CU.get(int(hip_code), E.CUDA_ERROR_UNKNOWN)


def cuda_error(hip_code: int, what: str) -> CudaError:
    return CudaError(cu_result(hip_code), f"{what} failed: hipError {int(hip_code)}")
