"""Floating-point instructions for f16/bf16 (and x2), f32, f64: add/sub/mul/fma/mad/div/rcp/sqrt/rsqrt
with exact .rn/.rz/.rm/.rp (directed modes run in small strictfp helpers that switch the FP
environment), .ftz, .sat, min/max NaN rules, abs/neg, copysign, testp, and the .approx
transcendentals."""

from __future__ import annotations

from ptx.codegen import ptxtypes as T
from ptx.codegen.directed_rounding import f32_directed
from ptx.codegen.function_emitter import handles, unsupported, semantic, check_mods
from ptx.codegen.ops_mem import one_type

ROUNDING = {"rn": None, "rz": "towardzero", "rm": "downward", "rp": "upward"}
SET_ROUNDING = {"towardzero": 0, "tonearest": 1, "upward": 2, "downward": 3}
MIN_NORMAL_BITS = {"float": ("i32", 0x00800000, 0x7FFFFFFF), "double": ("i64", 1 << 52, (1 << 63) - 1),
                   "half": ("i16", 0x0400, 0x7FFF)}
STRICT_ATTRS = "attributes #90 = { strictfp noinline nounwind }\nattributes #91 = { strictfp }"


def rounding_of(ins):
    for m in ins.mods:
        if m in ROUNDING:
            return m
    return None


def _suffix(ty):
    return {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16",
            "<2 x half>": "v2f16", "<2 x bfloat>": "v2bf16", "<2 x float>": "v2f32",
            "<2 x double>": "v2f64"}[ty]


def strict_helper(em, op, retty, argtys, mode, overload):
    """A strictfp function computing constrained `op` with rounding `mode`; returns its name."""
    name = f"rnd.{op}.{overload}.{mode}"
    args = ", ".join(f"{t} %a{i}" for i, t in enumerate(argtys))
    cargs = ", ".join(f"{t} %a{i}" for i, t in enumerate(argtys))
    has_round = op not in ("fpext", "fptosi", "fptoui")
    meta = (f', metadata !"round.{mode}"' if has_round else "") + ', metadata !"fpexcept.ignore"'
    intr = f"llvm.experimental.constrained.{op}.{overload}"
    mdecl = ", metadata" if has_round else ""
    em.m.declare(f"declare {retty} @{intr}({', '.join(argtys)}{mdecl}, metadata)")
    em.m.declare("declare void @llvm.set.rounding(i32)")
    em.m.add_helper("#strict-attrs", STRICT_ATTRS)
    em.m.add_helper(name, f"""define internal {retty} @"{name}"({args}) #90 {{
  call void @llvm.set.rounding(i32 {SET_ROUNDING[mode]}) #91
  %r = call {retty} @{intr}({cargs}{meta}) #91
  call void @llvm.set.rounding(i32 1) #91
  ret {retty} %r
}}""")
    return f'@"{name}"'


def call_strict(em, op, retty, args, mode, overload):
    name = strict_helper(em, op, retty, [t for t, _ in args], mode, overload)
    return em.f.op(f"call {retty} {name}({', '.join(f'{t} {v}' for t, v in args)})")


def ftz(em, v, t):
    """Flush a subnormal value to a zero of the same sign (no-op for bf16 and f64 per PTX)."""
    ty = T.llvm_type(t)
    if ty in ("<2 x half>", "<2 x bfloat>"):
        if ty == "<2 x bfloat>":
            return v
        f = em.f
        lanes = [ftz(em, f.op(f"extractelement {ty} {v}, i32 {i}"), "f16") for i in range(2)]
        r = f.op(f"insertelement {ty} poison, half {lanes[0]}, i32 0")
        return f.op(f"insertelement {ty} {r}, half {lanes[1]}, i32 1")
    if ty not in MIN_NORMAL_BITS:
        return v
    f = em.f
    ity, minn, absmask = MIN_NORMAL_BITS[ty]
    bits = f.op(f"bitcast {ty} {v} to {ity}")
    mag = f.op(f"and {ity} {bits}, {absmask}")
    small = f.op(f"icmp ult {ity} {mag}, {minn}")
    sign = f.op(f"and {ity} {bits}, {-(1 << (int(ity[1:]) - 1))}")
    nb = f.op(f"select i1 {small}, {ity} {sign}, {ity} {bits}")
    return f.op(f"bitcast {ity} {nb} to {ty}")


