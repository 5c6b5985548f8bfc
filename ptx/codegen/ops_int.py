"""Integer and bit instructions (add/sub/mul/mad with hi/wide/sat/carry, div/rem guarded against x86
traps, min/max, shifts with PTX clamping, bfe/bfi/bfind/brev/popc/clz/prmt/shf/lop3/sad/dp4a/dp2a)
plus comparisons and selects (setp/selp/slct/set) for every type."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen import ops_float as FL
from ptx.codegen.function_emitter import handles, unsupported, semantic, check_mods
from ptx.codegen.ops_mem import one_type


def _ops(em, ins, t, n):
    return [em.read(o, t) for o in ins.operands[1:1 + n]]


def _is_float_instr(ins):
    return any(T.is_float(t) for t in T.types_in(ins.mods))


def int_or_float(*opcodes, float_fn):
    """Registers the integer lowering of `opcodes`; their float forms go to ops_float's `float_fn`."""
    def deco(int_fn):
        handles(*opcodes)(lambda em, ins: (float_fn if _is_float_instr(ins) else int_fn)(em, ins))
        return int_fn
    return deco


def _carry(em):
    """The CC.CF condition-code register, one per function."""
    if "%__cc_cf" not in em.regs:
        em.regs["%__cc_cf"] = ("i1", em.f.alloca("i1"))
    return em.regs["%__cc_cf"][1]


def _wide(em, v, bits, signed, to):
    return em.f.op(f"{'sext' if signed else 'zext'} i{bits} {v} to i{to}")


# ------------------------------------------------------------------ add / sub / mul / mad

@int_or_float("add", "sub", "addc", "subc", float_fn=FL.float_arith)
def op_addsub(em, ins):
    check_mods(ins, {"sat", "cc"})
    t = one_type(ins)
    f = em.f
    bits = T.bits_of(t)
    ty = f"i{bits}"
    a, b = _ops(em, ins, t, 2)
    op = ins.opcode
    is_add = op in ("add", "addc")
    mods = set(ins.mods)
    if "sat" in mods:
        if t != "s32":
            unsupported(ins)
        r = em.call(f"llvm.{'sadd' if is_add else 'ssub'}.sat.i{bits}", ty, [(ty, a), (ty, b)])
        em.write(ins.operands[0], r, t)
        return
    if op in ("addc", "subc") or "cc" in mods:
        cf = _carry(em)
        cin = f.op(f"load i1, ptr {cf}") if op in ("addc", "subc") else "false"
        w = f"i{bits + 1}"
        aw, bw = _wide(em, a, bits, False, bits + 1), _wide(em, b, bits, False, bits + 1)
        cw = f.op(f"zext i1 {cin} to {w}")
        if is_add:
            s = f.op(f"add {w} {aw}, {bw}")
            s = f.op(f"add {w} {s}, {cw}")
        else:
            s = f.op(f"sub {w} {aw}, {bw}")
            s = f.op(f"sub {w} {s}, {cw}")
        r = f.op(f"trunc {w} {s} to {ty}")
        if "cc" in mods:
            hi = f.op(f"lshr {w} {s}, {bits}")
            f.emit(f"store i1 {f.op(f'trunc {w} {hi} to i1')}, ptr {cf}")
        em.write(ins.operands[0], r, t)
        return
    r = f.op(f"{'add' if is_add else 'sub'} {ty} {a}, {b}")
    em.write(ins.operands[0], r, t)


def _mul_parts(em, ins, t, a, b):
    """(lo, hi, wide) products of two t-typed values."""
    f = em.f
    bits = T.bits_of(t)
    signed = T.is_signed(t)
    aw, bw = _wide(em, a, bits, signed, 2 * bits), _wide(em, b, bits, signed, 2 * bits)
    p = f.op(f"mul i{2 * bits} {aw}, {bw}")
    return p


@int_or_float("mul", float_fn=FL.float_arith)
def op_mul(em, ins):
    check_mods(ins, {"lo", "hi", "wide"})
    t = one_type(ins)
    f = em.f
    bits = T.bits_of(t)
    a, b = _ops(em, ins, t, 2)
    mods = set(ins.mods)
    if "wide" in mods:
        p = _mul_parts(em, ins, t, a, b)
        em.write(ins.operands[0], p, ("s" if T.is_signed(t) else "u") + str(2 * bits))
    elif "hi" in mods:
        p = _mul_parts(em, ins, t, a, b)
        h = f.op(f"lshr i{2 * bits} {p}, {bits}")
        em.write(ins.operands[0], f.op(f"trunc i{2 * bits} {h} to i{bits}"), t)
    else:
        em.write(ins.operands[0], f.op(f"mul i{bits} {a}, {b}"), t)


