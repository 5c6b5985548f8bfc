"""Registers a lockstep yield (cpu/lockstep.py) carries that are affine in the thread id with constant slopes, as a
grid-stride index or a strength-reduced pointer is: a region that knows it recomputes them from %tid, so its
accesses through them are consecutive vector loads and stores instead of gathers of SoA slot values."""

from __future__ import annotations

from ptx import ast as A
from ptx.passes.liveness import defs_uses

# slopes in (tid.x, tid.y, tid.z); None: not affine, or not known to be
TID = {"%tid.x": (1, 0, 0), "%tid.y": (0, 1, 0), "%tid.z": (0, 0, 1)}
UNIFORM_SPECIALS = frozenset(f"%{r}.{c}" for r in ("ntid", "ctaid", "nctaid") for c in "xyz")
ZERO = (0, 0, 0)
MAX_CANDIDATES = 8
INT_TYPES = ("i32", "i64")


def _add(a, b, sign=1):
    return None if a is None or b is None else tuple(x + sign * y for x, y in zip(a, b))


def _scale(a, k):
    return None if a is None else tuple(x * k for x in a)


class Slopes:
    """A guess of each register's slopes, from its definitions that do not read it (a loop's update of an index,
    `add r, r, step`, keeps them when the step is uniform). Only a guess: the block function checks each
    candidate's slot values against it before a region relies on it (uniform_check)."""

    def __init__(self, body, is_reg):
        self.is_reg = is_reg
        self.defs = {}
        for st in body:
            if isinstance(st, A.Instruction):
                for r in defs_uses(st, is_reg)[0]:
                    self.defs.setdefault(r, []).append(st)
        self.memo = {}

    def of_reg(self, name, depth=0):
        if name in TID:
            return TID[name]
        if name in UNIFORM_SPECIALS:
            return ZERO
        if not self.is_reg(name) or depth > 24:
            return None
        if name in self.memo:
            return self.memo[name]
        self.memo[name] = None          # a cycle through other registers: not known
        got = set()
        for st in self.defs.get(name, ()):
            reads = defs_uses(st, self.is_reg)[1]
            if name in reads:
                if not self._keeps(st, name, depth):
                    got = {None}
                    break
                continue
            got.add(self._of_ins(st, depth))
        s = got.pop() if len(got) == 1 else None
        self.memo[name] = s
        return s

    def _keeps(self, st, name, depth):
        """`add/sub r, r, uniform` (or `add r, uniform, r`)."""
        if st.opcode not in ("add", "sub") or len(st.operands) != 3 or st.guard:
            return False
        a, b = st.operands[1], st.operands[2]
        other = b if isinstance(a, A.Reg) and a.name == name else \
            a if st.opcode == "add" and isinstance(b, A.Reg) and b.name == name else None
        return other is not None and self.of(other, depth + 1) == ZERO

    def of(self, op, depth=0):
        if isinstance(op, A.Imm):
            return ZERO
        if isinstance(op, A.Reg):
            return self.of_reg(op.name, depth + 1)
        return None

    def _of_ins(self, st, depth):
        ops, op = st.operands, st.opcode
        mods = set(st.mods)
        if op == "ld" and "param" in mods:
            return ZERO
        src = [self.of(o, depth) for o in ops[1:]]
        if op in ("mov", "cvta") or (op == "cvt" and not mods & {"f32", "f64", "f16", "rn", "rz", "rm", "rp"}):
            return src[0] if len(src) == 1 else None
        if op == "add" and len(src) == 2:
            return _add(src[0], src[1])
        if op == "sub" and len(src) == 2:
            return _add(src[0], src[1], -1)
        if op in ("mul", "mad") and ("lo" in mods or "wide" in mods):
            prod = self._product(ops[1], ops[2], src[0], src[1])
            return prod if op == "mul" else _add(prod, src[2]) if len(src) == 3 else None
        if op == "shl" and isinstance(ops[2], A.Imm) and 0 <= ops[2].value < 32:
            return _scale(src[0], 1 << ops[2].value)
        if all(s == ZERO for s in src) and op in ("and", "or", "xor", "min", "max", "div", "rem", "shr", "mul",
                                                  "neg", "not", "selp", "cvt"):
            return ZERO
        return None

    @staticmethod
    def _product(a, b, sa, sb):
        if sa == ZERO and sb == ZERO:
            return ZERO
        if isinstance(b, A.Imm) and sa is not None:
            return _scale(sa, b.value)
        if isinstance(a, A.Imm) and sb is not None:
            return _scale(sb, a.value)
        return None


