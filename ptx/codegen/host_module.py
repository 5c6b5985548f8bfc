"""Builds the LLVM IR module for the host CPU from a PTX module: globals, device functions, and per
kernel a block-range function (ptxrt.h ABI) that runs inlined thread loops (no sync points), region
loops split at barriers, shfl and vote, or the resumable-thread scheduler (the other collectives)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.codegen.cpu.thread_loops import THREAD_START, emit_thread_loops
from ptx.codegen.cpu.lockstep import lowest_waiting, soft_dispatch, with_yields
from ptx.codegen.cpu import affine, lockstep
from ptx.codegen.reserved_smem import reserve_smem
from ptx.errors import PTXSemanticError, PTXUnsupportedError
from ptx.passes.flatten_scopes import flatten_function
from ptx.passes.inline_sync_calls import inline_sync_calls
from ptx.passes.sync_points import functions_with_sync, sync_kind

# the instruction families register their handlers on import
from ptx.codegen import ops_int, ops_float, ops_cvt, ops_mem, ops_ctrl, ops_warp, ops_atom, ops_mbarrier  # noqa: F401
from ptx.codegen import ops_simd  # noqa: F401  (video and packed 16x2 integer instructions)
from ptx.codegen import ops_tex  # noqa: F401
from ptx.codegen import ops_cluster, ops_narrow_float, ops_f32x2  # noqa: F401  (clusters of one, fp8/6/4, f32x2)
from ptx.codegen import ops_mma, ops_mma_move  # noqa: F401  (tensor-core matrix instructions)
from ptx.codegen import ops_async  # noqa: F401  (cp.async and the bulk and tensor-map copies)

BUILTIN_FUNCS = FE.BUILTIN_FUNCS


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
    warp_regions: bool = False       # region loops with warp collectives (shfl/vote) as split points


# The loads every generated block function starts with: grid x/y, block x/y/z from the launch, the
# worker's scratch buffer (offsets per ptx/runtime/ptxrt.h).
_BLOCK_FN_ENTRY = f"""  %gxp = getelementptr i8, ptr %L, i64 {FE.L_GRID}
  %gx = load i32, ptr %gxp
  %gyp = getelementptr i8, ptr %L, i64 {FE.L_GRID + 4}
  %gy = load i32, ptr %gyp
  %bxp = getelementptr i8, ptr %L, i64 {FE.L_BLOCK}
  %bx = load i32, ptr %bxp
  %byp = getelementptr i8, ptr %L, i64 {FE.L_BLOCK + 4}
  %by = load i32, ptr %byp
  %bzp = getelementptr i8, ptr %L, i64 {FE.L_BLOCK + 8}
  %bz = load i32, ptr %bzp
  %scp = getelementptr i8, ptr %W, i64 {FE.W_SCRATCH}
  %scratch = load ptr, ptr %scp
"""
# Linear block id %b (x fastest) split into %ctaid x/y/z, as ptxrt.h numbers blocks.
_BLOCK_COORDS = """  %bq = udiv i64 %b, %gx64
  %cx64 = urem i64 %b, %gx64
  %cy64 = urem i64 %bq, %gy64
  %cz64 = udiv i64 %bq, %gy64
  %cx = trunc i64 %cx64 to i32
  %cy = trunc i64 %cy64 to i32
  %cz = trunc i64 %cz64 to i32
