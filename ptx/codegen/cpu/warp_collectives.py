"""Warp collectives in region loops: shfl and vote evaluated from the exchange slots their warp's lanes
filled, and the state the general warp scheduler needs when a block falls back to it."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import function_emitter as FE
from ptx.codegen.cpu.uniform import THREAD_CONSTANT_SPECIALS


def warp_region_op(st):
    """shfl and vote: warp collectives a region loop can evaluate from its exchange slots."""
    from ptx.codegen.ops_warp import SHFL_MODES, VOTE_MODES
    if st.opcode == "shfl":
        return any(m in SHFL_MODES for m in st.mods) and len(st.operands) >= 4
    if st.opcode == "vote":
        return any(m in VOTE_MODES for m in st.mods) and len(st.operands) >= 2
    return False


# Exchange slots of a warp collective in the SoA area: the frame header's offsets, one element per
# thread (soa + off * n + t * size); the per-warp ballot of a vote at FH_COUNT (indexed by warp).
X_FIELDS = ((FE.FH_MASK, "i32"), (FE.FH_B, "i32"), (FE.FH_C, "i32"), (FE.FH_PRED_IN, "i32"))
X_A, X_BALLOT = FE.FH_A, FE.FH_COUNT


def warp_inputs(st):
    """{exchange slot offset: operand or None (a constant -1 mask)} of a shfl or vote: what its
    region stores for the next one (and for the fallback)."""
    ops = st.operands
    sync = "sync" in st.mods
    if st.opcode == "shfl":
        return {X_A: ops[1], FE.FH_B: ops[2], FE.FH_C: ops[3],
                FE.FH_MASK: ops[4] if sync and len(ops) > 4 else None}
    return {FE.FH_PRED_IN: ops[1], FE.FH_MASK: ops[2] if sync and len(ops) > 2 else None}


def const_operand(off, op, flat, remat):
    """The 32-bit value of an operand that is the same for every thread (an immediate, or a register
    set once from one), else None: such an input needs no exchange slot (save the shuffled value
    and the vote's predicate, which other threads read from theirs)."""
    if off in (X_A, FE.FH_PRED_IN):
        return None
    if op is None:
        return 0xFFFFFFFF
    if isinstance(op, A.Reg) and op.name in remat:
        st = flat.body[remat[op.name]]
        if st.opcode == "mov" and len(st.operands) == 2:
            op = st.operands[1]
    if isinstance(op, A.Imm):
        return op.value & 0xFFFFFFFF
    return None


def operand_value(em, op, ptype, remat, slot_load):
    """A collective's operand recomputed where it is a constant for the thread (an immediate, a
    rematerialised register), so LLVM sees e.g. a constant shuffle distance; else its exchange slot."""
    if isinstance(op, A.Imm):
        return em.read(op, ptype)
    if isinstance(op, A.Reg) and (op.name in remat or (not em.is_register(op.name)
                                                         and op.name in THREAD_CONSTANT_SPECIALS)):
        return em.read(op, ptype)
    return slot_load()


def warp_result(em, st, remat, hslot, mctx):
    """Evaluates the collective `st` for this thread from the exchange slots its warp's lanes filled,
    as warp_scheduler.c's resolve_group does for a group = the live lanes (all at this collective):
    writes the frame header's result fields, which the instruction's `after` reads."""
    from ptx.codegen.ops_warp import SHFL_MODES, VOTE_MODES
    f = em.f
    ops = st.operands
    lane = f.op("and i32 %lin, 31")
    wb = f.op("sub i32 %lin, " + lane)
    if st.opcode == "shfl":
        mode = next(SHFL_MODES[m] for m in st.mods if m in SHFL_MODES)
        b = operand_value(em, ops[2], "u32", remat, lambda: f.op(f"load i32, ptr {hslot(FE.FH_B, 'i32')}"))
        c = operand_value(em, ops[3], "u32", remat, lambda: f.op(f"load i32, ptr {hslot(FE.FH_C, 'i32')}"))
        bval = f.op(f"and i32 {b}, 31")
        cval = f.op(f"and i32 {c}, 31")
        seg0 = f.op(f"lshr i32 {c}, 8")
        seg = f.op(f"and i32 {seg0}, 31")
        nseg = f.op(f"xor i32 {seg}, -1")
        minl = f.op(f"and i32 {lane}, {seg}")
        maxl = f.op(f"or i32 {minl}, " + f.op(f"and i32 {cval}, {nseg}"))
        if mode == 0:
            j = f.op(f"sub i32 {lane}, {bval}")
            pv = f.op(f"icmp sge i32 {j}, {maxl}")
        elif mode == 1:
            j = f.op(f"add i32 {lane}, {bval}")
            pv = f.op(f"icmp sle i32 {j}, {maxl}")
        elif mode == 2:
            j = f.op(f"xor i32 {lane}, {bval}")
            pv = f.op(f"icmp sle i32 {j}, {maxl}")
        else:
            j = f.op(f"or i32 {minl}, " + f.op(f"and i32 {bval}, {nseg}"))
            pv = f.op(f"icmp sle i32 {j}, {maxl}")
        jj = f.op(f"select i1 {pv}, i32 {j}, i32 {lane}")
        src = f.op(f"add i32 {wb}, {jj}")
        # a source lane that exited (outside the live range) gives the thread its own value
        v1 = f.op(f"icmp sge i32 {src}, %lo")
        v2 = f.op(f"icmp slt i32 {src}, %hi")
        ok = f.op(f"and i1 {v1}, {v2}")
        # the slot its region stored, or a copy of it where this region may store it again (a loop)
        k = em.region_site
        base = f.op(f"mul i64 %n64, {em.x_read_off if k in em.x_self else em.x_slots[k]}")
        rb = f.op(f"getelementptr i8, ptr %soa, i64 {base}")
        if mode in (0, 1):
            # up/down: the source is this thread +- a distance, loop-invariant when b is: two
            # contiguous loads (the read copy has room for +-31 beyond the block) and a select
            # vectorize, where a gather would not
            d = f.op(f"sub i32 0, {bval}") if mode == 0 else bval
            far = f.op(f"getelementptr i32, ptr {rb}, i64 " + f.op(f"sext i32 {d} to i64"))
            far = f.op(f"getelementptr i32, ptr {far}, i64 %t")
            vf = f.op(f"load i32, ptr {far}")
            vo = f.op("load i32, ptr " + f.op(f"getelementptr i32, ptr {rb}, i64 %t"))
            v = f.op("select i1 " + f.op(f"and i1 {ok}, {pv}") + f", i32 {vf}, i32 {vo}")
        else:
            s = f.op(f"select i1 {ok}, i32 {src}, i32 %lin")
            s64 = f.op(f"zext i32 {s} to i64")
            pa = f.op(f"getelementptr i32, ptr {rb}, i64 {s64}")
            v = f.op(f"load i32, ptr {pa}")
        em.store_frame(FE.FH_RESULT, "i64", f.op(f"zext i32 {v} to i64"))
        em.store_frame(FE.FH_PRED_OUT, "i32", f.op(f"zext i1 {pv} to i32"))
        return
    mode = next(VOTE_MODES[m] for m in st.mods if m in VOTE_MODES)
    if "sync" in st.mods and len(ops) > 2:
        mask = operand_value(em, ops[2], "u32", remat,
                              lambda: f.op(f"load i32, ptr {hslot(FE.FH_MASK, 'i32')}"))
    else:
        mask = "-1"
    w = f.op("lshr i32 %lin, 5")
    w64 = f.op(f"zext i32 {w} to i64")
    base = f.op(f"mul i64 %n64, {X_BALLOT}")
    pb = f.op(f"getelementptr i8, ptr %soa, i64 {base}")
    pb = f.op(f"getelementptr i32, ptr {pb}, i64 {w64}")
    ballot = f.op(f"load i32, ptr {pb}")
    # the live lanes of this warp: [lo, hi) within it
    lol = f.op("call i32 @llvm.smax.i32(i32 " + f.op(f"sub i32 %lo, {wb}") + ", i32 0)")
    hil = f.op("call i32 @llvm.smin.i32(i32 " + f.op(f"sub i32 %hi, {wb}") + ", i32 32)")
    g = f.op("sub i64 " + f.op("shl i64 1, " + f.op(f"zext i32 {hil} to i64")) + ", "
             + f.op("shl i64 1, " + f.op(f"zext i32 {lol} to i64")))
    g = f.op(f"trunc i64 {g} to i32")
    members = f.op(f"and i32 {mask}, {g}")
    hits = f.op(f"and i32 {members}, {ballot}")
    mctx.declare("declare i32 @llvm.ctpop.i32(i32)")
    cnt = f.op(f"call i32 @llvm.ctpop.i32(i32 {hits})")
    nm = f.op(f"call i32 @llvm.ctpop.i32(i32 {members})")
    if mode == 3:
        em.store_frame(FE.FH_RESULT, "i64", f.op(f"zext i32 {hits} to i64"))
        return
    allp = f.op(f"icmp eq i32 {cnt}, {nm}")
    nonep = f.op(f"icmp eq i32 {cnt}, 0")
    if mode == 0:
        p = allp
    elif mode == 1:
        p = f.op(f"xor i1 {nonep}, true")
    else:
        p = f.op(f"or i1 {allp}, {nonep}")
    em.store_frame(FE.FH_PRED_OUT, "i32", f.op(f"zext i1 {p} to i32"))


# A vote's per-warp ballot of the live lanes' predicates (exchange slot FH_PRED_IN), for the next
# region to evaluate the vote from; a warp wholly in the live range without bounds checks (LLVM
# vectorizes that loop).
BALLOT_FN = """define internal void @"vb.{name}"(ptr %soa, i64 %n64, ptr %rng) noinline {{
entry:
  %lo = load i32, ptr %rng
  %hip = getelementptr i32, ptr %rng, i64 1
  %hi = load i32, ptr %hip
  %pbo = mul i64 %n64, {pred}
  %pb = getelementptr i8, ptr %soa, i64 %pbo
  %bbo = mul i64 %n64, {out}
  %bb = getelementptr i8, ptr %soa, i64 %bbo
  %w0 = lshr i32 %lo, 5
  %hi31 = add i32 %hi, 31
  %w1 = lshr i32 %hi31, 5
  br label %w
w:
  %wi = phi i32 [ %w0, %entry ], [ %wi.next, %wdone ]
  %wb = shl i32 %wi, 5
  %wb64 = zext i32 %wb to i64
  %wend = add i32 %wb, 32
  %fl = icmp uge i32 %wb, %lo
  %fh = icmp ule i32 %wend, %hi
  %full = and i1 %fl, %fh
  br i1 %full, label %f, label %l
f:
  %fi = phi i64 [ 0, %w ], [ %fi.next, %f ]
  %facc = phi i32 [ 0, %w ], [ %facc.next, %f ]
  %ft = add i64 %wb64, %fi
  %fp = getelementptr i32, ptr %pb, i64 %ft
  %fv = load i32, ptr %fp
  %fnz = icmp ne i32 %fv, 0
  %fbit0 = zext i1 %fnz to i32
  %fi32 = trunc i64 %fi to i32
  %fbit = shl i32 %fbit0, %fi32
  %facc.next = or i32 %facc, %fbit
  %fi.next = add nuw nsw i64 %fi, 1
  %fm = icmp ult i64 %fi.next, 32
  br i1 %fm, label %f, label %wdone
l:
  %li = phi i32 [ 0, %w ], [ %li.next, %l ]
  %acc = phi i32 [ 0, %w ], [ %acc.next, %l ]
  %t = add i32 %wb, %li
  %in1 = icmp uge i32 %t, %lo
  %in2 = icmp ult i32 %t, %hi
  %in = and i1 %in1, %in2
  %ti = select i1 %in, i32 %t, i32 %lo
  %ti64 = zext i32 %ti to i64
  %pp = getelementptr i32, ptr %pb, i64 %ti64
  %pv = load i32, ptr %pp
  %pnz = icmp ne i32 %pv, 0
  %on = and i1 %in, %pnz
  %bit0 = zext i1 %on to i32
  %bit = shl i32 %bit0, %li
  %acc.next = or i32 %acc, %bit
  %li.next = add nuw i32 %li, 1
  %lm = icmp ult i32 %li.next, 32
  br i1 %lm, label %l, label %wdone
wdone:
  %ballot = phi i32 [ %acc.next, %l ], [ %facc.next, %f ]
  %wi64 = zext i32 %wi to i64
  %bp = getelementptr i32, ptr %bb, i64 %wi64
  store i32 %ballot, ptr %bp
  %wi.next = add nuw i32 %wi, 1
  %wm = icmp ult i32 %wi.next, %w1
  br i1 %wm, label %w, label %out
out:
  ret void
}}"""


def warp_convert_state(func, flat, sync_em, remat):
    """The convert loop's per-thread header for the general warp scheduler: exited threads done,
    threads at a barrier waiting there, threads at a collective waiting there with its inputs
    (from the exchange slots), as the thread function's suspension would have left them."""
    from ptx.codegen.ops_warp import K_SHFL, K_VOTE, SHFL_MODES, VOTE_MODES
    state, kind, mode = [1], [0], [0]      # site 0: exited (DONE)
    fields = (X_A,) + tuple(off for off, _ in X_FIELDS)
    consts = {off: [0] for off in fields}  # per site: the input's value, or None: in its slot
    for k, status, cont, after, idx in sync_em.sync_sites:
        st = flat.body[idx]
        inputs = warp_inputs(st) if status == FE.ST_WARP else {}
        for off in fields:
            consts[off].append(const_operand(off, inputs[off], flat, remat) if off in inputs else 0)
        if status == FE.ST_WARP:
            state.append(3)                  # AT_WARP
            if st.opcode == "shfl":
                kind.append(K_SHFL)
                mode.append(next(SHFL_MODES[m] for m in st.mods if m in SHFL_MODES))
            else:
                kind.append(K_VOTE)
                mode.append(next(VOTE_MODES[m] for m in st.mods if m in VOTE_MODES))
        else:
            state.append(2)                  # AT_BAR
            kind.append(st.operands[0].value)
            mode.append(0)
    n = len(state)
    aoff = [0] + [sync_em.x_slots.get(site[0], 0) for site in sync_em.sync_sites]
    named = [("s", state), ("k", kind), ("m", mode), ("a", aoff)]
    for off in fields:
        named.append((f"c{off}", [0 if v is None else v for v in consts[off]]))
        named.append((f"f{off}", [int(v is None) for v in consts[off]]))
    tables = [f'@"cv{t}.{func.name}" = internal constant [{n} x i32] [' +
              ", ".join(f"i32 {v}" for v in vals) + "]" for t, vals in named]
    lines = ["  %site64 = zext i32 %site to i64"]
    for t, off in (("s", 4), ("k", FE.FH_KIND), ("m", FE.FH_MODE)):
        lines += [f"  %tp.{t} = getelementptr [{n} x i32], ptr @\"cv{t}.{func.name}\", i64 0, i64 %site64",
                  f"  %tv.{t} = load i32, ptr %tp.{t}",
                  f"  %fp.{t} = getelementptr i8, ptr %fr, i64 {off}",
                  f"  store i32 %tv.{t}, ptr %fp.{t}"]
    lines += [f"  %fp.site = getelementptr i8, ptr %fr, i64 {FE.FH_SITE}", "  store i32 %site, ptr %fp.site",
              f"  %fp.cnt = getelementptr i8, ptr %fr, i64 {FE.FH_COUNT}", "  store i32 0, ptr %fp.cnt"]
    lines += [f"  %tp.a = getelementptr [{n} x i32], ptr @\"cva.{func.name}\", i64 0, i64 %site64",
              "  %tv.a = load i32, ptr %tp.a", "  %tv.a64 = zext i32 %tv.a to i64"]
    for off, ty in ((X_A, "i32"),) + X_FIELDS:
        lines += [f"  %xo.{off} = mul i64 %n64, {'%tv.a64' if off == X_A else off}",
                  f"  %xb.{off} = getelementptr i8, ptr %soa, i64 %xo.{off}",
                  f"  %xp.{off} = getelementptr i32, ptr %xb.{off}, i64 %t",
                  f"  %xs.{off} = load i32, ptr %xp.{off}"]
        for t in (f"c{off}", f"f{off}"):
            lines += [f"  %tp.{t} = getelementptr [{n} x i32], ptr @\"cv{t}.{func.name}\", i64 0, i64 %site64",
                      f"  %tv.{t} = load i32, ptr %tp.{t}"]
        lines += [f"  %fl.{off} = icmp ne i32 %tv.f{off}, 0",
                  f"  %xv.{off} = select i1 %fl.{off}, i32 %xs.{off}, i32 %tv.c{off}",
                  f"  %xd.{off} = getelementptr i8, ptr %fr, i64 {off}"]
        if off == X_A:
            lines += [f"  %xw.{off} = zext i32 %xv.{off} to i64", f"  store i64 %xw.{off}, ptr %xd.{off}"]
        else:
            lines.append(f"  store i32 %xv.{off}, ptr %xd.{off}")
    return "\n".join(lines), tables
