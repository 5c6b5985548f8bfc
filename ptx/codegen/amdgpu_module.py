"""Builds the LLVM IR module for `amdgcn-amd-amdhsa` from a PTX module: globals in addrspace(1),
device functions, and per kernel an `amdgpu_kernel` whose explicit arguments are the PTX parameters
(byref, natural alignment; LLVM appends the v5 hidden arguments) calling the kernel body."""

from __future__ import annotations

from dataclasses import dataclass, field

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen.amdgpu_emitter import AmdgpuFunctionEmitter, AmdModuleContext
from ptx.codegen.module_context import (BUILTIN_FUNCS, init_bytes, flat_init, layout_params, setup_addr_vars,
                                        reg_signature, assemble, decl_align, decl_size, round_up, llvm_name,
                                        kernel_shared_layout, device_function)
from ptx.codegen.reserved_smem import reserve_smem
from ptx.errors import PTXUnsupportedError
from ptx.passes.flatten_scopes import flatten_function

from ptx.codegen import ops_int, ops_float, ops_cvt, ops_mem, ops_ctrl, ops_warp, ops_atom, ops_mbarrier  # noqa: F401
from ptx.codegen import ops_surf, ops_tex, ops_texref  # noqa: F401
from ptx.codegen import ops_simd  # noqa: F401  (video and packed 16x2 integer instructions)
from ptx.codegen import ops_async  # noqa: F401  (cp.async and the bulk and tensor-map copies)
from ptx.codegen import ops_cluster, ops_narrow_float, ops_f32x2  # noqa: F401  (clusters of one, fp8/6/4, f32x2)
from ptx.codegen import ops_mma, ops_mma_move  # noqa: F401  (refused by name on AMD GPUs)
from ptx.codegen import amdgpu_ops  # noqa: F401  (registers the amdgcn overrides)

MAX_BLOCK = 1024


@dataclass
class AmdKernelInfo:
    name: str
    params: list                     # [(offset, size, align)] -- the kernarg layout
    param_size: int
    static_shared_bytes: int         # PTX static shared memory (what cuFuncGetAttribute reports)
    lds_bytes: int                   # LDS the kernel reserves (static + scratch; dynamic starts here)
    max_threads: int                 # .max_flat_workgroup_size
    maxntid: tuple = None
    reqntid: tuple = None
    param_types: list = field(default_factory=list)


@dataclass
class AmdgpuIR:
    text: str
    kernels: dict                    # name -> AmdKernelInfo
    globals: dict                    # ptx name -> size


def _emit_global(d: A.VarDecl, mctx, out):
    if d.type.name in T.OPAQUE:
        # a texture/surface reference's descriptor address (the driver writes it) or a sampler (ops_texref.py)
        data = ops_texref.variable_bytes(d, mctx.module)
        name = f'@"{d.name}"'
        mctx.global_syms[d.name] = (name, len(data))
        init = "[" + ", ".join(f"i8 {b}" for b in data) + "]"
        out.append(f"{name} = protected addrspace(1) externally_initialized global [{len(data)} x i8] {init}, "
                   "align 8")
        return
    size = decl_size(d)
    if size == 0 and d.init:
        size = len(flat_init(d.init)) * T.size_of(d.type.name) * d.type.vec
    size = max(size, 1)
    name = f'@"{d.name}"'
    mctx.global_syms[d.name] = (name, size)
    align = max(decl_align(d), 1)
    init = "zeroinitializer"
    if d.init:
        relocs = []
        data = init_bytes(d, size, relocs)
        if relocs:
            ty, init = _initialiser_with_addresses(d, data, relocs, mctx)
            out.append(f"{name} = protected addrspace(1) externally_initialized global {ty} {init}, align {align}")
            return
        init = "[" + ", ".join(f"i8 {b}" for b in data) + "]"
    # externally_initialized: the host may write it (cuMemcpyHtoD to the symbol) before a launch
    out.append(f"{name} = protected addrspace(1) externally_initialized global [{size} x i8] {init}, align {align}")


