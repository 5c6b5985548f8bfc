"""Registers a region carries from a lockstep yield (cpu/lockstep.py) or a barrier in a loop that are affine in
%tid.x along each row of the block's threads with a constant slope, as a grid-stride index, a loop counter or a
strength-reduced pointer is (the row part, from %tid.y, %tid.z, the block and the parameters, is anything): a region
that knows it recomputes them from the row's first thread and %tid.x, so its accesses through them are consecutive
vector loads and stores instead of gathers of slot values, and its branches on uniform ones stay branches."""

from __future__ import annotations

from ptx import ast as A
from ptx.passes.liveness import defs_uses

# A register's guess: (slope in %tid.x, whether the rest may differ from row to row); the rest is the same for the
# whole block (parameters, block ids, uniform loop counters) unless it reads %tid.y or %tid.z
ROW_SPECIALS = frozenset(["%tid.y", "%tid.z"])
BLOCK_SPECIALS = frozenset(f"%{r}.{c}" for r in ("ntid", "ctaid", "nctaid") for c in "xyz")
UNIFORM = (0, False)
MAX_CANDIDATES = 8
INT_TYPES = ("i32", "i64")
_TOP = "top"        # no definition evaluated yet (optimistic: a loop's registers before their first round)


def _add(a, b, sign=1):
    if a is None or b is None:
        return None
    if a is _TOP or b is _TOP:
        return _TOP
    return (a[0] + sign * b[0], a[1] or b[1])


def _scale(a, k):
    return a if a is None or a is _TOP else (a[0] * k, a[1])


def _meet(a, b):
    if a is _TOP:
        return b
    if b is _TOP:
        return a
    if a is None or b is None or a[0] != b[0]:
        return None
    return (a[0], a[1] or b[1])


class Slopes:
    """A guess of each register's slope in %tid.x and whether its rest varies by row: an optimistic fixed point over
    its definitions, so that registers updated in a cycle through others (an unrolled loop's pointer,
    `a = b + s; b = a + s`) keep the slope their definitions outside the cycle give them when every step adds a
    row-uniform value. Only a guess: the block function (uniform_check) or the region itself checks each
    candidate's slot values before a region relies on it."""

    def __init__(self, body, is_reg):
        self.is_reg = is_reg
        self.defs = {}
        for st in body:
            if isinstance(st, A.Instruction):
                for r in defs_uses(st, is_reg)[0]:
                    self.defs.setdefault(r, []).append(st)
        self.val = {r: _TOP for r in self.defs}
        for _ in range(64):
            changed = False
            for r, sts in self.defs.items():
                if self.val[r] is None:
                    continue
                v = _TOP
                for st in sts:
                    if st.guard and r in defs_uses(st, is_reg)[1]:
                        v = None        # a conditional update: threads may differ in how often they ran it
                    else:
                        v = _meet(v, self._of_ins(st))
                    if v is None:
                        break
                if v != self.val[r]:
                    self.val[r] = v
                    changed = True
            if not changed:
                break
        else:
            self.val = {r: None for r in self.defs}

    def of_reg(self, name):
        """(slope in %tid.x, rest varies by row) or None."""
        v = self.of(A.Reg(name))
        return None if v is _TOP else v

    def of(self, op):
        if isinstance(op, A.Imm):
            return UNIFORM
        if isinstance(op, A.Reg):
            if op.name == "%tid.x":
                return (1, False)
            if op.name in ROW_SPECIALS:
                return (0, True)
            if op.name in BLOCK_SPECIALS:
                return UNIFORM
            return self.val.get(op.name) if self.is_reg(op.name) else None
        return None

    def _of_ins(self, st):
        ops, op = st.operands, st.opcode
        mods = set(st.mods)
        if op == "ld" and "param" in mods:
            return UNIFORM
        src = [self.of(o) for o in ops[1:]]
        if op in ("mov", "cvta") or (op == "cvt" and not mods & {"f32", "f64", "f16", "rn", "rz", "rm", "rp"}):
            return src[0] if len(src) == 1 else None
        if op == "add" and len(src) == 2:
            return _add(src[0], src[1])
        if op == "sub" and len(src) == 2:
            return _add(src[0], src[1], -1)
        if op in ("mul", "mad") and ("lo" in mods or "wide" in mods) and len(src) >= 2:
            prod = self._product(ops[1], ops[2], src[0], src[1])
            return prod if op == "mul" else _add(prod, src[2]) if len(src) == 3 else None
        if op == "shl" and len(ops) == 3 and isinstance(ops[2], A.Imm) and 0 <= ops[2].value < 32:
            return _scale(src[0], 1 << ops[2].value)
        if src and all(s is _TOP or (s is not None and s[0] == 0) for s in src) and op in (
                "and", "or", "xor", "min", "max", "div", "rem", "shr", "shl", "mul", "neg", "not", "selp", "cvt", "abs"):
            if _TOP in src:
                return _TOP
            return (0, any(s[1] for s in src))
        return None

    @staticmethod
    def _product(a, b, sa, sb):
        if sa is None or sb is None:
            return None
        if isinstance(b, A.Imm):
            return _scale(sa, b.value)
        if isinstance(a, A.Imm):
            return _scale(sb, a.value)
        if sa is _TOP or sb is _TOP:
            return _TOP if (sa is _TOP or sa[0] == 0) and (sb is _TOP or sb[0] == 0) else None
        return (0, sa[1] or sb[1]) if sa[0] == 0 and sb[0] == 0 else None


