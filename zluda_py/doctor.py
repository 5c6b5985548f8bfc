"""`zluda-py doctor`: checks an installation the way a user with a problem needs it checked, and prints
the fix for every problem found. Exit status 1 when something that blocks running programs is wrong."""

import ctypes
import ctypes.util
import glob
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

OK, WARN, FAIL = "ok", "--", "!!"


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
        rep.line(FAIL, "no C compiler: the shim is compiled on first use",
                 "install gcc (Debian/Ubuntu: apt install gcc; Fedora: dnf install gcc)")
    else:
        rep.line(OK, f"C compiler: {cc}")
    for mod, pip_name in (("cffi", "cffi>=1.17"), ("llvmlite", "llvmlite"), ("numpy", "numpy"), ("lz4", "lz4"),
                          ("zstandard", "zstandard"), ("msgpack", "msgpack")):
        try:
            m = importlib.import_module(mod)
            rep.line(OK, f"{mod} {getattr(m, '__version__', '')}".rstrip())
        except Exception as e:  # noqa: BLE001
            rep.line(FAIL, f"{mod} cannot be imported: {e}", f"{sys.executable} -m pip install '{pip_name}'")


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
    if r.returncode == 0 and r.stdout.split() == ["0", "13000"]:
        rep.line(OK, "shim loads in a running Python (ctypes) and answers cuDriverGetVersion = 13000")
    else:
        rep.line(FAIL, f"the shim does not work from Python: {(r.stdout + r.stderr).strip()[-600:]}",
                 "run with ZLUDA_LOG=1 ZLUDA_TRACE=1 for details; rebuild with: "
                 "python3 -m zluda_py._shim_build --force")
    _check_from_c(rep, path, env)
    return path


def _check_from_c(rep: Report, path: str, env) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        return
    src = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    int (*ver)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    int v = 0, r = ver(&v);
    printf("%d %d\n", r, v);
    return r;
}
"""
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        with open(c, "w") as f:
            f.write(src)
        b = subprocess.run([cc, c, "-o", exe, "-ldl"], capture_output=True, text=True)
        if b.returncode != 0:
            rep.line(WARN, f"could not compile the C load test: {b.stderr.strip()[-300:]}")
            return
        r = subprocess.run([exe, path], capture_output=True, text=True, env=env, cwd=d, timeout=120)
    if r.returncode == 0 and r.stdout.split() == ["0", "13000"]:
        rep.line(OK, "shim loads from a C program (dlopen RTLD_LOCAL) with the embedded interpreter")
    else:
        rep.line(FAIL, f"a C program cannot use the shim: {(r.stdout + r.stderr).strip()[-600:]}",
                 "run it with ZLUDA_LOG=1; if Python cannot find its standard library, set PYTHONHOME="
                 f"{sys.base_prefix}")


def check_real_driver(rep: Report) -> None:
    found = ctypes.util.find_library("cuda")
    if found:
        rep.line(WARN, f"another libcuda is on the default library path ({found}); programs started without "
                       "`zluda-py run` will use it", "start programs with: zluda-py run -- PROGRAM ARGS")


def check_backends(rep: Report) -> None:
    from zluda_py import devinfo
    usable, why = devinfo.backend_status("cpu")
    rep.line(OK if usable else FAIL, f"cpu backend: {'usable' if usable else 'not usable'} ({why})",
             "" if usable else "reinstall zluda-py: pip install --force-reinstall zluda-py")
    _check_hip(rep, devinfo)


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
        return
    if not problems:
        problems.append((why, "see the reason above"))
    rep.line(WARN, f"hip backend: not usable ({why}); the cpu backend is used instead")
    for what, fix in problems:
        rep.line(WARN, f"  {what}", fix)


def check_llvm(rep: Report) -> None:
    try:
        import llvmlite
        import llvmlite.binding as llvm
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
    check_shim(rep)
    check_real_driver(rep)
    check_backends(rep)
    print("no problems found" if rep.failed == 0 else f"{rep.failed} problem(s) found")
    return 1 if rep.failed else 0