def _merge_byte_addresses(relocs):
    """nvcc writes an unaligned address as 8 one-byte pieces masked 0xFF << 8k: one 8-byte address."""
    out, i = [], 0
    while i < len(relocs):
        grp = relocs[i:i + 8]
        off, size, mask, sym, addend = relocs[i]
        if size == 1 and len(grp) == 8 and all(
                g[0] == off + k and g[1] == 1 and g[2] == 0xFF << (8 * k) and g[3] == sym and g[4] == addend
                for k, g in enumerate(grp)):
            out.append((off, 8, 0, sym, addend))
            i += 8
        else:
            out.append(relocs[i])
            i += 1
    return out


def _initialiser_with_addresses(d, data, relocs, mctx):
    """A packed struct of byte runs and 64-bit addresses (the loader relocates them)."""
    types, vals, pos = [], [], 0

    def run(b):
        types.append(f"[{len(b)} x i8]")
        vals.append(f"[{len(b)} x i8] [" + ", ".join(f"i8 {x}" for x in b) + "]")
    for off, size, mask, sym, addend in _merge_byte_addresses(sorted(relocs)):
        if size != 8 or mask:
            raise PTXUnsupportedError(f"initialiser of {d.name}: a {size}-byte or masked address of {sym}",
                                      d.pos.line, d.pos.col)
        if off > pos:
            run(data[pos:off])
        if sym in mctx.module_var_names:
            types.append("ptr addrspace(1)")
            vals.append(f'ptr addrspace(1) getelementptr (i8, ptr addrspace(1) @"{sym}", i64 {addend})')
        elif sym in mctx.func_decls and mctx.func_decls[sym].body is not None:
            types.append("ptr")
            vals.append(f'ptr getelementptr (i8, ptr {llvm_name("f", sym)}, i64 {addend})')
        else:
            raise PTXUnsupportedError(f"initialiser of {d.name} refers to {sym}, which has no address",
                                      d.pos.line, d.pos.col)
        pos = off + 8
    if pos < len(data):
        run(data[pos:])
    return "<{ " + ", ".join(types) + " }>", "<{ " + ", ".join(vals) + " }>"


def _emit_device_function(func, flat, mctx):
    em = AmdgpuFunctionEmitter(mctx, flat, "func")
    em.start_entry()
    return device_function(em, func, flat)


def _uses_bar_red(flat):
    return any(isinstance(s, A.Instruction) and s.opcode in ("bar", "barrier") and "red" in s.mods
               for s in flat.body)


def _emit_kernel(func, flat, mctx, out):
    params, param_size = layout_params(func.params)
    mctx.kernel_params = {p.name: off for p, (off, _, _) in zip(func.params, params)}
    off, dyn_align, dyn_names = kernel_shared_layout(flat, mctx, 16, ())
    static_shared = round_up(off, dyn_align) if off else 0
    mctx.bar_red_offset = None
    lds = static_shared
    if _uses_bar_red(flat):
        mctx.bar_red_offset = lds
        lds = round_up(lds + 4, dyn_align)
    mctx.kernel_dynamic_base = lds
    mctx.kernel_static_shared = static_shared
    for n in dyn_names:
        mctx.shared_kernel[n] = lds

    em = AmdgpuFunctionEmitter(mctx, flat, "fast")
    em.start_entry()
    setup_addr_vars(em, flat, in_frame=False)
    em.exit_label = "k.exit"
    f = em.f
    f.label("start")
    em.emit_body()
    f.label("k.exit")
    f.term("ret i32 0")
    body_name = llvm_name("t", func.name)
    out.append(assemble(f"define internal i32 {body_name}({reg_signature()}) alwaysinline {{", em,
                         ["  br label %start"], f.lines, []))

    req = func.directives.get("reqntid")
    maxn = func.directives.get("maxntid")
    dims = req or maxn
    limit = MAX_BLOCK
    if dims:
        n = 1
        for x in dims:
            n *= int(x)
        limit = max(1, min(n, MAX_BLOCK))
    args = ", ".join(f"ptr addrspace(4) byref([{max(s, 1)} x i8]) align {a} %\"p{i}\""
                     for i, (o, s, a) in enumerate(params))
    attrs = [f'"amdgpu-flat-work-group-size"="1,{limit}"', f'"amdgpu-lds-size"="{lds}"',
             '"uniform-work-group-size"="true"', '"amdgpu-implicitarg-num-bytes"="256"']
    mctx.kernel_attrs.append(" ".join(attrs))
    attr_id = 100 + len(mctx.kernel_attrs) - 1
    md = ""
    if req:
        dims3 = [int(x) for x in req] + [1] * (3 - len(req))
        md = f" !reqd_work_group_size !{{i32 {dims3[0]}, i32 {dims3[1]}, i32 {dims3[2]}}}"
    mctx.declare("declare ptr addrspace(4) @llvm.amdgcn.kernarg.segment.ptr()")
    mctx.declare("declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()")
    out.append(f"""define amdgpu_kernel void @"{func.name}"({args}) #{attr_id}{md} {{
entry:
  %ks = call ptr addrspace(4) @llvm.amdgcn.kernarg.segment.ptr()
  %L = addrspacecast ptr addrspace(4) %ks to ptr
  %dyn3 = inttoptr i32 {lds} to ptr addrspace(3)
  %W = addrspacecast ptr addrspace(3) %dyn3 to ptr
  %st = call i32 {body_name}(ptr %L, ptr %W, ptr null, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0)
  ret void
}}""")
    return AmdKernelInfo(func.name, params, param_size, static_shared, lds, limit, maxn, req,
                         [p.type.name for p in func.params])


