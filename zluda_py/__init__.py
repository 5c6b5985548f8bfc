"""zluda-py: a drop-in libcuda.so.1 (CUDA Driver API) whose calls land in Python and run on HIP or the CPU."""

__version__ = "0.1.0"
