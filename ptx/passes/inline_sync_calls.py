"""Pass: inline calls to device functions that reach a sync point (barrier or warp collective), so that
the resumable-thread code generator sees every suspension point in the kernel body itself."""

from __future__ import annotations

import copy

from ptx import ast as A
from ptx.errors import PTXUnsupportedError
from ptx.passes.sync_points import direct_callee

_counter = [0]


def _rename(op, names):
    if isinstance(op, A.Reg):
        return A.Reg(_map(op.name, names), op.pos)
    if isinstance(op, A.Address):
        return A.Address(_map(op.base, names) if op.base else None, op.offset, op.pos,
                         extra=[_rename(e, names) for e in op.extra])
    if isinstance(op, A.SymbolExpr):
        return A.SymbolExpr(_map(op.name, names), op.offset, op.pos)
    if isinstance(op, A.Vector):
        return A.Vector([_rename(e, names) for e in op.elems], op.pos)
    if isinstance(op, A.Negated):
        return A.Negated(_rename(op.operand, names), op.pos)
    if isinstance(op, A.PredPair):
        return A.PredPair(_rename(op.first, names), _rename(op.second, names), op.pos)
    if isinstance(op, A.ParenList):
        return A.ParenList([_rename(e, names) for e in op.items], op.pos)
    return op


def _map(name, names):
    if name in names:
        return names[name]
    import re
    m = re.match(r"^(.*?)(\d+)$", name)
    if m and (m.group(1), "family") in names:
        return names[(m.group(1), "family")] + m.group(2)
    return name


def _call_parts(ins):
    """(return names, callee, argument operands) of a direct call."""
    ops = list(ins.operands)
    rets = []
    if ops and isinstance(ops[0], A.ParenList):
        rets = ops.pop(0).items
    callee = ops.pop(0)
    args = ops.pop(0).items if ops and isinstance(ops[0], A.ParenList) else []
    return rets, callee, args


def inline_sync_calls(ff, funcs, sync_funcs, stack=()):
    new_body = []
    for st in ff.body:
        if isinstance(st, A.Instruction) and st.opcode == "call":
            callee = direct_callee(st)
            if callee in sync_funcs and callee in funcs:
                if callee in stack or ff.func.name == callee:
                    raise PTXUnsupportedError(f"recursive call to {callee}, which synchronizes",
                                              st.pos.line, st.pos.col)
                new_body.extend(_inline(st, ff, funcs[callee], funcs, sync_funcs,
                                        stack + (ff.func.name,)))
                continue
        new_body.append(st)
    ff.body = new_body


def _inline(call, ff, callee_ff, funcs, sync_funcs, stack):
    callee_ff = copy.copy(callee_ff)
    callee_ff.body = list(callee_ff.body)
    inline_sync_calls(callee_ff, funcs, sync_funcs, stack)
    _counter[0] += 1
    tag = f"$i{_counter[0]}$"
    rets, _, args = _call_parts(call)
    names = {}
    fn = callee_ff.func
    if call.guard:
        raise PTXUnsupportedError("predicated call of a synchronizing function", call.pos.line,
                                  call.pos.col)
    for formal, actual in list(zip(fn.returns, rets)) + list(zip(fn.params, args)):
        if not isinstance(actual, (A.Reg, A.SymbolExpr)) or getattr(actual, 'offset', 0):
            raise PTXUnsupportedError("non-variable argument to a synchronizing function",
                                      call.pos.line, call.pos.col)
        if formal.space == "reg":
            raise PTXUnsupportedError(".reg parameters of a synchronizing function",
                                      call.pos.line, call.pos.col)
        names[formal.name] = actual.name
    for d in callee_ff.decls.values():
        nd = copy.copy(d)
        nd.name = d.name + tag
        names[d.name] = nd.name
        if d.count is not None:
            names[(d.name, "family")] = nd.name
        ff.decls[nd.name] = nd
    for st in callee_ff.body:
        if isinstance(st, A.Label):
            names[st.name] = st.name + tag
    ret_label = "inl.ret" + tag
    out = []
    for st in callee_ff.body:
        if isinstance(st, A.Label):
            out.append(A.Label(names[st.name], st.pos))
            continue
        guard = (_map(st.guard[0], names), st.guard[1]) if st.guard else None
        if st.opcode == "ret":
            out.append(A.Instruction("bra", ("uni",), [A.Reg(ret_label, st.pos)], guard, st.pos))
            continue
        out.append(A.Instruction(st.opcode, st.mods, [_rename(o, names) for o in st.operands],
                                 guard, st.pos))
    out.append(A.Label(ret_label, call.pos))
    return out
