"""Asynchronous copies: cp.async (4/8/16 bytes, zero fill, ignore-src), its commit/wait groups and
cp.async.mbarrier.arrive; the bulk copies (cp.async.bulk, .prefetch, .tensor tiled and im2col).

Every copy is complete when the instruction returns, so a wait has nothing left to wait for and the
copy's mbarrier sees its transaction bytes (complete_tx) right after the data: a wait on it can only
succeed once the data is there, as on the GPU."""

from __future__ import annotations

from ptx import ast as A
from ptx import tensor_map as TM
from ptx.codegen import memcheck, ops_mbarrier, tensor_copy
from ptx.codegen.function_emitter import handles, unsupported, semantic, LLVM_BITS

_SPACES = ("global", "shared::cluster", "shared::cta", "shared")
_HINTS = ("L2::cache_hint",)


@handles("cp")
def op_cp(em, ins):
    mods = ins.mods
    if "async" not in mods or "reduce" in mods:
        unsupported(ins)
    if "bulk" in mods:
        return _bulk(em, ins)
    if "mbarrier" in mods:
        # Without .noinc the pending count goes up by one and the arrive-on takes it down again: with
        # every earlier cp.async already complete, nothing changes. With .noinc the arrive-on is one of
        # the arrivals the phase expects.
        if "arrive" not in mods:
            unsupported(ins)
        if "noinc" in mods:
            ops_mbarrier.arrive(em, ins, ins.operands[0])
        return
    if "commit_group" in mods or "wait_group" in mods or "wait_all" in mods:
        return
    _cp_async(em, ins)


def _operands(ins):
    """The operands without a trailing cache-policy (present with .L2::cache_hint)."""
    ops = list(ins.operands)
    if any(m in _HINTS for m in ins.mods):
        ops.pop()
    return ops


def _is_pred(em, op):
    name = op.name if isinstance(op, A.Reg) else op.operand.name if isinstance(op, A.Negated) else None
    if name is None or not em.is_register(name):
        return False
    d = em.flat.lookup(name)
    return d is not None and d.type.name == "pred"


def _cp_async(em, ins):
    """cp.async.{ca,cg}.shared.global [dst], [src], cp-size {, src-size | , ignore-src}."""
    f = em.f
    if "ca" not in ins.mods and "cg" not in ins.mods:
        unsupported(ins)
    ops = _operands(ins)
    if len(ops) < 3 or not isinstance(ops[2], A.Imm):
        semantic(ins, "cp-size must be a constant")
    cp = ops[2].value
    if cp not in ((16,) if "cg" in ins.mods else (4, 8, 16)):
        semantic(ins, f"cp-size {cp}")
    dst = em.address(ops[0], "shared")
    src = em.address(ops[1], "global")
    n = str(cp)
    if len(ops) > 3:
        if _is_pred(em, ops[3]):
            n = f.op(f"select i1 {em.read(ops[3], 'pred')}, i64 0, i64 {cp}")
        else:
            # src-size bytes come from the source, the rest of cp-size are zeros
            s = f.op(f"zext i32 {em.read(ops[3], 'u32')} to i64")
            n = em.call("llvm.umin.i64", "i64", [("i64", s), ("i64", str(cp))])
    memcheck.check(em, src, cp, False, "global")
    memcheck.check(em, dst, cp, True, "shared")
    em.call("llvm.memcpy.p0.p0.i64", "void", [("ptr", dst), ("ptr", src), ("i64", n), ("i1", "false")])
    if n != str(cp):
        tail = f.op(f"getelementptr i8, ptr {dst}, i64 {n}")
        rest = f.op(f"sub i64 {cp}, {n}")
        em.call("llvm.memset.p0.i64", "void", [("ptr", tail), ("i8", "0"), ("i64", rest), ("i1", "false")])


# ------------------------------------------------------------------ bulk copies

def _spaces(ins):
    """(destination, source) state spaces as the modifiers name them, in that order."""
    sp = [m for m in ins.mods if m in _SPACES]
    return (sp + [None, None])[:2]


def _shared_addr(em, op):
    """The i64 shared-window address of a .shared memory operand."""
    f = em.f
    if not isinstance(op, A.Address):
        semantic(em.cur_ins, "expected an address operand")
    if op.base is None:
        return str(op.offset)
    if not em.is_register(op.base):
        off = em.m.shared_offset(op.base)
        if off is None:
            semantic(em.cur_ins, f"{op.base} is not in the .shared state space")
        return str(off + op.offset)
    rty, _ = em.reg(op.base, em.cur_ins)
    wide = LLVM_BITS[rty] >= 64
    v = em.read(A.Reg(op.base, op.pos), "u64" if wide else "u32")
    v = v if wide else f.op(f"zext i32 {v} to i64")
    return f.op(f"add i64 {v}, {op.offset}") if op.offset else v


def _in_cta(em, mask_op):
    """Whether a .multicast::cluster ctaMask names this CTA (rank 0 of its one-CTA cluster)."""
    bit = em.f.op(f"and i16 {em.read(mask_op, 'b16')}, 1")
    return em.f.op(f"icmp ne i16 {bit}, 0")


def _guarded(em, cond, body):
    """body() only where the i1 `cond` holds (None: always)."""
    if cond is None:
        return body()
    f = em.f
    yes, done = f.new_label("mc.yes"), f.new_label("mc.done")
    f.term(f"br i1 {cond}, label %{yes}, label %{done}")
    f.label(yes)
    body()
    f.term(f"br label %{done}")
    f.label(done)


