"""Per-kernel resources that cuFuncGetAttribute reports and our compiled code does not decide: the
registers ptxas would allocate (estimated from peak register liveness), the static shared memory the kernel
references, user constant bytes, PTX target."""

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
    shared_bytes: int = 0  # static .shared bytes of the variables the kernel (or a .func it calls) uses


def module_resources(module: A.Module) -> dict:
    """{entry name: KernelResources} for every kernel with a body."""
    funcs = {f.name: f for f in module.items if isinstance(f, A.Function) and f.body is not None}
    const_bytes = _const_bytes(module)
    sm = _target_sm(module.target)
    peaks: dict = {}
    flats: dict = {}
    shared = _SharedLayout(module, funcs, flats)
    out = {}
    for name, fn in funcs.items():
        if fn.kind != "entry":
            continue
        regs = min(max(_peak(name, funcs, peaks, (), flats) + RESERVED_REGS, MIN_REGS), MAX_REGS)
        maxnreg = fn.directives.get("maxnreg")
        if isinstance(maxnreg, (tuple, list)):
            maxnreg = maxnreg[0] if maxnreg else None
        if maxnreg:
            regs = min(regs, int(maxnreg))
        regs = min(regs, _launch_bounds_cap(fn.directives))
        out[name] = KernelResources(regs, int(maxnreg) if maxnreg else None, const_bytes, sm,
                                    shared.kernel_bytes(name))
    return out


# what ptxas fits a launch-bounded kernel into (the occupancy calculator's register rules, sm_70+)
_REGS_PER_SM = 65536
_REG_UNIT = 256
_SUB_PARTITIONS = 4


def _launch_bounds_cap(directives) -> int:
    """The most registers a thread may have so that .maxntid/.reqntid threads (times .minnctapersm
    blocks) fit in the register file: ptxas's bound for launch-bounded kernels."""
    dims = directives.get("reqntid") or directives.get("maxntid")
    if not dims:
        return MAX_REGS
    if isinstance(dims, int):
        dims = (dims,)
    threads = 1
    for d in dims:
        threads *= max(int(d), 1)
    warps = -(-threads // 32)
    warps = -(-warps // _SUB_PARTITIONS) * _SUB_PARTITIONS     # warps allocated over every sub-partition
    blocks = directives.get("minnctapersm") or 1
    if isinstance(blocks, (tuple, list)):
        blocks = blocks[0] if blocks else 1
    per_warp = _REGS_PER_SM // (warps * max(int(blocks), 1)) // _REG_UNIT * _REG_UNIT
    return max(min(per_warp // 32, MAX_REGS), MIN_REGS)


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


def _flat(name, funcs, flats):
    f = flats.get(name)
    if f is None:
        f = flats[name] = flatten_function(funcs[name])
    return f


def _peak(name, funcs, peaks, stack, flats) -> int:
    """Peak 32-bit register units live at once in `name` and the functions it calls."""
    got = peaks.get(name)
    if got is not None:
        return got
    if name in stack:       # recursion: the call stack does not hold more registers than one frame
        return 0
    flat = _flat(name, funcs, flats)
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
        peak = max(peak, weight(across) + _peak(callee, funcs, peaks, stack + (name,), flats))
    peaks[name] = peak
    return peak


# ------------------------------------------------------------------ static shared memory per kernel

def _is_static_shared(d) -> bool:
    return (isinstance(d, A.VarDecl) and d.space == "shared" and d.linkage != "extern"
            and not (d.dims and d.dims[-1] == 0))


def _decl_size(d) -> int:
    n = T.size_of(d.type.name) * d.type.vec
    for dim in d.dims:
        n *= dim
    return n


def _decl_align(d) -> int:
    return d.align or T.size_of(d.type.name) * d.type.vec


def _operand_names(op, out: set):
    if isinstance(op, A.SymbolExpr):
        out.add(op.name)
    elif isinstance(op, A.Address):
        if op.base:
            out.add(op.base)
        for e in op.extra:
            _operand_names(e, out)
    elif isinstance(op, A.Vector):
        for e in op.elems:
            _operand_names(e, out)
    elif isinstance(op, A.ParenList):
        for e in op.items:
            _operand_names(e, out)


class _SharedLayout:
    """Static shared bytes per kernel as ptxas counts them: only the variables the kernel or the functions
    it reaches (calls, .calltargets, taken addresses) name, laid out in the compiler's order (module-level
    ones, then those of .func bodies, then the kernel's own), each at its alignment. The compiler reserves
    the module's whole common area for every kernel; the attribute is what the kernel itself needs."""

    def __init__(self, module, funcs, flats):
        self.funcs = funcs
        self.flats = flats
        defined = {i.name for i in module.items if isinstance(i, A.VarDecl) and i.linkage != "extern"}
        # (name, decl) in layout order; a .func body's variables after every module-level one
        self.common = [(d.name, d) for d in module.items if _is_static_shared(d) and d.name in defined]
        for name, fn in funcs.items():
            if fn.kind == "func":
                self.common += [((name, n), d) for n, d in _flat(name, funcs, flats).decls.items()
                                if _is_static_shared(d)]
        self.refs = {}

    def _names(self, name) -> set:
        """Every symbol `name`'s body names and its callees' do, transitively; a name the function
        declares itself as (function, name), since it shadows a module-level one."""
        got = self.refs.get(name)
        if got is not None:
            return got
        self.refs[name] = seen = set()      # a recursive call finds the set being filled
        flat = _flat(name, self.funcs, self.flats)
        named = set()
        for st in flat.body:
            if isinstance(st, A.Instruction):
                for op in st.operands:
                    _operand_names(op, named)
                if st.opcode == "call":
                    target = next((o for o in st.operands if not isinstance(o, A.ParenList)), None)
                    if isinstance(target, A.Reg):
                        # through a pointer that may come from anywhere in the module: any function
                        named.update(n for n, f in self.funcs.items() if f.kind == "func")
        for n in named:
            seen.add((name, n) if _is_static_shared(flat.decls.get(n)) else n)
        for bt in flat.branch_targets.values():
            if getattr(bt, "is_call", False):
                seen.update(bt.labels)
        for callee in [n for n in seen if n in self.funcs and n != name and self.funcs[n].kind == "func"]:
            seen |= self._names(callee)
        return seen

    def kernel_bytes(self, name) -> int:
        used = self._names(name)
        flat = _flat(name, self.funcs, self.flats)
        own = [((name, n), d) for n, d in flat.decls.items() if _is_static_shared(d)]
        off = 0
        for n, d in self.common + own:
            if n in used:
                a = _decl_align(d) or 1
                off = -(-off // a) * a + _decl_size(d)
        return off


def referenced_common_end(module: A.Module, common_offsets: dict) -> dict:
    """{entry name: end of the last common-area shared variable the kernel can reach}, for a compiler
    that lays the module-level and .func-body variables out once at `common_offsets` (name -> offset)
    and could start each kernel's own variables, and so its reservation, right after that end."""
    funcs = {f.name: f for f in module.items if isinstance(f, A.Function) and f.body is not None}
    flats: dict = {}
    layout = _SharedLayout(module, funcs, flats)
    common = dict(layout.common)
    out = {}
    for name, fn in funcs.items():
        if fn.kind != "entry":
            continue
        end = 0
        for key in layout._names(name):
            d = common.get(key)
            n = key if isinstance(key, str) else key[1]
            if d is not None and n in common_offsets:
                end = max(end, common_offsets[n] + _decl_size(d))
        out[name] = end
    return out
