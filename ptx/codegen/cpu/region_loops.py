"""One region as a loop over the block's threads (the mask lowering): the thread loops, what each thread
restores and saves at the region's sync points, and the masked and affine variants of a lockstep yield."""

from __future__ import annotations

import math

from ptx import ast as A
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.codegen.cpu import affine, lean_rounds, lockstep, rmw_queue, round_loops, thread_range
from ptx.passes.sync_points import sync_kind
from ptx.codegen.cpu.block_abi import region_entry, store_undef_regs
from ptx.codegen.cpu.regions import region_exits, region_reach, region_writes
from ptx.codegen.cpu.slot_scopes import SlotScopes
from ptx.codegen.cpu.uniform import remat_chain
from ptx.codegen.cpu.warp_collectives import X_A, const_operand, warp_inputs, warp_result, wide_match
from ptx.codegen.module_context import assemble


TX_LOOP_MD = ", !llvm.loop !8998"


_BASE_OPS = {"mn": "umin", "mx": "umax", "l0": "umin", "l1": "umax", "c": "add"}


def range_loops(f, bx, by, ranged, track=True, xrange=None, extra=(), row_start=(), head="entry"):
    """The thread loops' headers. Ranged (kernels with warp collectives): only the threads of linear
    ids [lo, hi) run (the others exited), and the loops track the live threads' smallest and largest
    id and their count, so that the block can go on with the live threads as one range. xrange: (lo, hi), the
    tid.x interval of the threads that do anything in this region (thread_range.guard); head: the block they
    are entered from. extra: [(name, type, identity, per row, the op that joins two of them)]; returns (the
    accumulators, their types, {block-wide accumulator: (op, identity)})."""
    acc = (["mn", "mx"] + (["l0", "l1", "c"] if ranged else [])) if track else []
    init = {"mn": "-1", "mx": "0", "l0": "-1", "l1": "0", "c": "0"}
    types = {a: "i32" for a in acc}
    # the block-wide ones: each row's loop starts from the identity and its result joins the block's at the row's
    # end (op), so that a row's vectorised loop does not wait for the reduction of the row before it
    combine = {a: (_BASE_OPS[a], init[a]) for a in acc}
    for name, ty, value, per_row, op in extra:      # per row: they start again at each row
        acc.append(name)
        init[name], types[name] = value, ty
        if not per_row:
            combine[name] = (op, value)
    carried = list(combine)
    f.label("tz.head")
    f.emit(f"%tid.z = phi i32 [ 0, %{head} ], [ %tz.next, %tz.latch ]")
    for a in carried:
        f.emit(f"%{a}.z = phi {types[a]} [ {init[a]}, %{head} ], [ %{a}.r, %tz.latch ]")
    f.term("br label %ty.head")
    f.label("ty.head")
    f.emit("%tid.y = phi i32 [ 0, %tz.head ], [ %ty.next, %ty.latch ]")
    for a in carried:
        f.emit(f"%{a}.y = phi {types[a]} [ %{a}.z, %tz.head ], [ %{a}.r, %ty.latch ]")
    f.emit(f"%lz = mul i32 %tid.z, {by}")
    f.emit("%lzy = add i32 %lz, %tid.y")
    f.emit(f"%lzyx = mul i32 %lzy, {bx}")
    f.emit("%row64 = zext i32 %lzyx to i64")
    for line in row_start:
        f.emit(line)
    if ranged:
        # this row's part of [lo, hi)
        f.emit("%xs0 = sub i32 %lo, %lzyx")
        f.emit("%xs1 = call i32 @llvm.smax.i32(i32 %xs0, i32 0)")
        f.emit(f"%xs{'.r' if xrange else ''} = call i32 @llvm.smin.i32(i32 %xs1, i32 {bx})")
        f.emit("%xe0 = sub i32 %hi, %lzyx")
        f.emit("%xe1 = call i32 @llvm.smax.i32(i32 %xe0, i32 0)")
        f.emit(f"%xe{'.r' if xrange else ''} = call i32 @llvm.smin.i32(i32 %xe1, i32 {bx})")
        if xrange:
            lo, hi = (min(v, (1 << 31) - 1) for v in xrange)
            f.emit(f"%xs = call i32 @llvm.smax.i32(i32 %xs.r, i32 {lo})")
            f.emit(f"%xe = call i32 @llvm.smin.i32(i32 %xe.r, i32 {hi})")
        f.emit("%rowne = icmp slt i32 %xs, %xe")
        f.term("br i1 %rowne, label %tx.head, label %ty.latch")
    elif xrange:
        lo, hi = (min(v, (1 << 31) - 1) for v in xrange)
        f.emit(f"%xe = call i32 @llvm.umin.i32(i32 {hi}, i32 {bx})")
        f.emit(f"%rowne = icmp ult i32 {lo}, %xe")
        f.term("br i1 %rowne, label %tx.head, label %ty.latch")
    else:
        f.term("br label %tx.head")
    f.label("tx.head")
    first = "%xs" if ranged else min(xrange[0], (1 << 31) - 1) if xrange else 0
    f.emit(f"%tid.x = phi i32 [ {first}, %ty.head ], [ %tx.next, %tx.latch ]")
    for a in acc:
        f.emit(f"%{a} = phi {types[a]} [ {init[a]}, %ty.head ], [ %{a}.next, %tx.latch ]")
    f.emit("%lin = add i32 %lzyx, %tid.x")
    return acc, types, combine


