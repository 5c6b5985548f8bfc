"""Rounds of a lockstep loop inside one region call: where every thread that stays in the loop provably takes the
same path through it, its affine registers stay affine without a check, so the region keeps them as one scalar for
the block from round to round instead of storing and verifying each thread's copy (issue 14)."""

from __future__ import annotations

from ptx import ast as A
from ptx.passes.liveness import defs_uses

# pure operations: the same inputs give every thread the same result
_PURE = frozenset("""add sub mul mad mul24 mad24 div rem abs neg min max and or xor not cnot shl shr setp selp set mov
cvt cvta fma sqrt rcp rsqrt ex2 lg2 sin cos tanh copysign bfe bfi brev popc clz prmt sad lop3 shf testp slct""".split())
_BLOCK_SPECIALS = frozenset(f"%{r}.{c}" for r in ("ntid", "ctaid", "nctaid") for c in "xyz")
ENABLED = True           # tests compare with the round-at-a-time code
_INT_MODS = frozenset(f"{s}{w}" for s in "sub" for w in (32, 64))


def cycle(succ, reach, idx) -> set:
    """The statements of `reach` (a region from sync site statement idx) on a path back to idx."""
    preds = {}
    for i in reach:
        if i == idx:
            continue        # a region ends at its barrier
        for j in succ[i]:
            if j in reach:
                preds.setdefault(j, []).append(i)
    out, stack = set(), [idx]
    while stack:
        i = stack.pop()
        if i in out:
            continue
        out.add(i)
        stack.extend(preds.get(i, ()))
    return out if len(out) > 1 else set()


class _Slopes:
    """Each register's exact slope in %tid.x over the threads that stay in the loop (0: the same for them all),
    or None: an optimistic fixed point over its definitions (in the loop, and outside it for those the region
    recomputes) and the value it enters the round with."""

    def __init__(self, body, cyc, is_reg, entering, remat):
        self.is_reg = is_reg
        defs = {r: [] for r in entering}
        for i in sorted(cyc):
            st = body[i]
            if isinstance(st, A.Instruction):
                for r in defs_uses(st, is_reg)[0]:
                    defs.setdefault(r, []).append(st)
        for r, i in remat.items():
            if body[i] not in defs.setdefault(r, []):
                defs[r].append(body[i])
        self.val = {r: "top" for r in defs}
        for _ in range(100):
            changed = False
            for r, sts in defs.items():
                v = entering.get(r, "top")
                for st in sts:
                    if v is None:
                        break
                    v = _meet(v, self._of_ins(st))
                if v != self.val[r]:
                    self.val[r] = v
                    changed = True
            if not changed:
                break
        else:
            self.val = dict.fromkeys(defs)

    def of(self, op):
        if isinstance(op, A.Imm):
            return 0
        if isinstance(op, (A.Reg, A.SymbolExpr)):
            name = op.name
            if self.is_reg(name):
                return self.val.get(name)
            if name == "%tid.x":
                return 1
            if name in _BLOCK_SPECIALS or not name.startswith("%"):
                return 0        # block-wide values and the addresses of variables
        return None

    def _of_ins(self, st):
        if "cc" in st.mods or st.opcode in ("addc", "subc", "madc"):
            return None
        if st.guard is not None and self.of(A.Reg(st.guard[0])) != 0:
            return None         # threads may differ in whether it ran
        if st.opcode == "ld" and "param" in st.mods:
            return 0
        if st.opcode not in _PURE:
            return None
        ops = st.operands[1:]
        if any(not isinstance(o, (A.Reg, A.Imm, A.SymbolExpr, A.FloatImm)) for o in ops):
            return None
        src = [self.of(o) for o in ops]
        if any(s is None for s in src):
            return None
        if "top" in src:
            return "top"
        if not any(src):
            return 0
        # a varying operand: exact only for wrap-around integer arithmetic of one width, on registers (emit_shadow)
        op, mods = st.opcode, set(st.mods)
        if not (mods & _INT_MODS) or mods & {"sat", "hi", "wide"} or not isinstance(st.operands[0], A.Reg):
            return None
        if not all(isinstance(o, A.Imm) or (isinstance(o, A.Reg) and (self.is_reg(o.name) or o.name == "%tid.x"))
                   for o in ops):
            return None
        width = 64 if any(m.endswith("64") for m in mods) else 32
        if op == "mov" and len(src) == 1:
            return src[0]
        if op == "add" and len(src) == 2:
            return src[0] + src[1]
        if op == "sub" and len(src) == 2:
            return src[0] - src[1]
        if op == "shl" and len(src) == 2 and isinstance(ops[1], A.Imm) and 0 <= ops[1].value < width:
            return src[0] << ops[1].value
        if op in ("mul", "mad") and "lo" in mods and len(src) >= 2:
            if isinstance(ops[1], A.Imm):
                prod = src[0] * ops[1].value
            elif isinstance(ops[0], A.Imm):
                prod = src[1] * ops[0].value
            elif not src[0] and not src[1]:
                prod = 0
            else:
                return None
            return prod if op == "mul" else prod + src[2]
        if op == "selp" and len(src) == 3 and isinstance(ops[2], A.Reg) and src[2] == 0 and src[0] == src[1]:
            return src[0]
        return None


