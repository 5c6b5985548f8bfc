"""Builds the shim: libcuda.so.1, a C library with one entry point per exported symbol (generated from
cuda_decls.json) that links no libpython, and _zluda_shim.so beside it, the cffi-embedded module whose
entry points hand the arguments to the Python dispatcher (src/loader.c joins the two). Rebuilds only on change.

    python3 -m zluda_py._shim_build [--force] [--out DIR [--src DIR]]
"""

import contextlib
import fcntl
import io
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile

PKG_DIR = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(PKG_DIR)  # the directory that holds zluda_py/ (what goes on sys.path)
DECLS = os.path.join(PKG_DIR, "cuda_decls.json")
LIB_NAME = "libcuda.so.1"
MODULE_NAME = "_zluda_shim"
MODULE_FILE = MODULE_NAME + ".so"
EMBED_SOURCE = "embed.c"        # the module's own C; every other src/*.c is the front library's
NVRTC_SOURCE = "nvrtc_forward.c"  # libnvrtc.so.13, its own library (NVIDIA's NVRTC behind it)
NVRTC_LIB = "libnvrtc.so.13"
# The BLAS front: libcublas.so.13 and libcublasLt.so.13, each from its blas_*.c plus the shared ones
BLAS_PREFIX = "blas_"
BLAS_LIBS = {"libcublas.so.13": "blas_cublas.c", "libcublasLt.so.13": "blas_cublaslt.c"}
BLAS_SHARED = ("blas_common.c", "blas_gemm.c", "front_find.c")
FRONT_FIND = "front_find.c"       # finding NVIDIA's library behind a front: in the fronts, not libcuda.so.1
NVJITLINK_SOURCE = "nvjitlink_front.c"  # libnvJitLink.so.13 (the driver's linker, NVIDIA's for LTO-IR)
NVJITLINK_LIB = "libnvJitLink.so.13"
CUDA_ERROR_UNKNOWN = 999
CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303

# C type of each abi class in the entry points' prototypes (the exact ABI of NVIDIA's declarations).
_C_TYPE = {"i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
           "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
           "ptr": "void *", "f32": "float", "f64": "double"}


def source_dir() -> str:
    """src/ of a checkout (editable install), else the copy installed inside the package."""
    for d in (os.path.join(PKG_ROOT, "src"), os.path.join(PKG_DIR, "src")):
        if os.path.isfile(os.path.join(d, "loader.c")):
            return d
    raise FileNotFoundError("the shim's C sources (src/loader.c) are missing from this installation")


def _sources(src: str):
    return sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith((".c", ".h", ".cdef")))


def _installed(src: str) -> bool:
    """Sources inside the package: an installed copy, which records no paths (it may have been built on
    another machine, by another interpreter of the same minor version)."""
    return os.path.abspath(src) == os.path.join(PKG_DIR, "src")


def inputs_hash(src: str) -> str:
    h = hashlib.sha256()
    if _installed(src):
        h.update(f"{sys.version_info.major}.{sys.version_info.minor}".encode())    # the ABI built for
    else:
        h.update(sys.version.encode())      # the module is built against this Python's headers
        h.update(sys.executable.encode())   # and a checkout's front library names this interpreter
    for path in [DECLS, os.path.abspath(__file__)] + _sources(src):
        h.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _struct_type(size: int) -> str:
    # Opaque copy of a struct passed by value. gen_decls.py checks that the structs of 16 bytes or
    # less have no float members, so the x86-64 ABI passes this the same way as the real struct.
    return f"zluda_struct{size}"


def _param_decl(abi: str, name: str) -> str:
    if abi.startswith("struct:"):
        return f"{_struct_type(int(abi[7:]))} {name}"
    return f"{_C_TYPE[abi]} {name}" if abi != "ptr" else f"void *{name}"


# Each C entry point hands its arguments to Python through one cffi extern per argument signature, in
# three classes: cffi converts them to Python values in C, which is cheaper than Python reading them
# back out of a uint64_t array (and the handler contract's signed ints and floats come out as such).
_SIG_CLASS = {"i8": "i", "i16": "i", "i32": "i", "i64": "i", "f32": "d", "f64": "d"}
_SIG_C_TYPE = {"u": "uint64_t", "i": "int64_t", "d": "double"}


def signature(params) -> str:
    return "".join(_SIG_CLASS.get(p["abi"], "u") for p in params)


