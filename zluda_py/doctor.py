"""`zluda-py doctor`: checks an installation the way a user with a problem needs it checked, down to a kernel
compiled and launched through the installed libcuda.so.1, and prints the fix for every problem found."""

import ctypes
import ctypes.util
import glob
import importlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

OK, WARN, FAIL = "ok", "--", "!!"

# The oldest release of each dependency that works, as pyproject.toml declares them (tests/install checks
# the two agree). llvmlite 0.44 (LLVM 15) cannot parse the generated IR; 0.45-0.47 (LLVM 20) miscompile
# PTX min/max (max(1.0, 0.0) gives 0.0); 0.48 (LLVM 22) is the first that passes the instruction tests.
FLOORS = {"cffi": "1.17", "llvmlite": "0.48", "numpy": "1.23", "lz4": "4", "zstandard": "0.22", "msgpack": "1.0"}
FLOOR_WHY = {"llvmlite": "older releases cannot parse the generated LLVM IR (LLVM 15) or miscompile PTX "
                         "min/max (LLVM 20)"}


def version_tuple(v: str) -> tuple:
    """(0, 48, 0) from "0.48.0rc1": the leading numeric parts, enough to compare against a floor."""
    out = []
    for part in v.split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
        if m.end() != len(part):
            break
    return tuple(out)


def below_floor(dist: str, version: str):
    """The sentence saying why `version` of `dist` is too old, or None."""
    floor = FLOORS.get(dist)
    if floor is None or version_tuple(version) >= version_tuple(floor):
        return None
    why = FLOOR_WHY.get(dist)
    return f"{dist} {version} is older than {floor}, the oldest zluda-py works with" + (f": {why}" if why else "")


class Report:
    def __init__(self):
        self.failed = 0

    def line(self, level: str, what: str, fix: str = "") -> None:
        print(f"[{level}] {what}")
        if fix:
            for i, part in enumerate(fix.split("\n")):
                print(f"     {'fix: ' if i == 0 else '     '}{part}")
        if level == FAIL:
            self.failed += 1


def check_python(rep: Report) -> None:
    v = sys.version_info
    if v < (3, 10):
        rep.line(FAIL, f"Python {v.major}.{v.minor}: zluda-py needs 3.10 or newer", "install Python >= 3.10")
    else:
        rep.line(OK, f"Python {sys.version.split()[0]} ({sys.executable})")
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    shared = sysconfig.get_config_var("Py_ENABLE_SHARED")
    lib = os.path.join(libdir, sysconfig.get_config_var("INSTSONAME") or ldlib)
    if not shared or not os.path.exists(lib):
        rep.line(FAIL, f"libpython is not a shared library here ({lib or 'no LIBDIR'}): the shim embeds Python "
                       "and must link against it",
                 "use a Python built with --enable-shared, e.g. with pyenv:\n"
                 "PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install "
                 f"{v.major}.{v.minor}.{v.micro}\nor the distribution's python3 with python3-dev / libpython3-dev")
    else:
        rep.line(OK, f"libpython found: {lib}")
    include = sysconfig.get_paths().get("include", "")
    if not os.path.isfile(os.path.join(include, "Python.h")):
        rep.line(FAIL, f"Python.h missing ({include}): the shim cannot be compiled",
                 f"install the Python headers (Debian/Ubuntu: apt install python{v.major}.{v.minor}-dev)")


def check_tools(rep: Report) -> None:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        rep.line(FAIL, "no C compiler: the CPU runtime (and a checkout's shim) is compiled on first use",
                 "install gcc (Debian/Ubuntu: apt install gcc; Fedora: dnf install gcc)")
    else:
        rep.line(OK, f"C compiler: {cc}")
    for mod in FLOORS:
        try:
            m = importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001
            rep.line(FAIL, f"{mod} cannot be imported: {e}", f"{sys.executable} -m pip install '{mod}>={FLOORS[mod]}'")
            continue
        try:
            version = importlib.metadata.version(mod)
        except importlib.metadata.PackageNotFoundError:
            version = str(getattr(m, "__version__", ""))
        old = below_floor(mod, version) if version else None
        if old:
            rep.line(FAIL, old, f"{sys.executable} -m pip install --upgrade '{mod}>={FLOORS[mod]}'")
        else:
            rep.line(OK, f"{mod} {version}".rstrip())


