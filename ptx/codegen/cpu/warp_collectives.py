"""Warp collectives in region loops: shfl, vote, redux.sync, match.sync and activemask evaluated from the
exchange slots their warp's lanes filled, and the state the general warp scheduler needs when a block falls
back to it."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import function_emitter as FE
from ptx.codegen import ptxtypes as T
from ptx.codegen.cpu.uniform import THREAD_CONSTANT_SPECIALS


def warp_region_op(st):
    """The warp collectives a region loop can evaluate from its exchange slots: shfl, vote, redux.sync
    (32-bit integer), match.sync and activemask."""
    from ptx.codegen.ops_warp import REDUX_OPS, SHFL_MODES, VOTE_MODES
    if st.opcode == "shfl":
        return any(m in SHFL_MODES for m in st.mods) and len(st.operands) >= 4
    if st.opcode == "vote":
        return any(m in VOTE_MODES for m in st.mods) and len(st.operands) >= 2
    if st.opcode == "redux":
        ts = T.types_in(st.mods)
        return (len(st.operands) >= 3 and bool(ts) and not T.is_float(ts[-1]) and T.bits_of(ts[-1]) == 32
                and any(m in REDUX_OPS for m in st.mods))
    if st.opcode == "match":
        ts = T.types_in(st.mods)
        return len(st.operands) >= 3 and T.bits_of(ts[-1] if ts else "b32") in (32, 64)
    if st.opcode == "activemask":
        return len(st.operands) >= 1
    if warp_barrier(st):
        return True
    return False


def warp_barrier(st):
    """bar.warp.sync (__syncwarp): a split point with no inputs but its mask and no result. A region runs every
    live thread to it before any goes on, which is all a warp barrier asks; where the block's threads do not all
    reach it, they disagree and the general scheduler waits per warp."""
    return st.opcode in ("bar", "barrier") and "warp" in st.mods and len(st.operands) == 1


# Exchange slots of a warp collective in the SoA area: the frame header's offsets, one element per
# thread (soa + off * n + t * size); the per-warp ballot of a vote at FH_COUNT (indexed by warp).
# redux and match: the shared value at X_A (i32, or i64 for match.b64), and the per-thread results
# their helper (exchange_helper) computes at X_RESULT (i32) and X_PRED_OUT (match.all's predicate).
X_FIELDS = ((FE.FH_MASK, "i32"), (FE.FH_B, "i32"), (FE.FH_C, "i32"), (FE.FH_PRED_IN, "i32"))
X_A, X_BALLOT = FE.FH_A, FE.FH_COUNT
X_RESULT, X_PRED_OUT = FE.FH_RESULT, FE.FH_PRED_OUT


def wide_match(st):
    """match.b64: its shared value is 64 bits."""
    ts = T.types_in(st.mods)
    return st.opcode == "match" and T.bits_of(ts[-1] if ts else "b32") == 64


def kind_mode(st):
    """(kind, mode) of a collective as ops_warp's setup leaves them in the frame header."""
    from ptx.codegen.ops_warp import (K_ACTIVEMASK, K_MATCH, K_REDUX, K_SHFL, K_VOTE, K_WARPSYNC, REDUX_OPS,
                                      SHFL_MODES, VOTE_MODES)
    if st.opcode == "shfl":
        return K_SHFL, next(SHFL_MODES[m] for m in st.mods if m in SHFL_MODES)
    if st.opcode == "vote":
        return K_VOTE, next(VOTE_MODES[m] for m in st.mods if m in VOTE_MODES)
    if st.opcode == "redux":
        ts = T.types_in(st.mods)
        return K_REDUX, next(REDUX_OPS[m] for m in st.mods if m in REDUX_OPS) | (256 if T.is_signed(ts[-1]) else 0)
    if st.opcode == "match":
        return K_MATCH, (1 if "all" in st.mods else 0) | (256 if wide_match(st) else 0)
    if warp_barrier(st):
        return K_WARPSYNC, 0
    return K_ACTIVEMASK, 0


