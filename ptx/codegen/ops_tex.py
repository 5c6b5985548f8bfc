"""Texture instructions: tex (.level, .grad), tld4, txq (.level) (and the handle and coordinate helpers ops_surf
shares), each a call into the runtime's texture.c with the handle (a texture.h descriptor's address) the kernel
was given or a reference holds (ops_texref.py): on the CPU the runtime library's, on AMD GPUs its bitcode linked
into the module (ptx/amdgpu_texture.py)."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import ops_texref
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
    "ptx_surf_store_p": "i32 @ptx_surf_store_p(ptr, i32, ptr, ptr, i32, i32)",
    "ptx_surf_reduce": "i32 @ptx_surf_reduce(ptr, i32, ptr, i64, i32, i32, i32)",
    "ptx_tex_fetch_mip": "void @ptx_tex_fetch_mip(ptr, i32, i32, i32, i32, ptr, ptr, ptr)",
    "ptx_tex_query_level": "i32 @ptx_tex_query_level(ptr, i32, i32)",
    **ops_texref.SIGS,          # independent mode's samplers, istypep
}
MIP_MODES = {"level": 1, "grad": 2}     # texture.h's PTX_MIP_LEVEL, PTX_MIP_GRAD
LEVEL_QUERIES = ("width", "height", "depth")


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
    """The descriptor a [handle, ...] operand names: a register (texture/surface objects), a .texref/.surfref
    (the legacy references), or in independent mode a texture with its sampler (ops_texref.py)."""
    if not isinstance(addr, A.Address) or addr.base is None:
        semantic(ins, "needs [handle, {coordinates}]")
    if ins.opcode in ("suld", "sust", "sured"):
        return _descriptor(em, ops_texref.handle(em, ins, addr.base, ("surfref",)))
    return ops_texref.texture(em, ins, addr)


def _descriptor(em, handle):
    """The descriptor a 64-bit handle points to (a flat pointer on AMD GPUs)."""
    return em.f.op(f"inttoptr i64 {handle} to ptr")


def _coords(em, ins, addr, ctype, n, geometry):
    """[4 x i32] on the stack holding the coordinate vector's bits (the rest zero)."""
    layered = geometry.startswith("a")         # a1d, a2d, acube: the first element is the array index
    # the coordinates come last: after the sampler in independent mode's [texture, sampler, {c}]
    if not addr.extra or not isinstance(addr.extra[-1], A.Vector):
        if addr.extra and n == 1:       # a single coordinate without braces
            elems = [addr.extra[-1]]
        else:
            semantic(ins, "needs a coordinate vector")
    else:
        elems = addr.extra[-1].elems
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
    mode = next((m for m in MIP_MODES if m in ins.mods), None)
    extra = {None: 0, "level": 1, "grad": 2}[mode]      # the LOD, or the two gradients
    if len(ins.operands) != 2 + extra or isinstance(ins.operands[0], A.Address):
        unsupported(ins, "tex with a predicate destination, offset or depth compare")
    g = _geometry(ins)
    if mode is None:        # .base (the default): level 0 as the texture's LOD clamps and bias make it
        _sample(em, ins, "ptx_tex_fetch", "", g, 1)
        return
    rtype, ctype = _types(ins)
    h = _handle(em, ins, ins.operands[1])
    coords = _coords(em, ins, ins.operands[1], ctype, 1, g)
    args = _mip_args(em, ins, mode, ctype, g)
    out = em.f.alloca("[4 x i32]", align=16)
    _declare(em, "ptx_tex_fetch_mip")
    em.f.emit(f"call void @ptx_tex_fetch_mip(ptr {h}, i32 {GEOMETRIES.index(g)}, i32 {ELEM[rtype]}, "
              f"i32 {ELEM[ctype]}, i32 {MIP_MODES[mode]}, ptr {coords}, ptr {args}, ptr {out})")
    _results(em, ins, ins.operands[0], rtype, out)


def _mip_args(em, ins, mode, ctype, g):
    """[8 x i32] on the stack: tex.level's LOD (of the coordinates' type) in element 0, or tex.grad's dPdx in
    elements 0-3 and dPdy in 4-7 (.f32; one element for 1d/a1d, two for 2d/a2d, four for 3d/cube/acube)."""
    buf = em.f.alloca("[8 x i32]", align=16)
    vals = [None] * 8
    if mode == "level":
        lod = ins.operands[2]
        if isinstance(lod, A.Vector):
            semantic(ins, "tex.level needs a scalar LOD")
        v = em.read(lod, "f32" if ctype == "f32" else "b32", ins)
        vals[0] = em.f.op(f"bitcast float {v} to i32") if ctype == "f32" else v
    else:
        want = 1 if g in ("1d", "a1d") else 2 if g in ("2d", "a2d") else 4
        for k, grad in enumerate(ins.operands[2:4]):
            elems = grad.elems if isinstance(grad, A.Vector) else [grad]
            if len(elems) not in (want, 4) or (want == 4 and len(elems) < 3):
                semantic(ins, f"tex.grad.{g} needs gradient vectors of {want} elements")
            for i, e in enumerate(elems[:min(len(elems), 4)]):
                if isinstance(e, A.Sink):
                    continue
                v = em.read(e, "f32", ins)
                vals[4 * k + i] = em.f.op(f"bitcast float {v} to i32")
    for i, v in enumerate(vals):
        p = em.f.op(f"getelementptr [8 x i32], ptr {buf}, i32 0, i32 {i}")
        em.f.emit(f"store i32 {v if v is not None else 0}, ptr {p}")
    return buf


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
    v = ops_texref.query(em, ins, ins.operands[1], what, q[0], ins.opcode == "suq")
    em.write(ins.operands[0], v, "b32", ins)


@handles("txq")
def txq(em, ins):
    if "level" in ins.mods or any(m in ins.mods for m in LEVEL_QUERIES):
        _query_level(em, ins)
    else:
        _query(em, ins, QUERIES + ("force_unnormalized_coords",))   # texture.h's PTX_QUERY_FORCE_UNNORMALIZED


def _query_level(em, ins):
    """txq.level.{width,height,depth}.b32 d, [handle], lod: the extent of mipmap level lod; txq.width/height/depth
    are level 0's (an H100 answers both alike: 0 for the depth of a 2D texture, the layer count for the height
    of a 1D layered one, tests/data/nvidia_mipmap_answers.json)."""
    q = [m for m in ins.mods if m in LEVEL_QUERIES]
    check_mods(ins, set(LEVEL_QUERIES) | {"level", "b32"})
    n = 3 if "level" in ins.mods else 2
    if len(q) != 1 or len(ins.operands) != n or not isinstance(ins.operands[1], A.Address):
        semantic(ins, "txq.level needs one of .width .height .depth, [handle] and a LOD")
    h = _descriptor(em, ops_texref.handle(em, ins, ins.operands[1].base, ("texref",)))
    lod = em.read(ins.operands[2], "b32", ins) if n == 3 else "0"
    _declare(em, "ptx_tex_query_level")
    v = em.f.op(f"call i32 @ptx_tex_query_level(ptr {h}, i32 {LEVEL_QUERIES.index(q[0])}, i32 {lod})")
    em.write(ins.operands[0], v, "b32", ins)
