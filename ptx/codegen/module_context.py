"""What a module's code generation shares across targets: the ModuleContext (symbols, shared-memory and
parameter offsets) and the byte layout of variables, parameters and initialisers."""

from __future__ import annotations

import struct

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.errors import PTXSemanticError, PTXUnsupportedError


BUILTIN_FUNCS = FE.BUILTIN_FUNCS


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
        self.rotates = False        # the kernel being emitted has round loops calling ptx_rt_rotate
        self.module = module
        self.fma_contract = fma_contract
        self.memcheck = memcheck      # check every access (ptx/codegen/memcheck.py)
        self.version_guards = version_guards  # guard-free copies of guarded bodies (cpu/thread_loops.py)
        self.lockstep = False   # loops one iteration at a time for all threads (the CPU target's cpu/lockstep.py)
        # (x, y, z): every launch of the module's kernels has this block (a lazy kernel compiled for the block of its
        # first launch, ptx/host_lazy.py); %ntid is then a constant and the thread loops' trip counts known
        self.block = None
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
        # module-scope .texref/.samplerref/.surfref variables: name -> type (ops_texref.py)
        self.opaque = {i.name: i.type.name for i in module.items
                       if isinstance(i, A.VarDecl) and i.type.name in T.OPAQUE}
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


def flat_init(init):
    out = []

    def walk(x):
        for e in x:
            if isinstance(e, list):
                walk(e)
            else:
                out.append(e)
    walk(init or [])
    return out


def init_bytes(d: A.VarDecl, size: int, relocs: list):
    """The initialiser's bytes; symbol-valued elements become relocations
    (byte offset, element size, mask, symbol, addend), patched once addresses are known."""
    t = d.type.name
    esz = T.size_of(t)
    buf = bytearray()
    for e in flat_init(d.init):
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


def layout_params(params):
    out, off = [], 0
    for p in params:
        size = decl_size(p)
        align = p.align or T.size_of(p.type.name) * p.type.vec
        off = round_up(off, align)
        out.append((off, size, align))
        off += size
    return out, off


def setup_addr_vars(em: FunctionEmitter, flat, in_frame: bool):
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


def reg_signature():
    return "ptr %L, ptr %W, ptr %frame, i32 %tid.x, i32 %tid.y, i32 %tid.z, " \
           "i32 %ctaid.x, i32 %ctaid.y, i32 %ctaid.z"


def assemble(header, em: FunctionEmitter, after_entry: list, body_lines: list, footer: list):
    f = em.f
    out = [header, "entry:"]
    out += f.entry_allocas
    out += em.entry_code
    out += after_entry
    out += body_lines
    out += footer
    out.append("}")
    return "\n".join(out)


def kernel_shared_layout(flat, mctx, dyn_align, dyn_names):
    """Lays out a kernel body's static shared variables after the module's common ones (mctx.shared_kernel: name
    -> offset) and collects its dynamic (`extern`, unsized) ones: (end of the static ones, the dynamic base's
    alignment, the dynamic names), starting from the caller's dyn_align and dyn_names."""
    off = mctx.common_shared_end
    mctx.shared_kernel = {}
    dyn_names = list(dyn_names)
    for d in flat.decls.values():
        if d.space != "shared":
            continue
        if d.dims and d.dims[-1] == 0 or d.linkage == "extern":
            dyn_names.append(d.name)
            dyn_align = max(dyn_align, decl_align(d))
            continue
        off = round_up(off, decl_align(d))
        mctx.shared_kernel[d.name] = off
        off += decl_size(d)
    return off, dyn_align, dyn_names


def device_function(em, func: A.Function, flat) -> str:
    """A .func as an LLVM function of the thread's registers (reg_signature) and a pointer per return value and
    parameter; `em`: the target's emitter, its entry started."""
    args, reg_params = [], []
    for kind, decls in (("ret", func.returns), ("arg", func.params)):
        for i, d in enumerate(decls):
            p = f'%"{kind}.{i}"'
            args.append(f"ptr {p}")
            if d.space == "reg":
                reg_params.append((kind, d, p))
            else:
                em.func_params[d.name] = p
    setup_addr_vars(em, flat, in_frame=False)
    for _, d, _ in reg_params:
        flat.decls.setdefault(d.name, d)
    f = em.f
    f.label("start")
    for kind, d, p in reg_params:
        if kind == "arg":
            ty = T.llvm_type(d.type.name)
            em.write(A.Reg(d.name), f.op(f"load {ty}, ptr {p}"), d.type.name)
    em.ret_label = "fn.ret"
    em.emit_body()
    f.label("fn.ret")
    for kind, d, p in reg_params:
        if kind == "ret":
            ty = T.llvm_type(d.type.name)
            f.emit(f"store {ty} {em.read(A.Reg(d.name), d.type.name)}, ptr {p}")
    f.term("ret i32 0")
    sig = reg_signature() + "".join(", " + a for a in args)
    header = f"define internal i32 {llvm_name('f', func.name)}({sig}) {{"
    return assemble(header, em, ["  br label %start"], f.lines, [])
