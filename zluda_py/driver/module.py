"""cuModule* and cuFunc*: modules loaded from PTX / fatbins / ELF images into a context, and their functions
(the objects a launch runs) with CUDA's function attributes."""

from __future__ import annotations

import os
import threading
import time

from zluda_py import cmem, fastpath, fatbin, handles, log, profile
from zluda_py.dispatch import export, fatal
from zluda_py.driver import context as ctxmod
from zluda_py.driver import init, jit
from zluda_py.driver.allocations import INDEX, Allocation
from zluda_py.driver.device import device_props
from zluda_py.errors import (CudaError, CUDA_ERROR_FILE_NOT_FOUND, CUDA_ERROR_INVALID_HANDLE,
                             CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NOT_FOUND,
                             CUDA_ERROR_OUT_OF_MEMORY)

# CUfunction_attribute
ATTR_MAX_THREADS_PER_BLOCK = 0
ATTR_SHARED_SIZE_BYTES = 1
ATTR_CONST_SIZE_BYTES = 2
ATTR_LOCAL_SIZE_BYTES = 3
ATTR_NUM_REGS = 4
ATTR_PTX_VERSION = 5
ATTR_BINARY_VERSION = 6
ATTR_CACHE_MODE_CA = 7
ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT = 9
ATTR_CLUSTER_SIZE_MUST_BE_SET = 10
ATTR_REQUIRED_CLUSTER_WIDTH = 11
ATTR_REQUIRED_CLUSTER_HEIGHT = 12
ATTR_REQUIRED_CLUSTER_DEPTH = 13
ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
ATTR_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15
ATTR_DEVICE_NODE_UPDATE_SUPPORTED = 16     # CUDA 13.5's, as the declarations' release
ATTR_SHARED_MEMORY_MODE = 17               # a CUsharedMemoryMode, 0 (DEFAULT) to 4 (PREFER_OVERSIZED)
_SHARED_MEMORY_MODES = range(5)
_SETTABLE = {ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT,
             ATTR_REQUIRED_CLUSTER_WIDTH, ATTR_REQUIRED_CLUSTER_HEIGHT, ATTR_REQUIRED_CLUSTER_DEPTH,
             ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, ATTR_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
             ATTR_SHARED_MEMORY_MODE}

ATTR_DEV_MAX_SHARED_PER_BLOCK = 8
ATTR_DEV_MAX_SHARED_PER_BLOCK_OPTIN = 97

_lock = threading.Lock()


