"""Surface instructions: suld.b, sust.b, suq, each a call into the runtime's texture.c with the surface
object's handle (the same texture.h descriptor a texture object has; see ops_tex)."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen.function_emitter import check_mods, handles, semantic, unsupported
from ptx.codegen.ops_tex import GEOMETRIES, _coords, _declare, _geometry, _handle, _query

SURF_QUERIES = {"width": 0, "height": 1, "depth": 2, "channel_data_type": 3, "channel_order": 4,
                "array_size": 10, "memory_layout": None}
CLAMPS = {"trap": 0, "clamp": 1, "zero": 2}


@handles("suq")
def suq(em, ins):
    _query(em, ins, SURF_QUERIES)


def _surface(em, ins, store):
    check_mods(ins, {"b", "1d", "2d", "3d", "a1d", "a2d", "v2", "v4", "b8", "b16", "b32", "b64",
                     "trap", "clamp", "zero", "ca", "cg", "cs", "cv", "wb", "wt"})
    if "b" not in ins.mods:
        unsupported(ins, f"{ins.opcode}.p (formatted surface access)")
    g = _geometry(ins)
    width = next((int(m[1:]) for m in ins.mods if m in ("b8", "b16", "b32", "b64")), None)
    if width is None:
        semantic(ins, "needs .b8/.b16/.b32/.b64")
    vec = 4 if "v4" in ins.mods else 2 if "v2" in ins.mods else 1
    clamp = next((m for m in ins.mods if m in CLAMPS), "trap")
    addr, data = (ins.operands[0], ins.operands[1]) if store else (ins.operands[1], ins.operands[0])
    h = _handle(em, ins, addr)
    coords = _coords(em, ins, addr, "s32", 1, g)
    ty = {8: "i8", 16: "i16", 32: "i32", 64: "i64"}[width]
    buf = em.f.alloca(f"[{vec} x {ty}]", align=16)
    elems = data.elems if isinstance(data, A.Vector) else [data]
    ptype = f"b{width}"
    if store:
        for i, d in enumerate(elems):
            p = em.f.op(f"getelementptr [{vec} x {ty}], ptr {buf}, i32 0, i32 {i}")
            em.f.emit(f"store {ty} {em.read(d, ptype, ins)}, ptr {p}")
    _declare(em, "ptx_surf_access")
    st = em.f.op(f"call i32 @ptx_surf_access(ptr {h}, i32 {GEOMETRIES.index(g)}, ptr {coords}, ptr {buf}, "
                 f"i32 {vec * width // 8}, i32 {CLAMPS[clamp]}, i32 {1 if store else 0})")
    if clamp == "trap":
        bad = em.f.op(f"icmp ne i32 {st}, 0")
        trap, ok = em.f.new_label("surf_trap"), em.f.new_label("surf_ok")
        em.f.term(f"br i1 {bad}, label %{trap}, label %{ok}")
        em.f.label(trap)
        em.handler("trap")(em, ins)     # an out-of-range .trap access, as trap does
        em.f.label(ok)
    if not store:
        for i, d in enumerate(elems):
            if isinstance(d, A.Sink):
                continue
            p = em.f.op(f"getelementptr [{vec} x {ty}], ptr {buf}, i32 0, i32 {i}")
            em.write(d, em.f.op(f"load {ty}, ptr {p}"), ptype, ins)


@handles("suld")
def suld(em, ins):
    _surface(em, ins, False)


@handles("sust")
def sust(em, ins):
    _surface(em, ins, True)