def candidates(sl: Slopes, live_regs, reg_types, skip) -> list:
    """[(register, LLVM type, slopes)] of the integer registers in `live_regs` (not in `skip`: recomputed or
    constant anyway) whose slopes `sl` knows, in a stable order."""
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
    """An IR function: 1 when every thread's slot of each candidate holds its thread 0 value plus the slopes
    times the thread's %tid (its uniform part, stored at uni[8 j]), else 0."""
    lines = [f'define internal i32 @"{fn_name}"(ptr %soa, i64 %n64, i32 %bx, i32 %by, i32 %bz, ptr %uni) noinline {{',
             "entry:"]
    for j, (name, ty, _) in enumerate(cands):
        lines += [f"  %o{j} = mul i64 %n64, {slot_offsets[name]}",
                  f"  %b{j} = getelementptr i8, ptr %soa, i64 %o{j}",
                  f"  %a{j} = load {ty}, ptr %b{j}",
                  f"  %u{j} = getelementptr i8, ptr %uni, i64 {8 * j}",
                  f"  store {ty} %a{j}, ptr %u{j}"]
    lines += ["  br label %z", "z:",
              "  %tz = phi i32 [ 0, %entry ], [ %tz.n, %zl ]",
              "  %okz = phi i1 [ true, %entry ], [ %oky.r, %zl ]",
              "  br label %y", "y:",
              "  %ty = phi i32 [ 0, %z ], [ %ty.n, %yl ]",
              "  %oky = phi i1 [ %okz, %z ], [ %okx.r, %yl ]",
              "  %lz = mul i32 %tz, %by", "  %lzy = add i32 %lz, %ty", "  %row = mul i32 %lzy, %bx",
              "  br label %x", "x:",
              "  %tx = phi i32 [ 0, %y ], [ %tx.n, %x ]",
              "  %okx = phi i1 [ %oky, %y ], [ %okx.n, %x ]",
              "  %lin = add i32 %row, %tx", "  %t = zext i32 %lin to i64"]
    acc = "%okx"
    for j, (name, ty, (sx, sy, sz)) in enumerate(cands):
        ext = ty != "i32"
        parts = []
        for d, s in (("x", sx), ("y", sy), ("z", sz)):
            if s:
                v = f"%t{d}"
                if ext:
                    lines.append(f"  %e{d}{j} = zext i32 %t{d} to i64")
                    v = f"%e{d}{j}"
                lines.append(f"  %m{d}{j} = mul {ty} {v}, {s}")
                parts.append(f"%m{d}{j}")
        want = f"%a{j}"
        for i, p in enumerate(parts):
            lines.append(f"  %w{i}.{j} = add {ty} {want}, {p}")
            want = f"%w{i}.{j}"
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


def recompute(f, ty, slopes, base) -> str:
    """In a region's thread loop: base (the uniform part) plus the slopes times this thread's %tid."""
    v = base
    for d, s in zip("xyz", slopes):
        if not s:
            continue
        t = f"%tid.{d}"
        if ty != "i32":
            t = f.op(f"zext i32 {t} to {ty}")
        m = f.op(f"mul {ty} {t}, {s}")
        v = f.op(f"add {ty} {v}, {m}")
    return v
