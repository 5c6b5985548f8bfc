/* The C side of the shim as seen by each C file in src/: the one entry into Python and helpers. */
#ifndef ZLUDA_SHIM_H
#define ZLUDA_SHIM_H

#include <stdint.h>

/* Runs the Python handler of exported function `fid` (its index in cuda_decls.json) over the raw
 * arguments; returns a CUresult. Implemented by cffi (extern "Python+C"); safe from any thread. */
int zluda_dispatch(int fid, uint64_t *args);

/* Set at load time when Python cannot be entered safely (see src/shim.c); every call then fails with
 * CUDA_ERROR_SHARED_OBJECT_INIT_FAILED (303) without touching Python. */
extern int zluda_shim_disabled;

/* How C code in src/ enters a driver function by id (generated entry points call their typed
 * zluda_call_<signature> extern instead, which is cheaper). */
static inline int zluda_enter(int fid, uint64_t *args)
{
    if (__builtin_expect(zluda_shim_disabled, 0))
        return 303;
    return zluda_dispatch(fid, args);
}

/* The address of exported function `fid` (for cuGetProcAddress), NULL when out of range. Generated. */
void *zluda_fn_address(int fid);

/* 1 when the shim was loaded into a running Python (ctypes, numba), 0 inside a C program. */
int zluda_host_is_python(void);

/* Path of the loaded libcuda.so.1 (from dladdr), "" if unknown. */
const char *zluda_shim_path(void);

/* ZLUDA_PROFILE: report at exit from a C atexit handler (src/profile.c). */
void zluda_profile_at_exit(void);

/* The dark-API tables (src/darkapi.c), declared here so cffi's generated code sees them. */
#include "darkapi.h"

#endif
