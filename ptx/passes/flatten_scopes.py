"""Pass: flatten nested `{ }` scopes of a function body into one statement list, renaming each inner
declaration uniquely (`param0` -> `param0$3$`) so later stages see one flat namespace."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from ptx import ast as A
from ptx.errors import PTXSemanticError

_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")


class _Decls(dict):
    """A function's declarations; any change forgets the lookups made so far (stages add declarations)."""
    __slots__ = ("memo",)

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.memo = {}

    def __setitem__(self, k, v):
        self.memo.clear()
        super().__setitem__(k, v)

    def __delitem__(self, k):
        self.memo.clear()
        super().__delitem__(k)

    def setdefault(self, k, v=None):
        if k not in self:
            self.memo.clear()
        return super().setdefault(k, v)

    def update(self, *a, **k):
        self.memo.clear()
        super().update(*a, **k)

    def pop(self, *a):
        self.memo.clear()
        return super().pop(*a)

    def clear(self):
        self.memo.clear()
        super().clear()


_MISS = object()


@dataclass
class FlatFunction:
    func: A.Function
    body: list                              # [Instruction | Label]
    decls: dict = field(default_factory=_Decls)    # name -> VarDecl (parameterised ones by base name)
    branch_targets: dict = field(default_factory=dict)
    prototypes: dict = field(default_factory=dict)

    def lookup(self, name: str):
        """The declaration of `name` (a `%r<N>` family member resolves to the family)."""
        decls = self.decls
        memo = getattr(decls, "memo", None)
        if memo is not None:
            d = memo.get(name, _MISS)
            if d is _MISS:
                d = memo[name] = self._lookup(name)
            return d
        return self._lookup(name)

    def _lookup(self, name: str):
        d = self.decls.get(name)
        if d is not None and d.count is None:
            return d
        m = _TRAILING_DIGITS.match(name)
        if m:
            fam = self.decls.get(m.group(1))
            if fam is not None and fam.count is not None and int(m.group(2)) < fam.count:
                return fam
        if d is not None:
            return d
        return None


def _rename_operand(op, scope):
    if isinstance(op, A.Reg):
        n = scope.get(op.name)
        return A.Reg(n, op.pos) if n else op
    if isinstance(op, A.Address):
        n = scope.get(op.base) if op.base else None
        extra = [_rename_operand(e, scope) for e in op.extra]     # tex/surface coordinates
        if not n and all(a is b for a, b in zip(extra, op.extra)):
            return op
        return A.Address(n or op.base, op.offset, op.pos, extra=extra)
    if isinstance(op, A.SymbolExpr):
        n = scope.get(op.name)
        return A.SymbolExpr(n, op.offset, op.pos) if n else op
    if isinstance(op, A.Vector):
        return A.Vector([_rename_operand(e, scope) for e in op.elems], op.pos)
    if isinstance(op, A.Negated):
        return A.Negated(_rename_operand(op.operand, scope), op.pos)
    if isinstance(op, A.PredPair):
        return A.PredPair(_rename_operand(op.first, scope), _rename_operand(op.second, scope), op.pos)
    if isinstance(op, A.ParenList):
        return A.ParenList([_rename_operand(e, scope) for e in op.items], op.pos)
    return op


def _lookup_scoped(name, scope):
    """Resolve a name through the scope map, including `%r<N>` family members."""
    if name in scope:
        return scope[name]
    m = _TRAILING_DIGITS.match(name)
    if m and m.group(1) in scope and scope[m.group(1) + "#family"]:
        return scope[m.group(1)] + m.group(2)
    return None


class _Scope(dict):
    def get(self, name, default=None):  # noqa: D401 - dict protocol
        r = _lookup_scoped(name, self)
        return default if r is None else r


def flatten_function(func: A.Function) -> FlatFunction:
    flat = FlatFunction(func, [])
    counter = [0]

    def walk(stmts, scope, depth):
        for st in stmts:
            if isinstance(st, A.VarDecl):
                d = copy.copy(st)
                if depth > 0:
                    counter[0] += 1
                    new = f"{st.name}${counter[0]}$"
                    scope[st.name] = new
                    scope[st.name + "#family"] = st.count is not None
                    d.name = new
                flat.decls[d.name] = d
            elif isinstance(st, A.Block):
                walk(st.body, _Scope(scope), depth + 1)
            elif isinstance(st, A.Instruction):
                if scope:
                    ops = [_rename_operand(o, scope) for o in st.operands]
                    guard = st.guard
                    if guard and scope.get(guard[0]):
                        guard = (scope.get(guard[0]), guard[1])
                    st = A.Instruction(st.opcode, st.mods, ops, guard, st.pos)
                flat.body.append(st)
            elif isinstance(st, A.Label):
                flat.body.append(st)
            elif isinstance(st, A.BranchTargets):
                flat.branch_targets[st.name] = st
            elif isinstance(st, A.CallPrototype):
                flat.prototypes[st.name] = st
            elif isinstance(st, A.Pragma):
                pass
            else:
                raise PTXSemanticError(f"unexpected statement {type(st).__name__}",
                                       *_pos(st))

    walk(func.body or [], _Scope(), 0)
    return flat


def _pos(node):
    p = getattr(node, "pos", None)
    return (p.line, p.col) if p else (0, 0)