class Function:
    """A kernel of a loaded module (CUfunction)."""

    def __init__(self, module: "Module", name: str, backend_fn):
        self.module = module
        self.name = name
        self.backend_fn = backend_fn
        self.cache_config = 0
        self.settable = {ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES: 0, ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT: -1,
                         ATTR_REQUIRED_CLUSTER_WIDTH: 0, ATTR_REQUIRED_CLUSTER_HEIGHT: 0,
                         ATTR_REQUIRED_CLUSTER_DEPTH: 0, ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: 0,
                         ATTR_CLUSTER_SCHEDULING_POLICY_PREFERENCE: 0, ATTR_SHARED_MEMORY_MODE: 0}
        self._c_name = None
        self._limits = None
        self._cluster = None
        handles.new(self)

    def cluster_requirement(self):
        """(.reqnctapercluster dims or None, .explicitcluster) of the kernel, from its PTX (__cluster_dims__
        compiles to .reqnctapercluster); (None, False) when the text is not at hand."""
        c = self._cluster
        if c is None:
            c = self._cluster = _cluster_directives(self.module.ptx_text, self.name)
        return c

    @property
    def info(self):
        # a lazy module's kernel is compiled here, at its first launch or query (CudaError if it cannot be)
        return self.backend_fn.info

    @property
    def device(self) -> int:
        return self.module.device

    def c_name(self) -> int:
        """Address of a NUL-terminated copy of the name that lives as long as the function."""
        if self._c_name is None:
            self._c_name = cmem.ffi.new("char[]", self.name.encode())
        return int(cmem.ffi.cast("uintptr_t", self._c_name))

    def max_threads(self) -> int:
        limit = min(self.info.max_threads_per_block, device_props(self.device).attributes.get(1, 1024))
        for t in (self.info.maxntid, self.info.reqntid):
            if t:
                n = 1
                for d in t:
                    n *= max(d, 1)
                limit = min(limit, n)
        return limit

    def launch_limits(self) -> tuple:
        """(max grid dims, max block dims, max threads per block, max dynamic shared bytes), cached."""
        lim = self._limits
        if lim is None:
            attrs = device_props(self.device).attributes
            grid = tuple(attrs.get(a, d) for a, d in ((5, (1 << 31) - 1), (6, 65535), (7, 65535)))
            block = tuple(attrs.get(a, d) for a, d in ((2, 1024), (3, 1024), (4, 64)))
            # The module-wide static size bounds the kernel's own from above, so this limit is safe without
            # re-reading the PTX; a launch asking for more checks the exact limit (launch.py) first.
            lim = self._limits = (grid, block, self.max_threads(), self.dynamic_shared_limit(exact=False))
        return lim

    def dynamic_shared_limit(self, exact: bool = True) -> int:
        """Largest dynamic shared memory a launch may ask for (exact=False: a lower bound that needs no
        second parse of the module)."""
        attrs = device_props(self.device).attributes
        default = attrs.get(ATTR_DEV_MAX_SHARED_PER_BLOCK, 48 * 1024)
        opted = self.settable[ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES]
        static = self.static_shared() if exact else self.info.static_shared_bytes
        return max(default - static, opted)

    def static_shared(self) -> int:
        """Static shared bytes of the variables this kernel uses, as ptxas counts them: the backend's
        number covers every static variable of the module (their common area is laid out once)."""
        total = self.info.static_shared_bytes
        if not total:
            return 0            # no static shared at all: no need to parse the module again
        r = self.module.kernel_resources(self.name)
        return min(r.shared_bytes, total) if r is not None else total

    def num_regs(self) -> int:
        """Registers per thread ptxas would give the kernel (estimate), within a JIT -maxrregcount."""
        r = self.module.kernel_resources(self.name)
        if r is None:
            return self.info.num_regs
        # a JIT option (-maxrregcount) bounds what the kernel's own .maxnreg does not
        cap = self.module.max_registers if r.maxnreg is None else None
        return min(r.num_regs, cap) if cap else r.num_regs

    def get_attribute(self, attrib: int) -> int:
        info = self.info
        if attrib == ATTR_MAX_THREADS_PER_BLOCK:
            return self.max_threads()
        if attrib == ATTR_SHARED_SIZE_BYTES:
            return self.static_shared()
        if attrib == ATTR_CONST_SIZE_BYTES:
            r = self.module.kernel_resources(self.name)
            return r.const_bytes if r is not None else info.const_bytes
        if attrib == ATTR_LOCAL_SIZE_BYTES:
            return info.local_bytes
        if attrib == ATTR_NUM_REGS:
            return self.num_regs()
        if attrib == ATTR_PTX_VERSION:
            r = self.module.kernel_resources(self.name)
            if r is not None and r.target_sm:
                return r.target_sm
        if attrib in (ATTR_PTX_VERSION, ATTR_BINARY_VERSION):
            p = device_props(self.device)
            return p.cc_major * 10 + p.cc_minor
        if attrib == ATTR_CACHE_MODE_CA:
            return 0
        if attrib == ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            return self.dynamic_shared_limit()
        if attrib in (ATTR_CLUSTER_SIZE_MUST_BE_SET, ATTR_REQUIRED_CLUSTER_WIDTH, ATTR_REQUIRED_CLUSTER_HEIGHT,
                      ATTR_REQUIRED_CLUSTER_DEPTH):
            required = self.cluster_requirement()[0]
            if attrib == ATTR_CLUSTER_SIZE_MUST_BE_SET:
                return int(required is not None)
            if required is not None:
                return required[attrib - ATTR_REQUIRED_CLUSTER_WIDTH]
        if attrib == ATTR_DEVICE_NODE_UPDATE_SUPPORTED:
            return 0        # no device-side graph node updates here
        if attrib in self.settable:
            return self.settable[attrib]
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown function attribute {attrib}")

    def set_attribute(self, attrib: int, value: int) -> None:
        if attrib not in _SETTABLE:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"function attribute {attrib} is read-only or unknown")
        if attrib == ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            optin = device_props(self.device).attributes.get(ATTR_DEV_MAX_SHARED_PER_BLOCK_OPTIN, 48 * 1024)
            static = self.static_shared()
            if value < 0 or value + static > optin:
                raise CudaError(CUDA_ERROR_INVALID_VALUE,
                                f"{self.name}: dynamic shared memory {value} + static "
                                f"{static} exceeds the opt-in maximum {optin}")
        if attrib == ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT and not (-1 <= value <= 100):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"shared memory carveout {value} is not -1..100")
        if attrib == ATTR_SHARED_MEMORY_MODE and value not in _SHARED_MEMORY_MODES:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"shared memory mode {value} is not a CUsharedMemoryMode (0..4)")
        if attrib == ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
            value = int(value != 0)     # NVIDIA's reads a set 2 back as 1
        self.settable[attrib] = value
        self._limits = None
        fastpath.forget_functions()     # the C launch path checked launches against the old limits


