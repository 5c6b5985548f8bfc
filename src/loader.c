/* How libcuda.so.1 reaches Python. The library itself links no libpython: on the first call that needs
 * Python it finds the interpreter this installation belongs to (never the one first on PATH), loads that
 * interpreter's libpython with global scope, starts it as that interpreter would start, then loads the
 * cffi module beside it (_zluda_shim.so), whose Python+C entry points the generated exports call through
 * pointers. Inside a running Python (ctypes, numba) it joins that interpreter instead. Whatever fails is
 * said in one line, always, and every call then returns an error: never a traceback, never a silent 0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader.h"
#include "zluda_shim.h"

int zluda_shim_disabled;
int zluda_host_exiting;
static int host_is_python;
static int cuinit_code = ZLUDA_ERR_INIT_FAILED;     /* what cuInit answers once disabled */
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static int start_status = -1;

/* A Python host's last atexit callback (registered when the shim attached, so it runs after the host's
 * own): from here to the end of Py_FinalizeEx the interpreter tears modules down, and a handler's import
 * fails (sys.modules is empty); the generated entry points of the release calls then succeed without
 * entering Python, as NVIDIA's driver, still alive, answers a program's exit-time frees. */
void zluda_note_host_exiting(void)
{
    __atomic_store_n(&zluda_host_exiting, 1, __ATOMIC_RELEASE);
}

int zluda_host_is_python(void)
{
    return host_is_python;
}

int zluda_disabled_result(int fid)
{
    return fid == ZLUDA_FID_CUINIT ? cuinit_code : ZLUDA_ERR_INIT_FAILED;
}

/* The fatal line: printed whatever ZLUDA_LOG says, since nothing will work after it. */
static void say(const char *fmt, ...)
{
    FILE *out = NULL;
    const char *path = getenv("ZLUDA_LOG_FILE");
    if (path && *path)
        out = fopen(path, "a");
    FILE *dst = out ? out : stderr;
    va_list ap;
    va_start(ap, fmt);
    fputs("[zluda] ", dst);
    vfprintf(dst, fmt, ap);
    fputc('\n', dst);
    va_end(ap);
    if (out)
        fclose(out);
    else
        fflush(stderr);
}

static void disable(int code_for_cuinit)
{
    cuinit_code = code_for_cuinit;
    __atomic_store_n(&zluda_shim_disabled, 1, __ATOMIC_RELEASE);
}

