"""Directed rounding (.rz/.rm/.rp) of sqrt, div and 64-bit integer -> float conversions for amdgcn,
where LLVM's AMDGPU backend cannot select the constrained intrinsics the CPU lowering uses.

Each helper takes the correctly rounded-to-nearest result q, finds on which side of q the exact
value lies (an exact fma residual, or an exact integer compare), and steps q one ulp when the
rounding direction asks for it. Same names and signatures as ops_float.strict_helper's helpers."""

from __future__ import annotations

import re

_NAME = re.compile(r"rnd\.(sqrt|fdiv|sitofp|uitofp)\.(f32|f64)(?:\.(i32|i64))?\.(towardzero|downward|upward)$")
FLOAT = {"f32": ("float", "i32", "-2147483647"), "f64": ("double", "i64", "-9223372036854775807")}


def replacement(name: str):
    """(declarations, IR text) of an amdgcn-selectable helper named `name`, or None to keep the CPU one."""
    m = _NAME.match(name)
    if m is None:
        return None
    op, fs, src_int, mode = m.groups()
    ty, ity, neg_tiny = FLOAT[fs]
    sfx = fs
    if op in ("sqrt", "fdiv"):
        if op == "sqrt":
            args = f"{ty} %a0"
            body = [f"%q = call {ty} @llvm.sqrt.{sfx}({ty} %a0)",
                    f"%nq = fneg {ty} %q",
                    f"%res = call {ty} @llvm.fma.{sfx}({ty} %nq, {ty} %q, {ty} %a0)",
                    f"%above = fcmp ogt {ty} %res, 0.0",       # exact value above q
                    f"%below = fcmp olt {ty} %res, 0.0"]
        else:
            args = f"{ty} %a0, {ty} %a1"
            body = [f"%q = fdiv {ty} %a0, %a1",
                    f"%nq = fneg {ty} %q",
                    f"%res = call {ty} @llvm.fma.{sfx}({ty} %nq, {ty} %a1, {ty} %a0)",
                    f"%rpos = fcmp ogt {ty} %res, 0.0",
                    f"%rneg = fcmp olt {ty} %res, 0.0",
                    f"%bneg = fcmp olt {ty} %a1, 0.0",
                    "%above = select i1 %bneg, i1 %rneg, i1 %rpos",
                    "%below = select i1 %bneg, i1 %rpos, i1 %rneg"]
        decls = [f"declare {ty} @llvm.sqrt.{sfx}({ty})", f"declare {ty} @llvm.fma.{sfx}({ty}, {ty}, {ty})"]
    else:
        it = src_int
        args = f"{it} %a0"
        conv, back = ("sitofp", "fptosi") if op == "sitofp" else ("uitofp", "fptoui")
        lt, gt = ("slt", "sgt") if op == "sitofp" else ("ult", "ugt")
        limit = {("sitofp", "i64"): "0x43E0000000000000", ("uitofp", "i64"): "0x43F0000000000000",
                 ("sitofp", "i32"): "0x41E0000000000000", ("uitofp", "i32"): "0x41F0000000000000"}[(op, it)]
        body = [f"%q = {conv} {it} %a0 to {ty}",
                f"%qd = fpext {ty} %q to double" if ty == "float" else "%qd = fadd double %q, 0.0",
                f"%big = fcmp oge double %qd, {limit}",       # q is past the integer range: q > exact
                f"%back = call {it} @llvm.{back}.sat.{it}.{sfx}({ty} %q)",
                f"%lo = icmp {lt} {it} %a0, %back",
                f"%hi = icmp {gt} {it} %a0, %back",
                "%below = or i1 %big, %lo",
                "%nbig = xor i1 %big, true",
                "%above = and i1 %nbig, %hi"]
        decls = [f"declare {it} @llvm.{back}.sat.{it}.{sfx}({ty})"]
    body += [f"%bits = bitcast {ty} %q to {ity}",
             f"%isz = fcmp oeq {ty} %q, 0.0",
             f"%qneg = fcmp olt {ty} %q, 0.0",
             f"%inc = add {ity} %bits, 1",
             f"%dec = sub {ity} %bits, 1",
             # next toward +inf / -inf (q finite; zero steps to the smallest subnormal)
             f"%upnz = select i1 %qneg, {ity} %dec, {ity} %inc",
             f"%up = select i1 %isz, {ity} 1, {ity} %upnz",
             f"%dnnz = select i1 %qneg, {ity} %inc, {ity} %dec",
             f"%dn = select i1 %isz, {ity} {neg_tiny}, {ity} %dnnz"]
    if mode == "upward":
        body += [f"%rb = select i1 %above, {ity} %up, {ity} %bits"]
    elif mode == "downward":
        body += [f"%rb = select i1 %below, {ity} %dn, {ity} %bits"]
    else:
        body += ["%qpos = fcmp ogt " + ty + " %q, 0.0",
                 "%tz1 = and i1 %qpos, %below",
                 "%tz2 = and i1 %qneg, %above",
                 f"%s1 = select i1 %tz1, {ity} %dn, {ity} %bits",
                 f"%rb = select i1 %tz2, {ity} %up, {ity} %s1"]
    body += [f"%r = bitcast {ity} %rb to {ty}", f"ret {ty} %r"]
    text = f'define internal {ty} @"{name}"({args}) {{\n' + \
        "\n".join("  " + b for b in body) + "\n}"
    return decls, text
