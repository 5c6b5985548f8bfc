"""libc entry points the CPU backend needs (aligned allocation, memmove, memset), called through cffi's ABI
mode with integer-typed addresses (no cdata casts per call); each call releases the GIL, so large copies
overlap with other Python threads."""

import _cffi_backend
import cffi

from zluda_py import cffi_abi

ffi = cffi.FFI()
ffi.cdef("""
    uintptr_t memalign(size_t alignment, size_t size);
    void free(uintptr_t ptr);
    void *memmove(uintptr_t dst, uintptr_t src, size_t n);
    void *memset(uintptr_t dst, int c, size_t n);
""")
libc = cffi_abi.dlopen(ffi, None)

memset = libc.memset
free = libc.free
_copy_releasing_gil = libc.memmove
_copy_holding_gil = _cffi_backend.memmove     # what ffi.memmove calls, without its Python wrapper
_null = ffi.cast("char *", 0)
SMALL_COPY = 4096


def memmove(dst: int, src: int, n: int) -> None:
    # Small copies skip the GIL release/reacquire of a foreign call; large ones let other threads run.
    if n <= SMALL_COPY:
        _copy_holding_gil(_null + dst, _null + src, n)
    else:
        _copy_releasing_gil(dst, src, n)


def aligned_alloc(size: int, alignment: int) -> int:
    """Address of `size` bytes aligned to `alignment`, or 0 when the allocator refuses."""
    return libc.memalign(alignment, max(size, 1))
