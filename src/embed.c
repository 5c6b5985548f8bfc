/* C of the cffi module (_zluda_shim.so), the only code here that links against Python: starts the
 * interpreter as the installation's own executable would (never the python3 first on PATH), then runs the
 * module's init code and says whether the driver came up. Called once, by src/loader.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* 0: ready; 1: the interpreter cannot start (no device); 2: the package cannot start. why: one line. */
int zluda_embed_start(const char *executable, char *why, size_t cap)
{
    if (executable && !Py_IsInitialized()) {
        PyConfig config;
        PyConfig_InitPythonConfig(&config);
        config.install_signal_handlers = 0;     /* the host owns its signals (and ptxrt its fault handler) */
        config.parse_argv = 0;
        /* As if started as that executable: prefix, a venv's pyvenv.cfg and site-packages follow from it. */
        PyStatus st = PyConfig_SetBytesString(&config, &config.program_name, executable);
        if (!PyStatus_Exception(st))
            st = PyConfig_SetBytesString(&config, &config.executable, executable);
        if (!PyStatus_Exception(st))
            st = Py_InitializeFromConfig(&config);
        PyConfig_Clear(&config);
        if (PyStatus_Exception(st)) {
            snprintf(why, cap, "Python %s could not start: %s%s%s: no CUDA device", executable,
                     st.func ? st.func : "", st.func ? ": " : "", st.err_msg ? st.err_msg : "unknown error");
            return 1;
        }
        PyEval_SaveThread();                    /* cffi and every later call take the GIL themselves */
    }
    if (cffi_start_python() != 0) {
        snprintf(why, cap, "the embedded module's init code failed");
        return 2;
    }
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = 0;
    if (PySys_GetObject("_zluda_shim_ready") == NULL) {
        PyObject *err = PySys_GetObject("_zluda_shim_error");      /* borrowed */
        const char *text = err && PyUnicode_Check(err) ? PyUnicode_AsUTF8(err) : NULL;
        snprintf(why, cap, "%s", text ? text : "the driver's Python package did not start");
        PyErr_Clear();
        rc = 2;
    }
    PyGILState_Release(gil);
    return rc;
}

/* Path of this module (from dladdr): the package it belongs to sits two directories up. */
const char *zluda_embed_path(void)
{
    Dl_info info;
    if (dladdr((void *)&zluda_embed_path, &info) && info.dli_fname)
        return info.dli_fname;
    return "";
}
