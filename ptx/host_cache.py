"""The on-disk kernel cache: one file per module (`<key>.zk`: digest, metadata, shared object), written
by atomic rename, checked on every read, bounded in size with least-recently-used eviction."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import struct
import tempfile
import zlib
from pathlib import Path

_MAGIC = b"ZKC1"
SUFFIX = ".zk"
DEFAULT_MAX_BYTES = 1024 << 20


class KernelCache:
    """`load(key)` -> (metadata, shared object) or None; `store(key, metadata, so)`. A hit refreshes
    the entry's mtime, which is what eviction orders by (atime is often not kept)."""

    def __init__(self, directory, max_bytes=None):
        self.dir = Path(directory)
        self.max_bytes = DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)

    def path(self, key: str) -> Path:
        return self.dir / f"{key}{SUFFIX}"

    def load(self, key: str):
        p = self.path(key)
        try:
            blob = p.read_bytes()
        except OSError:
            return None
        got = _decode(blob)
        if got is None:             # truncated or corrupt (a crash mid-write elsewhere, a bad disk)
            try:
                p.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(p)
        except OSError:
            pass
        return got

    def store(self, key: str, meta: dict, so: bytes) -> None:
        """Best effort: a cache that cannot be written only costs the next load a compile."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_encode(meta, so))
            os.replace(tmp, self.path(key))     # readers see the old entry or the new, never half
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return
        self.evict()

    def evict(self) -> None:
        """Remove the least recently used entries until the cache is within max_bytes (to 90 % of it,
        so a full cache does not evict on every store); one process at a time."""
        try:
            with open(self.dir / ".lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                entries = []
                for e in os.scandir(self.dir):
                    if e.name.endswith(SUFFIX):
                        try:
                            st = e.stat()
                        except OSError:
                            continue
                        entries.append((st.st_mtime_ns, st.st_size, e.path))
                total = sum(size for _, size, _ in entries)
                if total <= self.max_bytes:
                    return
                for _, size, path in sorted(entries):
                    if total <= self.max_bytes * 0.9:
                        break
                    try:
                        os.unlink(path)
                    except OSError:
                        continue
                    total -= size
        except OSError:
            pass


def _encode(meta: dict, so: bytes) -> bytes:
    m = zlib.compress(json.dumps(meta, separators=(",", ":")).encode(), 1)
    body = _MAGIC + struct.pack("<QQ", len(m), len(so)) + m + so
    return hashlib.sha256(body).digest() + body


def _decode(blob: bytes):
    digest, body = blob[:32], blob[32:]
    if len(body) < 20 or body[:4] != _MAGIC or hashlib.sha256(body).digest() != digest:
        return None
    mlen, slen = struct.unpack_from("<QQ", body, 4)
    if 20 + mlen + slen != len(body):
        return None
    try:
        meta = json.loads(zlib.decompress(body[20:20 + mlen]))
    except (ValueError, zlib.error):
        return None
    return meta, body[20 + mlen:]