def slot_ptr(f, off, ty):
    """Thread %t's element of the SoA slot at frame offset `off` (stride %n64 elements)."""
    a = f.op(f"mul i64 %n64, {off}")
    p = f.op(f"getelementptr i8, ptr %soa, i64 {a}")
    return f.op(f"getelementptr {ty}, ptr {p}, i64 %t")


def range_latches(f, mctx, bx, by, bz, acc, ranged, single=None, xrange=None, types=None, before_ret=(),
                  row_end=(), flush=(), combine=None):
    """The loops' latches and the region's result; `single`: its one way out (nothing to track). types: the
    accumulators' types (i32 if not named); the caller emits the `.next` of those range_loops' `extra` added;
    before_ret: lines that read the accumulators' results (`%name.r`) before the region returns `%res`; row_end:
    lines at the end of each row (after the thread loop); flush: blocks that run after the loops (from label
    qf.entry, on to label agree)."""
    types = types or {}
    for fn in ("umin", "umax", "smin", "smax"):
        mctx.declare(f"declare i32 @llvm.{fn}.i32(i32, i32)")
    if "mn" in acc:
        # ranged: an exited thread leaves the range instead of disagreeing
        f.emit(f"%mn.next = call i32 @llvm.umin.i32(i32 %mn, i32 {'%site.k' if ranged else '%site'})")
        f.emit("%mx.next = call i32 @llvm.umax.i32(i32 %mx, i32 %site)")
        if ranged:
            f.emit("%lk = select i1 %live, i32 %lin, i32 -1")
            f.emit("%l0.next = call i32 @llvm.umin.i32(i32 %l0, i32 %lk)")
            f.emit("%lin1 = add i32 %lin, 1")
            f.emit("%lk1 = select i1 %live, i32 %lin1, i32 0")
            f.emit("%l1.next = call i32 @llvm.umax.i32(i32 %l1, i32 %lk1)")
            f.emit("%cinc = zext i1 %live to i32")
            f.emit("%c.next = add i32 %c, %cinc")
    f.emit("%tx.next = add nuw i32 %tid.x, 1")
    f.emit(f"%tx.c = icmp ult i32 %tx.next, {'%xe' if ranged or xrange else bx}")
    # unrolling the thread loops of every region costs compile time for little gain (the y/z
    # loops too: unrolling one copies the whole x loop)
    # (nor interleaved: a 16-thread row would then need 20 for the vector loop, and run scalar)
    mctx.add_helper("region.tx.md", '!8998 = distinct !{!8998, !8999, !8990}\n'
                                    '!8990 = !{!"llvm.loop.interleave.count", i32 1}\n'
                                    '!8999 = !{!"llvm.loop.unroll.disable"}\n'
                                    '!8996 = distinct !{!8996, !8999}\n'
                                    '!8997 = distinct !{!8997, !8999}')
    f.term("br i1 %tx.c, label %tx.head, label %ty.latch" + TX_LOOP_MD)
    f.label("ty.latch")
    combine = combine or {}
    for a in acc:
        ty = types.get(a, "i32")
        row = f"%{a}.rr" if a in combine else f"%{a}.r"
        if ranged:
            skipped = combine[a][1] if a in combine else f"%{a}.y"
            f.emit(f"{row} = phi {ty} [ %{a}.next, %tx.latch ], [ {skipped}, %ty.head ]")
        else:
            f.emit(f"{row} = phi {ty} [ %{a}.next, %tx.latch ]")
    for a, (op, _) in combine.items():
        ty = types.get(a, "i32")
        if op in ("umin", "umax"):
            f.emit(f"%{a}.r = call {ty} @llvm.{op}.{ty}({ty} %{a}.y, {ty} %{a}.rr)")
        else:
            f.emit(f"%{a}.r = {op} {ty} %{a}.y, %{a}.rr")
    for line in row_end:
        f.emit(line)
    f.emit("%ty.next = add nuw i32 %tid.y, 1")
    f.emit(f"%ty.c = icmp ult i32 %ty.next, {by}")
    f.term("br i1 %ty.c, label %ty.head, label %tz.latch, !llvm.loop !8996")
    f.label("tz.latch")
    f.emit("%tz.next = add nuw i32 %tid.z, 1")
    f.emit(f"%tz.c = icmp ult i32 %tz.next, {bz}")
    f.term(f"br i1 %tz.c, label %tz.head, label %{'qf.entry' if flush else 'agree'}, !llvm.loop !8997")
    f.lines.extend(flush)
    f.label("agree")
    if single is not None:
        f.term(f"ret i32 {single}")
        return
    f.emit("%same = icmp eq i32 %mn.r, %mx.r")
    if ranged:
        # go on only if the live threads are one range, all at the same collective or barrier
        f.emit("%span = sub i32 %l1.r, %l0.r")
        f.emit("%dense = icmp eq i32 %span, %c.r")
        f.emit("%ok = and i1 %same, %dense")
        f.emit("%none = icmp eq i32 %c.r, 0")
        f.emit("%res1 = select i1 %ok, i32 %mn.r, i32 -1")
        f.emit("%res = select i1 %none, i32 0, i32 %res1")
        f.emit("store i32 %l0.r, ptr %rng")
        f.emit("%hip.out = getelementptr i32, ptr %rng, i64 1")
        f.emit("store i32 %l1.r, ptr %hip.out")
    else:
        f.emit("%res = select i1 %same, i32 %mn.r, i32 -1")
    for line in before_ret:
        f.emit(line)
    f.term("ret i32 %res")


