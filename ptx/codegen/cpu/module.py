"""The host CPU's LLVM IR module for a PTX module: globals, device functions and one block-range
function per kernel (ptxrt.h ABI), plus the module of the region kernels' lazily built fallbacks."""

from __future__ import annotations

from dataclasses import dataclass

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen.function_emitter import FunctionEmitter
from ptx.codegen.reserved_smem import reserve_smem
from ptx.errors import PTXUnsupportedError
from ptx.passes.flatten_scopes import flatten_function
from ptx.passes.inline_sync_calls import inline_sync_calls
from ptx.passes.sync_points import functions_with_sync, sync_kind
from ptx.codegen.cpu import lockstep
from ptx.codegen.cpu.kernel_entry import emit_kernel
from ptx.codegen.module_context import (BUILTIN_FUNCS, ModuleContext, assemble, decl_align, decl_size, flat_init,
                                        init_bytes, llvm_name, reg_signature, round_up, setup_addr_vars)

# the instruction families register their handlers on import
from ptx.codegen import ops_int, ops_float, ops_cvt, ops_mem, ops_ctrl, ops_warp, ops_atom, ops_mbarrier  # noqa: F401
from ptx.codegen import ops_simd  # noqa: F401  (video and packed 16x2 integer instructions)
from ptx.codegen import ops_tex  # noqa: F401
from ptx.codegen import ops_cluster, ops_narrow_float, ops_f32x2  # noqa: F401  (clusters of one, fp8/6/4, f32x2)
from ptx.codegen import ops_mma, ops_mma_move  # noqa: F401  (tensor-core matrix instructions)
from ptx.codegen import ops_async  # noqa: F401  (cp.async and the bulk and tensor-map copies)


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
        size = len(flat_init(d.init)) * T.size_of(d.type.name) * d.type.vec
    size = max(size, 1)
    name = llvm_name("g", d.name)
    mctx.global_syms[d.name] = (name, size)
    align = max(decl_align(d), 1)
    if d.init:
        got = _INITS.get(id(d))
        if got is None or got[0] is not d or got[1] != size:
            relocs = []
            got = _INITS[id(d)] = (d, size, init_bytes(d, size, relocs), relocs)
            while len(_INITS) > _INITS_MAX:
                _INITS.pop(next(iter(_INITS)))
        data, relocs = got[2], got[3]
        for r in relocs:
            mctx.relocations.append((d.name,) + r)
        body = "".join(map(_HEX_BYTE.__getitem__, data))
        out.append(f'{name} = global [{size} x i8] c"{body}", align {align}')
    else:
        out.append(f"{name} = global [{size} x i8] zeroinitializer, align {align}")


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
    setup_addr_vars(em, flat, in_frame=False)
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
    sig = reg_signature() + "".join(", " + a for a in args)
    header = f"define internal i32 {llvm_name('f', func.name)}({sig}) {{"
    return assemble(header, em, ["  br label %start"], f.lines, [])


@dataclass
class HostIR:
    text: str
    kernels: dict                 # name -> KernelInfo
    globals: dict                 # ptx name -> (llvm global name without @, size)
    relocations: list             # symbol-valued initialiser elements, patched after JIT
    functions: dict               # ptx name of a .func -> its LLVM name (for relocations)
    fallback: str = ""            # module text of the region kernels' fallbacks ("" if none):


FALLBACK_GLOBAL = 'fbg.'


def fallback_module(mctx, bodies):
    """The fallback functions with what they call (device functions, helpers) in a module of their
    own; it refers to the main module's globals through external declarations under other names
    (`@"g.x"` -> `@"fbg.x"`), which the loader binds to the main module's addresses."""
    if not mctx.fallback_funcs:
        return ""
    decls = [f'{name} = external global [{size} x i8]' for name, size in mctx.global_syms.values()]
    text = "\n".join(["; generated by ptx.codegen.cpu (fallbacks)", *decls,
                      *sorted(mctx.declarations), *mctx.helpers.values(),
                      *(b for b in bodies if b.startswith('define internal i32 @"f.')),
                      *mctx.fallback_funcs]) + "\n"
    return text.replace('@"g.', '@"' + FALLBACK_GLOBAL)


def build_host_ir(module: A.Module, fma_contract=False, memcheck=False, version_guards=True) -> HostIR:
    """version_guards: give bodies with exit guards a guard-free copy (see cpu/thread_loops.py; for targets
    without cheap masked stores)."""
    mctx = ModuleContext(module, fma_contract, memcheck, version_guards)
    mctx.lockstep = lockstep.ENABLED
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
    text = "\n".join(["; generated by ptx.codegen.cpu", *glines, *sorted(mctx.declarations),
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
    return HostIR(text, kernels, gl, mctx.relocations, fnames, fallback_module(mctx, bodies))
