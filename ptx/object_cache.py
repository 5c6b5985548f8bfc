"""A disk cache of one compiled artifact per key: `<dir>/<key><suffix>` holding sha256(data) + data, written
by atomic rename, a damaged entry read as a miss (the AMD code objects; host kernels have ptx/host_cache.py)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class ObjectCache:
    def __init__(self, cache_dir: str, key: str, suffix: str = ".o"):
        self.path = Path(cache_dir) / f"{key}{suffix}"
        self.hit = False

    def load(self):
        try:
            blob = self.path.read_bytes()
        except OSError:
            return None
        digest, data = blob[:32], blob[32:]
        if hashlib.sha256(data).digest() != digest:
            return None                      # corrupt: rebuilt and rewritten by the caller
        self.hit = True
        return data

    def store(self, data: bytes):
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
        except OSError:
            return                           # a read-only cache only costs a recompile
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(hashlib.sha256(data).digest() + data)
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
