"""Builds the shim, libcuda.so.1 (cffi embedding mode): one C entry point per exported symbol, generated
from cuda_decls.json, each handing its arguments to the Python dispatcher. Rebuilds only on change.

    python3 -m zluda_py._shim_build [--force] [--out DIR [--src DIR]]
"""

import fcntl
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
CUDA_ERROR_UNKNOWN = 999
CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303

# C type of each abi class in the entry points' prototypes (the exact ABI of NVIDIA's declarations).
_C_TYPE = {"i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
           "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
           "ptr": "void *", "f32": "float", "f64": "double"}


def source_dir() -> str:
    """src/ of a checkout (editable install), else the copy installed inside the package."""
    for d in (os.path.join(PKG_ROOT, "src"), os.path.join(PKG_DIR, "src")):
        if os.path.isfile(os.path.join(d, "shim.c")):
            return d
    raise FileNotFoundError("the shim's C sources (src/shim.c) are missing from this installation")


def _sources(src: str):
    return sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith((".c", ".h", ".cdef")))


def inputs_hash(src: str) -> str:
    h = hashlib.sha256()
    h.update(sys.version.encode())  # the shim links this Python's libpython
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
    args = "".join(f", {_SIG_C_TYPE[c]} a{i}" for i, c in enumerate(sig))
    return f"int {extern_name(sig)}(int fid{args})"


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


def signatures(decls):
    return sorted({signature(f["params"]) for f in decls["functions"]})


def generate_c(decls) -> str:
    funcs = decls["functions"]
    out = ["#include <stdint.h>", '#include "zluda_shim.h"', '#include "fastpath.h"', ""]
    out.extend(_extern_decl(sig) + ";" for sig in signatures(decls))
    sizes = sorted({int(p["abi"][7:]) for f in funcs for p in f["params"] if p["abi"].startswith("struct:")})
    for n in sizes:
        body = f"uint64_t w[{n // 8}];" if n % 8 == 0 else f"uint8_t b[{n}];"
        out.append(f"typedef struct {{ {body} }} {_struct_type(n)};")
    for fid, f in enumerate(funcs):
        names = [f"p{i}" for i in range(len(f["params"]))]
        decl = ", ".join(_param_decl(p["abi"], n) for p, n in zip(f["params"], names)) or "void"
        passed = "".join(", " + _pass(p["abi"], n) for p, n in zip(f["params"], names))
        out.append(f"int {f['name']}({decl}) {{")
        out.append("    if (__builtin_expect(zluda_shim_disabled, 0))")
        out.append(f"        return {CUDA_ERROR_SHARED_OBJECT_INIT_FAILED};")
        fast = FAST_PATHS.get(f["name"])
        if fast:
            out.append("    {")
            out.append(f"        int fast = {fast.format(*(_pass(p['abi'], n) for p, n in zip(f['params'], names)))};")
            out.append("        if (fast >= 0)")
            out.append("            return fast;")
            out.append("    }")
        out.append(f"    return {extern_name(signature(f['params']))}({fid}{passed});")
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
"""


def _init_code(extra_paths, externs) -> str:
    # Runs once, inside whichever interpreter the shim finds or starts. It must make zluda_py importable
    # without PYTHONPATH: the package root is worked out from where the shim itself lives (it sits in
    # <root>/zluda_py/_lib/), falling back to the root recorded at build time; the build interpreter's
    # sys.path entries are appended (not prepended, so an already running interpreter keeps its own).
    return f"""
import sys
from {MODULE_NAME} import ffi, lib


def _swallow(exc_type, exc_value, tb):
    pass  # dispatch() already turned every error into a CUresult; nothing may reach the host