def saturate(em, v, ty):
    f = em.f
    if ty.startswith("<"):
        z = "zeroinitializer"
        pos = f.op(f"fcmp ogt {ty} {v}, {z}")
        one = f.op(f"sitofp <2 x i32> <i32 1, i32 1> to {ty}")
        m = em.call(f"llvm.minnum.{_suffix(ty)}", ty, [(ty, v), (ty, one)])
        return f.op(f"select <2 x i1> {pos}, {ty} {m}, {ty} {z}")
    one = f.op(f"sitofp i32 1 to {ty}")
    zero = f.op(f"sitofp i32 0 to {ty}")
    pos = f.op(f"fcmp ogt {ty} {v}, {zero}")
    m = em.call(f"llvm.minnum.{_suffix(ty)}", ty, [(ty, v), (ty, one)])
    return f.op(f"select i1 {pos}, {ty} {m}, {ty} {zero}")


# ------------------------------------------------------------------ bf16 through f32

def bf16_to_f32(em, v, ty="bfloat"):
    """Exact bf16 -> f32 by a 16-bit shift (LLVM's fpext loses bf16 subnormals on x86)."""
    f = em.f
    if ty == "<2 x bfloat>":
        i = f.op(f"bitcast <2 x bfloat> {v} to <2 x i16>")
        w = f.op(f"zext <2 x i16> {i} to <2 x i32>")
        w = f.op(f"shl <2 x i32> {w}, <i32 16, i32 16>")
        return f.op(f"bitcast <2 x i32> {w} to <2 x float>")
    i = f.op(f"bitcast bfloat {v} to i16")
    w = f.op(f"shl i32 {f.op(f'zext i16 {i} to i32')}, 16")
    return f.op(f"bitcast i32 {w} to float")


def f32_to_bf16(em, v, ty="bfloat"):
    """Round-to-nearest-even f32 -> bf16 with integer arithmetic (no libcall needed)."""
    f = em.f
    if ty == "<2 x bfloat>":
        parts = []
        for i in range(2):
            e = f.op(f"extractelement <2 x float> {v}, i32 {i}")
            parts.append(f32_to_bf16(em, e))
        r = f.op(f"insertelement <2 x bfloat> poison, bfloat {parts[0]}, i32 0")
        return f.op(f"insertelement <2 x bfloat> {r}, bfloat {parts[1]}, i32 1")
    b = f.op(f"bitcast float {v} to i32")
    lsb = f.op(f"and i32 {f.op(f'lshr i32 {b}, 16')}, 1")
    r = f.op(f"add i32 {f.op(f'add i32 {b}, 32767')}, {lsb}")
    r = f.op(f"lshr i32 {r}, 16")
    nan = f.op(f"fcmp uno float {v}, 0.0")
    q = f.op(f"or i32 {f.op(f'lshr i32 {b}, 16')}, 64")
    r = f.op(f"select i1 {nan}, i32 {q}, i32 {r}")
    return f.op(f"bitcast i16 {f.op(f'trunc i32 {r} to i16')} to bfloat")


def _is_bf(t):
    return t in ("bf16", "bf16x2")


def _widen(em, t, vals):
    """bf16 values are computed in f32 (exact for + - * and fma inputs); others as they are."""
    ty = T.llvm_type(t)
    if _is_bf(t):
        wty = "<2 x float>" if t == "bf16x2" else "float"
        return wty, [bf16_to_f32(em, v, ty) for v in vals]
    return ty, vals


def _narrow(em, t, v):
    if _is_bf(t):
        return f32_to_bf16(em, v, T.llvm_type(t))
    return v


# ------------------------------------------------------------------ arithmetic

LLVM_BINOP = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}