"""

def decl_size(d: A.VarDecl) -> int:
    n = T.size_of(d.type.name) * d.type.vec
    for dim in d.dims:
        n *= dim
    return n


def decl_align(d: A.VarDecl) -> int:
    return d.align or T.size_of(d.type.name) * d.type.vec


def round_up(x, a):
    return (x + a - 1) // a * a


def llvm_name(prefix, ptx_name):
    return f'@"{prefix}.{ptx_name}"'


class ModuleContext:
    def __init__(self, module: A.Module, fma_contract=False, memcheck=False, version_guards=True):
        self.module = module
        self.fma_contract = fma_contract
        self.memcheck = memcheck      # check every access (ptx/codegen/memcheck.py)
        self.version_guards = version_guards  # guard-free copies of guarded bodies (cpu/thread_loops.py)
        self.lockstep = lockstep.ENABLED    # loops one iteration at a time for all threads (cpu/lockstep.py)
        self.declarations = set()
        self.helpers = {}            # name -> IR text of helper functions
        self.global_syms = {}        # ptx name -> (llvm name, size)
        self.func_decls = {}         # ptx name -> Function
        self.shared_common = {}      # name -> offset (module-level and .func-body shared vars)
        self.shared_kernel = {}
        self.common_shared_end = 0
        self.reserved_smem, self.reserved_smem_bytes = None, 0   # reserved_smem.py
        self.dynamic_shared_names = set()
        self.dynamic_shared_align = 1   # largest .align of the module-level dynamic (extern) shared arrays
        self.shared_align = 0           # largest .align of any shared variable (see FE.shared_base)
        self.kernel_params = {}
        self.flat = {}
        self.sync_funcs = set()
        self.relocations = []     # (global, offset, size, mask, symbol, addend)
        self.fallback_funcs = []  # the region kernels' general-scheduler fallbacks (HostIR.fallback)

    def declare(self, line):
        self.declarations.add(line)

    def add_helper(self, name, text):
        self.helpers.setdefault(name, text)

    def shared_offset(self, name):
        if name in self.shared_kernel:
            return self.shared_kernel[name]
        return self.shared_common.get(name)

    def kernel_param_offset(self, name):
        return self.kernel_params.get(name)

    def global_symbol(self, name):
        g = self.global_syms.get(name)
        if g is not None:
            return g[0]
        f = self.func_decls.get(name)
        if f is not None and f.body is not None and name not in self.sync_funcs:
            return llvm_name("f", name)
        return None


# ------------------------------------------------------------------ globals

def _flat_init(init):
    out = []

    def walk(x):
        for e in x:
            if isinstance(e, list):
                walk(e)
            else:
                out.append(e)
    walk(init or [])
    return out


def _init_bytes(d: A.VarDecl, size: int, relocs: list):
    """The initialiser's bytes; symbol-valued elements become relocations
    (byte offset, element size, mask, symbol, addend), patched once addresses are known."""
    t = d.type.name
    esz = T.size_of(t)
    buf = bytearray()
    for e in _flat_init(d.init):
        if isinstance(e, A.SymbolExpr) or (isinstance(e, A.Reg) and not e.name.startswith("%")):
            relocs.append((len(buf), esz, getattr(e, "mask", 0), e.name, getattr(e, "offset", 0)))
            buf += bytes(esz)
            continue
        if isinstance(e, A.FloatImm):
            if t == "f32":
                buf += struct.pack("<I", e.raw) if e.bits == 32 else struct.pack("<f", e.value)
            elif t == "f64":
                buf += struct.pack("<Q", e.raw) if e.bits == 64 else struct.pack("<d", e.value)
            elif t == "f16":
                buf += struct.pack("<e", e.value)
            elif e.bits:
                buf += (e.raw & ((1 << (8 * esz)) - 1)).to_bytes(esz, "little")
            else:
                buf += (int(e.value) & ((1 << (8 * esz)) - 1)).to_bytes(esz, "little")
        elif isinstance(e, A.Imm):
            v = e.value
            if t == "f32":
                buf += struct.pack("<f", float(v))
            elif t == "f64":
                buf += struct.pack("<d", float(v))
            elif t == "f16":
                buf += struct.pack("<e", float(v))
            else:
                buf += (v & ((1 << (8 * esz)) - 1)).to_bytes(esz, "little")
        else:
            raise PTXUnsupportedError(f"initialiser element {type(e).__name__} of {d.name}",
                                      d.pos.line, d.pos.col)
    if len(buf) > size:
        raise PTXSemanticError(f"initialiser of {d.name} is larger than the variable",
                               d.pos.line, d.pos.col)
    return bytes(buf) + bytes(size - len(buf))


# a lazy module builds each kernel from the same AST: its variables' initialisers (ggml's lookup tables, 40 KB
# of elements) are read once, not once per kernel
_INITS: dict = {}           # id(VarDecl) -> (the VarDecl, size, bytes, relocations)
_INITS_MAX = 1024
_HEX_BYTE = [f"\\{b:02X}" for b in range(256)]


def emit_global(d: A.VarDecl, mctx: ModuleContext, out: list):
    if d.type.name in ("texref", "surfref", "samplerref"):
        # CUDA 12 removed texture/surface references; texture and surface objects are what runs here
        raise PTXUnsupportedError(f"module-scope .{d.type.name} {d.name} (legacy texture/surface references)",
                                  d.pos.line, d.pos.col)
    size = decl_size(d)
    if size == 0 and d.init:
        size = len(_flat_init(d.init)) * T.size_of(d.type.name) * d.type.vec
    size = max(size, 1)
    name = llvm_name("g", d.name)
    mctx.global_syms[d.name] = (name, size)
    align = max(decl_align(d), 1)
    if d.init:
        got = _INITS.get(id(d))
        if got is None or got[0] is not d or got[1] != size:
            relocs = []
            got = _INITS[id(d)] = (d, size, _init_bytes(d, size, relocs), relocs)
            while len(_INITS) > _INITS_MAX:
                _INITS.pop(next(iter(_INITS)))
        data, relocs = got[2], got[3]
        for r in relocs:
            mctx.relocations.append((d.name,) + r)
        body = "".join(map(_HEX_BYTE.__getitem__, data))
        out.append(f'{name} = global [{size} x i8] c"{body}", align {align}')
    else:
        out.append(f"{name} = global [{size} x i8] zeroinitializer, align {align}")


# ------------------------------------------------------------------ functions

def _layout_params(params):
    out, off = [], 0
    for p in params:
        size = decl_size(p)
        align = p.align or T.size_of(p.type.name) * p.type.vec
        off = round_up(off, align)
        out.append((off, size, align))
        off += size
    return out, off


def _setup_addr_vars(em: FunctionEmitter, flat, in_frame: bool):
    """.local and body .param variables: allocas, or frame-resident in resumable threads."""
    off = FE.FRAME_HEADER_BYTES
    for d in flat.decls.values():
        if d.space not in ("local", "param"):
            continue
        size = max(decl_size(d), 1)
        align = max(decl_align(d), 1)
        if in_frame and align > FE.RUNTIME_FRAME_ALIGN:
            # beyond the frame's own alignment: aligned at run time within room reserved for it
            off = round_up(off, FE.RUNTIME_FRAME_ALIGN)
            raw, addr, neg, pad, p = (em.f.tmp() for _ in range(5))
            em.entry_code += [f"  {raw} = getelementptr i8, ptr %frame, i64 {off}",
                              f"  {addr} = ptrtoint ptr {raw} to i64",
                              f"  {neg} = sub i64 0, {addr}",
                              f"  {pad} = and i64 {neg}, {align - 1}",
                              f"  {p} = getelementptr i8, ptr {raw}, i64 {pad}"]
            off += size + align - FE.RUNTIME_FRAME_ALIGN
        elif in_frame:
            off = round_up(off, max(align, 8))
            p = em.f.tmp()
            em.entry_code.append(f"  {p} = getelementptr i8, ptr %frame, i64 {off}")
            off += size
        else:
            p = em.f.alloca(f"[{size} x i8]", align=max(align, 16) if size >= 16 else align)
        em.addr_vars[d.name] = (p, size)
        if d.space == "local":
            em.local_vars.append((p, size))
    return round_up(off, 16)


def _reg_signature():
    return "ptr %L, ptr %W, ptr %frame, i32 %tid.x, i32 %tid.y, i32 %tid.z, " \
           "i32 %ctaid.x, i32 %ctaid.y, i32 %ctaid.z"


def _assemble(header, em: FunctionEmitter, after_entry: list, body_lines: list, footer: list):
    f = em.f
    out = [header, "entry:"]
    out += f.entry_allocas
    out += em.entry_code
    out += after_entry
    out += body_lines
    out += footer
    out.append("}")
    return "\n".join(out)


def emit_device_function(func: A.Function, flat, mctx: ModuleContext):
    em = FunctionEmitter(mctx, flat, "func")
    em.entry_code = []
    args = []
    reg_params = []
    for i, d in enumerate(func.returns):
        p = f'%"ret.{i}"'
        args.append(f"ptr {p}")
        if d.space == "reg":
            reg_params.append(("ret", d, p))
        else:
            em.func_params[d.name] = p
    for i, d in enumerate(func.params):
        p = f'%"arg.{i}"'
        args.append(f"ptr {p}")
        if d.space == "reg":
            reg_params.append(("arg", d, p))
        else:
            em.func_params[d.name] = p
    _setup_addr_vars(em, flat, in_frame=False)
    for kind, d, p in reg_params:
        flat.decls.setdefault(d.name, d)
    f = em.f
    f.label("start")
    for kind, d, p in reg_params:
        if kind == "arg":
            ty = T.llvm_type(d.type.name)
            v = f.op(f"load {ty}, ptr {p}")
            em.write(A.Reg(d.name), v, d.type.name)
    em.ret_label = "fn.ret"
    em.emit_body()
    f.label("fn.ret")
    for kind, d, p in reg_params:
        if kind == "ret":
            ty = T.llvm_type(d.type.name)
            v = em.read(A.Reg(d.name), d.type.name)
            f.emit(f"store {ty} {v}, ptr {p}")
    f.term("ret i32 0")
    sig = _reg_signature() + "".join(", " + a for a in args)
    header = f"define internal i32 {llvm_name('f', func.name)}({sig}) {{"
    return _assemble(header, em, ["  br label %start"], f.lines, [])


def _store_undef_regs(em):
    return [f"  store {ty} undef, ptr {ptr}" for ty, ptr in em.regs.values()]


def emit_kernel(func: A.Function, flat, mctx: ModuleContext, has_sync: bool, out_funcs: list):
    params, param_size = _layout_params(func.params)
    mctx.kernel_params = {p.name: off for p, (off, _, _) in zip(func.params, params)}
    # kernel-body shared variables after the common ones; `extern .shared` ones at the dynamic base
    off = mctx.common_shared_end
    dyn_align = max(16, mctx.dynamic_shared_align)
    mctx.shared_kernel = {}
    dyn_names = set(mctx.dynamic_shared_names)
    for d in flat.decls.values():
        if d.space != "shared":
            continue
        if d.dims and d.dims[-1] == 0 or d.linkage == "extern":
            dyn_names.add(d.name)
            dyn_align = max(dyn_align, decl_align(d))
            continue
        off = round_up(off, decl_align(d))
        mctx.shared_kernel[d.name] = off
        off += decl_size(d)
    static_shared = off - mctx.reserved_smem_bytes  # NVIDIA reports the variables, not the reservation
    dyn_base = round_up(off, dyn_align) if off else 0
    for n in dyn_names:
        mctx.shared_kernel[n] = dyn_base
    shared_reserve = dyn_base + max(mctx.shared_align - FE.RUNTIME_SHARED_ALIGN, 0)

    sym = llvm_name("k", func.name)
    fallback_slot = None
    warp_ops = False
    lock = None if has_sync or not mctx.lockstep else _emit_lockstep_kernel(func, flat, mctx, sym)
    if lock:
        region_fns, frame_bytes, local_bytes = lock
        out_funcs.extend(region_fns)
    elif not has_sync:
        text, local_bytes = _emit_fast_kernel(func, flat, mctx, sym)
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
            text, frame_bytes, local_bytes, sync_sites, sync_em = _emit_sync_thread(func, soft, mctx)
            region = _emit_region_kernel(func, soft, mctx, sym, frame_bytes, sync_em, soft=True)
        if not region:
            text, frame_bytes, local_bytes, sync_sites, sync_em = _emit_sync_thread(func, flat, mctx)
            region = not has_red and _emit_region_kernel(func, flat, mctx, sym, frame_bytes, sync_em,
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
                fallback = _emit_warp_block_fn(func, f'@"gb.{func.name}"', frame_bytes, mctx,
                                               from_frames=True)
            else:
                fallback = _emit_barrier_block_fn(func, f'@"gb.{func.name}"', frame_bytes, [],
                                                  from_frames=True)
            head, _, rest = fallback.partition("\n")
            mctx.fallback_funcs.append(head.replace(") {", ") noinline optsize cold {", 1) + "\n" + rest)
            mctx.fallback_funcs.append(convert_fn)
            mctx.fallback_funcs.append(_FALLBACK_ENTRY.format(name=func.name))
            fallback_slot = f"fbp.{func.name}"
            frame_bytes *= 2        # AoS frames of the fallback, then the regions' SoA slots
        elif barrier_only:
            out_funcs.append(_emit_barrier_block_fn(func, sym, frame_bytes, sync_sites))
        else:
            out_funcs.append(_emit_warp_block_fn(func, sym, frame_bytes, mctx))
    return KernelInfo(func.name, f"k.{func.name}", params, param_size, static_shared, local_bytes,
                      frame_bytes, has_sync, func.directives.get("maxntid"),
                      func.directives.get("reqntid"), [p.type.name for p in func.params], shared_reserve,
                      fallback_slot=fallback_slot, warp_regions=bool(fallback_slot) and warp_ops)


def _emit_lockstep_kernel(func, flat, mctx, sym):
    """A barrier-free kernel with loops as region loops split at yields (cpu/lockstep.py): (functions, frame
    bytes, local bytes), or None. There is no fallback: every site is a yield, nothing for threads to disagree on."""
    soft = with_yields(flat)
    if soft is None:
        return None
    _, frame_bytes, local_bytes, _, sync_em = _emit_sync_thread(func, soft, mctx)
    region = _emit_region_kernel(func, soft, mctx, sym, frame_bytes, sync_em, soft=True)
    if not region:
        return None
    region_fns, _, frame_bytes = region
    return region_fns, 2 * frame_bytes, local_bytes     # the block function's SoA slots start after n frames


def _emit_fast_kernel(func, flat, mctx, sym):
    em = FunctionEmitter(mctx, flat, "fast")
    em.entry_code = []
    _setup_addr_vars(em, flat, in_frame=False)
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
    emit_thread_loops(em, "blk.head", (bx, by, bz), "blk.latch")
    f.label("blk.latch")
    f.emit("%b.next = add nuw i64 %b, 1")
    f.emit("%b.c = icmp ult i64 %b.next, %last")
    f.term("br i1 %b.c, label %blk.head, label %done")
    f.label("done")
    f.term("ret i32 0")
    undef = _store_undef_regs(em)
    f.lines = [x for line in f.lines for x in (undef if line is THREAD_START else (line,))]
    header = f"define i32 {sym}(ptr %L, i64 %first, i64 %last, ptr %W) {{"
    return _assemble(header, em, ["  br label %blk.pre"], f.lines, []), local_bytes


def _emit_sync_thread(func, flat, mctx):
    em = FunctionEmitter(mctx, flat, "sync")
    em.entry_code = []
    local_end = _setup_addr_vars(em, flat, in_frame=True)
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
    header = f"define internal i32 @\"t.{func.name}\"({_reg_signature()}, i32 %resume.in) {{"
    local_bytes = local_end - FE.FRAME_HEADER_BYTES
    em.reg_off = reg_off
    em.live_at_sites = live
    return _assemble(header, em, dispatch, f.lines, []), frame_bytes, local_bytes, \
        [site[0] for site in em.sync_sites], em


MAX_SPECIALISED_PHASES = 2


def _phase_loop(func, tag, resume_in, fb):
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


def _emit_barrier_block_fn(func, sym, frame_bytes, sites, from_frames=False):
    """Block barriers only (no warp collectives, no bar.red): each phase runs every live thread of
    the block, in order, up to its next barrier or its exit; the next phase releases them all. When
    every waiting thread waits at the same barrier (the usual case) the next phase is a loop
    specialised for that resume point: the thread function is inlined with its dispatch folded."""
    fb = frame_bytes
    if len(sites) > MAX_SPECIALISED_PHASES:
        sites = []          # each copy inlines the whole thread function: keep compile time bounded
    tags = ["gen"] + [str(k) for k in sites]
    loops = "".join(_phase_loop(func, t, -1 if t == "gen" else int(t), fb) for t in tags)
    incoming = ", ".join(f"[ %uk.{t}, %dispatch.{t} ]" for t in tags)
    cases = " ".join(f"i32 {k}, label %phase.{k}" for k in sites)
    # from_frames: the threads' frames already hold their state (a region kernel fell back here)
    linkage = "internal " if from_frames else ""
    return f"""define {linkage}i32 {sym}(ptr %L, i64 %first, i64 %last, ptr %W) {{
entry:
{_BLOCK_FN_ENTRY}  %nxy = mul i32 %bx, %by
  %n = mul i32 %nxy, %bz
  %gx64 = zext i32 %gx to i64
  %gy64 = zext i32 %gy to i64
  %ne = icmp ult i64 %first, %last
  br i1 %ne, label %head, label %done
head:
  %b = phi i64 [ %first, %entry ], [ %b.next, %next ]
{_BLOCK_COORDS}  br i1 {'false' if from_frames else 'true'}, label %init, label %phase.gen
init:
  %it = phi i32 [ 0, %head ], [ %it.next, %init ]
  %it64 = zext i32 %it to i64
  %ioff = mul i64 %it64, {fb}
  %ifr = getelementptr i8, ptr %scratch, i64 %ioff
  store i64 0, ptr %ifr
  %it.next = add nuw i32 %it, 1
  %imore = icmp ult i32 %it.next, %n
  br i1 %imore, label %init, label %phase.gen
{loops}dispatch:
  %uk = phi i32 {incoming}
  switch i32 %uk, label %phase.gen [ {cases} ]
next:
  %b.next = add nuw i64 %b, 1
  %more = icmp ult i64 %b.next, %last
  br i1 %more, label %head, label %done
done:
  ret i32 0
}}"""


def _emit_warp_block_fn(func, sym, frame_bytes, mctx, from_frames=False):
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
{_BLOCK_FN_ENTRY}  %bxy = mul i32 %bx, %by
  %n = mul i32 %bxy, %bz
  %n31 = add i32 %n, 31
  %nwarps = lshr i32 %n31, 5
  %gx64 = zext i32 %gx to i64
  %gy64 = zext i32 %gy to i64
  %ne = icmp ult i64 %first, %last
  br i1 %ne, label %head, label %done
head:
  %b = phi i64 [ %first, %entry ], [ %b.next, %next ]
{_BLOCK_COORDS}  br i1 {'false' if from_frames else 'true'}, label %init, label %outer
init:
  %it = phi i32 [ 0, %head ], [ %it.next, %init ]
  %it64 = zext i32 %it to i64
  %ioff = mul i64 %it64, {fb}
  %ifr = getelementptr i8, ptr %scratch, i64 %ioff
  store i64 0, ptr %ifr
  %it.next = add nuw i32 %it, 1
  %imore = icmp ult i32 %it.next, %n
  br i1 %imore, label %init, label %outer
outer:
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
next:
  %b.next = add nuw i64 %b, 1
  %more = icmp ult i64 %b.next, %last
  br i1 %more, label %head, label %done
fail:
  %code = sub i32 %r, {FE.ST_ABORT_BASE}
  ret i32 %code
done:
  ret i32 0
}}"""


