"""cuLibrary* and cuKernel*: context-independent libraries (what cudart loads its fatbins through) and their
kernels, which resolve to a per-context module function when launched or queried."""

from __future__ import annotations

import threading

from zluda_py import cmem, handles
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod
from zluda_py.driver import init
from zluda_py.driver import module as modmod
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE,
                             CUDA_ERROR_NOT_FOUND)


class Library:
    """PTX chosen once from the image; loaded as one module per context that uses it, as CUDA does: a
    context reset (cudaDeviceReset) then finds fresh copies of the module's globals."""

    def __init__(self, ptx_text: str, name: str, max_registers: int = None):
        self.ptx = ptx_text
        self.name = name
        self.max_registers = max_registers   # CU_JIT_MAX_REGISTERS given at load
        self.unloaded = False
        self._backend_modules: dict = {}   # context id -> BackendModule
        self._modules: dict = {}           # context id -> Module
        self._kernels: dict = {}           # name -> Kernel
        self._lock = threading.RLock()
        handles.new(self)

    def module_for(self, ctx) -> modmod.Module:
        if self.unloaded:
            raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"library {self.name} was unloaded")
        with self._lock:
            m = self._modules.get(ctx.id)
            if m is None or m.unloaded:
                bm = self._backend_modules.get(ctx.id)
                if bm is None:
                    bm = self._backend_modules[ctx.id] = modmod.compile_ptx(ctx.device, self.ptx, self.name)
                m = modmod.Module(ctx, ctx.device, bm, self.name, library=self)
                if ctx.id not in self._modules:
                    ctx.on_teardown(self._forget)
                self._modules[ctx.id] = m
            return m

    def _forget(self, ctx) -> None:
        with self._lock:
            m = self._modules.pop(ctx.id, None)
            bm = self._backend_modules.pop(ctx.id, None)
        if m is not None:
            m.unload()
        if bm is not None:
            modmod.release(ctx, bm, self.name)

    def any_backend_module(self):
        """The module of the current context, or of device 0's primary context when none is current
        (libraries are context-independent: cudart loads them before making a context current)."""
        return self.module_for(_context_for_load()).backend_module

    def kernel_names(self) -> list:
        return list(self.any_backend_module().functions())

    def kernel(self, name: str) -> "Kernel":
        with self._lock:
            k = self._kernels.get(name)
            if k is None:
                if name not in self.any_backend_module().functions():
                    raise CudaError(CUDA_ERROR_NOT_FOUND, f"library {self.name} has no kernel named {name!r}")
                k = self._kernels[name] = Kernel(self, name)
            return k

    def unload(self) -> None:
        with self._lock:
            if self.unloaded:
                return
            self.unloaded = True
            for m in self._modules.values():
                m.unload()
            for k in self._kernels.values():
                handles.remove(k.handle)
            for ctx_id, bm in self._backend_modules.items():
                ctx = self._modules[ctx_id].ctx
                ctx.remove_teardown(self._forget)       # a long-lived context keeps no dead library
                modmod.release(ctx, bm, self.name)
            self._modules.clear()
            self._backend_modules.clear()
            self._kernels.clear()
        handles.remove(self.handle)


class Kernel:
    """A library's kernel (CUkernel): per-device attributes, a Function in each context that uses it."""

    def __init__(self, library: Library, name: str):
        self.library = library
        self.name = name
        self.attributes: dict = {}       # (device, attrib) -> value set through cuKernelSetAttribute
        self.cache_config: dict = {}
        self._c_name = None
        handles.new(self)

    def function_for(self, ctx) -> modmod.Function:
        f = self.library.module_for(ctx).function(self.name)
        for (dev, attrib), value in self.attributes.items():
            if dev == ctx.device and f.settable.get(attrib) != value:
                f.set_attribute(attrib, value)
        return f

    def function_on(self, device: int) -> modmod.Function:
        """A function for attribute queries on `device`: the current context's when it is on that device."""
        ctx = ctxmod.current_context_or_none()
        if ctx is None or ctx.destroyed or ctx.device != device:
            ctx = ctxmod.primary_context(device)
        return self.function_for(ctx)

    def c_name(self) -> int:
        if self._c_name is None:
            self._c_name = cmem.ffi.new("char[]", self.name.encode())
        return int(cmem.ffi.cast("uintptr_t", self._c_name))


def get_library(h: int) -> Library:
    init.require_init()
    lib = handles.get(h, Library, CUDA_ERROR_INVALID_HANDLE, "library")
    if lib.unloaded:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"library {h:#x} was unloaded")
    return lib


def get_kernel(h: int) -> Kernel:
    init.require_init()
    k = handles.get(h, Kernel, CUDA_ERROR_INVALID_HANDLE, "kernel")
    if k.library.unloaded:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"kernel {h:#x} belongs to an unloaded library")
    return k


def _context_for_load():
    ctx = ctxmod.current_context_or_none()
    return ctx if ctx is not None and not ctx.destroyed else ctxmod.primary_context(0)


def _load_device() -> int:
    return _context_for_load().device


def _finish_load(library_out: int, ptx_text: str, name: str, max_registers: int = None) -> None:
    lib = Library(ptx_text, name, max_registers)
    try:
        lib.any_backend_module()   # compile now: a bad image fails here, as CUDA's eager load does
    except CudaError:
        handles.remove(lib.handle)
        raise
    cmem.write_ptr(library_out, lib.handle)


