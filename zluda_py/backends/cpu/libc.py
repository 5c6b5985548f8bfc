"""libc entry points the CPU backend needs (aligned allocation, memmove, memset), called through cffi's ABI
mode so each call releases the GIL and large copies overlap with other Python threads."""

import cffi

ffi = cffi.FFI()
ffi.cdef("""
    int posix_memalign(void **memptr, size_t alignment, size_t size);
    void free(void *ptr);
    void *memmove(void *dst, const void *src, size_t n);
    void *memset(void *dst, int c, size_t n);
""")
libc = ffi.dlopen(None)

_voidp = ffi.typeof("void *")
_cast = ffi.cast


def aligned_alloc(size: int, alignment: int) -> int:
    """Address of `size` bytes aligned to `alignment`, or 0 when the allocator refuses."""
    out = ffi.new("void **")
    if libc.posix_memalign(out, alignment, max(size, 1)) != 0:
        return 0
    return int(ffi.cast("uintptr_t", out[0]))


def free(addr: int) -> None:
    libc.free(_cast(_voidp, addr))


def memmove(dst: int, src: int, n: int) -> None:
    libc.memmove(_cast(_voidp, dst), _cast(_voidp, src), n)


def memset(dst: int, byte: int, n: int) -> None:
    libc.memset(_cast(_voidp, dst), byte, n)