def candidates(sl: Slopes, live_regs, reg_types, skip) -> list:
    """[(register, LLVM type, (slope, rest varies by row))] of the integer registers in `live_regs` (not in `skip`:
    recomputed or constant anyway) whose slope `sl` knows, in a stable order."""
    out = []
    for name in sorted(live_regs):
        ty = reg_types.get(name)
        if ty not in INT_TYPES or name in skip:
            continue
        s = sl.of_reg(name)
        if s is not None:
            out.append((name, ty, s))
    return out[:MAX_CANDIDATES]


def uniform_check(fn_name: str, cands, slot_offsets) -> str:
    """An IR function: 1 when every thread's slot of each candidate holds its row's first thread's value (the
    block's first thread's, where the rest does not vary by row) plus the slope times the thread's %tid.x, else 0
    (all the block's threads are at the same site: every slot is live)."""
    lines = [f'define internal i32 @"{fn_name}"(ptr %soa, i64 %n64, i32 %bx, i32 %by, i32 %bz, ptr %uni) noinline {{',
             "entry:"]
    for j, (name, ty, _) in enumerate(cands):
        lines += [f"  %o{j} = mul i64 %n64, {slot_offsets[name]}",
                  f"  %b{j} = getelementptr i8, ptr %soa, i64 %o{j}"]
    lines += ["  br label %z", "z:",
              "  %tz = phi i32 [ 0, %entry ], [ %tz.n, %zl ]",
              "  %okz = phi i1 [ true, %entry ], [ %oky.r, %zl ]",
              "  br label %y", "y:",
              "  %ty = phi i32 [ 0, %z ], [ %ty.n, %yl ]",
              "  %oky = phi i1 [ %okz, %z ], [ %okx.r, %yl ]",
              "  %lz = mul i32 %tz, %by", "  %lzy = add i32 %lz, %ty", "  %row = mul i32 %lzy, %bx",
              "  %row64 = zext i32 %row to i64"]
    for j, (name, ty, (_, by_row)) in enumerate(cands):
        first = "%row64" if by_row else "0"
        lines += [f"  %rp{j} = getelementptr {ty}, ptr %b{j}, i64 {first}", f"  %a{j} = load {ty}, ptr %rp{j}"]
    lines += ["  br label %x", "x:",
              "  %tx = phi i32 [ 0, %y ], [ %tx.n, %x ]",
              "  %okx = phi i1 [ %oky, %y ], [ %okx.n, %x ]",
              "  %lin = add i32 %row, %tx", "  %t = zext i32 %lin to i64"]
    acc = "%okx"
    for j, (name, ty, (sx, _)) in enumerate(cands):
        want = f"%a{j}"
        if sx:
            tx = "%tx"
            if ty != "i32":
                lines.append(f"  %e{j} = zext i32 %tx to {ty}")
                tx = f"%e{j}"
            lines += [f"  %m{j} = mul {ty} {tx}, {sx}", f"  %w{j} = add {ty} %a{j}, %m{j}"]
            want = f"%w{j}"
        lines += [f"  %p{j} = getelementptr {ty}, ptr %b{j}, i64 %t",
                  f"  %v{j} = load {ty}, ptr %p{j}",
                  f"  %q{j} = icmp eq {ty} %v{j}, {want}",
                  f"  %k{j} = and i1 {acc}, %q{j}"]
        acc = f"%k{j}"
    lines += [f"  %okx.n = and i1 %okx, {acc}",
              "  %tx.n = add nuw i32 %tx, 1", "  %xc = icmp ult i32 %tx.n, %bx", "  br i1 %xc, label %x, label %yl",
              "yl:", "  %okx.r = phi i1 [ %okx.n, %x ]",
              "  %ty.n = add nuw i32 %ty, 1", "  %yc = icmp ult i32 %ty.n, %by", "  br i1 %yc, label %y, label %zl",
              "zl:", "  %oky.r = phi i1 [ %okx.r, %yl ]",
              "  %tz.n = add nuw i32 %tz, 1", "  %zc = icmp ult i32 %tz.n, %bz", "  br i1 %zc, label %z, label %out",
              "out:", "  %ok = phi i1 [ %oky.r, %zl ]", "  %r = zext i1 %ok to i32", "  ret i32 %r", "}"]
    return "\n".join(lines)


def recompute(f, ty, sx, base) -> str:
    """In a region's thread loop: base (the row's first thread's value) plus the slope times this thread's %tid.x."""
    if not sx:
        return base
    t = "%tid.x"
    if ty != "i32":
        t = f.op(f"zext i32 {t} to {ty}")
    return f.op(f"add {ty} {base}, " + f.op(f"mul {ty} {t}, {sx}"))
