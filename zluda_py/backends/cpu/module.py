"""Modules on the CPU backend: PTX compiled for the host by the `ptx` package, with its on-disk kernel cache
(ZLUDA_CACHE_DIR, ZLUDA_CACHE_MAX_MB, ZLUDA_JIT_CACHE=0 disables), IR dumps (ZLUDA_DUMP_DIR), FMA
contraction (ZLUDA_FMA_OPT=1) and checked accesses (ZLUDA_MEMCHECK=1)."""

from __future__ import annotations

import os
import threading

from zluda_py import log
from zluda_py.backends.base import BackendFunction, BackendModule, FunctionInfo, KernelParam
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_UNKNOWN,
                             CUDA_ERROR_UNSUPPORTED_PTX_VERSION)


class CpuFunction(BackendFunction):
    """A kernel; of a lazy module (CUDA_MODULE_LOADING=LAZY) it is compiled on first use of `info` or
    `native` (a launch, an attribute query), a kernel that cannot be raising CUDA_ERROR_NOT_SUPPORTED."""

    def __init__(self, name: str, kernel):
        self.name = name
        self.kernel = kernel
        self._info = self._native = None
        self._block = None          # the block of the launch about to compile it (expect_block)
        self._spec = None           # the block its code was compiled for (None: any)
        self._generic_native = None
        # host threads may launch it for the first time together: one compiles, the others wait for its result
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """False for a lazy module's kernel not compiled yet (cuFuncIsLoaded)."""
        return getattr(self.kernel, "loaded", True)

    @property
    def info(self):
        if self._info is None:
            self._materialize()
        return self._info

    @property
    def native(self):
        if self._info is None:
            self._materialize()
        return self._native

    @property
    def spec_block(self):
        """The block its code was compiled for, None for any (after `native` or `info`)."""
        return self._spec

    def expect_block(self, block) -> None:
        """The block of the launch about to be made: a lazy kernel not compiled yet is compiled for it (ptx's
        LazyKernels.load), unless something else asks for it first."""
        if self._info is None:
            self._block = tuple(block)

    def native_for(self, block):
        """`native` for a launch of `block`: the kernel's code for any block where its own was compiled for
        another (compiled at the first such launch; CudaError if it cannot be)."""
        native = self.native
        if self._spec is None or tuple(block) == self._spec:
            return native
        got = self._generic_native
        if got is None:
            block = tuple(block)
            with self._lock:
                got = self._generic_native
                if got is None:
                    k = _compiled(self.name, lambda: self.kernel.for_block(block), f" for block {block}")
                    got = self._generic_native = (k.address, k.shared_reserve_bytes, k.frame_bytes, k.param_size)
        return got

    def _materialize(self):
        with self._lock:
            if self._info is None:
                self._materialize_locked()

    def _materialize_locked(self):
        kernel = self.kernel
        if getattr(kernel, "loaded", True) is False:
            _compiled(self.name, lambda: _first_load(kernel, self._block))
        name = self.name
        params = [KernelParam(offset=o, size=s, align=a) for (o, s, a) in kernel.params]
        size = getattr(kernel, "param_size", None)
        if size is None:
            size = max((p.offset + p.size for p in params), default=0)
        info = FunctionInfo(name=name, params=params, param_size=size,
                                 static_shared_bytes=getattr(kernel, "static_shared_bytes", 0),
                                 local_bytes=getattr(kernel, "local_bytes", 0),
                                 reqntid=getattr(kernel, "reqntid", None), maxntid=getattr(kernel, "maxntid", None))
        # What the native launch queue needs to run it without Python: (block function, static shared
        # bytes, frame bytes, parameter bytes); None for a kernel that only has launch_raw.
        address = getattr(kernel, "address", None)
        self._native = (address, getattr(kernel, "shared_reserve_bytes", kernel.static_shared_bytes),
                       kernel.frame_bytes, kernel.param_size) \
            if address and hasattr(kernel, "frame_bytes") else None
        self._spec = getattr(kernel, "spec_block", None)
        self._info = info

    def launch_raw(self, grid, block, params_address, shared_bytes, cooperative=False):
        return self.kernel.launch_raw(grid, block, params_address, shared_bytes, cooperative=cooperative)


def _first_load(kernel, block):
    if block is not None:
        kernel.prepare(block)   # compiles it for that block where it may be (ptx.host_lazy.SPECIALIZE)
    kernel.address      # compiles it (ptx.host.LazyKernel)
    return kernel