@handles("mul24", "mad24")
def op_mul24(em, ins):
    t = one_type(ins)
    f = em.f
    signed = T.is_signed(t)
    a, b = _ops(em, ins, t, 2)

    def ext24(v):
        s = f.op(f"shl i32 {v}, 8")
        s = f.op(f"{'ashr' if signed else 'lshr'} i32 {s}, 8")
        return f.op(f"{'sext' if signed else 'zext'} i32 {s} to i64")
    p = f.op(f"mul i64 {ext24(a)}, {ext24(b)}")
    if "hi" in ins.mods:
        r = f.op(f"trunc i64 {f.op(f'lshr i64 {p}, 16')} to i32")
    else:
        r = f.op(f"trunc i64 {p} to i32")
    if ins.opcode == "mad24":
        c = em.read(ins.operands[3], t)
        if "sat" in ins.mods:
            r = em.call("llvm.sadd.sat.i32", "i32", [("i32", r), ("i32", c)])
        else:
            r = f.op(f"add i32 {r}, {c}")
    em.write(ins.operands[0], r, t)


@int_or_float("mad", "madc", float_fn=FL.float_fma)
def op_mad(em, ins):
    check_mods(ins, {"lo", "hi", "wide", "sat", "cc"})
    t = one_type(ins)
    f = em.f
    bits = T.bits_of(t)
    mods = set(ins.mods)
    a, b = _ops(em, ins, t, 2)
    if "wide" in mods:
        wt = ("s" if T.is_signed(t) else "u") + str(2 * bits)
        c = em.read(ins.operands[3], wt)
        p = _mul_parts(em, ins, t, a, b)
        bits2 = 2 * bits
        prod, pbits, rt = p, bits2, wt
    elif "hi" in mods:
        c = em.read(ins.operands[3], t)
        p = _mul_parts(em, ins, t, a, b)
        h = f.op(f"lshr i{2 * bits} {p}, {bits}")
        prod, pbits, rt = f.op(f"trunc i{2 * bits} {h} to i{bits}"), bits, t
    else:
        c = em.read(ins.operands[3], t)
        prod, pbits, rt = f.op(f"mul i{bits} {a}, {b}"), bits, t
    ty = f"i{pbits}"
    if ins.opcode == "madc" or "cc" in mods:
        cf = _carry(em)
        cin = f.op(f"load i1, ptr {cf}") if ins.opcode == "madc" else "false"
        w = f"i{pbits + 1}"
        s = f.op(f"add {w} {_wide(em, prod, pbits, False, pbits + 1)}, {_wide(em, c, pbits, False, pbits + 1)}")
        s = f.op(f"add {w} {s}, {f.op(f'zext i1 {cin} to {w}')}")
        r = f.op(f"trunc {w} {s} to {ty}")
        if "cc" in mods:
            hi = f.op(f"lshr {w} {s}, {pbits}")
            f.emit(f"store i1 {f.op(f'trunc {w} {hi} to i1')}, ptr {cf}")
    elif "sat" in mods:
        if t != "s32" or "hi" not in mods:
            unsupported(ins)
        # mad.hi.sat.s32: saturate the full (a*b)>>32 + c in 64 bits
        p64 = f.op(f"ashr i64 {p}, 32")
        s = f.op(f"add i64 {p64}, {f.op(f'sext i32 {c} to i64')}")
        s = em.call("llvm.smax.i64", "i64", [("i64", s), ("i64", "-2147483648")])
        s = em.call("llvm.smin.i64", "i64", [("i64", s), ("i64", "2147483647")])
        r = f.op(f"trunc i64 {s} to i32")
    else:
        r = f.op(f"add {ty} {prod}, {c}")
    em.write(ins.operands[0], r, rt)


# ------------------------------------------------------------------ div / rem

