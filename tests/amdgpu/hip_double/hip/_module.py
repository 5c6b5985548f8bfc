"""The double's modules and launches: code objects loaded into the emulator (each load its own copy, so its
own globals, as HIP's), kernels run through EmulatedCodeObject.launch_raw in stream order."""

from __future__ import annotations

import concurrent.futures
import ctypes
import struct
import time

from hip._types import (HIP_LAUNCH_PARAM_BUFFER_POINTER, HIP_LAUNCH_PARAM_BUFFER_SIZE, HIP_LAUNCH_PARAM_END,
                        Pointer, address, c_string, hipError_t as E, ihipModule_t, ihipModuleSymbol_t, unsigned)
from hip.hip import _Bad, _api, _enqueue, _errors, _stream_of, record

# Every emulator call on one thread: tinygrad's disk cache is an sqlite connection usable only by the thread
# that opened it. One kernel at a time is also a schedule a GPU may choose.
_device = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="hip-double-device")
_STT_OBJECT = 1


def _elf_size(p):
    """The size of the ELF image at address p, from its headers -- HIP is given a pointer only, too."""
    head = ctypes.string_at(p, 64)
    if head[:4] != b"\x7fELF" or head[4] != 2:
        return 0
    phoff, shoff = struct.unpack_from("<QQ", head, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 54)
    end = max(64, phoff + phnum * phentsize, shoff + shnum * shentsize)
    for i in range(phnum):
        off, _, _, filesz = struct.unpack_from("<QQQQ", ctypes.string_at(p + phoff + i * phentsize + 8, 32))
        end = max(end, off + filesz)
    for i in range(shnum):
        sh = ctypes.string_at(p + shoff + i * shentsize, 64)
        sh_type, off, size = struct.unpack_from("<I", sh, 4)[0], *struct.unpack_from("<QQ", sh, 24)
        if sh_type != 8:                         # SHT_NOBITS takes no room in the file
            end = max(end, off + size)
    return end


class _Module:
    def __init__(self, code):
        self.code = code
        self.unloaded = False
        self.objects = {name for name, typ, _, defined, _ in code.info.dynsyms if defined and typ == _STT_OBJECT}


class _Function:
    def __init__(self, module, name):
        self.module, self.name = module, name
        meta = module.code.kernels[name]
        self.args = [a for a in meta.get(".args", []) if not a[".value_kind"].startswith("hidden_")]
        self.explicit = max((a[".offset"] + a[".size"] for a in self.args), default=0)
        self.max_threads = meta.get(".max_flat_workgroup_size", 1024)


def _module_of(m):
    if isinstance(m, ihipModule_t) and isinstance(m.obj, _Module):
        return m.obj
    raise _Bad(E.hipErrorInvalidHandle)


@_api
def hipModuleLoadData(image):
    if isinstance(image, (bytes, bytearray)):
        data = bytes(image)
    else:
        p = address(image)
        n = _elf_size(p) if p else 0
        if n == 0:
            return (E.hipErrorInvalidImage, None)
        data = ctypes.string_at(p, n)
    from ptx import amdgpu_emulator
    try:
        code = _device.submit(amdgpu_emulator.EmulatedCodeObject, data).result()
    except amdgpu_emulator.EmulatorUnavailable as e:
        # hip-python's answer when the library cannot be used: RuntimeError
        raise RuntimeError(f"hip double: no emulator: {e}") from None
    except amdgpu_emulator.EmulatorError as e:
        record("emulator-refused", [str(e)], E.hipErrorNoBinaryForGpu)
        return (E.hipErrorNoBinaryForGpu, None)
    except Exception:  # noqa: BLE001 - not a code object HIP could load
        return (E.hipErrorInvalidImage, None)
    return (E.hipSuccess, ihipModule_t(_Module(code)))


@_api
@_errors
def hipModuleUnload(module):
    _module_of(module).unloaded = True
    module.obj = None
    return (E.hipSuccess,)


@_api
def hipModuleGetFunction(module, kname):
    try:
        m = _module_of(module)
    except _Bad as b:
        return (b.code, None)
    name = c_string(kname).decode(errors="replace")
    if name not in m.code.kernels:
        return (E.hipErrorNotFound, None)
    return (E.hipSuccess, ihipModuleSymbol_t(_Function(m, name)))


