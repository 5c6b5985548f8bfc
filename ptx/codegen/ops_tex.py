"""Texture instructions: tex, tld4, txq (and the handle and coordinate helpers ops_surf shares), each a call into the runtime's
texture.c with the handle (a texture.h descriptor's address) the kernel was given: on the CPU the runtime
library's, on AMD GPUs its bitcode linked into the module (ptx/amdgpu_texture.py)."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen.function_emitter import check_mods, handles, semantic, unsupported

GEOMETRIES = ("1d", "2d", "3d", "a1d", "a2d", "cube", "acube", "2dms", "a2dms")   # texture.h's order
ELEM = {"f32": 0, "s32": 1, "u32": 2}
QUERIES = ("width", "height", "depth", "channel_data_type", "channel_order", "normalized_coords",
           "filter_mode", "addr_mode_0", "addr_mode_1", "addr_mode_2", "array_size", "num_mipmap_levels",
           "num_samples")
SIGS = {
    "ptx_tex_fetch": "void @ptx_tex_fetch(ptr, i32, i32, i32, ptr, ptr)",
    "ptx_tex_gather": "void @ptx_tex_gather(ptr, i32, i32, i32, i32, ptr, ptr)",
    "ptx_tex_query": "i32 @ptx_tex_query(ptr, i32)",
    "ptx_surf_access": "i32 @ptx_surf_access(ptr, i32, ptr, ptr, i32, i32, i32)",
}


def _declare(em, name):
    em.m.declare("declare " + SIGS[name])


def _geometry(ins):
    g = [m for m in ins.mods if m in GEOMETRIES]
    if len(g) != 1:
        semantic(ins, "needs one geometry (.1d, .2d, .3d, .a1d, .a2d, .cube, .acube)")
    if g[0] in ("2dms", "a2dms"):
        unsupported(ins, f"{ins.opcode}.{g[0]} (multisample textures)")
    return g[0]


def _handle(em, ins, addr):
    """The 64-bit handle: a register (texture/surface objects, unified mode). A .texref/.surfref name
    (the legacy references) and a separate sampler (independent mode) are refused."""
    if not isinstance(addr, A.Address) or addr.base is None:
        semantic(ins, "needs [handle, {coordinates}]")
    if len(addr.extra) > 1:
        unsupported(ins, f"{ins.opcode} with a separate sampler (independent texturing mode)")
    if not em.is_register(addr.base):
        unsupported(ins, f"{ins.opcode} through the module-scope reference {addr.base} (cuTexRef/cuSurfRef)")
    return _descriptor(em, em.read(A.Reg(addr.base), "u64", ins))


def _descriptor(em, handle):
    """The descriptor a 64-bit handle points to (a flat pointer on AMD GPUs)."""
    return em.f.op(f"inttoptr i64 {handle} to ptr")


def _coords(em, ins, addr, ctype, n, geometry):
    """[4 x i32] on the stack holding the coordinate vector's bits (the rest zero)."""
    layered = geometry.startswith("a")         # a1d, a2d, acube: the first element is the array index
    if not addr.extra or not isinstance(addr.extra[0], A.Vector):
        if addr.extra and n == 1:       # a single coordinate without braces
            elems = [addr.extra[0]]
        else:
            semantic(ins, "needs a coordinate vector")
    else:
        elems = addr.extra[0].elems
    buf = em.f.alloca("[4 x i32]", align=16)
    for i in range(4):
        p = em.f.op(f"getelementptr [4 x i32], ptr {buf}, i32 0, i32 {i}")
        if i < len(elems):
            # the array index of a1d/a2d/acube is an integer whatever the coordinates' type
            t = ctype if not (i == 0 and layered) else "u32"
            v = em.read(elems[i], "f32" if t == "f32" else "b32", ins)
            if t == "f32":
                v = em.f.op(f"bitcast float {v} to i32")
            em.f.emit(f"store i32 {v}, ptr {p}")
        else:
            em.f.emit(f"store i32 0, ptr {p}")
    return buf


