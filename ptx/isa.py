"""What ptxas's front end insists on beyond syntax: the ISA versions and targets that exist, the modifiers
each instruction takes, the modifiers it requires, the operand types that fit it, and the parameter limit."""

from __future__ import annotations

import re

from ptx import ast
from ptx.errors import PTXSemanticError, PTXVersionError

# NVIDIA's 13.0 driver stops at ISA 9.0, but the NVVM and NVRTC of CUDA 13.5 that numba-cuda and cuda.core
# use emit 9.5, and refusing what the toolchains at hand produce would break their programs: the newest ISA
# a CUDA release has is the limit.
CURRENT = (9, 5)
VERSIONS = frozenset([(1, m) for m in range(6)] + [(2, m) for m in range(4)] + [(3, m) for m in range(3)]
                     + [(4, m) for m in range(4)] + [(5, 0)] + [(6, m) for m in range(6)]
                     + [(7, m) for m in range(9)] + [(8, m) for m in range(9)] + [(9, m) for m in range(6)])

# sm number -> (the first ISA that has it, the suffixes it exists with)
_SM = {
    10: ((1, 0), ""), 11: ((1, 0), ""), 12: ((1, 2), ""), 13: ((1, 2), ""), 20: ((2, 0), ""),
    21: ((2, 0), ""), 30: ((2, 0), ""), 32: ((4, 0), ""), 35: ((3, 1), ""), 37: ((4, 1), ""),
    50: ((4, 0), ""), 52: ((4, 1), ""), 53: ((4, 2), ""), 60: ((5, 0), ""), 61: ((5, 0), ""),
    62: ((5, 0), ""), 70: ((6, 0), ""), 72: ((6, 1), ""), 75: ((6, 3), ""), 80: ((7, 0), ""),
    86: ((7, 1), ""), 87: ((7, 4), ""), 88: ((9, 0), ""), 89: ((7, 8), ""), 90: ((7, 8), "a"),
    100: ((8, 6), "af"), 101: ((8, 6), "af"), 103: ((8, 8), "af"), 110: ((9, 0), "af"),
    107: ((9, 4), "af"), 120: ((8, 7), "af"), 121: ((8, 8), "af"),
}
_TARGET_RE = re.compile(r"(sm|compute)_(\d+)([af]?)\Z")
_TARGET_FLAGS = frozenset(("texmode_unified", "texmode_independent", "debug", "map_f64_to_f32"))


def _v(version) -> str:
    return f"{version[0]}.{version[1]}"


def check_version(version, line: int) -> None:
    if version not in VERSIONS or version > CURRENT:
        raise PTXVersionError(f"Unsupported .version {_v(version)}; current version is '{_v(CURRENT)}'", line, 1)


def target_sm(target: str):
    """86 for 'sm_86' / 'compute_86' / 'sm_90a'; None for a flag such as 'debug' or a name that is no target."""
    m = _TARGET_RE.match(target)
    return int(m.group(2)) if m else None


def known_target(target: str) -> bool:
    m = _TARGET_RE.match(target)
    entry = _SM.get(int(m.group(2))) if m else None
    return entry is not None and (not m.group(3) or m.group(3) in entry[1])


def check_header(module: ast.Module) -> None:
    """The .version, .target and .address_size directives (the version first: ptxas stops at it)."""
    lines = module.header_lines
    check_version(module.version, lines.get("version", 0))
    tline = lines.get("target", 0)
    if "address_size" in lines and module.version < (2, 3):
        raise PTXSemanticError("Feature '.address_size directive' requires PTX ISA .version 2.3 or later",
                               lines["address_size"], 1)
    if module.address_size != 64:
        raise PTXSemanticError(f"'.address_size {module.address_size}': 32-Bit ABI (--machine 32 or 32-Bit "
                               "addressing) is not supported", lines.get("address_size", 0), 1)
    for t in module.target:
        if t in _TARGET_FLAGS:
            continue
        if not known_target(t):
            raise PTXSemanticError(f"Unsupported .target '{t}'", tline, 1)
        if module.version < _SM[target_sm(t)][0]:
            raise PTXSemanticError(f"PTX .version {_v(module.version)} does not support .target '{t}'", tline, 1)


