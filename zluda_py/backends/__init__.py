"""Backends: the CPU (embedded default) and HIP (AMD GPUs). select() picks one per ZLUDA_BACKEND."""
