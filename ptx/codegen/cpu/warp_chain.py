"""Warp chains: a run of regions joined by warp collectives whose lanes are known when the kernel is compiled
(shuffles with constant distance and clamp, votes, integer reduxes and activemask, each with a full mask), from the
kernel's start, a barrier or such a shuffle to the next barrier or the exit, run as one loop over the block's warps
with each warp's 32 lanes written out: a shuffle is a read of another lane's value in a register, a vote or redux
an expression over the lanes' registers, instead of a pass over the block through exchange slots (a warp
reduction's five steps: one pass, not five)."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.codegen.cpu.block_abi import region_entry, store_undef_regs
from ptx.codegen.cpu.regions import region_exits, region_reach
from ptx.codegen.cpu.slot_scopes import SlotScopes
from ptx.codegen.cpu.uniform import remat_chain
from ptx.codegen.cpu.warp_collectives import const_operand, warp_barrier
from ptx.codegen.module_context import assemble
from ptx.passes.liveness import defs_uses
from ptx.passes.sync_points import sync_kind

LANES = 32
ENABLED = True          # tests compare against the regions one by one
PLAIN_ONLY = False      # tests: the chain functions take the regions one by one even for whole warps
# the statements of one chain, before each is written out 32 times (LLVM's time grows with the copies)
MAX_CHAIN_STATEMENTS = 160


def shfl_source(mode, lane, b, c):
    """(source lane, predicate) of PTX shfl for `lane` with distance/index b and clamp word c."""
    bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
    maxl, minl = (lane & seg) | (cval & ~seg & 31), lane & seg
    if mode == "up":
        j = lane - bval
        ok = j >= maxl
    elif mode == "down":
        j = lane + bval
        ok = j <= maxl
    elif mode == "bfly":
        j = lane ^ bval
        ok = j <= maxl
    else:
        j = minl | (bval & ~seg & 31)
        ok = j <= maxl
    return (j if ok else lane), ok


def lane_shfl(st, flat, remat):
    """(mode, b, c) of a shuffle every lane of a full warp takes with operands known now, else None."""
    from ptx.codegen.ops_warp import SHFL_MODES
    if st.opcode != "shfl" or st.guard or len(st.operands) < 4 or "b32" not in st.mods:
        return None
    mode = next((m for m in st.mods if m in SHFL_MODES), None)
    ops = st.operands
    b, c = (const_operand(FE.FH_B, op, flat, remat) for op in ops[2:4])
    mask = const_operand(FE.FH_MASK, ops[4] if "sync" in st.mods and len(ops) > 4 else None, flat, remat)
    if mode is None or b is None or c is None or mask != 0xFFFFFFFF:
        return None
    return mode, b, c


def lane_collective(st, flat, remat):
    """A shuffle as lane_shfl, or a vote, an integer redux.sync or activemask with a full mask: ("shfl", mode, b, c),
    ("vote", mode), ("redux", op, type), ("activemask",); else None. The warp's lanes are all live in a chain, so a
    full mask is every lane's."""
    from ptx.codegen.ops_warp import REDUX_OPS, VOTE_MODES
    from ptx.codegen import ptxtypes as T
    if st.opcode == "shfl":
        got = lane_shfl(st, flat, remat)
        return got and ("shfl",) + got
    if st.guard:
        return None
    ops, sync = st.operands, "sync" in st.mods
    if st.opcode == "vote":
        mode = next((m for m in st.mods if m in VOTE_MODES), None)
        mask = const_operand(FE.FH_MASK, ops[2] if sync and len(ops) > 2 else None, flat, remat)
        return ("vote", mode) if mode and len(ops) >= 2 and mask == 0xFFFFFFFF else None
    if st.opcode == "redux":
        ts = T.types_in(st.mods)
        op = next((m for m in st.mods if m in REDUX_OPS), None)
        if not (op and ts and len(ops) >= 3 and not T.is_float(ts[-1]) and T.bits_of(ts[-1]) == 32):
            return None
        return ("redux", op, ts[-1]) if const_operand(FE.FH_MASK, ops[2], flat, remat) == 0xFFFFFFFF else None
    if st.opcode == "activemask" and len(ops) == 1:
        return ("activemask",)
    if warp_barrier(st) and const_operand(FE.FH_MASK, ops[0], flat, remat) == 0xFFFFFFFF:
        return ("warpsync",)    # the lanes run each segment in turn: every one has arrived
    return None


def _plain_barrier(st):
    return (isinstance(st, A.Instruction) and st.opcode in ("bar", "barrier") and not st.guard
            and sync_kind(st) == "barrier" and not ({"red", "arrive"} & set(st.mods)))


