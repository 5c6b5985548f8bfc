"""Surface instructions: suld.b, sust.b, sust.p, sured.b, sured.p, suq, each a call into the runtime's texture.c
with the surface object's handle (the same texture.h descriptor a texture object has; see ops_tex). isa.py
refuses the forms NVIDIA's JIT refuses (tests/data/nvidia_surface_answers.json)."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen.function_emitter import check_mods, handles, semantic, unsupported
from ptx.codegen.ops_tex import GEOMETRIES, _coords, _declare, _geometry, _handle, _query

SURF_QUERIES = {"width": 0, "height": 1, "depth": 2, "channel_data_type": 3, "channel_order": 4,
                "array_size": 10, "memory_layout": None}
CLAMPS = {"trap": 0, "clamp": 1, "zero": 2}
RED_OPS = {"add": 0, "min": 1, "max": 2, "and": 3, "or": 4}        # texture.h's PTX_SR_*
SR_SIGNED, SR_64, SR_SAMPLE = 1, 2, 4
SURF_MISALIGNED = 2     # texture.h's PTX_SURF_MISALIGNED (PTX_SURF_OUT_OF_RANGE is 1)
PTXRT_FAULT = 4         # ptxrt.h: the launch answers CUDA_ERROR_ILLEGAL_ADDRESS
PTXRT_MISALIGNED = 5    # ptxrt.h: the launch answers CUDA_ERROR_MISALIGNED_ADDRESS


@handles("suq")
def suq(em, ins):
    _query(em, ins, SURF_QUERIES)


def _surface(em, ins, store):
    check_mods(ins, {"b", "1d", "2d", "3d", "a1d", "a2d", "v2", "v4", "b8", "b16", "b32", "b64",
                     "trap", "clamp", "zero", "ca", "cg", "cs", "cv", "wb", "wt"})
    if "b" not in ins.mods:
        semantic(ins, "needs .b")
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
    _fault_unless_zero(em, st)
    if not store:
        for i, d in enumerate(elems):
            if isinstance(d, A.Sink):
                continue
            p = em.f.op(f"getelementptr [{vec} x {ty}], ptr {buf}, i32 0, i32 {i}")
            em.write(d, em.f.op(f"load {ty}, ptr {p}"), ptype, ins)


def _fault_unless_zero(em, st):
    """Stop the launch where the runtime answered nonzero: a .trap access out of range, which an H100 reports
    as CUDA_ERROR_ILLEGAL_ADDRESS, or a misaligned one, which it reports as CUDA_ERROR_MISALIGNED_ADDRESS."""
    bad = em.f.op(f"icmp ne i32 {st}, 0")
    fault, ok = em.f.new_label("surf_fault"), em.f.new_label("surf_ok")
    em.f.term(f"br i1 {bad}, label %{fault}, label %{ok}")
    em.f.label(fault)
    misaligned = em.f.op(f"icmp eq i32 {st}, {SURF_MISALIGNED}")
    em.abort(em.f.op(f"select i1 {misaligned}, i32 {PTXRT_MISALIGNED}, i32 {PTXRT_FAULT}"))
    em.f.label(ok)


def _store_p(em, ins):
    """sust.p: up to four 32-bit values, converted by the runtime to the surface's format (x in texels)."""
    check_mods(ins, {"p", "1d", "2d", "3d", "a1d", "a2d", "v2", "v4", "b32", "trap", "clamp", "zero",
                     "wb", "cg", "cs", "wt"})
    g = _geometry(ins)
    vec = 4 if "v4" in ins.mods else 2 if "v2" in ins.mods else 1
    clamp = next(m for m in ins.mods if m in CLAMPS)
    addr, data = ins.operands
    elems = data.elems if isinstance(data, A.Vector) else [data]
    if len(elems) != vec:
        semantic(ins, f"needs {vec} source values")
    h = _handle(em, ins, addr)
    coords = _coords(em, ins, addr, "s32", 1, g)
    buf = em.f.alloca("[4 x i32]", align=16)
    for i, d in enumerate(elems):
        p = em.f.op(f"getelementptr [4 x i32], ptr {buf}, i32 0, i32 {i}")
        em.f.emit(f"store i32 {em.read(d, 'b32', ins)}, ptr {p}")
    _declare(em, "ptx_surf_store_p")
    st = em.f.op(f"call i32 @ptx_surf_store_p(ptr {h}, i32 {GEOMETRIES.index(g)}, ptr {coords}, ptr {buf}, "
                 f"i32 {vec}, i32 {CLAMPS[clamp]})")
    _fault_unless_zero(em, st)


@handles("sured")
def sured(em, ins):
    """sured.b / sured.p: an atomic reduction into the surface (the runtime's __atomic builtins, so threads of
    every block on every worker count). .b takes x in bytes and the type's signedness, .p x in units of the
    operand and the signedness of the surface's format."""
    op = next((m for m in ins.mods if m in RED_OPS), None)
    if op is None:
        bad = next((m for m in ins.mods if m in ("xor", "inc", "dec", "exch")), None)
        # ptxas takes these; NVIDIA's JIT crashes (SIGSEGV) loading them, so nothing says what they do
        unsupported(ins, f"sured.{bad} (undocumented; NVIDIA's driver crashes on it)" if bad else None)
    check_mods(ins, {"b", "p", "1d", "2d", "3d", "trap", "clamp", "zero"} | set(RED_OPS))
    g = _geometry(ins)
    ty = next(m for m in ins.mods if m in ("u32", "s32", "b32", "u64", "s64", "b64"))
    wide = ty.endswith("64")
    flags = (SR_64 if wide else 0) | (SR_SIGNED if ty.startswith("s") else 0) | (SR_SAMPLE if "p" in ins.mods else 0)
    clamp = next(m for m in ins.mods if m in CLAMPS)
    addr, data = ins.operands
    h = _handle(em, ins, addr)
    coords = _coords(em, ins, addr, "s32", 1, g)
    v = em.read(data, "b64" if wide else "b32", ins)
    if not wide:
        v = em.f.op(f"zext i32 {v} to i64")
    _declare(em, "ptx_surf_reduce")
    st = em.f.op(f"call i32 @ptx_surf_reduce(ptr {h}, i32 {GEOMETRIES.index(g)}, ptr {coords}, i64 {v}, "
                 f"i32 {RED_OPS[op]}, i32 {flags}, i32 {CLAMPS[clamp]})")
    _fault_unless_zero(em, st)


@handles("suld")
def suld(em, ins):
    _surface(em, ins, False)


@handles("sust")
def sust(em, ins):
    if "p" in ins.mods:
        _store_p(em, ins)
    else:
        _surface(em, ins, True)
