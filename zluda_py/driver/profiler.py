"""Profiler control: there is no profiler to start on this driver, so start/stop succeed and do nothing
(as NVIDIA's do when no profiling tool is attached)."""

from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod
from zluda_py.errors import CudaError, CUDA_ERROR_NOT_SUPPORTED


@export("cuProfilerStart")
def profiler_start():
    ctxmod.current_context()


@export("cuProfilerStop")
def profiler_stop():
    ctxmod.current_context()


@export("cuProfilerInitialize")
def profiler_initialize(config_file, output_file, output_mode):
    raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "the legacy command-line profiler was removed in CUDA 12")
