"""cuLink*: JIT linking of PTX inputs (text, or PTX taken from fatbins / ELF images). The linked image that
cuLinkComplete returns is plain NUL-terminated PTX, so cuModuleLoadData and cuLibraryLoadData take it as is."""

from __future__ import annotations

from zluda_py import cmem, fatbin, handles
from zluda_py.cudadevrt import CUDADEVRT_PTX, is_cudadevrt
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod
from zluda_py.driver import init, jit
from zluda_py.driver.module import select_ptx
from zluda_py.errors import (CudaError, CUDA_ERROR_FILE_NOT_FOUND, CUDA_ERROR_INVALID_HANDLE,
                             CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_INVALID_SOURCE,
                             CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED)
from zluda_py.ptxlink import merge_ptx, undefined_calls, with_max_registers

# CUjitInputType
INPUT_CUBIN, INPUT_PTX, INPUT_FATBINARY, INPUT_OBJECT, INPUT_LIBRARY, INPUT_NVVM = range(6)


class LinkState:
    def __init__(self, options: int, values: int, count: int):
        self.jit = jit.Options(options, values, count).check()
        self.inputs: list = []     # (name, PTX text) of each input
        self.blob = None           # cffi buffer handed out by cuLinkComplete (lives until destroy)
        handles.new(self)


def _state(h: int) -> LinkState:
    init.require_init()
    return handles.get(h, LinkState, CUDA_ERROR_INVALID_HANDLE, "link state")


def _ptx_of(kind: int, data: bytes, name: str) -> str:
    device = ctxmod.current_context().device
    if kind == INPUT_PTX:
        end = data.find(b"\0")
        text = (data[:end] if end >= 0 else data).decode("utf-8", "replace")
        if not text.strip():
            raise CudaError(CUDA_ERROR_INVALID_PTX, f"{name}: empty PTX input")
        _check_input(text, device, name)
        return text
    if kind == INPUT_NVVM:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"{name}: NVVM IR inputs are not supported (only PTX)")
    if kind == INPUT_LIBRARY and is_cudadevrt(name):
        return CUDADEVRT_PTX     # NVIDIA's archive is SASS only; grid.sync's helpers in PTX instead
    if kind in (INPUT_CUBIN, INPUT_FATBINARY, INPUT_OBJECT, INPUT_LIBRARY):
        return select_ptx(fatbin.parse_image(data), device, name)
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{name}: unknown input type {kind}")


def _check_input(text: str, device: int, name: str) -> None:
    """NVIDIA compiles a PTX input when it is added: bad PTX fails cuLinkAddData, with ptxas's log."""
    import ptx
    from zluda_py.backends.cpu.module import ptx_error
    select_ptx(fatbin.ModuleImage("ptx", ptx=text), device, name)     # a .target newer than the device
    try:
        ptx.parse(text)
    except ptx.PTXError as e:
        raise ptx_error(e, name) from None


def _add(state: LinkState, kind: int, data: bytes, name: str) -> None:
    try:
        state.inputs.append((name, _ptx_of(kind, data, name)))
    except CudaError as e:
        state.jit.write_logs(error=jit.error_log(e))
        raise


@export("cuLinkCreate", "cuLinkCreate_v2")
def link_create(num_options, options, values, state_out):
    init.require_init()
    if not state_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "stateOut is NULL")
    ctxmod.current_context()
    cmem.write_ptr(state_out, LinkState(options, values, num_options).handle)


@export("cuLinkAddData", "cuLinkAddData_v2")
def link_add_data(hstate, kind, data, size, name, num_options, options, values):
    state = _state(hstate)
    if not data or size == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "data is NULL or size is 0")
    label = cmem.read_cstring(name, "name") if name else f"input{len(state.inputs)}"
    jit.Options(options, values, num_options).check()
    _add(state, kind, cmem.read_bytes(data, size, "data"), label)


@export("cuLinkAddFile", "cuLinkAddFile_v2")
def link_add_file(hstate, kind, path, num_options, options, values):
    state = _state(hstate)
    if not path:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "path is NULL")
    p = cmem.read_cstring(path, "path")
    jit.Options(options, values, num_options).check()
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CudaError(CUDA_ERROR_FILE_NOT_FOUND, f"{p}: {e.strerror}") from None
    _add(state, kind, data, p)


@export("cuLinkComplete")
def link_complete(hstate, cubin_out, size_out):
    state = _state(hstate)
    if not cubin_out or not size_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "cubinOut or sizeOut is NULL")
    if not state.inputs:
        raise CudaError(CUDA_ERROR_INVALID_IMAGE, "nothing was added to the link")
    import ptx
    missing = undefined_calls(state.inputs, ptx.external_functions())
    if missing:
        # nvlink's wording; NVIDIA's driver answers CUDA_ERROR_INVALID_SOURCE (seen on an H100, driver 580)
        log = "\n".join(f"error   : Undefined reference to '{f}' in '{where}'" for f, where in missing)
        state.jit.write_logs(error=log)
        raise CudaError(CUDA_ERROR_INVALID_SOURCE, log.replace("\n", "; "))
    text = merge_ptx([t for _, t in state.inputs])
    max_regs = state.jit.max_registers()
    if max_regs:
        text = with_max_registers(text, max_regs)
    try:
        import ptx
        ptx.parse(text)
    except Exception as e:  # noqa: BLE001 - any parse failure is a link failure
        msg = f"linked PTX does not parse: {e}"
        state.jit.write_logs(error=e.ptxas_log() if isinstance(e, ptx.PTXError) else msg)
        raise CudaError(CUDA_ERROR_INVALID_PTX, msg) from None
    raw = text.encode() + b"\0"
    state.blob = cmem.ffi.new("char[]", raw)
    cmem.write_ptr(cubin_out, int(cmem.ffi.cast("uintptr_t", state.blob)))
    cmem.write_u64(size_out, len(raw))


@export("cuLinkDestroy")
def link_destroy(hstate):
    state = _state(hstate)
    handles.remove(state.handle)
    state.blob = None