@_api
def hipModuleGetGlobal(hmod, name):
    try:
        m = _module_of(hmod)
    except _Bad as b:
        return (b.code, None, 0)
    n = c_string(name).decode(errors="replace")
    if n not in m.objects:
        return (E.hipErrorNotFound, None, 0)
    addr, size = m.code.symbols[n]
    return (E.hipSuccess, Pointer(addr), size)


def _params_from_kernel_params(fn, kp):
    """HIP copies each argument from kernelParams[i] at the size and offset the metadata gives."""
    buf = bytearray(fn.explicit)
    ptrs = (ctypes.c_void_p * max(len(fn.args), 1)).from_address(kp)
    for i, a in enumerate(fn.args):
        if not ptrs[i]:
            raise _Bad(E.hipErrorInvalidValue)
        buf[a[".offset"]:a[".offset"] + a[".size"]] = ctypes.string_at(ptrs[i], a[".size"])
    return bytes(buf)


def _params_from_extra(fn, ex):
    """HIP's `extra`: exactly {BUFFER_POINTER, buf, BUFFER_SIZE, &size, END}; the buffer must hold the
    kernel's explicit arguments."""
    cfg = (ctypes.c_void_p * 5).from_address(ex)
    if (cfg[0], cfg[2], cfg[4]) != (HIP_LAUNCH_PARAM_BUFFER_POINTER, HIP_LAUNCH_PARAM_BUFFER_SIZE,
                                    HIP_LAUNCH_PARAM_END) or not cfg[3]:
        raise _Bad(E.hipErrorInvalidValue)
    size = ctypes.c_size_t.from_address(cfg[3]).value
    if size < fn.explicit or (fn.explicit and not cfg[1]):
        raise _Bad(E.hipErrorInvalidValue)
    return ctypes.string_at(cfg[1], fn.explicit) if fn.explicit else b"", size


def _launch(name, f, grid, block, shared, stream, kp, ex, cooperative=False):
    if not (isinstance(f, ihipModuleSymbol_t) and isinstance(f.obj, _Function)):
        return (E.hipErrorInvalidHandle,)
    fn = f.obj
    if fn.module.unloaded:
        return (E.hipErrorInvalidHandle,)
    grid = tuple(unsigned(v, 32, "unsigned int") for v in grid)
    block = tuple(unsigned(v, 32, "unsigned int") for v in block)
    shared = unsigned(shared, 32, "unsigned int")
    if 0 in grid + block or block[0] * block[1] * block[2] > fn.max_threads:
        return (E.hipErrorInvalidConfiguration if 0 not in grid + block else E.hipErrorInvalidValue,)
    kp, ex = address(kp), address(ex)
    if kp and ex:
        return (E.hipErrorInvalidValue,)
    extra_size = None
    if ex:
        params, extra_size = _params_from_extra(fn, ex)
    elif kp:
        params = _params_from_kernel_params(fn, kp)
    elif fn.explicit:
        return (E.hipErrorInvalidValue,)
    else:
        params = b""
    code = fn.module.code

    def op():
        t = time.perf_counter()
        _device.submit(code.launch_raw, fn.name, grid, block, params, shared).result()
        record("emulator.launch_raw", [fn.name, list(grid), list(block), shared], 0,
               seconds=round(time.perf_counter() - t, 3))
    record(name + ".args", [fn.name], 0, kernel=fn.name, grid=list(grid), block=list(block), shared=shared,
           via="extra" if ex else "kernelParams" if kp else "none", extra_size=extra_size, params=params.hex(),
           cooperative=cooperative)
    return (_enqueue(stream, op),)


@_api
@_errors
def hipModuleLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                          stream, kernelParams, extra):
    _stream_of(stream)
    return _launch("hipModuleLaunchKernel", f, (gridDimX, gridDimY, gridDimZ), (blockDimX, blockDimY, blockDimZ),
                   sharedMemBytes, stream, kernelParams, extra)


@_api
@_errors
def hipModuleLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                     sharedMemBytes, stream, kernelParams):
    # the emulator runs workgroups one after another: a grid-wide barrier would never be met, so only
    # grids that fit one workgroup run; HIP answers a grid too large for co-residency the same way
    _stream_of(stream)
    if gridDimX * gridDimY * gridDimZ > 1:
        return (E.hipErrorCooperativeLaunchTooLarge,)
    return _launch("hipModuleLaunchCooperativeKernel", f, (gridDimX, gridDimY, gridDimZ),
                   (blockDimX, blockDimY, blockDimZ), sharedMemBytes, stream, kernelParams, None, cooperative=True)
