"""Video instructions (scalar vadd/vsub/vabsdiff/vmin/vmax/vshl/vshr/vmad/vset with part selectors, SIMD
vop2/vop4/vset2/vset4) and the packed .u16x2/.s16x2 add/sub/min/max, as scalar integer IR on 32-bit words."""

from __future__ import annotations

import re

from ptx import ast as A
from ptx.codegen import ops_int  # noqa: F401  (its handlers first: the packed forms wrap them)
from ptx.codegen.function_emitter import HANDLERS, handles, semantic, check_mods, unsupported

PACKED = ("u16x2", "s16x2")
_SEL = re.compile(r"[bh]\d+\Z")
_CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _types(ins, n):
    ts = [m for m in ins.mods if m in ("u32", "s32")]
    if len(ts) != n:
        semantic(ins, f"expected {n} types")
    return [t == "s32" for t in ts]


def _word(em, o):
    """(the operand's 32 bits, its selector or '')."""
    return em.read(o, "b32"), getattr(o, "sel", "") if isinstance(o, A.Reg) else ""


def _ext(em, v, bits, signed, to):
    f = em.f
    if bits == to:
        return v
    if bits > to:
        return f.op(f"trunc i{bits} {v} to i{to}")
    return f.op(f"{'sext' if signed else 'zext'} i{bits} {v} to i{to}")


def _field(em, v, shift, width, signed, to, src=32):
    """Bits [shift, shift+width) of the i<src> value v, sign- or zero-extended to i<to>."""
    f = em.f
    s = f.op(f"lshr i{src} {v}, {shift}") if shift else v
    s = f.op(f"trunc i{src} {s} to i{width}") if width < src else s
    return _ext(em, s, width, signed, to)


def _clamp(em, v, ty, lo, hi):
    v = em.call(f"llvm.smax.{ty}", ty, [(ty, v), (ty, str(lo))])
    return em.call(f"llvm.smin.{ty}", ty, [(ty, v), (ty, str(hi))])


def _range(signed, bits):
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


# ------------------------------------------------------------------ scalar video instructions

def _part(em, o, signed):
    """partSelectSignExtend: the selected byte/half/word of operand o as i64."""
    v, sel = _word(em, o)
    if not sel:
        return _ext(em, v, 32, signed, 64)
    if sel in ("b0", "b1", "b2", "b3"):
        return _field(em, v, 8 * int(sel[1]), 8, signed, 64)
    if sel in ("h0", "h1"):
        return _field(em, v, 16 * int(sel[1]), 16, signed, 64)
    semantic(em.cur_ins, f"bad operand selector .{sel}")


def _dsel_bits(dsel):
    return {"": 32, "h0": 16, "h1": 16}.get(dsel, 8)


def _finish(em, ins, tmp, dsigned):
    """The secondary op or the merge with c, and the low 32 bits, as NVIDIA's H200 does them: for a signed
    destination .min/.max/.add take the result's low word (an unsigned one the whole result); .h1 keeps the
    result's own upper half, a byte selector moves its low byte into place."""
    f = em.f
    d = ins.operands[0]
    dsel = getattr(d, "sel", "")
    sec = next((m for m in ins.mods if m in ("add", "min", "max")), None)
    if dsel:
        if sec or len(ins.operands) != 4:
            semantic(ins, "a destination selector needs c and no secondary operation")
        if dsel not in ("b0", "b1", "b2", "b3", "h0", "h1"):
            semantic(ins, f"bad destination selector .{dsel}")
        c = em.read(ins.operands[3], "b32")
        w = _dsel_bits(dsel)
        sh = int(dsel[1]) * w
        keep = ~(((1 << w) - 1) << sh) & 0xFFFFFFFF
        t = f.op(f"trunc i64 {tmp} to i32")
        if dsel != "h1":
            t = f.op(f"shl i32 {t}, {sh}") if sh else t
        t = f.op(f"and i32 {t}, {_i32(((1 << w) - 1) << sh)}")
        r = f.op(f"or i32 {t}, {f.op(f'and i32 {c}, {_i32(keep)}')}")
        em.write(d, r, "b32")
        return
    if sec:
        if len(ins.operands) != 4:
            semantic(ins, "a secondary operation needs c")
        c = _ext(em, em.read(ins.operands[3], "b32"), 32, dsigned, 64)
        if dsigned:
            tmp = _ext(em, f.op(f"trunc i64 {tmp} to i32"), 32, True, 64)
        if sec == "add":
            tmp = f.op(f"add i64 {tmp}, {c}")
        else:
            tmp = em.call(f"llvm.s{sec}.i64", "i64", [("i64", tmp), ("i64", c)])
    elif len(ins.operands) != 3:
        semantic(ins, "c needs a secondary operation or a destination selector")
    em.write(d, f.op(f"trunc i64 {tmp} to i32"), "b32")


