"""A kernel's entry on the CPU: its parameter and shared-memory layout, and the choice of block function
(inlined thread loops, lockstep region loops, region loops with the scheduler as fallback, the scheduler alone)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ptx import ast as A
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.codegen.cpu.thread_loops import GROUP_BLOCKS, THREAD_START, emit_group_loops, emit_thread_loops
from ptx.codegen.cpu.lockstep import with_yields
from ptx.passes.sync_points import sync_kind
from ptx.codegen.cpu import block_prefetch
from ptx.codegen.cpu.block_abi import store_undef_regs
from ptx.codegen.cpu.uniform import rematerializable
from ptx.codegen.cpu.region_kernel import emit_region_kernel
from ptx.codegen.cpu.scheduler import FALLBACK_ENTRY, emit_barrier_block_fn, emit_sync_thread, emit_warp_block_fn
from ptx.codegen.module_context import (ModuleContext, assemble, kernel_shared_layout, layout_params, llvm_name,
                                        round_up, setup_addr_vars)


@dataclass
class KernelInfo:
    name: str
    symbol: str                      # LLVM name of the block-range function
    params: list                     # [(offset, size, align)]
    param_size: int
    static_shared_bytes: int
    local_bytes: int
    frame_bytes: int
    uses_sync: bool
    maxntid: tuple = None
    reqntid: tuple = None
    param_types: list = field(default_factory=list)   # PTX type names, for packing python args
    # what the runtime must allocate before the dynamic shared memory: the static bytes rounded up to
    # the dynamic arrays' alignment, plus room to align the base beyond the runtime's 128 bytes
    # (static_shared_bytes is what cuFuncGetAttribute reports: exactly what the variables take)
    shared_reserve_bytes: int = 0
    fallback_slot: str = None        # global holding the address of its lazily built fallback
    warp_regions: bool = False       # region loops with warp collectives (shfl, vote, redux, match, activemask) as split points
    interleave: bool = False         # its blocks run rounds that call ptx_rt_rotate (ptxrt.h PTXRT_HINT_INTERLEAVE)


def emit_kernel(func: A.Function, flat, mctx: ModuleContext, has_sync: bool, out_funcs: list):
    params, param_size = layout_params(func.params)
    mctx.kernel_params = {p.name: off for p, (off, _, _) in zip(func.params, params)}
    # kernel-body shared variables after the common ones; `extern .shared` ones at the dynamic base
    off, dyn_align, dyn_names = kernel_shared_layout(flat, mctx, max(16, mctx.dynamic_shared_align),
                                                     mctx.dynamic_shared_names)
    static_shared = off - mctx.reserved_smem_bytes  # NVIDIA reports the variables, not the reservation
    dyn_base = round_up(off, dyn_align) if off else 0
    for n in dyn_names:
        mctx.shared_kernel[n] = dyn_base
    shared_reserve = dyn_base + max(mctx.shared_align - FE.RUNTIME_SHARED_ALIGN, 0)

    sym = llvm_name("k", func.name)
    fallback_slot = None
    warp_ops = False
    mctx.rotates = False
    lock = None if has_sync or not mctx.lockstep else emit_lockstep_kernel(func, flat, mctx, sym)
    if lock:
        region_fns, frame_bytes, local_bytes = lock
        out_funcs.extend(region_fns)
    elif not has_sync:
        group = not (off or dyn_names or mctx.reserved_smem_bytes or uses_shared(flat))
        text, local_bytes = emit_fast_kernel(func, flat, mctx, sym, group)
        frame_bytes = 0
        out_funcs.append(text)
    else:
        syncs = [st for st in flat.body if isinstance(st, A.Instruction) and sync_kind(st)]
        has_red = any(st.opcode in ("bar", "barrier") and "red" in st.mods for st in syncs)
        warp_ops = any(sync_kind(st) == "warp" for st in syncs)
        barrier_only = not warp_ops and not has_red
        soft = with_yields(flat) if mctx.lockstep and barrier_only else None
        region = None
        if soft is not None:
            text, frame_bytes, local_bytes, sync_sites, sync_em = emit_sync_thread(func, soft, mctx)
            region = emit_region_kernel(func, soft, mctx, sym, frame_bytes, sync_em, soft=True)
        if not region:
            text, frame_bytes, local_bytes, sync_sites, sync_em = emit_sync_thread(func, flat, mctx)
            region = not has_red and emit_region_kernel(func, flat, mctx, sym, frame_bytes, sync_em,
                                                         warp=warp_ops)
        out_funcs.append(text)
        if region:
            # The resumable thread now only serves the rare fallback, which goes to a module of its
            # own, compiled on first use (ptx.host): about half the compile time of such a kernel.
            out_funcs.pop()
            region_fns, convert_fn, frame_bytes = region
            out_funcs.extend(region_fns)
            head, _, rest = text.partition("\n")
            mctx.fallback_funcs.append(head.replace(") {", ") noinline optsize cold {", 1) + "\n" + rest)
            if warp_ops:
                fallback = emit_warp_block_fn(func, f'@"gb.{func.name}"', frame_bytes, mctx,
                                               from_frames=True)
            else:
                fallback = emit_barrier_block_fn(func, f'@"gb.{func.name}"', frame_bytes, [],
                                                  from_frames=True)
            head, _, rest = fallback.partition("\n")
            mctx.fallback_funcs.append(head.replace(") {", ") noinline optsize cold {", 1) + "\n" + rest)
            mctx.fallback_funcs.append(convert_fn)
            mctx.fallback_funcs.append(FALLBACK_ENTRY.format(name=func.name))
            fallback_slot = f"fbp.{func.name}"
            frame_bytes *= 2        # AoS frames of the fallback, then the regions' SoA slots
        elif barrier_only:
            out_funcs.append(emit_barrier_block_fn(func, sym, frame_bytes, sync_sites))
        else:
            out_funcs.append(emit_warp_block_fn(func, sym, frame_bytes, mctx))
    return KernelInfo(func.name, f"k.{func.name}", params, param_size, static_shared, local_bytes,
                      frame_bytes, has_sync, func.directives.get("maxntid"),
                      func.directives.get("reqntid"), [p.type.name for p in func.params], shared_reserve,
                      fallback_slot=fallback_slot, warp_regions=bool(fallback_slot) and warp_ops,
                      interleave=mctx.rotates)


def emit_lockstep_kernel(func, flat, mctx, sym):
    """A barrier-free kernel with loops as region loops split at yields (cpu/lockstep.py): (functions, frame
    bytes, local bytes), or None. There is no fallback: every site is a yield, nothing for threads to disagree on."""
    soft = with_yields(flat)
    if soft is None:
        return None
    _, frame_bytes, local_bytes, _, sync_em = emit_sync_thread(func, soft, mctx)
    region = emit_region_kernel(func, soft, mctx, sym, frame_bytes, sync_em, soft=True)
    if not region:
        return None
    region_fns, _, frame_bytes = region
    return region_fns, 2 * frame_bytes, local_bytes     # the block function's SoA slots start after n frames


def uses_shared(flat) -> bool:
    """Whether any instruction names a shared state space (a block's own memory, which blocks run together would
    have to keep apart)."""
    return any(isinstance(st, A.Instruction) and any(m.startswith("shared") for m in st.mods) for st in flat.body)


def emit_fast_kernel(func, flat, mctx, sym, group=False):
    """A barrier-free kernel as thread loops inside a loop over its blocks; group: several blocks of a grid row at
    once (thread_loops.emit_group_loops)."""
    em = FunctionEmitter(mctx, flat, "fast")
    em.entry_code = []
    setup_addr_vars(em, flat, in_frame=False)
    local_bytes = sum(s for _, s in em.addr_vars.values())
    f = em.f
    bx, by, bz = em.ntid(0), em.ntid(1), em.ntid(2)
    gx, gy = em.nctaid(0), em.nctaid(1)
    em.exit_label = "tx.latch"
    f.label("blk.pre")
    f.emit("%blk.ne = icmp ult i64 %first, %last")
    f.term("br i1 %blk.ne, label %blk.head, label %done")
    f.label("blk.head")
    f.emit("%b = phi i64 [ %first, %blk.pre ], [ %b.next, %blk.latch ]")
    f.emit(f"%gx64 = zext i32 {gx} to i64")
    f.emit(f"%gy64 = zext i32 {gy} to i64")
    f.emit("%bq = udiv i64 %b, %gx64")
    f.emit("%bx.r = urem i64 %b, %gx64")
    f.emit("%by.r = urem i64 %bq, %gy64")
    f.emit("%bz.r = udiv i64 %bq, %gy64")
    f.emit("%ctaid.x = trunc i64 %bx.r to i32")
    f.emit("%ctaid.y = trunc i64 %by.r to i32")
    f.emit("%ctaid.z = trunc i64 %bz.r to i32")
    step = "1"
    pf_fn = None
    if group:
        # the blocks left in this grid row and in the range, at most GROUP_BLOCKS
        f.emit("%grow = sub i64 %gx64, %bx.r")
        f.emit("%grng = sub i64 %last, %b")
        f.emit("%gmin = call i64 @llvm.umin.i64(i64 %grow, i64 %grng)")
        f.emit(f"%gn64 = call i64 @llvm.umin.i64(i64 %gmin, i64 {GROUP_BLOCKS})")
        f.emit("%gn = trunc i64 %gn64 to i32")
        mctx.declare("declare i64 @llvm.umin.i64(i64, i64)")
        remat = rematerializable(flat.body, em.is_register)
        pf_sites = block_prefetch.find_sites(flat, remat, em.is_register)
        start = "blk.head"
        if pf_sites:
            # blocks of several rows of threads: the next group's lines while this one runs (a 16x16 block's rows
            # are short runs far apart, which the hardware prefetchers do not follow; a group of one row is one
            # run a site, which they do, and there the calls cost: Black-Scholes 26 -> 28 ms)
            pf_fn = block_prefetch.emit_prefetch_fn(func, flat, mctx, remat, pf_sites, em.is_register)
            f.term("br i1 " + f.op(f"icmp ugt i32 {by}, 1") + ", label %pf.call, label %pf.skip")
            f.label("pf.call")
            f.emit("%pf.cx = add i32 %ctaid.x, %gn")
            f.emit(block_prefetch.call(func.name, "%pf.cx", "%ctaid.y", "%ctaid.z", "%gn").strip())
            f.term("br label %pf.skip")
            f.label("pf.skip")
            start = "pf.skip"
        emit_group_loops(em, start, (bx, by, bz), "blk.latch", "%gn")
        step = "%gn64"
    else:
        emit_thread_loops(em, "blk.head", (bx, by, bz), "blk.latch")
    f.label("blk.latch")
    f.emit(f"%b.next = add nuw i64 %b, {step}")
    f.emit("%b.c = icmp ult i64 %b.next, %last")
    f.term("br i1 %b.c, label %blk.head, label %done")
    f.label("done")
    f.term("ret i32 0")
    undef = store_undef_regs(em)
    f.lines = [x for line in f.lines for x in (undef if line is THREAD_START else (line,))]
    header = f"define i32 {sym}(ptr %L, i64 %first, i64 %last, ptr %W) {{"
    text = assemble(header, em, ["  br label %blk.pre"], f.lines, [])
    return (text + "\n" + pf_fn if pf_fn else text), local_bytes
