"""What the compiler's helper processes (ptx/host_llc.py's LLVM child, ptx/amdgpu.py's code-object
child) share: the interpreter to start them with, and reading their answers against a deadline."""

from __future__ import annotations

import os
import shutil
import sys
import time


def python_executable() -> str:
    """A Python interpreter for a child (inside the shim, sys.executable may be the host program)."""
    exe = sys.executable or ""
    if os.path.basename(exe).startswith("python"):
        return exe
    v = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for p in (os.path.join(sys.exec_prefix, "bin", v), os.path.join(sys.prefix, "bin", v)):
        if os.access(p, os.X_OK):
            return p
    return shutil.which(v) or shutil.which("python3") or exe


def read_exactly(stream, n: int, deadline: float) -> bytes:
    """n bytes from a child's stdout; TimeoutError past `deadline` (time.monotonic), EOFError if it died."""
    import select
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stream], [], [], left)[0]:
            raise TimeoutError
        chunk = os.read(stream.fileno(), n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf
