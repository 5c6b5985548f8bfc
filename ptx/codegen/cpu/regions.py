"""Regions and sync points: which kernels can run as region loops, and the statements a region between
two sync points can reach, leave by, and write."""

from __future__ import annotations

from ptx import ast as A
from ptx.passes.sync_points import sync_kind
from ptx.codegen.cpu.warp_collectives import warp_region_op


MAX_REGIONS = 16
# with warp chains (cpu/warp_chain.py): the sites inside a chain do not count towards MAX_REGIONS (their regions
# serve only blocks that are not whole warps, and are compiled without optimisation then), up to this many in all
MAX_CHAINED_SITES = 64


def region_ready(func, flat, sync_em, warp=False, chained=0):
    """Block barriers only, each a plain `bar.sync <imm>` (every thread of the block waits), and with
    `warp` the warp collectives warp_region_op takes too (shfl, vote, redux, match, activemask); no
    frame-resident .local/.param variables and few enough regions to inline each one (`chained`: the sites inside
    warp chains, which do not count)."""
    if any(d.space in ("local", "param") for d in flat.decls.values()):
        return False
    n = len(sync_em.sync_sites)
    if not n or not MAX_REGIONS or n - chained > MAX_REGIONS or n > MAX_CHAINED_SITES:
        return False
    for st in flat.body:
        if isinstance(st, A.Instruction) and sync_kind(st) == "warp":
            if not (warp and warp_region_op(st)):
                return False
        elif isinstance(st, A.Instruction) and sync_kind(st):
            mods = set(st.mods)
            if st.opcode not in ("bar", "barrier") or mods & {"red", "arrive", "warp", "cluster"}:
                return False
            if len(st.operands) != 1 or not isinstance(st.operands[0], A.Imm):
                return False
        if isinstance(st, A.Instruction) and st.opcode == "brx":
            return False        # its targets may be unknown to the region analysis
    return True


def successors(body):
    labels = {st.name: i for i, st in enumerate(body) if isinstance(st, A.Label)}
    n = len(body)
    succ = []
    for i, st in enumerate(body):
        nxt = [i + 1] if i + 1 < n else []
        if isinstance(st, A.Instruction) and st.opcode == "bra":
            tgt = labels.get(getattr(st.operands[0], "name", None))
            s = [tgt] if tgt is not None else []
            succ.append(s + nxt if st.guard else s)
        elif isinstance(st, A.Instruction) and st.opcode in ("ret", "exit", "trap") and not st.guard:
            succ.append([])
        else:
            succ.append(nxt)
    return succ


def region_reach(body, succ, start):
    """Statements a thread starting at statement `start` can run up to its next (unguarded)
    barrier, that barrier included."""
    seen, stack = set(), [start]
    while stack:
        i = stack.pop()
        if i in seen or i >= len(body):
            continue
        seen.add(i)
        st = body[i]
        if isinstance(st, A.Instruction) and sync_kind(st) and not st.guard:
            continue
        stack.extend(succ[i])
    return seen


def region_exits(body, reach, start):
    """Whether a thread running the statements `reach` (from `start`) may exit: a ret/exit, or
    falling off the end of the body."""
    n = len(body)
    if start >= n or any(isinstance(body[i], A.Instruction) and body[i].opcode in ("ret", "exit")
                         for i in reach):
        return True
    last = body[n - 1]
    if n - 1 not in reach:
        return False
    return isinstance(last, A.Label) or bool(last.guard) or not (
        last.opcode in ("bra", "ret", "exit", "trap") or sync_kind(last))


def region_writes(body, reach, written):
    """Registers the statements `reach` (from region_reach) may write; the barrier that ends the
    region is left out, as what it writes belongs to the next region."""
    out = set()
    for i in reach:
        st = body[i]
        if isinstance(st, A.Instruction) and sync_kind(st) and not st.guard:
            continue
        out |= written.get(i, set())
    return out