def _agree_lines(cands, tag):
    """Lines setting %{tag}bad.N (returned): some candidate c of `cands` [(c, type)] whose AND (%unC.r) and OR
    (%uxC.r) of the threads' differences differ, where any thread contributed (identities -1 and 0: none did)."""
    out = [f"%{tag}bad.0 = or i1 false, false"]
    for i, (c, ty) in enumerate(cands):
        out += [f"%{tag}same{c} = icmp eq {ty} %un{c}.r, %ux{c}.r",
                f"%{tag}none{c}.a = icmp eq {ty} %un{c}.r, -1",
                f"%{tag}none{c}.o = icmp eq {ty} %ux{c}.r, 0",
                f"%{tag}none{c} = and i1 %{tag}none{c}.a, %{tag}none{c}.o",
                f"%{tag}ok{c} = or i1 %{tag}same{c}, %{tag}none{c}",
                f"%{tag}bad{c}.n = xor i1 %{tag}ok{c}, true",
                f"%{tag}bad.{i + 1} = or i1 %{tag}bad.{i}, %{tag}bad{c}.n"]
    return out, f"%{tag}bad.{len(cands)}"


def arrivals_blocks(em, masked):
    """The blocks the thread loop's latch is entered from."""
    return [f"save.{j}" for j, *_ in em.sync_sites] + ["thread.exit"] + (["skip"] if masked else [])


