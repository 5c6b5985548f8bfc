#!/usr/bin/env python3
"""Regenerates zluda_py/cuda_decls.json (every libcuda.so.1 export, proc-address versions, enums, error
strings) from the CUDA toolkit's headers. Needs gcc and the headers; the JSON it writes is what ships.

    python3 scripts/gen_decls.py [--cuda /usr/local/cuda] [--out zluda_py/cuda_decls.json]
    python3 scripts/gen_decls.py --wheels 13.5     # the headers of NVIDIA's pip wheels of that release
                                                   # (nvidia-cuda-runtime, nvidia-cuda-profiler-api)
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HEADERS = ["cuda.h", "cudaProfiler.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h"]
TYPEDEF_HEADERS = ["cudaTypedefs.h", "cudaProfilerTypedefs.h", "cudaGLTypedefs.h", "cudaEGLTypedefs.h",
                   "cudaVDPAUTypedefs.h"]
EXPECTED_EXPORTS = 723  # the CUresult cu*() prototypes of CUDA 13.5's headers (13.0's: 672)

# What NVIDIA's driver answers through cuGetErrorString. The header's doc comments are sentences; the
# driver returns short phrases, which cannot all be derived mechanically, so the well-known ones are
# listed here and the rest are condensed from the doc comment (see _condense).
DRIVER_ERROR_STRINGS = {
    "CUDA_SUCCESS": "no error",
    "CUDA_ERROR_INVALID_VALUE": "invalid argument",
    "CUDA_ERROR_OUT_OF_MEMORY": "out of memory",
    "CUDA_ERROR_NOT_INITIALIZED": "initialization error",
    "CUDA_ERROR_DEINITIALIZED": "driver shutting down",
    "CUDA_ERROR_PROFILER_DISABLED": "profiler disabled while using external profiling tool",
    "CUDA_ERROR_PROFILER_NOT_INITIALIZED": "profiler not initialized: call cudaProfilerInitialize()",
    "CUDA_ERROR_PROFILER_ALREADY_STARTED": "profiler already started",
    "CUDA_ERROR_PROFILER_ALREADY_STOPPED": "profiler already stopped",
    "CUDA_ERROR_STUB_LIBRARY": "CUDA driver is a stub library",
    "CUDA_ERROR_DEVICE_UNAVAILABLE": "CUDA-capable device(s) is/are busy or unavailable",
    "CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is detected",
    "CUDA_ERROR_INVALID_DEVICE": "invalid device ordinal",
    "CUDA_ERROR_DEVICE_NOT_LICENSED": "device doesn't have valid Grid license",
    "CUDA_ERROR_INVALID_IMAGE": "device kernel image is invalid",
    "CUDA_ERROR_INVALID_CONTEXT": "invalid device context",
    "CUDA_ERROR_CONTEXT_ALREADY_CURRENT": "context already current",
    "CUDA_ERROR_MAP_FAILED": "mapping of buffer object failed",
    "CUDA_ERROR_UNMAP_FAILED": "unmapping of buffer object failed",
    "CUDA_ERROR_ARRAY_IS_MAPPED": "array is mapped",
    "CUDA_ERROR_ALREADY_MAPPED": "resource already mapped",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "no kernel image is available for execution on the device",
    "CUDA_ERROR_ALREADY_ACQUIRED": "resource already acquired",
    "CUDA_ERROR_NOT_MAPPED": "resource not mapped",
    "CUDA_ERROR_NOT_MAPPED_AS_ARRAY": "resource not mapped as array",
    "CUDA_ERROR_NOT_MAPPED_AS_POINTER": "resource not mapped as pointer",
    "CUDA_ERROR_ECC_UNCORRECTABLE": "uncorrectable ECC error encountered",
    "CUDA_ERROR_UNSUPPORTED_LIMIT": "limit is not supported on this architecture",
    "CUDA_ERROR_CONTEXT_ALREADY_IN_USE": "exclusive-thread device already in use by a different thread",
    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED": "peer access is not supported between these two devices",
    "CUDA_ERROR_INVALID_PTX": "a PTX JIT compilation failed",
    "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT": "invalid OpenGL or DirectX context",
    "CUDA_ERROR_NVLINK_UNCORRECTABLE": "uncorrectable NVLink error detected during the execution",
    "CUDA_ERROR_JIT_COMPILER_NOT_FOUND": "PTX JIT compiler library not found",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the provided PTX was compiled with an unsupported toolchain.",
    "CUDA_ERROR_JIT_COMPILATION_DISABLED": "PTX JIT compilation was disabled",
    "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY": "the provided execution affinity is not supported",
    "CUDA_ERROR_INVALID_SOURCE": "device kernel image is invalid",
    "CUDA_ERROR_FILE_NOT_FOUND": "file not found",
    "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND": "shared object symbol not found",
    "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED": "shared object initialization failed",
    "CUDA_ERROR_OPERATING_SYSTEM": "OS call failed or operation not supported on this OS",
    "CUDA_ERROR_INVALID_HANDLE": "invalid resource handle",
    "CUDA_ERROR_ILLEGAL_STATE": "the operation cannot be performed in the present state",
    "CUDA_ERROR_NOT_FOUND": "named symbol not found",
    "CUDA_ERROR_NOT_READY": "device not ready",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "an illegal memory access was encountered",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "too many resources requested for launch",
    "CUDA_ERROR_LAUNCH_TIMEOUT": "the launch timed out and was terminated",
    "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING": "launch uses incompatible texturing mode",
    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED": "peer access is already enabled",
    "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED": "peer access has not been enabled",
    "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE": "cannot set while device is active in this process",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED": "context is destroyed",
    "CUDA_ERROR_ASSERT": "device-side assert triggered",
    "CUDA_ERROR_TOO_MANY_PEERS": "peer mapping resources exhausted",
    "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED": "part or all of the requested memory range is already mapped",
    "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED": "pointer does not correspond to a registered memory region",
    "CUDA_ERROR_HARDWARE_STACK_ERROR": "hardware stack error",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": "an illegal instruction was encountered",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "misaligned address",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE": "operation not supported on global/shared address space",
    "CUDA_ERROR_INVALID_PC": "invalid program counter",
    "CUDA_ERROR_LAUNCH_FAILED": "unspecified launch failure",
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE": "too many blocks in cooperative launch",
    "CUDA_ERROR_NOT_PERMITTED": "operation not permitted",
    "CUDA_ERROR_NOT_SUPPORTED": "operation not supported",
    "CUDA_ERROR_SYSTEM_NOT_READY": "system not yet initialized",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "system has unsupported display driver / cuda driver combination",
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": "forward compatibility was attempted on non supported HW",
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED": "operation not permitted when stream is capturing",
    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED": "operation failed due to a previous error during capture",
    "CUDA_ERROR_STREAM_CAPTURE_MERGE": "operation would result in a merge of separate capture sequences",
    "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED": "capture was not ended in the same stream as it began",
    "CUDA_ERROR_STREAM_CAPTURE_UNJOINED": "capturing stream has unjoined work",
    "CUDA_ERROR_STREAM_CAPTURE_ISOLATION": "dependency created on uncaptured work in another stream",
    "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT":
        "operation would make the legacy stream depend on a capturing blocking stream",
    "CUDA_ERROR_CAPTURED_EVENT": "operation not permitted on an event last recorded in a capturing stream",
    "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD":
        "attempt to terminate a thread-local capture sequence from another thread",
    "CUDA_ERROR_TIMEOUT": "wait operation timed out",
    "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE": "the graph update was not performed because it included "
                                            "changes which violated constraints specific to instantiated "
                                            "graph update",
    "CUDA_ERROR_UNKNOWN": "unknown error",
}

# __builtin_classify_type results (gcc typeclass.h)
_INTEGER, _ENUM, _POINTER, _REAL, _RECORD, _UNION = 1, 3, 5, 8, 12, 13


def preprocess(cuda_inc: str, defines) -> str:
    src = "".join(f"#include <{h}>\n" for h in HEADERS)
    cmd = ["gcc", "-E", "-P", "-x", "c", "-", f"-I{cuda_inc}"] + [f"-D{d}" for d in defines]
    return subprocess.run(cmd, input=src, capture_output=True, text=True, check=True).stdout


def split_top(text: str, sep: str = ","):
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


_C_TYPE_WORDS = {"int", "char", "long", "short", "float", "double", "unsigned", "signed", "void"}
_ATTR = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
_PROTO = re.compile(r"\bCUresult\s+(cu\w+)\s*\(([^;{]*?)\)\s*;")


def parse_functions(text: str, strict: bool = True):
    """(name, [(param_name, ctype, is_array)]) for every `CUresult cuXxx(...);` prototype."""
    text = _ATTR.sub(" ", text)
    found = {}
    for m in _PROTO.finditer(text):
        name, plist = m.group(1), " ".join(m.group(2).split())
        params = []
        if plist not in ("", "void"):
            for i, p in enumerate(split_top(plist)):
                array = p.endswith("]")
                if array:
                    p = p[:p.index("[")].strip()
                pm = re.match(r"^(.*?[\s*])(\w+)$", p)
                if pm and pm.group(1).strip() not in ("", "const") and pm.group(2) not in _C_TYPE_WORDS:
                    ctype, pname = pm.group(1).strip(), pm.group(2)
                else:
                    ctype, pname = p, f"p{i}"
                ctype = re.sub(r"\s*\*", " *", ctype).replace("* *", "**").strip()
                if array:
                    ctype += " *"
                params.append((pname, ctype))
        if strict and name in found and found[name] != params:
            raise SystemExit(f"{name}: two different prototypes")
        found[name] = params
    return found


# cudaVDPAU.h uses VDPAU's types without including <vdpau/vdpau.h>; these are its definitions (the
# header is rarely installed).
VDPAU_TYPES = """#include <stdint.h>
typedef uint32_t VdpDevice; typedef uint32_t VdpVideoSurface; typedef uint32_t VdpOutputSurface;
typedef int VdpStatus; typedef VdpStatus VdpGetProcAddress(VdpDevice, uint32_t, void **);
"""


def run_c(cuda_inc: str, body: str) -> str:
    src = VDPAU_TYPES + "".join(f"#include <{h}>\n" for h in HEADERS) + \
        "#include <stdio.h>\n#include <stddef.h>\nint main(void) {\n" + body + "return 0; }\n"
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        with open(c, "w") as f:
            f.write(src)
        subprocess.run(["gcc", "-w", "-O0", f"-I{cuda_inc}", "-D__CUDA_API_VERSION_INTERNAL", c, "-o", exe],
                       check=True)
        return subprocess.run([exe], capture_output=True, text=True, check=True).stdout


def classify_types(cuda_inc: str, ctypes):
    """ctype -> abi class, asking the compiler (typedefs resolved, sizes and signedness exact)."""
    ctypes = sorted(ctypes)
    body = []
    for i, t in enumerate(ctypes):
        body.append(f"{{ {t} *p = 0; printf(\"%d %d %zu %zu\\n\", {i}, __builtin_classify_type(*p), "
                    f"sizeof(*p), _Alignof({t})); }}\n")
    info = {}
    for line in run_c(cuda_inc, "".join(body)).split("\n"):
        if line:
            i, cls, size, align = map(int, line.split())
            info[ctypes[i]] = (cls, size, align)
    ints = [t for t in ctypes if info[t][0] == _INTEGER]
    body = "".join(f"printf(\"%d %d\\n\", {i}, (int)(({t})-1 < ({t})0));\n" for i, t in enumerate(ints))
    signed = {}
    for line in run_c(cuda_inc, body).split("\n"):
        if line:
            i, s = map(int, line.split())
            signed[ints[i]] = bool(s)
    abi = {}
    for t in ctypes:
        cls, size, align = info[t]
        if cls == _POINTER:
            abi[t] = "ptr"
        elif cls == _ENUM:
            abi[t] = "u32"
        elif cls == _INTEGER:
            abi[t] = ("i" if signed[t] else "u") + str(8 * size)
        elif cls == _REAL:
            abi[t] = {4: "f32", 8: "f64"}[size]
        elif cls in (_RECORD, _UNION):
            abi[t] = f"struct:{size}"
        else:
            raise SystemExit(f"cannot classify parameter type {t!r} (class {cls})")
    return abi, info


def _struct_body(text: str, tag: str):
    """The member text of `typedef struct|union [name] { ... } tag;` (nested unions and structs
    included), or None."""
    for m in re.finditer(r"\}\s*" + re.escape(tag) + r"\s*;", text):
        depth, i = 0, m.start()
        while i >= 0:
            depth += {"}": 1, "{": -1}.get(text[i], 0)
            if depth == 0:
                break
            i -= 1
        if i >= 0 and re.search(r"typedef\s+(struct|union)\s+\w*\s*$", text[max(0, i - 200):i]):
            return text[i + 1:m.start()]
    return None


def check_struct_abi(cuda_inc: str, text: str, struct_types):
    """The shim declares a struct-by-value parameter as an opaque block of the same size. For 16 bytes or
    less the x86-64 ABI passes it in registers by member class, so those must hold no float/double."""
    for t in struct_types:
        size = struct_types[t]
        if size > 16:
            continue
        tag = t.replace("const ", "").strip()
        body = _struct_body(text, tag)
        if body is None:
            m2 = re.search(r"typedef\s+(\w+)\s+" + re.escape(tag) + r"\s*;", text)
            if m2:
                check_struct_abi(cuda_inc, text, {m2.group(1): size})
                continue
            raise SystemExit(f"struct {t}: definition not found, cannot check its ABI")
        if re.search(r"\b(float|double)\b", body):
            raise SystemExit(f"struct {t} ({size} bytes) has floating members: opaque passing would be wrong")


def parse_enums(text: str):
    """typedef name -> [enumerator names] for every enum."""
    out = {}
    for m in re.finditer(r"typedef\s+enum\s*(\w*)\s*\{([^{}]*)\}\s*(\w+)\s*;", text):
        names = []
        for item in split_top(m.group(2)):
            item = item.strip()
            if item:
                names.append(item.split("=")[0].strip())
        out[m.group(3)] = names
    for m in re.finditer(r"(?<!typedef )\benum\s+(\w+)\s*\{([^{}]*)\}\s*;", text):
        if m.group(1) not in out:
            out[m.group(1)] = [i.split("=")[0].strip() for i in split_top(m.group(2)) if i.strip()]
    return out


def enum_values(cuda_inc: str, enums):
    flat = [(e, n) for e, names in enums.items() for n in names]
    body = "".join(f"printf(\"%d %lld\\n\", {i}, (long long){n});\n" for i, (e, n) in enumerate(flat))
    values = {e: {} for e in enums}
    for line in run_c(cuda_inc, body).split("\n"):
        if line:
            i, v = line.split()
            e, n = flat[int(i)]
            values[e][n] = int(v)
    return values


def _condense(comment: str) -> str:
    """A doc comment's first sentence, shortened the way the driver phrases errors."""
    text = " ".join(l.strip().lstrip("*").strip() for l in comment.split("\n"))
    text = re.sub(r"::(\w+)", r"\1", text).strip()
    sentence = re.split(r"(?<=[a-z0-9)])\.\s", text + " ")[0].strip().rstrip(".")
    for prefix in ("This indicates that ", "This error indicates that ", "This indicates ",
                   "This error indicates ", "Indicates that "):
        if sentence.startswith(prefix):
            sentence = sentence[len(prefix):]
            break
    sentence = re.sub(r"^the\b", "the", sentence)
    return sentence[:1].lower() + sentence[1:]


