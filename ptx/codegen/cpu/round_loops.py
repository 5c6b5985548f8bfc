"""Rounds of a lockstep loop inside one region call: where every thread that stays in the loop provably takes the
same path through it, its affine registers stay affine without a check, so the region keeps them as one scalar for
the block from round to round instead of storing and verifying each thread's copy (issue 14)."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen.cpu import affine
from ptx.codegen import ptxtypes as T
from ptx.passes.liveness import defs_uses

# pure operations: the same inputs give every thread the same result
_PURE = frozenset("""add sub mul mad mul24 mad24 div rem abs neg min max and or xor not cnot shl shr setp selp set mov
cvt cvta fma sqrt rcp rsqrt ex2 lg2 sin cos tanh copysign bfe bfi brev popc clz prmt sad lop3 shf testp slct""".split())
_BLOCK_SPECIALS = frozenset(f"%{r}.{c}" for r in ("ntid", "ctaid", "nctaid") for c in "xyz")
ENABLED = True           # tests compare with the round-at-a-time code
_INT_MODS = frozenset(f"{s}{w}" for s in "sub" for w in (32, 64))


def cycle(succ, reach, idx) -> set:
    """The statements of `reach` (a region from sync site statement idx) on a path back to idx."""
    preds = {}
    for i in reach:
        if i == idx:
            continue        # a region ends at its barrier
        for j in succ[i]:
            if j in reach:
                preds.setdefault(j, []).append(i)
    out, stack = set(), [idx]
    while stack:
        i = stack.pop()
        if i in out:
            continue
        out.add(i)
        stack.extend(preds.get(i, ()))
    return out if len(out) > 1 else set()


class _Slopes:
    """Each register's exact slope in %tid.x over the threads that stay in the loop (0: the same for them all),
    or None: an optimistic fixed point over its definitions (in the loop, and outside it for those the region
    recomputes) and the value it enters the round with."""

    def __init__(self, body, cyc, is_reg, entering, remat, approx=False, rows=False):
        # approx: widening and sign- or zero-extending conversions keep the slope (exact unless the narrow value
        # wraps), for the lane-0 addresses of prefetch sites, never for a proof. rows: %tid.y and %tid.z have slope
        # 0 (a value the same along each row; barrier_loop_proof tracks which vary by row)
        self.is_reg, self.approx, self.rows = is_reg, approx, rows
        defs = {r: [] for r in entering}
        for i in sorted(cyc):
            st = body[i]
            if isinstance(st, A.Instruction):
                for r in defs_uses(st, is_reg)[0]:
                    defs.setdefault(r, []).append(st)
        for r, i in remat.items():
            if body[i] not in defs.setdefault(r, []):
                defs[r].append(body[i])
        self.val = {r: "top" for r in defs}
        for _ in range(100):
            changed = False
            for r, sts in defs.items():
                v = entering.get(r, "top")
                for st in sts:
                    if v is None:
                        break
                    v = _meet(v, self._of_ins(st))
                if v != self.val[r]:
                    self.val[r] = v
                    changed = True
            if not changed:
                break
        else:
            self.val = dict.fromkeys(defs)

    def of(self, op):
        if isinstance(op, A.Imm):
            return 0
        if isinstance(op, (A.Reg, A.SymbolExpr)):
            name = op.name
            if self.is_reg(name):
                return self.val.get(name)
            if name == "%tid.x":
                return 1
            if name in _BLOCK_SPECIALS or not name.startswith("%") or self.rows and name in affine.ROW_SPECIALS:
                return 0        # block-wide values and the addresses of variables
        return None

    def _of_ins(self, st):
        if "cc" in st.mods or st.opcode in ("addc", "subc", "madc"):
            return None
        if st.guard is not None and self.of(A.Reg(st.guard[0])) != 0:
            return None         # threads may differ in whether it ran
        if st.opcode == "ld" and "param" in st.mods:
            return 0
        if st.opcode not in _PURE:
            return None
        ops = st.operands[1:]
        if any(not isinstance(o, (A.Reg, A.Imm, A.SymbolExpr, A.FloatImm)) for o in ops):
            return None
        src = [self.of(o) for o in ops]
        if any(s is None for s in src):
            return None
        if "top" in src:
            return "top"
        if not any(src):
            return 0
        # a varying operand: exact only for wrap-around integer arithmetic of one width, on registers (emit_shadow)
        op, mods = st.opcode, set(st.mods)
        if not (mods & _INT_MODS) or mods & {"sat", "hi"} or "wide" in mods and not self.approx \
                or not isinstance(st.operands[0], A.Reg):
            return None
        if not all(isinstance(o, A.Imm) or (isinstance(o, A.Reg) and (self.is_reg(o.name) or o.name == "%tid.x"))
                   for o in ops):
            return None
        width = 64 if any(m.endswith("64") for m in mods) else 32
        if op == "mov" and len(src) == 1:
            return src[0]
        if self.approx and len(src) == 1 and (op == "cvt" and len(st.mods) == 2 or
                                              op == "cvta" and st.mods[-2:-1] == ("global",)):
            return src[0]
        if op == "add" and len(src) == 2:
            return src[0] + src[1]
        if op == "sub" and len(src) == 2:
            return src[0] - src[1]
        if op == "shl" and len(src) == 2 and isinstance(ops[1], A.Imm) and 0 <= ops[1].value < width:
            return src[0] << ops[1].value
        if op in ("mul", "mad") and ("lo" in mods or "wide" in mods) and len(src) >= 2:
            if isinstance(ops[1], A.Imm):
                prod = src[0] * ops[1].value
            elif isinstance(ops[0], A.Imm):
                prod = src[1] * ops[0].value
            elif not src[0] and not src[1]:
                prod = 0
            else:
                return None
            return prod if op == "mul" else prod + src[2]
        if op == "selp" and len(src) == 3 and isinstance(ops[2], A.Reg) and src[2] == 0 and src[0] == src[1]:
            return src[0]
        return None


def _meet(a, b):
    if a == "top":
        return b
    if b == "top":
        return a
    return a if a == b else None


class Plan:
    """A proven loop: `cyc`, its statements; `slopes`, each register's exact slope (cpu/round_loops._Slopes);
    `lane0`, the same with widening conversions (approx); `shadows`, {register: (type, alloca)} of those with a
    nonzero slope, whose lane-0 value (its value less slope x %tid.x) the region tracks beside it (emit_shadow), so
    that the base the next round starts from is a value LLVM sees the same for every thread (it would not see
    (b + s*t + u) - s*t as b + u through the chain of adds); `sites`, [(alloca, slope)] of the global loads whose
    lane-0 address each round records, for the prefetches of the next (round_blocks)."""

    def __init__(self, cyc, slopes, lane0):
        self.cyc, self.slopes, self.lane0, self.shadows, self.sites = cyc, slopes, lane0, {}, []
        self.seen = set()


def plan(body, succ, reach, idx, cands, live_k, remat, is_reg):
    """A Plan when the lockstep loop through sync site statement idx keeps each of the block-wide candidates `cands`
    [(register, type, (slope, by row))] exactly affine with its slope for every thread that stays in it, else None:
    its branches between two statements of the loop are uniform (a branch on a varying predicate may only leave it),
    and each candidate's definitions in it add uniform values or other registers' exact multiples of %tid.x.
    live_k: the registers live at the site (those that are not candidates enter varying)."""
    cyc = cycle(succ, reach, idx)
    if not cyc:
        return None
    slope = {name: sx for name, _, (sx, by_row) in cands if not by_row}
    # what a region recomputes (remat) enters as its definition computes it, the rest as its slot holds it
    entering = {r: slope.get(r) for r in live_k if is_reg(r) and r not in remat}
    sl = _Slopes(body, cyc, is_reg, entering, remat)
    for i in cyc:
        st = body[i]
        if not isinstance(st, A.Instruction) or st.guard is None:
            continue
        if st.opcode == "bra" and all(j in cyc for j in succ[i]) and sl.of(A.Reg(st.guard[0])) != 0:
            return None
    if not all(sl.val.get(name, sx) == sx for name, sx in slope.items()):
        return None
    return Plan(cyc, sl, _Slopes(body, cyc, is_reg, entering, remat, approx=True))


def _loop_reach(body, succ, idx) -> set:
    """The statements a thread can run from sync site statement idx before it comes back to it, through any other
    sync point on the way."""
    seen, stack = set(), list(succ[idx])
    while stack:
        i = stack.pop()
        if i in seen or i == idx or i >= len(body):
            continue
        seen.add(i)
        stack.extend(succ[i])
    return seen | {idx}


def _row_varying(body, stmts, is_reg, rows) -> set:
    """The registers the statements `stmts` may make differ between the block's rows: those that read %tid.y,
    %tid.z, a register of `rows` or one of these, or run under a predicate that does."""
    out = set(rows)
    ins = [body[i] for i in sorted(stmts) if isinstance(body[i], A.Instruction)]
    changed = True
    while changed:
        changed = False
        for st in ins:
            defs, uses = defs_uses(st, is_reg)
            if defs - out and (uses & out or any(isinstance(o, A.Reg) and o.name in affine.ROW_SPECIALS
                                                  for o in st.operands)):
                out |= defs
                changed = True
    return out


def barrier_loop_proof(body, succ, idx, cands, live_k, remat, is_reg) -> bool:
    """Whether every way from barrier statement idx back to it (a loop with barriers, through every region on the
    way) keeps each candidate [(register, type, (slope, by row))] affine in %tid.x with its slope: its branches
    between two statements of the loop are the same for every thread of the block, and each candidate's definitions
    add values the same for every thread (a by-row one's: for every thread of a row) or other registers' exact
    multiples of %tid.x. Then, once the block's check found them affine, they stay so while its threads go round
    the loop together, and the check need not run again (region_kernel's dispatch)."""
    cyc = cycle(succ, _loop_reach(body, succ, idx), idx)
    if not cyc:
        return False
    slope = {name: sx for name, _, (sx, _) in cands}
    by_row = {name for name, _, (_, r) in cands if r}
    entering = {r: slope.get(r) for r in live_k if is_reg(r) and r not in remat}
    sl = _Slopes(body, cyc, is_reg, entering, remat, rows=True)
    varying = _row_varying(body, cyc | set(remat.values()), is_reg, by_row)
    for i in cyc:
        st = body[i]
        if isinstance(st, A.Instruction) and st.opcode == "bra" and st.guard is not None \
                and all(j in cyc for j in succ[i]):
            if sl.of(A.Reg(st.guard[0])) != 0 or st.guard[0] in varying:
                return False
    return all(sl.val.get(name, sx) == sx and (name in by_row or name not in varying) for name, sx in slope.items())


def shadowed(plan, body, cands, is_reg) -> list:
    """The registers with a nonzero slope that the loop defines or that enter it (`cands`): those make_shadows
    gives a shadow."""
    names = set(cands)
    for i in plan.cyc:
        if isinstance(body[i], A.Instruction):
            names |= defs_uses(body[i], is_reg)[0]
    return [name for name in sorted(names) if plan.lane0.of(A.Reg(name))]


def make_shadows(em, plan, body, cands):
    """The shadows of `shadowed` registers, made before the body is emitted: an instruction that updates its own
    operand (`add r, r, s`) reads the old shadow."""
    for name in shadowed(plan, body, cands, em.is_register):
        ty = em.reg(name)[0]
        plan.shadows[name] = (ty, em.f.alloca(ty))


def shadow_of(plan, name):
    return plan.shadows[name][1]


def lane0_value(em, plan, op, ty):
    """Operand op's lane-0 value as LLVM type ty (its own width)."""
    f = em.f
    if isinstance(op, A.Imm):
        return str(op.value)
    if op.name == "%tid.x":
        return "0"
    if op.name in plan.shadows:
        return f.op(f"load {ty}, ptr {plan.shadows[op.name][1]}")
    v = f.op(f"load {ty}, ptr {em.regs[op.name][1]}")
    s = plan.lane0.of(op)
    if not s:
        return v
    # defined outside the loop (a remat register, the same all along): its value less its multiple of %tid.x
    return f.op(f"sub {ty} {v}, {affine.recompute(f, ty, s, '0')}")


def _extend(f, v, src_ty, dst_ty, signed):
    if src_ty == dst_ty:
        return v
    bits = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
    if bits[src_ty] > bits[dst_ty]:
        return f.op(f"trunc {src_ty} {v} to {dst_ty}")
    return f.op(f"{'sext' if signed else 'zext'} {src_ty} {v} to {dst_ty}")


def emit_shadow(em, st, plan):
    """After statement st of the loop: the lane-0 value of the register it defines, where that has a slope."""
    if not isinstance(st, A.Instruction) or not st.operands or not isinstance(st.operands[0], A.Reg):
        return
    name = st.operands[0].name
    if name not in plan.shadows:
        return
    f = em.f
    ty = plan.shadows[name][0]
    ops, op, mods = st.operands[1:], st.opcode, st.mods

    def sh(o, t=ty):
        return lane0_value(em, plan, o, t)

    if op in ("mov", "cvta"):
        v = sh(ops[0])
    elif op == "cvt":
        src = T.llvm_type(mods[1])
        v = _extend(f, sh(ops[0], src), src, ty, mods[1].startswith("s"))
    elif op in ("add", "sub"):
        v = f.op(f"{op} {ty} {sh(ops[0])}, {sh(ops[1])}")
    elif op == "shl":
        v = f.op(f"shl {ty} {sh(ops[0])}, {ops[1].value}")
    elif op in ("mul", "mad") and "wide" in mods:
        src = T.llvm_type(mods[-1])
        signed = mods[-1].startswith("s")
        a, b = (_extend(f, sh(o, src), src, ty, signed) for o in ops[:2])
        v = f.op(f"mul {ty} {a}, {b}")
        if op == "mad":
            v = f.op(f"add {ty} {v}, {sh(ops[2])}")
    elif op in ("mul", "mad"):
        v = f.op(f"mul {ty} {sh(ops[0])}, {sh(ops[1])}")
        if op == "mad":
            v = f.op(f"add {ty} {v}, {sh(ops[2])}")
    elif op == "selp":
        v = f.op(f"select i1 {f.op(f'load i1, ptr {em.regs[ops[2].name][1]}')}, {ty} {sh(ops[0])}, {ty} {sh(ops[1])}")
    else:
        raise AssertionError(f"no lane-0 value for {op}")
    ptr = shadow_of(plan, name)
    if st.guard is not None:
        g = f.op(f"load i1, ptr {em.regs[st.guard[0]][1]}")
        if st.guard[1]:
            g = f.op(f"xor i1 {g}, true")
        v = f.op(f"select i1 {g}, {ty} {v}, {ty} " + f.op(f"load {ty}, ptr {ptr}"))
    f.emit(f"store {ty} {v}, ptr {ptr}")


MAX_SITES = 8
PREFETCH = True             # tests and benchmarks compare with none
MAX_PREFETCH_BYTES = 4096   # a round's lines of one site


def note_load(em, st, plan):
    """After a global load of the loop through a register with a lane-0 value (or the same for every lane) and a
    slope of at most 16 bytes: records its lane-0 address for this round's prefetches of the next."""
    if not (PREFETCH and isinstance(st, A.Instruction) and st.opcode == "ld" and "global" in st.mods and len(st.operands) == 2
            and isinstance(st.operands[1], A.Address) and st.operands[1].base):
        return
    addr = st.operands[1]
    s = plan.lane0.of(A.Reg(addr.base))
    if not em.is_register(addr.base) or s is None or s == "top" or not 0 <= s <= 16:
        return
    key = (addr.base, addr.offset // 64)
    if key in plan.seen or len(plan.sites) >= MAX_SITES or em.regs.get(addr.base, ("",))[0] != "i64":
        return
    plan.seen.add(key)
    a = lane0_value(em, plan, A.Reg(addr.base), "i64")
    if addr.offset:
        a = em.f.op(f"add i64 {a}, {addr.offset}")
    ptr = em.f.alloca("i64")
    em.f.emit(f"store i64 {a}, ptr {ptr}")
    plan.sites.append((ptr, s))


def prefetch_lines(plan, membase, bx):
    """The round block's lines after its phis: with the lane-0 address each site had in the last two rounds
    (the last in its alloca), the lines of the round after this one (a grid-stride loop's next 1 KiB piece, 64 KiB
    on; a k loop's next rows of B), so that they arrive while this round runs. -> (phis, lines), the lines
    ending in the label the thread loops start from."""
    if not plan.sites:
        return [], ["  br label %round.body", "round.body:"]
    phis = ["  %pfv = phi i1 [ false, %entry ], [ true, %round.next ]"]
    lines = [f"  %pfc.{n} = load i64, ptr {ptr}" for n, (ptr, _) in enumerate(plan.sites)]
    phis += [f"  %pfp.{n} = phi i64 [ 0, %entry ], [ %pfc.{n}, %round.next ]" for n in range(len(plan.sites))]
    lines.append("  br i1 %pfv, label %pf.0, label %round.body")
    for n, (ptr, s) in enumerate(plan.sites):
        nxt = f"pf.{n + 1}" if n + 1 < len(plan.sites) else "round.body"
        ext = "1" if not s else f"%pfe.{n}"
        lines += [f"pf.{n}:", f"  %pfd.{n} = sub i64 %pfc.{n}, %pfp.{n}", f"  %pfd2.{n} = shl i64 %pfd.{n}, 1",
                  f"  %pft.{n} = add i64 %pfc.{n}, %pfd2.{n}",
                  f"  %pfb.{n} = getelementptr i8, ptr {membase}, i64 %pft.{n}"]
        if s:
            lines += [f"  %pfx.{n} = zext i32 {bx} to i64", f"  %pfy.{n} = mul i64 %pfx.{n}, {s}",
                      f"  {ext} = call i64 @llvm.umin.i64(i64 %pfy.{n}, i64 {MAX_PREFETCH_BYTES})"]
        lines += [f"  br label %pfl.{n}", f"pfl.{n}:",
                  f"  %pfj.{n} = phi i64 [ 0, %pf.{n} ], [ %pfk.{n}, %pfl.{n} ]",
                  f"  %pfa.{n} = getelementptr i8, ptr %pfb.{n}, i64 %pfj.{n}",
                  f"  call void @llvm.prefetch.p0(ptr %pfa.{n}, i32 0, i32 3, i32 1)",
                  f"  %pfk.{n} = add i64 %pfj.{n}, 64", f"  %pfm.{n} = icmp ult i64 %pfk.{n}, {ext}",
                  f"  br i1 %pfm.{n}, label %pfl.{n}, label %{nxt}"]
    lines.append("round.body:")
    return phis, lines


# rounds a block runs before ptx_rt_rotate may hand the worker to the next block of an interleaved launch (a power
# of two): each call costs about as much as a round of a small loop body in cache
ROTATE_ROUNDS = 4


def round_blocks(em, k, uniform, stale, bx, reg_off, plan):
    """A rounds region's first blocks and last lines: the next round starts from the bases the
    threads that stay agreed on (%unC.r), after the prefetches of the one after it; when the rounds end, the threads
    still at the yield get their slots of the block-wide candidates the round wrote (`stale`: not stored as it
    went), from the same bases."""
    head = ["round:", "  %rot = phi i32 [ 0, %entry ], [ %rot.n, %round.next ]"]
    for c, (name, ty, (_, by_row)) in enumerate(uniform):
        if not by_row:
            head.append(f"  %rb.{c} = phi {ty} [ %rb0.{c}, %entry ], [ %un{c}.r, %round.next ]")
    if plan.sites:
        em.m.declare("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)")
        em.m.declare("declare i64 @llvm.umin.i64(i64, i64)")
    phis, lines = prefetch_lines(plan, em.mem_base() if plan.sites else None, bx)
    head += phis + lines + ["  store i32 1, ptr %uflp", "  br label %tz.head"]
    # between rounds the worker may run its other blocks' rounds (ptx_rt_rotate: interleaved launches)
    em.m.declare("declare void @ptx_rt_rotate(ptr)")
    em.m.rotates = True
    tail = ["  %rd.go = icmp ne i32 %uflag, 0", "  br i1 %rd.go, label %round.cnt, label %mat.loop",
            "round.cnt:", "  %rot.n = add i32 %rot, 1", f"  %rot.m = and i32 %rot.n, {ROTATE_ROUNDS - 1}",
            "  %rot.z = icmp eq i32 %rot.m, 0", "  br i1 %rot.z, label %round.rot, label %round.next",
            "round.rot:", "  call void @ptx_rt_rotate(ptr %W)", "  br label %round.next",
            "round.next:", "  br label %round",
            "mat.loop:", "  %mt = phi i64 [ 0, %agree ], [ %mt.n, %mat.next ]",
            "  %ms.p = getelementptr i32, ptr %soa, i64 %mt", "  %ms = load i32, ptr %ms.p",
            f"  %ms.k = icmp eq i32 %ms, {k}", "  br i1 %ms.k, label %mat.st, label %mat.next",
            "mat.st:", "  %mt32 = trunc i64 %mt to i32", f"  %mtx = urem i32 %mt32, {bx}"]
    for c, (name, ty, (sx, _)) in enumerate(uniform):
        if name not in stale:
            continue
        tx = "%mtx" if ty == "i32" else f"%mtx.{c}"
        if ty != "i32":
            tail.append(f"  {tx} = zext i32 %mtx to {ty}")
        tail += [f"  %mm.{c} = mul {ty} {tx}, {sx}", f"  %mv.{c} = add {ty} %un{c}.r, %mm.{c}",
                 f"  %mo.{c} = mul i64 %n64, {reg_off[name]}", f"  %mb.{c} = getelementptr i8, ptr %soa, i64 %mo.{c}",
                 f"  %mp.{c} = getelementptr {ty}, ptr %mb.{c}, i64 %mt", f"  store {ty} %mv.{c}, ptr %mp.{c}"]
    tail += ["  br label %mat.next", "mat.next:", "  %mt.n = add nuw i64 %mt, 1", "  %mt.c = icmp ult i64 %mt.n, %n64",
             "  br i1 %mt.c, label %mat.loop, label %mat.out", "mat.out:", "  ret i32 %res"]
    return head, tail
