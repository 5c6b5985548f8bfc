"""Thread-block clusters as this compiler runs them: every CTA is a cluster of one (the driver refuses larger
cluster launches), so `mapa` to rank 0 and `getctarank` are identities over the CTA's own shared memory, and
`clusterlaunchcontrol.try_cancel` answers, as the hardware may, that no cluster could be canceled."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import ops_mbarrier
from ptx.codegen.function_emitter import handles, semantic, unsupported
from ptx.codegen.ops_mem import one_type

# The 16-byte try_cancel response is opaque to programs (only query_cancel reads it): bit 0 of its first
# byte says whether a cluster was canceled, the first CTA id would follow in words 1-3. We never cancel.
_RESPONSE_BYTES = 16


def _trap_unless(em, ins, cond):
    f = em.f
    bad, ok = f.new_label("cl.bad"), f.new_label("cl.ok")
    f.term(f"br i1 {cond}, label %{ok}, label %{bad}")
    f.label(bad)
    em.handler("trap")(em, ins)
    f.label(ok)


@handles("mapa")
def op_mapa(em, ins):
    """The address in CTA `rank` of the cluster matching this CTA's address: the same address for rank 0,
    the only CTA there is; any other rank names no CTA, and traps."""
    t = one_type(ins)
    if t not in ("u32", "u64"):
        semantic(ins, "mapa takes .u32 or .u64")
    space = [m for m in ins.mods if m not in ("u32", "u64")]
    if space not in ([], ["shared::cluster"]):
        unsupported(ins)
    dst, src, rank = ins.operands
    a = em.read(src, t)
    r = em.read(rank, "u32")
    _trap_unless(em, ins, em.f.op(f"icmp eq i32 {r}, 0"))
    em.write(dst, a, t)


@handles("getctarank")
def op_getctarank(em, ins):
    """The rank of the CTA whose shared memory an address is in: this CTA's, 0."""
    t = one_type(ins)
    space = [m for m in ins.mods if m not in ("u32", "u64")]
    if space not in ([], ["shared::cluster"]):
        unsupported(ins)
    em.read(ins.operands[1], t)
    em.write(ins.operands[0], "0", "u32")


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
