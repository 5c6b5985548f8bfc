"""The block function of a region kernel: the regions called in turn while the threads agree, the lockstep
dispatch where they need not, and the conversion of the block's state for the fallback where they disagree."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import function_emitter as FE
from ptx.passes.liveness import defs_uses
from ptx.codegen.cpu import lockstep
from ptx.codegen.cpu.lockstep import checked_site, lowest_waiting, soft_dispatch
from ptx.codegen.cpu import affine, block_prefetch, round_loops, warp_chain
from ptx.codegen.cpu.block_abi import BLOCK_COORDS, BLOCK_FN_ENTRY, BLOCK_NEXT
from ptx.codegen.cpu.region_loops import TX_LOOP_MD, emit_region_fn, emit_remat_fn
from ptx.codegen.cpu import regions
from ptx.codegen.cpu.regions import region_reach, region_ready, successors
from ptx.codegen.cpu.uniform import constant_registers, rematerializable
from ptx.codegen.cpu.warp_collectives import (BALLOT_FN, X_BALLOT, const_operand, exchange_helper,
                                              warp_convert_state, warp_inputs)
from ptx.codegen.module_context import round_up

COLD_TX_LOOP_MD = ", !llvm.loop !8988"
COLD_MD = '!8988 = distinct !{!8988, !8987, !8999}\n!8987 = !{!"llvm.loop.vectorize.enable", i1 false}'


def emit_region_kernel(func, flat, mctx, sym, fb, sync_em, warp=False, soft=False):
    """Every region between barriers as one loop over the block's threads, the body inlined, the
    values live across a barrier in struct-of-arrays slots (slot of register r for thread t at
    soa + off(r) * n + t * size(r), off(r) its offset in the resumable thread's frame), so LLVM
    can vectorize across threads. After each region all threads must agree on the next one; if
    they do not (divergent barriers, some threads exited), the block's state is copied into the
    resumable threads' frames and the general barrier scheduler finishes the block.
    warp: warp collectives (cpu/warp_collectives.warp_region_op) split regions too. The region before
    one stores each thread's inputs in exchange slots (X_*); the next one starts by evaluating the
    collective for each thread from its warp's slots (lanes: linear thread id % 32), redux and match
    from the results their helper (exchange_helper) computed in between. Threads that exit leave the block's live range
    [lo, hi) (%rng); if the live threads stop being one range, or disagree on the next collective or
    barrier, the general warp scheduler (warp_scheduler.c) finishes the block from where they are.
    soft: some sites are cpu/lockstep.py's yields at loop headers, which the threads need not agree on: where they
    disagree, the block runs a yield some of them wait at, for those threads only (cpu/lockstep.soft_dispatch)."""
    succ = successors(flat.body)
    remat = rematerializable(flat.body, sync_em.is_register)
    # shuffle chains (cpu/warp_chain.py): one function for the regions from a start, a barrier or a shuffle to the
    # next barrier or the exit, called instead of the first region (which it calls itself where the block's threads
    # are not whole warps); the sites inside them do not count towards the limit on regions
    found = (warp_chain.find_chains(flat, sync_em.sync_sites, succ, remat)
             if warp and not soft and warp_chain.ENABLED else [])
    mids = {k for _, segs, _ in found for k, _ in segs[1:]}
    if not region_ready(func, flat, sync_em, warp, chained=len(mids)):
        return None
    many = len(sync_em.sync_sites) > regions.MAX_REGIONS
    if warp:
        # each shfl's shuffled values in a slot of its own after the frame (so the region after it
        # reads one slot and writes others); a shfl in a loop (its region may reach it again) is
        # read from a copy the block function makes. Then room for reads up to 31 threads beyond
        # either end of the block.
        succ0 = successors(flat.body)
        shfl_sites = [(site[0], site[4]) for site in sync_em.sync_sites
                      if flat.body[site[4]].opcode == "shfl"]
        sync_em.x_slots = {k: fb + 4 * i for i, (k, _) in enumerate(shfl_sites)}
        sync_em.x_self = {k for k, idx in shfl_sites if idx in region_reach(flat.body, succ0, idx + 1)}
        sync_em.x_read_off = fb + 4 * len(shfl_sites)
        fb = round_up(sync_em.x_read_off + 4 + 128, 64)
    from ptx.passes.liveness import live_out_sets
    live = live_out_sets(flat.body, sync_em.is_register, flat.branch_targets,
                         indices=[site[4] for site in sync_em.sync_sites])
    region_fns = []
    consts = constant_registers(flat, remat, sync_em.regs)
    yields = {site[0] for site in sync_em.sync_sites if "yield" in flat.body[site[4]].mods}
    # per yield: the registers it carries that may be affine in %tid (checked before the region relies on it)
    uniform = {}
    proven = set()      # barriers whose loop keeps their affine registers so (checked once a block)
    # and, in kernels without yields or collectives, per barrier in a loop (a tile loop's index and pointers): a
    # region that knows them uniform or consecutive branches on them once and loads through them as vectors
    looped = set()
    if not soft and not warp:
        spans = lockstep.all_loop_spans(flat.body)
        looped = {k for k, *_, idx in sync_em.sync_sites if any(j <= idx <= end for j, end in spans.items())}
    if yields or looped:
        slopes = affine.Slopes(flat.body, sync_em.is_register)
        types = {name: sync_em.regs[name][0] for name in sync_em.reg_off if name in sync_em.regs}
        skip = set(remat) | set(consts)
    for k, *_, idx in sync_em.sync_sites:
        if k in yields or k in looped:
            cands = affine.candidates(slopes, live[idx], types, skip)
            if k not in yields:
                # a barrier's region gains only where it reads them (its check costs a pass over the slots)
                reads = set()
                for i in region_reach(flat.body, succ, idx + 1):
                    if isinstance(flat.body[i], A.Instruction):
                        reads |= defs_uses(flat.body[i], sync_em.is_register)[1]
                cands = [c for c in cands if c[0] in reads]
            if cands:
                uniform[k] = cands
                region_fns.append(affine.uniform_check(f"uc{k}.{func.name}", cands, sync_em.reg_off))
                if k not in yields and round_loops.barrier_loop_proof(flat.body, succ, idx, cands, live[idx], remat,
                                                                      sync_em.is_register):
                    proven.add(k)
    chains = []
    for chain in found:
        if chain[0] in uniform:
            continue
        text = warp_chain.emit_chain_fn(func, flat, mctx, sync_em, chain, live, remat, consts)
        if text is not None:
            region_fns.append(text)
            chains.append(chain)
    # a built chain's own regions run only in blocks that are not whole warps: past the limit on regions compiled
    # without optimisation, else not vectorised (most of the time LLVM spends on them)
    cold = {k for _, segs, _ in chains for k, _ in segs}
    for k in range(len(sync_em.sync_sites) + 1):
        # a yield: all threads (that carry affine registers: once checked), those that wait there (or all, when
        # the check fails)
        variants = [(False, None), (True, None)] if k in yields else [(False, None)]
        if k in uniform:
            variants[0] = (False, uniform[k])
            if k not in yields:
                variants.append((False, None))      # where the check fails
        for masked, uni in variants:
            text = emit_region_fn(func, flat, mctx, sync_em, k, live, succ, remat, warp, consts, soft, masked,
                                   uni)
            if text is None:
                return None
            if k in cold and many:
                text = text.replace(") noinline {", ") noinline optnone {", 1)
            elif k in cold:
                text = text.replace(TX_LOOP_MD, COLD_TX_LOOP_MD)
                mctx.add_helper("region.cold.md", COLD_MD)
            region_fns.append(text)
    reg_off = sync_em.reg_off

    # SoA slots -> the resumable threads' frames (resume point, done flag, registers)
    copies = []
    for i, (name, off) in enumerate(reg_off.items()):
        ty = sync_em.regs[name][0]
        if name in consts:
            copies.append(f"""  %d{i} = getelementptr i8, ptr %fr, i64 {off}
  store {ty} {consts[name]}, ptr %d{i}""")
            continue
        copies.append(f"""  %a{i} = mul i64 %n64, {off}
  %p{i} = getelementptr i8, ptr %soa, i64 %a{i}
  %q{i} = getelementptr {ty}, ptr %p{i}, i64 %t
  %v{i} = load {ty}, ptr %q{i}
  %d{i} = getelementptr i8, ptr %fr, i64 {off}
  store {ty} %v{i}, ptr %d{i}""")
    copy_text = "\n".join(copies)
    tables = []
    if warp:
        state_text, tables = warp_convert_state(func, flat, sync_em, remat)
    else:
        state_text = """  %isdone = icmp eq i32 %site, 0
  %state = zext i1 %isdone to i32
  %stp = getelementptr i8, ptr %fr, i64 4
  store i32 %state, ptr %stp"""
    convert_fn = f"""define internal void @"cv.{func.name}"(ptr %scratch, ptr %soa, i64 %n64) {{
entry:
  br label %loop
loop:
  %t = phi i64 [ 0, %entry ], [ %t.next, %loop ]
  %off = mul i64 %t, {fb}
  %fr = getelementptr i8, ptr %scratch, i64 %off
  %sp = getelementptr i32, ptr %soa, i64 %t
  %site = load i32, ptr %sp
  store i32 %site, ptr %fr
{state_text}
{copy_text}
  %t.next = add nuw i64 %t, 1
  %more = icmp ult i64 %t.next, %n64
  br i1 %more, label %loop, label %out
out:
  ret void
}}"""

    sites = [site[0] for site in sync_em.sync_sites]
    call = 'call i32 @"r{1}.{0}"(ptr %L, ptr %W, ptr %soa, i32 %cx, i32 %cy, i32 %cz' + \
        (', ptr %rng)' if warp else ')')
    votes = {site[0] for site in sync_em.sync_sites if flat.body[site[4]].opcode == "vote"}
    ballot = f'  call void @"vb.{func.name}"(ptr %soa, i64 %n64, ptr %rng)\n'
    # redux and match: their helpers compute each thread's result before the region after them
    xhelpers = {}
    for k, *_, idx in sync_em.sync_sites if warp else ():
        st = flat.body[idx]
        if st.opcode in ("redux", "match"):
            mask = const_operand(FE.FH_MASK, warp_inputs(st)[FE.FH_MASK], flat, remat)
            xhelpers[k] = exchange_helper(func.name, k, st, mask, mctx)
    xcall = '  call void @"wx{0}.' + func.name + '"(ptr %soa, i64 %n64, ptr %rng)\n'
    shfls = getattr(sync_em, "x_self", set()) if warp else set()
    if shfls:
        mctx.declare("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
    copy = ""
    if warp:
        copy = (f"  %xs.{{0}} = mul i64 %n64, {{1}}\n  %xsp.{{0}} = getelementptr i8, ptr %soa, i64 %xs.{{0}}\n"
                f"  %xd.{{0}} = mul i64 %n64, {sync_em.x_read_off}\n"
                f"  %xdp.{{0}} = getelementptr i8, ptr %soa, i64 %xd.{{0}}\n  %xn.{{0}} = shl i64 %n64, 2\n"
                f"  call void @llvm.memcpy.p0.p0.i64(ptr %xdp.{{0}}, ptr %xsp.{{0}}, i64 %xn.{{0}}, i1 false)\n")
    reg_blocks = "".join(f"reg.{k}:\n{ballot if k in votes else ''}{xcall.format(k) if k in xhelpers else ''}"
                         f"{copy.format(k, sync_em.x_slots.get(k)) if k in shfls else ''}"
                         f"  %r{k} = {call.format(func.name, k)}\n  br label %disp\n" for k in sites if k not in uniform)
    if soft:
        ublocks, incoming, phis, soft_text = soft_dispatch(func.name, call, sites, yields, uniform)
        reg_blocks += ublocks
    else:
        reg_blocks += "".join(checked_site(func.name, k, call, call, fresh=False, proven=k in proven)
                              for k in sorted(uniform))
        ends = [("%r0", "head")] + [(f"%r{k}", f"{'greg' if k in uniform else 'reg'}.{k}") for k in sites] + \
            [(f"%u{k}", f"ureg.{k}") for k in uniform]
        incoming = ", ".join(f"[ {v}, %{b} ]" for v, b in ends)
        # %ok.k: site k's registers were checked in this block and the block went round its loop since (every
        # region call on the way agreed, or the block would be in the fallback)
        phis = "".join(f"  %ok.{k} = phi i1 " + ", ".join(
            f"[ {'false' if b in ('head', f'greg.{k}') else 'true' if b == f'ureg.{k}' else f'%ok.{k}'}, %{b} ]"
            for _, b in ends) + "\n" for k in sorted(proven))
    cases = " ".join(["i32 0, label %next"] + [f"i32 {k}, label %reg.{k}" for k in sites])
    range_init = ""
    # the word a checking region sets when it verified its affine registers (lockstep.soft_dispatch)
    rng_alloca = "  %uni = alloca i32, align 4\n" if uniform else ""
    real = len(yields) < len(sites)
    fallback_text = f"""{'realfb' if soft else 'fallback'}:
  %fbf = load atomic ptr, ptr @"fbp.{func.name}" monotonic, align 8
  %g = call i32 %fbf(ptr %L, i64 %b, ptr %W, ptr %scratch, ptr %soa, i64 %n64)
  %gok = icmp eq i32 %g, 0
  br i1 %gok, label %next, label %gfail
gfail:
  ret i32 %g
"""
    if warp:
        rng_alloca = "  %rng = alloca [2 x i32], align 8\n"
        range_init = ("  store i32 0, ptr %rng\n  %rhi = getelementptr i32, ptr %rng, i64 1\n"
                      "  store i32 %n, ptr %rhi\n")
    pf_sites = block_prefetch.find_sites(flat, remat, sync_em.is_register)
    pf_call = ""
    if pf_sites:
        region_fns.append(block_prefetch.emit_prefetch_fn(func, flat, mctx, remat, pf_sites, sync_em.is_register))
        pf_call = block_prefetch.ahead_call(func.name, pf_sites, "%bx")
    block_fn = f"""define i32 {sym}(ptr %L, i64 %first, i64 %last, ptr %W) {{
entry:
{rng_alloca}{BLOCK_FN_ENTRY}  %nxy = mul i32 %bx, %by
  %n = mul i32 %nxy, %bz
  %n64 = zext i32 %n to i64
  %soaoff = mul i64 %n64, {fb}
  %soa = getelementptr i8, ptr %scratch, i64 %soaoff
  %gx64 = zext i32 %gx to i64
  %gy64 = zext i32 %gy to i64
  %ne = icmp ult i64 %first, %last
  br i1 %ne, label %head, label %done
head:
  %b = phi i64 [ %first, %entry ], [ %b.next, %next ]
{BLOCK_COORDS}{range_init}{pf_call}  %r0 = {call.format(func.name, 0)}
  br label %disp
{reg_blocks}disp:
  %s = phi i32 {incoming}
{phis}  switch i32 %s, label %other [ {cases} ]
other:
  %diverged = icmp eq i32 %s, -1
  br i1 %diverged, label %fallback, label %fail
{soft_text + (fallback_text if real else "") if soft else fallback_text}fail:
  %code = sub i32 %s, {FE.ST_ABORT_BASE}
  ret i32 %code
{BLOCK_NEXT}"""
    for a, _, _ in chains:
        block_fn = block_fn.replace(f'call i32 @"r{a}.{func.name}"(', f'call i32 @"wc{a}.{func.name}"(')
    slot = f'@"fbp.{func.name}" = global ptr null, align 8'
    extra = [BALLOT_FN.format(name=func.name, pred=FE.FH_PRED_IN, out=X_BALLOT)] if votes else []
    extra += xhelpers.values()
    if soft:
        extra.append(lowest_waiting(func.name, yields, len(sites)))
        if not real:
            slot = ""
    remat_fn = emit_remat_fn(func, flat, mctx, sync_em, remat, consts)
    if remat_fn is None:
        return None
    return region_fns + extra + [slot, block_fn], "\n".join(tables + [remat_fn, convert_fn]), fb