@int_or_float("div", "rem", float_fn=FL.float_arith)
def op_divrem(em, ins):
    t = one_type(ins)
    f = em.f
    bits = T.bits_of(t)
    ty = f"i{bits}"
    signed = T.is_signed(t)
    a, b = _ops(em, ins, t, 2)
    # x86 div traps on b == 0 and on INT_MIN / -1: divide by 1 instead, then patch the result
    zero = f.op(f"icmp eq {ty} {b}, 0")
    bad = zero
    if signed:
        mn = -(1 << (bits - 1))
        ovf = f.op(f"and i1 {f.op(f'icmp eq {ty} {a}, {mn}')}, {f.op(f'icmp eq {ty} {b}, -1')}")
        bad = f.op(f"or i1 {zero}, {ovf}")
    sb = f.op(f"select i1 {bad}, {ty} 1, {ty} {b}")
    if ins.opcode == "div":
        q = f.op(f"{'sdiv' if signed else 'udiv'} {ty} {a}, {sb}")
        r = f.op(f"select i1 {zero}, {ty} -1, {ty} {q}")
    else:
        q = f.op(f"{'srem' if signed else 'urem'} {ty} {a}, {sb}")
        r = f.op(f"select i1 {zero}, {ty} {a}, {ty} {q}")
    em.write(ins.operands[0], r, t)


# ------------------------------------------------------------------ unary / min / max

@int_or_float("abs", "neg", float_fn=FL.float_unary)
def op_absneg(em, ins):
    t = one_type(ins)
    bits = T.bits_of(t)
    a = em.read(ins.operands[1], t)
    if ins.opcode == "abs":
        r = em.call(f"llvm.abs.i{bits}", f"i{bits}", [(f"i{bits}", a), ("i1", "false")])
    else:
        r = em.f.op(f"sub i{bits} 0, {a}")
    em.write(ins.operands[0], r, t)


@int_or_float("min", "max", float_fn=FL.float_minmax)
def op_minmax(em, ins):
    t = one_type(ins)
    if t in ("u16x2", "s16x2"):
        unsupported(ins)
    bits = T.bits_of(t)
    ty = f"i{bits}"
    a, b = _ops(em, ins, t, 2)
    k = ("s" if T.is_signed(t) else "u") + ins.opcode
    r = em.call(f"llvm.{k}.{ty}", ty, [(ty, a), (ty, b)])
    if "relu" in ins.mods:
        r = em.call(f"llvm.smax.{ty}", ty, [(ty, r), (ty, "0")])
    em.write(ins.operands[0], r, t)


@handles("popc", "clz", "brev")
def op_bitcount(em, ins):
    t = one_type(ins)
    bits = T.bits_of(t)
    ty = f"i{bits}"
    a = em.read(ins.operands[1], t)
    if ins.opcode == "popc":
        r = em.call(f"llvm.ctpop.{ty}", ty, [(ty, a)])
    elif ins.opcode == "clz":
        r = em.call(f"llvm.ctlz.{ty}", ty, [(ty, a), ("i1", "false")])
    else:
        r = em.call(f"llvm.bitreverse.{ty}", ty, [(ty, a)])
        em.write(ins.operands[0], r, t)
        return
    em.write(ins.operands[0], em.coerce(r, ty, "i32"), "u32")


@handles("bfind")
def op_bfind(em, ins):
    t = one_type(ins)
    f = em.f
    bits = T.bits_of(t)
    ty = f"i{bits}"
    a = em.read(ins.operands[1], t)
    if T.is_signed(t):
        neg = f.op(f"icmp slt {ty} {a}, 0")
        a = f.op(f"select i1 {neg}, {ty} {f.op(f'xor {ty} {a}, -1')}, {ty} {a}")
    lz = em.call(f"llvm.ctlz.{ty}", ty, [(ty, a), ("i1", "false")])
    lz = em.coerce(lz, ty, "i32")
    none = f.op(f"icmp eq i32 {lz}, {bits}")
    pos = lz if "shiftamt" in ins.mods else f.op(f"sub i32 {bits - 1}, {lz}")
    r = f.op(f"select i1 {none}, i32 -1, i32 {pos}")
    em.write(ins.operands[0], r, "u32")