def warp_inputs(st):
    """{exchange slot offset: operand or None (a constant -1 mask)} of a collective: what its
    region stores for the next one (and for the fallback)."""
    ops = st.operands
    sync = "sync" in st.mods
    if st.opcode == "shfl":
        return {X_A: ops[1], FE.FH_B: ops[2], FE.FH_C: ops[3],
                FE.FH_MASK: ops[4] if sync and len(ops) > 4 else None}
    if st.opcode in ("redux", "match"):
        return {X_A: ops[1], FE.FH_MASK: ops[2]}
    if st.opcode == "activemask":
        return {FE.FH_MASK: None}
    if warp_barrier(st):
        return {FE.FH_MASK: ops[0]}
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


def live_lanes(f, wb):
    """The live lanes of the warp at thread %lin's warp base `wb`: [lo, hi) within it, as a mask."""
    lol = f.op("call i32 @llvm.smax.i32(i32 " + f.op(f"sub i32 %lo, {wb}") + ", i32 0)")
    hil = f.op("call i32 @llvm.smin.i32(i32 " + f.op(f"sub i32 %hi, {wb}") + ", i32 32)")
    g = f.op("sub i64 " + f.op("shl i64 1, " + f.op(f"zext i32 {hil} to i64")) + ", "
             + f.op("shl i64 1, " + f.op(f"zext i32 {lol} to i64")))
    return f.op(f"trunc i64 {g} to i32")


def warp_result(em, st, remat, hslot, mctx):
    """Evaluates the collective `st` for this thread from the exchange slots its warp's lanes filled,
    as warp_scheduler.c's resolve_group does for a group = the live lanes (all at this collective):
    writes the frame header's result fields, which the instruction's `after` reads."""
    from ptx.codegen.ops_warp import SHFL_MODES, VOTE_MODES
    f = em.f
    ops = st.operands
    if warp_barrier(st):
        return                  # nothing to compute: every live thread got here
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
    if st.opcode in ("redux", "match"):
        # the block function's exchange_helper left this thread's result in its slots
        v = f.op(f"load i32, ptr {hslot(X_RESULT, 'i32')}")
        em.store_frame(FE.FH_RESULT, "i64", f.op(f"zext i32 {v} to i64"))
        if "all" in st.mods:
            em.store_frame(FE.FH_PRED_OUT, "i32", f.op(f"load i32, ptr {hslot(X_PRED_OUT, 'i32')}"))
        return
    if st.opcode == "activemask":
        # the live lanes of this warp: all of them are at this collective
        em.store_frame(FE.FH_RESULT, "i64", f.op(f"zext i32 {live_lanes(f, wb)} to i64"))
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
    g = live_lanes(f, wb)
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


# redux's operations as (LLVM operation on %acc and %v, identity); the result of lanes whose members
# are none is 0 (warp_scheduler.c's resolve_group starts from the first member's value)
REDUX_IR = {
    0: ("add i32 {a}, {v}", "0"), 3: ("and i32 {a}, {v}", "-1"), 4: ("or i32 {a}, {v}", "0"),
    5: ("xor i32 {a}, {v}", "0"),
    1: ("call i32 @llvm.umin.i32(i32 {a}, i32 {v})", "-1"), 2: ("call i32 @llvm.umax.i32(i32 {a}, i32 {v})", "0"),
    257: ("call i32 @llvm.smin.i32(i32 {a}, i32 {v})", "2147483647"),
    258: ("call i32 @llvm.smax.i32(i32 {a}, i32 {v})", "-2147483648"),
}


