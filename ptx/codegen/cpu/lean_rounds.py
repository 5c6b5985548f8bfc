"""Lean rounds: a rounds region (cpu/round_loops.py) whose threads can leave its loop only through one branch on an
affine comparison (a grid-stride loop's `i < n`) keeps no per-thread bookkeeping in its thread loop. Every thread's
next site follows from the comparison's lane-0 operands, so after the loop one scalar test finds whether all stay,
and only a round where some may not recomputes each thread's site (issue 14)."""

from __future__ import annotations

from dataclasses import dataclass

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen.ops_int import int_predicate
from ptx.codegen.cpu import round_loops
from ptx.passes.liveness import defs_uses

ENABLED = True          # tests compare with the tracked thread loop
# orderings: a comparison of an affine value with a uniform one is the same for every lane between two that agree
_ORDERED = frozenset(["lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"])
_MIRROR = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "lo": "hi", "ls": "hs", "hi": "lo", "hs": "ls"}
_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "lo": "hs", "ls": "hi", "hi": "ls", "hs": "lo"}
# the comparison's width; its last lane's value is worked out exactly in twice that (i128 only adds and compares:
# no library call)
_WIDTH = {"s32": 32, "u32": 32, "b32": 32, "s64": 64, "u64": 64, "b64": 64}


@dataclass
class LeanExit:
    setp: int           # statement index of the comparison
    a: A.Operand        # its affine side (slope `slope` in %tid.x)
    b: A.Operand        # its uniform side
    cmp: str            # a cmp b keeps a thread in the loop, PTX's name (mirrored where the affine value was on the
    #                     right, negated where the branch stays on false)
    ptype: str          # the comparison's type (s32, u64, ...)
    slope: int
    a_ptr: str = ""     # allocas of its lane-0 operands, set each round at the comparison
    b_ptr: str = ""


def find(body, succ, reach, idx, plan, cands, is_reg, regs):
    """A LeanExit when every thread that starts a round of the lockstep loop through sync statement idx either comes
    back to it or leaves through one branch, on a comparison of an exactly affine register with a uniform value,
    that lies on every way round the loop; the loop's candidates [(register, type, (slope, by row))] are all
    block-wide and none is written after that branch. Else None."""
    if not ENABLED or not plan:
        return None
    cyc = plan.cyc
    leaves = [i for i in cyc if i != idx and any(j not in cyc for j in succ[i])]
    if len(leaves) != 1:
        return None
    ib = leaves[0]
    br = body[ib]
    if not (isinstance(br, A.Instruction) and br.opcode == "bra" and br.guard is not None and len(succ[ib]) == 2):
        return None
    if any(isinstance(body[i], A.Instruction) and body[i].opcode in ("ret", "exit", "call", "trap")
           for i in cyc):
        return None
    # the branch is on every way round: without it the loop cannot come back to idx
    if idx in _walk(succ[idx], succ, cyc, {idx, ib}):
        return None
    pred = br.guard[0]
    j = ib - 1          # the comparison defines the predicate in the same straight run of statements
    while j >= 0 and isinstance(body[j], A.Instruction) and pred not in defs_uses(body[j], is_reg)[0]:
        j -= 1
    if j < 0 or j not in cyc or not isinstance(body[j], A.Instruction):
        return None
    st = body[j]
    if st.opcode != "setp" or st.guard is not None or len(st.operands) != 3 or not isinstance(st.operands[0], A.Reg):
        return None
    ts = T.types_in(st.mods)
    cmp = next((m for m in st.mods if m in _ORDERED), None)
    if len(ts) != 1 or ts[0] not in _WIDTH or cmp not in _ORDERED or set(st.mods) - {cmp, ts[0]}:
        return None
    a, b = st.operands[1:]
    sa, sb = plan.slopes.of(a), plan.slopes.of(b)
    if sa == 0 and isinstance(sb, int) and sb:
        a, b, sa, sb, cmp = b, a, sb, sa, _MIRROR[cmp]
    if not (isinstance(sa, int) and 0 < abs(sa) < 1 << 31 and sb == 0 and isinstance(a, A.Reg) and is_reg(a.name)):
        return None
    names = {name for name, _, _ in cands}
    if plan.lane0.of(a) != sa or a.name not in round_loops.shadowed(plan, body, names, is_reg):
        return None
    ty = T.llvm_type(ts[0])
    if regs.get(a.name, (None,))[0] != ty or isinstance(b, A.Reg) and regs.get(b.name, (None,))[0] != ty:
        return None
    if not isinstance(b, (A.Reg, A.Imm)) or isinstance(b, A.Reg) and not is_reg(b.name):
        return None
    # the operands stay as the comparison read them up to the branch
    for i in range(j + 1, ib):
        if defs_uses(body[i], is_reg)[0] & {a.name, getattr(b, "name", None)}:
            return None
    taken = next(s for s in succ[ib] if s != ib + 1)
    stay_taken = taken in cyc
    if (ib + 1 in cyc) == stay_taken:
        return None
    # nothing the next round starts from changes on the way back after the branch (the last thread's values are
    # then every thread's, whether it stayed or not), nor on a leaving thread's way to the exit
    after = _walk([ib + 1 if not stay_taken else taken], succ, cyc, {idx}) - {idx}
    if any(isinstance(body[i], A.Instruction) and defs_uses(body[i], is_reg)[0] & names
           for i in after | (set(reach) - cyc)):
        return None
    if stay_taken == br.guard[1]:
        cmp = _NEGATE[cmp]      # the thread stays where the comparison is false
    return LeanExit(j, a, b, cmp, ts[0], sa)