def _runtime_sources():
    """(what, its source files, the function that builds it) for each C library compiled at run time, as
    the modules that build them name their sources."""
    from ptx.codegen import native_helpers
    from ptx.runtime import build as rt_build
    from zluda_py.backends.cpu import launchq
    return [("CPU runtime (ptx/runtime)", [rt_build.HERE / n for n in rt_build.SOURCES], rt_build.ensure_built),
            ("warp scheduler (ptx/codegen)", list(native_helpers.SOURCES), native_helpers._build),
            ("native launch queue (zluda_py/backends/cpu)", [launchq.HERE / n for n in launchq.INPUTS],
             launchq._build)]


def check_runtime_sources(rep: Report) -> None:
    """A wheel that left out a C source imports fine and fails every launch: look for each, then build it."""
    try:
        libs = _runtime_sources()
    except Exception as e:  # noqa: BLE001
        rep.line(FAIL, f"the CPU backend's modules cannot be imported: {type(e).__name__}: {e}",
                 "reinstall zluda-py: pip install --force-reinstall zluda-py")
        return
    for what, sources, build in libs:
        missing = [str(p) for p in sources if not os.path.isfile(p)]
        if missing:
            rep.line(FAIL, f"{what}: {', '.join(missing)} missing from this installation, so every kernel "
                           "launch fails", "the package was built without its C sources (a packaging bug): "
                           "reinstall from a wheel or checkout that has them,\n"
                           f"e.g. {sys.executable} -m pip install --force-reinstall --no-cache-dir zluda-py")
            continue
        try:
            built = build()
        except Exception as e:  # noqa: BLE001
            rep.line(FAIL, f"{what} does not build: {str(e).strip()[-600:]}",
                     "check the C compiler (set CC to one that works) and that the cache directory "
                     "(~/.cache/zluda-py or XDG_CACHE_HOME) is writable")
            continue
        rep.line(OK, f"{what} built: {built}")


def check_shim(rep: Report):
    """Builds the shim (if needed), then loads it in fresh processes the two ways clients do."""
    from zluda_py import _shim_build
    try:
        out = _shim_build.ensure_built()
    except Exception as e:  # noqa: BLE001
        rep.line(FAIL, f"the shim does not build: {type(e).__name__}: {str(e)[-600:]}",
                 "fix the problems above (compiler, Python headers, libpython), then run: zluda-py libdir")
        return None
    path = os.path.join(out, "libcuda.so.1")
    rep.line(OK, f"shim built: {path}")
    ldd = shutil.which("ldd")
    if ldd:
        deps = subprocess.run([ldd, path], capture_output=True, text=True).stdout
        missing = [l.split()[0] for l in deps.splitlines() if "not found" in l]
        if missing:
            rep.line(FAIL, f"the shim's libraries are not found: {', '.join(missing)}",
                     f"export LD_LIBRARY_PATH={sysconfig.get_config_var('LIBDIR')}:$LD_LIBRARY_PATH\n"
                     "or rebuild the shim with the Python it should use: zluda-py libdir")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = ("import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); v=ctypes.c_int(); "
             "r=l.cuDriverGetVersion(ctypes.byref(v)); print(r, v.value)")
    r = subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True, env=env,
                       cwd=tempfile.gettempdir(), timeout=120)
    if r.returncode == 0 and r.stdout.split() == ["0", str(_driver_version())]:
        rep.line(OK, f"shim loads in a running Python (ctypes) and answers cuDriverGetVersion = {_driver_version()}")
    else:
        rep.line(FAIL, f"the shim does not work from Python: {(r.stdout + r.stderr).strip()[-600:]}",
                 "run with ZLUDA_LOG=1 ZLUDA_TRACE=1 for details; rebuild with: "
                 "python3 -m zluda_py._shim_build --force")
    return path


# The probe a C program makes of the installed libcuda.so.1, as an nvcc-built program uses it (dlopen, so
# that the library under test is this installation's whatever the library path says). Modes:
#   version  cuDriverGetVersion
#   kernel   compiles PTX_KERNEL and launches it over N inputs; prints "x h b e" as hex bits per element
#   whoami   cuInit, then asks the interpreter the library started which one it is
PROBE_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

typedef unsigned long long dptr;
static void *lib;
static const char *(*err_name)(int);

static void *sym(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { printf("nosym %s\n", name); exit(4); }
    return p;
}