# ------------------------------------------------------------------ module

@dataclass
class HostIR:
    text: str
    kernels: dict                 # name -> KernelInfo
    globals: dict                 # ptx name -> (llvm global name without @, size)
    relocations: list             # symbol-valued initialiser elements, patched after JIT
    functions: dict               # ptx name of a .func -> its LLVM name (for relocations)
    fallback: str = ""            # module text of the region kernels' fallbacks ("" if none):
                                  # its globals are `external`, named with the prefix FALLBACK_GLOBAL


FALLBACK_GLOBAL = 'fbg.'


def _fallback_module(mctx, bodies):
    """The fallback functions with what they call (device functions, helpers) in a module of their
    own; it refers to the main module's globals through external declarations under other names
    (`@"g.x"` -> `@"fbg.x"`), which the loader binds to the main module's addresses."""
    if not mctx.fallback_funcs:
        return ""
    decls = [f'{name} = external global [{size} x i8]' for name, size in mctx.global_syms.values()]
    text = "\n".join(["; generated by ptx.codegen.host_module (fallbacks)", *decls,
                      *sorted(mctx.declarations), *mctx.helpers.values(),
                      *(b for b in bodies if b.startswith('define internal i32 @"f.')),
                      *mctx.fallback_funcs]) + "\n"
    return text.replace('@"g.', '@"' + FALLBACK_GLOBAL)


