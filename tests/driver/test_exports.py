"""The built libcuda.so.1: every declared function exported, loadable from C (linked, or dlopen'ed with
RTLD_LOCAL) and from a running Python, unimplemented calls answered 801 and logged once, many threads."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from zluda_py import dispatch
from zluda_py.decls import DATA, FUNCTIONS

CUDA_INC = "/usr/local/cuda/include"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
needs_cuda_h = pytest.mark.skipif(not os.path.isfile(os.path.join(CUDA_INC, "cuda.h")),
                                  reason="CUDA headers not installed")


def clean_env(**extra):
    """The environment of a user who set nothing: no PYTHONPATH, no ZLUDA_* settings."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("ZLUDA_")}
    env.update(extra)
    return env


def compile_c(tmp_path, name, source, *flags):
    src = tmp_path / f"{name}.c"
    src.write_text(textwrap.dedent(source))
    exe = tmp_path / name
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", str(src), "-o", str(exe), *flags], check=True)
    return str(exe)


def test_declarations_cover_every_export_once():
    names = [f["name"] for f in FUNCTIONS]
    assert len(names) == 723 and len(set(names)) == 723    # CUDA 13.5's headers (13.0: 672)
    assert names == sorted(names)
    assert DATA["cuda_version"] == 13050
    abis = {p["abi"] for f in FUNCTIONS for p in f["params"]}
    assert abis <= {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "ptr", "f32", "f64",
                    "struct:8", "struct:64"}


def test_nm_lists_every_function(shim_libdir):
    if shutil.which("nm") is None:
        pytest.skip("nm not installed")
    out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(shim_libdir, "libcuda.so.1")],
                         capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-2] == "T"}
    missing = {f["name"] for f in FUNCTIONS} - exported
    assert not missing, sorted(missing)[:20]
    assert {n for n in exported if n.startswith("cu")} == {f["name"] for f in FUNCTIONS}
    assert os.path.realpath(os.path.join(shim_libdir, "libcuda.so")) == \
        os.path.realpath(os.path.join(shim_libdir, "libcuda.so.1"))


@needs_gcc
@needs_cuda_h
def test_program_linked_with_lcuda(shim_libdir, tmp_path):
    """A program built against cuda.h and linked -lcuda (the shim) gets the driver version and every
    error name/string, as static strings that stay put."""
    names = DATA["enums"]["CUresult"]
    table = "".join(f'{{{v}, "{n}", {json.dumps(DATA["error_strings"][n])}}},\n' for n, v in names.items())
    exe = compile_c(tmp_path, "linked", """
        #include <cuda.h>
        #include <stdio.h>
        #include <string.h>
        static const struct { int code; const char *name, *text; } expected[] = {
        %s};
        int main(void) {
            int v = 0;
            if (cuDriverGetVersion(&v) != CUDA_SUCCESS || v != 13050) { printf("version %%d\\n", v); return 1; }
            if (cuDriverGetVersion(NULL) != CUDA_ERROR_INVALID_VALUE) { printf("NULL accepted\\n"); return 1; }
            for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
                const char *n = NULL, *s = NULL, *n2 = NULL;
                if (cuGetErrorName((CUresult)expected[i].code, &n) || cuGetErrorString((CUresult)expected[i].code, &s)
                    || cuGetErrorName((CUresult)expected[i].code, &n2)) { printf("failed %%d\\n", expected[i].code); return 1; }
                if (strcmp(n, expected[i].name) || strcmp(s, expected[i].text) || n != n2) {
                    printf("mismatch %%d: %%s / %%s\\n", expected[i].code, n, s); return 1; }
            }
            const char *p = (const char *)1;
            if (cuGetErrorName((CUresult)12345, &p) != CUDA_ERROR_INVALID_VALUE || p != NULL) { printf("bad code\\n"); return 1; }
            printf("PASS\\n");
            return 0;
        }
    """ % table, f"-I{CUDA_INC}", f"-L{shim_libdir}", "-lcuda", f"-Wl,-rpath,{shim_libdir}")
    r = subprocess.run([exe], capture_output=True, text=True, env=clean_env(), cwd=str(tmp_path), timeout=120)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


