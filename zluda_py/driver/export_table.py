"""cuGetExportTable and the Python half of the dark-API tables (src/darkapi.c): the primary-context slot
and running context-local-storage destructors when a context goes away."""

from zluda_py import cmem, log, native
from zluda_py.dispatch import export, expected
from zluda_py.driver import context as ctxmod
from zluda_py.driver import init
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_INITIALIZED


@export("cuGetExportTable")
def get_export_table(table_out, table_id):
    if not table_out or not table_id:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "ppExportTable or pExportTableId is NULL")
    uuid = cmem.read_bytes(table_id, 16, "pExportTableId")
    if not native.loaded():
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "export tables live in the shim, which is not loaded")
    table = native.lib.zluda_dark_export_table(native.ffi.from_buffer(uuid))
    if table == native.ffi.NULL:
        cmem.write_ptr(table_out, 0)
        # cudart (f8cff951...) and the NVIDIA libraries numba and cuda.core load (da9151d3...) probe for
        # tables of features they can do without: a refusal is an answer, not an error.
        raise expected(CUDA_ERROR_INVALID_VALUE, f"unknown export table {uuid.hex()}")
    cmem.write_ptr(table_out, int(native.ffi.cast("uintptr_t", table)))


@native.def_extern("zluda_dark_primary_ctx", error=999)
def dark_primary_ctx(out, dev):
    """CUDART_INTERFACE slot 2: the primary context handle, neither retained nor activated."""
    try:
        if init.BACKEND is None:
            init.initialize()
        out[0] = ctxmod.primary_context_handle(dev)
        return 0
    except CudaError as e:
        log.error(f"export table CUDART_INTERFACE[2]({dev}): {e}")
        return e.code if e.code else CUDA_ERROR_NOT_INITIALIZED


@ctxmod.on_any_teardown
def _drop_context_local_storage(ctx) -> None:
    if native.loaded():
        native.lib.zluda_dark_context_destroyed(ctx.handle)