def _bulk(em, ins):
    mods = ins.mods
    if "prefetch" in mods or "commit_group" in mods or "wait_group" in mods:
        return                   # nothing in flight, nothing cached
    if any(m.startswith(("cta_group", "cp_mask")) or m in ("tile::gather4", "tile::scatter4") or
           m.startswith("im2col::") or m == "im2col_no_offs" for m in mods):
        unsupported(ins)
    if "tensor" in mods:
        return _tensor(em, ins)
    f = em.f
    ops = _operands(ins)
    dst_space, src_space = _spaces(ins)
    size = f.op(f"zext i32 {em.read(ops[2], 'u32')} to i64")
    src_ptr = (em.address(ops[1], "global") if src_space == "global" else
               em.space_ptr(_shared_addr(em, ops[1]), "shared"))
    if dst_space == "global":
        if "bulk_group" not in mods:
            unsupported(ins)
        dst_ptr = em.address(ops[0], "global")
        _check_range(em, src_ptr, size, False, "shared")
        _check_range(em, dst_ptr, size, True, "global")
        em.call("llvm.memcpy.p0.p0.i64", "void", [("ptr", dst_ptr), ("ptr", src_ptr), ("i64", size), ("i1", "false")])
        return
    if not any(m.startswith("mbarrier::complete_tx") for m in mods):
        unsupported(ins)
    dst_ptr = em.space_ptr(_shared_addr(em, ops[0]), "shared")
    mbar = ops[3]
    cond = _in_cta(em, ops[4]) if "multicast::cluster" in mods else None

    def copy():
        _check_range(em, src_ptr, size, False, src_space)
        _check_range(em, dst_ptr, size, True, "shared")
        em.call("llvm.memmove.p0.p0.i64", "void", [("ptr", dst_ptr), ("ptr", src_ptr), ("i64", size),
                                                     ("i1", "false")])
        ops_mbarrier.complete_tx(em, ins, mbar, size)
    _guarded(em, cond, copy)


def _check_range(em, ptr, size, write, space):
    """ZLUDA_MEMCHECK over a run of `size` (i64) bytes: its first and its last byte."""
    if not getattr(em.m, "memcheck", False):
        return
    space = "shared" if space and space.startswith("shared") else space
    memcheck.check(em, ptr, 1, write, space)
    last = em.f.op(f"getelementptr i8, ptr {ptr}, i64 {em.f.op(f'sub i64 {size}, 1')}")
    memcheck.check(em, last, 1, write, space)


def _tensor(em, ins):
    """cp.async.bulk.tensor.Nd: a box of a tensor map between global and shared memory."""
    f = em.f
    mods = ins.mods
    rank = next((int(m[0]) for m in mods if len(m) == 2 and m[1] == "d" and m[0] in "12345"), None)
    if rank is None:
        semantic(ins, "missing the tensor's dimensionality (.1d-.5d)")
    im2col = "im2col" in mods
    if im2col and rank < 3:
        semantic(ins, ".im2col needs a tensor of 3 to 5 dimensions")
    ops = _operands(ins)
    dst_space, _ = _spaces(ins)
    store = dst_space == "global"
    tref = ops[1] if not store else ops[0]
    if not isinstance(tref, A.Address) or len(tref.extra) != 1 or not isinstance(tref.extra[0], A.Vector):
        semantic(ins, "expected [tensorMap, {coordinates}]")
    coords = [em.read(c, "b32") for c in tref.extra[0].elems]
    if len(coords) != rank:
        semantic(ins, f"{len(coords)} coordinates for a {rank}-d tensor")
    tmap = em.address(A.Address(tref.base, tref.offset, tref.pos), None)
    mode = TM.MODE_IM2COL if im2col else TM.MODE_TILE
    if im2col:
        # channels, W[, H[, D]] then N in the map's slots 0, 1-3 and 4
        slots = coords[:-1] + ["0"] * (5 - rank) + [coords[-1]]
    else:
        slots = coords + ["0"] * (5 - rank)
    if store:
        if "bulk_group" not in mods or im2col:
            unsupported(ins)
        box = ops[1]
        addr = _shared_addr(em, box)
        size = tensor_copy.call(em, mode, tmap, em.space_ptr(addr, "shared"), addr, True, slots)
        _trap_if_bad(em, ins, size)
        return
    if not any(m.startswith("mbarrier::complete_tx") for m in mods):
        unsupported(ins)
    rest = ops[3:]
    offsets = ["0", "0", "0"]
    if im2col:
        if not rest or not isinstance(rest[0], A.Vector) or len(rest[0].elems) != rank - 2:
            semantic(ins, f".im2col needs {rank - 2} im2col offsets")
        for s, o in enumerate(rest[0].elems):
            offsets[s] = f.op(f"zext i16 {em.read(o, 'b16')} to i32")
        rest = rest[1:]
    cond = _in_cta(em, rest[0]) if "multicast::cluster" in mods else None
    addr = _shared_addr(em, ops[0])

    def copy():
        size = tensor_copy.call(em, mode, tmap, em.space_ptr(addr, "shared"), addr, False, slots, offsets)
        _trap_if_bad(em, ins, size)
        ops_mbarrier.complete_tx(em, ins, ops[2], size)
    _guarded(em, cond, copy)


def _trap_if_bad(em, ins, size):
    """A tensor-map operand that is no map of this kind traps, as an illegal instruction would."""
    f = em.f
    bad, ok = f.new_label("tmap.bad"), f.new_label("tmap.ok")
    f.term(f"br i1 {f.op(f'icmp slt i64 {size}, 0')}, label %{bad}, label %{ok}")
    f.label(bad)
    em.handler("trap")(em, ins)
    f.label(ok)
