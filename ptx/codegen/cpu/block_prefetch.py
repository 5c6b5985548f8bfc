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
MAX_SITE_BYTES = 4096   # lines of one site per block


def find_sites(flat, remat, is_reg) -> list:
    """[(address base register, offset, bytes per thread)] of the body's global loads through a rematerialisable
    register whose slope in %tid.x is 1 to 16 bytes (one per 64-byte line of a base)."""
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
    """`void @"pf.NAME"(ptr %L, ptr %W, i32 %ctaid.x, i32 %ctaid.y, i32 %ctaid.z)`: the sites' lines for the block
    D along x (D blocks cover AHEAD_BYTES of the sites' loads), thread (0, 0, 0)'s address onwards; nothing past
    the grid's row. Only pure operations recompute the addresses (uniform.REMAT_OPS: no division, nothing traps)."""
    em = FunctionEmitter(mctx, flat, "region")
    em.entry_code = []
    f = em.f
    bx = em.ntid(0)
    span = f.op(f"mul i32 {bx}, {sum(s for _, _, s in sites)}")
    spanned = f.op(f"call i32 @llvm.umax.i32(i32 {span}, i32 1)")
    d = f.op(f"udiv i32 {AHEAD_BYTES}, {spanned}")
    d = f.op("call i32 @llvm.umin.i32(i32 " + f.op(f"call i32 @llvm.umax.i32(i32 {d}, i32 1)") + f", i32 {MAX_DISTANCE})")
    cx = f.op(f"add i32 %ctaid.x, {d}")
    inside = f.op(f"icmp ult i32 {cx}, {em.nctaid(0)}")
    f.term(f"br i1 {inside}, label %go, label %out")
    f.label("go")
    em.tid = ["0", "0", "0"]
    em.ctaid = [cx, "%ctaid.y", "%ctaid.z"]
    for i in remat_chain([b for b, _, _ in sites], remat, flat.body, is_reg):
        em.cur_index = i
        em.emit_instruction(flat.body[i])
    mctx.declare("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)")
    mctx.declare("declare i32 @llvm.umin.i32(i32, i32)")
    mctx.declare("declare i32 @llvm.umax.i32(i32, i32)")
    for n, (base, off, s) in enumerate(sites):
        f.term(f"br label %pfpre.{n}")
        f.label(f"pfpre.{n}")        # (the chain's instructions may have opened blocks of their own)
        a = em.read(A.Reg(base), "u64")
        if off:
            a = f.op(f"add i64 {a}, {off}")
        p = em.int_to_ptr(a)
        ext = f.op("zext i32 " + f.op("call i32 @llvm.umin.i32(i32 " + f.op(f"mul i32 {bx}, {s}") +
                                      f", i32 {MAX_SITE_BYTES})") + " to i64")
        f.term(f"br label %pf.{n}")
        f.label(f"pf.{n}")
        j = f"%pfj.{n}"
        f.emit(f"{j} = phi i64 [ 0, %pfpre.{n} ], [ %pfk.{n}, %pf.{n} ]")
        f.emit("call void @llvm.prefetch.p0(ptr " + f.op(f"getelementptr i8, ptr {p}, i64 {j}") + ", i32 0, i32 3, i32 1)")
        f.emit(f"%pfk.{n} = add i64 {j}, 64")
        f.term("br i1 " + f.op(f"icmp ult i64 %pfk.{n}, {ext}") + f", label %pf.{n}, label %pf.{n}.end")
        f.label(f"pf.{n}.end")
    f.term("br label %out")
    f.label("out")
    f.term("ret void")
    bxs, bys, bzs = em.ntid(0), em.ntid(1), em.ntid(2)
    header = (f'define internal void @"pf.{func.name}"(ptr %L, ptr %W, i32 %ctaid.x, i32 %ctaid.y, '
              f'i32 %ctaid.z) noinline {{')
    return assemble(header, em, region_entry(bxs, bys, bzs), f.lines, [])


def call_line(name) -> str:
    """The block function's call at a block's start (after block_abi.BLOCK_COORDS)."""
    return f'  call void @"pf.{name}"(ptr %L, ptr %W, i32 %cx, i32 %cy, i32 %cz)\n'
