"""Thread-range guards: a region that starts with `if (threadIdx.x < C)` (a tree reduction's step, a `tid == 0`
epilogue) runs its thread loop over the threads that pass, the guard dropped, instead of every thread of the block
with a branch in the loop (ISPC's all-off chunks skipped and all-on ones unmasked, for the interval case)."""

from __future__ import annotations

from ptx import ast as A
from ptx.passes.sync_points import sync_kind
from ptx.codegen.cpu.uniform import REMAT_OPS

U32 = 1 << 32
# setp comparisons as (x cmp C) -> the interval of x in [0, 2^32) where it holds; (lo, hi) half-open, or None
# where it is two intervals (x != C for C > 0)
_SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "lo": "hi", "hi": "lo", "ls": "hs", "hs": "ls",
         "eq": "eq", "ne": "ne"}
_UNSIGNED = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def _holds(cmp, c):
    """The interval of x in [0, 2^32) where `x cmp c` holds (c already clamped to [0, 2^32])."""
    return {"lt": (0, c), "le": (0, c + 1), "gt": (c + 1, U32), "ge": (c, U32), "eq": (c, c + 1),
            "ne": (1, U32) if c == 0 else None}[cmp]


def _fails(cmp, c):
    """Where `x cmp c` does not hold."""
    return {"lt": (c, U32), "le": (c + 1, U32), "gt": (0, c + 1), "ge": (0, c), "eq": (1, U32) if c == 0 else None,
            "ne": (c, c + 1)}[cmp]


def _tid_x(op, body, defs):
    """Whether operand `op` is %tid.x, directly or through registers that only copy it."""
    for _ in range(4):
        if isinstance(op, A.Reg) and op.name == "%tid.x":
            return True
        idx = defs.get(getattr(op, "name", None))
        if not isinstance(op, A.Reg) or idx is None or len(idx) != 1:
            return False
        st = body[idx[0]]
        if st.guard or st.opcode != "mov" or len(st.operands) != 2 or st.mods[-1:] not in (("u32",), ("s32",),
                                                                                           ("b32",)):
            return False
        op = st.operands[1]
    return False


def _interval(setp, negated_skip, body, defs):
    """The tid.x interval of the threads that do not take `@[!]p bra` where p = `setp` (a comparison of tid.x
    with an immediate), or None."""
    if setp.opcode != "setp" or len(setp.operands) != 3 or len(setp.mods) != 2:
        return None
    cmp, ty = setp.mods
    if ty not in ("u32", "s32", "b32") or cmp not in _SWAP or not isinstance(setp.operands[0], A.Reg) \
            or "|" in setp.operands[0].name:
        return None
    a, b = setp.operands[1], setp.operands[2]
    if isinstance(a, A.Imm) and _tid_x(b, body, defs):
        a, b, cmp = b, a, _SWAP[cmp]
    if not (isinstance(b, A.Imm) and _tid_x(a, body, defs)):
        return None
    c = b.value & (U32 - 1)
    if ty == "s32":
        if cmp in _UNSIGNED:
            return None
        if c >= 1 << 31:        # negative: tid.x (below 2^31) is above it
            c = -1
        if c < 0:
            cmp, c = {"lt": ("lt", 0), "le": ("lt", 0), "eq": ("lt", 0), "gt": ("ge", 0), "ge": ("ge", 0),
                      "ne": ("ge", 0)}[cmp]
    cmp = _UNSIGNED.get(cmp, cmp)
    # the branch skips where p (or !p) holds; the threads that run are the rest
    return _holds(cmp, c) if negated_skip else _fails(cmp, c)


def _pure(st):
    return st.opcode in REMAT_OPS and not any(isinstance(op, A.Address) for op in st.operands)


def guard(body, start, reach, is_reg, live, remat):
    """(lo, hi, index of the guard's branch, whether it lands at the exit) where the region starting at statement
    `start` begins with a branch, on a predicate comparing tid.x with an immediate, straight to the region's end (a
    barrier or the thread's exit):
    the threads outside [lo, hi) do nothing in the region. Else None. Only register arithmetic may come before the
    guard, and none that is live after the barrier a skipping thread lands at (it would leave that slot stale)
    unless the regions recompute it (remat, uniform.rematerializable); live: {statement index of a sync point: the
    registers live after it}."""
    from ptx.passes.liveness import defs_uses
    g = start
    while g < len(body) and g in reach:
        st = body[g]
        if isinstance(st, A.Instruction):
            if st.opcode == "bra" and st.guard:
                break
            if st.guard or not _pure(st):
                return None
        g += 1
    else:
        return None
    bra = body[g]
    target = getattr(bra.operands[0], "name", None)
    land = next((i for i, st in enumerate(body) if isinstance(st, A.Label) and st.name == target), None)
    if land is None:
        return None
    while land < len(body) and isinstance(body[land], A.Label):
        land += 1
    end = body[land] if land < len(body) else None
    if end is None or end.guard:
        return None
    if not (sync_kind(end) or end.opcode in ("ret", "exit")):
        return None
    # only now, for the few regions that start with such a branch: where each register is written
    defs = {}
    for i, st in enumerate(body):
        if isinstance(st, A.Instruction):
            for r in defs_uses(st, is_reg)[0]:
                defs.setdefault(r, []).append(i)
    pdefs = defs.get(bra.guard[0], [])
    if len(pdefs) != 1 or body[pdefs[0]].guard:
        return None
    rng = _interval(body[pdefs[0]], bra.guard[1], body, defs)
    if rng is None:
        return None
    if sync_kind(end):
        stale = set()
        for i in range(start, g):
            if isinstance(body[i], A.Instruction):
                stale |= defs_uses(body[i], is_reg)[0]
        if (stale - set(remat)) & live.get(land, set()):
            return None
    return rng[0], rng[1], g, end.opcode in ("ret", "exit")
