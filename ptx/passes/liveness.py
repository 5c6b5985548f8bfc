"""Pass: register liveness over a flattened function body, instruction by instruction, so a resumable
thread saves only the registers still needed after each suspension point. Conservative: an operand
whose role is unclear counts as a use, and a predicated definition does not kill."""

from __future__ import annotations

from ptx import ast as A

NO_DEST = frozenset({"st", "red", "bra", "brx", "ret", "exit", "trap", "membar", "fence", "prefetch",
                     "prefetchu", "nanosleep", "pmevent", "brkpt", "discard", "applypriority",
                     "griddepcontrol", "setmaxnreg"})
TERMINATORS = frozenset({"ret", "exit", "trap"})


def _regs_in(op, is_reg, out):
    t = type(op)        # exact types: the tree has no subclasses, and this runs for every operand
    if t is A.Reg or t is A.SymbolExpr:
        name = op.name
        if is_reg(name):
            out.add(name)
        elif "." in name:       # a video selector or vector component (`%r1.b0`, `%v.x`) reads its register
            base = name.split(".", 1)[0]
            if is_reg(base):
                out.add(base)
    elif t is A.Address:
        if op.base and is_reg(op.base):
            out.add(op.base)
        for e in op.extra:      # tex/tld4/suld/sust coordinates: `[handle, {%f1, %f2}]`
            _regs_in(e, is_reg, out)
    elif t is A.Vector:
        for e in op.elems:
            _regs_in(e, is_reg, out)
    elif t is A.Negated:
        _regs_in(op.operand, is_reg, out)
    elif t is A.PredPair:
        _regs_in(op.first, is_reg, out)
        _regs_in(op.second, is_reg, out)
    elif t is A.ParenList:
        for e in op.items:
            _regs_in(e, is_reg, out)


def defs_uses(ins: A.Instruction, is_reg):
    defs, uses = set(), set()
    ops = ins.operands
    op = ins.opcode
    has_dest = op not in NO_DEST and not (op in ("bar", "barrier") and "red" not in ins.mods)
    if op == "call":
        has_dest = bool(ops) and type(ops[0]) is A.ParenList
    first = 0
    if has_dest and ops:
        first = 1
        d = ops[0]
        # an address is read; a register written through a selector keeps its other bits, so it is read too
        partial = type(d) is A.Reg and "." in d.name and not is_reg(d.name)
        _regs_in(d, is_reg, uses if type(d) is A.Address or partial else defs)
    for k in range(first, len(ops)):
        _regs_in(ops[k], is_reg, uses)
    if ins.guard and is_reg(ins.guard[0]):
        uses.add(ins.guard[0])
    return defs, uses


def live_masks(body: list, is_reg, branch_targets=None):
    """(names, live_in, live_out, kill): for each statement, bitmasks over the register `names` live
    before and after it, and those it surely overwrites (an unpredicated definition)."""
    n = len(body)
    labels = {st.name: i for i, st in enumerate(body) if isinstance(st, A.Label)}
    names, bit = [], {}

    def bits(regs):
        m = 0
        for r in regs:
            b = bit.get(r)
            if b is None:
                b = bit[r] = len(names)
                names.append(r)
            m |= 1 << b
        return m

    use, kill, succ = [0] * n, [0] * n, [[] for _ in range(n)]
    for i, st in enumerate(body):
        nxt = [i + 1] if i + 1 < n else []
        if not isinstance(st, A.Instruction):
            succ[i] = nxt
            continue
        d, u = defs_uses(st, is_reg)
        use[i] = bits(u)
        kill[i] = 0 if st.guard else bits(d)
        bits(d)
        if st.opcode == "bra":
            t = st.operands[0]
            tgt = labels.get(getattr(t, "name", None))
            s = [tgt] if tgt is not None else []
            succ[i] = s + nxt if st.guard else s
        elif st.opcode == "brx":
            bt = (branch_targets or {}).get(getattr(st.operands[1], "name", None))
            succ[i] = [labels[l] for l in (bt.labels if bt else []) if l in labels] or nxt
        elif st.opcode in TERMINATORS and not st.guard:
            succ[i] = []
        else:
            succ[i] = nxt
    live_in, live_out = [0] * n, [0] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            o = 0
            for s in succ[i]:
                o |= live_in[s]
            li = use[i] | (o & ~kill[i])
            if o != live_out[i] or li != live_in[i]:
                live_out[i], live_in[i] = o, li
                changed = True
    return names, live_in, live_out, kill


def live_out_sets(body: list, is_reg, branch_targets=None, indices=None) -> dict:
    """{statement index: set of register names live right after it} for `indices` (default: all)."""
    names, _, live_out, _ = live_masks(body, is_reg, branch_targets)
    out = {}
    for i in (range(len(body)) if indices is None else indices):
        m = live_out[i]
        out[i] = {names[b] for b in range(len(names)) if m >> b & 1}
    return out