def extern_name(sig: str) -> str:
    return "zluda_call_" + (sig or "v")


def _extern_decl(sig: str) -> str:
    return f"int {extern_name(sig)}(int fid{_extern_args(sig)})"


def _extern_args(sig: str) -> str:
    return "".join(f", {_SIG_C_TYPE[c]} a{i}" for i, c in enumerate(sig))


def _pointer_name(sig: str) -> str:
    return extern_name(sig) + "_ptr"


def _python_entries(sig: str):
    """The front's pointer to the module's extern for one signature, first aimed at a starter that brings
    Python up (src/loader.c) and then calls through the bound pointer."""
    args = _extern_args(sig)
    names = "".join(f", a{i}" for i in range(len(sig)))
    starter = "zl_start_" + (sig or "v")
    return [f"static int {starter}(int fid{args});",
            f"static int (*{_pointer_name(sig)})(int fid{args}) = {starter};",
            f"static int {starter}(int fid{args}) {{",
            "    if (zluda_python_start() != 0)",
            "        return zluda_disabled_result(fid);",
            f"    return __atomic_load_n(&{_pointer_name(sig)}, __ATOMIC_ACQUIRE)(fid{names});",
            "}"]


# The module's Python+C functions that C code of the front calls directly (besides the typed externs).
_MODULE_ENTRIES = (("zluda_dispatch", "int (*zluda_dispatch_ptr)(int fid, uint64_t *args)"),
                   ("zluda_dark_primary_ctx", "int32_t (*zluda_dark_primary_ctx_ptr)(uint64_t *out, int32_t dev)"),
                   ("zluda_profile_report", "void (*zluda_profile_report_ptr)(void)"))


def _bind_function(sigs) -> list:
    out = [f"{decl};" for _, decl in _MODULE_ENTRIES]
    out.append("int zluda_bind_python(void *module) {")
    out.append("    void *p;")
    for sig in sigs:
        out.append(f'    if (!(p = dlsym(module, "{extern_name(sig)}")))')
        out.append("        return -1;")
        out.append(f"    __atomic_store_n((void **)&{_pointer_name(sig)}, p, __ATOMIC_RELEASE);")
    for name, decl in _MODULE_ENTRIES:
        ptr = decl[decl.index("(*") + 2:decl.index(")")]
        out.append(f'    if (!(p = dlsym(module, "{name}")))')
        out.append("        return -1;")
        out.append(f"    __atomic_store_n((void **)&{ptr}, p, __ATOMIC_RELEASE);")
    out.append("    return 0;")
    out.append("}")
    return out


def _pass(abi: str, name: str) -> str:
    if abi == "ptr":
        return f"(uint64_t)(uintptr_t){name}"
    if abi.startswith("struct:"):
        return f"(uint64_t)(uintptr_t)&{name}"  # struct by value: the address of our copy
    return f"({_SIG_C_TYPE[_SIG_CLASS.get(abi, 'u')]}){name}"


def _c_string(s: str) -> str:
    return json.dumps(s)  # JSON string escapes are valid C for printable text


# Exports answered first by src/fastpath.c when everything is ordinary (it returns -1 to hand the call to
# Python): the trivial calls programs make in tight loops. Arguments are the entry's uint64 values, in order.
_COPY_KINDS = {"cuMemcpyHtoD_v2": "1, 0", "cuMemcpyDtoH_v2": "0, 1", "cuMemcpyDtoD_v2": "1, 1", "cuMemcpy": "0, 0"}
FAST_PATHS = {"cuMemAlloc_v2": "zl_fast_mem_alloc({0}, {1})", "cuMemFree_v2": "zl_fast_mem_free({0})",
              "cuDriverGetVersion": "zl_fast_driver_version({0})", "cuDeviceGet": "zl_fast_device_get({0}, {1})",
              "cuDeviceGetCount": "zl_fast_device_count({0})", "cuCtxGetDevice": "zl_fast_ctx_get_device({0})",
              "cuDeviceGetAttribute": "zl_fast_device_attribute({0}, {1}, {2})"}
for _name, _kinds in _COPY_KINDS.items():
    for _n in (_name, _name + "_ptds"):
        FAST_PATHS[_n] = "zl_fast_copy({0}, {1}, {2}, " + _kinds + ")"
