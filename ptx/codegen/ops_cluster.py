"""Thread-block clusters: distributed shared memory (mapa, getctarank, .shared::cluster addresses, the
generic forms) and `clusterlaunchcontrol.try_cancel`, which answers, as the hardware may, that no cluster
could be canceled.

On the CPU backend the CTAs of a cluster run co-scheduled on one worker (ptxrt.h, PTXRT_CLUSTER), each with
its own shared memory; W->cluster_shared lists them by rank. A .shared::cluster address is 32 bits: a CTA's
own .shared addresses stand for themselves (as on the GPU, mapa to one's own rank gives the address back),
and another CTA's are its offset | (rank + 1) << 24 (shared windows are far below 16 MiB). Generic addresses
of another CTA's shared memory are plain host addresses, so generic loads and stores need nothing. The AMD
target runs clusters of one CTA (em.CLUSTERS is False there): mapa to rank 0 and getctarank are identities."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import ops_mbarrier
from ptx.codegen.function_emitter import handles, semantic, unsupported
from ptx.codegen.ops_mem import one_type
from ptx.codegen.ptxrt_layout import (L_DYN_SHARED, L_STATIC_SHARED, W_CLUSTER_RANK, W_CLUSTER_SHARED,
                                      W_CLUSTER_SIZE)

# The 16-byte try_cancel response is opaque to programs (only query_cancel reads it): bit 0 of its first
# byte says whether a cluster was canceled, the first CTA id would follow in words 1-3. We never cancel.
_RESPONSE_BYTES = 16
_TAG_SHIFT = 24
_LOW_MASK = (1 << _TAG_SHIFT) - 1


def _trap_unless(em, ins, cond):
    f = em.f
    bad, ok = f.new_label("cl.bad"), f.new_label("cl.ok")
    f.term(f"br i1 {cond}, label %{ok}, label %{bad}")
    f.label(bad)
    em.handler("trap")(em, ins)
    f.label(ok)


def _w_u32(em, off):
    g = em.invariant(("Wp", off), lambda: f"getelementptr i8, ptr {em.W}, i64 {off}")
    return em.invariant(("W", off), lambda: f"load i32, ptr {g}, align 4")


def my_rank(em):
    return _w_u32(em, W_CLUSTER_RANK)


def cluster_size(em):
    return _w_u32(em, W_CLUSTER_SIZE)


def _pad(em):
    """What FE.shared_base adds to the runtime's base for alignments above 128 (the same in every CTA:
    ptxrt.c strides the cluster's shared memories by pages)."""
    align = getattr(em.m, "shared_align", 0)
    if align <= 128:
        return None
    raw = em.invariant("shared.raw", lambda: f"load ptr, ptr {em.W}, align 8")
    addr = em.invariant("shared.int", lambda: f"ptrtoint ptr {raw} to i64")
    neg = em.invariant("shared.neg", lambda: f"sub i64 0, {addr}")
    return em.invariant("shared.pad", lambda: f"and i64 {neg}, {align - 1}")


def rank_base(em, rank):
    """Pointer to the (raw) shared memory of the CTA of i32 `rank` in this cluster."""
    f = em.f
    tp = em.invariant(("Wp", W_CLUSTER_SHARED),
                      lambda: f"getelementptr i8, ptr {em.W}, i64 {W_CLUSTER_SHARED}")
    table = em.invariant(("Wcs",), lambda: f"load ptr, ptr {tp}, align 8")
    slot = f.op(f"getelementptr ptr, ptr {table}, i32 {rank}")
    return f.op(f"load ptr, ptr {slot}, align 8")


def cluster_ptr(em, av):
    """Host pointer of the .shared::cluster address `av` (i64 text)."""
    f = em.f
    tag = f.op(f"lshr i64 {av}, {_TAG_SHIFT}")
    low = f.op(f"and i64 {av}, {_LOW_MASK}")
    own = f.op(f"icmp eq i64 {tag}, 0")
    t32 = f.op(f"trunc i64 {tag} to i32")
    other = f.op(f"sub i32 {t32}, 1")
    rank = f.op(f"select i1 {own}, i32 {my_rank(em)}, i32 {other}")
    base = rank_base(em, rank)
    pad = _pad(em)
    if pad is not None:
        low = f.op(f"add i64 {low}, {pad}")
    return f.op(f"getelementptr i8, ptr {base}, i64 {low}")


def _window_bytes(em):
    f = em.f
    tot = f.op(f"add i32 {em.load_L_u32(L_DYN_SHARED)}, {em.load_L_u32(L_STATIC_SHARED)}")
    align = getattr(em.m, "shared_align", 0)
    return f.op(f"add i32 {tot}, {align}") if align > 128 else tot


def rank_of_generic(em, a):
    """i32 rank of the CTA whose shared memory holds generic address `a` (i64), or -1."""
    return em.call("ptx_rt_cluster_rank_of", "i32", [("ptr", em.W), ("i64", a), ("i32", _window_bytes(em))])


def _encode(em, rank, low):
    """The .shared::cluster address (i64) of offset `low` (i64) in the CTA of i32 `rank`."""
    f = em.f
    r1 = f.op(f"add i32 {rank}, 1")
    r64 = f.op(f"zext i32 {r1} to i64")
    tag = f.op(f"shl i64 {r64}, {_TAG_SHIFT}")
    tagged = f.op(f"or i64 {low}, {tag}")
    own = f.op(f"icmp eq i32 {rank}, {my_rank(em)}")
    return f.op(f"select i1 {own}, i64 {low}, i64 {tagged}")