def float_arith(em, ins):
    check_mods(ins, {"rn", "rz", "rm", "rp", "ftz", "sat", "approx", "full"})
    t = one_type(ins)
    f = em.f
    mods = set(ins.mods)
    a = em.read(ins.operands[1], t)
    b = em.read(ins.operands[2], t)
    if "ftz" in mods:
        a, b = ftz(em, a, t), ftz(em, b, t)
    op = LLVM_BINOP.get(ins.opcode)
    if op is None:
        unsupported(ins)
    rnd = rounding_of(ins)
    mode = ROUNDING.get(rnd) if rnd else None
    if ins.opcode == "div" and t == "f32" and not ({"approx", "full", "rn", "rz", "rm", "rp"} & mods):
        semantic(ins, "div.f32 needs .approx, .full or a rounding mode")
    wty, (wa, wb) = _widen(em, t, [a, b])
    if mode is None:
        flags = ""
        if em.m.fma_contract and rnd is None and op in ("fadd", "fsub", "fmul"):
            flags = "contract "
        r = f.op(f"{op} {flags}{wty} {wa}, {wb}")
    elif t == "f32" and op in ("fadd", "fsub", "fmul") and em.directed_f32_in_f64:
        da, db = f.op(f"fpext float {wa} to double"), f.op(f"fpext float {wb} to double")
        if op == "fmul":
            r = f32_directed(em, f.op(f"fmul double {da}, {db}"), None, mode)
        else:
            r = f32_directed(em, da, db if op == "fadd" else f.op(f"fneg double {db}"), mode)
    else:
        if _is_bf(t) or wty.startswith("<") or wty == "half":
            unsupported(ins, f"{ins.opcode}.{rnd}.{t}")
        r = call_strict(em, op, wty, [(wty, wa), (wty, wb)], mode, _suffix(wty))
    r = _narrow(em, t, r)
    if "ftz" in mods:
        r = ftz(em, r, t)
        if t in WIDER:
            r = flush_tiny_exact(em, r, t, lambda x: f.op(f"{op} {WIDER[t][0]} {x[0]}, {x[1]}"), [a, b])
    if "sat" in mods:
        r = saturate(em, r, T.llvm_type(t))
    em.write(ins.operands[0], r, t)


# the format an operation's exact result is (nearly) representable in, and the type's min normal
WIDER = {"f32": ("double", "0x3810000000000000"), "f16": ("float", "0x3F10000000000000"),
         "f16x2": ("float", "0x3F10000000000000")}


def flush_tiny_exact(em, r, t, wide_op, inputs):
    """.ftz with tininess detected before rounding (as the GPU does): flush r to a signed zero when
    the operation's result, recomputed in a wider format, is below the normal range."""
    f = em.f
    wty, minn = WIDER[t]
    ty = T.llvm_type(t)
    if ty.startswith("<"):
        ety = "half"
        lanes = []
        for i in range(2):
            xs = [f.op(f"extractelement {ty} {x}, i32 {i}") for x in inputs]
            ri = f.op(f"extractelement {ty} {r}, i32 {i}")
            lanes.append(_flush_one(em, ri, ety, wty, minn, wide_op, xs))
        v = f.op(f"insertelement {ty} poison, half {lanes[0]}, i32 0")
        return f.op(f"insertelement {ty} {v}, half {lanes[1]}, i32 1")
    return _flush_one(em, r, ty, wty, minn, wide_op, inputs)


def _flush_one(em, r, ty, wty, minn, wide_op, xs):
    f = em.f
    wx = [f.op(f"fpext {ty} {x} to {wty}") for x in xs]
    w = wide_op(wx)
    aw = em.call(f"llvm.fabs.{_suffix(wty)}", wty, [(wty, w)])
    tiny = f.op(f"fcmp olt {wty} {aw}, {minn}")
    ity = "i32" if ty == "float" else "i16"
    sign = f.op(f"and {ity} {f.op(f'bitcast {ty} {r} to {ity}')}, {'-2147483648' if ity == 'i32' else '-32768'}")
    z = f.op(f"bitcast {ity} {sign} to {ty}")
    return f.op(f"select i1 {tiny}, {ty} {z}, {ty} {r}")


