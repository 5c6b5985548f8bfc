"""Next-block prefetch for region kernels: a global load whose address the block's ids and parameters fix, consecutive
in %tid.x (a reduction's `in[blockIdx.x * 256 + t]`), has its lines a few blocks ahead prefetched at each block's
start, so a worker's loads do not wait on memory between the barrier-separated work of its blocks."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen.cpu import affine
from ptx.codegen.cpu.block_abi import region_entry
from ptx.codegen.cpu.uniform import remat_chain
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.codegen.module_context import assemble

ENABLED = True          # tests and benchmarks compare with none
MAX_SITES = 4
AHEAD_BYTES = 8192      # how far ahead of a block's loads the prefetched lines lie (all sites together)
MAX_DISTANCE = 16       # blocks
MAX_SITE_BYTES = 4096   # lines of one site per row of threads
MAX_ROWS = 32           # rows of threads (tid.y) a call prefetches for


def find_sites(flat, remat, is_reg) -> list:
    """[(address base register, offset, bytes per thread)] of the body's global loads through a rematerialisable
    register whose slope in %tid.x is 1 to 16 bytes (one per 64-byte line of a base); none where not ENABLED."""
    if not ENABLED:
        return []
    slopes = None
    out, seen = [], set()
    for st in flat.body:
        if not (isinstance(st, A.Instruction) and st.opcode == "ld" and "global" in st.mods
                and len(st.operands) == 2 and isinstance(st.operands[1], A.Address)):
            continue
        addr = st.operands[1]
        if not addr.base or not is_reg(addr.base) or addr.base not in remat:
            continue
        slopes = slopes or affine.Slopes(flat.body, is_reg)
        s = slopes.of_reg(addr.base)
        if s is None or not 0 < s[0] <= 16:
            continue
        key = (addr.base, addr.offset // 64)
        if key in seen:
            continue
        seen.add(key)
        out.append((addr.base, addr.offset, s[0]))
        if len(out) == MAX_SITES:
            break
    return out


def emit_prefetch_fn(func, flat, mctx, remat, sites, is_reg) -> str:
    """`void @"pf.NAME"(ptr %L, ptr %W, i32 %ctaid.x, i32 %ctaid.y, i32 %ctaid.z, i32 %nblk)`: the sites' lines
    for the blocks ctaid.x to ctaid.x + nblk - 1 of a grid row (none past its end), from each row of threads'
    first thread (tid.z 0; at most MAX_ROWS rows). Only pure operations recompute the addresses
    (uniform.REMAT_OPS: no division, nothing traps), and a prefetch never faults."""
    em = FunctionEmitter(mctx, flat, "region")
    em.entry_code = []
    f = em.f
    mctx.declare("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)")
    mctx.declare("declare i32 @llvm.umin.i32(i32, i32)")
    mctx.declare("declare i32 @llvm.umax.i32(i32, i32)")      # (ahead_call's)
    bx, by, gx = em.ntid(0), em.ntid(1), em.nctaid(0)
    inside = f.op(f"icmp ult i32 %ctaid.x, {gx}")
    f.term(f"br i1 {inside}, label %go, label %out")
    f.label("go")
    left = f.op(f"sub i32 {gx}, %ctaid.x")
    nblk = f.op(f"call i32 @llvm.umin.i32(i32 %nblk, i32 {left})")
    rows = f.op(f"call i32 @llvm.umin.i32(i32 {by}, i32 {MAX_ROWS})")
    f.term("br label %row")
    f.label("row")
    f.emit("%pf.ty = phi i32 [ 0, %go ], [ %pf.ty.next, %row.end ]")
    em.tid = ["0", "%pf.ty", "0"]
    for i in remat_chain([b for b, _, _ in sites], remat, flat.body, is_reg):
        em.cur_index = i
        em.emit_instruction(flat.body[i])
    for n, (base, off, s) in enumerate(sites):
        f.term(f"br label %pfpre.{n}")
        f.label(f"pfpre.{n}")        # (the chain's instructions may have opened blocks of their own)
        a = em.read(A.Reg(base), "u64")
        if off:
            a = f.op(f"add i64 {a}, {off}")
        p = em.int_to_ptr(a)
        span = f.op("mul i32 " + f.op(f"mul i32 {bx}, {s}") + f", {nblk}")
        ext = f.op("zext i32 " + f.op(f"call i32 @llvm.umin.i32(i32 {span}, i32 {MAX_SITE_BYTES})") + " to i64")
        f.term(f"br label %pf.{n}")
        f.label(f"pf.{n}")
        j = f"%pfj.{n}"
        f.emit(f"{j} = phi i64 [ 0, %pfpre.{n} ], [ %pfk.{n}, %pf.{n} ]")
        line = f.op(f"getelementptr i8, ptr {p}, i64 {j}")
        f.emit(f"call void @llvm.prefetch.p0(ptr {line}, i32 0, i32 3, i32 1)")
        f.emit(f"%pfk.{n} = add i64 {j}, 64")
        f.term("br i1 " + f.op(f"icmp ult i64 %pfk.{n}, {ext}") + f", label %pf.{n}, label %pf.{n}.end")
        f.label(f"pf.{n}.end")
    f.term("br label %row.end")
    f.label("row.end")
    f.emit("%pf.ty.next = add nuw i32 %pf.ty, 1")
    f.term("br i1 " + f.op(f"icmp ult i32 %pf.ty.next, {rows}") + ", label %row, label %out")
    f.label("out")
    f.term("ret void")
    header = (f'define internal void @"pf.{func.name}"(ptr %L, ptr %W, i32 %ctaid.x, i32 %ctaid.y, '
              f'i32 %ctaid.z, i32 %nblk) noinline {{')
    return assemble(header, em, region_entry(bx, by, em.ntid(2)), f.lines, [])


def call(name, cx, cy, cz, nblk) -> str:
    """The line calling emit_prefetch_fn's function for `nblk` blocks from (cx, cy, cz)."""
    return f'  call void @"pf.{name}"(ptr %L, ptr %W, i32 {cx}, i32 {cy}, i32 {cz}, i32 {nblk})\n'


def ahead_call(name, sites, bx) -> str:
    """A region kernel's block function's call at a block's start (after block_abi.BLOCK_COORDS): the block D
    ahead along x, D blocks covering AHEAD_BYTES of the sites' loads (1 to MAX_DISTANCE)."""
    per = sum(s for _, _, s in sites)
    return (f"  %pf.s = mul i32 {bx}, {per}\n"
            f"  %pf.s1 = call i32 @llvm.umax.i32(i32 %pf.s, i32 1)\n"
            f"  %pf.d0 = udiv i32 {AHEAD_BYTES}, %pf.s1\n"
            f"  %pf.d1 = call i32 @llvm.umax.i32(i32 %pf.d0, i32 1)\n"
            f"  %pf.d = call i32 @llvm.umin.i32(i32 %pf.d1, i32 {MAX_DISTANCE})\n"
            f"  %pf.cx = add i32 %cx, %pf.d\n" + call(name, "%pf.cx", "%cy", "%cz", 1))