def emit_region_fn(func, flat, mctx, sync_em, k, live, succ, remat, warp=False, consts=None, soft=False,
                    masked=False, uniform=None):
    """Region k (0: the kernel's start, else: after sync site k) as one loop over the block's
    threads; returns the next region all threads agree on, 0 when all exited, -1 when they disagree.
    A barrier stores only the live registers this region may have written: the others still hold
    the value restored at its start, which is in their slot already. warp: the kernel also splits
    at warp collectives (see emit_region_kernel); the loops run the live range in %rng. soft: every thread records
    its next site (the block function picks the next region itself where they disagree); masked: only the threads
    waiting at site k run, the others keep their site. uniform: [(register, type, (slope, by row))] that it
    recomputes from the block's (or the row's) first thread's slot and %tid.x instead of loading their slots (checked
    by cpu/affine.uniform_check, or by the region that ran before: the word at %uni after the candidates'); where
    cpu/round_loops.plan proves its loop keeps them affine, the region runs the loop's rounds itself."""
    from ptx.passes.liveness import defs_uses
    consts = consts or {}
    em = FunctionEmitter(mctx, flat, "region")
    em.entry_code = []
    em.x_read_off = getattr(sync_em, "x_read_off", None)
    em.x_slots, em.x_self = getattr(sync_em, "x_slots", {}), getattr(sync_em, "x_self", set())
    em.region_site = k
    f = em.f
    em.exit_label = "thread.exit"
    # the registers live where the region starts (it restores them), in the thread function's
    # order; the others as the body names them: each register costs LLVM an alloca to promote
    entry_live = live[sync_em.sync_sites[k - 1][4]] if k else ()
    for name in sync_em.regs:
        d = flat.lookup(name)
        if d is not None and d.space == "reg" and name in entry_live:
            em.reg(name)
    bx, by, bz = em.ntid(0), em.ntid(1), em.ntid(2)
    f.terminated = True         # the entry block ends in after_entry's branch
    start_idx = 0 if k == 0 else sync_em.sync_sites[k - 1][4] + 1
    reach = region_reach(flat.body, succ, start_idx)
    # Each thread's next region is read only by the fallback, after the threads disagreed; with one
    # way out of this region they cannot, and a loop without that store vectorizes without a
    # runtime overlap check against the SoA area. Nor is there anything to track then.
    exits = region_exits(flat.body, reach, start_idx)
    outs = [site[0] for site in sync_em.sync_sites if site[4] in reach] + ([0] if exits else [])
    record = len(outs) > 1 or soft
    # a yield's loop of atomics: each thread runs several iterations before it stops there (lockstep.atomic_loop)
    steps = bool(soft and k and k in outs and "yield" in flat.body[sync_em.sync_sites[k - 1][4]].mods
                 and lockstep.atomic_loop(flat.body, reach))
    # a region that starts with `if (threadIdx.x < C)` loops over those threads only, without the branch
    # (with warp collectives, where the others exit: the live range shrinks to the threads that run, as it would
    # if each exited in the loop; their site words are set to 0 first, for the fallback)
    xr = None
    if not (masked or uniform or soft or (record and not warp)):
        xr = thread_range.guard(flat.body, start_idx, reach, em.is_register, live, remat)
        if warp and xr and not xr[3]:
            xr = None
    # shared atomics whose results nothing reads, queued (cpu/rmw_queue.py): then a loop of them runs an iteration
    # a round, vectorised, rather than several a thread (steps). The queue has an entry for each of the block's
    # threads, so every one must pass the latch.
    queue = None
    if not (masked or warp or xr):
        size = math.prod(mctx.block) if mctx.block else 1024     # (the most threads a block may have)
        queue = rmw_queue.plan(flat.body, reach, succ, em.is_register, size)
    em.rmw_queue = queue
    steps = steps and queue is None
    # A region that loops back to its own yield (a lockstep loop) checks its affine registers' next values as it
    # goes: each thread's value less its slope times %tid.x must be the same over the block (over each row, where
    # the rest varies by row) for the threads that stay in the loop; then the next round starts from them without
    # the block function's separate pass over the slots (affine.uniform_check). AND and OR of those: equal where
    # every bit agrees (cheaper than min and max: AVX2 has no 64-bit vector min)
    verify = bool(uniform) and soft and not warp and not masked and k in outs
    # the loop's rounds in this call, its block-wide candidates one scalar each (cpu/round_loops.py)
    rounds = verify and round_loops.ENABLED and round_loops.plan(
        flat.body, succ, reach, sync_em.sync_sites[k - 1][4], uniform, live[sync_em.sync_sites[k - 1][4]], remat,
        em.is_register)
    block_cands = {name for name, _, (_, by_row) in uniform or () if not by_row} if rounds else set()
    # a grid-stride loop's rounds without per-thread bookkeeping (cpu/lean_rounds.py)
    # (a thread that leaves reaches the one other site: the exit or a barrier after the loop)
    lean = None
    if rounds and not (masked or warp or steps or xr) and len(outs) == 2 and k in outs and \
            all(name in block_cands for name, _, _ in uniform):
        lean = lean_rounds.find(flat.body, succ, reach, sync_em.sync_sites[k - 1][4], rounds, uniform,
                                em.is_register, sync_em.regs)
    # (a proven block-wide candidate needs no OR: its threads agree; the AND of theirs is the next round's base)
    extra = [(f"u{m}{j}", ty, init, by_row, op) for j, (name, ty, (_, by_row)) in enumerate(uniform or ())
             for m, init, op in (("n", "-1", "and"), ("x", "0", "or")) if m == "n" or name not in block_cands]
    # the affine registers' bases: the first thread's slot of the block (in the entry) or of each row (here), read
    # before any thread stores
    row_start, block_start = [], []
    scopes = SlotScopes(mctx)
    for j, (name, ty, (_, by_row)) in enumerate(uniform or ()):
        (row_start if by_row else block_start).extend([
            f"%rbo.{j} = mul i64 %n64, {sync_em.reg_off[name]}",
            f"%rbs.{j} = getelementptr i8, ptr %soa, i64 %rbo.{j}",
            f"%rbp.{j} = getelementptr {ty}, ptr %rbs.{j}, i64 {'%row64' if by_row else 0}",
            f"%rb{'0' if rounds and not by_row else ''}.{j} = load {ty}, ptr %rbp.{j}" +
            scopes.mark(sync_em.reg_off[name])])
    acc, acc_types, combine = range_loops(f, bx, by, warp, track=record and not lean, xrange=xr and xr[:2],
                                          extra=extra if verify and not lean else (),
                                 row_start=row_start, head="round.body" if rounds else "entry")
    f.emit("%t = zext i32 %lin to i64")
    f.emit("%sitep = getelementptr i32, ptr %soa, i64 %t")
    if queue:
        queue.start(em)
    if steps:
        f.emit("store i32 0, ptr %st.n")
    mark = len(f.lines)
    if masked:
        f.emit("%waits = load i32, ptr %sitep" + scopes.mark(0))
        f.emit(f"%runs = icmp eq i32 %waits, {k}")
        f.term(f"br i1 %runs, label %restore.{k}, label %skip")
        f.label("skip")
        f.term("br label %tx.latch")
    else:
        f.term(f"br label %{'start' if k == 0 else f'restore.{k}'}")
    f.label("start")
    if rounds:
        round_loops.make_shadows(em, rounds, flat.body, block_cands)
    # Only what this region can run: the rest of the body would be dead code that we would
    # translate, LLVM would parse and then delete, once per region. Every barrier is still
    # emitted, so that the sites keep the thread function's numbers.
    for i, st in enumerate(flat.body):
        em.cur_index = i
        if isinstance(st, A.Label):
            if i in reach:
                f.label(em.label_name(st.name))
        elif xr and i == xr[2]:
            continue            # no thread in the loop takes it
        elif i in reach or (k and i == sync_em.sync_sites[k - 1][4]):
            em.emit_instruction(st)
            if rounds and i in rounds.cyc:
                round_loops.emit_shadow(em, st, rounds)
                if lean and i == lean.setp:
                    lean_rounds.note(em, rounds, lean)
                if not steps:       # several iterations a thread: a round is not one step of the loop
                    round_loops.note_load(em, st, rounds)
        elif sync_kind(st):
            # a site this region cannot reach: only its number (its inputs would be dead code)
            em.cur_ins = st
            em.suspend(FE.ST_WARP if sync_kind(st) == "warp" else FE.ST_BARRIER, lambda j: None)
    f.label("thread.exit")
    exit_mark = len(f.lines)
    f.term("br label %tx.latch")
    if steps:
        cont = next(c for j, _, c, _, _ in em.sync_sites if j == k)
        f.lines = [f"  br label %steps.{k}" if line == f"  br label %save.{k}" else line for line in f.lines]
        f.label(f"steps.{k}")
        f.emit("%st.o = load i32, ptr %st.n")
        f.emit("%st.i = add i32 %st.o, 1")
        f.emit("store i32 %st.i, ptr %st.n")
        f.emit(f"%st.more = icmp ult i32 %st.i, {lockstep.ATOMIC_STEPS}")
        f.term(f"br i1 %st.more, label %{cont}, label %save.{k}")
    reg_off = sync_em.reg_off
    if [s[4] for s in em.sync_sites] != [s[4] for s in sync_em.sync_sites]:
        return None
    writes = region_writes(flat.body, reach, em.written)
    if k:
        # what the collective this region starts after writes (its `after`, in the restore below)
        writes |= defs_uses(flat.body[sync_em.sync_sites[k - 1][4]], em.is_register)[0]

    affine_regs = {name: (j, slopes) for j, (name, _, slopes) in enumerate(uniform or ())}
    # a collective's inputs where the only other way out is the exit: stored once in the latch, 0 for an exited
    # thread (outside the live range, which is all the collectives read), so the store needs no mask (as above; a
    # store in each block would differ in type once LLVM folds the bitcasts, and stay two masked stores)
    latch_stores = []
    verified = {}

    def hslot(off, ty):
        return slot_ptr(f, off, ty)

    def slot(name, ty):
        return hslot(reg_off[name], ty)

    for j, status, cont, after, idx in em.sync_sites:
        keep = [(name, ty, ptr) for name, (ty, ptr) in em.regs.items()
                if name in live[idx] or not em.is_register(name)]
        for name, ty, _ in keep:
            if name not in reg_off or sync_em.regs.get(name, (None,))[0] != ty:
                return None
        f.label(f"save.{j}")
        # registers every region recomputes (remat) are not stored: the fallback recomputes them too (remat_fn)
        saved = [(name, ty, ptr) for name, ty, ptr in (keep if idx in reach else ())
                 if (name in writes or not em.is_register(name)) and name not in consts and name not in remat
                 and not (j == k and name in block_cands)]
        for name, ty, ptr in saved:
            v = f.op(f"load {ty}, ptr {ptr}")
            f.emit(f"store {ty} {v}, ptr {slot(name, ty)}")
            f.lines[-1] += scopes.mark(reg_off[name])
        xstores = []
        if status == FE.ST_WARP and idx in reach:
            # the collective's inputs (its setup wrote them to this thread's frame header)
            # (constant ones are the fallback's table entries, see warp_convert_state)
            for off, op in warp_inputs(flat.body[idx]).items():
                if const_operand(off, op, flat, remat) is not None:
                    continue
                if off == X_A:
                    a = em.load_frame(X_A, "i64")
                    if wide_match(flat.body[idx]):
                        xstores.append((X_A, "i64"))
                    else:
                        a = f.op(f"trunc i64 {a} to i32")
                        xstores.append((em.x_slots.get(j, X_A), "i32"))
                else:
                    a = em.load_frame(off, "i32")
                    xstores.append((off, "i32"))
                if outs == [j, 0]:
                    latch_stores.append((xstores[-1], a, f"save.{j}"))
                else:
                    f.emit(f"store {xstores[-1][1]} {a}, ptr {hslot(*xstores[-1])}")
        if saved and outs == [j, 0]:
            # the region's only other way out is the exit (a grid-stride loop's last iteration): the exit stores
            # the same slots (an exited thread's are never read), so that the stores need no mask; a store only
            # some lanes make becomes a masked vector store, which AMD's Zen 3 runs at a third of a plain one
            body, f.lines = f.lines, []
            for name, ty, ptr in saved:
                v = f.op(f"load {ty}, ptr {ptr}")
                f.emit(f"store {ty} {v}, ptr {slot(name, ty)}")
                f.lines[-1] += scopes.mark(reg_off[name])
            body[exit_mark:exit_mark], f.lines = f.lines, body
        if verify and j == k:
            for c, (name, ty, (sx, _)) in enumerate(uniform):
                if name in block_cands and sx:
                    d = f.op(f"load {ty}, ptr {round_loops.shadow_of(rounds, name)}")
                else:
                    v = f.op(f"load {ty}, ptr {em.regs[name][1]}")
                    d = f.op(f"sub {ty} {v}, {affine.recompute(f, ty, sx, '0')}")
                verified[c] = d
            verified["block"] = f"save.{j}"
        f.term("br label %tx.latch")
        if j == k:
            f.label(f"restore.{j}")
            for name, ty, ptr in keep:
                if name in remat:
                    continue
                if name in affine_regs:
                    j, (sx, _) = affine_regs[name]
                    v = affine.recompute(f, ty, sx, f"%rb.{j}")
                    if name in block_cands and sx:
                        f.emit(f"store {ty} %rb.{j}, ptr {round_loops.shadow_of(rounds, name)}")
                else:
                    v = f.op(f"load {ty}, ptr {slot(name, ty)}")
                    f.lines[-1] += scopes.mark(reg_off[name])
                f.emit(f"store {ty} {v}, ptr {ptr}")
            need = [n for n, _, _ in keep if n in remat]
            if status == FE.ST_WARP:
                need += [op.name for op in flat.body[idx].operands[2:]
                         if isinstance(op, A.Reg) and op.name in remat]
            for i in remat_chain(need, remat, flat.body, em.is_register):
                em.cur_index = i
                em.emit_instruction(flat.body[i])
            if status == FE.ST_WARP:
                em.cur_index = idx
                warp_result(em, flat.body[idx], remat, hslot, mctx)
                if after is not None:
                    after()
            f.term(f"br label %{cont}")
    f.label("tx.latch")
    arrivals = ", ".join([f"[ {j}, %save.{j} ]" for j, *_ in em.sync_sites] + ["[ 0, %thread.exit ]"] +
                         (["[ %waits, %skip ]"] if masked else []))
    f.emit(f"%site = phi i32 {arrivals}")
    for c, ((off, ty), v, blk) in enumerate(latch_stores):
        ins = ", ".join(f"[ {v if b == blk else 0}, %{b} ]" for b in arrivals_blocks(em, masked))
        f.emit(f"%xl{c} = phi {ty} {ins}")
    before_ret, row_end = [], []
    if uniform:
        flag = "0"
        if verify and "block" in verified:
            for c, (_, ty, _) in enumerate(() if lean else uniform):
                others = ", ".join(f"[ 0, %{b} ]" for b in arrivals_blocks(em, masked) if b != verified["block"])
                f.emit(f"%ud{c} = phi {ty} [ {verified[c]}, %{verified['block']} ], {others}")
            f.emit(f"%again = icmp eq i32 %site, {k}")
            ok = "%again.r"
            for c, (name, ty, _) in enumerate(() if lean else uniform):
                f.emit(f"%udn{c} = select i1 %again, {ty} %ud{c}, {ty} -1")
                f.emit(f"%un{c}.next = and {ty} %un{c}, %udn{c}")
                if name not in block_cands:
                    f.emit(f"%udx{c} = select i1 %again, {ty} %ud{c}, {ty} 0")
                    f.emit(f"%ux{c}.next = or {ty} %ux{c}, %udx{c}")
            # a row (the block) agrees when AND and OR of its differences are equal, or nothing went in (no thread
            # stays in the loop)
            rows = [(c, ty) for c, (_, ty, (_, by_row)) in enumerate(uniform) if by_row]
            if rows:
                lines, bad = _agree_lines(rows, "r")
                row_end += lines + ["%rfl = load i32, ptr %uflp", f"%rfl.n = select i1 {bad}, i32 0, i32 %rfl",
                                    "store i32 %rfl.n, ptr %uflp"]
            lines, bad = _agree_lines([(c, ty) for c, (name, ty, (_, by_row)) in enumerate(uniform)
                                       if not by_row and name not in block_cands], "b")
            before_ret += lines + [f"%again.r = icmp eq i32 %res, {k}", "%uflag.0 = load i32, ptr %uflp",
                                   f"%bgood = xor i1 {bad}, true", "%uflag.1 = and i1 %again.r, %bgood",
                                   "%uflag.2 = zext i1 %uflag.1 to i32", "%uflag = and i32 %uflag.0, %uflag.2"]
            flag = "%uflag"
        before_ret += [f"store i32 {flag}, ptr %uflp"]
    if queue:
        queue.record(f)         # (after the latch's phis)
    for c, ((off, ty), v, blk) in enumerate(latch_stores):
        f.emit(f"store {ty} %xl{c}, ptr {hslot(off, ty)}")
    if record and not lean:
        # every thread's next site, stored once for all ways out (a masked thread's own back): a store on each way
        # out would be a masked vector store, which Zen 3 runs at a third of a plain one
        f.emit("store i32 %site, ptr %sitep" + scopes.mark(0))
    f.emit("%live = icmp ne i32 %site, 0")
    f.emit("%site.k = select i1 %live, i32 %site, i32 -1")
    flush = queue.flush_lines(em, "agree", "qf.entry" if not lean else "qf.q") if queue else ()
    if lean:
        # what the next round starts from: the last thread's (every thread's) values where the rounds go on
        ends = [(f"un{c}", ty, round_loops.shadow_of(rounds, name) if sx else em.regs[name][1])
                for c, (name, ty, (sx, _)) in enumerate(uniform)]
        flush = lean_rounds.after_loops(lean, k, next(o for o in outs if o != k), bx, ends,
                                        "qf.q" if queue else "agree") + list(flush)
    range_latches(f, mctx, bx, by, bz, acc, warp, None if record else (outs or [0])[0], xr, acc_types, before_ret,
                  row_end, flush, combine)
    f.lines[mark:mark] = store_undef_regs(em)
    if rounds:
        assert f.lines[-1] == "  ret i32 %res"
        head, tail = round_loops.round_blocks(em, k, uniform, block_cands & writes, bx, reg_off, rounds)
        f.lines[-1:] = tail
        f.lines[:0] = head
    after_entry = region_entry(bx, by, bz) + (["  %st.n = alloca i32, align 4"] if steps else []) + \
        (queue.entry_lines() if queue else [])
    if warp:
        after_entry += ["  %lo = load i32, ptr %rng", "  %hip = getelementptr i32, ptr %rng, i64 1",
                        "  %hi = load i32, ptr %hip"]
    after_entry += ["  " + line for line in block_start]
    if uniform:
        after_entry.append("  %uflp = getelementptr i8, ptr %uni, i64 0")
        if verify and not rounds:
            after_entry.append("  store i32 1, ptr %uflp")
    if warp and xr and record:
        # the threads the guard skips exit: site 0 (the loop then stores the others')
        mctx.declare("declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)")
        after_entry += ["  %zs.lo = zext i32 %lo to i64", "  %zs.p = getelementptr i32, ptr %soa, i64 %zs.lo",
                        "  %zs.hi = zext i32 %hi to i64", "  %zs.d = sub i64 %zs.hi, %zs.lo",
                        "  %zs.e = icmp ult i32 %lo, %hi", "  %zs.n = select i1 %zs.e, i64 %zs.d, i64 0",
                        "  %zs.b = shl i64 %zs.n, 2",
                        "  call void @llvm.memset.p0.i64(ptr %zs.p, i8 0, i64 %zs.b, i1 false)"]
    after_entry.append(f"  br label %{'round' if rounds else 'tz.head'}")
    # noinline: inlined into the block function, every region would be optimized a second time
    # there; a call per region per block costs nothing beside a loop over the block's threads
    kind = "m" if masked else "u" if uniform else ""
    # noalias: the SoA area is the worker's scratch, which no PTX address reaches; without it LLVM guards each
    # row of a vectorised thread loop with overlap checks between the slots and every global access
    header = (f'define internal i32 @"r{kind}{k}.{func.name}"(ptr %L, ptr %W, ptr noalias %soa, i32 %ctaid.x, '
              f'i32 %ctaid.y, i32 %ctaid.z{", ptr %rng" if warp else ""}{", ptr noalias %uni" if uniform else ""}) noinline {{')
    scopes.apply(f.lines, after_entry)
    return assemble(header, em, after_entry, f.lines, [])


