"""Data movement: ld/ldu/st in every state space (vectors, volatile/relaxed/acquire/release), mov
(including packing and unpacking), cvta and isspacep."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import memcheck, ops_texref
from ptx.codegen import ptxtypes as T
from ptx.codegen.function_emitter import handles, unsupported, semantic, LLVM_BITS

SPACES = ("global", "shared", "local", "const", "param", "generic")
SCOPES = ("cta", "gpu", "sys", "cluster")


def space_of(mods):
    for m in mods:
        if m in SPACES:
            return None if m == "generic" else m
        if m == "shared::cluster":
            return "shared::cluster"      # a CTA's own .shared addresses, or mapa's (ops_cluster.py)
        if m.startswith("shared::"):
            return "shared"
        if m.startswith("param::"):
            return "param"
    return None


def vec_of(mods):
    for m in mods:
        if m in ("v2", "v4", "v8"):
            return int(m[1:])
    return 1


def one_type(ins):
    ts = T.types_in(ins.mods)
    if not ts:
        semantic(ins, "missing type")
    return ts[-1]


def _ordering(mods):
    if "volatile" in mods:
        return "volatile"
    for o in ("acquire", "release", "relaxed", "acq_rel", "sc"):
        if o in mods:
            return o
    return None


def _mem_type(t):
    """PTX .pred is not loadable; everything else maps to its LLVM type."""
    return T.llvm_type(t)


def _load(em, ptr, t, order, align, space=None):
    f = em.f
    ty = _mem_type(t)
    if order == "volatile":
        return f.op(f"load volatile {ty}, ptr {ptr}, align {align}")
    if order in ("acquire", "relaxed", "sc", "acq_rel") and not ty.startswith("<") and ty != "i128":
        o = {"acquire": "acquire", "relaxed": "monotonic", "sc": "seq_cst", "acq_rel": "acquire"}[order]
        return f.op(f"load atomic {ty}, ptr {ptr} {o}, align {T.size_of(t)}")
    return f.op(f"load {ty}, ptr {ptr}, align {align}{em.space_scope(space)}")


def _store(em, ptr, t, val, order, align, space=None):
    f = em.f
    ty = _mem_type(t)
    if order == "volatile":
        f.emit(f"store volatile {ty} {val}, ptr {ptr}, align {align}")
    elif order in ("release", "relaxed", "sc", "acq_rel") and not ty.startswith("<") and ty != "i128":
        o = {"release": "release", "relaxed": "monotonic", "sc": "seq_cst", "acq_rel": "release"}[order]
        f.emit(f"store atomic {ty} {val}, ptr {ptr} {o}, align {T.size_of(t)}")
    else:
        f.emit(f"store {ty} {val}, ptr {ptr}, align {align}{em.space_scope(space)}")


@handles("ld", "ldu")
def op_ld(em, ins):
    t = one_type(ins)
    if t == "pred":
        semantic(ins, "ld of .pred")
    space = space_of(ins.mods)
    n = vec_of(ins.mods)
    order = _ordering(ins.mods)
    dst, src = ins.operands[0], ins.operands[1]
    size = T.size_of(t)
    if space == "param" and order is None and isinstance(src, A.Address) and src.base \
            and em.m.kernel_param_offset(src.base) is not None and not em.is_register(src.base):
        # kernel parameters are constant for the launch: load them once, in the entry block
        off = em.m.kernel_param_offset(src.base) + src.offset
        pb = em.params_base()
        ty = T.llvm_type(t)
        elems = dst.elems if isinstance(dst, A.Vector) else [dst]
        for i, e in enumerate(elems):
            o = off + i * size
            p = em.invariant(("kpp", o), lambda: f"getelementptr i8, ptr {pb}, i64 {o}")
            al = min(size, (o & -o) or size)
            v = em.invariant(("kpv", o, ty), lambda: f"load {ty}, ptr {p}, align {al}")
            em.write(e, v, t)
        return
    base = em.address(src, space)
    memcheck.check(em, base, size * n, False, space)
    align = size
    if n == 1:
        v = _load(em, base, t, order, align, space)
        em.write(dst, v, t)
        return
    if not isinstance(dst, A.Vector) or len(dst.elems) != n:
        semantic(ins, f"expected a {n}-element vector destination")
    for i, e in enumerate(dst.elems):
        p = em.f.op(f"getelementptr i8, ptr {base}, i64 {i * size}") if i else base
        v = _load(em, p, t, order, align, space)
        em.write(e, v, t)


@handles("st")
def op_st(em, ins):
    t = one_type(ins)
    space = space_of(ins.mods)
    n = vec_of(ins.mods)
    order = _ordering(ins.mods)
    dst, src = ins.operands[0], ins.operands[1]
    base = em.address(dst, space)
    size = T.size_of(t)
    memcheck.check(em, base, size * n, True, space)
    if n == 1:
        v = em.read(src, t)
        _store(em, base, t, v, order, size, space)
        return
    if not isinstance(src, A.Vector) or len(src.elems) != n:
        semantic(ins, f"expected a {n}-element vector source")
    vals = [em.read(e, t) for e in src.elems]
    for i, v in enumerate(vals):
        p = em.f.op(f"getelementptr i8, ptr {base}, i64 {i * size}") if i else base
        _store(em, p, t, v, order, size, space)


@handles("mov")
def op_mov(em, ins):
    t = one_type(ins)
    dst, src = ins.operands[0], ins.operands[1]
    f = em.f
    if isinstance(src, A.Vector):
        # pack: the first element is the least significant
        n = len(src.elems)
        total = T.bits_of(t)
        ebits = total // n
        acc = None
        for i, e in enumerate(src.elems):
            v = em.read(e, f"b{ebits}")
            w = f.op(f"zext i{ebits} {v} to i{total}")
            if i:
                w = f.op(f"shl i{total} {w}, {i * ebits}")
            acc = w if acc is None else f.op(f"or i{total} {acc}, {w}")
        em.write(dst, acc, f"b{total}")
        return
    if isinstance(dst, A.Vector):
        n = len(dst.elems)
        total = T.bits_of(t)
        ebits = total // n
        v = em.read(src, f"b{total}")
        for i, e in enumerate(dst.elems):
            s = f.op(f"lshr i{total} {v}, {i * ebits}") if i else v
            s = f.op(f"trunc i{total} {s} to i{ebits}")
            em.write(e, s, f"b{ebits}")
        return
    if isinstance(src, (A.Reg, A.SymbolExpr)) and not getattr(src, "offset", 0) and ops_texref.kind(em, src.name):
        # a texture, sampler or surface reference: its handle, which tex/txq/suld take in a register
        em.write(dst, ops_texref.handle(em, ins, src.name, ("texref", "samplerref", "surfref")), t)
        return
    if isinstance(src, (A.Reg, A.SymbolExpr)) and not src.name.startswith("%") \
            and em.m.func_decls.get(src.name) and src.name not in em.addr_vars:
        prefix = "f"
        if em.m.func_decls[src.name].kind == "entry":
            # a kernel's address is what device-side launches take (ops_cdp.py): its block function, which
            # the CPU runtime knows by that address (ptx_rt_register_kernel)
            from ptx.codegen.function_emitter import FunctionEmitter
            if type(em) is not FunctionEmitter:
                unsupported(ins, f"the address of kernel {src.name} (device-side launches run on the CPU "
                                 "backend only)")
            prefix = "k"
        v = f.op(f"ptrtoint ptr @\"{prefix}.{src.name}\" to i64")
        em.write(dst, em.coerce(v, "i64", T.llvm_type(t)), t)
        return
    v = em.read(src, t)
    em.write(dst, v, t)


def _cvta_space(mods):
    """The state space a cvta/isspacep names; .shared::cta is .shared, .shared::cluster the cluster's
    distributed shared memory (ops_cluster.py)."""
    for m in mods:
        if m in ("global", "shared", "local", "const", "param", "shared::cluster"):
            return m
        if m == "shared::cta":
            return "shared"
    return None


@handles("cvta")
def op_cvta(em, ins):
    t = one_type(ins)
    to = "to" in ins.mods
    space = _cvta_space(ins.mods)
    if space is None:
        unsupported(ins)
    v = em.read(ins.operands[1], t)
    if space == "shared::cluster" and em.CLUSTERS:
        from ptx.codegen import ops_cluster
        v = ops_cluster.cvta_cluster(em, v, T.bits_of(t), to)
    elif space in ("shared", "shared::cluster"):
        v = em.cvta_shared(v, T.bits_of(t), to)
    em.write(ins.operands[0], v, t)


@handles("isspacep")
def op_isspacep(em, ins):
    f = em.f
    space = _cvta_space(ins.mods)
    a = em.read(ins.operands[1], "u64")
    in_shared, in_local = em.space_tests(a)
    if space == "shared::cluster" and em.CLUSTERS:
        from ptx.codegen import ops_cluster
        r = f.op(f"icmp ne i32 {ops_cluster.rank_of_generic(em, a)}, -1")
    elif space in ("shared", "shared::cluster"):
        r = in_shared
    elif space == "global":
        r = f.op(f"xor i1 {f.op(f'or i1 {in_shared}, {in_local}')}, true")
    elif space == "local":
        r = in_local
    elif space in ("const", "param"):
        r = "false"
    else:
        unsupported(ins)
    em.write(ins.operands[0], r, "pred")
