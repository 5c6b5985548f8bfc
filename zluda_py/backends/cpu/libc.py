"""libc entry points the CPU backend needs (aligned allocation, memmove, memset), called through cffi's ABI
mode with integer-typed addresses (no cdata casts per call); each call releases the GIL, so large copies
overlap with other Python threads."""

import cffi

ffi = cffi.FFI()
ffi.cdef("""
    int posix_memalign(uintptr_t *memptr, size_t alignment, size_t size);
    void free(uintptr_t ptr);
    void *memmove(uintptr_t dst, uintptr_t src, size_t n);
    void *memset(uintptr_t dst, int c, size_t n);
""")
libc = ffi.dlopen(None)

memmove = libc.memmove
memset = libc.memset
free = libc.free


def aligned_alloc(size: int, alignment: int) -> int:
    """Address of `size` bytes aligned to `alignment`, or 0 when the allocator refuses."""
    out = ffi.new("uintptr_t *")
    if libc.posix_memalign(out, alignment, max(size, 1)) != 0:
        return 0
    return out[0]
