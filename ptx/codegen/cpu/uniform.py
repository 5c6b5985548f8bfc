"""Uniformity: registers each thread computes the same way from thread-constant inputs, which a region
recomputes instead of loading (affine.py guesses the ones affine in %tid that need a check)."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import function_emitter as FE


REMAT_OPS = frozenset({"mov", "add", "sub", "mul", "mad", "mul24", "mad24", "shl", "shr", "and", "or",
                       "xor", "not", "neg", "min", "max", "cvta", "cvt", "selp", "setp"})


THREAD_CONSTANT_SPECIALS = frozenset(f"%{r}.{c}" for r in ("tid", "ntid", "ctaid", "nctaid")
                                     for c in "xyz") | {"%laneid", "%warpid"}


def rematerializable(body, is_reg):
    """{register: index of its one definition} for registers whose value is the same wherever the
    thread computes it: one unguarded definition, a pure operation on constants, kernel params,
    symbols, %tid/%ctaid-like registers and other such registers. A region recomputes them instead of
    loading their slot, so LLVM sees e.g. a shared address as affine in %tid.x."""
    from ptx.passes.liveness import defs_uses
    if any(isinstance(st, A.Instruction) and st.opcode == "st" and "param" in st.mods for st in body):
        return {}
    defs, info = {}, {}
    for i, st in enumerate(body):
        if isinstance(st, A.Instruction):
            d, u = defs_uses(st, is_reg)
            info[i] = u
            for r in d:
                defs.setdefault(r, []).append(i)

    def operands_ok(st):
        ok = True

        def visit(op):
            nonlocal ok
            if isinstance(op, (A.Reg, A.SymbolExpr)) and not is_reg(op.name) \
                    and op.name.startswith("%") and op.name not in THREAD_CONSTANT_SPECIALS:
                ok = False
            for sub in (getattr(op, "elems", None) or getattr(op, "items", None) or []):
                visit(sub)
            if isinstance(op, A.Negated):
                visit(op.operand)
        for op in st.operands:
            visit(op)
        return ok

    memo = {}

    def ok(r):
        if r in memo:
            return memo[r]
        memo[r] = False             # a cycle is not rematerializable
        idx = defs.get(r)
        if not idx or len(idx) != 1:
            return False
        st = body[idx[0]]
        pure = st.opcode in REMAT_OPS or (st.opcode == "ld" and "param" in st.mods)
        if not pure or st.guard or "cc" in st.mods or not operands_ok(st):
            return False
        if st.operands and isinstance(st.operands[0], A.Address):
            return False
        res = all(ok(u) for u in info[idx[0]])
        memo[r] = res
        return res
    return {r: defs[r][0] for r in defs if ok(r)}


def remat_chain(regs, remat, body, is_reg):
    """Indices, in body order, of the definitions that recompute `regs` (with their inputs)."""
    from ptx.passes.liveness import defs_uses
    out, stack = set(), list(regs)
    while stack:
        i = remat[stack.pop()]
        if i in out:
            continue
        out.add(i)
        stack.extend(defs_uses(body[i], is_reg)[1])
    return sorted(out)


def constant_registers(flat, remat, regs):
    """{register: LLVM literal} of the integer registers set once from an immediate: no region
    stores them (each recomputes what it needs), the fallback's frames get the literal."""
    out = {}
    for name, i in remat.items():
        st = flat.body[i]
        ty = regs.get(name, (None,))[0]
        if st.opcode == "mov" and len(st.operands) == 2 and isinstance(st.operands[1], A.Imm) \
                and ty in ("i16", "i32", "i64"):
            bits = FE.LLVM_BITS[ty]
            v = st.operands[1].value & ((1 << bits) - 1)
            out[name] = v - (1 << bits) if v >> (bits - 1) else v
    return out
