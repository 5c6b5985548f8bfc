/* ZLUDA_PROFILE's exit hook for C hosts: the embedded interpreter is never finalised there, so Python's
 * atexit never runs; a C atexit handler reports while the interpreter is still alive. */
#include <stdlib.h>

#include "zluda_shim.h"


static int registered;

static void report_at_exit(void)
{
    /* In a Python host this runs after Py_FinalizeEx (which set zluda_shim_disabled); Python's own
     * atexit has reported there already. */
    if (!zluda_shim_disabled && zluda_profile_report_ptr)
        zluda_profile_report_ptr();     /* extern "Python+C" (src/profile.cdef): zluda_py/profile.py */
}

/* Called once by zluda_py/profile.py (under the GIL) when profiling starts. */
void zluda_profile_at_exit(void)
{
    if (!registered) {
        registered = 1;
        atexit(report_at_exit);
    }
}