# src/fastlaunch.c: launches, synchronizes and queries through the CPU backend's launch queue
FAST_PATHS["cuCtxGetCurrent"] = "zl_fast_ctx_get_current({0})"
FAST_PATHS["cuCtxSynchronize"] = "zl_fast_ctx_synchronize(0)"
FAST_PATHS["cuCtxSynchronize_v2"] = "zl_fast_ctx_synchronize({0})"
for _suffix, _pt in (("", 0), ("_ptsz", 1)):
    FAST_PATHS["cuLaunchKernel" + _suffix] = \
        "zl_fast_launch({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, %d)" % _pt
    FAST_PATHS["cuLaunchKernelEx" + _suffix] = "zl_fast_launch_ex({0}, {1}, {2}, {3}, %d)" % _pt
    FAST_PATHS["cuStreamSynchronize" + _suffix] = "zl_fast_stream_synchronize({0}, %d)" % _pt
    FAST_PATHS["cuStreamQuery" + _suffix] = "zl_fast_stream_query({0}, %d)" % _pt


# Calls that give something back: once a Python host is finalizing (zluda_host_exiting), their entry points
# answer CUDA_SUCCESS in C, as NVIDIA's driver does for a program's exit-time frees, instead of entering an
# interpreter whose modules are being torn down (CuPy's Module.__dealloc__ unloads from there).
RELEASES_AT_EXIT = frozenset({
    "cuModuleUnload", "cuLibraryUnload", "cuMemFree_v2", "cuMemFreeHost", "cuMemFreeAsync",
    "cuMemFreeAsync_ptsz", "cuMemHostUnregister", "cuStreamDestroy_v2", "cuEventDestroy_v2",
    "cuCtxDestroy_v2", "cuDevicePrimaryCtxRelease_v2", "cuArrayDestroy", "cuMipmappedArrayDestroy",
    "cuTexObjectDestroy", "cuSurfObjectDestroy", "cuGraphDestroy", "cuGraphExecDestroy", "cuLinkDestroy",
    "cuMemPoolDestroy", "cuMemRelease", "cuMemUnmap", "cuMemAddressFree", "cuUserObjectRelease"})


def signatures(decls):
    return sorted({signature(f["params"]) for f in decls["functions"]})


def generate_c(decls) -> str:
    funcs = decls["functions"]
    out = ["#define _GNU_SOURCE", "#include <dlfcn.h>", "#include <stdint.h>", '#include "zluda_shim.h"',
           '#include "fastpath.h"', ""]
    for sig in signatures(decls):
        out.extend(_python_entries(sig))
    out.extend(_bind_function(signatures(decls)))
    sizes = sorted({int(p["abi"][7:]) for f in funcs for p in f["params"] if p["abi"].startswith("struct:")})
    for n in sizes:
        body = f"uint64_t w[{n // 8}];" if n % 8 == 0 else f"uint8_t b[{n}];"
        out.append(f"typedef struct {{ {body} }} {_struct_type(n)};")
    for fid, f in enumerate(funcs):
        names = [f"p{i}" for i in range(len(f["params"]))]
        decl = ", ".join(_param_decl(p["abi"], n) for p, n in zip(f["params"], names)) or "void"
        passed = "".join(", " + _pass(p["abi"], n) for p, n in zip(f["params"], names))
        out.append(f"int {f['name']}({decl}) {{")
        out.append("    if (__builtin_expect(__atomic_load_n(&zluda_shim_disabled, __ATOMIC_ACQUIRE), 0))")
        out.append(f"        return zluda_disabled_result({fid});")
        if f["name"] in RELEASES_AT_EXIT:
            out.append("    if (__builtin_expect(__atomic_load_n(&zluda_host_exiting, __ATOMIC_ACQUIRE), 0))")
            out.append("        return 0;")
        fast = FAST_PATHS.get(f["name"])
        if fast:
            out.append("    {")
            out.append(f"        int fast = {fast.format(*(_pass(p['abi'], n) for p, n in zip(f['params'], names)))};")
            out.append("        if (fast >= 0)")
            out.append("            return fast;")
            out.append("    }")
        ptr = _pointer_name(signature(f["params"]))
        out.append(f"    return __atomic_load_n(&{ptr}, __ATOMIC_ACQUIRE)({fid}{passed});")
        out.append("}")
    out.append(f"static void *const zluda_fn_table[{len(funcs)}] = {{")
    out.extend(f"    (void *){f['name']}," for f in funcs)
    out.append("};")
    out.append(f"void *zluda_fn_address(int fid) {{ return fid >= 0 && fid < {len(funcs)} ? "
               f"zluda_fn_table[fid] : (void *)0; }}")
    # cuGetErrorName/String hand out pointers the caller keeps forever: static C strings.
    codes = decls["enums"]["CUresult"]
    strings = decls.get("error_strings", {})
    for fn, text_of in (("zluda_error_name", lambda n: n), ("zluda_error_string", lambda n: strings.get(n, n))):
        out.append(f"const char *{fn}(int code) {{")
        out.append("    switch (code) {")
        for name, value in sorted(codes.items(), key=lambda kv: kv[1]):
            if list(codes.values()).index(value) == list(codes.keys()).index(name):
                out.append(f"    case {value}: return {_c_string(text_of(name))};")
        out.append("    default: return (const char *)0;")
        out.append("    }")
        out.append("}")
    return "\n".join(out) + "\n"


