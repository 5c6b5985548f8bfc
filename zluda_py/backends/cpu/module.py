"""Modules on the CPU backend: PTX compiled for the host by the `ptx` package (a thin adapter; the module
work refines it)."""

from __future__ import annotations

from zluda_py.backends.base import BackendFunction, BackendModule, FunctionInfo, KernelParam
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_NOT_SUPPORTED


class CpuFunction(BackendFunction):
    def __init__(self, name: str, kernel):
        self.name = name
        self.kernel = kernel
        params = [KernelParam(offset=o, size=s, align=a) for (o, s, a) in kernel.params]
        size = max((p.offset + p.size for p in params), default=0)
        self.info = FunctionInfo(name=name, params=params, param_size=size)

    def launch_raw(self, grid, block, params_address, shared_bytes):
        return self.kernel.launch_raw(grid, block, params_address, shared_bytes)


class CpuModule(BackendModule):
    def __init__(self, host_module, entry_names):
        self._module = host_module
        self._functions = {n: CpuFunction(n, host_module.kernel(n)) for n in entry_names}

    def functions(self) -> dict:
        return self._functions

    def global_symbol(self, name: str):
        return self._module.globals.get(name)

    def unload(self) -> None:
        self._functions = {}


def load_module(ptx_text: str, name: str = "") -> CpuModule:
    import ptx
    try:
        tree = ptx.parse(ptx_text)
        host_module = ptx.compile(ptx_text, target="host")
    except ptx.PTXUnsupportedError as e:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"module {name}: {e}") from None
    except ptx.PTXError as e:
        raise CudaError(CUDA_ERROR_INVALID_PTX, f"module {name}: {e}") from None
    entries = [f.name for f in tree.entries()]
    return CpuModule(host_module, entries)