def _compiled(name, build, what=""):
    """build()'s compiled lazy kernel; a PTXError is CUDA's error for it, with a log line, and the compile (or
    cache hit) goes to the profile."""
    import ptx
    from zluda_py import profile
    try:
        kernel = build()
    except ptx.PTXError as e:
        err = ptx_error(e, name)
        log.error(f"kernel {name}: cannot be compiled{what}: {e}")
        raise err from None
    if profile.ON:
        profile.kernel_compiled(name, kernel.compile_ns, kernel.compile_hit)
    return kernel


class _LazyResources:
    """A lazy module's resource estimates: a kernel's are known once it is compiled, which asking does."""

    def __init__(self, functions, resources):
        self.functions, self.resources = functions, resources

    def get(self, name):
        f = self.functions.get(name)
        if f is None:
            return None
        try:
            f.info
        except CudaError:
            return None
        return self.resources.get(name)


class CpuModule(BackendModule):
    def __init__(self, host_module):
        self._module = host_module
        self._functions = {n: CpuFunction(n, host_module.kernel(n)) for n in host_module.kernels}

    def functions(self) -> dict:
        return self._functions

    def global_symbol(self, name: str):
        return self._module.globals.get(name)

    def kernel_resources(self):
        if getattr(self._module, "lazy", False):
            return _LazyResources(self._functions, self._module.resources)
        return self._module.resources or None

    def unload(self) -> None:
        # the driver calls this once no stream may still run the code (driver/module.py, release)
        self._functions = {}
        self._module.close()


def compile_options() -> dict:
    """ptx.compile options from the environment, read at each load so a test can change them."""
    opts = {}
    if os.environ.get("ZLUDA_JIT_CACHE", "1") != "0":
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        opts["cache_dir"] = os.environ.get("ZLUDA_CACHE_DIR") or os.path.join(base, "zluda-py", "kernels")
    if os.environ.get("ZLUDA_DUMP_DIR"):
        opts["dump_dir"] = os.environ["ZLUDA_DUMP_DIR"]
    if os.environ.get("ZLUDA_FMA_OPT", "0") == "1":
        opts["fma_contract"] = True
    if os.environ.get("ZLUDA_MEMCHECK", "0") == "1":
        opts["memcheck"] = True
    if os.environ.get("ZLUDA_CACHE_MAX_MB"):
        try:
            opts["cache_max_mb"] = max(0, int(os.environ["ZLUDA_CACHE_MAX_MB"]))
        except ValueError:
            log.error(f"ZLUDA_CACHE_MAX_MB={os.environ['ZLUDA_CACHE_MAX_MB']!r} is not a number of MB: "
                      "the default (1024) applies")
    return opts


def lazy_loading() -> bool:
    """CUDA_MODULE_LOADING: LAZY (the default, as since CUDA 12.2) or EAGER."""
    return os.environ.get("CUDA_MODULE_LOADING", "").strip().upper() != "EAGER"


def compile_module(ptx_text: str, target: str, name: str = ""):
    """ptx.compile with the options the environment asks for (every backend), its errors turned into the
    CUresults a module load returns."""
    import ptx
    opts = compile_options()
    if target == "host":
        opts["lazy"] = lazy_loading()
        opts["isolate"] = True      # EAGER: one kernel's gap fails its cuModuleGetFunction, not the load
    try:
        return ptx.compile(ptx_text, target=target, **opts)
    except ptx.PTXError as e:
        raise ptx_error(e, name) from None
    except OSError as e:
        raise CudaError(CUDA_ERROR_UNKNOWN, f"module {name}: compiling failed: {e}") from None


def ptx_error(e, name: str) -> CudaError:
    """The CUresult for a PTX the compiler refused, with ptxas's log text for the JIT's error buffer."""
    import ptx
    if isinstance(e, ptx.PTXUnsupportedError):
        code = CUDA_ERROR_NOT_SUPPORTED
    elif isinstance(e, ptx.PTXVersionError):
        code = CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    else:
        code = CUDA_ERROR_INVALID_PTX
    err = CudaError(code, f"module {name}: {e}")
    err.jit_log = e.ptxas_log()
    return err


def load_module(ptx_text: str, name: str = "") -> CpuModule:
    host_module = compile_module(ptx_text, "host", name)
    if log.TRACE:
        log.write(f"module {name}: {len(host_module.kernels)} kernels, "
                  f"{'lazily, ' if getattr(host_module, 'lazy', False) and lazy_loading() else ''}"
                  f"{'from the cache' if getattr(host_module, 'cache_hit', False) else 'compiled'}")
    m = CpuModule(host_module)
    if getattr(host_module, "lazy", False) and not lazy_loading():
        for fn in m.functions().values():       # each kernel's error now, where cuModuleGetFunction sees it
            try:
                fn.info
            except CudaError:
                pass
    return m
