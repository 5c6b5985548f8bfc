/* Hand-written C of the shim: makes libpython's symbols global before Python starts, and tells Python
 * where the shim lives (so the embedded interpreter finds the zluda_py package next to it). */
#define _GNU_SOURCE
#include <Python.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
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
static int host_is_python;
int zluda_shim_disabled;

/* Loaded into a running Python of another minor version, the shim's Py* calls bind to that interpreter,
 * whose ABI differs: entering Python would hang or crash the host. Refuse every call instead. */
static int host_python_mismatch(void)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.", PY_MAJOR_VERSION, PY_MINOR_VERSION);
    const char *running = Py_GetVersion();  /* the host interpreter's: it comes first in symbol lookup */
    if (strncmp(running, want, strlen(want)) == 0)
        return 0;
    fprintf(stderr, "[zluda] this libcuda.so.1 was built for Python %d.%d but the process runs Python %.*s: "
            "every CUDA call will fail; build a shim with that Python (python3.X -m zluda_py.cli libdir)\n",
            PY_MAJOR_VERSION, PY_MINOR_VERSION, (int)strcspn(running, " "), running);
    return 1;
}

/* C++ thread-local destructors (cuda.core's context handles) and other exit-time code may call the driver
 * after the host interpreter is gone; entering Python then dereferences a freed interpreter. From the end
 * of Py_FinalizeEx on, every call fails without touching Python. */
static void host_python_finalized(void)
{
    zluda_shim_disabled = 1;
}

__attribute__((constructor)) static void zluda_shim_loaded(void)
{
    host_is_python = Py_IsInitialized();
    if (host_is_python && host_python_mismatch()) {
        zluda_shim_disabled = 1;
        return;
    }
    if (host_is_python)
        Py_AtExit(host_python_finalized);
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