@handles("bfe")
def op_bfe(em, ins):
    t = one_type(ins)
    f = em.f
    W = T.bits_of(t)
    ty = f"i{W}"
    a = em.read(ins.operands[1], t)
    pos = f.op(f"and i32 {em.read(ins.operands[2], 'u32')}, 255")
    ln = f.op(f"and i32 {em.read(ins.operands[3], 'u32')}, 255")
    posc = em.call("llvm.umin.i32", "i32", [("i32", pos), ("i32", str(W))])
    room = f.op(f"sub i32 {W}, {posc}")
    e = em.call("llvm.umin.i32", "i32", [("i32", ln), ("i32", room)])
    big = f.op(f"icmp uge i32 {pos}, {W}")
    posw = em.coerce(f.op(f"select i1 {big}, i32 0, i32 {pos}"), "i32", ty)
    sh = f.op(f"lshr {ty} {a}, {posw}")
    sh = f.op(f"select i1 {big}, {ty} 0, {ty} {sh}")
    full = f.op(f"icmp uge i32 {e}, {W}")
    ew = em.coerce(f.op(f"select i1 {full}, i32 0, i32 {e}"), "i32", ty)
    m = f.op(f"sub {ty} {f.op(f'shl {ty} 1, {ew}')}, 1")
    mask = f.op(f"select i1 {full}, {ty} -1, {ty} {m}")
    ext = f.op(f"and {ty} {sh}, {mask}")
    lz = f.op(f"icmp eq i32 {ln}, 0")
    if T.is_signed(t):
        top = f.op(f"sub i32 {f.op(f'add i32 {pos}, {ln}')}, 1")
        sidx = em.call("llvm.umin.i32", "i32", [("i32", top), ("i32", str(W - 1))])
        sidx_w = em.coerce(sidx, "i32", ty)
        sbit = f.op(f"and {ty} {f.op(f'lshr {ty} {a}, {sidx_w}')}, 1")
        neg = f.op(f"icmp ne {ty} {sbit}, 0")
        fill = f.op(f"select i1 {neg}, {ty} {f.op(f'xor {ty} {mask}, -1')}, {ty} 0")
        ext = f.op(f"or {ty} {ext}, {fill}")
    r = f.op(f"select i1 {lz}, {ty} 0, {ty} {ext}")
    em.write(ins.operands[0], r, t)


@handles("bfi")
def op_bfi(em, ins):
    t = one_type(ins)
    f = em.f
    W = T.bits_of(t)
    ty = f"i{W}"
    a = em.read(ins.operands[1], t)
    b = em.read(ins.operands[2], t)
    pos = f.op(f"and i32 {em.read(ins.operands[3], 'u32')}, 255")
    ln = f.op(f"and i32 {em.read(ins.operands[4], 'u32')}, 255")
    big = f.op(f"icmp uge i32 {pos}, {W}")
    full = f.op(f"icmp uge i32 {ln}, {W}")
    lw = em.coerce(f.op(f"select i1 {full}, i32 0, i32 {ln}"), "i32", ty)
    m = f.op(f"sub {ty} {f.op(f'shl {ty} 1, {lw}')}, 1")
    m = f.op(f"select i1 {full}, {ty} -1, {ty} {m}")
    pw = em.coerce(f.op(f"select i1 {big}, i32 0, i32 {pos}"), "i32", ty)
    mask = f.op(f"shl {ty} {m}, {pw}")
    mask = f.op(f"select i1 {big}, {ty} 0, {ty} {mask}")
    ins_bits = f.op(f"and {ty} {f.op(f'shl {ty} {a}, {pw}')}, {mask}")
    keep = f.op(f"and {ty} {b}, {f.op(f'xor {ty} {mask}, -1')}")
    em.write(ins.operands[0], f.op(f"or {ty} {keep}, {ins_bits}"), t)


@handles("szext")
def op_szext(em, ins):
    t = one_type(ins)
    f = em.f
    a = em.read(ins.operands[1], "b32")
    b = em.read(ins.operands[2], "u32")
    b1 = f.op(f"and i32 {b}, 31")
    too_large = f.op(f"icmp uge i32 {b}, 32") if "clamp" in ins.mods else "false"
    m = f.op(f"shl i32 -1, {b1}")
    mask = f.op(f"select i1 {too_large}, i32 0, i32 {m}")
    if t == "s32":
        spos = f.op(f"and i32 {f.op(f'sub i32 {b1}, 1')}, 31")
        sbit = f.op(f"trunc i32 {f.op(f'lshr i32 {a}, {spos}')} to i1")
        zero_n = f.op(f"icmp eq i32 {b1}, 0")
        no = f.op(f"or i1 {zero_n}, {too_large}")
        sbit = f.op(f"select i1 {no}, i1 false, i1 {sbit}")
    else:
        sbit = "false"
    low = f.op(f"and i32 {a}, {f.op(f'xor i32 {mask}, -1')}")
    fill = f.op(f"select i1 {sbit}, i32 {mask}, i32 0")
    em.write(ins.operands[0], f.op(f"or i32 {low}, {fill}"), "b32")