def check_params(fn: ast.Function, module: ast.Module) -> None:
    """An entry's parameter list within ptxas's limit: 4352 bytes, 32764 from ISA 8.1 on sm_70 and later."""
    from ptx.codegen import ptxtypes as T
    size = 0
    for p in fn.params:
        n = T.size_of(p.type.name) * p.type.vec
        for d in p.dims:
            n *= d
        a = p.align or T.size_of(p.type.name) * p.type.vec or 1
        size = -(-size // a) * a + n
    sms = [s for s in map(target_sm, module.target) if s]
    big = module.version >= (8, 1) and sms and min(sms) >= 70
    limit = 32764 if big else 4352
    if size > limit:
        end = fn.end or fn.pos
        raise PTXSemanticError(f"Entry function '{fn.name}' uses too much parameter space ({size:#x} bytes, "
                               f"{limit:#x} max).", end.line, end.col)


# ------------------------------------------------------------------ modifiers

TYPES = frozenset("""
s8 s16 s32 s64 u8 u16 u32 u64 b8 b16 b32 b64 b128 f16 f16x2 f32 f32x2 f64 bf16 bf16x2 tf32 pred u16x2 s16x2
e4m3 e5m2 e4m3x2 e5m2x2 e2m1x2 e2m3x2 e3m2x2 ue8m0x2 s2f6x2 e2m1 e2m3 e3m2 ue8m0 s4 u4 b1 e4m3x4 e5m2x4
e2m1x4 e2m3x4 e3m2x4 u2 s2
""".split())
_ROUND_F = frozenset(("rn", "rz", "rm", "rp", "rna", "rs"))
_ROUND_I = frozenset(("rni", "rzi", "rmi", "rpi"))
_SPACES = frozenset(("global", "shared", "shared::cta", "shared::cluster", "local", "param", "param::entry",
                     "param::func", "const", "generic"))
_SEM = frozenset(("relaxed", "acquire", "release", "acq_rel", "sc", "weak", "volatile", "mmio", "strong"))
_SCOPES = frozenset(("cta", "cluster", "gpu", "sys"))
_VEC = frozenset(("v2", "v4", "v8"))
_CACHE = frozenset(("ca", "cg", "cs", "lu", "cv", "nc", "wb", "wt", "unified"))
_HINT = re.compile(r"L1::(evict_normal|evict_unchanged|evict_first|evict_last|no_allocate)|"
                   r"L2::(evict_normal|evict_first|evict_last|evict_unchanged|cache_hint|64B|128B|256B)\Z")
_CMP = frozenset("eq ne lt le gt ge lo ls hi hs equ neu ltu leu gtu geu num nan".split())
_BOOL = frozenset(("and", "or", "xor"))
_ATOM_OPS = frozenset("and or xor cas exch add inc dec min max".split())
_ARITH = _ROUND_F | {"ftz", "sat", "cc", "lo", "hi", "wide", "relu", "NaN", "xorsign", "abs", "oob", "satfinite"}


def _w(s):
    return frozenset(s.split())


# opcode -> the words its modifiers are drawn from (besides the types); opcodes not listed are unchecked.
_ALLOWED = {
    "add": _ROUND_F | {"ftz", "sat", "cc", "relu", "oob"}, "sub": _ROUND_F | {"ftz", "sat", "cc", "relu"},
    "addc": _w("cc"), "subc": _w("cc"), "mul": _ARITH, "mad": _ARITH, "fma": _ARITH,
    "mul24": _w("lo hi sat"), "mad24": _w("lo hi sat"), "sad": frozenset(),
    "div": _ROUND_F | _w("approx full ftz"), "rem": frozenset(), "abs": _w("ftz relu"), "neg": _w("ftz relu"),
    "min": _w("ftz NaN xorsign abs relu"), "max": _w("ftz NaN xorsign abs relu"),
    "and": frozenset(), "or": frozenset(), "xor": frozenset(), "not": frozenset(), "cnot": frozenset(),
    "shl": frozenset(), "shr": frozenset(), "popc": frozenset(), "clz": frozenset(), "brev": frozenset(),
    "bfind": _w("shiftamt"), "bfe": frozenset(), "bfi": frozenset(), "bmsk": _w("clamp wrap"),
    "szext": _w("clamp wrap"), "copysign": frozenset(),
    "testp": _w("finite infinite number notanumber normal subnormal"),
    "rcp": _ROUND_F | _w("approx ftz full"), "sqrt": _ROUND_F | _w("approx ftz full"),
    "rsqrt": _w("approx ftz"), "sin": _w("approx ftz"), "cos": _w("approx ftz"), "lg2": _w("approx ftz"),
    "ex2": _w("approx ftz"), "tanh": _w("approx"),
    "setp": _CMP | _BOOL | {"ftz"}, "set": _CMP | _BOOL | {"ftz"}, "selp": frozenset(), "slct": _w("ftz"),
    "cvt": _ROUND_F | _ROUND_I | _w("ftz sat relu satfinite pack frac"),
    "cvta": _SPACES | {"to"}, "mov": _VEC, "prmt": _w("f4e b4e rc8 ecl ecr rc16"), "shf": _w("l r clamp wrap"),
    "lop3": _BOOL, "dp4a": _w("lo hi"), "dp2a": _w("lo hi"),
    "shfl": _w("sync up down bfly idx"), "vote": _w("sync all any uni ballot"),
    "bar": _w("sync arrive red warp cta aligned popc and or"),
    "barrier": _w("sync arrive red cta cluster aligned popc and or wait relaxed release acquire"),
    "membar": _w("cta gl sys proxy alias"), "match": _w("any all sync"),
    "redux": _w("sync add min max and or xor abs NaN"), "elect": _w("sync"),
    "activemask": frozenset(), "nanosleep": frozenset(), "isspacep": _SPACES,
    "bra": _w("uni"), "brx": _w("idx uni"), "call": _w("uni"), "ret": _w("uni"), "exit": frozenset(),
    "trap": frozenset(), "brkpt": frozenset(),
    "ld": _SPACES | _SEM | _SCOPES | _CACHE | _VEC, "ldu": _w("global") | _VEC,
    "st": _SPACES | _SEM | _SCOPES | _CACHE | _VEC,
    "atom": _SPACES | _SEM | _SCOPES | _ATOM_OPS | _VEC | {"noftz"},
    "red": _SPACES | _SEM | _SCOPES | _ATOM_OPS | _VEC | {"noftz"},
}
_INT = frozenset("s8 s16 s32 s64 u8 u16 u32 u64".split())
_FLOAT = frozenset("f16 f32 f64 bf16 f16x2 bf16x2 e4m3 e5m2 e4m3x2 e5m2x2 tf32".split())
_REQUIRED = {"setp": (_CMP, "Comparison"), "set": (_CMP, "Comparison"), "shfl": (_w("up down bfly idx"), "Shuffle"),
             "bar": (_w("sync arrive red"), "Barrier"), "atom": (_ATOM_OPS, "Reduction operation"),
             "red": (_ATOM_OPS, "Reduction operation")}


def _fail(msg, ins):
    raise PTXSemanticError(msg, ins.pos.line, ins.pos.col)


# Instructions a module's .target must reach (the PTX ISA's target notes), refused below it as ptxas does:
# an H200 answers 218 with "Feature 'elect' requires .target sm_90 or higher" for elect, mapa and multimem
# in a .target sm_86 module (tests/data/nvidia_elect_answers.json). The feature multimem names carries
# its first modifier ('multimem.ld_reduce').
_MIN_TARGET = {"elect": 90, "mapa": 90, "getctarank": 90, "multimem": 90, "griddepcontrol": 90,
               "stmatrix": 90, "setmaxnreg": 90, "wgmma": 90, "tcgen05": 100, "clusterlaunchcontrol": 100}


def _check_target(ins: ast.Instruction, module: ast.Module) -> None:
    need = _MIN_TARGET.get(ins.opcode)
    if need is None:
        return
    have = min((s for s in map(target_sm, module.target) if s), default=None)
    if have is not None and have < need:
        feature = ins.opcode + (f".{ins.mods[0]}" if ins.opcode == "multimem" and ins.mods else "")
        _fail(f"Feature '{feature}' requires .target sm_{need} or higher", ins)


# Surface instructions as the driver's JIT (an H100's, tests/data/nvidia_surface_answers.json) and ptxas 13.0
# take them: a clamp mode is required, sust.p stores .b32 data in the 1d/2d/3d/a1d/a2d geometries, sured has
# 1d/2d/3d only, and each sured op its own types.
_SURF_CLAMPS = _w("trap clamp zero")
_SURF_CACHE = _w("wb cg cs wt ca cv")
_SURED_B_TYPES = {"add": _w("u32 s32 u64"), "min": _w("u32 s32 u64 s64"), "max": _w("u32 s32 u64 s64"),
                  "and": _w("b32"), "or": _w("b32")}
_SURED_P_TYPES = {"add": _w("b32"), "min": _w("b32 b64"), "max": _w("b32 b64"), "and": _w("b32"),
                  "or": _w("b32")}


def _check_surface(ins: ast.Instruction, module: ast.Module) -> None:
    op, mods = ins.opcode, ins.mods
    name = f"{op}.{mods[0]}" if mods and mods[0] in ("b", "p") else op
    if name == "suld.p":
        _fail("Not a name of any known instruction: 'suld.p'", ins)
    clamps = [m for m in mods if m in _SURF_CLAMPS]
    if len(clamps) > 1:
        _fail("Multiple clamp modifiers specified", ins)
    for m in mods:
        if m in ("2dms", "a2dms") and (op == "sured" or name == "sust.p"):
            _fail(f"Illegal modifier 'Multi-sample geometry' for instruction '{name}'", ins)
        if m in ("cube", "acube") or (op == "sured" and m in ("a1d", "a2d")) \
                or (op == "sured" and (m in _SURF_CACHE or m == "cas")):
            _fail(f"Illegal modifier '.{m}' for instruction '{name}'", ins)
        if op == "sured" and m in _VEC:
            _fail(f"Vector qualifier is not allowed for instruction '{name}'", ins)
    types = [m for m in mods if m in TYPES]
    if name == "sust.p" and types != ["b32"]:
        _fail("Unexpected instruction types specified for 'sust.p'", ins)
    if op == "sured" and name != op:
        rop = next((m for m in mods if m in _SURED_B_TYPES), None)
        table = _SURED_B_TYPES if name == "sured.b" else _SURED_P_TYPES
        allowed = frozenset().union(*table.values()) | ({"b32"} if name == "sured.b" else set())
        if len(types) != 1 or types[0] not in allowed:
            _fail(f"Unexpected instruction types specified for '{name}'", ins)
        ty = types[0]
        if module.version < (8, 1) and rop in ("min", "max") and ty in ("u64", "s64"):
            _fail("Feature '64-bit min/max operation on sured.b' requires PTX ISA .version 8.1 or later", ins)
        if module.version < (8, 1) and ty == "b64":
            _fail("Feature '.b64 on sured.p' requires PTX ISA .version 8.1 or later", ins)
        if rop is not None and ty not in table[rop]:
            _fail(f"Incorrect type '.{ty}' for operation '.{rop}' in instruction '{name}'", ins)
    if not clamps:
        _fail(f"Clamp modifier required for instruction '{name}'", ins)


def check_modifiers(ins: ast.Instruction, module: ast.Module) -> None:
    """Every modifier is one the instruction takes, and the ones it cannot do without are there; the
    instruction is one the module's .target has."""
    _check_target(ins, module)
    if ins.opcode in ("suld", "sust", "sured"):
        _check_surface(ins, module)
    op, mods = ins.opcode, ins.mods
    allowed = _ALLOWED.get(op)
    if allowed is None:
        return
    if op == "bar" and mods[:1] == ("warp",):
        allowed = _w("warp sync")
    for m in mods:
        if m not in allowed and m not in TYPES and not (op in ("ld", "st", "atom", "red") and _HINT.match(m)):
            _fail(f"Unknown modifier '.{m}' in instruction '{op}.{'.'.join(mods)}'", ins)
    ms = set(mods)
    req = _REQUIRED.get(op)
    if req is not None and not (ms & req[0]) and not (op == "bar" and "warp" in ms):
        _fail(f"{req[1]} modifier required for instruction '{op}'", ins)
    types = [m for m in mods if m in TYPES]
    if op in ("mad", "mul") and types and types[-1] in _INT and not ms & {"lo", "hi", "wide"}:
        _fail(f"Unexpected instruction types specified for '{op}' (an integer {op} needs .lo, .hi or .wide)",
              ins)
    if op == "sub" and types and types[-1] in ("u16x2", "s16x2"):  # ptxas has add.u16x2 but no sub
        _fail("Unexpected instruction types specified for 'sub'", ins)
    if op == "fma" and types and types[-1] in ("f32", "f64") and not ms & _ROUND_F:
        _fail("Rounding modifier required for instruction 'fma'", ins)
    if op == "cvt" and len(types) >= 2:
        dst, src = types[0], types[1]
        if (dst in _FLOAT and src in _INT and not ms & _ROUND_F) or \
                (dst in _INT and src in _FLOAT and not ms & _ROUND_I):
            _fail(f"Rounding modifier required for instruction 'cvt' (cvt.{dst}.{src})", ins)
    if op == "shfl" and "sync" not in ms and module.version >= (6, 4) and \
            min((s for s in map(target_sm, module.target) if s), default=0) >= 70:
        _fail("Instruction 'shfl' without '.sync' is not supported on .target sm_70 and higher from PTX ISA "
              "version 6.4", ins)


# ------------------------------------------------------------------ operand types

_ARITH_OPS = frozenset(("add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "neg", "abs", "addc",
                        "subc", "madc", "and", "or", "xor", "not", "copysign"))


def _kind(name):
    if name in _INT:
        return "i"
    if name in _FLOAT:
        return "f"
    return "b"


def check_operand_kinds(ins: ast.Instruction, types: list) -> None:
    """A float register in an integer instruction or an integer register in a float one (a .b register fits
    both): ptxas's 'Arguments mismatch'."""
    if ins.opcode not in _ARITH_OPS or not ins.mods:
        return
    itype = ins.mods[-1]
    want = _kind(itype) if itype in TYPES else "b"
    if want == "b":
        return
    for o, t in zip(ins.operands, types):
        if isinstance(t, ast.Type) and t.name != "pred":
            have = _kind(t.name)
            if have != "b" and have != want:
                raise PTXSemanticError(f"Arguments mismatch for instruction '{ins.opcode}': '{o.name}' is a "
                                       f".{t.name} register, the instruction is .{itype}", o.pos.line, o.pos.col)


def check_address_width(ins: ast.Instruction, module: ast.Module, base_type) -> None:
    """A 32-bit register as a global or generic address in a 64-bit module."""
    if module.address_size != 64 or ins.opcode not in ("ld", "st", "atom", "red", "ldu", "prefetch"):
        return
    if any(m in ("shared", "shared::cta", "shared::cluster", "local", "param", "const", "param::entry",
                 "param::func") for m in ins.mods):
        return
    if isinstance(base_type, ast.Type) and base_type.vec == 1 and base_type.name in (
            "b32", "s32", "u32"):
        _fail(f"a 32-bit register as the address of '{ins.opcode}.{'.'.join(ins.mods)}': 32-Bit addressing "
              "is not supported", ins)
