/* The front library's way into Python (src/loader.c) and the facts about this build it needs
 * (build_info.h, written by zluda_py/_shim_build.py next to the generated exports). */
#ifndef ZLUDA_LOADER_H
#define ZLUDA_LOADER_H

#include <stdint.h>

#include "build_info.h"

#define ZLUDA_ERR_NO_DEVICE 100
#define ZLUDA_ERR_INIT_FAILED 303

/* Starts (or joins) Python and binds the module's entry points, once; 0 when Python can be entered. */
int zluda_python_start(void);
/* What a call answers once the shim is disabled (startup failed, wrong host Python, host finalised). */
int zluda_disabled_result(int fid);
/* Generated: points every Python entry pointer at the module's function; 0 when all were found. */
int zluda_bind_python(void *module);

/* The module's Python+C entry points that the C side of the front calls (bound by zluda_bind_python). */
extern int (*zluda_dispatch_ptr)(int fid, uint64_t *args);
extern int32_t (*zluda_dark_primary_ctx_ptr)(uint64_t *out, int32_t dev);
extern void (*zluda_profile_report_ptr)(void);

#endif