def build_host_ir(module: A.Module, fma_contract=False, memcheck=False, version_guards=True) -> HostIR:
    """version_guards: give bodies with exit guards a guard-free copy (see cpu/thread_loops.py; for targets
    without cheap masked stores)."""
    mctx = ModuleContext(module, fma_contract, memcheck, version_guards)
    pending_globals = []
    funcs = {}
    defined = {i.name for i in module.items if isinstance(i, A.VarDecl) and i.linkage != "extern"}
    for item in module.items:
        if isinstance(item, A.VarDecl):
            if item.linkage == "extern" and item.name in defined:
                continue            # declared here, defined in this (linked) module too
            if item.space in ("global", "const"):
                emit_global(item, mctx, pending_globals)
            elif item.space == "shared":
                if item.linkage == "extern" or (item.dims and item.dims[-1] == 0):
                    mctx.dynamic_shared_names.add(item.name)
                    mctx.dynamic_shared_align = max(mctx.dynamic_shared_align, decl_align(item))
                else:
                    off = round_up(mctx.common_shared_end, decl_align(item))
                    mctx.shared_common[item.name] = off
                    mctx.common_shared_end = off + decl_size(item)
            elif item.space in ("tex", "surf", "sampler", "texref", "surfref", "samplerref"):
                raise PTXUnsupportedError(f"module-level .{item.space} variable {item.name}",
                                          item.pos.line, item.pos.col)
            else:
                raise PTXUnsupportedError(f"module-level .{item.space} variable {item.name}",
                                          item.pos.line, item.pos.col)
        elif isinstance(item, A.Function):
            prev = mctx.func_decls.get(item.name)
            if prev is None or prev.body is None:
                mctx.func_decls[item.name] = item
    for name, fn in mctx.func_decls.items():
        if fn.body is not None:
            funcs[name] = flatten_function(fn)
    sync_funcs = functions_with_sync(funcs)
    mctx.sync_funcs = sync_funcs
    for name, ff in funcs.items():
        if ff.func.kind == "entry" or name in sync_funcs:
            inline_sync_calls(ff, funcs, sync_funcs)
    # shared variables declared in .func bodies live in the common area (same offset in every kernel)
    for name, ff in funcs.items():
        if ff.func.kind == "func":
            for d in ff.decls.values():
                if d.space == "shared":
                    off = round_up(mctx.common_shared_end, decl_align(d))
                    mctx.shared_common[d.name] = off
                    mctx.common_shared_end = off + decl_size(d)
    reserve_smem(mctx, funcs)
    # one alignment for the shared base across the module: every function computes the same base
    mctx.shared_align = max([decl_align(i) for i in module.items if isinstance(i, A.VarDecl)
                             and i.space == "shared"] +
                            [decl_align(d) for ff in funcs.values() for d in ff.decls.values()
                             if d.space == "shared"] + [0])
    bodies = []
    kernels = {}
    for name, ff in funcs.items():
        fn = ff.func
        if fn.kind == "func":
            if name in BUILTIN_FUNCS or name in sync_funcs:
                continue          # synchronizing functions exist only inlined into their callers
            mctx.shared_kernel = {n: 0 for n in mctx.dynamic_shared_names}
            mctx.kernel_params = {}
            bodies.append(emit_device_function(fn, ff, mctx))
    for name, ff in funcs.items():
        fn = ff.func
        if fn.kind == "entry":
            has_sync = any(isinstance(s, A.Instruction) and sync_kind(s) for s in ff.body)
            kernels[name] = emit_kernel(fn, ff, mctx, has_sync, bodies)
    glines = pending_globals
    text = "\n".join(["; generated by ptx.codegen.host_module", *glines, *sorted(mctx.declarations),
                      *mctx.helpers.values(), *bodies]) + "\n"
    gl = {k: (v[0][1:].strip('"'), v[1]) for k, v in mctx.global_syms.items()}
    # functions whose address an initialiser takes: exported through a pointer-holding global
    # (internal functions have no address the JIT will report)
    fnames = {}
    for r in mctx.relocations:
        sym = r[4]
        if sym in funcs and funcs[sym].func.kind == "func" and sym not in sync_funcs:
            fnames[sym] = f"fp.{sym}"
    if fnames:
        text += "".join(f'@"fp.{n}" = constant ptr @"f.{n}"\n' for n in fnames)
    return HostIR(text, kernels, gl, mctx.relocations, fnames, _fallback_module(mctx, bodies))