# --- cuLibrary* ----------------------------------------------------------------------------------------

@export("cuLibraryLoadData")
def library_load_data(library_out, code, jit_options, jit_values, num_jit, lib_options, lib_values, num_lib):
    init.require_init()
    if not library_out or not code:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "library or code is NULL")
    name = f"library@{code:#x}"
    _finish_load(library_out, modmod.ptx_from_image_address(code, _load_device(), name), name,
                 modmod.jit_max_registers(jit_options, jit_values, num_jit))


@export("cuLibraryLoadFromFile")
def library_load_from_file(library_out, filename, jit_options, jit_values, num_jit, lib_options, lib_values,
                           num_lib):
    init.require_init()
    if not library_out or not filename:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "library or fileName is NULL")
    path = cmem.read_cstring(filename, "fileName")
    _finish_load(library_out, modmod.ptx_from_file(path, _load_device()), path,
                 modmod.jit_max_registers(jit_options, jit_values, num_jit))


@export("cuLibraryUnload")
def library_unload(hlib):
    get_library(hlib).unload()


@export("cuLibraryGetKernel")
def library_get_kernel(kernel_out, hlib, name):
    lib = get_library(hlib)
    if not kernel_out or not name:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pKernel or name is NULL")
    cmem.write_ptr(kernel_out, lib.kernel(cmem.read_cstring(name, "name")).handle)


@export("cuLibraryGetModule")
def library_get_module(module_out, hlib):
    lib = get_library(hlib)
    if not module_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pMod is NULL")
    cmem.write_ptr(module_out, lib.module_for(ctxmod.current_context()).handle)


def _global(dptr_out, bytes_out, hlib, name):
    lib = get_library(hlib)
    if not name:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "name is NULL")
    # Libraries are context-independent: cudart asks for its __managed__ variables at registration,
    # before any context is current; the device's primary context then stands in.
    addr, size = lib.module_for(_context_for_load()).global_symbol(cmem.read_cstring(name, "name"))
    if dptr_out:
        cmem.write_ptr(dptr_out, addr)
    if bytes_out:
        cmem.write_u64(bytes_out, size)


@export("cuLibraryGetGlobal")
def library_get_global(dptr_out, bytes_out, hlib, name):
    _global(dptr_out, bytes_out, hlib, name)


@export("cuLibraryGetManaged")
def library_get_managed(dptr_out, bytes_out, hlib, name):
    # On a device whose memory is host memory every global is already host-accessible, as managed is.
    _global(dptr_out, bytes_out, hlib, name)


@export("cuLibraryGetKernelCount")
def library_get_kernel_count(count_out, hlib):
    lib = get_library(hlib)
    cmem.write_u32(count_out, len(lib.kernel_names()), "count")


@export("cuLibraryEnumerateKernels")
def library_enumerate_kernels(kernels_out, num, hlib):
    lib = get_library(hlib)
    names = lib.kernel_names()
    if not kernels_out or num < len(names):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"room for {num} kernels, library has {len(names)}")
    for i, n in enumerate(names):
        cmem.write_ptr(kernels_out + 8 * i, lib.kernel(n).handle)


# --- cuKernel* -----------------------------------------------------------------------------------------

@export("cuKernelGetFunction")
def kernel_get_function(func_out, hkernel):
    k = get_kernel(hkernel)
    if not func_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pFunc is NULL")
    cmem.write_ptr(func_out, k.function_for(ctxmod.current_context()).handle)


@export("cuKernelGetLibrary")
def kernel_get_library(lib_out, hkernel):
    k = get_kernel(hkernel)
    cmem.write_ptr(lib_out, k.library.handle, "pLib")


@export("cuKernelGetAttribute")
def kernel_get_attribute(value_out, attrib, hkernel, dev):
    k = get_kernel(hkernel)
    if not value_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pi is NULL")
    cmem.write_i32(value_out, k.function_on(dev).get_attribute(attrib))


@export("cuKernelSetAttribute")
def kernel_set_attribute(attrib, value, hkernel, dev):
    k = get_kernel(hkernel)
    k.function_on(dev).set_attribute(attrib, value)   # validates; later contexts get it too
    k.attributes[(dev, attrib)] = value


@export("cuKernelSetCacheConfig")
def kernel_set_cache_config(hkernel, config, dev):
    k = get_kernel(hkernel)
    if config not in (0, 1, 2, 3):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown cache config {config}")
    k.cache_config[dev] = config


@export("cuKernelGetName")
def kernel_get_name(name_out, hkernel):
    k = get_kernel(hkernel)
    cmem.write_ptr(name_out, k.c_name(), "name")


@export("cuKernelGetParamCount")
def kernel_get_param_count(hkernel, count_out):
    k = get_kernel(hkernel)
    cmem.write_u64(count_out, len(k.function_on(_load_device()).info.params), "paramCount")


@export("cuKernelGetParamInfo")
def kernel_get_param_info(hkernel, index, offset_out, size_out):
    k = get_kernel(hkernel)
    modmod.param_info(k.function_on(_load_device()), index, offset_out, size_out)
