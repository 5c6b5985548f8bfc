"""cffi ABI-mode libraries opened with every declared name bound at once, so that no later call resolves one."""


def dlopen(ffi, path):
    """ffi.dlopen(path), each cdef'd function and variable looked up now. cffi resolves a name on first use
    under ffi's lock, which is not reentrant and which it also holds while it parses a C type string; a
    garbage collection during such a parse can run a finalizer (a stream's __del__) whose first call into
    the library then waits on that lock in the same thread forever (ZLUDA_PROFILE's exit report hung so)."""
    lib = ffi.dlopen(path)
    for name in dir(lib):
        getattr(lib, name)
    return lib