CDEF = """
extern "Python+C" int zluda_dispatch(int fid, uint64_t *args);
void *zluda_fn_address(int fid);
const char *zluda_error_name(int code);
const char *zluda_error_string(int code);
const char *zluda_shim_path(void);
int zluda_host_is_python(void);
void zluda_note_host_exiting(void);
const char *zluda_embed_path(void);
"""


def _init_code(extra_paths, externs, root=PKG_ROOT) -> str:
    # Runs once, inside the interpreter src/loader.c started (or joined). It must make zluda_py importable
    # without PYTHONPATH: the package root is worked out from where this module lives (<root>/zluda_py/
    # _lib/), falling back to the root recorded at build time; the build interpreter's sys.path entries are
    # appended (not prepended, so an already running interpreter keeps its own). It never raises (cffi would
    # print a traceback into the host's output): src/embed.c reads sys._zluda_shim_ready or _error instead.
    return f"""
import sys


def _swallow(exc_type, exc_value, tb):
    pass  # dispatch() already turned every error into a CUresult; nothing may reach the host


def _start():
    from {MODULE_NAME} import ffi, lib
    import os.path
    _here = ffi.string(lib.zluda_embed_path()).decode("utf-8", "surrogateescape")
    _root = {root!r}
    if _here:
        _d = os.path.dirname(os.path.realpath(_here))
        if os.path.basename(_d) == "_lib" and os.path.isfile(os.path.join(os.path.dirname(_d), "dispatch.py")):
            _root = os.path.dirname(os.path.dirname(_d))
    if _root and _root not in sys.path:
        sys.path.insert(0, _root)
    for _p in {list(extra_paths)!r}:
        if _p not in sys.path:
            sys.path.append(_p)
    if not hasattr(sys, "argv"):
        sys.argv = [""]
    import zluda_py.native
    zluda_py.native.attach(ffi, lib)
    if lib.zluda_host_is_python():
        import atexit
        atexit.register(lib.zluda_note_host_exiting)
    from zluda_py.dispatch import dispatch, entry
    ffi.def_extern(name="zluda_dispatch", error={CUDA_ERROR_UNKNOWN}, onerror=_swallow)(dispatch)
    for _name, _nargs in {list(externs)!r}:
        ffi.def_extern(name=_name, error={CUDA_ERROR_UNKNOWN}, onerror=_swallow)(entry(_nargs))


try:
    _start()
    sys._zluda_shim_ready = True
except BaseException as _e:
    sys._zluda_shim_error = f"{{type(_e).__name__}}: {{_e}}"
"""


def _build_paths():
    return [p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p) and p != PKG_ROOT]