def _i32(v):
    return v - (1 << 32) if v >> 31 else v


def _saturate(em, ins, tmp, dsigned):
    """.sat as NVIDIA's H200 does it: a signed word clamps to the s32 range, an unsigned word clamps below
    at 0 only (what passes U32_MAX wraps); into a part it is an unsigned minimum with the part's maximum,
    so a negative result becomes that maximum."""
    if "sat" not in ins.mods:
        return tmp
    dsel = getattr(ins.operands[0], "sel", "")
    if not dsel:
        if dsigned:
            return _clamp(em, tmp, "i64", -(1 << 31), (1 << 31) - 1)
        return em.call("llvm.smax.i64", "i64", [("i64", tmp), ("i64", "0")])
    w = _dsel_bits(dsel)
    hi = (1 << (w - 1)) - 1 if dsigned else (1 << w) - 1
    return em.call("llvm.umin.i64", "i64", [("i64", tmp), ("i64", str(hi))])


@handles("vadd", "vsub", "vabsdiff", "vmin", "vmax")
def op_vscalar(em, ins):
    check_mods(ins, {"sat", "add", "min", "max"})
    ds, as_, bs = _types(ins, 3)
    f = em.f
    a, b = _part(em, ins.operands[1], as_), _part(em, ins.operands[2], bs)
    op = ins.opcode
    if op == "vadd":
        t = f.op(f"add i64 {a}, {b}")
    elif op == "vsub":
        t = f.op(f"sub i64 {a}, {b}")
    elif op == "vabsdiff":
        t = em.call("llvm.abs.i64", "i64", [("i64", f.op(f"sub i64 {a}, {b}")), ("i1", "false")])
    else:
        t = em.call(f"llvm.s{op[1:]}.i64", "i64", [("i64", a), ("i64", b)])
    _finish(em, ins, _saturate(em, ins, t, ds), ds)


@handles("vshl", "vshr")
def op_vshift(em, ins):
    check_mods(ins, {"sat", "add", "min", "max", "clamp", "wrap"})
    ds, as_, _ = _types(ins, 3)
    mode = "clamp" if "clamp" in ins.mods else "wrap" if "wrap" in ins.mods else None
    if mode is None:
        semantic(ins, "vshl/vshr need .clamp or .wrap")
    f = em.f
    a = _ext(em, _part(em, ins.operands[1], as_), 64, True, 128)
    b = _part(em, ins.operands[2], False)
    b = em.call("llvm.umin.i64", "i64", [("i64", b), ("i64", "32")]) if mode == "clamp" else \
        f.op(f"and i64 {b}, 31")
    b = _ext(em, b, 64, False, 128)
    t = f.op(f"{'shl' if ins.opcode == 'vshl' else 'ashr'} i128 {a}, {b}")
    # NVIDIA (H200): the shifted value is cut to the ISA's s34 and clamped as the ISA says (to the part's
    # range with a destination selector), unlike vadd & co.'s .sat
    t = _ext(em, f.op(f"trunc i128 {t} to i34"), 34, True, 64)
    if "sat" in ins.mods:
        lo, hi = _range(ds, _dsel_bits(getattr(ins.operands[0], "sel", "")))
        t = _clamp(em, t, "i64", lo, hi)
    _finish(em, ins, t, ds)