# ------------------------------------------------------------------ regions as thread loops

# The fallback module's entry for one region kernel: the block's SoA slots into the resumable threads'
# frames, then the general barrier scheduler finishes block %b.
_FALLBACK_ENTRY = """define i32 @"fb.{name}"(ptr %L, i64 %b, ptr %W, ptr %scratch, ptr %soa, i64 %n64) {{
entry:
  call void @"cv.{name}"(ptr %scratch, ptr %soa, i64 %n64)
  %b1 = add nuw i64 %b, 1
  %g = call i32 @"gb.{name}"(ptr %L, i64 %b, i64 %b1, ptr %W)
  ret i32 %g
}}"""

MAX_REGIONS = 16
TX_LOOP_MD = ", !llvm.loop !8998"


def _region_ready(func, flat, sync_em, warp=False):
    """Block barriers only, each a plain `bar.sync <imm>` (every thread of the block waits), and with
    `warp` shfl/vote too; no frame-resident .local/.param variables and few enough regions to inline
    each one."""
    if any(d.space in ("local", "param") for d in flat.decls.values()):
        return False
    if not sync_em.sync_sites or len(sync_em.sync_sites) > MAX_REGIONS:
        return False
    for st in flat.body:
        if isinstance(st, A.Instruction) and sync_kind(st) == "warp":
            if not (warp and _warp_region_op(st)):
                return False
        elif isinstance(st, A.Instruction) and sync_kind(st):
            mods = set(st.mods)
            if st.opcode not in ("bar", "barrier") or mods & {"red", "arrive", "warp", "cluster"}:
                return False
            if len(st.operands) != 1 or not isinstance(st.operands[0], A.Imm):
                return False
        if isinstance(st, A.Instruction) and st.opcode == "brx":
            return False        # its targets may be unknown to the region analysis
    return True


def _successors(body):
    labels = {st.name: i for i, st in enumerate(body) if isinstance(st, A.Label)}
    n = len(body)
    succ = []
    for i, st in enumerate(body):
        nxt = [i + 1] if i + 1 < n else []
        if isinstance(st, A.Instruction) and st.opcode == "bra":
            tgt = labels.get(getattr(st.operands[0], "name", None))
            s = [tgt] if tgt is not None else []
            succ.append(s + nxt if st.guard else s)
        elif isinstance(st, A.Instruction) and st.opcode in ("ret", "exit", "trap") and not st.guard:
            succ.append([])
        else:
            succ.append(nxt)
    return succ


def _region_reach(body, succ, start):
    """Statements a thread starting at statement `start` can run up to its next (unguarded)
    barrier, that barrier included."""
    seen, stack = set(), [start]
    while stack:
        i = stack.pop()
        if i in seen or i >= len(body):
            continue
        seen.add(i)
        st = body[i]
        if isinstance(st, A.Instruction) and sync_kind(st) and not st.guard:
            continue
        stack.extend(succ[i])
    return seen


def _region_exits(body, reach, start):
    """Whether a thread running the statements `reach` (from `start`) may exit: a ret/exit, or
    falling off the end of the body."""
    n = len(body)
    if start >= n or any(isinstance(body[i], A.Instruction) and body[i].opcode in ("ret", "exit")
                         for i in reach):
        return True
    last = body[n - 1]
    if n - 1 not in reach:
        return False
    return isinstance(last, A.Label) or bool(last.guard) or not (
        last.opcode in ("bra", "ret", "exit", "trap") or sync_kind(last))


