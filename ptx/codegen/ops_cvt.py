"""cvt: integer<->integer (with .sat), float->integer (rni/rzi/rmi/rpi, saturating, NaN -> 0),
integer->float and float->float in every rounding mode, f16x2/bf16x2 packing, .ftz/.sat/.relu."""

from __future__ import annotations

from ptx.codegen import ptxtypes as T
from ptx.codegen.directed_rounding import ulp_neighbours
from ptx.codegen.function_emitter import handles, unsupported, semantic, check_mods
from ptx.codegen.ops_float import (ROUNDING, call_strict, ftz, saturate, f32_to_bf16, bf16_to_f32,
                                   _suffix)

IRND = {"rni": "roundeven", "rzi": "trunc", "rmi": "floor", "rpi": "ceil"}


def _int_range(t):
    bits = T.bits_of(t)
    if T.is_signed(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _int_to_f64_odd(em, v, sty, signed):
    """A 64-bit integer as f64 rounded to odd: bits below the 53-bit significand fold into a sticky
    lsb, the rest converts exactly and is scaled back by a power of two."""
    f = em.f
    neg = f.op(f"icmp slt i64 {v}, 0") if signed else "false"
    mag = f.op(f"select i1 {neg}, i64 {f.op(f'sub i64 0, {v}')}, i64 {v}")
    lz = em.call("llvm.ctlz.i64", "i64", [("i64", mag), ("i1", "false")])
    sh = f.op(f"sub i64 11, {lz}")
    big = f.op(f"icmp sgt i64 {sh}, 0")
    shift = f.op(f"select i1 {big}, i64 {sh}, i64 0")
    one_sh = f.op(f"shl i64 1, {shift}")
    low = f.op(f"and i64 {mag}, {f.op(f'sub i64 {one_sh}, 1')}")
    sticky = f.op(f"zext i1 {f.op(f'icmp ne i64 {low}, 0')} to i64")
    top = f.op(f"or i64 {f.op(f'lshr i64 {mag}, {shift}')}, {sticky}")
    d = f.op(f"uitofp i64 {top} to double")
    expo = f.op(f"add i64 {shift}, 1023")
    scale = f.op(f"bitcast i64 {f.op(f'shl i64 {expo}, 52')} to double")
    d = f.op(f"fmul double {d}, {scale}")
    return f.op(f"select i1 {neg}, double {f.op(f'fneg double {d}')}, double {d}")


def _f64_to_f16(em, v):
    """Correctly rounded f64 -> f16 without a libcall: round to f32 by round-to-odd, then to f16."""
    return em.f.op(f"fptrunc float {_f64_to_f32_odd(em, v)} to half")


def _f64_to_f32_odd(em, v):
    """f64 -> f32 rounded to odd: a later rounding to a narrower format is then correctly rounded."""
    f = em.f
    r = call_strict(em, "fptrunc", "float", [("double", v)], "towardzero", "f32.f64")
    back = f.op(f"fpext float {r} to double")
    inexact = f.op(f"fcmp one double {back}, {v}")
    b = f.op(f"bitcast float {r} to i32")
    b = f.op(f"select i1 {inexact}, i32 {f.op(f'or i32 {b}, 1')}, i32 {b}")
    inf = f.op(f"fcmp oeq double {f.op(f'call double @llvm.fabs.f64(double {v})')}, 0x7FF0000000000000")
    em.m.declare("declare double @llvm.fabs.f64(double)")
    rr = f.op(f"bitcast i32 {b} to float")
    return f.op(f"select i1 {inf}, float {f.op(f'fptrunc double {v} to float')}, float {rr}")


def fext(em, v, sty, dty):
    """Exact widening (bf16 by bit shift: LLVM's bf16 fpext flushes subnormals on x86)."""
    if sty == dty:
        return v
    if sty == "bfloat":
        v = bf16_to_f32(em, v)
        sty = "float"
        if dty == "float":
            return v
    return em.f.op(f"fpext {sty} {v} to {dty}")


def directed_from_nearest(em, x, xty, r, rty, mode):
    """Turn r = round-to-nearest(x) into the directed rounding `mode` by one ulp step where r lies
    on the wrong side of x (exact: r is the nearest, so the directed result is r or its neighbour)."""
    f = em.f
    ity = {"half": "i16", "float": "i32", "bfloat": "i16"}[rty]
    back = fext(em, r, rty, xty)
    b = f.op(f"bitcast {rty} {r} to {ity}")
    up, down = ulp_neighbours(em, b, ity)
    if mode == "upward":
        wrong = f.op(f"fcmp olt {xty} {back}, {x}")
        nb = f.op(f"select i1 {wrong}, {ity} {up}, {ity} {b}")
    elif mode == "downward":
        wrong = f.op(f"fcmp ogt {xty} {back}, {x}")
        nb = f.op(f"select i1 {wrong}, {ity} {down}, {ity} {b}")
    else:
        ab = em.call(f"llvm.fabs.{'f64' if xty == 'double' else 'f32'}", xty, [(xty, back)])
        ax = em.call(f"llvm.fabs.{'f64' if xty == 'double' else 'f32'}", xty, [(xty, x)])
        wrong = f.op(f"fcmp ogt {xty} {ab}, {ax}")
        nb = f.op(f"select i1 {wrong}, {ity} {f.op(f'sub {ity} {b}, 1')}, {ity} {b}")
    return f.op(f"bitcast {ity} {nb} to {rty}")


def convert_float(em, ins, v, st, dt, rnd):
    """float -> float."""
    f = em.f
    sty, dty = T.llvm_type(st), T.llvm_type(dt)
    mode = ROUNDING.get(rnd) if rnd in ROUNDING else None
    if st == "bf16" and dt == "f16":
        x = fext(em, v, "bfloat", "float")          # exact
        r = f.op(f"fptrunc float {x} to half")
        return r if mode is None else directed_from_nearest(em, x, "float", r, "half", mode)
    if T.bits_of(dt) > T.bits_of(st) or st == "bf16" or st == dt:
        return fext(em, v, sty, dty)
    if dt == "bf16":
        x, xty = v, sty
        if st == "f64":
            v = _f64_to_f32_odd(em, v)
        elif st == "f16":
            v = f.op(f"fpext half {v} to float")
            x, xty = v, "float"
        r = f32_to_bf16(em, v)
        return r if mode is None else directed_from_nearest(em, x, xty, r, "bfloat", mode)
    if dt == "f16":
        r = _f64_to_f16(em, v) if st == "f64" else f.op(f"fptrunc {sty} {v} to half")
        return r if mode is None else directed_from_nearest(em, v, sty, r, "half", mode)
    if mode is None:
        return f.op(f"fptrunc {sty} {v} to {dty}")
    return call_strict(em, "fptrunc", dty, [(sty, v)], mode, f"{_suffix(dty)}.{_suffix(sty)}")


@handles("cvt")
def op_cvt(em, ins):
    ts = T.types_in(ins.mods)
    if len(ts) != 2:
        semantic(ins, "cvt needs a destination and a source type")
    dt, st = ts
    f = em.f
    mods = set(ins.mods)
    check_mods(ins, {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "ftz", "sat", "relu", "rna",
                     "satfinite"})
    if "tf32" in (dt, st):
        return _cvt_tf32(em, ins, dt, st, mods)
    if "rna" in mods or ("satfinite" in mods and dt not in ("f16", "bf16", "f16x2", "bf16x2")):
        unsupported(ins)
    rnd = next((m for m in ins.mods if m in ROUNDING or m in IRND), None)
    if dt in ("f16x2", "bf16x2"):
        if st != "f32":
            unsupported(ins)
        a = em.read(ins.operands[1], "f32")
        b = em.read(ins.operands[2], "f32")
        et = "f16" if dt == "f16x2" else "bf16"
        parts = []
        for x in (b, a):               # element 0 (low half) comes from b
            if "ftz" in mods:
                x = ftz(em, x, "f32")
            y = convert_float(em, ins, x, "f32", et, rnd)
            if "satfinite" in mods:
                y = _satfinite(em, y, et)
            if "relu" in mods:
                y = _relu(em, y, T.llvm_type(et))
            parts.append(y)
        ety = T.llvm_type(et)
        vty = T.llvm_type(dt)
        r = f.op(f"insertelement {vty} poison, {ety} {parts[0]}, i32 0")
        r = f.op(f"insertelement {vty} {r}, {ety} {parts[1]}, i32 1")
        em.write(ins.operands[0], r, dt)
        return
    v = em.read(ins.operands[1], st)
    sf, df = T.is_float(st), T.is_float(dt)
    if sf and "ftz" in mods:
        v = ftz(em, v, st)
    if sf and df:
        if rnd in IRND:
            if st != dt:
                semantic(ins, "integer rounding between different float types")
            r = em.call(f"llvm.{IRND[rnd]}.{_suffix(T.llvm_type(st))}", T.llvm_type(st),
                        [(T.llvm_type(st), v)])
        else:
            r = convert_float(em, ins, v, st, dt, rnd)
        if "satfinite" in mods:
            r = _satfinite(em, r, dt)
        if "ftz" in mods:
            r = ftz(em, r, dt)
        if "relu" in mods:
            r = _relu(em, r, T.llvm_type(dt))
        if "sat" in mods:
            r = saturate(em, r, T.llvm_type(dt))
        em.write(ins.operands[0], r, dt)
        return
    if sf and not df:
        sty = T.llvm_type(st)
        if st in ("f16", "bf16"):
            v = fext(em, v, sty, "float")
            sty = "float"
        if rnd in IRND:
            v = em.call(f"llvm.{IRND[rnd]}.{_suffix(sty)}", sty, [(sty, v)])
        elif rnd is not None:
            semantic(ins, f".{rnd} on a float-to-integer cvt")
        bits = T.bits_of(dt)
        k = "fptosi" if T.is_signed(dt) else "fptoui"
        r = em.call(f"llvm.{k}.sat.i{bits}.{_suffix(sty)}", f"i{bits}", [(sty, v)])
        if st == "f64" or bits == 64:
            # the GPU's NaN here is the top bit alone (checked on an H200); elsewhere NaN -> 0
            nan = f.op(f"fcmp uno {sty} {v}, {v}")
            r = f.op(f"select i1 {nan}, i{bits} {-(1 << (bits - 1))}, i{bits} {r}")
        em.write(ins.operands[0], r, dt)
        return
    if not sf and df:
        sty, dty = T.llvm_type(st), T.llvm_type(dt)
        k = "sitofp" if T.is_signed(st) else "uitofp"
        mode = ROUNDING.get(rnd) if rnd in ROUNDING else None
        if rnd in IRND:
            semantic(ins, f".{rnd} on an integer-to-float cvt")
        if dt in ("bf16", "f16"):
            # through f64, rounded to odd so the final rounding sees the exact integer
            xd = _int_to_f64_odd(em, v, sty, T.is_signed(st)) if sty == "i64" else \
                f.op(f"{k} {sty} {v} to double")
            if dt == "f16":
                r = _f64_to_f16(em, xd)
            else:
                r = f32_to_bf16(em, _f64_to_f32_odd(em, xd))
            if mode is not None:
                r = directed_from_nearest(em, xd, "double", r, dty, mode)
        elif mode is None:
            r = f.op(f"{k} {sty} {v} to {dty}")
        else:
            r = call_strict(em, k, dty, [(sty, v)], mode, f"{_suffix(dty)}.{sty}")
        if "ftz" in mods:
            r = ftz(em, r, dt)
        if "sat" in mods:
            r = saturate(em, r, dty)
        em.write(ins.operands[0], r, dt)
        return
    # integer -> integer
    sb, db = T.bits_of(st), T.bits_of(dt)
    if "sat" in mods:
        lo, hi = _int_range(dt)
        w = f.op(f"{'sext' if T.is_signed(st) else 'zext'} i{sb} {v} to i128")
        w = em.call("llvm.smax.i128", "i128", [("i128", w), ("i128", str(lo))])
        w = em.call("llvm.smin.i128", "i128", [("i128", w), ("i128", str(hi))])
        r = f.op(f"trunc i128 {w} to i{db}")
    elif sb == db:
        r = v
    elif sb > db:
        r = f.op(f"trunc i{sb} {v} to i{db}")
    else:
        r = f.op(f"{'sext' if T.is_signed(st) else 'zext'} i{sb} {v} to i{db}")
    em.write(ins.operands[0], r, dt)


def _relu(em, r, ty):
    f = em.f
    neg = f.op(f"fcmp ole {ty} {r}, {'zeroinitializer' if ty.startswith('<') else '0.0'}")
    z = "zeroinitializer" if ty.startswith("<") else "0.0"
    return f.op(f"select i1 {neg}, {ty} {z}, {ty} {r}")


MAX_FINITE_BITS = {"f16": ("i16", 0x7BFF, 0x7C00, 0x7FFF), "bf16": ("i16", 0x7F7F, 0x7F80, 0x7FFF)}


def _satfinite(em, r, t):
    """.satfinite: an infinite result becomes the largest finite value of its sign; NaN stays NaN."""
    f = em.f
    ity, maxb, infb, nanb = MAX_FINITE_BITS[t]
    ty = T.llvm_type(t)
    b = f.op(f"bitcast {ty} {r} to {ity}")
    mag = f.op(f"and {ity} {b}, 32767")
    sign = f.op(f"and {ity} {b}, -32768")
    is_inf = f.op(f"icmp eq {ity} {mag}, {infb}")
    is_nan = f.op(f"icmp ugt {ity} {mag}, {infb}")
    nb = f.op(f"select i1 {is_inf}, {ity} {f.op(f'or {ity} {sign}, {maxb}')}, {ity} {b}")
    nb = f.op(f"select i1 {is_nan}, {ity} {nanb}, {ity} {nb}")
    return f.op(f"bitcast {ity} {nb} to {ty}")


def _cvt_tf32(em, ins, dt, st, mods):
    """cvt.{rna,rn,rz}{.satfinite}.tf32.f32: an f32 bit pattern rounded to tf32's 10 mantissa bits."""
    f = em.f
    if dt != "tf32" or st != "f32":
        unsupported(ins)
    b = em.read(ins.operands[1], "b32")
    mag = f.op(f"and i32 {b}, 2147483647")
    if "rna" in mods:
        r = f.op(f"and i32 {f.op(f'add i32 {b}, 4096')}, -8192")
    elif "rz" in mods:
        r = f.op(f"and i32 {b}, -8192")
    elif "rn" in mods:
        lsb = f.op(f"and i32 {f.op(f'lshr i32 {b}, 13')}, 1")
        half = f.op(f"add i32 4095, {lsb}")
        r = f.op(f"and i32 {f.op(f'add i32 {b}, {half}')}, -8192")
    else:
        unsupported(ins)
    is_nan = f.op(f"icmp ugt i32 {mag}, 2139095040")
    is_inf = f.op(f"icmp eq i32 {mag}, 2139095040")
    r = f.op(f"select i1 {is_inf}, i32 {b}, i32 {r}")
    if "satfinite" in mods:
        rmag = f.op(f"and i32 {r}, 2147483647")
        ovf = f.op(f"icmp eq i32 {rmag}, 2139095040")
        sign = f.op(f"and i32 {r}, -2147483648")
        r = f.op(f"select i1 {ovf}, i32 {f.op(f'or i32 {sign}, 2139086848')}, i32 {r}")
    r = f.op(f"select i1 {is_nan}, i32 2147483647, i32 {r}")
    em.write(ins.operands[0], r, "b32")
