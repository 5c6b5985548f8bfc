"""Test double of hip-python (`from hip import hip`): a recording stand-in whose kernels run on the RDNA3
emulator (ptx.amdgpu_emulator). Lives only in tests/; put its parent first on PYTHONPATH to use it."""