def _region_writes(body, reach, written):
    """Registers the statements `reach` (from _region_reach) may write; the barrier that ends the
    region is left out, as what it writes belongs to the next region."""
    out = set()
    for i in reach:
        st = body[i]
        if isinstance(st, A.Instruction) and sync_kind(st) and not st.guard:
            continue
        out |= written.get(i, set())
    return out


REMAT_OPS = frozenset({"mov", "add", "sub", "mul", "mad", "mul24", "mad24", "shl", "shr", "and", "or",
                       "xor", "not", "neg", "min", "max", "cvta", "cvt", "selp"})
THREAD_CONSTANT_SPECIALS = frozenset(f"%{r}.{c}" for r in ("tid", "ntid", "ctaid", "nctaid")
                                     for c in "xyz") | {"%laneid", "%warpid"}


def _rematerializable(body, is_reg):
    """{register: index of its one definition} for registers whose value is the same wherever the
    thread computes it: one unguarded definition, a pure operation on constants, kernel params,
    symbols, %tid/%ctaid-like registers and other such registers. A region recomputes them instead of
    loading their slot, so LLVM sees e.g. a shared address as affine in %tid.x."""
    from ptx.passes.liveness import defs_uses
    if any(isinstance(st, A.Instruction) and st.opcode == "st" and "param" in st.mods for st in body):
        return {}
    defs, info = {}, {}
    for i, st in enumerate(body):
        if isinstance(st, A.Instruction):
            d, u = defs_uses(st, is_reg)
            info[i] = u
            for r in d:
                defs.setdefault(r, []).append(i)

    def operands_ok(st):
        ok = True

        def visit(op):
            nonlocal ok
            if isinstance(op, (A.Reg, A.SymbolExpr)) and not is_reg(op.name) \
                    and op.name.startswith("%") and op.name not in THREAD_CONSTANT_SPECIALS:
                ok = False
            for sub in (getattr(op, "elems", None) or getattr(op, "items", None) or []):
                visit(sub)
            if isinstance(op, A.Negated):
                visit(op.operand)
        for op in st.operands:
            visit(op)
        return ok

    memo = {}

    def ok(r):
        if r in memo:
            return memo[r]
        memo[r] = False             # a cycle is not rematerializable
        idx = defs.get(r)
        if not idx or len(idx) != 1:
            return False
        st = body[idx[0]]
        pure = st.opcode in REMAT_OPS or (st.opcode == "ld" and "param" in st.mods)
        if not pure or st.guard or "cc" in st.mods or not operands_ok(st):
            return False
        if st.operands and isinstance(st.operands[0], A.Address):
            return False
        res = all(ok(u) for u in info[idx[0]])
        memo[r] = res
        return res
    return {r: defs[r][0] for r in defs if ok(r)}


def _remat_chain(regs, remat, body, is_reg):
    """Indices, in body order, of the definitions that recompute `regs` (with their inputs)."""
    from ptx.passes.liveness import defs_uses
    out, stack = set(), list(regs)
    while stack:
        i = remat[stack.pop()]
        if i in out:
            continue
        out.add(i)
        stack.extend(defs_uses(body[i], is_reg)[1])
    return sorted(out)


def _warp_region_op(st):
    """shfl and vote: warp collectives a region loop can evaluate from its exchange slots."""
    from ptx.codegen.ops_warp import SHFL_MODES, VOTE_MODES
    if st.opcode == "shfl":
        return any(m in SHFL_MODES for m in st.mods) and len(st.operands) >= 4
    if st.opcode == "vote":
        return any(m in VOTE_MODES for m in st.mods) and len(st.operands) >= 2
    return False


# Exchange slots of a warp collective in the SoA area: the frame header's offsets, one element per
# thread (soa + off * n + t * size); the per-warp ballot of a vote at FH_COUNT (indexed by warp).
_X_FIELDS = ((FE.FH_MASK, "i32"), (FE.FH_B, "i32"), (FE.FH_C, "i32"), (FE.FH_PRED_IN, "i32"))
_X_A, _X_BALLOT = FE.FH_A, FE.FH_COUNT


def _warp_inputs(st):
    """{exchange slot offset: operand or None (a constant -1 mask)} of a shfl or vote: what its
    region stores for the next one (and for the fallback)."""
    ops = st.operands
    sync = "sync" in st.mods
    if st.opcode == "shfl":
        return {_X_A: ops[1], FE.FH_B: ops[2], FE.FH_C: ops[3],
                FE.FH_MASK: ops[4] if sync and len(ops) > 4 else None}
    return {FE.FH_PRED_IN: ops[1], FE.FH_MASK: ops[2] if sync and len(ops) > 2 else None}


def _const_operand(off, op, flat, remat):
    """The 32-bit value of an operand that is the same for every thread (an immediate, or a register
    set once from one), else None: such an input needs no exchange slot (save the shuffled value
    and the vote's predicate, which other threads read from theirs)."""
    if off in (_X_A, FE.FH_PRED_IN):
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


def _range_loops(f, bx, by, ranged, track=True):
    """The thread loops' headers. Ranged (kernels with warp collectives): only the threads of linear
    ids [lo, hi) run (the others exited), and the loops track the live threads' smallest and largest
    id and their count, so that the block can go on with the live threads as one range."""
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
    else:
        f.term("br label %tx.head")
    f.label("tx.head")
    f.emit(f"%tid.x = phi i32 [ {'%xs' if ranged else 0}, %ty.head ], [ %tx.next, %tx.latch ]")
    for a in acc:
        f.emit(f"%{a} = phi i32 [ %{a}.y, %ty.head ], [ %{a}.next, %tx.latch ]")
    f.emit("%lin = add i32 %lzyx, %tid.x")
    return acc


def _range_latches(f, mctx, bx, by, bz, acc, ranged, single=None):
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
    f.emit(f"%tx.c = icmp ult i32 %tx.next, {'%xe' if ranged else bx}")
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


def _operand_value(em, op, ptype, remat, slot_load):
    """A collective's operand recomputed where it is a constant for the thread (an immediate, a
    rematerialised register), so LLVM sees e.g. a constant shuffle distance; else its exchange slot."""
    if isinstance(op, A.Imm):
        return em.read(op, ptype)
    if isinstance(op, A.Reg) and (op.name in remat or (not em.is_register(op.name)
                                                         and op.name in THREAD_CONSTANT_SPECIALS)):
        return em.read(op, ptype)
    return slot_load()


