"""Per-kernel resources that cuFuncGetAttribute reports and our compiled code does not decide: the
registers ptxas would allocate (estimated from peak register liveness), user constant bytes, PTX target."""

from __future__ import annotations

from dataclasses import dataclass

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.passes.flatten_scopes import flatten_function
from ptx.passes.liveness import live_masks

# ptxas never reports fewer (a thread's id and an address are live in any kernel that does anything),
# and keeps a couple of registers for itself beyond the program's values.
MIN_REGS = 8
RESERVED_REGS = 2
MAX_REGS = 255


@dataclass
class KernelResources:
    num_regs: int          # estimate, within .maxnreg when the kernel has one
    maxnreg: int | None    # the kernel's .maxnreg, if any
    const_bytes: int       # the module's user .const variables (one constant bank per module)
    target_sm: int         # 86 for `.target sm_86` (0 if none is named)


def module_resources(module: A.Module) -> dict:
    """{entry name: KernelResources} for every kernel with a body."""
    funcs = {f.name: f for f in module.items if isinstance(f, A.Function) and f.body is not None}
    const_bytes = _const_bytes(module)
    sm = _target_sm(module.target)
    peaks: dict = {}
    out = {}
    for name, fn in funcs.items():
        if fn.kind != "entry":
            continue
        regs = min(max(_peak(name, funcs, peaks, ()) + RESERVED_REGS, MIN_REGS), MAX_REGS)
        maxnreg = fn.directives.get("maxnreg")
        if isinstance(maxnreg, (tuple, list)):
            maxnreg = maxnreg[0] if maxnreg else None
        if maxnreg:
            regs = min(regs, int(maxnreg))
        out[name] = KernelResources(regs, int(maxnreg) if maxnreg else None, const_bytes, sm)
    return out


def _target_sm(target) -> int:
    for t in target or ():
        if t.startswith("sm_"):
            digits = "".join(c for c in t[3:] if c.isdigit())
            if digits:
                return int(digits)
    return 0


def _const_bytes(module) -> int:
    off = 0
    for d in module.items:
        if isinstance(d, A.VarDecl) and d.space == "const" and d.linkage != "extern":
            elem = T.size_of(d.type.name) * d.type.vec
            n = 1
            for dim in d.dims:
                n *= dim
            if d.dims and d.dims[-1] == 0 and d.init:
                n = _count_init(d.init)
            align = d.align or elem or 1
            off = -(-off // align) * align + elem * n
    return off


def _count_init(init) -> int:
    return sum(_count_init(v) if isinstance(v, list) else 1 for v in init)


def _units(decl) -> int:
    """32-bit register units one register of this declaration takes (predicates have their own file)."""
    if decl.type.name == "pred":
        return 0
    return max(T.size_of(decl.type.name) // 4, 1) * max(decl.type.vec, 1)


def _peak(name, funcs, peaks, stack) -> int:
    """Peak 32-bit register units live at once in `name` and the functions it calls."""
    got = peaks.get(name)
    if got is not None:
        return got
    if name in stack:       # recursion: the call stack does not hold more registers than one frame
        return 0
    flat = flatten_function(funcs[name])
    units = {}

    def is_reg(r):
        u = units.get(r)
        if u is None:
            d = flat.lookup(r)
            u = units[r] = _units(d) if d is not None and d.space == "reg" else -1
        return u >= 0

    body = flat.body
    names, live_in, live_out, kill = live_masks(body, is_reg, flat.branch_targets)
    weights = [units[r] for r in names]
    calls = []
    for i, st in enumerate(body):
        if isinstance(st, A.Instruction) and st.opcode == "call":
            target = next((o for o in st.operands if not isinstance(o, A.ParenList)), None)
            if isinstance(target, A.SymbolExpr) and target.name in funcs:
                calls.append((i, target.name))
    # weigh each live set by the units of its registers: group the bits by weight once
    masks = {}
    for b, w in enumerate(weights):
        if w > 0:
            masks[w] = masks.get(w, 0) | (1 << b)

    def weight(m):
        return sum(w * (m & mk).bit_count() for w, mk in masks.items())

    peak = 0
    for m in set(live_in):
        peak = max(peak, weight(m))
    for i, callee in calls:
        # the callee's registers on top of what stays live across the call
        across = live_out[i] & ~kill[i]
        peak = max(peak, weight(across) + _peak(callee, funcs, peaks, stack + (name,)))
    peaks[name] = peak
    return peak
