"""The pre-CUDA-4.0 API PyCUDA still calls: launch state kept on the function (cuFuncSetBlockShape,
cuParamSet*, cuLaunch/cuLaunchGrid) and context usage counts (cuCtxAttach/cuCtxDetach)."""

from __future__ import annotations

import struct

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, init
from zluda_py.driver import launch as launchmod
from zluda_py.driver.module import get_function
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE

MAX_PARAM_BYTES = 32764        # the kernel parameter limit since CUDA 12.1


class _LaunchState:
    """What the legacy calls set on a function; a launch takes what was set last."""
    def __init__(self):
        self.block = (1, 1, 1)
        self.shared = 0
        self.params = bytearray()


def _state(hfunc):
    f = get_function(hfunc)
    st = getattr(f, "legacy_launch", None)
    if st is None:
        st = f.legacy_launch = _LaunchState()
    return f, st


@export("cuFuncSetBlockShape")
def func_set_block_shape(hfunc, x, y, z):
    _, st = _state(hfunc)
    if x <= 0 or y <= 0 or z <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"block shape ({x}, {y}, {z}) has a dimension <= 0")
    st.block = (x, y, z)


@export("cuFuncSetSharedSize")
def func_set_shared_size(hfunc, nbytes):
    _state(hfunc)[1].shared = nbytes


@export("cuParamSetSize")
def param_set_size(hfunc, nbytes):
    _, st = _state(hfunc)
    if nbytes > MAX_PARAM_BYTES:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{nbytes} bytes of parameters > {MAX_PARAM_BYTES}")
    del st.params[nbytes:]
    st.params.extend(bytes(nbytes - len(st.params)))


def _set(hfunc, offset, data: bytes):
    _, st = _state(hfunc)
    if offset < 0 or offset + len(data) > len(st.params):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"parameter bytes [{offset}, {offset + len(data)}) are past "
                                                  f"the {len(st.params)} set by cuParamSetSize")
    st.params[offset:offset + len(data)] = data


@export("cuParamSeti")
def param_seti(hfunc, offset, value):
    _set(hfunc, offset, struct.pack("<I", value & 0xFFFFFFFF))


@export("cuParamSetf")
def param_setf(hfunc, offset, value):
    _set(hfunc, offset, struct.pack("<f", value))


@export("cuParamSetv")
def param_setv(hfunc, offset, ptr, nbytes):
    if nbytes and not ptr:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "ptr is NULL")
    _set(hfunc, offset, cmem.read_bytes(ptr, nbytes, "ptr") if nbytes else b"")


def _launch(hfunc, width, height, hstream):
    init.require_init()
    ctxmod.current_context()
    f, st = _state(hfunc)
    need = f.info.param_size
    # Like a short `extra` buffer: parameters past what was set read as zero.
    params = bytes(st.params[:need]) + bytes(max(0, need - len(st.params)))
    launchmod.launch(hfunc, (width, height, 1), st.block, st.shared, hstream, 0, 0, packed=params)


@export("cuLaunch")
def launch(hfunc):
    _launch(hfunc, 1, 1, 0)


@export("cuLaunchGrid")
def launch_grid(hfunc, width, height):
    _launch(hfunc, width, height, 0)


@export("cuLaunchGridAsync")
def launch_grid_async(hfunc, width, height, hstream):
    _launch(hfunc, width, height, hstream)


# --- usage counts: a created context starts at one; cuCtxDetach at zero destroys it ----------------------
@export("cuCtxAttach")
def ctx_attach(pctx, flags):
    if not pctx:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pctx is NULL")
    if flags:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, not {flags:#x}")
    ctx = ctxmod.current_context(check_sticky=False)
    ctx.attached = getattr(ctx, "attached", 0) + 1
    cmem.write_ptr(pctx, ctx.handle)


@export("cuCtxDetach")
def ctx_detach(h):
    if not h:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "ctx is NULL")
    ctx = ctxmod.context_from_handle(h)
    if ctxmod.current_context_or_none() is not ctx:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, f"context {h:#x} is not current to this thread")
    attached = getattr(ctx, "attached", 0)
    if attached:
        ctx.attached = attached - 1
        return
    if ctx.primary:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "a primary context is released with cuDevicePrimaryCtxRelease")
    ctxmod.ctx_destroy(h)