@handles("bmsk")
def op_bmsk(em, ins):
    f = em.f
    a = em.read(ins.operands[1], "u32")
    b = em.read(ins.operands[2], "u32")
    a1 = f.op(f"and i32 {a}, 31")
    b1 = f.op(f"and i32 {b}, 31")
    mask0 = f.op(f"shl i32 -1, {a1}")
    s_ = f.op(f"add i32 {a1}, {b1}")
    over = f.op(f"icmp uge i32 {s_}, 32")
    mask1 = f.op(f"shl i32 -1, {f.op(f'and i32 {s_}, 31')}")
    if "clamp" in ins.mods:
        pos_over = f.op(f"icmp uge i32 {a}, 32")
        mask0 = f.op(f"select i1 {pos_over}, i32 0, i32 {mask0}")
        width_over = f.op(f"icmp uge i32 {b}, 32")
        over = f.op(f"or i1 {over}, {f.op(f'or i1 {pos_over}, {width_over}')}")
    bz = f.op(f"icmp eq i32 {b1}, 0")
    mask1 = f.op(f"select i1 {bz}, i32 -1, i32 {mask1}")
    mask1 = f.op(f"select i1 {over}, i32 0, i32 {mask1}")
    em.write(ins.operands[0], f.op(f"and i32 {mask0}, {f.op(f'xor i32 {mask1}, -1')}"), "b32")


FNS_HELPER = """define internal i32 @"ptx.fns"(i32 %mask, i32 %base, i32 %off) alwaysinline {
entry:
  %base5 = and i32 %base, 31
  %z = icmp eq i32 %off, 0
  br i1 %z, label %zero, label %search
zero:
  %sh0 = lshr i32 %mask, %base5
  %b0 = and i32 %sh0, 1
  %hit0 = icmp ne i32 %b0, 0
  %r0 = select i1 %hit0, i32 %base, i32 -1
  ret i32 %r0
search:
  %neg = icmp slt i32 %off, 0
  %inc = select i1 %neg, i32 -1, i32 1
  %abs = call i32 @llvm.abs.i32(i32 %off, i1 false)
  %cnt0 = sub i32 %abs, 1
  br label %loop
loop:
  %pos = phi i32 [ %base, %search ], [ %pos.n, %cont ]
  %cnt = phi i32 [ %cnt0, %search ], [ %cnt.n, %cont ]
  %inr = icmp ult i32 %pos, 32
  br i1 %inr, label %body, label %notfound
body:
  %sh = lshr i32 %mask, %pos
  %b = and i32 %sh, 1
  %set = icmp ne i32 %b, 0
  %last = icmp eq i32 %cnt, 0
  %found = and i1 %set, %last
  br i1 %found, label %hit, label %cont
hit:
  ret i32 %pos
cont:
  %dec = zext i1 %set to i32
  %cnt.n = sub i32 %cnt, %dec
  %pos.n = add i32 %pos, %inc
  br label %loop
notfound:
  ret i32 -1
}"""


@handles("fns")
def op_fns(em, ins):
    """fns.b32 d, mask, base, offset: the position of the offset-th set bit from base (PTX ISA)."""
    em.m.add_helper("ptx.fns", FNS_HELPER)
    em.m.declare("declare i32 @llvm.abs.i32(i32, i1)")
    mask = em.read(ins.operands[1], "b32")
    base = em.read(ins.operands[2], "b32")
    off = em.read(ins.operands[3], "s32")
    r = em.f.op(f'call i32 @"ptx.fns"(i32 {mask}, i32 {base}, i32 {off})')
    em.write(ins.operands[0], r, "b32")


# ------------------------------------------------------------------ shifts

@handles("shl", "shr")
def op_shift(em, ins):
    t = one_type(ins)
    f = em.f
    W = T.bits_of(t)
    ty = f"i{W}"
    a = em.read(ins.operands[1], t)
    n = em.read(ins.operands[2], "u32")
    big = f.op(f"icmp uge i32 {n}, {W}")
    nw = em.coerce(f.op(f"select i1 {big}, i32 {W - 1}, i32 {n}"), "i32", ty)
    if ins.opcode == "shl":
        r = f.op(f"select i1 {big}, {ty} 0, {ty} {f.op(f'shl {ty} {a}, {nw}')}")
    elif T.is_signed(t):
        r = f.op(f"ashr {ty} {a}, {nw}")      # the clamp to W-1 gives the sign fill
    else:
        r = f.op(f"select i1 {big}, {ty} 0, {ty} {f.op(f'lshr {ty} {a}, {nw}')}")
    em.write(ins.operands[0], r, t)


