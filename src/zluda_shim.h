/* The C side of the shim as seen by each C file in src/: the one entry into Python and helpers. */
#ifndef ZLUDA_SHIM_H
#define ZLUDA_SHIM_H

#include <stdint.h>

#include "loader.h"

/* Set when Python cannot be entered safely (see src/loader.c); every call then fails without touching
 * Python (zluda_disabled_result). */
extern int zluda_shim_disabled;

/* Set when a Python host has begun finalizing (src/loader.c): release calls then succeed in C. */
extern int zluda_host_exiting;

/* Runs the Python handler of exported function `fid` (its index in cuda_decls.json) over the raw
 * arguments; returns a CUresult. Safe from any thread. (Generated entry points call their typed
 * zluda_call_<signature> pointer instead, which is cheaper.) */
static inline int zluda_enter(int fid, uint64_t *args)
{
    if (__builtin_expect(__atomic_load_n(&zluda_shim_disabled, __ATOMIC_ACQUIRE), 0) || zluda_python_start() != 0)
        return zluda_disabled_result(fid);
    return zluda_dispatch_ptr(fid, args);
}

/* The address of exported function `fid` (for cuGetProcAddress), NULL when out of range. Generated. */
void *zluda_fn_address(int fid);

/* cuGetErrorName / cuGetErrorString's static strings, NULL for an unknown code. Generated. */
const char *zluda_error_name(int code);
const char *zluda_error_string(int code);

/* 1 when the shim was loaded into a running Python (ctypes, numba), 0 inside a C program. */
int zluda_host_is_python(void);

/* The Python host's atexit callback: from then on zluda_host_exiting is set. */
void zluda_note_host_exiting(void);

/* Path of the loaded libcuda.so.1 (from dladdr), "" if unknown. */
const char *zluda_shim_path(void);

/* ZLUDA_PROFILE: report at exit from a C atexit handler (src/profile.c). */
void zluda_profile_at_exit(void);

/* The dark-API tables (src/darkapi.c), declared here so cffi's generated code sees them. */
#include "darkapi.h"
#include "fronts.h"

#endif
