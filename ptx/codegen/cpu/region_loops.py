"""One region as a loop over the block's threads (the mask lowering): the thread loops, what each thread
restores and saves at the region's sync points, and the masked and affine variants of a lockstep yield."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.codegen.cpu import affine, thread_range
from ptx.passes.sync_points import sync_kind
from ptx.codegen.cpu.block_abi import store_undef_regs
from ptx.codegen.cpu.regions import region_exits, region_reach, region_writes
from ptx.codegen.cpu.uniform import remat_chain
from ptx.codegen.cpu.warp_collectives import X_A, const_operand, warp_inputs, warp_result
from ptx.codegen.module_context import assemble


TX_LOOP_MD = ", !llvm.loop !8998"


def range_loops(f, bx, by, ranged, track=True, xrange=None):
    """The thread loops' headers. Ranged (kernels with warp collectives): only the threads of linear
    ids [lo, hi) run (the others exited), and the loops track the live threads' smallest and largest
    id and their count, so that the block can go on with the live threads as one range. xrange: (lo, hi), the
    tid.x interval of the threads that do anything in this region (thread_range.guard)."""
    acc = (["mn", "mx"] + (["l0", "l1", "c"] if ranged else [])) if track else []
    init = {"mn": "-1", "mx": "0", "l0": "-1", "l1": "0", "c": "0"}
    f.label("tz.head")
    f.emit("%tid.z = phi i32 [ 0, %entry ], [ %tz.next, %tz.latch ]")
    for a in acc:
        f.emit(f"%{a}.z = phi i32 [ {init[a]}, %entry ], [ %{a}.r, %tz.latch ]")
    f.term("br label %ty.head")
    f.label("ty.head")
    f.emit("%tid.y = phi i32 [ 0, %tz.head ], [ %ty.next, %ty.latch ]")
    for a in acc:
        f.emit(f"%{a}.y = phi i32 [ %{a}.z, %tz.head ], [ %{a}.r, %ty.latch ]")
    f.emit(f"%lz = mul i32 %tid.z, {by}")
    f.emit("%lzy = add i32 %lz, %tid.y")
    f.emit(f"%lzyx = mul i32 %lzy, {bx}")
    if ranged:
        # this row's part of [lo, hi)
        f.emit("%xs0 = sub i32 %lo, %lzyx")
        f.emit("%xs1 = call i32 @llvm.smax.i32(i32 %xs0, i32 0)")
        f.emit(f"%xs = call i32 @llvm.smin.i32(i32 %xs1, i32 {bx})")
        f.emit("%xe0 = sub i32 %hi, %lzyx")
        f.emit("%xe1 = call i32 @llvm.smax.i32(i32 %xe0, i32 0)")
        f.emit(f"%xe = call i32 @llvm.smin.i32(i32 %xe1, i32 {bx})")
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
        f.emit(f"%{a} = phi i32 [ %{a}.y, %ty.head ], [ %{a}.next, %tx.latch ]")
    f.emit("%lin = add i32 %lzyx, %tid.x")
    return acc


def range_latches(f, mctx, bx, by, bz, acc, ranged, single=None, xrange=None):
    """The loops' latches and the region's result; `single`: its one way out (nothing to track)."""
    for fn in ("umin", "umax", "smin", "smax"):
        mctx.declare(f"declare i32 @llvm.{fn}.i32(i32, i32)")
    if acc:
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
    mctx.add_helper("region.tx.md", '!8998 = distinct !{!8998, !8999}\n'
                                    '!8999 = !{!"llvm.loop.unroll.disable"}\n'
                                    '!8996 = distinct !{!8996, !8999}\n'
                                    '!8997 = distinct !{!8997, !8999}')
    f.term("br i1 %tx.c, label %tx.head, label %ty.latch" + TX_LOOP_MD)
    f.label("ty.latch")
    for a in acc:
        if ranged:
            f.emit(f"%{a}.r = phi i32 [ %{a}.next, %tx.latch ], [ %{a}.y, %ty.head ]")
        else:
            f.emit(f"%{a}.r = phi i32 [ %{a}.next, %tx.latch ]")
    f.emit("%ty.next = add nuw i32 %tid.y, 1")
    f.emit(f"%ty.c = icmp ult i32 %ty.next, {by}")
    f.term("br i1 %ty.c, label %ty.head, label %tz.latch, !llvm.loop !8996")
    f.label("tz.latch")
    f.emit("%tz.next = add nuw i32 %tid.z, 1")
    f.emit(f"%tz.c = icmp ult i32 %tz.next, {bz}")
    f.term("br i1 %tz.c, label %tz.head, label %agree, !llvm.loop !8997")
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
    f.term("ret i32 %res")


def emit_region_fn(func, flat, mctx, sync_em, k, live, succ, remat, warp=False, consts=None, soft=False,
                    masked=False, uniform=None):
    """Region k (0: the kernel's start, else: after sync site k) as one loop over the block's
    threads; returns the next region all threads agree on, 0 when all exited, -1 when they disagree.
    A barrier stores only the live registers this region may have written: the others still hold
    the value restored at its start, which is in their slot already. warp: the kernel also splits
    at shfl/vote (see emit_region_kernel); the loops run the live range in %rng. soft: every thread records its
    next site (the block function picks the next region itself where they disagree); masked: only the threads
    waiting at site k run, the others keep their site. uniform: [(register, type, slopes)] that it recomputes from
    their uniform part (at %uni, checked by cpu/affine.uniform_check) and %tid instead of loading their slots."""
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
    # a region that starts with `if (threadIdx.x < C)` loops over those threads only, without the branch
    xr = None if record or warp or masked or uniform else thread_range.guard(flat.body, start_idx, reach,
                                                                              em.is_register, live, remat)
    acc = range_loops(f, bx, by, warp, track=record, xrange=xr and xr[:2])
    f.emit("%t = zext i32 %lin to i64")
    f.emit("%sitep = getelementptr i32, ptr %soa, i64 %t")
    mark = len(f.lines)
    if masked:
        f.emit("%waits = load i32, ptr %sitep")
        f.emit(f"%runs = icmp eq i32 %waits, {k}")
        f.term(f"br i1 %runs, label %restore.{k}, label %skip")
        f.label("skip")
        f.term("br label %tx.latch")
    else:
        f.term(f"br label %{'start' if k == 0 else f'restore.{k}'}")
    f.label("start")
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
        elif sync_kind(st):
            # a site this region cannot reach: only its number (its inputs would be dead code)
            em.cur_ins = st
            em.suspend(FE.ST_WARP if sync_kind(st) == "warp" else FE.ST_BARRIER, lambda j: None)
    f.label("thread.exit")
    if record:
        f.emit("store i32 0, ptr %sitep")
    f.term("br label %tx.latch")
    reg_off = sync_em.reg_off
    if [s[4] for s in em.sync_sites] != [s[4] for s in sync_em.sync_sites]:
        return None
    writes = region_writes(flat.body, reach, em.written)
    if k:
        # what the collective this region starts after writes (its `after`, in the restore below)
        writes |= defs_uses(flat.body[sync_em.sync_sites[k - 1][4]], em.is_register)[0]

    affine_regs = {name: (j, slopes) for j, (name, _, slopes) in enumerate(uniform or ())}

    def hslot(off, ty):
        a = f.op(f"mul i64 %n64, {off}")
        p = f.op(f"getelementptr i8, ptr %soa, i64 {a}")
        return f.op(f"getelementptr {ty}, ptr {p}, i64 %t")

    def slot(name, ty):
        return hslot(reg_off[name], ty)

    for j, status, cont, after, idx in em.sync_sites:
        keep = [(name, ty, ptr) for name, (ty, ptr) in em.regs.items()
                if name in live[idx] or not em.is_register(name)]
        for name, ty, _ in keep:
            if name not in reg_off or sync_em.regs.get(name, (None,))[0] != ty:
                return None
        f.label(f"save.{j}")
        for name, ty, ptr in keep if idx in reach else ():
            if (name in writes or not em.is_register(name)) and name not in consts:
                v = f.op(f"load {ty}, ptr {ptr}")
                f.emit(f"store {ty} {v}, ptr {slot(name, ty)}")
        if status == FE.ST_WARP and idx in reach:
            # the collective's inputs (its setup wrote them to this thread's frame header)
            # (constant ones are the fallback's table entries, see warp_convert_state)
            for off, op in warp_inputs(flat.body[idx]).items():
                if const_operand(off, op, flat, remat) is not None:
                    continue
                if off == X_A:
                    a = em.load_frame(X_A, "i64")
                    f.emit(f"store i32 {f.op(f'trunc i64 {a} to i32')}, ptr {hslot(em.x_slots[j], 'i32')}")
                else:
                    f.emit(f"store i32 {em.load_frame(off, 'i32')}, ptr {hslot(off, 'i32')}")
        if record:
            f.emit(f"store i32 {j}, ptr %sitep")
        f.term("br label %tx.latch")
        if j == k:
            f.label(f"restore.{j}")
            for name, ty, ptr in keep:
                if name in remat:
                    continue
                if name in affine_regs:
                    j, slopes = affine_regs[name]
                    v = affine.recompute(f, ty, slopes, f"%uv.{j}")
                else:
                    v = f.op(f"load {ty}, ptr {slot(name, ty)}")
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
    f.emit("%live = icmp ne i32 %site, 0")
    f.emit("%site.k = select i1 %live, i32 %site, i32 -1")
    range_latches(f, mctx, bx, by, bz, acc, warp, None if record else (outs or [0])[0], xr)
    f.lines[mark:mark] = store_undef_regs(em)
    after_entry = ["  %frame = alloca [64 x i8], align 8",
                   f"  %nxy.r = mul i32 {bx}, {by}", f"  %n.r = mul i32 %nxy.r, {bz}",
                   "  %n64 = zext i32 %n.r to i64"]
    if warp:
        after_entry += ["  %lo = load i32, ptr %rng", "  %hip = getelementptr i32, ptr %rng, i64 1",
                        "  %hi = load i32, ptr %hip"]
    for j, (_, ty, _) in enumerate(uniform or ()):
        after_entry += [f"  %uvp.{j} = getelementptr i8, ptr %uni, i64 {8 * j}", f"  %uv.{j} = load {ty}, ptr %uvp.{j}"]
    after_entry.append("  br label %tz.head")
    # noinline: inlined into the block function, every region would be optimized a second time
    # there; a call per region per block costs nothing beside a loop over the block's threads
    kind = "m" if masked else "u" if uniform else ""
    header = (f'define internal i32 @"r{kind}{k}.{func.name}"(ptr %L, ptr %W, ptr %soa, i32 %ctaid.x, '
              f'i32 %ctaid.y, i32 %ctaid.z{", ptr %rng" if warp else ""}{", ptr %uni" if uniform else ""}) noinline {{')
    return assemble(header, em, after_entry, f.lines, [])
