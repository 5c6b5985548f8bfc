"""Pass: find the instructions that suspend a thread on the CPU (block barriers and warp collectives)
and which functions reach one through direct calls."""

from __future__ import annotations

from ptx import ast as A

WARP_COLLECTIVES = frozenset({"shfl", "vote", "activemask", "match", "redux", "elect", "mma", "ldmatrix", "stmatrix",
                              "movmatrix"})


def sync_kind(ins: A.Instruction):
    """'barrier', 'warp', or None."""
    op = ins.opcode
    if op in ("bar", "barrier"):
        if "warp" in ins.mods:
            return "warp"
        if "arrive" in ins.mods:
            return None           # arriving never waits
        return "barrier"
    if op in WARP_COLLECTIVES or (op == "wmma" and ins.mods and ins.mods[0] == "mma"):
        return "warp"             # wmma.load/store move no data between lanes: no sync point
    if op == "mbarrier" and ins.mods and ins.mods[0] in ("test_wait", "try_wait"):
        return "barrier"          # an incomplete phase waits for the block's other threads (ops_mbarrier)
    return None


def direct_callee(ins: A.Instruction):
    """The name of a directly called function, or None for indirect calls."""
    for op in ins.operands:
        if isinstance(op, A.ParenList):
            continue
        if isinstance(op, A.Reg) and not op.name.startswith("%"):
            return op.name
        if isinstance(op, A.SymbolExpr):
            return op.name
        return None
    return None


def functions_with_sync(flat_funcs: dict) -> set:
    """Names of functions whose body (or a function it calls directly) has a sync point."""
    has = set()
    calls = {}
    for name, ff in flat_funcs.items():
        callees = set()
        for st in ff.body:
            if isinstance(st, A.Instruction):
                if sync_kind(st):
                    has.add(name)
                if st.opcode == "call":
                    c = direct_callee(st)
                    if c:
                        callees.add(c)
        calls[name] = callees
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in has and callees & has:
                has.add(name)
                changed = True
    return has
