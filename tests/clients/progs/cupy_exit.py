"""CuPy through the shim, then a plain exit: its module and memory finalizers unload and free while the
interpreter tears down (the test checks nothing reaches stderr)."""
import numpy as np
import cupy as cp

x = cp.arange(1000, dtype=cp.float32)
y = (x * 2 + 1).get()
ok = np.array_equal(y, np.arange(1000, dtype=np.float32) * 2 + 1)
print(("PASS" if ok else "FAIL") + " elementwise kernel through NVRTC")