def find_chains(flat, sync_sites, succ, remat):
    """[(first site, [(site, statements it runs to its end), ...], end site or 0)]: chains from the kernel's start,
    a barrier or a lane-known shuffle through one or more lane-known collectives to a barrier, the exit or a shuffle
    the region after which cannot join, each region on the way free of loops, with every path to the one next site
    (or, in the last, every path to a ret or exit)."""
    body = flat.body
    by_idx = {s[4]: s[0] for s in sync_sites}
    idx_of = {s[0]: s[4] for s in sync_sites}

    def segment(k):
        start = 0 if k == 0 else idx_of[k] + 1
        reach = region_reach(body, succ, start)
        ends = [i for i in reach if isinstance(body[i], A.Instruction) and sync_kind(body[i])]
        if any(j <= i for i in reach if i not in ends for j in succ[i]):
            return None         # a loop: each lane's copy would run it alone
        if not ends:
            # every thread exits (a warp reduction's last store): the chain's end; a fall off the body's end is not
            # a statement the lanes can end at
            last = max(reach)
            if not (isinstance(body[last], A.Instruction) and body[last].opcode in ("ret", "exit")
                    and not body[last].guard):
                return None
            return 0, sorted(reach)
        if len(ends) != 1 or ends[0] not in by_idx or region_exits(body, reach, start):
            return None
        return by_idx[ends[0]], sorted(reach)

    chains, inside = [], set()
    starts = [0] + [k for k, *_, idx in sync_sites
                    if _plain_barrier(body[idx]) or (lane_collective(body[idx], flat, remat) or ("",))[0]
                    in ("shfl", "warpsync")]
    for a in starts:
        if a in inside:
            continue            # a chain before runs through it
        segs, k, size = [], a, 0
        while True:
            got = segment(k)
            if got is None or size + len(got[1]) > MAX_CHAIN_STATEMENTS:
                # the region after this shuffle cannot join (a loop, an exit on some paths): the chain ends at the
                # shuffle, its inputs left in the exchange slot for that region
                if not (segs and body[idx_of[k]].opcode == "shfl"):
                    segs = []
                nxt = k
                break
            nxt, reach = got
            size += len(reach)
            segs.append((k, reach))
            if nxt == 0:
                break
            st = body[idx_of[nxt]]
            if _plain_barrier(st):
                break
            if lane_collective(st, flat, remat) is None:
                segs = []
                break
            k = nxt
        # (warp barriers alone gain nothing: their lanes trade through shared memory either way, and a region's
        # loop over the threads vectorises where 32 lanes' scalar copies may not)
        if len(segs) > 1 and any(lane_collective(body[idx_of[k]], flat, remat)[0] != "warpsync" for k, _ in segs[1:]):
            chains.append((a, segs, nxt))
            inside |= {k for k, _ in segs[1:]}
    return chains


