"""Entry-point discovery and static answers: cuGetProcAddress (name + version + stream flag -> exported
function), cuGetErrorName/String and cuDriverGetVersion."""

from zluda_py import cmem, dispatch, log, native
from zluda_py.decls import DATA, ENUMS
from zluda_py.dispatch import export
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND,
                             CUDA_ERROR_NOT_SUPPORTED)

DRIVER_VERSION = DATA["cuda_version"]

_STATUS = ENUMS["CUdriverProcAddressQueryResult"]
SUCCESS = _STATUS["CU_GET_PROC_ADDRESS_SUCCESS"]
SYMBOL_NOT_FOUND = _STATUS["CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND"]
VERSION_NOT_SUFFICIENT = _STATUS["CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT"]
_FLAGS = ENUMS["CUdriverProcAddress_flags"]
PER_THREAD = _FLAGS["CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM"]
_VALID_FLAGS = _FLAGS["CU_GET_PROC_ADDRESS_LEGACY_STREAM"] | PER_THREAD


def _index():
    """base name -> ([(version, symbol)] legacy-stream, [(version, symbol)] per-thread), ascending."""
    table = {}
    for e in DATA.get("procaddr", []):
        legacy, per_thread = table.setdefault(e["name"], ([], []))
        (per_thread if e["ptds"] else legacy).append((e["version"], e["symbol"]))
    for legacy, per_thread in table.values():
        legacy.sort()
        per_thread.sort()
    return table


_TABLE = _index()


def resolve(name: str, version: int, per_thread: bool):
    """(status, exported symbol or None) as NVIDIA's table answers, before asking what is implemented."""
    entry = _TABLE.get(name)
    if entry is None:
        return SYMBOL_NOT_FOUND, None
    legacy, ptds = entry
    usable = [(v, s) for v, s in legacy if v <= version]
    if not usable:
        return VERSION_NOT_SUFFICIENT, None
    chosen_version, symbol = usable[-1]
    if per_thread:
        # The per-thread variant applies only if it is at least as new as the ABI version chosen
        # (cuMemcpyHtoD_v2_ptds exists from 7000, after cuMemcpyHtoD_v2 at 3020).
        newer = [(v, s) for v, s in ptds if chosen_version <= v <= version]
        if newer:
            symbol = newer[-1][1]
    return SUCCESS, symbol


_address_cache: dict = {}


def function_address(symbol: str) -> int:
    """The shim's C entry point for an exported symbol (what cuGetProcAddress hands out)."""
    addr = _address_cache.get(symbol)
    if addr is None:
        if not native.loaded():
            raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "no shim loaded: function addresses unknown")
        p = native.lib.zluda_fn_address(dispatch.FUNCTION_IDS[symbol])
        addr = _address_cache[symbol] = int(native.ffi.cast("uintptr_t", p))
    return addr


def _get_proc_address(symbol, pfn, version, flags, status_ptr):
    if not symbol or not pfn:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "symbol or pfn is NULL")
    cmem.write_ptr(pfn, 0)
    if flags & ~_VALID_FLAGS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown flags {flags:#x}")
    name = cmem.read_cstring(symbol)
    status, exported = resolve(name, version, bool(flags & PER_THREAD))
    # A name we export but do not implement is reported missing: clients such as cudart treat a NULL
    # entry point as an optional feature, whereas a stub returning NOT_SUPPORTED fails them outright.
    if status == SUCCESS and not dispatch.implemented(exported):
        status, exported = SYMBOL_NOT_FOUND, None
    if status_ptr:
        cmem.write_i32(status_ptr, status)
    if exported is None:
        # Probing is routine: cudart asks for "" and for optional entry points the driver exports but
        # does not implement. A name no driver of the declarations' release has is worth one line, once.
        if name and name not in _TABLE:
            log.once(f"procaddr:{name}", f"cuGetProcAddress: CUDA_ERROR_NOT_FOUND: no driver function "
                                         f"{name!r} (CUDA {DRIVER_VERSION // 1000}.{DRIVER_VERSION % 1000 // 10})")
        return CUDA_ERROR_NOT_FOUND
    cmem.write_ptr(pfn, function_address(exported))
    return None


@export("cuGetProcAddress_v2")
def get_proc_address_v2(symbol, pfn, cuda_version, flags, symbol_status):
    return _get_proc_address(symbol, pfn, cuda_version, flags, symbol_status)


@export("cuGetProcAddress")
def get_proc_address(symbol, pfn, cuda_version, flags):
    return _get_proc_address(symbol, pfn, cuda_version, flags, 0)


def _static_string(fn_name: str, code: int, out: int):
    if not out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pStr is NULL")
    if not native.loaded():
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "no shim loaded: static strings unavailable")
    p = getattr(native.lib, fn_name)(code)
    addr = int(native.ffi.cast("uintptr_t", p))
    cmem.write_ptr(out, addr)
    if not addr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{code} is not a CUresult")


@export("cuGetErrorName")
def get_error_name(error, p_str):
    _static_string("zluda_error_name", error, p_str)


@export("cuGetErrorString")
def get_error_string(error, p_str):
    _static_string("zluda_error_string", error, p_str)


@export("cuDriverGetVersion")
def driver_get_version(driver_version):
    if not driver_version:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "driverVersion is NULL")
    cmem.write_i32(driver_version, DRIVER_VERSION)