def _meet(a, b):
    if a == "top":
        return b
    if b == "top":
        return a
    return a if a == b else None


class Plan:
    """A proven loop: `cyc`, its statements; `slopes`, each register's exact slope (cpu/round_loops._Slopes); and
    `shadows`, {register: (type, alloca)} of those with a nonzero slope, whose value less slope x %tid.x the region
    tracks beside it (emit_shadow), so that the base the next round starts from is a value LLVM sees the same for
    every thread (it would not see (b + s*t + u) - s*t as b + u through the chain of adds)."""

    def __init__(self, cyc, slopes):
        self.cyc, self.slopes, self.shadows = cyc, slopes, {}


def plan(body, succ, reach, idx, cands, live_k, remat, is_reg):
    """A Plan when the lockstep loop through sync site statement idx keeps each of the block-wide candidates `cands`
    [(register, type, (slope, by row))] exactly affine with its slope for every thread that stays in it, else None:
    its branches between two statements of the loop are uniform (a branch on a varying predicate may only leave it),
    and each candidate's definitions in it add uniform values or other registers' exact multiples of %tid.x.
    live_k: the registers live at the site (those that are not candidates enter varying)."""
    cyc = cycle(succ, reach, idx)
    if not cyc:
        return None
    slope = {name: sx for name, _, (sx, by_row) in cands if not by_row}
    # what a region recomputes (remat) enters as its definition computes it, the rest as its slot holds it
    entering = {r: slope.get(r) for r in live_k if is_reg(r) and r not in remat}
    sl = _Slopes(body, cyc, is_reg, entering, remat)
    for i in cyc:
        st = body[i]
        if not isinstance(st, A.Instruction) or st.guard is None:
            continue
        if st.opcode == "bra" and all(j in cyc for j in succ[i]) and sl.of(A.Reg(st.guard[0])) != 0:
            return None
    if not all(sl.val.get(name, sx) == sx for name, sx in slope.items()):
        return None
    return Plan(cyc, sl)


def make_shadows(em, plan, body, cands):
    """The shadows of the registers with a nonzero slope that the loop defines or that enter it (`cands`), made
    before the body is emitted: an instruction that updates its own operand (`add r, r, s`) reads the old shadow."""
    names = set(cands)
    for i in plan.cyc:
        if isinstance(body[i], A.Instruction):
            names |= defs_uses(body[i], em.is_register)[0]
    for name in sorted(names):
        if plan.slopes.of(A.Reg(name)):
            ty = em.reg(name)[0]
            plan.shadows[name] = (ty, em.f.alloca(ty))


def shadow_of(plan, name):
    return plan.shadows[name][1]


def emit_shadow(em, st, plan):
    """After statement st of the loop: the shadow of the register it defines, where that has a nonzero slope."""
    if not isinstance(st, A.Instruction) or not st.operands or not isinstance(st.operands[0], A.Reg):
        return
    name = st.operands[0].name
    if name not in plan.shadows:
        return
    f = em.f
    ty = em.regs[name][0]

    def sh(op):
        if isinstance(op, A.Imm):
            return str(op.value)
        s = plan.slopes.of(op)
        if op.name == "%tid.x":
            return "0"
        if not s:
            return f.op(f"load {ty}, ptr {em.regs[op.name][1]}")
        if op.name in plan.shadows:
            return f.op(f"load {ty}, ptr {plan.shadows[op.name][1]}")
        # defined outside the loop (a remat register, constant here): its value less its multiple of %tid.x
        t = "%tid.x" if ty == "i32" else f.op(f"zext i32 %tid.x to {ty}")
        v = f.op(f"load {ty}, ptr {em.regs[op.name][1]}")
        return f.op(f"sub {ty} {v}, " + f.op(f"mul {ty} {t}, {s}"))

    ops, op = st.operands[1:], st.opcode
    if op == "mov":
        v = sh(ops[0])
    elif op in ("add", "sub"):
        v = f.op(f"{op} {ty} {sh(ops[0])}, {sh(ops[1])}")
    elif op == "shl":
        v = f.op(f"shl {ty} {sh(ops[0])}, {ops[1].value}")
    elif op in ("mul", "mad"):
        v = f.op(f"mul {ty} {sh(ops[0])}, {sh(ops[1])}")
        if op == "mad":
            v = f.op(f"add {ty} {v}, {sh(ops[2])}")
    elif op == "selp":
        v = f.op(f"select i1 {f.op(f'load i1, ptr {em.regs[ops[2].name][1]}')}, {ty} {sh(ops[0])}, {ty} {sh(ops[1])}")
    else:
        raise AssertionError(f"no shadow for {op}")
    ptr = shadow_of(plan, name)
    if st.guard is not None:
        g = f.op(f"load i1, ptr {em.regs[st.guard[0]][1]}")
        if st.guard[1]:
            g = f.op(f"xor i1 {g}, true")
        v = f.op(f"select i1 {g}, {ty} {v}, {ty} " + f.op(f"load {ty}, ptr {ptr}"))
    f.emit(f"store {ty} {v}, ptr {ptr}")