@handles("shf")
def op_shf(em, ins):
    f = em.f
    mods = set(ins.mods)
    a = em.read(ins.operands[1], "b32")
    b = em.read(ins.operands[2], "b32")
    c = em.read(ins.operands[3], "u32")
    left = "l" in mods
    if "clamp" in mods:
        n = em.call("llvm.umin.i32", "i32", [("i32", c), ("i32", "32")])
    else:
        n = f.op(f"and i32 {c}, 31")
    fn = "fshl" if left else "fshr"
    r = em.call(f"llvm.{fn}.i32", "i32", [("i32", b), ("i32", a), ("i32", n)])
    if "clamp" in mods:
        is32 = f.op(f"icmp eq i32 {n}, 32")
        r = f.op(f"select i1 {is32}, i32 {a if left else b}, i32 {r}")
    em.write(ins.operands[0], r, "b32")


# ------------------------------------------------------------------ logic

@handles("and", "or", "xor")
def op_logic(em, ins):
    t = one_type(ins)
    ty = T.llvm_type(t) if t == "pred" else f"i{T.bits_of(t)}"
    bt = t if t == "pred" else f"b{T.bits_of(t)}"
    a, b = _ops(em, ins, bt, 2)
    em.write(ins.operands[0], em.f.op(f"{ins.opcode} {ty} {a}, {b}"), bt)


@handles("not", "cnot")
def op_not(em, ins):
    t = one_type(ins)
    f = em.f
    if t == "pred":
        a = em.read(ins.operands[1], "pred")
        em.write(ins.operands[0], f.op(f"xor i1 {a}, true"), "pred")
        return
    W = T.bits_of(t)
    ty = f"i{W}"
    a = em.read(ins.operands[1], f"b{W}")
    if ins.opcode == "not":
        r = f.op(f"xor {ty} {a}, -1")
    else:
        r = f.op(f"zext i1 {f.op(f'icmp eq {ty} {a}, 0')} to {ty}")
    em.write(ins.operands[0], r, f"b{W}")


@handles("lop3")
def op_lop3(em, ins):
    f = em.f
    if len(ins.operands) != 5 or not isinstance(ins.operands[4], A.Imm):
        unsupported(ins, "lop3 with a predicate output or a non-constant LUT")
    a, b, c = _ops(em, ins, "b32", 3)
    lut = ins.operands[4].value & 0xFF
    na, nb, nc = (f.op(f"xor i32 {x}, -1") for x in (a, b, c))
    acc = "0"
    for i in range(8):
        if lut >> i & 1:
            x = a if i & 4 else na
            y = b if i & 2 else nb
            z = c if i & 1 else nc
            term = f.op(f"and i32 {f.op(f'and i32 {x}, {y}')}, {z}")
            acc = f.op(f"or i32 {acc}, {term}")
    em.write(ins.operands[0], acc, "b32")


@handles("prmt")
def op_prmt(em, ins):
    f = em.f
    mode = next((m for m in ins.mods if m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), None)
    a = em.read(ins.operands[1], "b32")
    b = em.read(ins.operands[2], "b32")
    c = em.read(ins.operands[3], "b32")
    bz = f.op(f"zext i32 {b} to i64")
    x = f.op(f"or i64 {f.op(f'zext i32 {a} to i64')}, {f.op(f'shl i64 {bz}, 32')}")
    acc = "0"
    for i in range(4):
        if mode is None:
            sel = f.op(f"and i32 {f.op(f'lshr i32 {c}, {4 * i}')}, 15")
            idx = f.op(f"and i32 {sel}, 7")
            rep = f.op(f"icmp ne i32 {f.op(f'and i32 {sel}, 8')}, 0")
        else:
            s = f.op(f"and i32 {c}, 3")
            table = {"f4e": lambda s: f"add i32 {s}, {i}",
                     "b4e": lambda s: f"sub i32 {s}, {i}",
                     }
            if mode == "f4e":
                idx = f.op(f"and i32 {f.op(f'add i32 {s}, {i}')}, 7")
            elif mode == "b4e":
                idx = f.op(f"and i32 {f.op(f'sub i32 {s}, {i}')}, 7")
            elif mode == "rc8":
                idx = s
            elif mode == "ecl":
                idx = em.call("llvm.umax.i32", "i32", [("i32", s), ("i32", str(i))])
            elif mode == "ecr":
                idx = em.call("llvm.umin.i32", "i32", [("i32", s), ("i32", str(i))])
            else:  # rc16
                s1 = f.op(f"and i32 {s}, 1")
                idx = f.op(f"add i32 {f.op(f'shl i32 {s1}, 1')}, {i & 1}")
            del table
            rep = "false"
        sh = f.op(f"zext i32 {f.op(f'shl i32 {idx}, 3')} to i64")
        byte = f.op(f"trunc i64 {f.op(f'lshr i64 {x}, {sh}')} to i8")
        sgn = f.op(f"ashr i8 {byte}, 7")
        byte = f.op(f"select i1 {rep}, i8 {sgn}, i8 {byte}")
        w = f.op(f"zext i8 {byte} to i32")
        acc = f.op(f"or i32 {acc}, {f.op(f'shl i32 {w}, {8 * i}')}")
    em.write(ins.operands[0], acc, "b32")


