"""mbarrier.* on the CPU: the 64-bit barrier object in (shared) memory, and test_wait/try_wait, which on an
incomplete phase suspend the thread like a block barrier so the block's other threads can arrive."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import RMW_MARK, handles, unsupported

# The object's layout (opaque to PTX programs, which only pass it to mbarrier.*): pending arrivals in
# bits 0-20, expected arrivals in 21-41, pending transaction bytes in 42-62, the phase parity in bit 63.
# Counts are below 2^20 (the PTX limit), so each field holds one. A state token is the parity of the
# phase the arrival was made in (bit 63) and the pending count right after it (pending_count reads it).
_M = (1 << 21) - 1
_EXP, _TX, _PH = 21, 42, 63


def _space(ins):
    return "shared" if any(m.startswith("shared") for m in ins.mods) else None


def _load(em, addr_op, ins):
    p = em.address(addr_op, _space(ins), ins)
    w = em.f.tmp()
    em.f.emit(f"{w} = load i64, ptr {p}, align 8 {RMW_MARK}")   # every thread of a block may update it
    return p, w


def _field(em, w, shift):
    v = em.f.op(f"lshr i64 {w}, {shift}") if shift else w
    return em.f.op(f"and i64 {v}, {_M}")


def _pack(em, pending, expected, tx, phase):
    f = em.f
    e = f.op(f"shl i64 {expected}, {_EXP}")
    t = f.op(f"shl i64 {tx}, {_TX}")
    ph = f.op(f"shl i64 {phase}, {_PH}")
    return f.op(f"or i64 {f.op(f'or i64 {pending}, {e}')}, {f.op(f'or i64 {t}, {ph}')}")


def _update(em, ins, addr_op, arrivals="0", drop="0", tx_add="0", tx_sub="0", no_complete=False):
    """Apply arrivals / transaction bytes to the object; the phase completes (parity flips, pending
    reloaded from the expected count) when nothing is pending. Returns the state token."""
    f = em.f
    p, w = _load(em, addr_op, ins)
    pending = f.op(f"sub i64 {_field(em, w, 0)}, {arrivals}")
    expected = f.op(f"sub i64 {_field(em, w, _EXP)}, {drop}")
    tx = f.op(f"sub i64 {f.op(f'add i64 {_field(em, w, _TX)}, {tx_add}')}, {tx_sub}")
    tx = f.op(f"and i64 {tx}, {_M}")
    pending = f.op(f"and i64 {pending}, {_M}")
    phase = f.op(f"lshr i64 {w}, {_PH}")
    token = f.op(f"or i64 {f.op(f'shl i64 {phase}, {_PH}')}, {pending}")
    if no_complete:
        done = "false"
    else:
        done = f.op(f"and i1 {f.op(f'icmp eq i64 {pending}, 0')}, {f.op(f'icmp eq i64 {tx}, 0')}")
    new_phase = f.op(f"select i1 {done}, i64 {f.op(f'xor i64 {phase}, 1')}, i64 {phase}")
    new_pending = f.op(f"select i1 {done}, i64 {expected}, i64 {pending}")
    f.emit(f"store i64 {_pack(em, new_pending, expected, tx, new_phase)}, ptr {p}, align 8 {RMW_MARK}")
    return token


def _count(em, ins, op):
    return em.f.op(f"zext i32 {em.read(op, 'u32')} to i64")


def complete_tx(em, ins, addr_op, nbytes):
    """An async copy's completion: `nbytes` (i64) of the barrier's transaction count are done."""
    _update(em, ins, addr_op, tx_sub=nbytes)


def arrive(em, ins, addr_op):
    """One arrival on the barrier (the arrive-on of cp.async.mbarrier.arrive.noinc)."""
    _update(em, ins, addr_op, arrivals="1")


@handles("mbarrier")
def op_mbarrier(em, ins):
    mods = ins.mods
    ops = ins.operands
    kind = mods[0] if mods else ""
    f = em.f
    if kind == "init":
        p = em.address(ops[0], _space(ins), ins)
        n = f.op(f"and i64 {_count(em, ins, ops[1])}, {_M}")
        f.emit(f"store i64 {_pack(em, n, n, '0', '0')}, ptr {p}, align 8")
    elif kind == "inval":
        p = em.address(ops[0], _space(ins), ins)
        f.emit(f"store i64 0, ptr {p}, align 8")
    elif kind in ("arrive", "arrive_drop"):
        if "expect_tx" in mods:
            token = _update(em, ins, ops[1], arrivals="1", drop="1" if kind == "arrive_drop" else "0",
                            tx_add=_count(em, ins, ops[2]))
        else:
            n = _count(em, ins, ops[2]) if len(ops) > 2 else "1"
            token = _update(em, ins, ops[1], arrivals=n, drop=n if kind == "arrive_drop" else "0",
                            no_complete="noComplete" in mods)
        if not isinstance(ops[0], A.Sink):
            em.write(ops[0], token, "b64")
    elif kind == "expect_tx":
        _update(em, ins, ops[0], tx_add=_count(em, ins, ops[1]), no_complete=True)
    elif kind == "complete_tx":
        _update(em, ins, ops[0], tx_sub=_count(em, ins, ops[1]))
    elif kind == "pending_count":
        state = em.read(ops[1], "b64")
        em.write(ops[0], f.op(f"trunc i64 {_field(em, state, 0)} to i32"), "b32")
    elif kind in ("test_wait", "try_wait"):
        _wait(em, ins, "parity" in mods)
    else:
        unsupported(ins)


def _complete(em, ins, parity):
    """Whether the phase the operand names has completed: the object's parity moved past it."""
    f = em.f
    _, w = _load(em, ins.operands[1], ins)
    now = f.op(f"lshr i64 {w}, {_PH}")
    if parity:
        want = f.op(f"and i64 {_count(em, ins, ins.operands[2])}, 1")
    else:
        want = f.op(f"lshr i64 {em.read(ins.operands[2], 'b64')}, {_PH}")
    return f.op(f"icmp ne i64 {now}, {want}")


def _wait(em, ins, parity):
    f = em.f
    if em.mode in ("sync", "region"):
        # Incomplete: let the block's other threads run (to a barrier or their exit) before looking
        # again, as a spinning warp gives way to the others on a GPU. The value is re-read after the
        # resume: nothing computed before a suspension survives it.
        ready, wait = f.new_label("mbar.ready"), f.new_label("mbar.wait")
        f.term(f"br i1 {_complete(em, ins, parity)}, label %{ready}, label %{wait}")
        f.label(wait)

        def setup(k):
            em.store_frame(FE.FH_KIND, "i32", "0")
            em.store_frame(FE.FH_COUNT, "i32", "0")
            em.store_frame(FE.FH_MODE, "i32", "0")
            em.store_frame(FE.FH_PRED_IN, "i32", "0")
        em.suspend(FE.ST_BARRIER, setup)
        f.term(f"br label %{ready}")
        f.label(ready)
    if not isinstance(ins.operands[0], A.Sink):
        em.write(ins.operands[0], _complete(em, ins, parity), "pred")
