"""Texture, sampler and surface references (.texref, .samplerref, .surfref) and the two texturing modes: what a
reference's name means to tex/tld4/txq/suld/sust/suq, mov and istypep, and the bytes of its module variable.

A module's .texref/.surfref variable is 8 bytes the driver writes (zluda_py/driver/texref.py): the address of
the descriptor (texture.h) it bound, 0 while unbound; its handle is that address, the same kind of value a
texture or surface object is. A .samplerref variable holds its initialiser as texture.h's ptx_sampler, and its
handle is its own address. A kernel parameter of these types holds a handle."""

from __future__ import annotations

import ctypes

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen.function_emitter import handles, semantic
from ptx.errors import PTXSemanticError, PTXUnsupportedError
from ptx.runtime.texture import KINDS, SAMPLER_MAGIC, SAMPLER_MODES, Descriptor, Sampler

# the members of the opaque types' initialisers (the PTX ISA's tables); another name is an error for NVIDIA's JIT
# ("Unrecognized field name ... in opaque struct initializer"), a sampler's normalized_coords or width too
SAMPLER_MEMBERS = frozenset(("filter_mode", "addr_mode_0", "addr_mode_1", "addr_mode_2", "force_unnormalized_coords"))
MEMBERS = {"samplerref": SAMPLER_MEMBERS,
           "texref": SAMPLER_MEMBERS | {"width", "height", "depth", "channel_data_type", "channel_order",
                                        "normalized_coords", "array_size", "num_mipmap_levels", "num_samples"}}
MEMBERS["surfref"] = MEMBERS["texref"] | {"memory_layout"}
FILTERS = ("nearest", "linear")
SAMPLER_QUERIES = ("filter_mode", "addr_mode_0", "addr_mode_1", "addr_mode_2", "force_unnormalized_coords")
SIGS = {        # joined into ops_tex.SIGS, with the texture runtime's other entry points
    "ptx_tex_sampled": "ptr @ptx_tex_sampled(ptr, ptr, ptr)",
    "ptx_sampler_query": "i32 @ptx_sampler_query(ptr, i32)",
    "ptx_handle_is": "i32 @ptx_handle_is(ptr, i32)",
}


def _declare(em, name):
    em.m.declare("declare " + SIGS[name])


def independent(module) -> bool:
    return "texmode_independent" in module.target


# ------------------------------------------------------------------ module variables

def _value(d, f, names):
    """A member's value: its index in `names` (a name of PTX's enum, or the integer itself)."""
    if isinstance(f.value, int):
        if not 0 <= f.value < len(names):
            raise PTXSemanticError(f"{f.name} = {f.value} in the initialiser of {d.name}", f.pos.line, f.pos.col)
        return f.value
    if f.value not in names:
        raise PTXSemanticError(f"Unrecognized initial value symbol '{f.value}' for {f.name} of {d.name}",
                               f.pos.line, f.pos.col)
    return names.index(f.value)


def variable_bytes(d: A.VarDecl, module) -> bytes:
    """The initial bytes of a module-scope .texref/.surfref/.samplerref variable. A texture or surface
    reference's initialiser is checked and left out: the driver holds the reference's state, and NVIDIA's
    reports none of it (cuTexRefGetFilterMode and the others answer their defaults after such a load)."""
    if d.dims or d.linkage == "extern":
        raise PTXUnsupportedError(f"{'an array of' if d.dims else 'an .extern'} .{d.type.name} ({d.name})",
                                  d.pos.line, d.pos.col)
    fields = d.init or []
    for f in fields:
        if f.name not in MEMBERS[d.type.name]:
            raise PTXSemanticError(f"Unrecognized field name '{f.name}' in the initialiser of {d.name}",
                                   f.pos.line, f.pos.col)
        if f.name == "filter_mode":
            _value(d, f, FILTERS)
        elif f.name.startswith("addr_mode_"):
            _value(d, f, SAMPLER_MODES)
        elif not isinstance(f.value, int):
            raise PTXSemanticError(f"{f.name} of {d.name} takes an integer", f.pos.line, f.pos.col)
    if d.type.name != "samplerref":
        return bytes(8)
    if not independent(module):
        raise PTXSemanticError(f".samplerref {d.name}: samplers apart from textures need .target "
                               "texmode_independent", d.pos.line, d.pos.col)
    s = Sampler(magic=SAMPLER_MAGIC)
    for f in fields:
        if f.name == "filter_mode":
            s.filter = _value(d, f, FILTERS)
        elif f.name.startswith("addr_mode_"):
            s.mode[int(f.name[-1])] = _value(d, f, SAMPLER_MODES)
        elif f.name == "force_unnormalized_coords":
            s.force_unnormalized = 1 if f.value else 0
    return bytes(s)


# ------------------------------------------------------------------ names in instructions