def _warp_result(em, st, remat, hslot, mctx):
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
        b = _operand_value(em, ops[2], "u32", remat, lambda: f.op(f"load i32, ptr {hslot(FE.FH_B, 'i32')}"))
        c = _operand_value(em, ops[3], "u32", remat, lambda: f.op(f"load i32, ptr {hslot(FE.FH_C, 'i32')}"))
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
            vo = f.op(f"load i32, ptr " + f.op(f"getelementptr i32, ptr {rb}, i64 %t"))
            v = f.op(f"select i1 " + f.op(f"and i1 {ok}, {pv}") + f", i32 {vf}, i32 {vo}")
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
        mask = _operand_value(em, ops[2], "u32", remat,
                              lambda: f.op(f"load i32, ptr {hslot(FE.FH_MASK, 'i32')}"))
    else:
        mask = "-1"
    w = f.op("lshr i32 %lin, 5")
    w64 = f.op(f"zext i32 {w} to i64")
    base = f.op(f"mul i64 %n64, {_X_BALLOT}")
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


def _constant_registers(flat, remat, regs):
    """{register: LLVM literal} of the integer registers set once from an immediate: no region
    stores them (each recomputes what it needs), the fallback's frames get the literal."""
    out = {}
    for name, i in remat.items():
        st = flat.body[i]
        ty = regs.get(name, (None,))[0]
        if st.opcode == "mov" and len(st.operands) == 2 and isinstance(st.operands[1], A.Imm) \
                and ty in ("i16", "i32", "i64"):
            bits = FE.LLVM_BITS[ty]
            v = st.operands[1].value & ((1 << bits) - 1)
            out[name] = v - (1 << bits) if v >> (bits - 1) else v
    return out