class Module:
    """A module image compiled for one device and owned by a context (CUmodule)."""

    def __init__(self, ctx, device: int, backend_module, name: str, library=None, ptx_text: str = None,
                 max_registers: int = None):
        self.ctx = ctx
        self.device = device
        self.backend_module = backend_module
        self.name = name
        self.library = library
        self.ptx_text = ptx_text if ptx_text is not None else getattr(library, "ptx", None)
        self.max_registers = max_registers if max_registers is not None else \
            getattr(library, "max_registers", None)
        self._resources = None      # entry name -> ptx.resources.KernelResources, on first query
        self.unloaded = False
        self.functions: dict = {}
        self._fn_lock = threading.Lock()
        self._allocations: list = []   # globals registered as device memory (copies check against it)
        handles.new(self)

    def function(self, name: str) -> Function:
        f = self.functions.get(name)
        if f is not None:
            return f
        refused = getattr(self.backend_module, "refused_kernels", None)
        if refused and name in refused:
            raise refused[name]
        with self._fn_lock:
            f = self.functions.get(name)
            if f is None:
                backend_fn = self.backend_module.functions().get(name)
                if backend_fn is None:
                    raise CudaError(CUDA_ERROR_NOT_FOUND, f"module {self.name} has no kernel named {name!r}")
                if not _lazy_loading():
                    backend_fn.info     # EAGER: a kernel that could not be compiled is refused here
                f = self.functions[name] = Function(self, name, backend_fn)
        return f

    def kernel_names(self) -> list:
        return list(self.backend_module.functions())

    def kernel_resources(self, name: str):
        """Registers, constant bytes and PTX target of a kernel, from its PTX (parsed again on the first
        attribute query only: launches never need them); None when the text is not at hand."""
        res = self._resources
        if res is None:
            with self._fn_lock:
                res = self._resources
                if res is None:
                    res = kept_resources(self.backend_module)
                    if res is None:
                        res = _module_resources(self.ptx_text, self.name)
                    self._resources = res
        return res.get(name)

    def global_symbol(self, name: str) -> tuple:
        g = self.backend_module.global_symbol(name)
        if g is None:
            raise CudaError(CUDA_ERROR_NOT_FOUND, f"module {self.name} has no global named {name!r}")
        addr, size = g
        # A global is device memory the application may copy to and from (cudaMemcpyToSymbol does):
        # the memory checks must know it, as they know cuMemAlloc's ranges.
        if size and INDEX.find(addr) is None:
            with self._fn_lock:
                if INDEX.find(addr) is None:
                    a = Allocation(addr, size, "module", self.ctx, self.device)
                    INDEX.add(a)
                    self._allocations.append(a)
        return g

    def unload(self) -> None:
        if self.unloaded:
            return
        self.unloaded = True
        for hook in _unload_hooks:
            hook(self)
        fastpath.forget_functions()     # its functions' handles are dead
        for a in self._allocations:
            INDEX.remove(a)
        self._allocations = []
        for f in self.functions.values():
            handles.remove(f.handle)
        handles.remove(self.handle)
        self._resources = None
        if self.library is None:
            release(self.ctx, self.backend_module, self.name)
        self.backend_module = _UNLOADED