def _results(em, ins, dst, rtype, buf):
    elems = dst.elems if isinstance(dst, A.Vector) else [dst]
    for i, d in enumerate(elems):
        if isinstance(d, A.Sink):
            continue
        p = em.f.op(f"getelementptr [4 x i32], ptr {buf}, i32 0, i32 {i}")
        v = em.f.op(f"load i32, ptr {p}")
        if rtype == "f32":
            em.write(d, em.f.op(f"bitcast i32 {v} to float"), "f32", ins)
        else:
            em.write(d, v, "u32" if rtype == "u32" else "s32", ins)


def _types(ins):
    ts = [m for m in ins.mods if m in ("f32", "s32", "u32", "f16", "f16x2")]
    if len(ts) != 2:
        semantic(ins, "needs a result and a coordinate type (.v4.f32.f32)")
    if ts[0] not in ELEM:
        unsupported(ins, f"{ins.opcode} returning .{ts[0]}")
    if ts[1] not in ("f32", "s32"):
        semantic(ins, f"coordinates of type .{ts[1]}")
    return ts


@handles("tex")
def tex(em, ins):
    check_mods(ins, set(GEOMETRIES) | {"v4", "base", "level", "grad"})
    if any(m in ins.mods for m in ("level", "grad")):
        unsupported(ins, "tex.level/tex.grad (mipmapped textures)")
    if len(ins.operands) != 2 or isinstance(ins.operands[0], A.Address):
        unsupported(ins, "tex with a predicate destination, offset or depth compare")
    _sample(em, ins, "ptx_tex_fetch", "", _geometry(ins), 1)


@handles("tld4")
def tld4(em, ins):
    comps = [m for m in ins.mods if m in ("r", "g", "b", "a")]
    check_mods(ins, set(GEOMETRIES) | {"v4", "r", "g", "b", "a"})
    if len(comps) != 1 or len(ins.operands) != 2:
        semantic(ins, "needs one component (.r .g .b .a) and [handle, {x, y}]")
    g = _geometry(ins)
    if g not in ("2d", "a2d", "cube", "acube"):
        semantic(ins, f"tld4.{g}")
    _sample(em, ins, "ptx_tex_gather", f"i32 {'rgba'.index(comps[0])}, ", g, 2)


def _sample(em, ins, fn, lead, g, n):
    """`d, [handle, {coords}]` through the runtime's sampler `fn` (its leading arguments `lead`)."""
    rtype, ctype = _types(ins)
    h = _handle(em, ins, ins.operands[1])
    coords = _coords(em, ins, ins.operands[1], ctype, n, g)
    out = em.f.alloca("[4 x i32]", align=16)
    _declare(em, fn)
    em.f.emit(f"call void @{fn}(ptr {h}, {lead}i32 {GEOMETRIES.index(g)}, i32 {ELEM[rtype]}, "
              f"i32 {ELEM[ctype]}, ptr {coords}, ptr {out})")
    _results(em, ins, ins.operands[0], rtype, out)


def _query(em, ins, table):
    q = [m for m in ins.mods if m in table]
    check_mods(ins, set(table) | {"b32"})
    if len(q) != 1 or len(ins.operands) != 2 or not isinstance(ins.operands[1], A.Address):
        semantic(ins, "needs one attribute and [handle]")
    what = table[q[0]] if isinstance(table, dict) else table.index(q[0])
    if what is None:
        unsupported(ins)
    addr = ins.operands[1]
    if not em.is_register(addr.base):
        unsupported(ins, f"{ins.opcode} of the module-scope reference {addr.base}")
    h = _descriptor(em, em.read(A.Reg(addr.base), "u64", ins))
    _declare(em, "ptx_tex_query")
    v = em.f.op(f"call i32 @ptx_tex_query(ptr {h}, i32 {what})")
    em.write(ins.operands[0], v, "b32", ins)


@handles("txq")
def txq(em, ins):
    if "level" in ins.mods:
        unsupported(ins, "txq.level (mipmapped textures)")
    _query(em, ins, QUERIES)