def error_strings(cuda_inc: str, curesult):
    raw = open(os.path.join(cuda_inc, "cuda.h")).read()
    block = raw[raw.index("typedef enum cudaError_enum"):]
    block = block[:block.index("} CUresult;")]
    comments = {m.group(2): m.group(1) for m in re.finditer(r"/\*\*(.*?)\*/\s*(CUDA_\w+)\s*=", block, re.S)}
    out = {}
    for name in curesult:
        out[name] = DRIVER_ERROR_STRINGS.get(name) or _condense(comments.get(name, "unknown error"))
    return out


# Names whose meaning moved to a differently named function (no PFN typedef says so): CUDA 12.0 made
# cuGraphInstantiate an alias of cuGraphInstantiateWithFlags (cuda.h: #define cuGraphInstantiate ...).
RENAMED = [{"name": "cuGraphInstantiate", "version": 12000, "ptds": False, "symbol": "cuGraphInstantiateWithFlags"}]
# cuda.h keeps the old name for these although a newer ABI version exists (the new one takes more
# arguments, so the header cannot silently redirect): the PFN typedefs are right, cuda.h is not a check.
NEW_ABI_NOT_DEFAULT_IN_HEADER = {"cuStreamGetCtx", "cuGraphAddNode", "cuLaunchHostFunc"}
WINDOWS_ONLY = {"cuWGLGetDevice"}