@handles("sad")
def op_sad(em, ins):
    t = one_type(ins)
    f = em.f
    W = T.bits_of(t)
    ty = f"i{W}"
    a, b, c = _ops(em, ins, t, 3)
    s = "s" if T.is_signed(t) else "u"
    hi = em.call(f"llvm.{s}max.{ty}", ty, [(ty, a), (ty, b)])
    lo = em.call(f"llvm.{s}min.{ty}", ty, [(ty, a), (ty, b)])
    r = f.op(f"add {ty} {c}, {f.op(f'sub {ty} {hi}, {lo}')}")
    em.write(ins.operands[0], r, t)


@handles("dp4a", "dp2a")
def op_dp(em, ins):
    f = em.f
    ts = T.types_in(ins.mods)
    if len(ts) != 2:
        semantic(ins, "dp4a/dp2a need two types")
    at, bt = ts
    a = em.read(ins.operands[1], "b32")
    b = em.read(ins.operands[2], "b32")
    c = em.read(ins.operands[3], "b32")

    def part(v, i, width, signed):
        s = f.op(f"lshr i32 {v}, {i * width}") if i else v
        s = f.op(f"trunc i32 {s} to i{width}")
        return f.op(f"{'sext' if signed else 'zext'} i{width} {s} to i32")
    acc = c
    if ins.opcode == "dp4a":
        for i in range(4):
            p = f.op(f"mul i32 {part(a, i, 8, T.is_signed(at))}, {part(b, i, 8, T.is_signed(bt))}")
            acc = f.op(f"add i32 {acc}, {p}")
    else:
        hi = "hi" in ins.mods
        for i in range(2):
            ah = part(a, i, 16, T.is_signed(at))
            bb = part(b, i + (2 if hi else 0), 8, T.is_signed(bt))
            acc = f.op(f"add i32 {acc}, {f.op(f'mul i32 {ah}, {bb}')}")
    rt = "s32" if T.is_signed(at) or T.is_signed(bt) else "u32"
    em.write(ins.operands[0], acc, rt)


# ------------------------------------------------------------------ compare / select

INT_CMP = {"eq": "eq", "ne": "ne", "lo": "ult", "ls": "ule", "hi": "ugt", "hs": "uge"}
SIGNED_CMP = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
UNSIGNED_CMP = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}
FLOAT_CMP = {"eq": "oeq", "ne": "one", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge",
             "equ": "ueq", "neu": "une", "ltu": "ult", "leu": "ule", "gtu": "ugt", "geu": "uge",
             "num": "ord", "nan": "uno"}
CMP_NAMES = set(INT_CMP) | set(SIGNED_CMP) | set(FLOAT_CMP)


def int_predicate(cmp, t):
    """LLVM's icmp predicate for PTX comparison `cmp` on integer type t, or None where it has none."""
    if cmp in INT_CMP:
        return INT_CMP[cmp]
    if cmp in SIGNED_CMP:
        return SIGNED_CMP[cmp] if T.is_signed(t) else UNSIGNED_CMP[cmp]
    return None


def compare(em, ins, cmp, t, a, b):
    f = em.f
    if T.is_float(t):
        ty = T.llvm_type(t)
        if "ftz" in ins.mods:
            from ptx.codegen.ops_float import ftz
            a, b = ftz(em, a, t), ftz(em, b, t)
        return f.op(f"fcmp {FLOAT_CMP[cmp]} {ty} {a}, {b}")
    ty = T.llvm_type(t)
    pred = int_predicate(cmp, t)
    if pred is None:
        semantic(ins, f"comparison .{cmp} on an integer type")
    return f.op(f"icmp {pred} {ty} {a}, {b}")