_unload_hooks: list = []
_load_checks: list = []


def on_load(fn):
    """Run fn(ptx_text, name, backend_module) once a module is compiled: a CudaError it raises refuses the
    load; it may name kernels cuModuleGetFunction refuses (backend_module.refused_kernels: name -> CudaError)."""
    _load_checks.append(fn)
    return fn



def on_unload(fn):
    """Run fn(module) as a module is unloaded, before its code and globals go (texref.py's references)."""
    _unload_hooks.append(fn)
    return fn


class _Unloaded:
    """What an unloaded module's backend module is: its code may be gone, nothing may reach it."""

    def functions(self) -> dict:
        return {}

    def global_symbol(self, name):
        return None

    def kernel_resources(self):
        return {}


_UNLOADED = _Unloaded()
_retired: list = []         # (context, backend module, name) unloaded while the context had work queued
_retired_lock = threading.Lock()


def release(ctx, backend_module, name: str) -> None:
    """Free a backend module's code and data once no stream of ctx may still run it: now when the
    context is idle, else at a later load, unload or context teardown that finds it idle."""
    with _retired_lock:
        _retired.append((ctx, backend_module, name))
    reap()


def reap() -> None:
    if not _retired:
        return
    with _retired_lock:
        done = [r for r in _retired if r[0].idle()]
        _retired[:] = [r for r in _retired if r not in done]
    for _, bm, name in done:
        try:
            bm.unload()
        except Exception as e:  # noqa: BLE001 - unloading must finish
            log.error(f"module {name}: unload failed: {e}")


def kept_resources(backend_module):
    """name -> ptx.resources' estimates (num_regs, maxnreg, const_bytes, target_sm, shared_bytes) the
    backend kept from the compile (a cache hit has no parsed module to estimate from), or None."""
    kept = getattr(backend_module, "kernel_resources", None)
    return kept() if kept is not None else None


