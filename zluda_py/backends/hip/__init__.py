"""The HIP backend: the Driver API on AMD GPUs through hip-python, kernels compiled by `ptx` for amdgcn."""

from zluda_py.backends.hip.backend import HipBackend  # noqa: F401