@needs_gcc
def test_dlopen_rtld_local_and_threads(shim_libdir, tmp_path):
    """dlopen(RTLD_LOCAL) from C, first call from a worker thread, 8 threads calling at once; Python
    extension modules (ctypes) still import inside, so libpython's symbols were made global."""
    exe = compile_c(tmp_path, "threads", """
        #include <dlfcn.h>
        #include <pthread.h>
        #include <stdio.h>
        #include <string.h>
        typedef int (*version_fn)(int *);
        typedef int (*name_fn)(int, const char **);
        static version_fn version; static name_fn error_name;
        static void *work(void *arg) {
            long bad = 0;
            for (int i = 0; i < 2000; i++) {
                int v = -1; const char *n = NULL;
                if (version(&v) != 0 || v != 13050) bad++;
                if (error_name(2, &n) != 0 || strcmp(n, "CUDA_ERROR_OUT_OF_MEMORY") != 0) bad++;
            }
            return (void *)bad;
        }
        int main(int argc, char **argv) {
            void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
            if (!h) { printf("dlopen: %s\\n", dlerror()); return 1; }
            version = (version_fn)dlsym(h, "cuDriverGetVersion");
            error_name = (name_fn)dlsym(h, "cuGetErrorName");
            if (!version || !error_name) { printf("dlsym failed\\n"); return 1; }
            pthread_t t[8]; long total = 0;
            for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, work, NULL);
            for (int i = 0; i < 8; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
            printf("bad=%ld\\n", total);
            return total != 0;
        }
    """, "-pthread", "-ldl")
    r = subprocess.run([exe, os.path.join(shim_libdir, "libcuda.so.1")], capture_output=True, text=True,
                       env=clean_env(), cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0 and "bad=0" in r.stdout, r.stdout + r.stderr


def _unimplemented_names(count):
    names = [f["name"] for f in FUNCTIONS if not dispatch.implemented(f["name"])]
    if len(names) < count:
        pytest.skip("fewer unimplemented functions left than this test needs")
    return names[-count:]


def test_unimplemented_returns_801_and_logs_once(shim_libdir, tmp_path):
    """From a fresh Python process (no PYTHONPATH, another working directory): ctypes loads the shim,
    an unimplemented symbol answers CUDA_ERROR_NOT_SUPPORTED, and ZLUDA_LOG=1 names it exactly once."""
    names = _unimplemented_names(2)
    log_file = tmp_path / "zluda.log"
    script = textwrap.dedent(f"""
        import ctypes, sys
        lib = ctypes.CDLL({os.path.join(shim_libdir, 'libcuda.so.1')!r})
        results = [getattr(lib, n)() for n in {names!r} for _ in range(3)]
        print(results)
        import zluda_py  # the shim put its own package on sys.path
        print(zluda_py.__file__)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=str(tmp_path),
                       env=clean_env(ZLUDA_LOG="1", ZLUDA_LOG_FILE=str(log_file)), timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == str([801] * 6)
    assert os.path.realpath(lines[1]).startswith(os.path.realpath(REPO))
    logged = log_file.read_text().splitlines()
    for n in names:
        assert sum(1 for line in logged if line.split()[1].rstrip(":") == n) == 1, logged


def test_unimplemented_silent_without_log(shim_libdir, tmp_path):
    name = _unimplemented_names(1)[0]
    script = (f"import ctypes; lib = ctypes.CDLL({os.path.join(shim_libdir, 'libcuda.so.1')!r}); "
              f"print(lib.{name}())")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=str(tmp_path),
                       env=clean_env(), timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "801" and r.stderr == "", r.stderr


def test_ctypes_threads_in_running_python(shim_libdir):
    """The shim loaded into this very interpreter (as numba or cuda-python would) from 8 threads."""
    import ctypes
    import threading
    lib = ctypes.CDLL(os.path.join(shim_libdir, "libcuda.so.1"))
    errors = []

    def work():
        for _ in range(300):
            v = ctypes.c_int(-1)
            if lib.cuDriverGetVersion(ctypes.byref(v)) != 0 or v.value != 13050:
                errors.append(v.value)
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_broken_installation_fails_every_call(shim_libdir, tmp_path):
    """If the package beside the shim cannot be imported, calls fail with
    CUDA_ERROR_SHARED_OBJECT_INIT_FAILED and one line says why (never a silent 0 = success)."""
    pkg = tmp_path / "zluda_py"
    (pkg / "_lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('deliberately broken for the test')\n")
    (pkg / "dispatch.py").write_text("")
    for name in ("libcuda.so.1", "_zluda_shim.so"):
        shutil.copy(os.path.join(shim_libdir, name), pkg / "_lib" / name)
    script = (f"import ctypes; lib = ctypes.CDLL({str(pkg / '_lib' / 'libcuda.so.1')!r}); "
              "v = ctypes.c_int(7); print(lib.cuDriverGetVersion(ctypes.byref(v)), lib.cuInit(0), v.value)")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=str(tmp_path),
                       env=clean_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["303", "303", "7"]
    assert r.stderr.count("[zluda] the driver cannot start: ImportError: deliberately broken") == 1, r.stderr


def test_argument_packing_every_abi_class(shim_libdir):
    """Each C parameter class reaches the handler as the contract says: signed ints negative, unsigned and
    pointers as unsigned ints, u8/u16 exact, floats as floats, structs by value as the address of a copy."""
    import ctypes
    lib = ctypes.CDLL(os.path.join(shim_libdir, "libcuda.so.1"))
    seen = []

    def capture(name, fn):
        fid = dispatch.FUNCTION_IDS[name]
        lib.cuDriverGetVersion(ctypes.byref(ctypes.c_int()))  # make sure the table is built
        saved = dispatch.HANDLERS[fid]
        dispatch.HANDLERS[fid] = fn
        return fid, saved

    class MemLocation(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    def advise(ptr, count, advice, location):
        raw = ctypes.string_at(location, 8)
        seen.append((ptr, count, advice, int.from_bytes(raw[:4], "little"), int.from_bytes(raw[4:], "little", signed=True)))
        return 0

    def clamp(tex, lo, hi):
        seen.append((tex, lo, hi))

    def attribute(out, attrib, dev):
        seen.append((out, attrib, dev))
        return 101

    def memset8(dst, value, n):
        seen.append((dst, value, n))

    def ipc(out, handle, flags):
        seen.append((out, ctypes.string_at(handle, 64), flags))

    restore = [capture("cuMemAdvise_v2", advise), capture("cuTexRefSetMipmapLevelClamp", clamp),
               capture("cuDeviceGetAttribute", attribute), capture("cuMemsetD8_v2", memset8),
               capture("cuIpcOpenMemHandle_v2", ipc)]
    try:
        lib.cuMemAdvise_v2.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_uint, MemLocation]
        assert lib.cuMemAdvise_v2(2**64 - 1, 12345, 3, MemLocation(2, -7)) == 0
        lib.cuTexRefSetMipmapLevelClamp.argtypes = [ctypes.c_void_p, ctypes.c_float, ctypes.c_float]
        assert lib.cuTexRefSetMipmapLevelClamp(0xABC0, 0.5, -1024.25) == 0
        lib.cuDeviceGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
        assert lib.cuDeviceGetAttribute(0xFFFF_FFFF_FFF0, 0xFFFF_FFFF, -2) == 101
        lib.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint8, ctypes.c_size_t]
        assert lib.cuMemsetD8_v2(1 << 40, 0xFE, 3) == 0

        class IpcHandle(ctypes.Structure):
            _fields_ = [("reserved", ctypes.c_char * 64)]
        lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.c_void_p, IpcHandle, ctypes.c_uint]
        blob = bytes(range(1, 65))
        assert lib.cuIpcOpenMemHandle_v2(0x1000, IpcHandle(blob), 0x80000001) == 0
        # the generic path (src/*.c through zluda_dispatch): raw uint64 slots, converted the same way
        fid = dispatch.FUNCTION_IDS["cuDeviceGetAttribute"]
        assert dispatch.dispatch(fid, [0x10, 7, 2**64 - 5]) == 101
        fid = dispatch.FUNCTION_IDS["cuTexRefSetMipmapLevelClamp"]
        assert dispatch.dispatch(fid, [0x20, 0x3F000000, 0xC4801000]) == 0  # 0.5f, -1024.5f as bit patterns
    finally:
        for fid, saved in restore:
            dispatch.HANDLERS[fid] = saved
    assert seen == [(2**64 - 1, 12345, 3, 2, -7), (0xABC0, 0.5, -1024.25), (0xFFFF_FFFF_FFF0, 0xFFFF_FFFF, -2),
                    (1 << 40, 0xFE, 3), (0x1000, blob, 0x80000001), (0x10, 7, -5), (0x20, 0.5, -1024.5)]


def test_handler_failures_become_curesults():
    """A CudaError's code, or CUDA_ERROR_UNKNOWN for anything else; an unknown function id too."""
    from zluda_py.errors import CudaError
    fid = dispatch.FUNCTION_IDS["cuDeviceGetAttribute"]
    dispatch._ensure_table()
    saved = dispatch.HANDLERS[fid]

    def raising(exc):
        def handler(*args):
            raise exc
        return handler
    try:
        dispatch.HANDLERS[fid] = raising(CudaError(101, "no such device"))
        assert dispatch.entry(3)(fid, 0x10, 1, 0) == 101
        dispatch.HANDLERS[fid] = raising(ZeroDivisionError("boom"))
        assert dispatch.entry(3)(fid, 0x10, 1, 0) == 999
        dispatch.HANDLERS[fid] = lambda *a: None
        assert dispatch.entry(3)(fid, 0x10, 1, 0) == 0
    finally:
        dispatch.HANDLERS[fid] = saved
    assert dispatch.dispatch(10**6, []) == 999


def _other_python():
    """Another installed CPython 3.x of a different minor version than this one, or None."""
    import glob
    candidates = [shutil.which(f"python3.{minor}") for minor in range(8, 20) if minor != sys.version_info.minor]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))  # pyenv installs
    for exe in filter(None, candidates):
        r = subprocess.run([exe, "-c", "import ctypes, sys; print(sys.version_info.minor)"], capture_output=True,
                           text=True)
        if r.returncode == 0 and r.stdout.strip() != str(sys.version_info.minor):
            return exe
    return None


def test_other_python_version_is_refused_not_hung(shim_libdir, tmp_path):
    """Loaded into a Python of another minor version, every call fails with 303 and a message, at once."""
    exe = _other_python()
    if exe is None:
        pytest.skip("no Python of another minor version installed")
    script = (f"import ctypes; lib = ctypes.CDLL({os.path.join(shim_libdir, 'libcuda.so.1')!r}); "
              "v = ctypes.c_int(7); print(lib.cuDriverGetVersion(ctypes.byref(v)), lib.cuInit(0), v.value)")
    r = subprocess.run([exe, "-c", script], capture_output=True, text=True, cwd=str(tmp_path), env=clean_env(),
                       timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["303", "303", "7"], r.stdout + r.stderr
    assert f"was built for Python 3.{sys.version_info.minor} but the process runs Python" in r.stderr