def parse_procaddr(cuda_inc: str, exported, current_plain):
    """(base name, version, per-thread?) -> exported symbol, from the PFN_cuXxx_vNNNNN[_ptds|_ptsz]
    typedefs. The k-th version (ascending) of a name is the symbol `name` (k = 0) or `name_v{k+1}`; a
    per-thread version is the plain symbol current at that version plus its suffix."""
    pfn = {}
    for h in TYPEDEF_HEADERS:
        path = os.path.join(cuda_inc, h)
        if not os.path.exists(path):
            continue
        for m in re.finditer(r"\bPFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\)", open(path).read()):
            pfn.setdefault(m.group(1), set()).add((int(m.group(2)), m.group(3) or ""))
    table, problems = [], []
    for base in sorted(pfn):
        if base in WINDOWS_ONLY:
            continue
        plain = sorted(v for v, s in pfn[base] if not s)
        sym_at = {}
        for k, v in enumerate(plain):
            sym = base if k == 0 else f"{base}_v{k + 1}"
            if sym not in exported:
                problems.append(f"{base}@{v} -> {sym} not exported")
                continue
            sym_at[v] = sym
            table.append({"name": base, "version": v, "ptds": False, "symbol": sym})
        renamed = [r for r in RENAMED if r["name"] == base]
        table.extend(renamed)
        if plain and base in current_plain and sym_at.get(plain[-1]) != current_plain[base] and \
                not renamed and base not in NEW_ABI_NOT_DEFAULT_IN_HEADER:
            problems.append(f"{base}: newest version maps to {sym_at.get(plain[-1])}, cuda.h says "
                            f"{current_plain[base]}")
        for v, suffix in sorted(x for x in pfn[base] if x[1]):
            older = [p for p in plain if p <= v]
            sym = (sym_at[older[-1]] if older else base) + suffix
            if sym not in exported:
                problems.append(f"{base}@{v}{suffix} -> {sym} not exported")
                continue
            table.append({"name": base, "version": v, "ptds": True, "symbol": sym})
    table.sort(key=lambda e: (e["name"], e["version"], e["ptds"]))
    return table, problems