def _walk(starts, succ, within, stops) -> set:
    """The statements of `within` reachable from `starts`; a statement of `stops` is reached but not gone past."""
    seen, stack = set(), [i for i in starts if i in within]
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        if i not in stops:
            stack.extend(j for j in succ[i] if j in within)
    return seen


def note(em, plan, lean):
    """After the comparison: its lane-0 operands, for the test after the thread loops."""
    f = em.f
    ty = T.llvm_type(lean.ptype)
    if not lean.a_ptr:
        lean.a_ptr, lean.b_ptr = f.alloca(ty), f.alloca(ty)
    f.emit(f"store {ty} {round_loops.lane0_value(em, plan, lean.a, ty)}, ptr {lean.a_ptr}")
    f.emit(f"store {ty} {round_loops.lane0_value(em, plan, lean.b, ty)}, ptr {lean.b_ptr}")


def after_loops(lean, k, leave, bx, ends, then):
    """The blocks from label qf.entry on to label `then`: %mn.r and %mx.r, the threads' smallest and largest next
    site (k where a thread stays, `leave` where it leaves), from the lane-0 operands; where the scalar test cannot show
    that all stay, a pass over the threads stores each one's site. ends: [(name, type, alloca)] whose value after
    the loops is `%name.r`."""
    ty = T.llvm_type(lean.ptype)
    w = _WIDTH[lean.ptype]
    signed = T.is_signed(lean.ptype)
    ext = "sext" if signed else "zext"
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    pred = int_predicate(lean.cmp, lean.ptype)
    wide = f"i{2 * w}"
    # (the slope times the last lane's %tid.x fits 64 bits: below 2^31 times 1024)
    out = ["qf.entry:", f"  %lr.a = load {ty}, ptr {lean.a_ptr}", f"  %lr.b = load {ty}, ptr {lean.b_ptr}",
           f"  %lr.bx = zext i32 {bx} to i64", "  %lr.l = sub i64 %lr.bx, 1",
           f"  %lr.d = mul i64 %lr.l, {lean.slope}", f"  %lr.a0 = {ext} {ty} %lr.a to {wide}"]
    d = "%lr.d"
    if wide != "i64":
        out.append(f"  %lr.dw = sext i64 %lr.d to {wide}")
        d = "%lr.dw"
    out += [f"  %lr.e = add {wide} %lr.a0, {d}",
            # the last lane's value does not wrap: every lane's lies between the first's and the last's
            f"  %lr.lo = icmp sge {wide} %lr.e, {lo}", f"  %lr.hi = icmp sle {wide} %lr.e, {hi}",
            f"  %lr.en = trunc {wide} %lr.e to {ty}",
            f"  %lr.c0 = icmp {pred} {ty} %lr.a, %lr.b", f"  %lr.c1 = icmp {pred} {ty} %lr.en, %lr.b"]
    # all stay: every thread's site word still holds k, as when the region was called (the block calls this
    # variant only when every thread's site is k, and a round that changes one goes through lr.fix)
    out += ["  %lr.both = and i1 %lr.c0, %lr.c1", "  %lr.in = and i1 %lr.lo, %lr.hi",
            "  %lr.all = and i1 %lr.both, %lr.in", "  br i1 %lr.all, label %lr.join, label %lr.fix",
            # each thread's own comparison, as it made it (wrapping as its register did)
            "lr.fix:", "  br label %lr.loop", "lr.loop:",
            "  %lr.t = phi i64 [ 0, %lr.fix ], [ %lr.tn, %lr.loop ]",
            "  %lr.mn = phi i32 [ -1, %lr.fix ], [ %lr.mnn, %lr.loop ]",
            "  %lr.mx = phi i32 [ 0, %lr.fix ], [ %lr.mxn, %lr.loop ]",
            "  %lr.t32 = trunc i64 %lr.t to i32", f"  %lr.x = urem i32 %lr.t32, {bx}"]
    x = "%lr.x" if ty == "i32" else "%lr.xw"
    if ty != "i32":
        out.append(f"  %lr.xw = zext i32 %lr.x to {ty}")
    out += [f"  %lr.m = mul {ty} {x}, {lean.slope}", f"  %lr.v = add {ty} %lr.a, %lr.m",
            f"  %lr.c = icmp {pred} {ty} %lr.v, %lr.b",
            f"  %lr.site = select i1 %lr.c, i32 {k}, i32 {leave}", "  %lr.p = getelementptr i32, ptr %soa, i64 %lr.t",
            "  store i32 %lr.site, ptr %lr.p",
            "  %lr.mnn = call i32 @llvm.umin.i32(i32 %lr.mn, i32 %lr.site)",
            "  %lr.mxn = call i32 @llvm.umax.i32(i32 %lr.mx, i32 %lr.site)",
            "  %lr.tn = add nuw i64 %lr.t, 1", "  %lr.tc = icmp ult i64 %lr.tn, %n64",
            "  br i1 %lr.tc, label %lr.loop, label %lr.join",
            "lr.join:", f"  %mn.r = phi i32 [ {k}, %qf.entry ], [ %lr.mnn, %lr.loop ]",
            f"  %mx.r = phi i32 [ {k}, %qf.entry ], [ %lr.mxn, %lr.loop ]"]
    out += [f"  %{name}.r = load {t}, ptr {ptr}" for name, t, ptr in ends]
    out.append(f"  br label %{then}")
    return out