def _bf16_fma_odd(em, a, b, c):
    """a*b+c (f32 inputs holding bf16 values) rounded to odd in f32, so one more rounding to bf16
    is correctly rounded: the product is exact in f64, the sum exact as s + e (TwoSum)."""
    f = em.f
    ad, bd, cd = (f.op(f"fpext float {x} to double") for x in (a, b, c))
    p = f.op(f"fmul double {ad}, {bd}")
    s_ = f.op(f"fadd double {p}, {cd}")
    bb = f.op(f"fsub double {s_}, {p}")
    ap = f.op(f"fsub double {s_}, {bb}")
    e1 = f.op(f"fsub double {p}, {ap}")
    e2 = f.op(f"fsub double {cd}, {bb}")
    e = f.op(f"fadd double {e1}, {e2}")
    sb = f.op(f"bitcast double {s_} to i64")
    # |s| > |exact| when e has the opposite sign of s: step s one ulp toward zero, then make it odd
    opp = f.op(f"fcmp olt double {f.op(f'fmul double {s_}, {e}')}, 0.0")
    sb = f.op(f"select i1 {opp}, i64 {f.op(f'sub i64 {sb}, 1')}, i64 {sb}")
    inexact = f.op(f"fcmp one double {e}, 0.0")
    sb = f.op(f"select i1 {inexact}, i64 {f.op(f'or i64 {sb}, 1')}, i64 {sb}")
    from ptx.codegen.ops_cvt import _f64_to_f32_odd
    return _f64_to_f32_odd(em, f.op(f"bitcast i64 {sb} to double"))


def float_fma(em, ins):
    check_mods(ins, {"rn", "rz", "rm", "rp", "ftz", "sat", "relu"})
    t = one_type(ins)
    f = em.f
    mods = set(ins.mods)
    a, b, c = (em.read(o, t) for o in ins.operands[1:4])
    if "ftz" in mods:
        a, b, c = ftz(em, a, t), ftz(em, b, t), ftz(em, c, t)
    rnd = rounding_of(ins)
    mode = ROUNDING.get(rnd) if rnd else None
    ty = T.llvm_type(t)
    if _is_bf(t):
        lanes = 2 if t == "bf16x2" else 1
        outs = []
        for i in range(lanes):
            xs = [bf16_to_f32(em, f.op(f"extractelement {ty} {v}, i32 {i}") if lanes == 2 else v)
                  for v in (a, b, c)]
            outs.append(f32_to_bf16(em, _bf16_fma_odd(em, *xs)))
        if lanes == 2:
            r = f.op(f"insertelement {ty} poison, bfloat {outs[0]}, i32 0")
            r = f.op(f"insertelement {ty} {r}, bfloat {outs[1]}, i32 1")
        else:
            r = outs[0]
    elif mode is None:
        r = em.call(f"llvm.fma.{_suffix(ty)}", ty, [(ty, a), (ty, b), (ty, c)])
    elif ty == "float" and em.directed_f32_in_f64:
        da, db, dc = (f.op(f"fpext float {v} to double") for v in (a, b, c))
        r = f32_directed(em, f.op(f"fmul double {da}, {db}"), dc, mode)      # the product is exact
    else:
        if ty not in ("float", "double"):
            unsupported(ins, f"fma.{rnd}.{t}")
        r = call_strict(em, "fma", ty, [(ty, a), (ty, b), (ty, c)], mode, _suffix(ty))
    if "ftz" in mods:
        r = ftz(em, r, t)
        if t in WIDER:
            wty = WIDER[t][0]
            r = flush_tiny_exact(em, r, t, lambda x: em.call(f"llvm.fma.{_suffix(wty)}", wty,
                                                             [(wty, x[0]), (wty, x[1]), (wty, x[2])]),
                                 [a, b, c])
    if "relu" in mods:
        z = "zeroinitializer"
        neg = f.op(f"fcmp ole {ty} {r}, {z}")
        r = f.op(f"select {'<2 x i1>' if ty.startswith('<') else 'i1'} {neg}, {ty} {z}, {ty} {r}")
    if "sat" in mods:
        r = saturate(em, r, ty)
    em.write(ins.operands[0], r, t)


@handles("fma")
def op_fma(em, ins):
    float_fma(em, ins)