def kind(em, name):
    """'texref', 'samplerref' or 'surfref' when `name` is a reference (a module variable or a kernel
    parameter of that type), else None."""
    if name is None or em.is_register(name):
        return None
    for p in getattr(em.flat.func, "params", ()):
        if p.name == name:
            if p.type.name in T.OPAQUE:
                return p.type.name
            return p.ptr_space if p.ptr_space in T.OPAQUE else None
    if name not in em.m.opaque or em.flat.lookup(name) is not None:
        return None                 # not a reference, or a variable of the function's own shadowing one
    return em.m.opaque[name]


def handle(em, ins, name, allowed):
    """The i64 handle `name` stands for: a register's value, a kernel parameter's, the descriptor address a
    module .texref/.surfref holds, a module .samplerref's own address. `allowed`: the reference kinds the
    operand may be (a register may be any)."""
    if em.is_register(name):
        return em.read(A.Reg(name), "u64", ins)
    k = kind(em, name)
    if k is None:
        semantic(ins, f"{name} is not a register or a {' / '.join('.' + a for a in allowed)} variable")
    if k not in allowed:
        semantic(ins, f"operand {name} is a .{k}: {ins.opcode} takes a {' or '.join('.' + a for a in allowed)} "
                      "or a .u64 register")
    p = em.symbol_ptr(name, ins)
    if k == "samplerref" and em.m.kernel_param_offset(name) is None:
        return em.f.op(f"ptrtoint ptr {p} to i64")
    return em.f.op(f"load i64, ptr {p}, align 8")


def _sampler_name(op):
    if isinstance(op, (A.Reg, A.SymbolExpr)) and not getattr(op, "offset", 0):
        return op.name
    return None


def texture(em, ins, addr):
    """The descriptor pointer a tex/tld4 address names: `[texture, {c}]`, or `[texture, sampler, {c}]` (the
    texture's descriptor with the sampler's filtering and addressing): independent mode's sampler is a
    .samplerref's, unified mode's another texture's (a .texref or a handle)."""
    sampled = len(addr.extra) > 1
    indep = independent(em.m.module)
    if indep and not sampled:
        semantic(ins, f"{ins.opcode} takes [texture, sampler, coordinates] in independent texturing mode")
    t = em.f.op(f"inttoptr i64 {handle(em, ins, addr.base, ('texref',))} to ptr")
    if not sampled:
        return t
    name = _sampler_name(addr.extra[0])
    if name is None:
        semantic(ins, "the sampler must be a reference or a .u64 register")
    s = em.f.op(f"inttoptr i64 {handle(em, ins, name, ('samplerref',) if indep else ('texref',))} to ptr")
    buf = em.f.alloca(f"[{ctypes.sizeof(Descriptor)} x i8]", align=16)
    _declare(em, "ptx_tex_sampled")
    return em.f.op(f"call ptr @ptx_tex_sampled(ptr {t}, ptr {s}, ptr {buf})")


def query(em, ins, addr, what, name_of_query, surface):
    """txq/suq of [a]: the runtime's answer for attribute number `what`."""
    if surface:
        h = handle(em, ins, addr.base, ("surfref",))
        fn = "ptx_tex_query"
    elif name_of_query in SAMPLER_QUERIES and independent(em.m.module):
        h = handle(em, ins, addr.base, ("samplerref",))
        fn = "ptx_sampler_query"
    elif name_of_query == "force_unnormalized_coords":
        semantic(ins, "txq.force_unnormalized_coords queries a .samplerref (independent texturing mode)")
    else:
        h = handle(em, ins, addr.base, ("texref",))
        fn = "ptx_tex_query"
    p = em.f.op(f"inttoptr i64 {h} to ptr")
    if fn == "ptx_sampler_query":
        _declare(em, fn)
    else:
        em.m.declare("declare i32 @ptx_tex_query(ptr, i32)")
    return em.f.op(f"call i32 @{fn}(ptr {p}, i32 {what})")


@handles("istypep")
def istypep(em, ins):
    kinds = [m for m in ins.mods if m in KINDS]
    if len(kinds) != 1 or len(ins.mods) != 1 or len(ins.operands) != 2:
        semantic(ins, "istypep.{texref,samplerref,surfref} p, a")
    src = ins.operands[1]
    if not isinstance(src, A.Reg) or not em.is_register(src.name):
        semantic(ins, "istypep's source is a .u64 register")
    h = em.f.op(f"inttoptr i64 {em.read(src, 'u64', ins)} to ptr")
    _declare(em, "ptx_handle_is")
    v = em.f.op(f"call i32 @ptx_handle_is(ptr {h}, i32 {KINDS[kinds[0]]})")
    em.write(ins.operands[0], em.f.op(f"icmp ne i32 {v}, 0"), "pred", ins)