def _reduce_fn(mode):
    """i32 @"wred.<mode>"(ptr x, i32 m, i32 g): redux over the lanes in m (within the live lanes g) of a
    warp's values x[0..32); a full warp in one contiguous loop (LLVM vectorizes it), else lane by lane."""
    op, ident = REDUX_IR[mode]
    return f"""define internal i32 @"wred.{mode}"(ptr %x, i32 %m, i32 %g) {{
entry:
  %empty = icmp eq i32 %m, 0
  br i1 %empty, label %zero, label %go
zero:
  ret i32 0
go:
  %full = icmp eq i32 %g, -1
  br i1 %full, label %f, label %p
f:
  %fi = phi i32 [ 0, %go ], [ %fi.next, %f ]
  %facc = phi i32 [ {ident}, %go ], [ %facc.next, %f ]
  %fi64 = zext i32 %fi to i64
  %fp = getelementptr i32, ptr %x, i64 %fi64
  %fv = load i32, ptr %fp
  %fm = lshr i32 %m, %fi
  %fb = trunc i32 %fm to i1
  %fs = select i1 %fb, i32 %fv, i32 {ident}
  %facc.next = {op.format(a="%facc", v="%fs")}
  %fi.next = add nuw nsw i32 %fi, 1
  %fc = icmp ult i32 %fi.next, 32
  br i1 %fc, label %f, label %fdone
fdone:
  ret i32 %facc.next
p:
  %pm = phi i32 [ %m, %go ], [ %pm.next, %p ]
  %pacc = phi i32 [ {ident}, %go ], [ %pacc.next, %p ]
  %pk = call i32 @llvm.cttz.i32(i32 %pm, i1 true)
  %pk64 = zext i32 %pk to i64
  %pp = getelementptr i32, ptr %x, i64 %pk64
  %pv = load i32, ptr %pp
  %pacc.next = {op.format(a="%pacc", v="%pv")}
  %pm1 = sub i32 %pm, 1
  %pm.next = and i32 %pm, %pm1
  %pc = icmp ne i32 %pm.next, 0
  br i1 %pc, label %p, label %pdone
pdone:
  ret i32 %pacc.next
}}"""


def _match_fn(ty):
    """i32 @"wmat.<ty>"(ptr x, i32 m, i32 g, ty me): the lanes in m (within the live lanes g) whose
    value in x[0..32) equals `me`."""
    return f"""define internal i32 @"wmat.{ty}"(ptr %x, i32 %m, i32 %g, {ty} %me) {{
entry:
  %empty = icmp eq i32 %m, 0
  br i1 %empty, label %zero, label %go
zero:
  ret i32 0
go:
  %full = icmp eq i32 %g, -1
  br i1 %full, label %f, label %p
f:
  %fi = phi i32 [ 0, %go ], [ %fi.next, %f ]
  %facc = phi i32 [ 0, %go ], [ %facc.next, %f ]
  %fi64 = zext i32 %fi to i64
  %fp = getelementptr {ty}, ptr %x, i64 %fi64
  %fv = load {ty}, ptr %fp
  %feq = icmp eq {ty} %fv, %me
  %fe = zext i1 %feq to i32
  %fbit = shl i32 %fe, %fi
  %facc.next = or i32 %facc, %fbit
  %fi.next = add nuw nsw i32 %fi, 1
  %fc = icmp ult i32 %fi.next, 32
  br i1 %fc, label %f, label %fdone
fdone:
  %fr = and i32 %facc.next, %m
  ret i32 %fr
p:
  %pm = phi i32 [ %m, %go ], [ %pm.next, %p ]
  %pacc = phi i32 [ 0, %go ], [ %pacc.next, %p ]
  %pk = call i32 @llvm.cttz.i32(i32 %pm, i1 true)
  %pk64 = zext i32 %pk to i64
  %pp = getelementptr {ty}, ptr %x, i64 %pk64
  %pv = load {ty}, ptr %pp
  %peq = icmp eq {ty} %pv, %me
  %pm1 = sub i32 %pm, 1
  %pm.next = and i32 %pm, %pm1
  %pbit = xor i32 %pm, %pm.next
  %pin = select i1 %peq, i32 %pbit, i32 0
  %pacc.next = or i32 %pacc, %pin
  %pc = icmp ne i32 %pm.next, 0
  br i1 %pc, label %p, label %pdone
pdone:
  ret i32 %pacc.next
}}"""