def _build_info(decls, out_dir: str, record_paths: bool) -> str:
    """build_info.h: what src/loader.c must know of the Python this is built for. An installed package's
    build (record_paths False) names no path of the build machine: it finds its Python from where it lies."""
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    soname = sysconfig.get_config_var("INSTSONAME") if sysconfig.get_config_var("Py_ENABLE_SHARED") else ""
    if not soname or not soname.endswith(tuple(f".so{x}" for x in ("", ".1.0", ".1"))):
        soname = f"libpython{ver}.so.1.0"
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    rel = os.path.relpath(libdir, sys.base_prefix) if libdir.startswith(sys.base_prefix + os.sep) else "lib"
    fid_cuinit = next(i for i, f in enumerate(decls["functions"]) if f["name"] == "cuInit")
    facts = {"ZLUDA_PY_VERSION": ver, "ZLUDA_PY_SONAME": soname, "ZLUDA_PY_LIBDIR_REL": rel,
             "ZLUDA_PY_MULTIARCH": sysconfig.get_config_var("MULTIARCH") or "",
             "ZLUDA_BUILD_PYTHON": sys.executable if record_paths else "",
             "ZLUDA_BUILD_LIBDIR": os.path.abspath(out_dir) if record_paths else "",
             "ZLUDA_MODULE_FILE": MODULE_FILE}
    lines = [f"#define {k} {_c_string(v)}" for k, v in facts.items()]
    lines.append(f"#define ZLUDA_FID_CUINIT {fid_cuinit}")
    return "/* Generated by zluda_py/_shim_build.py. */\n" + "\n".join(lines) + "\n"


def _compiler() -> list:
    import shlex
    return shlex.split(os.environ.get("CC") or "cc")


def _run(cmd) -> None:
    import subprocess
    # (an empty environment has no PATH, and gcc finds its linker on PATH)
    env = None if os.environ.get("PATH") else dict(os.environ, PATH="/usr/local/bin:/usr/bin:/bin")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"building the shim failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")


def build(out_dir: str, src: str = None, record_paths: bool = True) -> str:
    """Compile libcuda.so.1 and _zluda_shim.so into out_dir (plus the libcuda.so link); returns the
    library's path. record_paths: let the embedded interpreter also search this interpreter's sys.path, and
    record this interpreter and out_dir (a checkout's dependencies live there); an installed package finds
    its interpreter and dependencies from where it lies, in its own site-packages."""
    import cffi

    src = src or source_dir()
    with open(DECLS) as f:
        decls = json.load(f)
    front_c = sorted(os.path.join(src, f) for f in os.listdir(src)
                     if f.endswith(".c") and f not in (EMBED_SOURCE, NVRTC_SOURCE, FRONT_FIND, NVJITLINK_SOURCE)
                     and not f.startswith(BLAS_PREFIX))
    sigs = signatures(decls)
    cdef = CDEF + "".join(f'extern "Python+C" {_extern_decl(sig)};\n' for sig in sigs) + \
        "".join(open(p).read() for p in _sources(src) if p.endswith(".cdef"))

    ffi = cffi.FFI()
    ffi.embedding_api("")
    ffi.cdef(cdef)
    externs = [(extern_name(sig), len(sig)) for sig in sigs]
    ffi.embedding_init_code(_init_code(_build_paths() if record_paths else [], externs,
                                       PKG_ROOT if record_paths else None))
    ffi.set_source(MODULE_NAME, '#include "zluda_shim.h"\n#include "fastpath.h"\n'
                   f'#include "{EMBED_SOURCE}"\n')
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=out_dir)
    try:
        with open(os.path.join(tmp, "build_info.h"), "w") as f:
            f.write(_build_info(decls, out_dir, record_paths))
        exports_c = os.path.join(tmp, "exports.c")
        with open(exports_c, "w") as f:
            f.write(generate_c(decls))
        script = os.path.join(tmp, "exports.map")
        with open(script, "w") as f:
            f.write("{ global:\n" + "".join(f"  {f_['name']};\n" for f_ in decls["functions"]) +
                    "  zl_*;\n  zluda_*;\nlocal: *;\n};\n")
        cc = _compiler()
        common = ["-O2", "-fPIC", "-shared", "-pthread", f"-I{src}", f"-I{tmp}", "-Wno-unused-function",
                  "-Werror=implicit-function-declaration", f"-ffile-prefix-map={tmp}=."]
        front = os.path.join(tmp, LIB_NAME)
        _run(cc + common + [exports_c] + front_c +
             ["-o", front, f"-Wl,--version-script={script}", "-Wl,-Bsymbolic-functions",
              f"-Wl,-soname,{LIB_NAME}", "-ldl"])
        module_c = os.path.join(tmp, MODULE_NAME + ".c")
        with contextlib.redirect_stdout(io.StringIO()):     # cffi announces the file it writes
            ffi.emit_c_code(module_c)
        # No libpython here either: its Py* symbols come from the interpreter loader.c put in global scope
        # (or the Python host's), and the front's zl_*/zluda_* functions through DT_NEEDED libcuda.so.1.
        module = os.path.join(tmp, MODULE_FILE)
        _run(cc + common + [f"-I{sysconfig.get_paths()['include']}", module_c, "-o", module, front,
                            "-Wl,-Bsymbolic", "-ldl"])
        # Replace by rename: processes that have the old library mapped keep their (unlinked) copy.
        os.replace(module, os.path.join(out_dir, MODULE_FILE))
        final = os.path.join(out_dir, LIB_NAME)
        os.replace(front, final)
        link = os.path.join(out_dir, "libcuda.so")
        tmp_link = os.path.join(tmp, "libcuda.so")
        os.symlink(LIB_NAME, tmp_link)
        os.replace(tmp_link, link)
        _build_nvrtc(cc, common, src, tmp, out_dir, record_paths)
        _build_blas(cc, common, src, tmp, out_dir, record_paths)
        _build_nvjitlink(cc, common, src, tmp, out_dir, record_paths)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build_nvrtc(cc, common, src, tmp, out_dir, record_paths) -> None:
    """libnvrtc.so.13 (and its libnvrtc.so link) beside libcuda.so.1; a recording build also names where
    this interpreter's nvidia-cuda-nvrtc wheel would be."""
    lib = os.path.join(tmp, NVRTC_LIB)
    defs = [f'-DZLUDA_SITE_PACKAGES="{_site_packages()}"'] if record_paths else []
    script = os.path.join(tmp, "nvrtc.map")
    with open(script, "w") as f:
        f.write(NVRTC_LIB + " { global: nvrtc*; zl_nvrtc_forwarder; local: *; };\n")
    _run(cc + common + ["-fvisibility=hidden"] + defs + [os.path.join(src, NVRTC_SOURCE), os.path.join(src, FRONT_FIND),
                                                       "-o", lib, f"-Wl,--version-script={script}",
                                                       f"-Wl,-soname,{NVRTC_LIB}", "-ldl"])
    os.replace(lib, os.path.join(out_dir, NVRTC_LIB))
    tmp_link = os.path.join(tmp, "libnvrtc.so")
    os.symlink(NVRTC_LIB, tmp_link)
    os.replace(tmp_link, os.path.join(out_dir, "libnvrtc.so"))