def emit_chain_fn(func, flat, mctx, sync_em, chain, live, remat, consts):
    """The chain's function: where the block's live threads are whole warps of rows of whole warps, each warp's
    lanes one after the other through every region of the chain (registers per lane, shuffles between them); else
    the first region's own loop (its callers then run the others)."""
    a, segs, end = chain
    body = flat.body
    idx_of = {s[0]: s[4] for s in sync_em.sync_sites}
    reg_off = sync_em.reg_off
    em = FunctionEmitter(mctx, flat, "region")
    em.entry_code = []
    em.region_site = a
    f = em.f
    f.terminated = True
    scopes = SlotScopes(mctx)
    bx, by, bz = em.ntid(0), em.ntid(1), em.ntid(2)
    lane_regs = [{} for _ in range(LANES)]
    lane_tid = [[f"%tx.{l}", "%ty0", "%tz0"] for l in range(LANES)]
    written = set()

    def lane(l, prefix):
        em.regs, em.tid, em.label_prefix = lane_regs[l], lane_tid[l], prefix

    def at(off, ty, l):
        """Lane l's element of the SoA slot at frame offset `off` (a register's, or a shuffle's exchange slot)."""
        offs.add(off)
        p = f.op(f"getelementptr i8, ptr %soa, i64 %so.{off}")
        return f.op(f"getelementptr {ty}, ptr {p}, i64 %t.{l}")

    def slot(name, ty, l):
        return at(reg_off[name], ty, l)

    def shfl_write(st, v, ok):
        """A lane's shuffle result and predicate to its registers."""
        dst = em.normalize(st.operands[0])
        d, p = (dst.first, dst.second) if isinstance(dst, A.PredPair) else (dst, None)
        em.cur_ins = st
        em.write(d, v, "b32")
        if p is not None:
            em.write(p, "true" if ok else "false", "pred")
        written.update(defs_uses(st, em.is_register)[0])

    def whole_warp(st, kind, k):
        """vote, redux or activemask over the warp's 32 lanes, each lane's result written to its register."""
        if kind[0] == "warpsync":
            return
        dst = em.normalize(st.operands[0])
        if kind[0] == "activemask":
            res, rty = "-1", "b32"
        elif kind[0] == "vote":
            src = em.normalize(st.operands[1])
            ballot = "0"
            for l in range(LANES):
                lane(l, f"x{k}.l{l}.")
                bit = f.op(f"zext i1 {em.read(src, 'pred')} to i32")
                ballot = f.op(f"or i32 {ballot}, " + (f.op(f"shl i32 {bit}, {l}") if l else bit))
            mode = kind[1]
            rty = "b32" if mode == "ballot" else "pred"
            if mode == "ballot":
                res = ballot
            elif mode == "any":
                res = f.op(f"icmp ne i32 {ballot}, 0")
            elif mode == "all":
                res = f.op(f"icmp eq i32 {ballot}, -1")
            else:
                none, every = f.op(f"icmp eq i32 {ballot}, 0"), f.op(f"icmp eq i32 {ballot}, -1")
                res = f.op(f"or i1 {none}, {every}")
        else:
            _, op, ty = kind
            src = em.normalize(st.operands[1])
            signed = ty.startswith("s")
            fn = {"add": "add", "and": "and", "or": "or", "xor": "xor",
                  "min": "smin" if signed else "umin", "max": "smax" if signed else "umax"}[op]
            if fn in ("smin", "umin", "smax", "umax"):
                mctx.declare(f"declare i32 @llvm.{fn}.i32(i32, i32)")
            res = None
            for l in range(LANES):
                lane(l, f"x{k}.l{l}.")
                v = em.read(src, ty)
                res = v if res is None else f.op(f"{fn} i32 {res}, {v}" if fn in ("add", "and", "or", "xor")
                                                 else f"call i32 @llvm.{fn}.i32(i32 {res}, i32 {v})")
            rty = ty
        for l in range(LANES):
            lane(l, f"x{k}.l{l}.")
            em.write(dst, res, rty)
        written.update(defs_uses(st, em.is_register)[0])

    em_x_read_off = getattr(sync_em, "x_read_off", None)
    offs = set()
    f.label("w.body")
    mark = len(f.lines)
    for l in range(LANES):
        f.emit(f"%t.{l} = add nuw nsw i64 %t0, {l}")     # consecutive, as LLVM sees it
        f.emit(f"%tx.{l} = or i32 %tx0, {l}")
    if a:
        entry_live = [n for n in sync_em.regs if n in live[idx_of[a]] and em.is_register(n)]
        need = [n for n in entry_live if n in remat]
        for l in range(LANES):
            lane(l, f"s.l{l}.")
            for name in entry_live:
                if name in remat:
                    continue
                if name not in reg_off:
                    return None
                ty, ptr = em.reg(name)
                v = f.op(f"load {ty}, ptr {slot(name, ty, l)}")
                f.lines[-1] += scopes.mark(reg_off[name])
                f.emit(f"store {ty} {v}, ptr {ptr}")
            for i in remat_chain(need, remat, body, em.is_register):
                em.cur_index = i
                em.emit_instruction(body[i])
        st = body[idx_of[a]]
        if st.opcode == "shfl":
            # a chain that starts at a shuffle: each lane's source lane's value in the slot the region before
            # stored (every lane of the warp is live)
            mode, b, c = lane_shfl(st, flat, remat)
            off = em_x_read_off if a in sync_em.x_self else sync_em.x_slots[a]
            for l in range(LANES):
                lane(l, f"s.l{l}.")
                j, ok = shfl_source(mode, l, b, c)
                shfl_write(st, f.op(f"load i32, ptr {at(off, 'i32', j)}"), ok)
    for n_seg, (k, reach) in enumerate(segs):
        # the sync instruction (the last in body order: no loops); none where the threads exit
        end_idx = reach[-1] if n_seg + 1 < len(segs) or end else None
        for l in range(LANES):
            lane(l, f"c{k}.l{l}.")
            em.exit_label = f"c{k}.l{l}.end"
            for i in reach:
                st = body[i]
                em.cur_index = i
                if i == end_idx:
                    continue
                if isinstance(st, A.Label):
                    f.label(em.label_name(st.name))
                else:
                    em.emit_instruction(st)
                    written |= defs_uses(st, em.is_register)[0]
            f.label(f"c{k}.l{l}.end")
        if n_seg + 1 == len(segs):
            break
        st = body[end_idx]
        em.cur_ins, em.cur_index = st, end_idx
        kind = lane_collective(st, flat, remat)
        if kind[0] == "shfl":
            # every lane reads its source lane's value, then every lane writes its own
            _, mode, b, c = kind
            src_op = em.normalize(st.operands[1])
            got = []
            for l in range(LANES):
                j, ok = shfl_source(mode, l, b, c)
                lane(j, f"x{k}.l{l}.")
                got.append((em.read(src_op, "b32"), ok))
            for l, (v, ok) in enumerate(got):
                lane(l, f"x{k}.l{l}.")
                shfl_write(st, v, ok)
        else:
            whole_warp(st, kind, k)
    # the barrier that ends the chain: the registers live after it that the chain wrote, to their slots
    saved = [n for n in sync_em.regs if end and n in live[idx_of[end]] and n in written and n not in consts
             and n not in remat and em.is_register(n)]
    for l in range(LANES):
        lane(l, f"e.l{l}.")
        for name in saved:
            if name not in reg_off or name not in lane_regs[l]:
                return None
            ty, ptr = lane_regs[l][name]
            if sync_em.regs[name][0] != ty:
                return None
            v = f.op(f"load {ty}, ptr {ptr}")
            f.emit(f"store {ty} {v}, ptr {slot(name, ty, l)}")
            f.lines[-1] += scopes.mark(reg_off[name])
    if end and body[idx_of[end]].opcode == "shfl":
        # a chain that ends at a shuffle: each lane's value for it, where the region after reads it
        st = body[idx_of[end]]
        em.cur_ins, em.cur_index = st, idx_of[end]
        src = em.normalize(st.operands[1])
        for l in range(LANES):
            lane(l, f"e.l{l}.")
            f.emit(f"store i32 {em.read(src, 'b32')}, ptr {at(sync_em.x_slots[end], 'i32', l)}")
    f.term("br label %w.latch")
    undef = []
    for regs in lane_regs:
        em.regs = regs
        undef += store_undef_regs(em)
    f.lines[mark:mark] = undef
    name = func.name
    args = "ptr %L, ptr %W, ptr %soa, i32 %ctaid.x, i32 %ctaid.y, i32 %ctaid.z, ptr %rng"
    after_entry = region_entry(bx, by, bz) + [
                   "  %lo = load i32, ptr %rng", "  %hip = getelementptr i32, ptr %rng, i64 1",
                   "  %hi = load i32, ptr %hip"]
    after_entry += [f"  %so.{o} = mul i64 %n64, {o}" for o in sorted(offs)]
    # whole warps only, and rows of whole warps (a warp's lanes then share %tid.y and %tid.z)
    after_entry += [f"  %ends = or i32 %lo, %hi", f"  %ends.x = or i32 %ends, {bx}",
                    "  %ends.m = and i32 %ends.x, 31", "  %aligned = icmp eq i32 %ends.m, 0",
                    "  %some = icmp ult i32 %lo, %hi",
                    f"  %ok = and i1 {'false' if PLAIN_ONLY else '%aligned'}, %some",
                    "  br i1 %ok, label %w.pre, label %plain",
                    "plain:", f'  %pr = call i32 @"r{a}.{name}"({args})', "  ret i32 %pr",
                    "w.pre:", "  %w.first = lshr i32 %lo, 5", "  %w.end = lshr i32 %hi, 5", "  br label %w.head",
                    "w.head:", "  %w = phi i32 [ %w.first, %w.pre ], [ %w.next, %w.latch ]",
                    "  %lin0 = shl i32 %w, 5", "  %t0 = zext i32 %lin0 to i64",
                    f"  %row = udiv i32 %lin0, {bx}", f"  %rowx = mul i32 %row, {bx}",
                    "  %tx0.r = sub i32 %lin0, %rowx",
                    "  %tx0 = and i32 %tx0.r, -32",     # it is: LLVM then knows each lane's low bits
                    f"  %ty0 = urem i32 %row, {by}", f"  %tz0 = udiv i32 %row, {by}",
                    "  br label %w.body"]
    # the lanes of a warp are its vectors (LLVM's SLP vectorizer over consecutive lanes' slots); vectorized
    # over warps instead, every slot access becomes a gather (AVX-512 targets: 5x slower warp reductions)
    mctx.add_helper("warp_chain.md", '!8980 = distinct !{!8980, !8981}\n'
                                     '!8981 = !{!"llvm.loop.vectorize.enable", i1 false}')
    footer = ["w.latch:", "  %w.next = add nuw i32 %w, 1", "  %w.more = icmp ult i32 %w.next, %w.end",
              "  br i1 %w.more, label %w.head, label %w.done, !llvm.loop !8980", "w.done:", f"  ret i32 {end}"]
    lines = f.lines
    scopes.apply(lines, after_entry)
    header = (f'define internal i32 @"wc{a}.{name}"(ptr %L, ptr %W, ptr noalias %soa, i32 %ctaid.x, i32 %ctaid.y, '
              f'i32 %ctaid.z, ptr %rng) noinline {{')
    return assemble(header, em, after_entry, lines, footer)
