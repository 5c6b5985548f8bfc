"""The general scheduler: each thread as a resumable function that suspends at sync points, and the block
functions that run those threads phase by phase (barriers) or warp by warp (collectives, warp_scheduler.c)."""

from __future__ import annotations

from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.codegen.cpu.block_abi import BLOCK_COORDS, BLOCK_FN_ENTRY, BLOCK_NEXT, GRID_DIMS, init_frames
from ptx.codegen.module_context import assemble, reg_signature, round_up, setup_addr_vars


def emit_sync_thread(func, flat, mctx):
    em = FunctionEmitter(mctx, flat, "sync")
    em.entry_code = []
    local_end = setup_addr_vars(em, flat, in_frame=True)
    f = em.f
    em.exit_label = "thread.exit"
    em.touch_all_registers()
    f.label("start")
    em.emit_body()
    f.label("thread.exit")
    f.term(f"ret i32 {FE.ST_DONE}")
    # register save area after the frame-resident variables
    reg_off = {}
    off = local_end
    for name, (ty, ptr) in em.regs.items():
        sz = max(FE.LLVM_BITS[ty] // 8, 1)
        off = round_up(off, sz)
        reg_off[name] = off
        off += sz
    frame_bytes = round_up(off, 64)
    from ptx.passes.liveness import live_out_sets
    live = live_out_sets(flat.body, em.is_register, flat.branch_targets,
                         indices=[site[4] for site in em.sync_sites])
    for k, status, cont, after, idx in em.sync_sites:
        # only what is live after the suspension point crosses it (registers the body never names
        # as operands, like the carry flag, always do)
        keep = [(name, ty, ptr) for name, (ty, ptr) in em.regs.items()
                if name in live[idx] or not em.is_register(name)]
        f.label(f"save.{k}")
        for name, ty, ptr in keep:
            v = f.op(f"load {ty}, ptr {ptr}")
            em.store_frame(reg_off[name], ty, v)
        em.store_frame(FE.FH_RESUME, "i32", str(k))
        f.term(f"ret i32 {status}")
        f.label(f"restore.{k}")
        for name, ty, ptr in keep:
            v = em.load_frame(reg_off[name], ty)
            f.emit(f"store {ty} {v}, ptr {ptr}")
        if after is not None:
            after()
        f.term(f"br label %{cont}")
    cases = " ".join(f"i32 {site[0]}, label %restore.{site[0]}" for site in em.sync_sites)
    dispatch = ["  %resume.fr = load i32, ptr %frame, align 4",
                "  %resume.known = icmp sge i32 %resume.in, 0",
                "  %resume = select i1 %resume.known, i32 %resume.in, i32 %resume.fr",
                f"  switch i32 %resume, label %start [ {cases} ]"]
    header = f"define internal i32 @\"t.{func.name}\"({reg_signature()}, i32 %resume.in) {{"
    local_bytes = local_end - FE.FRAME_HEADER_BYTES
    em.reg_off = reg_off
    em.live_at_sites = live
    return assemble(header, em, dispatch, f.lines, []), frame_bytes, local_bytes, \
        [site[0] for site in em.sync_sites], em


MAX_SPECIALISED_PHASES = 2


def phase_loop(func, tag, resume_in, fb):
    """One phase: every live thread of the block runs to its next barrier or its exit. Tracks whether
    any thread is still live and whether all suspended threads wait at the same resume point."""
    t = tag
    return f"""phase.{t}:
  br label %tz.{t}
tz.{t}:
  %z.{t} = phi i32 [ 0, %phase.{t} ], [ %z.next.{t}, %tz.latch.{t} ]
  %live.z.{t} = phi i1 [ false, %phase.{t} ], [ %live.y.out.{t}, %tz.latch.{t} ]
  %site.z.{t} = phi i32 [ -1, %phase.{t} ], [ %site.y.out.{t}, %tz.latch.{t} ]
  %unif.z.{t} = phi i1 [ true, %phase.{t} ], [ %unif.y.out.{t}, %tz.latch.{t} ]
  %t.z.{t} = phi i64 [ 0, %phase.{t} ], [ %t.y.out.{t}, %tz.latch.{t} ]
  br label %ty.{t}
ty.{t}:
  %y.{t} = phi i32 [ 0, %tz.{t} ], [ %y.next.{t}, %ty.latch.{t} ]
  %live.y.{t} = phi i1 [ %live.z.{t}, %tz.{t} ], [ %live.x.out.{t}, %ty.latch.{t} ]
  %site.y.{t} = phi i32 [ %site.z.{t}, %tz.{t} ], [ %site.x.out.{t}, %ty.latch.{t} ]
  %unif.y.{t} = phi i1 [ %unif.z.{t}, %tz.{t} ], [ %unif.x.out.{t}, %ty.latch.{t} ]
  %t.y.{t} = phi i64 [ %t.z.{t}, %tz.{t} ], [ %t.x.out.{t}, %ty.latch.{t} ]
  br label %tx.{t}
tx.{t}:
  %x.{t} = phi i32 [ 0, %ty.{t} ], [ %x.next.{t}, %tx.latch.{t} ]
  %live.{t} = phi i1 [ %live.y.{t}, %ty.{t} ], [ %live.next.{t}, %tx.latch.{t} ]
  %site.{t} = phi i32 [ %site.y.{t}, %ty.{t} ], [ %site.next.{t}, %tx.latch.{t} ]
  %unif.{t} = phi i1 [ %unif.y.{t}, %ty.{t} ], [ %unif.next.{t}, %tx.latch.{t} ]
  %t.{t} = phi i64 [ %t.y.{t}, %ty.{t} ], [ %t.next.{t}, %tx.latch.{t} ]
  %off.{t} = mul i64 %t.{t}, {fb}
  %fr.{t} = getelementptr i8, ptr %scratch, i64 %off.{t}
  %stp.{t} = getelementptr i8, ptr %fr.{t}, i64 4
  %state.{t} = load i32, ptr %stp.{t}
  %isdone.{t} = icmp ne i32 %state.{t}, 0
  br i1 %isdone.{t}, label %tx.latch.{t}, label %run.{t}
run.{t}:
  %r.{t} = call i32 @"t.{func.name}"(ptr %L, ptr %W, ptr %fr.{t}, i32 %x.{t}, i32 %y.{t}, i32 %z.{t}, i32 %cx, i32 %cy, i32 %cz, i32 {resume_in})
  %fin.{t} = icmp eq i32 %r.{t}, {FE.ST_DONE}
  br i1 %fin.{t}, label %mark.{t}, label %notdone.{t}
mark.{t}:
  store i32 1, ptr %stp.{t}
  br label %tx.latch.{t}
notdone.{t}:
  %abort.{t} = icmp uge i32 %r.{t}, {FE.ST_ABORT_BASE}
  br i1 %abort.{t}, label %fail.{t}, label %waits.{t}
waits.{t}:
  %k.{t} = load i32, ptr %fr.{t}
  %first.{t} = icmp slt i32 %site.{t}, 0
  %same.{t} = icmp eq i32 %site.{t}, %k.{t}
  %ok.{t} = or i1 %first.{t}, %same.{t}
  %unif.w.{t} = and i1 %unif.{t}, %ok.{t}
  br label %tx.latch.{t}
fail.{t}:
  %code.{t} = sub i32 %r.{t}, {FE.ST_ABORT_BASE}
  ret i32 %code.{t}
tx.latch.{t}:
  %live.next.{t} = phi i1 [ %live.{t}, %tx.{t} ], [ %live.{t}, %mark.{t} ], [ true, %waits.{t} ]
  %site.next.{t} = phi i32 [ %site.{t}, %tx.{t} ], [ %site.{t}, %mark.{t} ], [ %k.{t}, %waits.{t} ]
  %unif.next.{t} = phi i1 [ %unif.{t}, %tx.{t} ], [ %unif.{t}, %mark.{t} ], [ %unif.w.{t}, %waits.{t} ]
  %t.next.{t} = add nuw i64 %t.{t}, 1
  %x.next.{t} = add nuw i32 %x.{t}, 1
  %xm.{t} = icmp ult i32 %x.next.{t}, %bx
  br i1 %xm.{t}, label %tx.{t}, label %ty.latch.{t}
ty.latch.{t}:
  %live.x.out.{t} = phi i1 [ %live.next.{t}, %tx.latch.{t} ]
  %site.x.out.{t} = phi i32 [ %site.next.{t}, %tx.latch.{t} ]
  %unif.x.out.{t} = phi i1 [ %unif.next.{t}, %tx.latch.{t} ]
  %t.x.out.{t} = phi i64 [ %t.next.{t}, %tx.latch.{t} ]
  %y.next.{t} = add nuw i32 %y.{t}, 1
  %ym.{t} = icmp ult i32 %y.next.{t}, %by
  br i1 %ym.{t}, label %ty.{t}, label %tz.latch.{t}
tz.latch.{t}:
  %live.y.out.{t} = phi i1 [ %live.x.out.{t}, %ty.latch.{t} ]
  %site.y.out.{t} = phi i32 [ %site.x.out.{t}, %ty.latch.{t} ]
  %unif.y.out.{t} = phi i1 [ %unif.x.out.{t}, %ty.latch.{t} ]
  %t.y.out.{t} = phi i64 [ %t.x.out.{t}, %ty.latch.{t} ]
  %z.next.{t} = add nuw i32 %z.{t}, 1
  %zm.{t} = icmp ult i32 %z.next.{t}, %bz
  br i1 %zm.{t}, label %tz.{t}, label %phase.end.{t}
phase.end.{t}:
  br i1 %live.y.out.{t}, label %dispatch.{t}, label %next
dispatch.{t}:
  %uk.{t} = select i1 %unif.y.out.{t}, i32 %site.y.out.{t}, i32 -1
  br label %dispatch
"""


def emit_barrier_block_fn(func, sym, frame_bytes, sites, from_frames=False):
    """Block barriers only (no warp collectives, no bar.red): each phase runs every live thread of
    the block, in order, up to its next barrier or its exit; the next phase releases them all. When
    every waiting thread waits at the same barrier (the usual case) the next phase is a loop
    specialised for that resume point: the thread function is inlined with its dispatch folded."""
    fb = frame_bytes
    if len(sites) > MAX_SPECIALISED_PHASES:
        sites = []          # each copy inlines the whole thread function: keep compile time bounded
    tags = ["gen"] + [str(k) for k in sites]
    loops = "".join(phase_loop(func, t, -1 if t == "gen" else int(t), fb) for t in tags)
    incoming = ", ".join(f"[ %uk.{t}, %dispatch.{t} ]" for t in tags)
    cases = " ".join(f"i32 {k}, label %phase.{k}" for k in sites)
    # from_frames: the threads' frames already hold their state (a region kernel fell back here)
    linkage = "internal " if from_frames else ""
    return f"""define {linkage}i32 {sym}(ptr %L, i64 %first, i64 %last, ptr %W) {{
entry:
{BLOCK_FN_ENTRY}  %nxy = mul i32 %bx, %by
  %n = mul i32 %nxy, %bz
  %gx64 = zext i32 %gx to i64
  %gy64 = zext i32 %gy to i64
  %ne = icmp ult i64 %first, %last
  br i1 %ne, label %head, label %done
head:
  %b = phi i64 [ %first, %entry ], [ %b.next, %next ]
{BLOCK_COORDS}  br i1 {'false' if from_frames else 'true'}, label %init, label %phase.gen
{init_frames(fb, 'phase.gen')}{loops}dispatch:
  %uk = phi i32 {incoming}
  switch i32 %uk, label %phase.gen [ {cases} ]
{BLOCK_NEXT}"""


def emit_warp_block_fn(func, sym, frame_bytes, mctx, from_frames=False):
    """Kernels with warp collectives (or bar.red): warp by warp, every runnable lane runs (the thread
    function inlined here) until it suspends; warp_scheduler.c computes the collectives and resumes
    the lanes; once every thread is done or at a block barrier, the barrier is released."""
    mctx.declare("declare i32 @ptx_sched_resolve_warp(ptr, i32, i32, i32)")
    mctx.declare("declare i32 @ptx_sched_release_barrier(ptr, i32, i32)")
    mctx.declare("declare i32 @llvm.umin.i32(i32, i32)")
    fb = frame_bytes
    # from_frames: the threads' frames already hold their state (a region kernel fell back here)
    linkage = "internal " if from_frames else ""
    return f"""define {linkage}i32 {sym}(ptr %L, i64 %first, i64 %last, ptr %W) {{
entry:
{BLOCK_FN_ENTRY}  %bxy = mul i32 %bx, %by
  %n = mul i32 %bxy, %bz
  %n31 = add i32 %n, 31
  %nwarps = lshr i32 %n31, 5
  %gx64 = zext i32 %gx to i64
  %gy64 = zext i32 %gy to i64
  %ne = icmp ult i64 %first, %last
  br i1 %ne, label %head, label %done
head:
  %b = phi i64 [ %first, %entry ], [ %b.next, %next ]
{BLOCK_COORDS}  br i1 {'false' if from_frames else 'true'}, label %init, label %outer
{init_frames(fb, 'outer')}outer:
  br label %wloop
wloop:
  %w = phi i32 [ 0, %outer ], [ %w.next, %wnext ]
  %base = shl i32 %w, 5
  %rem = sub i32 %n, %base
  %nl = call i32 @llvm.umin.i32(i32 %rem, i32 32)
  br label %lanes
lanes:
  br label %lane
lane:
  %l = phi i32 [ 0, %lanes ], [ %l.next, %lane.latch ]
  %t = add i32 %base, %l
  %t64 = zext i32 %t to i64
  %off = mul i64 %t64, {fb}
  %fr = getelementptr i8, ptr %scratch, i64 %off
  %stp = getelementptr i8, ptr %fr, i64 4
  %state = load i32, ptr %stp
  %runnable = icmp eq i32 %state, 0
  br i1 %runnable, label %run, label %lane.latch
run:
  %tx = urem i32 %t, %bx
  %tq = udiv i32 %t, %bx
  %ty = urem i32 %tq, %by
  %tz = udiv i32 %t, %bxy
  %r = call i32 @"t.{func.name}"(ptr %L, ptr %W, ptr %fr, i32 %tx, i32 %ty, i32 %tz, i32 %cx, i32 %cy, i32 %cz, i32 -1)
  %abort = icmp uge i32 %r, {FE.ST_ABORT_BASE}
  br i1 %abort, label %fail, label %record
record:
  %newstate = add i32 %r, 1
  store i32 %newstate, ptr %stp
  br label %lane.latch
lane.latch:
  %l.next = add nuw i32 %l, 1
  %lmore = icmp ult i32 %l.next, %nl
  br i1 %lmore, label %lane, label %resolve
resolve:
  %res = call i32 @ptx_sched_resolve_warp(ptr %W, i32 %base, i32 %nl, i32 {fb})
  %again = icmp ne i32 %res, 0
  br i1 %again, label %lanes, label %wnext
wnext:
  %w.next = add nuw i32 %w, 1
  %wmore = icmp ult i32 %w.next, %nwarps
  br i1 %wmore, label %wloop, label %barrier
barrier:
  %rel = call i32 @ptx_sched_release_barrier(ptr %W, i32 %n, i32 {fb})
  %released = icmp ne i32 %rel, 0
  br i1 %released, label %outer, label %next
fail:
  %code = sub i32 %r, {FE.ST_ABORT_BASE}
  ret i32 %code
{BLOCK_NEXT}"""


# The fallback module's entry for one region kernel: the block's SoA slots into the resumable threads'
# frames, then the general barrier scheduler finishes block %b.
FALLBACK_ENTRY = """define i32 @"fb.{name}"(ptr %L, i64 %b, ptr %W, ptr %scratch, ptr %soa, i64 %n64) {{
entry:
""" + GRID_DIMS + """  %gx64 = zext i32 %gx to i64
  %gy64 = zext i32 %gy to i64
""" + BLOCK_COORDS.replace("{", "{{").replace("}", "}}") + """  call i32 @"rr.{name}"(ptr %L, ptr %W, ptr %soa, i32 %cx, i32 %cy, i32 %cz)
  call void @"cv.{name}"(ptr %scratch, ptr %soa, i64 %n64)
  %b1 = add nuw i64 %b, 1
  %g = call i32 @"gb.{name}"(ptr %L, i64 %b, i64 %b1, ptr %W)
  ret i32 %g
}}"""