def _combine(em, ins, v, extra):
    boolop = next((m for m in ins.mods if m in ("and", "or", "xor")), None)
    if boolop is None:
        return v
    c = em.read(extra, "pred")
    return em.f.op(f"{boolop} i1 {v}, {c}")


@handles("setp")
def op_setp(em, ins):
    check_mods(ins, CMP_NAMES | {"ftz", "and", "or", "xor"})
    ts = T.types_in(ins.mods)
    t = ts[-1]
    cmp = next((m for m in ins.mods if m in CMP_NAMES), None)
    if cmp is None:
        semantic(ins, "missing comparison")
    dst = ins.operands[0]
    a = em.read(ins.operands[1], t)
    b = em.read(ins.operands[2], t)
    v = compare(em, ins, cmp, t, a, b)
    extra = ins.operands[3] if len(ins.operands) > 3 else None
    if t in ("f16x2", "bf16x2"):
        # p gets the low half's comparison, q the high half's
        f = em.f
        lo = f.op(f"extractelement <2 x i1> {v}, i32 0")
        hi = f.op(f"extractelement <2 x i1> {v}, i32 1")
        if isinstance(dst, A.PredPair):
            em.write(dst.first, _combine(em, ins, lo, extra), "pred")
            em.write(dst.second, _combine(em, ins, hi, extra), "pred")
        else:
            em.write(dst, _combine(em, ins, lo, extra), "pred")
        return
    if isinstance(dst, A.PredPair):
        em.write(dst.first, _combine(em, ins, v, extra), "pred")
        nv = em.f.op(f"xor i1 {v}, true")
        em.write(dst.second, _combine(em, ins, nv, extra), "pred")
    else:
        em.write(dst, _combine(em, ins, v, extra), "pred")


@handles("set")
def op_set(em, ins):
    ts = T.types_in(ins.mods)
    if len(ts) != 2:
        semantic(ins, "set needs a destination and a source type")
    dt, st = ts
    cmp = next((m for m in ins.mods if m in CMP_NAMES), None)
    a = em.read(ins.operands[1], st)
    b = em.read(ins.operands[2], st)
    v = compare(em, ins, cmp, st, a, b)
    v = _combine(em, ins, v, ins.operands[3] if len(ins.operands) > 3 else None)
    f = em.f
    dty = T.llvm_type(dt)
    if dty.startswith("<"):
        one = f.op(f"sitofp <2 x i32> <i32 1, i32 1> to {dty}")
        r = f.op(f"select <2 x i1> {v}, {dty} {one}, {dty} zeroinitializer")
    elif T.is_float(dt):
        one = f.op(f"sitofp i32 1 to {dty}")
        r = f.op(f"select i1 {v}, {dty} {one}, {dty} {f.op(f'sitofp i32 0 to {dty}')}")
    elif dt in ("u16x2", "s16x2") or v.startswith("<"):
        unsupported(ins)
    else:
        r = f.op(f"select i1 {v}, {dty} -1, {dty} 0")
    em.write(ins.operands[0], r, dt)


@handles("selp")
def op_selp(em, ins):
    t = one_type(ins)
    a = em.read(ins.operands[1], t)
    b = em.read(ins.operands[2], t)
    c = em.read(ins.operands[3], "pred")
    ty = T.llvm_type(t)
    em.write(ins.operands[0], em.f.op(f"select i1 {c}, {ty} {a}, {ty} {b}"), t)


@handles("slct")
def op_slct(em, ins):
    ts = T.types_in(ins.mods)
    dt, ct = ts[0], ts[-1]
    f = em.f
    a = em.read(ins.operands[1], dt)
    b = em.read(ins.operands[2], dt)
    c = em.read(ins.operands[3], ct)
    if ct == "f32":
        if "ftz" in ins.mods:
            from ptx.codegen.ops_float import ftz
            c = ftz(em, c, "f32")
        cond = f.op(f"fcmp oge float {c}, 0.0")
    else:
        cond = f.op(f"icmp sge i32 {c}, 0")
    ty = T.llvm_type(dt)
    em.write(ins.operands[0], f.op(f"select i1 {cond}, {ty} {a}, {ty} {b}"), dt)
