/* Hand-written C of the shim: makes libpython's symbols global before Python starts, and tells Python
 * where the shim lives (so the embedded interpreter finds the zluda_py package next to it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "zluda_shim.h"

/* A C program that dlopen()s libcuda.so.1 with RTLD_LOCAL pulls libpython in with local scope; the
 * extension modules Python later imports (_ctypes, numpy, cffi's backend) are not linked against
 * libpython and would fail with undefined Py* symbols. Re-opening the already loaded libpython with
 * RTLD_GLOBAL | RTLD_NOLOAD promotes it to global scope without loading anything new. */
static int promote_libpython(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size; (void)data;
    const char *name = info->dlpi_name;
    if (name == NULL || name[0] == '\0')
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libpython", 9) == 0)
        dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    return 0;
}

/* Whether Python was already running when the shim was loaded (ctypes, numba) rather than started by the
 * shim inside a C program; in the latter case Python guessed sys.executable from PATH. */
int Py_IsInitialized(void);
static int host_is_python;

__attribute__((constructor)) static void zluda_shim_loaded(void)
{
    host_is_python = Py_IsInitialized();
    dl_iterate_phdr(promote_libpython, NULL);
}

int zluda_host_is_python(void)
{
    return host_is_python;
}

const char *zluda_shim_path(void)
{
    Dl_info info;
    if (dladdr((void *)&zluda_shim_path, &info) && info.dli_fname)
        return info.dli_fname;
    return "";
}
