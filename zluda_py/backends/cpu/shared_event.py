"""Interprocess events of the CPU backend: an event's state is two counters in a memfd page that every
process holding the event maps. A record takes the next sequence number; the stream stamps it done when it
gets there; query, synchronize and stream waits compare what was done with what had been recorded.

The page: magic, nonce (which the handle repeats, so a reused descriptor number is noticed), recorded, done.
Read-modify-writes of the counters take a POSIX lock on the file (records from several processes); plain
reads are single aligned 8-byte loads."""

from __future__ import annotations

import fcntl
import mmap
import os
import secrets
import struct
import time

import cffi

from zluda_py.backends.cpu.event import CpuEvent
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_MAP_FAILED

_ffi = cffi.FFI()
_PAGE = mmap.PAGESIZE
_MAGIC = 0x5A4C495043455654        # "ZLIPCEVT"
_HANDLE = struct.Struct("<QiiQQ")    # magic, pid, fd, inode, nonce
_RECORDED, _DONE = 2, 3              # indices (u64) in the page


class SharedCounters:
    """One event's page; unmapped and its descriptor closed when the last holder (an event, a queued
    record or wait) lets go of it, so a destroyed event's pending stream work stays safe."""

    def __init__(self, fd: int, nonce: int | None = None):
        """Maps `fd` (owned from here on, unless this raises); nonce: the handle's, to check."""
        self.fd = -1
        try:
            self.map = mmap.mmap(fd, _PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError) as e:
            raise CudaError(CUDA_ERROR_MAP_FAILED, f"cannot map the event's page: {e}") from None
        self.words = _ffi.cast("volatile uint64_t *", _ffi.from_buffer(self.map))
        if nonce is None:
            self.words[1] = secrets.randbits(64)
            self.words[0] = _MAGIC
        elif self.words[0] != _MAGIC or self.words[1] != nonce:
            raise CudaError(CUDA_ERROR_INVALID_HANDLE, "the event handle no longer names a live event")
        self.fd = fd

    @classmethod
    def create(cls) -> "SharedCounters":
        fd = os.memfd_create("zluda-ipc-event", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, _PAGE)
            return cls(fd)
        except BaseException:
            os.close(fd)
            raise

    def __del__(self):
        fd, self.fd = getattr(self, "fd", -1), -1
        if fd >= 0:
            os.close(fd)

    def _locked_update(self, fn) -> int:
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            return fn()
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def begin_record(self) -> int:
        def bump():
            seq = self.words[_RECORDED] + 1
            self.words[_RECORDED] = seq
            return seq
        return self._locked_update(bump)

    def complete(self, seq: int) -> None:
        """Records of several processes may finish out of order: done only grows."""
        if self.words[_DONE] < seq:
            def raise_to():
                if self.words[_DONE] < seq:
                    self.words[_DONE] = seq
                return seq
            self._locked_update(raise_to)

    def recorded(self) -> int:
        return self.words[_RECORDED]

    def reached(self, seq: int) -> bool:
        return self.words[_DONE] >= seq

    def wait(self, seq: int) -> None:
        # Another process stamps it: poll with a growing sleep, so a long wait costs no CPU.
        delay = 0.0
        while self.words[_DONE] < seq:
            time.sleep(delay)
            delay = min(delay * 2 or 1e-5, 1e-3)

    def handle(self) -> bytes:
        return _HANDLE.pack(_MAGIC, os.getpid(), self.fd, os.fstat(self.fd).st_ino, self.words[1])


class SharedCpuEvent(CpuEvent):
    """A CpuEvent whose completion other processes see: CpuStream.record/wait take the shared path when
    `shared` is set (CpuEvent's class default is None)."""

    __slots__ = ("shared",)

    def __init__(self, flags: int, shared: SharedCounters):
        super().__init__(flags)
        self.shared = shared

    def query(self) -> bool:
        s = self.shared
        return s.reached(s.recorded())

    def synchronize(self) -> None:
        s = self.shared
        s.wait(s.recorded())

    def elapsed_ms(self, start) -> float:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "interprocess events take no time stamps")


def open_handle(raw: bytes, flags: int) -> SharedCpuEvent:
    """The event a handle of another process (or this one) names, mapped here."""
    magic, pid, fd, ino, nonce = _HANDLE.unpack_from(raw)
    if magic != _MAGIC:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not an event handle of this driver")
    try:
        local = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE,
                        f"cannot reach process {pid}'s event: {e.strerror}") from None
    try:
        if os.fstat(local).st_ino != ino:
            raise CudaError(CUDA_ERROR_INVALID_HANDLE, "the event handle no longer names a live event")
        shared = SharedCounters(local, nonce)
    except BaseException:
        os.close(local)
        raise
    return SharedCpuEvent(flags, shared)