def _cluster_directives(text, name):
    """(.reqnctapercluster as 3 ints or None, whether .explicitcluster or .reqnctapercluster is given) of the
    entry `name` in PTX `text`: its directives sit between the parameter list and the body."""
    if not text or (".reqnctapercluster" not in text and ".explicitcluster" not in text):
        return None, False
    import re
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*(\([^)]*\))?([^{;]*)\{", text)
    if not m:
        return None, False
    tail = m.group(2)
    r = re.search(r"\.reqnctapercluster\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", tail)
    dims = tuple(int(d) if d else 1 for d in r.groups()) if r else None
    return dims, dims is not None or ".explicitcluster" in tail


def _module_resources(text, name) -> dict:
    if not text:
        return {}
    try:
        import ptx
        from ptx.resources import module_resources
        return module_resources(ptx.parse(text, check=False))   # it compiled: checked already
    except Exception as e:  # noqa: BLE001 - the module compiled; attributes fall back to the backend's
        log.error(f"module {name}: no resource estimate ({type(e).__name__}: {e})")
        return {}


def jit_max_registers(options: int, values: int, count: int):
    """The CU_JIT_MAX_REGISTERS value among JIT options (its value is the pointer-sized slot itself)."""
    return jit.Options(options, values, count).max_registers()


# --- loading -----------------------------------------------------------------------------------------

def device_sm(device: int) -> int:
    p = device_props(device)
    return p.cc_major * 10 + p.cc_minor


def compile_ptx(device: int, ptx_text: str, name: str):
    """The backend module for PTX text (the backend compiles it or takes it from its cache)."""
    backend = init.require_init()
    t0 = time.perf_counter_ns()
    m = backend.module_load(device, ptx_text, name)
    try:
        for check in _load_checks:      # after the compile: a PTX error is answered first, as NVIDIA's JIT does
            check(ptx_text, name, m)
    except CudaError:
        m.unload()
        raise
    limit = device_props(device).attributes.get(ATTR_DEV_MAX_SHARED_PER_BLOCK_OPTIN, 48 * 1024)
    try:
        jit.check_static_shared(m, ptx_text, limit, name)
    except CudaError:
        m.unload()          # nothing launched it
        raise
    if profile.ON:
        hit = getattr(m, "cache_hit", None)
        if hit is None:     # the CPU backend's module wraps ptx.host's, which knows
            hit = getattr(getattr(m, "_module", None), "cache_hit", False)
        profile.module_compiled(name, time.perf_counter_ns() - t0, bool(hit))
    return m


def _cc(sm: int) -> str:
    return f"{sm // 10}.{sm % 10}"


def _no_binary(image, sm: int, name: str) -> str:
    """What to do about an image with no PTX this device can compile: the line a user sees once."""
    ptx = sorted({e.sm for e in image.entries or [] if e.kind == fatbin.KIND_PTX})
    if ptx:
        return (f"{name}: its PTX targets {', '.join(f'sm_{a}' for a in ptx)}, newer than the device's "
                f"sm_{sm}: set ZLUDA_CC={_cc(ptx[0])} or rebuild with -gencode arch=compute_{sm},code=compute_{sm}")
    sass = sorted({e.sm for e in image.entries or []} | set(image.cubin_sm or ()))
    found = f", only {image.describe()} (machine code for NVIDIA GPUs)" if sass else ""
    arch = sass[0] if sass else sm
    fix = f"rebuild with -gencode arch=compute_{arch},code=compute_{arch}"
    if arch > sm:
        fix += f" and set ZLUDA_CC={_cc(arch)}"
    return f"{name}: the program has no PTX{found}; zluda-py compiles PTX: {fix}"


def select_ptx(image, device: int, name: str) -> str:
    """The PTX of `image` for the device. Nothing usable is a problem no retry gets past (a SASS-only
    build, PTX for a newer GPU): its line says how to rebuild and is written once even without ZLUDA_LOG."""
    sm = device_sm(device)
    try:
        return fatbin.select_ptx(image, sm, name)
    except CudaError as e:
        if e.code != CUDA_ERROR_NO_BINARY_FOR_GPU:
            raise
        raise fatal(CudaError(e.code, _no_binary(image, sm, name)), "no-binary") from None


def ptx_from_image_address(image: int, device: int, name: str) -> str:
    return select_ptx(fatbin.read_image(image), device, name)


def ptx_from_file(path: str, device: int) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CudaError(CUDA_ERROR_FILE_NOT_FOUND, f"{path}: no such file") from None
    except OSError as e:
        raise CudaError(CUDA_ERROR_FILE_NOT_FOUND, f"{path}: {e.strerror}") from None
    return select_ptx(fatbin.parse_image(data), device, path)


def _image_name(image: int) -> str:
    return f"image@{image:#x}"


def _track(ctx, module: Module) -> None:
    mods = getattr(ctx, "modules", None)
    if mods is None:
        with _lock:
            mods = getattr(ctx, "modules", None)
            if mods is None:
                mods = ctx.modules = set()
                # A per-context hook runs before the driver-wide ones (memory's among them), so the
                # modules' globals leave the allocation index before the context's memory is freed.
                ctx.on_teardown(_unload_context_modules)
    mods.add(module)


def _unload_context_modules(ctx) -> None:
    for m in list(getattr(ctx, "modules", None) or ()):
        m.unload()
    ctx.modules = None
    reap()          # the context was synchronized: what waited on its streams goes now


def load_into_current(ptx_text: str, name: str, ctx=None, max_registers=None) -> Module:
    ctx = ctx or ctxmod.current_context()
    reap()
    backend_module = compile_ptx(ctx.device, ptx_text, name)
    module = Module(ctx, ctx.device, backend_module, name, ptx_text=ptx_text, max_registers=max_registers)
    _track(ctx, module)
    return module


def get_module(h: int) -> Module:
    init.require_init()
    m = handles.get(h, Module, CUDA_ERROR_INVALID_HANDLE, "module")
    if m.unloaded:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"module {h:#x} was unloaded")
    return m


def get_function(h: int) -> Function:
    """The Function behind a CUfunction, or behind a CUkernel for the current context (cudart launches
    kernels by their CUkernel handle)."""
    init.require_init()
    obj = handles.lookup(h)
    if isinstance(obj, Function):
        if obj.module.unloaded:
            raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"function {h:#x} belongs to an unloaded module")
        return obj
    from zluda_py.driver.library import Kernel
    if isinstance(obj, Kernel):
        return obj.function_for(ctxmod.current_context())
    raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"{h:#x} is not a valid function or kernel")