def exchange_helper(name, k, st, mask, mctx):
    """redux or match at site k: void @"wx<k>.<name>"(ptr soa, i64 n64, ptr rng), which the block function
    calls before region k: each live thread's result (and match.all's predicate) from its warp's
    exchange slots, as resolve_group computes it for the group of the live lanes: members = the thread's
    membermask & the live lanes (`mask`: the membermask when the same constant for every thread, else
    None: in its slot). Threads of a warp with the same members share one reduction."""
    for fn in ("umin", "umax", "smin", "smax"):
        mctx.declare(f"declare i32 @llvm.{fn}.i32(i32, i32)")
    mctx.declare("declare i32 @llvm.cttz.i32(i32, i1)")
    redux = st.opcode == "redux"
    _, mode = kind_mode(st)
    ety = "i64" if wide_match(st) else "i32"
    if redux:
        mode = mode if mode & 255 in (1, 2) else mode & 255     # signed or not: the same sum and bits
        fn = f"wred.{mode}"
        mctx.add_helper(fn, _reduce_fn(mode))
    else:
        mctx.add_helper(f"wmat.{ety}", _match_fn(ety))
    mask_load = ("  %mp = getelementptr i32, ptr %mb, i64 %t64\n  %mv = load i32, ptr %mp\n"
                 if mask is None else f"  %mv = add i32 0, {mask if mask < 2**31 else mask - 2**32}\n")
    if redux:
        # threads with the same members as the previous one reuse its result
        per_lane = f"""  %same = icmp eq i64 %m64, %pm
  br i1 %same, label %lnext, label %calc
calc:
  %r = call i32 @"{fn}"(ptr %xw, i32 %m, i32 %g)
  br label %lnext
lnext:
  %pm.next = phi i64 [ %pm, %l ], [ %m64, %calc ]
  %pr.next = phi i32 [ %pr, %l ], [ %r, %calc ]
  %rp = getelementptr i32, ptr %rb, i64 %t64
  store i32 %pr.next, ptr %rp
"""
    else:
        all_ = "all" in st.mods
        per_lane = f"""  %mep = getelementptr {ety}, ptr %xb, i64 %t64
  %me = load {ety}, ptr %mep
  %eq = call i32 @"wmat.{ety}"(ptr %xw, i32 %m, i32 %g, {ety} %me)
""" + ("""  %allp = icmp eq i32 %eq, %m
  %res = select i1 %allp, i32 %m, i32 0
  %pz = zext i1 %allp to i32
  %pop = getelementptr i32, ptr %pob, i64 %t64
  store i32 %pz, ptr %pop
""" if all_ else "  %res = or i32 %eq, 0\n") + """  %rp = getelementptr i32, ptr %rb, i64 %t64
  store i32 %res, ptr %rp
  br label %lnext
lnext:
  %pm.next = or i64 %pm, 0
  %pr.next = or i32 %pr, 0
"""
    return f"""define internal void @"wx{k}.{name}"(ptr %soa, i64 %n64, ptr %rng) noinline {{
entry:
  %lo = load i32, ptr %rng
  %hip = getelementptr i32, ptr %rng, i64 1
  %hi = load i32, ptr %hip
  %xo = mul i64 %n64, {X_A}
  %xb = getelementptr i8, ptr %soa, i64 %xo
  %mo = mul i64 %n64, {FE.FH_MASK}
  %mb = getelementptr i8, ptr %soa, i64 %mo
  %ro = mul i64 %n64, {X_RESULT}
  %rb = getelementptr i8, ptr %soa, i64 %ro
  %poo = mul i64 %n64, {X_PRED_OUT}
  %pob = getelementptr i8, ptr %soa, i64 %poo
  %w0 = lshr i32 %lo, 5
  %hi31 = add i32 %hi, 31
  %w1 = lshr i32 %hi31, 5
  %any = icmp ult i32 %lo, %hi
  br i1 %any, label %w, label %out
w:
  %wi = phi i32 [ %w0, %entry ], [ %wi.next, %wdone ]
  %wb = shl i32 %wi, 5
  %lol0 = sub i32 %lo, %wb
  %lol = call i32 @llvm.smax.i32(i32 %lol0, i32 0)
  %hil0 = sub i32 %hi, %wb
  %hil = call i32 @llvm.smin.i32(i32 %hil0, i32 32)
  %hil64 = zext i32 %hil to i64
  %gh = shl i64 1, %hil64
  %lol64 = zext i32 %lol to i64
  %gl = shl i64 1, %lol64
  %g64 = sub i64 %gh, %gl
  %g = trunc i64 %g64 to i32
  %wb64 = zext i32 %wb to i64
  %xw = getelementptr {ety}, ptr %xb, i64 %wb64
  br label %l
l:
  %li = phi i32 [ %lol, %w ], [ %li.next, %lnext ]
  %pm = phi i64 [ -1, %w ], [ %pm.next, %lnext ]
  %pr = phi i32 [ 0, %w ], [ %pr.next, %lnext ]
  %t = add i32 %wb, %li
  %t64 = zext i32 %t to i64
{mask_load}  %m = and i32 %mv, %g
  %m64 = zext i32 %m to i64
{per_lane}  %li.next = add nuw i32 %li, 1
  %lm = icmp slt i32 %li.next, %hil
  br i1 %lm, label %l, label %wdone
wdone:
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
            kd, md = kind_mode(st)
            kind.append(kd)
            mode.append(md)
        else:
            state.append(2)                  # AT_BAR
            kind.append(st.operands[0].value)
            mode.append(0)
    n = len(state)
    # the shared value's slot: a shfl's own, redux's and match's at X_A (wide: i64 elements)
    aoff = [0] + [sync_em.x_slots.get(site[0], X_A if flat.body[site[4]].opcode in ("redux", "match") else 0)
                  for site in sync_em.sync_sites]
    wide = [0] + [int(wide_match(flat.body[site[4]])) for site in sync_em.sync_sites]
    named = [("s", state), ("k", kind), ("m", mode), ("a", aoff), ("w", wide)]
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
              "  %tv.a = load i32, ptr %tp.a", "  %tv.a64 = zext i32 %tv.a to i64",
              f"  %tp.w = getelementptr [{n} x i32], ptr @\"cvw.{func.name}\", i64 0, i64 %site64",
              "  %tv.w = load i32, ptr %tp.w", "  %wide = icmp ne i32 %tv.w, 0"]
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
            # a 64-bit value (match.b64): its high half after the low one, elements of 8 bytes
            lines += [f"  %xw.{off} = zext i32 %xv.{off} to i64",
                      "  %xwt = shl i64 %t, 3", f"  %xwp = getelementptr i8, ptr %xb.{off}, i64 %xwt",
                      "  %xwl = load i32, ptr %xwp", "  %xwhp = getelementptr i8, ptr %xwp, i64 4",
                      "  %xwh = load i32, ptr %xwhp", "  %xwl64 = zext i32 %xwl to i64",
                      "  %xwh64 = zext i32 %xwh to i64", "  %xwh32 = shl i64 %xwh64, 32",
                      "  %xw64 = or i64 %xwh32, %xwl64",
                      f"  %xa.{off} = select i1 %wide, i64 %xw64, i64 %xw.{off}",
                      f"  store i64 %xa.{off}, ptr %xd.{off}"]
        else:
            lines.append(f"  store i32 %xv.{off}, ptr %xd.{off}")
    return "\n".join(lines), tables