def _emit_region_fn(func, flat, mctx, sync_em, k, live, succ, remat, warp=False, consts=None, soft=False,
                    masked=False, uniform=None):
    """Region k (0: the kernel's start, else: after sync site k) as one loop over the block's
    threads; returns the next region all threads agree on, 0 when all exited, -1 when they disagree.
    A barrier stores only the live registers this region may have written: the others still hold
    the value restored at its start, which is in their slot already. warp: the kernel also splits
    at shfl/vote (see _emit_region_kernel); the loops run the live range in %rng. soft: every thread records its
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
    reach = _region_reach(flat.body, succ, start_idx)
    # Each thread's next region is read only by the fallback, after the threads disagreed; with one
    # way out of this region they cannot, and a loop without that store vectorizes without a
    # runtime overlap check against the SoA area. Nor is there anything to track then.
    exits = _region_exits(flat.body, reach, start_idx)
    outs = [site[0] for site in sync_em.sync_sites if site[4] in reach] + ([0] if exits else [])
    record = len(outs) > 1 or soft
    acc = _range_loops(f, bx, by, warp, track=record)
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
    writes = _region_writes(flat.body, reach, em.written)
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
            # (constant ones are the fallback's table entries, see _warp_convert_state)
            for off, op in _warp_inputs(flat.body[idx]).items():
                if _const_operand(off, op, flat, remat) is not None:
                    continue
                if off == _X_A:
                    a = em.load_frame(_X_A, "i64")
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
            for i in _remat_chain(need, remat, flat.body, em.is_register):
                em.cur_index = i
                em.emit_instruction(flat.body[i])
            if status == FE.ST_WARP:
                em.cur_index = idx
                _warp_result(em, flat.body[idx], remat, hslot, mctx)
                if after is not None:
                    after()
            f.term(f"br label %{cont}")
    f.label("tx.latch")
    arrivals = ", ".join([f"[ {j}, %save.{j} ]" for j, *_ in em.sync_sites] + ["[ 0, %thread.exit ]"] +
                         (["[ %waits, %skip ]"] if masked else []))
    f.emit(f"%site = phi i32 {arrivals}")
    f.emit("%live = icmp ne i32 %site, 0")
    f.emit("%site.k = select i1 %live, i32 %site, i32 -1")
    _range_latches(f, mctx, bx, by, bz, acc, warp, None if record else (outs or [0])[0])
    f.lines[mark:mark] = _store_undef_regs(em)
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
    return _assemble(header, em, after_entry, f.lines, [])


def _emit_region_kernel(func, flat, mctx, sym, fb, sync_em, warp=False, soft=False):
    """Every region between barriers as one loop over the block's threads, the body inlined, the
    values live across a barrier in struct-of-arrays slots (slot of register r for thread t at
    soa + off(r) * n + t * size(r), off(r) its offset in the resumable thread's frame), so LLVM
    can vectorize across threads. After each region all threads must agree on the next one; if
    they do not (divergent barriers, some threads exited), the block's state is copied into the
    resumable threads' frames and the general barrier scheduler finishes the block.
    warp: shfl and vote split regions too. The region before one stores each thread's inputs in
    exchange slots (_X_*); the next one starts by evaluating the collective for each thread from its
    warp's slots (lanes: linear thread id % 32). Threads that exit leave the block's live range
    [lo, hi) (%rng); if the live threads stop being one range, or disagree on the next collective or
    barrier, the general warp scheduler (warp_scheduler.c) finishes the block from where they are.
    soft: some sites are cpu/lockstep.py's yields at loop headers, which the threads need not agree on: where they
    disagree, the block runs a yield some of them wait at, for those threads only (cpu/lockstep.soft_dispatch)."""
    if not _region_ready(func, flat, sync_em, warp):
        return None
    if warp:
        # each shfl's shuffled values in a slot of its own after the frame (so the region after it
        # reads one slot and writes others); a shfl in a loop (its region may reach it again) is
        # read from a copy the block function makes. Then room for reads up to 31 threads beyond
        # either end of the block.
        succ0 = _successors(flat.body)
        shfl_sites = [(site[0], site[4]) for site in sync_em.sync_sites
                      if flat.body[site[4]].opcode == "shfl"]
        sync_em.x_slots = {k: fb + 4 * i for i, (k, _) in enumerate(shfl_sites)}
        sync_em.x_self = {k for k, idx in shfl_sites if idx in _region_reach(flat.body, succ0, idx + 1)}
        sync_em.x_read_off = fb + 4 * len(shfl_sites)
        fb = round_up(sync_em.x_read_off + 4 + 128, 64)
    from ptx.passes.liveness import live_out_sets
    live = live_out_sets(flat.body, sync_em.is_register, flat.branch_targets,
                         indices=[site[4] for site in sync_em.sync_sites])
    succ = _successors(flat.body)
    remat = _rematerializable(flat.body, sync_em.is_register)
    region_fns = []
    consts = _constant_registers(flat, remat, sync_em.regs)
    yields = {site[0] for site in sync_em.sync_sites if "yield" in flat.body[site[4]].mods}
    # per yield: the registers it carries that may be affine in %tid (checked before the region relies on it)
    uniform = {}
    if yields:
        slopes = affine.Slopes(flat.body, sync_em.is_register)
        types = {name: sync_em.regs[name][0] for name in sync_em.reg_off if name in sync_em.regs}
        skip = set(remat) | set(consts)
    for k, *_, idx in sync_em.sync_sites:
        if k in yields:
            cands = affine.candidates(slopes, live[idx], types, skip)
            if cands:
                uniform[k] = cands
                region_fns.append(affine.uniform_check(f"uc{k}.{func.name}", cands, sync_em.reg_off))
    for k in range(len(sync_em.sync_sites) + 1):
        # a yield: all threads (that carry affine registers: once checked), those that wait there (or all, when
        # the check fails)
        variants = [(False, None), (True, None)] if k in yields else [(False, None)]
        if k in uniform:
            variants[0] = (False, uniform[k])
        for masked, uni in variants:
            text = _emit_region_fn(func, flat, mctx, sync_em, k, live, succ, remat, warp, consts, soft, masked,
                                   uni)
            if text is None:
                return None
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
        state_text, tables = _warp_convert_state(func, flat, sync_em, remat)
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
    shfls = getattr(sync_em, "x_self", set()) if warp else set()
    if shfls:
        mctx.declare("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
    copy = ""
    if warp:
        copy = (f"  %xs.{{0}} = mul i64 %n64, {{1}}\n  %xsp.{{0}} = getelementptr i8, ptr %soa, i64 %xs.{{0}}\n"
                f"  %xd.{{0}} = mul i64 %n64, {sync_em.x_read_off}\n"
                f"  %xdp.{{0}} = getelementptr i8, ptr %soa, i64 %xd.{{0}}\n  %xn.{{0}} = shl i64 %n64, 2\n"
                f"  call void @llvm.memcpy.p0.p0.i64(ptr %xdp.{{0}}, ptr %xsp.{{0}}, i64 %xn.{{0}}, i1 false)\n")
    reg_blocks = "".join(f"reg.{k}:\n{ballot if k in votes else ''}{copy.format(k, sync_em.x_slots.get(k)) if k in shfls else ''}"
                         f"  %r{k} = {call.format(func.name, k)}\n  br label %disp\n" for k in sites if k not in uniform)
    if soft:
        ublocks, incoming, phis, soft_text = soft_dispatch(func.name, call, sites, yields, uniform)
        reg_blocks += ublocks
    else:
        incoming, phis = ", ".join(["[ %r0, %head ]"] + [f"[ %r{k}, %reg.{k} ]" for k in sites]), ""
    cases = " ".join(["i32 0, label %next"] + [f"i32 {k}, label %reg.{k}" for k in sites])
    range_init = ""
    rng_alloca = f"  %uni = alloca [{affine.MAX_CANDIDATES} x i64], align 8\n" if uniform else ""
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
    block_fn = f"""define i32 {sym}(ptr %L, i64 %first, i64 %last, ptr %W) {{
entry:
{rng_alloca}{_BLOCK_FN_ENTRY}  %nxy = mul i32 %bx, %by
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
{_BLOCK_COORDS}{range_init}  %r0 = {call.format(func.name, 0)}
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
next:
  %b.next = add nuw i64 %b, 1
  %more = icmp ult i64 %b.next, %last
  br i1 %more, label %head, label %done
done:
  ret i32 0
}}"""
    slot = f'@"fbp.{func.name}" = global ptr null, align 8'
    extra = [_BALLOT_FN.format(name=func.name, pred=FE.FH_PRED_IN, out=_X_BALLOT)] if votes else []
    if soft:
        extra.append(lowest_waiting(func.name, yields, len(sites)))
        if not real:
            slot = ""
    return region_fns + extra + [slot, block_fn], "\n".join(tables + [convert_fn]), fb


# A vote's per-warp ballot of the live lanes' predicates (exchange slot FH_PRED_IN), for the next
# region to evaluate the vote from; a warp wholly in the live range without bounds checks (LLVM
# vectorizes that loop).
_BALLOT_FN = """define internal void @"vb.{name}"(ptr %soa, i64 %n64, ptr %rng) noinline {{
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


def _warp_convert_state(func, flat, sync_em, remat):
    """The convert loop's per-thread header for the general warp scheduler: exited threads done,
    threads at a barrier waiting there, threads at a collective waiting there with its inputs
    (from the exchange slots), as the thread function's suspension would have left them."""
    from ptx.codegen.ops_warp import K_SHFL, K_VOTE, SHFL_MODES, VOTE_MODES
    state, kind, mode = [1], [0], [0]      # site 0: exited (DONE)
    fields = (_X_A,) + tuple(off for off, _ in _X_FIELDS)
    consts = {off: [0] for off in fields}  # per site: the input's value, or None: in its slot
    for k, status, cont, after, idx in sync_em.sync_sites:
        st = flat.body[idx]
        inputs = _warp_inputs(st) if status == FE.ST_WARP else {}
        for off in fields:
            consts[off].append(_const_operand(off, inputs[off], flat, remat) if off in inputs else 0)
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
    for off, ty in ((_X_A, "i32"),) + _X_FIELDS:
        lines += [f"  %xo.{off} = mul i64 %n64, {'%tv.a64' if off == _X_A else off}",
                  f"  %xb.{off} = getelementptr i8, ptr %soa, i64 %xo.{off}",
                  f"  %xp.{off} = getelementptr i32, ptr %xb.{off}, i64 %t",
                  f"  %xs.{off} = load i32, ptr %xp.{off}"]
        for t in (f"c{off}", f"f{off}"):
            lines += [f"  %tp.{t} = getelementptr [{n} x i32], ptr @\"cv{t}.{func.name}\", i64 0, i64 %site64",
                      f"  %tv.{t} = load i32, ptr %tp.{t}"]
        lines += [f"  %fl.{off} = icmp ne i32 %tv.f{off}, 0",
                  f"  %xv.{off} = select i1 %fl.{off}, i32 %xs.{off}, i32 %tv.c{off}",
                  f"  %xd.{off} = getelementptr i8, ptr %fr, i64 {off}"]
        if off == _X_A:
            lines += [f"  %xw.{off} = zext i32 %xv.{off} to i64", f"  store i64 %xw.{off}, ptr %xd.{off}"]
        else:
            lines.append(f"  store i32 %xv.{off}, ptr %xd.{off}")
    return "\n".join(lines), tables