try:
    _here = ffi.string(lib.zluda_shim_path()).decode("utf-8", "surrogateescape")
    import os.path
    _root = {PKG_ROOT!r}
    if _here:
        _d = os.path.dirname(os.path.realpath(_here))
        if os.path.basename(_d) == "_lib" and os.path.isfile(os.path.join(os.path.dirname(_d), "dispatch.py")):
            _root = os.path.dirname(os.path.dirname(_d))
    if _root not in sys.path:
        sys.path.insert(0, _root)
    for _p in {list(extra_paths)!r}:
        if _p not in sys.path:
            sys.path.append(_p)
    if not hasattr(sys, "argv"):
        sys.argv = [""]
    if not lib.zluda_host_is_python() and os.path.exists({sys.executable!r}):
        # Started inside a C program, Python took the first python3 on PATH as sys.executable, maybe
        # another version: anything that spawns sys.executable must get the interpreter built against.
        sys.executable = {sys.executable!r}
    import zluda_py.native
    zluda_py.native.attach(ffi, lib)
    from zluda_py.dispatch import dispatch as _dispatch, entry as _entry
except BaseException as _e:
    # Left unattached, cffi would answer 0 (CUDA_SUCCESS) to every call: fail each call instead, and say
    # why once, whatever ZLUDA_LOG says, since nothing will work.
    sys.stderr.write(f"[zluda] the driver cannot start: {{type(_e).__name__}}: {{_e}} (run: zluda-py doctor)\\n")

    def _dispatch(fid, *args):
        return {CUDA_ERROR_SHARED_OBJECT_INIT_FAILED}

    def _entry(nargs):
        return _dispatch

ffi.def_extern(name="zluda_dispatch", error={CUDA_ERROR_UNKNOWN}, onerror=_swallow)(_dispatch)
for _name, _nargs in {list(externs)!r}:
    ffi.def_extern(name=_name, error={CUDA_ERROR_UNKNOWN}, onerror=_swallow)(_entry(_nargs))
"""


def _build_paths():
    return [p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p) and p != PKG_ROOT]


def build(out_dir: str, src: str = None, record_paths: bool = True) -> str:
    """Compile libcuda.so.1 into out_dir (plus the libcuda.so link); returns its path. record_paths: let
    the embedded interpreter also search this interpreter's sys.path (a checkout's dependencies live
    there); an installed package finds its dependencies beside itself, in its own site-packages."""
    import cffi

    src = src or source_dir()
    with open(DECLS) as f:
        decls = json.load(f)
    c_files = sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".c"))
    sigs = signatures(decls)
    cdef = CDEF + "".join(f'extern "Python+C" {_extern_decl(sig)};\n' for sig in sigs) + \
        "".join(open(p).read() for p in _sources(src) if p.endswith(".cdef"))

    ffi = cffi.FFI()
    ffi.embedding_api("")
    ffi.cdef(cdef)
    externs = [(extern_name(sig), len(sig)) for sig in sigs]
    ffi.embedding_init_code(_init_code(_build_paths() if record_paths else [], externs))
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=out_dir)
    try:
        exports = [f["name"] for f in decls["functions"]]
        script = os.path.join(tmp, "exports.map")
        with open(script, "w") as f:
            f.write("{ global:\n" + "".join(f"  {n};\n" for n in exports) +
                    f"  PyInit_{MODULE_NAME};\nlocal: *;\n}};\n")
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        ffi.set_source(MODULE_NAME, generate_c(decls), sources=c_files, include_dirs=[src],
                       libraries=["dl"],
                       extra_compile_args=["-O2", "-Wno-unused-function"],
                       extra_link_args=[f"-Wl,--version-script={script}", "-Wl,-Bsymbolic-functions",
                                        f"-Wl,-rpath,{libdir}", f"-Wl,-soname,{LIB_NAME}"])
        built = ffi.compile(tmpdir=tmp, target=LIB_NAME, verbose=False)
        # Replace by rename: processes that have the old library mapped keep their (unlinked) copy.
        final = os.path.join(out_dir, LIB_NAME)
        os.replace(built, final)
        link = os.path.join(out_dir, "libcuda.so")
        tmp_link = os.path.join(tmp, "libcuda.so")
        os.symlink(LIB_NAME, tmp_link)
        os.replace(tmp_link, link)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
            build(out, src)
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