# --- cuModule* -----------------------------------------------------------------------------------------

@export("cuModuleLoad")
def module_load(module_out, fname):
    init.require_init()
    if not module_out or not fname:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "module or fname is NULL")
    ctx = ctxmod.current_context()
    path = cmem.read_cstring(fname, "fname")
    if os.path.isdir(path):     # NVIDIA's driver answers a directory so (tests/data/nvidia_error_answers.json)
        raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"{path} is a directory")
    module = load_into_current(ptx_from_file(path, ctx.device), path, ctx)
    cmem.write_ptr(module_out, module.handle)


def _load_data(module_out, image, name=None, max_registers=None):
    init.require_init()
    if not module_out or not image:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "module or image is NULL")
    ctx = ctxmod.current_context()
    name = name or _image_name(image)
    module = load_into_current(ptx_from_image_address(image, ctx.device, name), name, ctx, max_registers)
    cmem.write_ptr(module_out, module.handle)
    return module


@export("cuModuleLoadData")
def module_load_data(module_out, image):
    _load_data(module_out, image)


@export("cuModuleLoadDataEx")
def module_load_data_ex(module_out, image, num_options, options, option_values):
    opts = jit.Options(options, option_values, num_options).check()
    try:
        module = _load_data(module_out, image, max_registers=opts.max_registers())
    except CudaError as e:
        opts.write_logs(error=jit.error_log(e))
        raise
    opts.write_logs(info=jit.info_log(module, device_sm(module.device)) if opts.verbose else "")


@export("cuModuleLoadFatBinary")
def module_load_fat_binary(module_out, fat_cubin):
    _load_data(module_out, fat_cubin)


@export("cuModuleUnload")
def module_unload(hmod):
    m = get_module(hmod)
    if m.library is not None:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "a library's module is unloaded with cuLibraryUnload")
    m.unload()
    mods = getattr(m.ctx, "modules", None)
    if mods is not None:
        mods.discard(m)


@export("cuModuleGetFunction")
def module_get_function(hfunc_out, hmod, name):
    if not hfunc_out or not name:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "hfunc or name is NULL")
    m = get_module(hmod)
    fname = cmem.read_cstring(name, "name")
    if not fname:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "name is empty")
    cmem.write_ptr(hfunc_out, m.function(fname).handle)