@handles("vset")
def op_vset(em, ins):
    check_mods(ins, set(_CMP) | {"add", "min", "max"})
    as_, bs = _types(ins, 2)
    cmp = next((m for m in ins.mods if m in _CMP), None)
    if cmp is None:
        semantic(ins, "vset needs a comparison")
    f = em.f
    a, b = _part(em, ins.operands[1], as_), _part(em, ins.operands[2], bs)
    pred = cmp if cmp in ("eq", "ne") else "s" + cmp
    t = f.op(f"zext i1 {f.op(f'icmp {pred} i64 {a}, {b}')} to i64")
    # NVIDIA: .min/.max compare with c as signed when a source is signed
    _finish(em, ins, t, as_ or bs)


@handles("vmad")
def op_vmad(em, ins):
    check_mods(ins, {"sat", "po", "shr7", "shr15"})
    _, as_, bs = _types(ins, 3)
    f = em.f
    # operand negation ({-}a, {-}b, {-}c) is not parsed: those forms are refused as syntax errors
    signed = as_ or bs
    sh = 7 if "shr7" in ins.mods else 15 if "shr15" in ins.mods else 0
    # NVIDIA (H200): one signed source, or a scale, makes every whole-word source (and c) signed
    ops = signed or bool(sh)
    oa, ob = ins.operands[1], ins.operands[2]
    a = _ext(em, _part(em, oa, as_ or (ops and not getattr(oa, "sel", ""))), 64, True, 128)
    b = _ext(em, _part(em, ob, bs or (ops and not getattr(ob, "sel", ""))), 64, True, 128)
    c = _ext(em, em.read(ins.operands[3], "b32"), 32, ops, 128)
    t = f.op(f"add i128 {f.op(f'mul i128 {a}, {b}')}, {c}")
    if "po" in ins.mods:
        t = f.op(f"add i128 {t}, 1")
    t = f.op(f"ashr i128 {t}, {sh}") if sh else t
    t = f.op(f"trunc i128 {t} to i64")
    if "sat" in ins.mods:
        lo, hi = _range(signed, 32)
        if signed:
            t = _clamp(em, t, "i64", lo, hi)
        else:
            t = em.call("llvm.umin.i64", "i64", [("i64", t), ("i64", str(hi))])
    em.write(ins.operands[0], f.op(f"trunc i64 {t} to i32"), "b32")


# ------------------------------------------------------------------ SIMD video instructions

def _lanes_sel(ins, sel, n, default):
    """The source lane index of each result lane for a .hxy / .bxyzw selector (leftmost is the top lane)."""
    s = sel or default
    if not re.fullmatch(("h[0-3]{2}" if n == 2 else "b[0-7]{4}"), s):
        semantic(ins, f"bad SIMD selector .{s}")
    return [int(ch) for ch in reversed(s[1:])]


def _mask(ins, sel, n):
    s = sel or ("h10" if n == 2 else "b3210")
    if not re.fullmatch(("h(10|0|1)" if n == 2 else "b3?2?1?0?"), s) or len(s) < 2:
        semantic(ins, f"bad SIMD mask .{s}")
    return {int(ch) for ch in s[1:]}


@handles("vadd2", "vsub2", "vavrg2", "vabsdiff2", "vmin2", "vmax2", "vset2",
         "vadd4", "vsub4", "vavrg4", "vabsdiff4", "vmin4", "vmax4", "vset4")
