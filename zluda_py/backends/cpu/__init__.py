"""The CPU backend (embedded default): host memory as device memory, worker-queue streams, JIT'd kernels."""

from zluda_py.backends.cpu.backend import CpuBackend  # noqa: F401