def current_names(cuda_inc: str):
    """base name -> symbol that cuda.h's `#define cuXxx cuXxx_vN` picks today (no per-thread)."""
    raw = open(os.path.join(cuda_inc, "cuda.h")).read()
    out = {}
    for m in re.finditer(r"#define\s+(cu\w+)\s+(?:__CUDA_API_PT[SD][ZS]\()?(cu\w+)\)?\s*$", raw, re.M):
        out.setdefault(m.group(1), m.group(2))
    return out


WHEELS = ("nvidia-cuda-runtime", "nvidia-cuda-profiler-api")   # cuda.h & co., cudaProfiler.h


def headers_from_wheels(release: str, where: str) -> str:
    """A directory laid out like a toolkit (include/) holding the headers of release `release` (e.g. 13.5)
    taken from NVIDIA's pip wheels."""
    import glob
    import zipfile
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", where] +
                   [f"{w}=={release}.*" for w in WHEELS], check=True)
    for whl in glob.glob(os.path.join(where, "*.whl")):
        with zipfile.ZipFile(whl) as z:
            z.extractall(os.path.join(where, "wheels"))
    inc = glob.glob(os.path.join(where, "wheels", "nvidia", "*", "include", "cuda.h"))
    if not inc:
        raise SystemExit(f"no cuda.h in the {release} wheels")
    os.symlink(os.path.dirname(inc[0]), os.path.join(where, "include"))
    return where


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuda", default=os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    ap.add_argument("--wheels", metavar="RELEASE", help="take the headers of NVIDIA's pip wheels of RELEASE")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "zluda_py",
                                                   "cuda_decls.json"))
    args = ap.parse_args()
    if args.wheels:
        with tempfile.TemporaryDirectory() as d:
            args.cuda = headers_from_wheels(args.wheels, d)
            return generate(args)
    return generate(args)