def build_amdgpu_ir(module: A.Module, target, datalayout: str, fma_contract=False) -> AmdgpuIR:
    mctx = AmdModuleContext(module, target, fma_contract)
    mctx.kernel_attrs = []
    glines, funcs, bodies, kernels = [], {}, [], {}
    mctx.module_var_names = {i.name for i in module.items
                             if isinstance(i, A.VarDecl) and i.space in ("global", "const")}
    for item in module.items:
        if isinstance(item, A.Function):
            prev = mctx.func_decls.get(item.name)
            if prev is None or prev.body is None:
                mctx.func_decls[item.name] = item
    for item in module.items:
        if isinstance(item, A.VarDecl):
            if item.space in ("global", "const"):
                _emit_global(item, mctx, glines)
            elif item.space == "shared":
                if item.linkage == "extern" or (item.dims and item.dims[-1] == 0):
                    mctx.dynamic_shared_names.add(item.name)
                else:
                    off = round_up(mctx.common_shared_end, decl_align(item))
                    mctx.shared_common[item.name] = off
                    mctx.common_shared_end = off + decl_size(item)
            else:
                raise PTXUnsupportedError(f"module-level .{item.space} variable {item.name}",
                                          item.pos.line, item.pos.col)
    for name, fn in mctx.func_decls.items():
        if fn.body is not None:
            funcs[name] = flatten_function(fn)
    for name, ff in funcs.items():
        if ff.func.kind == "func":
            for d in ff.decls.values():
                if d.space == "shared" and not (d.linkage == "extern" or (d.dims and d.dims[-1] == 0)):
                    off = round_up(mctx.common_shared_end, decl_align(d))
                    mctx.shared_common[d.name] = off
                    mctx.common_shared_end = off + decl_size(d)
                elif d.space == "shared":
                    mctx.dynamic_shared_names.add(d.name)
    reserve_smem(mctx, funcs)
    for name, ff in funcs.items():
        if ff.func.kind == "func" and name not in BUILTIN_FUNCS:
            mctx.shared_kernel = {}
            mctx.kernel_params = {}
            mctx.bar_red_offset = None
            bodies.append(_emit_device_function(ff.func, ff, mctx))
    for name, ff in funcs.items():
        if ff.func.kind == "entry":
            kernels[name] = _emit_kernel(ff.func, ff, mctx, bodies)
    attrs = [f"attributes #{100 + i} = {{ {a} }}" for i, a in enumerate(mctx.kernel_attrs)]
    text = "\n".join([
        "; generated by ptx.codegen.amdgpu_module",
        'target triple = "amdgcn-amd-amdhsa"',
        f'target datalayout = "{datalayout}"',
        *glines, *sorted(mctx.declarations), *mctx.helpers.values(), *bodies, *attrs,
        "!llvm.module.flags = !{!0}",
        '!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}',
    ]) + "\n"
    gl = {k: v[1] for k, v in mctx.global_syms.items()}
    return AmdgpuIR(text, kernels, gl)