def float_unary(em, ins):
    check_mods(ins, {"ftz"})
    t = one_type(ins)
    f = em.f
    ty = T.llvm_type(t)
    a = em.read(ins.operands[1], t)
    if "ftz" in ins.mods:
        a = ftz(em, a, t)
    if ins.opcode == "abs":
        r = em.call(f"llvm.fabs.{_suffix(ty)}", ty, [(ty, a)])
    else:
        r = f.op(f"fneg {ty} {a}")
    em.write(ins.operands[0], r, t)


def float_minmax(em, ins):
    check_mods(ins, {"ftz", "NaN", "relu", "xorsign", "abs"})
    t = one_type(ins)
    ty = T.llvm_type(t)
    mods = set(ins.mods)
    vals = [em.read(o, t) for o in ins.operands[1:]]
    if "ftz" in mods:
        vals = [ftz(em, v, t) for v in vals]
    if "xorsign" in mods:
        return _minmax_xorsign_abs(em, ins, t, vals)
    # PTX: NaN operands are ignored unless .NaN; -0 orders below +0
    intr = ("minimum" if ins.opcode == "min" else "maximum") if "NaN" in mods else \
        ("minimumnum" if ins.opcode == "min" else "maximumnum")
    wty, vals = _widen(em, t, vals)
    r = vals[0]
    for v in vals[1:]:
        r = em.call(f"llvm.{intr}.{_suffix(wty)}", wty, [(wty, r), (wty, v)])
    r = _narrow(em, t, r)
    if "relu" in mods:
        f = em.f
        z = "zeroinitializer"
        neg = f.op(f"fcmp ole {ty} {r}, {z}")
        r = f.op(f"select {'<2 x i1>' if ty.startswith('<') else 'i1'} {neg}, {ty} {z}, {ty} {r}")
    em.write(ins.operands[0], r, t)


def _minmax_xorsign_abs(em, ins, t, vals):
    """min/max.xorsign.abs: compare magnitudes, then give the result the XOR of the input signs."""
    f = em.f
    if "abs" not in ins.mods or len(vals) != 2 or t not in ("f16", "bf16", "f16x2", "bf16x2"):
        unsupported(ins)
    ty = T.llvm_type(t)
    lanes = 2 if ty.startswith("<") else 1
    ety = ty.split(" x ")[-1].rstrip(">") if lanes == 2 else ty
    st = "f16" if ety == "half" else "bf16"
    outs = []
    for i in range(lanes):
        a, b = ((f.op(f"extractelement {ty} {v}, i32 {i}") if lanes == 2 else v) for v in vals)
        ab, bb = (f.op(f"bitcast {ety} {x} to i16") for x in (a, b))
        sign = f.op(f"and i16 {f.op(f'xor i16 {ab}, {bb}')}, -32768")
        am, bm = (f.op(f"bitcast i16 {f.op(f'and i16 {x}, 32767')} to {ety}") for x in (ab, bb))
        wty, (wa, wb) = _widen(em, st, [am, bm])
        intr = ("minimum" if ins.opcode == "min" else "maximum") if "NaN" in ins.mods else \
            ("minimumnum" if ins.opcode == "min" else "maximumnum")
        r = _narrow(em, st, em.call(f"llvm.{intr}.{_suffix(wty)}", wty, [(wty, wa), (wty, wb)]))
        rb = f.op(f"bitcast {ety} {r} to i16")
        is_nan = f.op(f"icmp ugt i16 {f.op(f'and i16 {rb}, 32767')}, {31744 if st == 'f16' else 32640}")
        rb = f.op(f"select i1 {is_nan}, i16 32767, i16 {f.op(f'or i16 {rb}, {sign}')}")
        outs.append(f.op(f"bitcast i16 {rb} to {ety}"))
    if lanes == 2:
        r = f.op(f"insertelement {ty} poison, {ety} {outs[0]}, i32 0")
        r = f.op(f"insertelement {ty} {r}, {ety} {outs[1]}, i32 1")
    else:
        r = outs[0]
    em.write(ins.operands[0], r, t)