def _to_i64(em, v, bits):
    return v if bits == 64 else em.f.op(f"zext i32 {v} to i64")


def _from_i64(em, v, bits):
    return v if bits == 64 else em.f.op(f"trunc i64 {v} to i32")


def cvta_cluster(em, v, bits, to):
    """cvta between generic addresses and .shared::cluster ones (`to`: generic -> .shared::cluster)."""
    f = em.f
    v = _to_i64(em, v, bits)
    if not to:
        return _from_i64(em, f.op(f"ptrtoint ptr {cluster_ptr(em, v)} to i64"), bits)
    r = rank_of_generic(em, v)
    known = f.op(f"icmp ne i32 {r}, -1")
    r = f.op(f"select i1 {known}, i32 {r}, i32 {my_rank(em)}")
    base = f.op(f"ptrtoint ptr {rank_base(em, r)} to i64")
    low = f.op(f"sub i64 {v}, {base}")
    pad = _pad(em)
    if pad is not None:
        low = f.op(f"sub i64 {low}, {pad}")
    return _from_i64(em, _encode(em, r, f.op(f"and i64 {low}, {_LOW_MASK}")), bits)


def _space(ins):
    space = [m for m in ins.mods if m not in ("u32", "u64")]
    if space not in ([], ["shared::cluster"]):
        unsupported(ins)
    return space


@handles("mapa")
def op_mapa(em, ins):
    """The address in CTA `rank` of the cluster matching this CTA's address; a rank past the cluster traps."""
    t = one_type(ins)
    if t not in ("u32", "u64"):
        semantic(ins, "mapa takes .u32 or .u64")
    space = _space(ins)
    dst, src, rank = ins.operands
    a = em.read(src, t)
    r = em.read(rank, "u32")
    f = em.f
    if not em.CLUSTERS:
        _trap_unless(em, ins, f.op(f"icmp eq i32 {r}, 0"))
        em.write(dst, a, t)
        return
    _trap_unless(em, ins, f.op(f"icmp ult i32 {r}, {cluster_size(em)}"))
    bits = 64 if t == "u64" else 32
    a64 = _to_i64(em, a, bits)
    if space:
        out = _encode(em, r, f.op(f"and i64 {a64}, {_LOW_MASK}"))
    else:
        # a generic address in some CTA's shared memory: the same offset in CTA `r`'s
        owner = rank_of_generic(em, a64)
        known = f.op(f"icmp ne i32 {owner}, -1")
        owner = f.op(f"select i1 {known}, i32 {owner}, i32 {my_rank(em)}")
        src_base = f.op(f"ptrtoint ptr {rank_base(em, owner)} to i64")
        dst_base = f.op(f"ptrtoint ptr {rank_base(em, r)} to i64")
        out = f.op(f"add i64 {f.op(f'sub i64 {a64}, {src_base}')}, {dst_base}")
    em.write(dst, _from_i64(em, out, bits), t)


@handles("getctarank")
def op_getctarank(em, ins):
    """The rank of the CTA whose shared memory an address is in."""
    t = one_type(ins)
    space = _space(ins)
    a = em.read(ins.operands[1], t)
    if not em.CLUSTERS:
        em.write(ins.operands[0], "0", "u32")
        return
    f = em.f
    a64 = _to_i64(em, a, 64 if t == "u64" else 32)
    if space:
        hi = f.op(f"lshr i64 {a64}, {_TAG_SHIFT}")
        tag = f.op(f"trunc i64 {hi} to i32")
        own = f.op(f"icmp eq i32 {tag}, 0")
        other = f.op(f"sub i32 {tag}, 1")
        r = f.op(f"select i1 {own}, i32 {my_rank(em)}, i32 {other}")
    else:
        r = rank_of_generic(em, a64)
        unknown = f.op(f"icmp eq i32 {r}, -1")
        r = f.op(f"select i1 {unknown}, i32 {my_rank(em)}, i32 {r}")
    em.write(ins.operands[0], r, "u32")


@handles("clusterlaunchcontrol")
def op_cluster_launch_control(em, ins):
    mods = ins.mods
    if mods[:1] == ("try_cancel",):
        if "multicast::cluster::all" in mods or not any(m.startswith("mbarrier::complete_tx") for m in mods):
            unsupported(ins)
        space = "shared" if "shared::cta" in mods else None
        resp, mbar = ins.operands
        p = em.address(resp, space, ins)
        em.f.emit(f"store i128 0, ptr {p}, align 16")
        # the response's bytes are the transaction: the barrier's phase can complete once they are written
        ops_mbarrier.complete_tx(em, ins, mbar, str(_RESPONSE_BYTES))
        return
    if mods[:1] != ("query_cancel",):
        unsupported(ins)
    dst, src = ins.operands
    resp = em.read(src, "b128")
    canceled = em.f.op(f"trunc i128 {resp} to i1")
    if "is_canceled" in mods:
        em.write(dst, canceled, "pred")
        return
    # get_first_ctaid(::x|::y|::z) of a response that canceled nothing is undefined: the words it would hold
    f = em.f
    words = [f.op(f"trunc i128 {f.op(f'lshr i128 {resp}, {32 * (i + 1)}')} to i32") for i in range(3)]
    if isinstance(dst, A.Vector):
        for i, e in enumerate(dst.elems):
            if not isinstance(e, A.Sink):
                em.write(e, words[i] if i < 3 else "0", "b32")
        return
    axis = next((m.split("::")[1] for m in mods if m.startswith("get_first_ctaid::")), None)
    if axis not in ("x", "y", "z"):
        unsupported(ins)
    em.write(dst, words["xyz".index(axis)], "b32")