def emit_remat_fn(func, flat, mctx, sync_em, remat, consts):
    """The fallback's first step (cold): every thread's rematerialisable registers that have slots, recomputed into
    them, since the regions do not store them (a block's first region would store each thread's copy of its
    %tid-derived addresses, parameters and block ids, as much as the work of a load-and-store region)."""
    em = FunctionEmitter(mctx, flat, "region")
    em.entry_code = []
    f = em.f
    f.terminated = True
    bx, by, bz = em.ntid(0), em.ntid(1), em.ntid(2)
    names = [n for n in sync_em.reg_off if n in remat and n not in consts and n in sync_em.regs]
    acc, _, _ = range_loops(f, bx, by, False, track=False)
    f.emit("%t = zext i32 %lin to i64")
    mark = len(f.lines)
    for i in remat_chain(names, remat, flat.body, em.is_register):
        em.cur_index = i
        em.emit_instruction(flat.body[i])
    for name in names:
        ty, ptr = em.regs[name]
        if ty != sync_em.regs[name][0]:
            return None
        v = f.op(f"load {ty}, ptr {ptr}")
        f.emit(f"store {ty} {v}, ptr {slot_ptr(f, sync_em.reg_off[name], ty)}")
    f.lines[mark:mark] = store_undef_regs(em)
    f.term("br label %tx.latch")
    f.label("tx.latch")
    range_latches(f, mctx, bx, by, bz, acc, False, single=0)
    after_entry = region_entry(bx, by, bz) + ["  br label %tz.head"]
    header = (f'define internal i32 @"rr.{func.name}"(ptr %L, ptr %W, ptr noalias %soa, i32 %ctaid.x, '
              f'i32 %ctaid.y, i32 %ctaid.z) noinline {{')
    return assemble(header, em, after_entry, f.lines, [])