def _site_packages() -> str:
    """This interpreter's site-packages directories, ':'-joined (where its nvidia-* and scipy-openblas32 wheels
    lie)."""
    import site
    sps = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]] + site.getsitepackages()
    return ":".join(d for d in dict.fromkeys(sps) if ":" not in d and '"' not in d and "\\" not in d)


def _build_blas(cc, common, src, tmp, out_dir, record_paths) -> None:
    """libcublasLt.so.13 and libcublas.so.13 (which needs it, found beside it), each exporting NVIDIA's
    functions under NVIDIA's version node; a recording build also names this interpreter's site-packages."""
    defs = [f'-DZLUDA_SITE_PACKAGES="{_site_packages()}"'] if record_paths else []
    shared = [os.path.join(src, f) for f in BLAS_SHARED]
    for lib in sorted(BLAS_LIBS, key=lambda name: "Lt" not in name):     # Lt first: libcublas links it
        out = os.path.join(tmp, lib)
        script = os.path.join(tmp, lib + ".map")
        prefix = "cublasLt" if "Lt" in lib else "cublas"
        with open(script, "w") as f:
            f.write(lib + " { global: " + prefix + "*; zl_blas_front; local: *; };\n")
        deps = ["-Wl,--no-as-needed", os.path.join(out_dir, "libcublasLt.so.13"), "-Wl,-rpath,$ORIGIN"] \
            if prefix == "cublas" else []
        _run(cc + common + ["-fvisibility=hidden"] + defs + [os.path.join(src, BLAS_LIBS[lib])] + shared +
             ["-o", out, f"-Wl,--version-script={script}", f"-Wl,-soname,{lib}", "-ldl", "-lm"] + deps)
        os.replace(out, os.path.join(out_dir, lib))
        link = os.path.join(tmp, lib[:-3])                  # libcublas.so: what -lcublas links
        os.symlink(lib, link)
        os.replace(link, os.path.join(out_dir, lib[:-3]))