def generate(args):
    inc = os.path.join(args.cuda, "include")
    version_m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", open(os.path.join(inc, "cuda.h")).read())

    # __CUDA_API_VERSION_INTERNAL makes cuda.h declare the legacy ABI names and, as a side effect, the
    # _ptsz/_ptds per-thread names too (it defines __CUDA_API_PER_THREAD_DEFAULT_STREAM).
    text = preprocess(inc, ["__CUDA_API_VERSION_INTERNAL"])
    funcs = parse_functions(text)
    if len(funcs) != EXPECTED_EXPORTS:
        print(f"warning: {len(funcs)} functions, NVIDIA's libcuda.so.1 for CUDA 13.0 exports "
              f"{EXPECTED_EXPORTS}", file=sys.stderr)
    origin = {}
    for h in reversed(HEADERS):
        for name in parse_functions(_ATTR.sub(" ", open(os.path.join(inc, h)).read().replace("CUDAAPI", "")),
                                    strict=False):
            origin[name] = h
    for name in funcs:
        if name not in origin:
            base = re.sub(r"(_v\d+)?(_ptsz|_ptds)?$", "", name)
            origin[name] = next((origin[n] for n in origin if re.sub(r"(_v\d+)?(_ptsz|_ptds)?$", "", n) == base),
                                "cuda.h")
    abi, info = classify_types(inc, {t for ps in funcs.values() for _, t in ps})
    check_struct_abi(inc, text, {t: info[t][1] for t, a in abi.items() if a.startswith("struct:")})

    functions = [{"name": n,
                  "params": [{"name": pn, "ctype": t, "abi": abi[t]} for pn, t in funcs[n]],
                  "header": origin[n]} for n in sorted(funcs)]
    procaddr, problems = parse_procaddr(inc, set(funcs), current_names(inc))
    for p in problems:
        print("procaddr:", p, file=sys.stderr)

    enums = enum_values(inc, parse_enums(text))
    result = {
        "cuda_version": int(version_m.group(1)),
        "functions": functions,
        "procaddr": procaddr,
        "enums": dict(sorted(enums.items())),
        "error_strings": error_strings(inc, enums["CUresult"]),
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"{len(functions)} functions, {len(procaddr)} proc-address entries, {len(enums)} enums -> "
          f"{os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
