"""ZLUDA_TRACE's call lines: each argument shown as its declaration says (decimal, hex, enum name, string)
and, after a successful call, the values its out-parameters received. Imported only when tracing."""

import struct

from zluda_py import cmem
from zluda_py.decls import ENUMS, FUNCTIONS
from zluda_py.errors import NAME_OF

# Integer types passed by value that are addresses or opaque handles, not quantities.
_HEX_VALUES = {"CUdeviceptr", "CUdeviceptr_v1", "CUmemGenericAllocationHandle", "CUtexObject",
               "CUsurfObject"}

# What a `T *` out-parameter holds, by T: (read at an address, format).
_S32 = (cmem.read_i32, str)
_U32 = (cmem.read_u32, str)
_U64 = (cmem.read_u64, str)
_POINTEES = {"int": _S32, "CUdevice": _S32, "unsigned int": _U32, "unsigned": _U32, "cuuint32_t": _U32,
             "size_t": _U64, "unsigned long long": _U64, "cuuint64_t": _U64}
_HANDLE_POINTEES = {"void *", "CUdeviceptr", "CUcontext", "CUmodule", "CUfunction", "CUstream", "CUevent",
                    "CUlinkState", "CUlibrary", "CUkernel", "CUgraph", "CUgraphExec", "CUgraphNode",
                    "CUmemoryPool", "CUarray", "CUmipmappedArray", "CUtexObject", "CUsurfObject", "CUtexref",
                    "CUsurfref", "CUmemGenericAllocationHandle", "CUuserObject", "CUgreenCtx",
                    "CUexternalMemory", "CUexternalSemaphore", "CUgraphicsResource"}

# Non-const pointers that are not single out-values: arrays the caller fills in (options, kernel
# parameters, batch descriptions), and output arrays whose length another parameter gives (reading an
# element of an empty one could fault). Reading those after the call would show the wrong thing.
_NOT_OUTPUTS = {"kernelParams", "extra", "options", "optionValues", "jitOptions", "jitOptionsValues",
                "libraryOptions", "libraryOptionValues", "attributes", "data", "dataSizes", "dsts", "srcs",
                "sizes", "dptrs", "attrsIdxs", "prefetchLocIdxs", "resources", "nodes", "rootNodes", "from",
                "to", "edgeData", "functions", "kernels", "dependencies", "dependentNodes", "pCudaDevices",
                "pStream"}
_NOT_OUTPUTS_OF = {("cuTexRefSetBorderColor", "pBorderColor")}
_STRING_BUFFERS = {"name", "pciBusId"}     # char * filled with a NUL-terminated name (not luid, logs)

_enum_names: dict = {}


def _names_of(enum: str) -> dict:
    names = _enum_names.get(enum)
    if names is None:
        names = {}
        for n, v in ENUMS[enum].items():
            names.setdefault(v, n)     # the first of aliases is the one cuda.h documents
        _enum_names[enum] = names
    return names


def _hex(v) -> str:
    return f"{v:#x}"


def _cstring(v) -> str:
    return repr(cmem.read_cstring(v, limit=200)) if v else "0x0"


def _enum_format(enum: str):
    names = _names_of(enum)
    return lambda v: names.get(v) or str(v)


def _f32_at(addr: int) -> float:
    return struct.unpack("<f", struct.pack("<I", cmem.read_u32(addr)))[0]


def _value_format(p):
    abi, ctype, name = p.get("abi", "u64"), p.get("ctype", ""), p["name"]
    if abi in ("f32", "f64"):
        return repr
    if abi == "ptr":
        return _cstring if ctype == "const char *" else _hex
    if abi.startswith("struct"):
        return _hex         # the address of the caller's copy
    if ctype in ENUMS:
        return _enum_format(ctype)
    if ctype in _HEX_VALUES or "flags" in name.lower():
        return _hex
    return str


def _out_reader(fname: str, p):
    """(read, format) for an out-parameter whose value is worth showing after the call, else None."""
    ctype, name = p.get("ctype", ""), p["name"]
    if p.get("abi") != "ptr" or not ctype.endswith("*") or name in _NOT_OUTPUTS or \
            (fname, name) in _NOT_OUTPUTS_OF:
        return None
    if ctype == "const char **":
        return cmem.read_u64, _cstring
    if ctype.startswith("const "):
        return None
    if ctype == "char *":
        return (lambda a: a, _cstring) if name in _STRING_BUFFERS else None
    pointee = ctype[:-1].strip()
    if pointee in _POINTEES:
        read, fmt = _POINTEES[pointee]
        return read, (_hex if "flags" in name.lower() else fmt)
    if pointee == "CUdeviceptr_v1":
        return cmem.read_u32, _hex
    if pointee in _HANDLE_POINTEES:
        return cmem.read_u64, _hex
    if pointee == "float":
        return _f32_at, repr
    if pointee == "CUuuid":
        return (lambda a: cmem.read_bytes(a, 16)), bytes.hex
    if pointee in ENUMS:
        return cmem.read_u32, _enum_format(pointee)
    return None


class _Format:
    """How one function's calls are written: argument slots and out-parameters."""

    def __init__(self, f):
        self.name = f["name"]
        params = f["params"]
        self.slots = []        # (label, [indices], format of one value)
        i = 0
        while i < len(params):
            stem = params[i]["name"][:-1]
            if stem and params[i]["name"].endswith("X") and i + 2 < len(params) and \
                    [p["name"] for p in params[i:i + 3]] == [stem + "X", stem + "Y", stem + "Z"]:
                self.slots.append((stem, [i, i + 1, i + 2], _value_format(params[i])))   # gridDim=(4,1,1)
                i += 3
                continue
            self.slots.append((params[i]["name"], [i], _value_format(params[i])))
            i += 1
        self.outs = [(i, p["name"], r) for i, p in enumerate(params)
                     if (r := _out_reader(self.name, p)) is not None]

    def args(self, values) -> str:
        parts = []
        for label, idx, fmt in self.slots:
            try:
                if len(idx) == 1:
                    parts.append(f"{label}={fmt(values[idx[0]])}")
                else:
                    parts.append(f"{label}=({','.join(fmt(values[i]) for i in idx)})")
            except Exception:  # noqa: BLE001 - a bad string pointer must not stop the trace
                parts.append(f"{label}=?")
        return ", ".join(parts)

    def outputs(self, values) -> str:
        shown = []
        for i, name, (read, fmt) in self.outs:
            addr = values[i] if i < len(values) else 0
            if not addr:
                continue        # an optional output the caller did not ask for
            try:
                shown.append(f"{name}={fmt(read(addr))}")
            except Exception:  # noqa: BLE001
                shown.append(f"{name}=?")
        return f" [{', '.join(shown)}]" if shown else ""


_formats: dict = {}


def call_line(fid: int, values, result: int, message: str = None) -> str:
    """`name(args) -> RESULT[: message]`, with ` [out=value, ...]` after a successful call."""
    if not 0 <= fid < len(FUNCTIONS):
        return f"function {fid}: {NAME_OF.get(result, result)}" + (f": {message}" if message else "")
    fm = _formats.get(fid)
    if fm is None:
        fm = _formats[fid] = _Format(FUNCTIONS[fid])
    line = f"{fm.name}({fm.args(values)}) -> {NAME_OF.get(result, result)}"
    if message:
        return f"{line}: {message}"
    return line + fm.outputs(values) if result == 0 else line