@handles("rcp", "sqrt", "rsqrt")
def op_rcp_sqrt(em, ins):
    check_mods(ins, {"rn", "rz", "rm", "rp", "ftz", "approx"})
    t = one_type(ins)
    f = em.f
    ty = T.llvm_type(t)
    mods = set(ins.mods)
    a = em.read(ins.operands[1], t)
    if "ftz" in mods:
        a = ftz(em, a, t)
    rnd = rounding_of(ins)
    mode = ROUNDING.get(rnd) if rnd else None
    if ins.opcode != "rsqrt" and "approx" not in mods and rnd is None:
        semantic(ins, f"{ins.opcode}.{t} needs .approx or a rounding mode")
    wty, (wa,) = _widen(em, t, [a])
    one = f.op(f"sitofp i32 1 to {wty}") if not wty.startswith("<") else None
    if ins.opcode == "rcp":
        if mode:
            r = call_strict(em, "fdiv", wty, [(wty, one), (wty, wa)], mode, _suffix(wty))
        else:
            r = f.op(f"fdiv {wty} {one}, {wa}")
    elif ins.opcode == "sqrt":
        if mode:
            r = call_strict(em, "sqrt", wty, [(wty, wa)], mode, _suffix(wty))
        else:
            r = em.call(f"llvm.sqrt.{_suffix(wty)}", wty, [(wty, wa)])
    else:
        if wty == "half" or wty == "float":
            # rsqrt.approx: 1/sqrt in f64 is well inside the ISA's bound
            d = f.op(f"fpext {wty} {wa} to double")
            s = em.call("llvm.sqrt.f64", "double", [("double", d)])
            r = f.op(f"fptrunc double {f.op(f'fdiv double 1.0, {s}')} to {wty}")
        else:
            s = em.call(f"llvm.sqrt.{_suffix(wty)}", wty, [(wty, wa)])
            r = f.op(f"fdiv {wty} {one}, {s}")
    r = _narrow(em, t, r)
    if "ftz" in mods:
        r = ftz(em, r, t)
    em.write(ins.operands[0], r, t)


@handles("sin", "cos", "lg2", "ex2", "tanh")
def op_transcendental(em, ins):
    check_mods(ins, {"approx", "ftz"})
    t = one_type(ins)
    f = em.f
    mods = set(ins.mods)
    if "approx" not in mods:
        semantic(ins, f"{ins.opcode} needs .approx")
    a = em.read(ins.operands[1], t)
    if "ftz" in mods:
        a = ftz(em, a, t)
    wty, (wa,) = _widen(em, t, [a])
    lanes = 2 if wty.startswith("<") else 1
    elem = wty.split(" x ")[-1].rstrip(">") if lanes == 2 else wty
    outs = []
    for i in range(lanes):
        x = f.op(f"extractelement {wty} {wa}, i32 {i}") if lanes == 2 else wa
        outs.append(em.approx_math(ins, x, elem))
    if lanes == 2:
        r = f.op(f"insertelement {wty} poison, {elem} {outs[0]}, i32 0")
        r = f.op(f"insertelement {wty} {r}, {elem} {outs[1]}, i32 1")
    else:
        r = outs[0]
    r = _narrow(em, t, r)
    if "ftz" in mods:
        r = ftz(em, r, t)
    em.write(ins.operands[0], r, t)


@handles("copysign")
def op_copysign(em, ins):
    t = one_type(ins)
    ty = T.llvm_type(t)
    a = em.read(ins.operands[1], t)
    b = em.read(ins.operands[2], t)
    r = em.call(f"llvm.copysign.{_suffix(ty)}", ty, [(ty, b), (ty, a)])
    em.write(ins.operands[0], r, t)


FPCLASS = {"finite": 0x1F8, "infinite": 0x204, "number": 0x3FC, "notanumber": 0x3,
           "normal": 0x168, "subnormal": 0x90}   # the GPU counts zeros as normal


@handles("testp")
def op_testp(em, ins):
    t = one_type(ins)
    ty = T.llvm_type(t)
    op = next((m for m in ins.mods if m in FPCLASS), None)
    if op is None:
        unsupported(ins)
    a = em.read(ins.operands[1], t)
    r = em.call(f"llvm.is.fpclass.{_suffix(ty)}", "i1", [(ty, a), ("i32", str(FPCLASS[op]))])
    em.write(ins.operands[0], r, "pred")