@export("cuModuleGetGlobal", "cuModuleGetGlobal_v2")
def module_get_global(dptr_out, bytes_out, hmod, name):
    if not name:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "name is NULL")
    m = get_module(hmod)
    addr, size = m.global_symbol(cmem.read_cstring(name, "name"))
    if dptr_out:
        cmem.write_ptr(dptr_out, addr)
    if bytes_out:
        cmem.write_u64(bytes_out, size)


@export("cuModuleGetFunctionCount")
def module_get_function_count(count_out, hmod):
    m = get_module(hmod)
    cmem.write_u32(count_out, len(m.kernel_names()), "count")


@export("cuModuleEnumerateFunctions")
def module_enumerate_functions(functions_out, num, hmod):
    m = get_module(hmod)
    names = m.kernel_names()
    if not functions_out or num < len(names):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"room for {num} functions, module has {len(names)}")
    for i, n in enumerate(names):
        cmem.write_ptr(functions_out + 8 * i, m.function(n).handle)


@export("cuModuleGetLoadingMode")
def module_get_loading_mode(mode_out):
    # CU_MODULE_LAZY_LOADING, CUDA's default since 12.2 (CUDA_MODULE_LOADING=EAGER asks for the other):
    # cudart then loads each image just before its first launch, so unused kernels are never compiled.
    cmem.write_u32(mode_out, 2 if _lazy_loading() else 1, "mode")


def _lazy_loading() -> bool:
    return os.environ.get("CUDA_MODULE_LOADING", "").strip().upper() != "EAGER"


# --- cuFunc* -------------------------------------------------------------------------------------------

@export("cuFuncGetAttribute")
def func_get_attribute(value_out, attrib, hfunc):
    f = get_function(hfunc)
    if not value_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pi is NULL")
    cmem.write_i32(value_out, f.get_attribute(attrib))


@export("cuFuncSetAttribute")
def func_set_attribute(hfunc, attrib, value):
    get_function(hfunc).set_attribute(attrib, value)


@export("cuFuncSetCacheConfig")
def func_set_cache_config(hfunc, config):
    f = get_function(hfunc)
    if config not in (0, 1, 2, 3):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown cache config {config}")
    f.cache_config = config


@export("cuFuncSetSharedMemConfig")
def func_set_shared_mem_config(hfunc, config):
    get_function(hfunc)
    if config not in (0, 1, 2):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown shared memory config {config}")


@export("cuFuncGetName")
def func_get_name(name_out, hfunc):
    f = get_function(hfunc)
    cmem.write_ptr(name_out, f.c_name(), "name")


@export("cuFuncGetParamInfo")
def func_get_param_info(hfunc, index, offset_out, size_out):
    f = get_function(hfunc)
    param_info(f, index, offset_out, size_out)


@export("cuFuncGetParamCount")
def func_get_param_count(hfunc, count_out):
    cmem.write_u64(count_out, len(get_function(hfunc).info.params), "paramCount")


def param_info(f: Function, index: int, offset_out: int, size_out: int) -> None:
    params = f.info.params
    if not 0 <= index < len(params):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{f.name} has {len(params)} parameters, asked for #{index}")
    if offset_out:
        cmem.write_u64(offset_out, params[index].offset)
    if size_out:
        cmem.write_u64(size_out, params[index].size)


@export("cuFuncGetModule")
def func_get_module(hmod_out, hfunc):
    f = get_function(hfunc)
    cmem.write_ptr(hmod_out, f.module.handle, "hmod")


@export("cuFuncIsLoaded")
def func_is_loaded(state_out, hfunc):
    f = get_function(hfunc)
    # CU_FUNCTION_LOADING_STATE_LOADED (1), or UNLOADED (0) for a lazy kernel not compiled yet
    cmem.write_u32(state_out, 1 if getattr(f.backend_fn, "loaded", True) else 0, "state")


@export("cuFuncLoad")
def func_load(hfunc):
    get_function(hfunc).info
