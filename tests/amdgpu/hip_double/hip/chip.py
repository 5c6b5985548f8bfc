"""hip-python's `chip`: only the library name the backend sets; the double loads no library."""

DLL = b"libamdhip64.so"
