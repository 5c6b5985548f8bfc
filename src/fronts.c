/* The libraries beside the shim that stand in front of NVIDIA's (libnvrtc.so.13: src/nvrtc_forward.c,
 * libcublas.so.13 and libcublasLt.so.13: src/blas_*.c), loaded at cuInit, and whether the devices' memory is
 * host memory (the CPU backend: a device pointer is a host address), which the BLAS front asks before serving a
 * GEMM with the host's BLAS (NVIDIA's driver has no such symbol, which means no). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zluda_shim.h"

static int host_memory;

/* The fronts beside this library are loaded once the backend is chosen (they bind NVIDIA's libraries only when
 * first called), so that whoever asks for libnvrtc.so.13 or libcublas.so.13 by name finds ours loaded:
 * cuda-pathfinder, through which CuPy and cuda.core load NVIDIA's libraries, takes a loaded library before the
 * one in NVIDIA's wheel. ZLUDA_BLAS_FRONT=0 leaves cuBLAS alone. */
static void load_front(const char *name) {
    const char *self = zluda_shim_path();
    const char *slash = self ? strrchr(self, '/') : NULL;
    char path[4096];
    if (slash && snprintf(path, sizeof path, "%.*s/%s", (int)(slash - self), self, name) < (int)sizeof path &&
        access(path, R_OK) == 0)
        dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static int blas_front_off(void) {
    const char *off = getenv("ZLUDA_BLAS_FRONT");
    return off && strcmp(off, "0") == 0;
}

void zluda_set_host_memory_devices(int on) {
    __atomic_store_n(&host_memory, on, __ATOMIC_RELEASE);
    load_front("libnvrtc.so.13");
    if (!blas_front_off())
        load_front("libcublas.so.13");
}

int zluda_host_memory_devices(void) {
    return __atomic_load_n(&host_memory, __ATOMIC_ACQUIRE) && !blas_front_off();
}