def op_vsimd(em, ins):
    op = ins.opcode[:-1]
    n = int(ins.opcode[-1])
    w = 32 // n
    f = em.f
    is_set = op == "vset"
    check_mods(ins, (set(_CMP) | {"add"}) if is_set else {"sat", "add"})
    if is_set:
        as_, bs = _types(ins, 2)
        ds = False
        cmp = next((m for m in ins.mods if m in _CMP), None)
        if cmp is None:
            semantic(ins, f"{ins.opcode} needs a comparison")
    else:
        ds, as_, bs = _types(ins, 3)
    acc = "add" in ins.mods
    if acc and "sat" in ins.mods:
        semantic(ins, "saturation cannot be used with .add")
    if len(ins.operands) != 4:
        semantic(ins, f"{ins.opcode} takes d, a, b, c")
    d, oa, ob, oc = ins.operands
    av, asel = _word(em, oa)
    bv, bsel = _word(em, ob)
    c = em.read(oc, "b32")
    x = f.op(f"or i64 {_ext(em, av, 32, False, 64)}, {f.op(f'shl i64 {_ext(em, bv, 32, False, 64)}, 32')}")
    ai = _lanes_sel(ins, asel, n, "h10" if n == 2 else "b3210")
    bi = _lanes_sel(ins, bsel, n, "h32" if n == 2 else "b7654")
    mask = _mask(ins, getattr(d, "sel", ""), n)
    lo, hi = _range(ds, w)
    out = c if acc else "0"
    for i in range(n):
        va = _field(em, x, ai[i] * w, w, as_, 32, 64)
        vb = _field(em, x, bi[i] * w, w, bs, 32, 64)
        if i not in mask:
            if not acc:
                vc = _field(em, c, i * w, w, False, 32)
                out = f.op(f"or i32 {out}, {f.op(f'shl i32 {vc}, {i * w}') if i else vc}")
            continue
        if is_set:
            pred = cmp if cmp in ("eq", "ne") else "s" + cmp
            t = f.op(f"zext i1 {f.op(f'icmp {pred} i32 {va}, {vb}')} to i32")
        elif op == "vadd":
            t = f.op(f"add i32 {va}, {vb}")
        elif op == "vsub":
            t = f.op(f"sub i32 {va}, {vb}")
        elif op == "vavrg":
            s = f.op(f"add i32 {va}, {vb}")
            up = f.op(f"zext i1 {f.op(f'icmp sge i32 {s}, 0')} to i32")
            t = f.op(f"ashr i32 {f.op(f'add i32 {s}, {up}')}, 1")
        elif op == "vabsdiff":
            t = em.call("llvm.abs.i32", "i32", [("i32", f.op(f"sub i32 {va}, {vb}")), ("i1", "false")])
        else:
            t = em.call(f"llvm.s{op[1:]}.i32", "i32", [("i32", va), ("i32", vb)])
        if "sat" in ins.mods:
            t = _clamp(em, t, "i32", lo, hi)
        if acc:
            out = f.op(f"add i32 {out}, {t}")
        else:
            t = f.op(f"and i32 {t}, {(1 << w) - 1}")
            out = f.op(f"or i32 {out}, {f.op(f'shl i32 {t}, {i * w}') if i else t}")
    em.write(d, out, "b32")


# ------------------------------------------------------------------ packed .u16x2 / .s16x2

def _packed16(em, ins):
    t = ins.mods[-1]
    op = ins.opcode
    allowed = {"relu", t} if op in ("min", "max") and t == "s16x2" else {t}
    for m in ins.mods:
        if m not in allowed:
            unsupported(ins, f"{'.'.join((op,) + tuple(ins.mods))} (modifier .{m})")
    f = em.f
    signed = t == "s16x2"
    a = em.read(ins.operands[1], "b32")
    b = em.read(ins.operands[2], "b32")
    out = "0"
    for i in range(2):
        x = _field(em, a, 16 * i, 16, signed, 16)
        y = _field(em, b, 16 * i, 16, signed, 16)
        if op in ("add", "sub"):
            r = f.op(f"{op} i16 {x}, {y}")
        else:
            r = em.call(f"llvm.{'s' if signed else 'u'}{op}.i16", "i16", [("i16", x), ("i16", y)])
            if "relu" in ins.mods:
                r = em.call("llvm.smax.i16", "i16", [("i16", r), ("i16", "0")])
        r = _ext(em, r, 16, False, 32)
        out = f.op(f"or i32 {out}, {f.op(f'shl i32 {r}, 16') if i else r}")
    em.write(ins.operands[0], out, "b32")


def _packed_first(prev):
    def handler(em, ins):
        if ins.mods and ins.mods[-1] in PACKED:
            return _packed16(em, ins)
        return prev(em, ins)
    return handler


# the scalar add/sub/min/max live in ops_int (imported above, so registered already); packed types come here
for _op in ("add", "sub", "min", "max"):
    HANDLERS[_op] = _packed_first(HANDLERS[_op])