static int is_file(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void dir_of(char *path)
{
    char *slash = strrchr(path, '/');
    if (slash == path)
        path[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        strcpy(path, ".");
}

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

const char *zluda_shim_path(void)
{
    Dl_info info;
    if (dladdr((void *)&zluda_shim_path, &info) && info.dli_fname)
        return info.dli_fname;
    return "";
}

/* --------------------------------------------------------------- a Python already running here */

/* A host that dlopen()ed libpython with local scope (or a ctypes host) has Python's symbols out of the
 * global scope, where the cffi module and the extension modules Python imports look for them. Re-opening
 * the already loaded libpython with RTLD_GLOBAL | RTLD_NOLOAD promotes it without loading anything. */
static int promote_libpython(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name;
    if (name == NULL || name[0] == '\0' || strncmp(base_of(name), "libpython", 9) != 0)
        return 0;
    void *h = dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (h && data)
        *(void **)data = h;
    return 0;
}

static void *python_symbol(const char *name)
{
    void *libpython = NULL;
    void *sym = dlsym(RTLD_DEFAULT, name);
    if (sym)
        return sym;
    dl_iterate_phdr(promote_libpython, &libpython);
    return libpython ? dlsym(libpython, name) : NULL;
}

/* C++ thread-local destructors (cuda.core's context handles) and other exit-time code may call the driver
 * after the host interpreter is gone; entering Python then dereferences a freed interpreter. From the end
 * of Py_FinalizeEx on, every call fails without touching Python. */
static void host_python_finalized(void)
{
    __atomic_store_n(&zluda_shim_disabled, 1, __ATOMIC_RELEASE);
}

/* Loaded into a running Python of another minor version, the cffi module's Py* calls would bind to that
 * interpreter, whose ABI differs: entering Python would hang or crash the host. Refuse every call. */
static int joinable_host_python(void)
{
    const char *(*get_version)(void) = (const char *(*)(void))python_symbol("Py_GetVersion");
    char want[32];
    snprintf(want, sizeof want, "%s.", ZLUDA_PY_VERSION);
    const char *running = get_version ? get_version() : "?";
    if (strncmp(running, want, strlen(want)) == 0)
        return 1;
    say("this libcuda.so.1 was built for Python %s but the process runs Python %.*s: every CUDA call will "
        "fail; build a shim with that Python (python3.X -m zluda_py.cli libdir)",
        ZLUDA_PY_VERSION, (int)strcspn(running, " "), running);
    return 0;
}

/* Called at load time and again before starting Python: a C program may have started its own Python
 * between the two, which is then joined rather than started a second time. */
static void join_host_python(void)
{
    int (*is_initialized)(void) = (int (*)(void))python_symbol("Py_IsInitialized");
    host_is_python = is_initialized && is_initialized();
    if (!host_is_python)
        return;
    if (!joinable_host_python()) {
        disable(ZLUDA_ERR_INIT_FAILED);
        return;
    }
    int (*at_exit)(void (*)(void)) = (int (*)(void (*)(void)))python_symbol("Py_AtExit");
    if (at_exit)
        at_exit(host_python_finalized);
}

__attribute__((constructor)) static void zluda_shim_loaded(void)
{
    join_host_python();
}

/* --------------------------------------------------------------- finding this installation's Python */

/* The package directory's interpreter when the package sits in a site-packages (a wheel install):
 * <prefix>/lib{,64}/pythonX.Y/site-packages/zluda_py/_lib/<this>  ->  <prefix>/bin/pythonX.Y. */
static int python_of_site_packages(const char *libdir, char *exe, size_t cap)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", libdir);
    dir_of(p);                                   /* .../site-packages/zluda_py */
    dir_of(p);                                   /* .../site-packages */
    const char *sp = base_of(p);
    if (strcmp(sp, "site-packages") != 0 && strcmp(sp, "dist-packages") != 0)
        return 0;
    dir_of(p);                                   /* .../lib/pythonX.Y (Debian: .../lib/python3) */
    if (strncmp(base_of(p), "python3", 7) != 0)
        return 0;
    dir_of(p);                                   /* .../lib */
    dir_of(p);                                   /* <prefix> */
    const char *names[] = {"python" ZLUDA_PY_VERSION, "python3", "python"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(exe, cap, "%s/bin/%s", p, names[i]);
        if (access(exe, X_OK) == 0)
            return 1;
    }
    snprintf(exe, cap, "%s/bin/python%s", p, ZLUDA_PY_VERSION);
    return -1;                                   /* the installation's interpreter is gone */
}

/* The base installation of an interpreter: a venv's pyvenv.cfg names it ("home = <base>/bin"). */
static void base_prefix_of(const char *exe, char *out, size_t cap)
{
    char dir[PATH_MAX], cfg[PATH_MAX + 16], line[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", exe);
    dir_of(dir);
    for (int up = 0; up < 2; up++) {
        snprintf(cfg, sizeof cfg, "%s/pyvenv.cfg", dir);
        FILE *f = fopen(cfg, "r");
        if (f) {
            while (fgets(line, sizeof line, f)) {
                char *k = line + strspn(line, " \t");
                if (strncmp(k, "home", 4) != 0)
                    continue;
                char *v = strchr(k, '=');
                if (!v)
                    continue;
                v += 1 + strspn(v + 1, " \t");
                v[strcspn(v, "\r\n")] = '\0';
                fclose(f);
                snprintf(out, cap, "%s", v);
                dir_of(out);                     /* home is the base's bin directory */
                return;
            }
            fclose(f);
        }
        dir_of(dir);
    }
    char real[PATH_MAX];
    snprintf(out, cap, "%s", realpath(exe, real) ? real : exe);
    dir_of(out);
    dir_of(out);
}

static void *load_libpython(const char *exe, char *tried, size_t cap)
{
    char base[PATH_MAX], path[PATH_MAX * 2];
    base_prefix_of(exe, base, sizeof base);
    const char *dirs[] = {ZLUDA_PY_LIBDIR_REL, "lib", "lib64", "lib/" ZLUDA_PY_MULTIARCH};
    tried[0] = '\0';
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        if (!dirs[i][0])
            continue;
        snprintf(path, sizeof path, "%s/%s/%s", base, dirs[i], ZLUDA_PY_SONAME);
        if (is_file(path)) {
            void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
            if (h)
                return h;
            snprintf(tried, cap, "%s (%s)", path, dlerror());
            return NULL;
        }
    }
    void *h = dlopen(ZLUDA_PY_SONAME, RTLD_NOW | RTLD_GLOBAL);   /* a distribution's, on the search path */
    if (!h)
        snprintf(tried, cap, "%s/lib/%s", base, ZLUDA_PY_SONAME);
    return h;
}

/* Where the cffi module is: beside this library, else where this library was built (a copy of
 * libcuda.so.1 next to an application still reaches its installation). 0 when found. */
static int find_module_dir(char *dir, size_t cap)
{
    char real[PATH_MAX], path[PATH_MAX * 2];
    const char *here = zluda_shim_path();
    if (here[0] && realpath(here, real)) {
        snprintf(dir, cap, "%s", real);
        dir_of(dir);
        snprintf(path, sizeof path, "%s/" ZLUDA_MODULE_FILE, dir);
        if (is_file(path))
            return 0;
    }
    snprintf(dir, cap, "%s", ZLUDA_BUILD_LIBDIR);
    snprintf(path, sizeof path, "%s/" ZLUDA_MODULE_FILE, dir);
    if (is_file(path))
        return 0;
    say("the driver cannot start: %s is missing beside %s (reinstall zluda-py, or use the directory "
        "`zluda-py libdir` prints): no CUDA device", ZLUDA_MODULE_FILE, here[0] ? here : "libcuda.so.1");
    return -1;
}

/* Which interpreter a C host gets: $ZLUDA_PYTHON, else the one whose site-packages holds the package,
 * else the one that built this library (a checkout). 0 when found; else the line is said. */
static int find_python(const char *libdir, char *exe, size_t cap)
{
    const char *env = getenv("ZLUDA_PYTHON");
    if (env && *env) {
        snprintf(exe, cap, "%s", env);
        if (access(exe, X_OK) == 0)
            return 0;
        say("ZLUDA_PYTHON=%s is not an executable Python interpreter: no CUDA device", env);
        return -1;
    }
    int found = python_of_site_packages(libdir, exe, cap);
    if (found > 0)
        return 0;
    if (found == 0) {
        if (!ZLUDA_BUILD_PYTHON[0]) {
            say("this libcuda.so.1 lies outside a Python installation (%s) and records none: no CUDA device "
                "(use the directory `zluda-py libdir` prints, or set ZLUDA_PYTHON)", libdir);
            return -1;
        }
        snprintf(exe, cap, "%s", ZLUDA_BUILD_PYTHON);
        if (access(exe, X_OK) == 0)
            return 0;
    }
    say("the Python interpreter this zluda-py was installed with (%s) is gone: no CUDA device "
        "(reinstall zluda-py, or set ZLUDA_PYTHON to a Python %s that has it)", exe, ZLUDA_PY_VERSION);
    return -1;
}

static void start_python(void)
{
    char dir[PATH_MAX], exe[PATH_MAX], why[PATH_MAX * 2 + 64], path[PATH_MAX * 2];
    if (__atomic_load_n(&zluda_shim_disabled, __ATOMIC_ACQUIRE))
        return;
    if (!host_is_python)
        join_host_python();
    if (__atomic_load_n(&zluda_shim_disabled, __ATOMIC_ACQUIRE))
        return;
    /* The module before the interpreter: where it lies says which installation this is. */
    if (find_module_dir(dir, sizeof dir) != 0) {
        disable(ZLUDA_ERR_NO_DEVICE);
        return;
    }
    if (!host_is_python) {
        if (find_python(dir, exe, sizeof exe) != 0) {
            disable(ZLUDA_ERR_NO_DEVICE);
            return;
        }
        if (!load_libpython(exe, why, sizeof why)) {
            say("the driver cannot start: libpython %s of %s not found (%s): no CUDA device", ZLUDA_PY_VERSION,
                exe, why);
            disable(ZLUDA_ERR_NO_DEVICE);
            return;
        }
    }
    snprintf(path, sizeof path, "%s/" ZLUDA_MODULE_FILE, dir);
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int (*embed_start)(const char *, char *, size_t) =
        module ? (int (*)(const char *, char *, size_t))dlsym(module, "zluda_embed_start") : NULL;
    if (!embed_start) {
        say("the driver cannot start: %s", dlerror());
        disable(ZLUDA_ERR_INIT_FAILED);
        return;
    }
    int rc = embed_start(host_is_python ? NULL : exe, why, sizeof why);
    if (rc != 0) {
        say("the driver cannot start: %s (run: zluda-py doctor)", why);
        disable(rc == 1 ? ZLUDA_ERR_NO_DEVICE : ZLUDA_ERR_INIT_FAILED);
        return;
    }
    if (zluda_bind_python(module) != 0) {
        say("the driver cannot start: %s lacks entry points (%s)", ZLUDA_MODULE_FILE, dlerror());
        disable(ZLUDA_ERR_INIT_FAILED);
        return;
    }
    start_status = 0;
}

int zluda_python_start(void)
{
    pthread_once(&start_once, start_python);
    return start_status;
}