def _build_nvjitlink(cc, common, src, tmp, out_dir, record_paths) -> None:
    """libnvJitLink.so.13 (and its libnvJitLink.so link) beside libcuda.so.1, under NVIDIA's version node."""
    defs = [f'-DZLUDA_SITE_PACKAGES="{_site_packages()}"'] if record_paths else []
    out = os.path.join(tmp, NVJITLINK_LIB)
    script = os.path.join(tmp, "nvjitlink.map")
    with open(script, "w") as f:
        f.write(NVJITLINK_LIB + " { global: nvJitLink*; __nvJitLink*; zl_nvjitlink_front; local: *; };\n")
    _run(cc + common + ["-fvisibility=hidden"] + defs + [os.path.join(src, NVJITLINK_SOURCE),
                                                       os.path.join(src, FRONT_FIND), "-o", out,
                                                       f"-Wl,--version-script={script}",
                                                       f"-Wl,-soname,{NVJITLINK_LIB}", "-ldl"])
    os.replace(out, os.path.join(out_dir, NVJITLINK_LIB))
    link = os.path.join(tmp, NVJITLINK_LIB[:-3])
    os.symlink(NVJITLINK_LIB, link)
    os.replace(link, os.path.join(out_dir, NVJITLINK_LIB[:-3]))


def _writable_dir(d: str) -> bool:
    try:
        os.makedirs(d, exist_ok=True)
        return os.access(d, os.W_OK)
    except OSError:
        return False


def default_dir() -> str:
    return os.path.join(PKG_DIR, "_lib")


def ensure_built(force: bool = False) -> str:
    """The directory holding an up-to-date libcuda.so.1, building it first if its inputs changed."""
    out = default_dir()
    try:
        src = source_dir()
    except FileNotFoundError:
        if os.path.isfile(os.path.join(out, LIB_NAME)):
            return out  # an installed copy built at install time, without its sources: use it as is
        raise
    digest = inputs_hash(src)
    if not _writable_dir(out):
        if _is_current(out, digest) and not force:
            return out
        out = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "zluda-py",
                           "lib-" + digest[:16])
        os.makedirs(out, exist_ok=True)
    if _is_current(out, digest) and not force:
        return out
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several processes may ask at once: one builds, others wait
        if force or not _is_current(out, digest):
            # a copy outside the package cannot tell its installation from where it lies: it records it
            build(out, src, record_paths=not _installed(src) or out != default_dir())
            with open(os.path.join(out, ".stamp"), "w") as f:
                f.write(digest)
    return out


def build_for_install(pkg_dir_in_build: str) -> None:
    """setup.py's hook: build into <build_lib>/zluda_py/_lib with a stamp matching the installed
    sources (<build_lib>/zluda_py/src), so the installed package never rebuilds on first use."""
    pkg_dir_in_build = os.path.abspath(pkg_dir_in_build)  # cffi compiles from a temporary directory
    src = os.path.join(pkg_dir_in_build, "src")
    out = os.path.join(pkg_dir_in_build, "_lib")
    build(out, src, record_paths=False)
    os.remove(os.path.join(out, "libcuda.so"))  # wheels cannot hold symlinks: a copy instead
    shutil.copy2(os.path.join(out, LIB_NAME), os.path.join(out, "libcuda.so"))
    os.remove(os.path.join(out, "libnvrtc.so"))
    shutil.copy2(os.path.join(out, NVRTC_LIB), os.path.join(out, "libnvrtc.so"))
    for lib in BLAS_LIBS:
        if os.path.islink(os.path.join(out, lib[:-3])):
            os.remove(os.path.join(out, lib[:-3]))
            shutil.copy2(os.path.join(out, lib), os.path.join(out, lib[:-3]))
    with open(os.path.join(out, ".stamp"), "w") as f:
        f.write(inputs_hash(src))


def _is_current(out: str, digest: str) -> bool:
    try:
        with open(os.path.join(out, ".stamp")) as f:
            return f.read().strip() == digest and os.path.isfile(os.path.join(out, LIB_NAME))
    except OSError:
        return False


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if nothing changed")
    ap.add_argument("--out", help="build into this directory instead (no stamp check)")
    ap.add_argument("--src", help="with --out: take the C sources from this directory instead of src/")
    args = ap.parse_args(argv)
    if args.out:
        print(build(os.path.abspath(args.out), args.src and os.path.abspath(args.src)))
    else:
        print(ensure_built(force=args.force))


if __name__ == "__main__":
    main()
