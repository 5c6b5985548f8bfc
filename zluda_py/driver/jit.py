"""JIT options of cuModuleLoadDataEx / cuLink* / cuLibraryLoadData: checked as NVIDIA checks them, and the
info and error log buffers filled in ptxas's words (the size options' out values are the bytes written)."""

from __future__ import annotations

from zluda_py import cmem
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_INVALID_VALUE

CU_JIT_MAX_REGISTERS = 0
INFO_LOG_BUFFER, INFO_LOG_BUFFER_SIZE_BYTES, ERROR_LOG_BUFFER, ERROR_LOG_BUFFER_SIZE_BYTES = 3, 4, 5, 6
LOG_VERBOSE = 12
NUM_OPTIONS = 35                  # CU_JIT_NUM_OPTIONS of CUDA 13.0's cuda.h


class Options:
    """The (option, value) pairs a call was given; `check()` refuses what NVIDIA's driver refuses."""

    def __init__(self, options: int, values: int, count: int):
        self.options, self.values, self.count = options, values, count
        self.pairs = {}
        if count > 0 and options and values:
            for i in range(count):
                self.pairs.setdefault(cmem.read_u32(options + 4 * i), (i, cmem.read_u64(values + 8 * i)))

    def check(self) -> "Options":
        if self.count < 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"numOptions is {self.count}")
        if self.count and (not self.options or not self.values):
            raise CudaError(CUDA_ERROR_INVALID_VALUE,
                            f"{self.count} JIT options but the options or optionValues array is NULL")
        for opt in self.pairs:
            if opt >= NUM_OPTIONS:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown JIT option {opt}")
        return self

    def value(self, opt: int):
        got = self.pairs.get(opt)
        return None if got is None else got[1]

    def max_registers(self):
        v = self.value(CU_JIT_MAX_REGISTERS)
        return (v & 0xFFFFFFFF) or None if v is not None else None

    @property
    def verbose(self) -> bool:
        return bool((self.value(LOG_VERBOSE) or 0) & 0xFFFFFFFF)

    def _fill(self, buf_opt: int, size_opt: int, text: str) -> None:
        buf, size = self.pairs.get(buf_opt), self.pairs.get(size_opt)
        if size is None:
            return
        cap = size[1] & 0xFFFFFFFF
        written = 0
        if buf is not None and buf[1] and cap:
            raw = text.encode()[:cap - 1]
            cmem.write_cstring(buf[1], text, cap)
            written = len(raw) + 1 if raw else 0
        # the size option's slot holds the bytes written, NUL included (0 for an empty log)
        cmem.write_u64(self.values + 8 * size[0], written)

    def write_logs(self, error: str = "", info: str = "") -> None:
        """Fill both logs; never raises (a bad buffer pointer must not hide the load's own result)."""
        if not self.pairs:
            return
        for args in ((ERROR_LOG_BUFFER, ERROR_LOG_BUFFER_SIZE_BYTES, error),
                     (INFO_LOG_BUFFER, INFO_LOG_BUFFER_SIZE_BYTES, info)):
            try:
                self._fill(*args)
            except CudaError:
                pass


def error_log(e: CudaError) -> str:
    """What the JIT's error log says for a failed load: ptxas's lines where the compiler wrote them."""
    return getattr(e, "jit_log", None) or e.message


def info_log(module, sm: int) -> str:
    """ptxas's verbose report (CU_JIT_LOG_VERBOSE) for a loaded module: its kernels' registers and shared."""
    lines = ["ptxas info    : 0 bytes gmem"]
    for name in module.kernel_names():
        f = module.function(name)
        lines += [f"ptxas info    : Compiling entry function '{name}' for 'sm_{sm}'",
                  f"ptxas info    : Function properties for {name}",
                  f"ptxas         .     {f.info.local_bytes} bytes stack frame, 0 bytes spill stores, "
                  "0 bytes spill loads",
                  f"ptxas info    : Used {f.num_regs()} registers, {f.static_shared()} bytes smem"]
    return "\n".join(lines)


def check_static_shared(backend_module, ptx_text: str, limit: int, name: str) -> None:
    """Refuse a module whose kernel has more static shared memory than the device's per-block opt-in
    maximum, as ptxas does when the driver compiles it (218). The backend's figure covers the module's
    whole common area, so only a module over the limit there is measured kernel by kernel."""
    # a lazy kernel not compiled yet: its declarations' sum bounds it; only one over the limit is compiled
    over = [n for n, f in backend_module.functions().items()
            if (f.info.static_shared_bytes if getattr(f, "loaded", True) else f.kernel.shared_hint) > limit]
    if not over:
        return
    from zluda_py.driver.module import kept_resources
    res = kept_resources(backend_module)
    if res is None:
        if not ptx_text:
            return
        import ptx
        from ptx.resources import module_resources
        res = module_resources(ptx.parse(ptx_text, check=False))
    for n in over:
        r = res.get(n)
        used = r.shared_bytes if r is not None else backend_module.functions()[n].info.static_shared_bytes
        if used > limit:
            msg = f"Entry function '{n}' uses too much shared data ({used:#x} bytes, {limit:#x} max)"
            e = CudaError(CUDA_ERROR_INVALID_PTX, f"module {name}: {msg}")
            e.jit_log = f"ptxas error   : {msg}"
            raise e
