"""The loops over a block's threads (tid.z, tid.y, tid.x) that a barrier-free kernel body runs in, and the
guard-versioned form: a pass over the threads evaluates the exit guards, and a block where no thread takes
one runs a copy of the body without them."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen.cpu.exit_guards import find_exit_guards


def emit_nest(f, p, start, dims, body, done, acc=None, md=""):
    """Three nested loops over %{p}tid.z/y/x from block `start`, then a branch to label `done`. body() emits
    one thread; the code it ends in, or branches to, must reach label %{p}tx.latch. acc: (initial i1, value
    computed by the body) ORed over every thread into %{p}acc.next. md: the tid.x loop's metadata.
    Each level ORs from false and adds its result to the level above at its latch: a row's OR (the vectorised
    tid.x loop's reduction) then starts from no carried value, so the rows' reductions overlap instead of
    chaining through mask-to-scalar moves (about a tenth of a 16x16 stencil's time on Zen 5)."""
    bx, by, bz = dims
    levels = [("z", start, bz), ("y", f"{p}tz.head", by), ("x", f"{p}ty.head", bx)]
    # each level's OR so far, after its latch: the outermost one is the nest's result
    nxt = {"z": f"%{p}acc.next", "y": f"%{p}acc.yn", "x": f"%{p}acc.xn"}
    for d, pred, _ in levels:
        f.label(f"{p}t{d}.head")
        f.emit(f"%{p}tid.{d} = phi i32 [ 0, %{pred} ], [ %{p}t{d}.next, %{p}t{d}.latch ]")
        if acc is not None:
            init = acc[0] if d == "z" else "false"
            f.emit(f"%{p}acc.{d} = phi i1 [ {init}, %{pred} ], [ {nxt[d]}, %{p}t{d}.latch ]")
    body()
    after = {"x": f"{p}ty.latch", "y": f"{p}tz.latch", "z": done}
    for d, _, n in reversed(levels):
        f.label(f"{p}t{d}.latch")
        if acc is not None:
            inner = acc[1]() if d == "x" else nxt[{"y": "x", "z": "y"}[d]]
            f.emit(f"{nxt[d]} = or i1 %{p}acc.{d}, {inner}")
        f.emit(f"%{p}t{d}.next = add nuw i32 %{p}tid.{d}, 1")
        f.emit(f"%{p}t{d}.c = icmp ult i32 %{p}t{d}.next, {n}")
        f.term(f"br i1 %{p}t{d}.c, label %{p}t{d}.head, label %{after[d]}" + (md if d == "x" else ""))


# Each thread's code begins with this line; the caller replaces it, once the whole body is emitted and every
# register known, with stores of undef to them all (no value is carried from one thread to the next).
THREAD_START = "  ; thread start"
MAX_VERSIONED = 400         # statements of a body worth a guard-free copy
# The guard pass's tid.x loop: neither interleaved nor unrolled (it is a few instructions a thread). The guarded
# copy, which serves the blocks at a grid's edges, is vectorised with masks like any thread loop: kept scalar, the
# 1.5% of a 4096x4096 stencil's blocks on its border took a tenth of its time (Zen 5; on Zen 3's AVX2 too)
_LOOP_MD = """!8992 = distinct !{!8992, !8991, !8993}
!8991 = !{!"llvm.loop.interleave.count", i32 1}
!8993 = !{!"llvm.loop.unroll.disable"}"""


def emit_thread_loops(em, start, dims, done):
    """The kernel body in thread loops after block `start`, ending at label `done`; guard-versioned when the
    body starts with exit guards."""
    f = em.f
    eg = _exit_guards(em)
    if eg is None:
        _copy(em, "", start, dims, done, skip=())
        return
    _guard_nest(em, eg, start, dims, "gv.done")
    f.label("gv.done")
    f.term("br i1 %gv.acc.next, label %tz.head, label %a.tz.head")
    _copy(em, "", "gv.done", dims, done, skip=())
    _copy(em, "a.", "gv.done", dims, done, skip=frozenset(eg.guards))


def _exit_guards(em):
    """The body's exit guards (exit_guards.find_exit_guards) where it is worth a guard-free copy, else None."""
    body = em.flat.body
    # a long body is mostly work other than its loads and stores, and a second copy doubles its compile time
    return find_exit_guards(body) if em.m.version_guards and len(body) <= MAX_VERSIONED else None


def _guard_nest(em, eg, start, dims, done):
    """The guard pass: thread loops (prefix gv.) from block `start` to label `done` that evaluate each thread's
    prologue up to its last exit guard; %gv.acc.next: whether any thread takes one."""
    f, body = em.f, em.flat.body
    taken = []

    def prologue():
        f.lines.append(THREAD_START)
        for i in range(eg.end):
            st = body[i]
            em.cur_index = i
            if i in eg.guards:
                g = em.read(A.Reg(st.guard[0], st.pos), "pred")
                taken.append(f.op(f"xor i1 {g}, true") if st.guard[1] else g)
            else:
                em.emit_instruction(st)
        f.term("br label %gv.tx.latch")

    def any_taken():
        v = taken[0]
        for t in taken[1:]:
            v = f.op(f"or i1 {v}, {t}")
        return v

    saved = em.tid
    em.tid = ["%gv.tid.x", "%gv.tid.y", "%gv.tid.z"]
    em.m.add_helper("versioned.tx.md", _LOOP_MD)
    emit_nest(f, "gv.", start, dims, prologue, done, acc=("false", any_taken), md=", !llvm.loop !8992")
    em.tid = saved


def _copy(em, p, start, dims, done, skip):
    f = em.f
    saved = em.tid, em.exit_label, em.label_prefix
    em.tid = [f"%{p}tid.x", f"%{p}tid.y", f"%{p}tid.z"]
    em.exit_label = f"{p}tx.latch"
    em.label_prefix = p

    def body():
        f.lines.append(THREAD_START)
        em.emit_body(skip)

    emit_nest(f, p, start, dims, body, done)
    em.tid, em.exit_label, em.label_prefix = saved


# Blocks of one grid row that a barrier-free kernel without shared memory runs together, one row of threads of
# each in turn: a 16x16 block's row is 64 bytes of a row-major array, so one block at a time reads 16 short runs
# far apart and the prefetchers see no stream; G blocks make each run G times as long.
GROUP_BLOCKS = 8


def emit_group_loops(em, start, dims, done, gn):
    """The kernel body for `gn` (i32, at most GROUP_BLOCKS) consecutive blocks of a grid row from em.ctaid[0]:
    loops tid.z, tid.y, the block, tid.x, ending at label `done`. Guard-versioned per block: a pass over each
    block's threads sets its bit in %gm.mask when any takes an exit guard; those blocks run the guarded copy."""
    f = em.f
    eg = _exit_guards(em)
    bx, by, bz = dims
    cx0 = em.ctaid[0]
    saved = em.tid, em.exit_label, em.label_prefix, em.ctaid
    first = start
    if eg is not None:
        f.label("gm.head")
        f.emit(f"%gm.g = phi i32 [ 0, %{start} ], [ %gm.g.next, %gm.latch ]")
        f.emit(f"%gm.mask = phi i64 [ 0, %{start} ], [ %gm.mask.next, %gm.latch ]")
        f.emit(f"%gv.cx = add i32 {cx0}, %gm.g")
        em.ctaid = ["%gv.cx"] + list(saved[3][1:])
        _guard_nest(em, eg, "gm.head", dims, "gm.latch")
        f.label("gm.latch")
        f.emit("%gm.bit = zext i1 %gv.acc.next to i64")
        f.emit("%gm.sh = zext i32 %gm.g to i64")
        f.emit("%gm.b = shl i64 %gm.bit, %gm.sh")
        f.emit("%gm.mask.next = or i64 %gm.mask, %gm.b")
        f.emit("%gm.g.next = add nuw i32 %gm.g, 1")
        f.emit(f"%gm.c = icmp ult i32 %gm.g.next, {gn}")
        f.term("br i1 %gm.c, label %gm.head, label %gm.done")
        f.label("gm.done")
        f.term("br label %tz.head")
        first = "gm.done"
    f.label("tz.head")
    f.emit(f"%tid.z = phi i32 [ 0, %{first} ], [ %tz.next, %tz.latch ]")
    f.term("br label %ty.head")
    f.label("ty.head")
    f.emit("%tid.y = phi i32 [ 0, %tz.head ], [ %ty.next, %ty.latch ]")
    f.term("br label %g.head")
    f.label("g.head")
    f.emit("%g = phi i32 [ 0, %ty.head ], [ %g.next, %g.latch ]")
    f.emit(f"%g.cx = add i32 {cx0}, %g")
    em.ctaid = ["%g.cx"] + list(saved[3][1:])
    # (prefix, skipped statements): the guarded copy, and the one without the guards
    copies = [("", ())]
    if eg is not None:
        copies = [("", ()), ("a.", frozenset(eg.guards))]
        f.emit("%g.sh = zext i32 %g to i64")
        f.emit("%g.m = lshr i64 %gm.mask.next, %g.sh")
        f.emit("%g.bit = trunc i64 %g.m to i1")
        f.term("br i1 %g.bit, label %tx.head, label %a.tx.head")
    else:
        f.term("br label %tx.head")
    for p, skip in copies:
        em.tid = [f"%{p}tid.x", "%tid.y", "%tid.z"]
        em.exit_label = f"{p}tx.latch"
        em.label_prefix = p
        f.label(f"{p}tx.head")
        f.emit(f"%{p}tid.x = phi i32 [ 0, %g.head ], [ %{p}tx.next, %{p}tx.latch ]")
        f.lines.append(THREAD_START)
        em.emit_body(skip)
        f.label(f"{p}tx.latch")
        f.emit(f"%{p}tx.next = add nuw i32 %{p}tid.x, 1")
        f.emit(f"%{p}tx.c = icmp ult i32 %{p}tx.next, {bx}")
        f.term(f"br i1 %{p}tx.c, label %{p}tx.head, label %g.latch")
    f.label("g.latch")
    f.emit("%g.next = add nuw i32 %g, 1")
    f.emit(f"%g.c = icmp ult i32 %g.next, {gn}")
    f.term("br i1 %g.c, label %g.head, label %ty.latch")
    f.label("ty.latch")
    f.emit("%ty.next = add nuw i32 %tid.y, 1")
    f.emit(f"%ty.c = icmp ult i32 %ty.next, {by}")
    f.term("br i1 %ty.c, label %ty.head, label %tz.latch")
    f.label("tz.latch")
    f.emit("%tz.next = add nuw i32 %tid.z, 1")
    f.emit(f"%tz.c = icmp ult i32 %tz.next, {bz}")
    f.term(f"br i1 %tz.c, label %tz.head, label %{done}")
    em.tid, em.exit_label, em.label_prefix, em.ctaid = saved