static void check(const char *what, int rc) {
    if (rc == 0) return;
    const char *name = NULL;
    if (err_name) { const char *(*f)(int, const char **) = (void *)err_name; f(rc, &name); }
    printf("fail %s %d %s\n", what, rc, name ? name : "");
    exit(3);
}

static int version(void) {
    int (*get)(int *) = sym("cuDriverGetVersion");
    int v = 0, r = get(&v);
    printf("%d %d\n", r, v);
    return r;
}

static int kernel(const char *ptx_file, int n) {
    FILE *f = fopen(ptx_file, "rb");
    if (!f) { printf("cannot read %s\n", ptx_file); return 1; }
    static char ptx[65536];
    size_t len = fread(ptx, 1, sizeof ptx - 1, f);
    fclose(f);
    ptx[len] = 0;
    err_name = sym("cuGetErrorName");
    int (*init)(unsigned) = sym("cuInit");
    int (*device_get)(int *, int) = sym("cuDeviceGet");
    int (*retain)(void **, int) = sym("cuDevicePrimaryCtxRetain");
    int (*set_current)(void *) = sym("cuCtxSetCurrent");
    int (*load)(void **, const void *) = sym("cuModuleLoadData");
    int (*get_function)(void **, void *, const char *) = sym("cuModuleGetFunction");
    int (*mem_alloc)(dptr *, size_t) = sym("cuMemAlloc_v2");
    int (*htod)(dptr, const void *, size_t) = sym("cuMemcpyHtoD_v2");
    int (*dtoh)(void *, dptr, size_t) = sym("cuMemcpyDtoH_v2");
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                  void **, void **) = sym("cuLaunchKernel");
    int (*sync)(void) = sym("cuCtxSynchronize");
    int dev;
    void *ctx, *mod, *fn;
    check("cuInit", init(0));
    check("cuDeviceGet", device_get(&dev, 0));
    check("cuDevicePrimaryCtxRetain", retain(&ctx, dev));
    check("cuCtxSetCurrent", set_current(ctx));
    check("cuModuleLoadData", load(&mod, ptx));
    check("cuModuleGetFunction", get_function(&fn, mod, "zluda_doctor"));
    size_t bytes = (size_t)n * 4;
    uint32_t *host = malloc(bytes * 4);
    for (int i = 0; i < n; i++) {       /* spread over [-9, 9] with bits below f16 and bf16 precision */
        float x = -9.0f + 18.0f * (float)i / (float)n + (float)i * 1e-7f;
        memcpy(&host[i], &x, 4);
    }
    for (int i = n; i < 4 * n; i++)
        host[i] = 0x7fc00bad;           /* a NaN no result can be */
    dptr d[4];
    for (int k = 0; k < 4; k++) {
        check("cuMemAlloc", mem_alloc(&d[k], bytes));
        check("cuMemcpyHtoD", htod(d[k], host + (size_t)k * n, bytes));
    }
    void *args[] = {&d[0], &d[1], &d[2], &d[3], &n};
    check("cuLaunchKernel", launch(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    check("cuCtxSynchronize", sync());
    for (int k = 1; k < 4; k++)
        check("cuMemcpyDtoH", dtoh(host + (size_t)k * n, d[k], bytes));
    printf("ok %d\n", n);
    for (int i = 0; i < n; i++)
        printf("%08x %08x %08x %08x\n", host[i], host[n + i], host[2 * n + i], host[3 * n + i]);
    return 0;
}

static char pylib[4096];
static int find_libpython(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size; (void)data;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libpython", 9) != 0) return 0;
    snprintf(pylib, sizeof pylib, "%s", info->dlpi_name);
    return 1;
}

static int whoami(void) {
    int (*init)(unsigned) = sym("cuInit");
    printf("cuInit %d\n", init(0));
    fflush(stdout);
    dl_iterate_phdr(find_libpython, NULL);
    void *py = pylib[0] ? dlopen(pylib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!py) { printf("no libpython in the process\n"); return 2; }
    int (*ensure)(void) = dlsym(py, "PyGILState_Ensure");
    void (*release)(int) = dlsym(py, "PyGILState_Release");
    int (*run)(const char *) = dlsym(py, "PyRun_SimpleString");
    int (*ready)(void) = dlsym(py, "Py_IsInitialized");
    if (!ensure || !release || !run || !ready || !ready()) { printf("Python is not running\n"); return 2; }
    int g = ensure();
    run("import sys\n"
        "m = sys.modules.get('zluda_py')\n"
        "sys.stdout.write('who\\t%s\\t%s\\t%s\\n' % (sys.executable, sys.prefix, getattr(m, '__file__', '')))\n"
        "sys.stdout.flush()\n");
    release(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { printf("dlopen: %s\n", dlerror()); return 1; }
    if (!strcmp(argv[2], "version")) return version();
    if (!strcmp(argv[2], "kernel") && argc == 5) return kernel(argv[3], atoi(argv[4]));
    if (!strcmp(argv[2], "whoami")) return whoami();
    return 2;
}
"""

# nvcc -ptx -arch=compute_80 of: h[i] = __half2float(__float2half(x[i])); b[i] =
# __bfloat162float(__float2bfloat16(x[i])); e[i] = expf(x[i]). Half/bf16 conversions and expf's exp2 are
# what a CPU without F16C, or LLVM's lowering, turns into calls the JIT must resolve (libcalls).
PTX_KERNEL = """\
.version 9.0
.target sm_80
.address_size 64
.visible .entry zluda_doctor(.param .u64 px, .param .u64 ph, .param .u64 pb, .param .u64 pe, .param .u32 pn)
{
    .reg .pred %p<2>;
    .reg .b16 %rs<5>;
    .reg .f32 %f<22>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<14>;
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [ph];
    ld.param.u64 %rd3, [pb];
    ld.param.u64 %rd4, [pe];
    ld.param.u32 %r2, [pn];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra $L__BB0_2;
    cvta.to.global.u64 %rd5, %rd1;
    mul.wide.s32 %rd6, %r1, 4;
    add.s64 %rd7, %rd5, %rd6;
    ld.global.f32 %f1, [%rd7];
    cvt.rn.f16.f32 %rs1, %f1;
    cvt.f32.f16 %f2, %rs1;
    cvta.to.global.u64 %rd8, %rd2;
    add.s64 %rd9, %rd8, %rd6;
    st.global.f32 [%rd9], %f2;
    ld.global.f32 %f3, [%rd7];
    cvt.rn.bf16.f32 %rs3, %f3;
    mov.b32 %f4, {0, %rs3};
    cvta.to.global.u64 %rd10, %rd3;
    add.s64 %rd11, %rd10, %rd6;
    st.global.f32 [%rd11], %f4;
    ld.global.f32 %f5, [%rd7];
    mov.f32 %f6, 0f3F000000;
    mov.f32 %f7, 0f3BBB989D;
    fma.rn.f32 %f8, %f5, %f7, %f6;
    cvt.sat.f32.f32 %f9, %f8;
    mov.f32 %f10, 0f4B400001;
    mov.f32 %f11, 0f437C0000;
    fma.rm.f32 %f12, %f9, %f11, %f10;
    add.f32 %f13, %f12, 0fCB40007F;
    neg.f32 %f14, %f13;
    mov.f32 %f15, 0f3FB8AA3B;
    fma.rn.f32 %f16, %f5, %f15, %f14;
    mov.f32 %f17, 0f32A57060;
    fma.rn.f32 %f18, %f5, %f17, %f16;
    mov.b32 %r6, %f12;
    shl.b32 %r7, %r6, 23;
    mov.b32 %f19, %r7;
    ex2.approx.ftz.f32 %f20, %f18;
    mul.f32 %f21, %f20, %f19;
    cvta.to.global.u64 %rd12, %rd4;
    add.s64 %rd13, %rd12, %rd6;
    st.global.f32 [%rd13], %f21;
$L__BB0_2:
    ret;
}
"""
KERNEL_N = 1000     # not a multiple of the block: the bounds check runs too


class Probe:
    """PROBE_C compiled once into a temporary directory (None where there is no C compiler)."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="zluda-doctor-")
        self.exe = None
        self.error = None
        cc = shutil.which(os.environ.get("CC", "")) or shutil.which("gcc") or shutil.which("cc")
        if not cc:
            self.error = "no C compiler"
            return
        c = os.path.join(self.dir.name, "probe.c")
        with open(c, "w") as f:
            f.write(PROBE_C)
        exe = os.path.join(self.dir.name, "probe")
        b = subprocess.run([cc, c, "-o", exe, "-ldl"], capture_output=True, text=True)
        if b.returncode != 0:
            self.error = b.stderr.strip()[-300:]
            return
        self.exe = exe
        self.ptx = os.path.join(self.dir.name, "kernel.ptx")
        with open(self.ptx, "w") as f:
            f.write(PTX_KERNEL)

    def run(self, lib: str, *args, env=None, timeout=300):
        return subprocess.run([self.exe, lib, *args], capture_output=True, text=True, env=env,
                              cwd=self.dir.name, timeout=timeout)


def _driver_version() -> int:
    """The CUDA version the declarations (and so cuDriverGetVersion) are of."""
    from zluda_py.decls import DATA
    return DATA["cuda_version"]


def _without_pythonpath():
    # The shim must find its package from where it lies; PYTHONPATH would hide a broken installation.
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def check_c_load(rep: Report, probe: Probe, path: str) -> None:
    r = probe.run(path, "version", env=_without_pythonpath(), timeout=120)
    if r.returncode == 0 and r.stdout.split() == ["0", str(_driver_version())]:
        rep.line(OK, "shim loads from a C program (dlopen RTLD_LOCAL) with the embedded interpreter")
    else:
        rep.line(FAIL, f"a C program cannot use the shim: {(r.stdout + r.stderr).strip()[-600:]}",
                 "run it with ZLUDA_LOG=1; if Python cannot find its standard library, set PYTHONHOME="
                 f"{sys.base_prefix}")


def expected_results(x):
    """What the kernel must give for inputs x (float32): f16 and bf16 round trips (round to nearest even,
    exact) and expf (within a few ulp: ex2.approx is not correctly rounded)."""
    import numpy as np
    x = np.asarray(x, np.float32)
    h = x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    b = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    e = np.exp(x.astype(np.float64))
    return h, b, e


def kernel_problems(lines, n: int) -> list:
    """Every way the probe's "kernel" output differs from expected_results, as sentences (none: correct)."""
    import numpy as np
    if not lines or lines[0] != f"ok {n}" or len(lines) < n + 1:
        return ["the kernel did not run: " + (" | ".join(lines[:3]) or "no output")]
    words = np.array([[int(w, 16) for w in ln.split()] for ln in lines[1:n + 1]], dtype=np.uint32)
    x, h, b, e = (words[:, k].view(np.float32) for k in range(4))
    want_h, want_b, want_e = expected_results(x)
    out = []
    for name, got, want in (("f16 round trip", h, want_h), ("bf16 round trip", b, want_b)):
        bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        if bad.size:
            i = bad[0]
            out.append(f"{name}: {bad.size} of {n} wrong, e.g. x={x[i]:.9g} gave {got[i]:.9g}, want {want[i]:.9g}")
    err = np.abs(e.astype(np.float64) - want_e) / want_e
    bad = np.flatnonzero(~(err <= 4e-7))
    if bad.size:
        i = bad[0]
        out.append(f"expf: {bad.size} of {n} wrong, e.g. expf({x[i]:.9g}) gave {e[i]:.9g}, want {want_e[i]:.9g}")
    return out


def check_kernel(rep: Report, probe: Probe, path: str, backend: str) -> None:
    """Compiles and launches PTX_KERNEL through the library on one backend and checks every element."""
    env = _without_pythonpath()
    env.pop("ZLUDA_LOG_FILE", None)
    # A fresh compile (no cached object): an unresolved symbol or a compiler crash must show here.
    env.update(ZLUDA_BACKEND=backend, ZLUDA_LOG="1", ZLUDA_JIT_CACHE="0")
    try:
        r = probe.run(path, "kernel", probe.ptx, str(KERNEL_N), env=env)
    except subprocess.TimeoutExpired:
        rep.line(FAIL, f"{backend} backend: the test kernel did not finish in 300 s",
                 "run a program with ZLUDA_LOG=1 ZLUDA_TRACE=1 to see where it stops")
        return
    log = [ln for ln in r.stderr.splitlines() if ln.startswith("[zluda]")]
    problems = kernel_problems(r.stdout.splitlines(), KERNEL_N)
    if r.returncode != 0 and not problems:
        problems.append(f"the probe exited {r.returncode}")
    if problems:
        detail = "; ".join(problems) + ("\n     log: " + "\n     log: ".join(log[-6:]) if log else "")
        rep.line(FAIL, f"{backend} backend: a kernel (f16/bf16 conversion, expf) compiled and launched through "
                       f"{path} gives wrong results or none: {detail}",
                 "an unresolved symbol or a compiler error is named in the log lines above; reinstall zluda-py "
                 "(pip install --force-reinstall zluda-py), and report the lines if it persists")
        return
    rep.line(OK, f"{backend} backend: a kernel compiled and launched through the shim gives every element right "
                 f"({KERNEL_N} f16/bf16 round trips and expf)")
    if backend == "cpu":
        slow = [ln for ln in log if "native launch queue unavailable" in ln]
        if os.environ.get("ZLUDA_CPU_NATIVE_QUEUE") == "0":
            rep.line(WARN, "ZLUDA_CPU_NATIVE_QUEUE=0: launches take the slow Python path", "unset ZLUDA_CPU_NATIVE_QUEUE")
        elif slow:
            rep.line(FAIL, f"launches took the slow Python path: {slow[0]}",
                     "the native launch queue (zluda_py/backends/cpu/launchq.c) must build: see the lines above")


def _same_path(a: str, b: str) -> bool:
    return bool(a) and bool(b) and os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def check_clean_environment(rep: Report, probe: Probe, path: str) -> None:
    """A program started by cron, systemd, an IDE or another shell has none of this shell's variables: the
    shim must still start this installation's Python (prefix, site-packages, executable), not PATH's."""
    import zluda_py
    clean = {"PATH": "/usr/bin:/bin", "HOME": os.path.expanduser("~")}
    what = "started from a clean environment (env -i PATH=/usr/bin:/bin)"
    try:
        r = probe.run(path, "whoami", env=clean, timeout=120)
    except subprocess.TimeoutExpired:
        rep.line(FAIL, f"{what}, the shim did not answer cuInit in 120 s", "run a program with ZLUDA_LOG=1")
        return
    who = next((ln.split("\t")[1:] for ln in r.stdout.splitlines() if ln.startswith("who\t")), None)
    ours = os.path.dirname(os.path.realpath(zluda_py.__file__))
    fix = ("programs started outside this shell (cron, systemd, an IDE) fail or use another installation: "
           f"reinstall zluda-py with this Python,\n{sys.executable} -m pip install --force-reinstall zluda-py\n"
           f"or set ZLUDA_PYTHON={sys.executable} in their environment")
    if who is None or len(who) != 3:
        out = (r.stdout + r.stderr).strip().splitlines()
        rep.line(FAIL, f"{what}, the shim did not start Python: {' | '.join(out[-4:]) or f'exit {r.returncode}'}",
                 fix)
        return
    exe, prefix, package = who
    wrong = []
    if not _same_path(prefix, sys.prefix):
        wrong.append(f"its sys.prefix is {prefix}, not {sys.prefix}")
    if not package:
        wrong.append("it could not import zluda_py")
    elif not _same_path(os.path.dirname(os.path.realpath(package)), ours):
        wrong.append(f"it imported zluda_py from {os.path.dirname(package)}, not {ours}")
    if not wrong:
        # Whatever the shim's Python spawns (sys.executable) must be this installation too.
        p = subprocess.run([exe, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                           env=clean, timeout=60) if os.access(exe, os.X_OK) else None
        if p is None or not _same_path(p.stdout.strip(), sys.prefix):
            wrong.append(f"its sys.executable {exe} runs another installation "
                         f"({p.stdout.strip() if p else 'not executable'})")
    if wrong:
        rep.line(FAIL, f"{what}, the shim starts the wrong Python: {'; '.join(wrong)}", fix)
    else:
        rep.line(OK, f"{what}, the shim starts this installation's Python ({exe})")


def check_real_driver(rep: Report) -> None:
    found = ctypes.util.find_library("cuda")
    if found:
        rep.line(WARN, f"another libcuda is on the default library path ({found}); programs started without "
                       "`zluda-py run` will use it", "start programs with: zluda-py run -- PROGRAM ARGS")


def check_backends(rep: Report) -> list:
    """The backends to launch the test kernel on: the CPU always (where it is broken the launch says how),
    HIP where it is usable."""
    from zluda_py import devinfo
    usable, why = devinfo.backend_status("cpu")
    rep.line(OK if usable else FAIL, f"cpu backend: {'usable' if usable else 'not usable'} ({why})",
             "" if usable else "reinstall zluda-py: pip install --force-reinstall zluda-py")
    return ["cpu"] + (["hip"] if _check_hip(rep, devinfo) else [])


def _find_amdhip():
    names = ["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"]
    roots = [os.environ.get("ROCM_PATH", ""), "/opt/rocm"] + sorted(glob.glob("/opt/rocm-*"), reverse=True)
    errors = []
    for n in names:
        for cand in [n] + [os.path.join(r, "lib", n) for r in roots if r]:
            try:
                return ctypes.CDLL(cand), cand, None
            except OSError as e:
                errors.append(str(e))
    return None, None, errors[0] if errors else "not found"


def _check_hip(rep: Report, devinfo) -> None:
    problems = []
    if importlib.util.find_spec("hip") is None:
        problems.append(("hip-python is not installed",
                         f"{sys.executable} -m pip install 'hip-python~=X.Y' with X.Y your ROCm version "
                         "(e.g. hip-python~=6.2 for ROCm 6.2),\nor: pip install 'zluda-py[hip]'"))
    lib, where, err = _find_amdhip()
    if lib is None:
        problems.append((f"libamdhip64 cannot be loaded ({err})",
                         "install ROCm (https://rocm.docs.amd.com), or set ROCM_PATH / LD_LIBRARY_PATH to its lib/"))
    else:
        count = ctypes.c_int(0)
        r = lib.hipGetDeviceCount(ctypes.byref(count))
        if r != 0 or count.value == 0:
            hint = ("no /dev/kfd: the amdgpu kernel driver is not loaded (or the container lacks --device=/dev/kfd "
                    "--device=/dev/dri)" if not os.path.exists("/dev/kfd") else
                    "add your user to the render and video groups (sudo usermod -aG render,video $USER) "
                    "and check `rocminfo`")
            problems.append((f"no AMD GPU visible through {where} (hipGetDeviceCount -> {r}, {count.value} devices)",
                             hint))
    usable, why = devinfo.backend_status("hip")
    if usable:
        rep.line(OK, f"hip backend: usable ({why})")
        return True
    if not problems:
        problems.append((why, "see the reason above"))
    rep.line(WARN, f"hip backend: not usable ({why}); the cpu backend is used instead")
    for what, fix in problems:
        rep.line(WARN, f"  {what}", fix)
    return False


def check_llvm(rep: Report) -> None:
    try:
        import llvmlite
        import llvmlite.binding as llvm
    except ImportError:
        return      # check_tools named it, with its fix
    except Exception as e:  # noqa: BLE001
        rep.line(FAIL, f"llvmlite cannot be imported: {e}", f"{sys.executable} -m pip install llvmlite")
        return
    try:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
    except Exception:  # noqa: BLE001 - older llvmlite initialises on demand
        pass
    try:
        triple = llvm.get_process_triple()
        llvm.Target.from_triple(triple)
        rep.line(OK, f"llvmlite {llvmlite.__version__}: host target {triple}")
    except Exception as e:  # noqa: BLE001
        rep.line(FAIL, f"llvmlite has no host target: {e}", f"{sys.executable} -m pip install --force-reinstall llvmlite")
    try:
        llvm.Target.from_triple("amdgcn-amd-amdhsa")
        rep.line(OK, "llvmlite: AMDGPU target present")
        from ptx.amdgpu import find_linker
        ld = find_linker()
        if ld:
            rep.line(OK, f"AMDGPU code objects link with {' '.join(ld)}")
        else:
            rep.line(WARN, "no ld.lld: kernels cannot be linked into AMD GPU code objects",
                     "apt-get install lld-19 (Debian/Ubuntu), or pip install ziglang, or set ZLUDA_LLD")
    except Exception as e:  # noqa: BLE001
        rep.line(WARN, f"llvmlite has no AMDGPU target ({e}): kernels cannot be compiled for AMD GPUs",
                 "install an llvmlite built with the AMDGPU target (the PyPI wheels >= 0.44 include it)")


def run() -> int:
    rep = Report()
    print("zluda-py doctor")
    check_python(rep)
    check_tools(rep)
    check_llvm(rep)
    check_runtime_sources(rep)
    path = check_shim(rep)
    check_real_driver(rep)
    usable = check_backends(rep)
    probe = Probe()
    if probe.exe is None:
        rep.line(FAIL, f"cannot compile the C probe ({probe.error}): the shim is not tried from C",
                 "install gcc (Debian/Ubuntu: apt install gcc)")
    elif path:
        check_c_load(rep, probe, path)
        for backend in usable:
            check_kernel(rep, probe, path, backend)
        check_clean_environment(rep, probe, path)
    print("no problems found" if rep.failed == 0 else f"{rep.failed} problem(s) found")
    return 1 if rep.failed else 0
