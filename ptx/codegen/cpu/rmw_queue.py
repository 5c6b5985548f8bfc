"""Queued shared-memory atomics: a region's block-private `atom/red.shared` whose result nothing reads only records
its address and operand in the thread loop, and a scalar loop applies the block's records after it (issue 14).

A read-modify-write at an address taken from the data (a histogram's bin) keeps LLVM from vectorising the thread
loop around it, since two lanes may hit one word. Queued, the loop holds no such update: its loads, index math and
loop test run a vector of threads at a time, and the records are applied one at a time, so lanes that hit one
word all count. The order is the block's thread order, one of the orders a GPU may give."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen.ptxrt_layout import L_DYN_SHARED, L_STATIC_SHARED
from ptx.codegen.ops_atom import RMW_OPS, plain_rmw_type, rmw_new
from ptx.codegen.ops_mem import space_of
from ptx.codegen.cpu.regions import region_reach
from ptx.passes.liveness import defs_uses
from ptx.passes.sync_points import sync_kind

# what may touch shared memory (or any memory, through a generic address) besides ld/st/atom/red
_OPAQUE = frozenset(["call", "cp", "ldmatrix", "stmatrix", "wmma", "mbarrier", "multimem", "clusterlaunchcontrol",
                     "tensormap", "cp.async", "st.async", "red.async", "cp.reduce.async"])
_ORDERLESS = frozenset(["add", "and", "or", "xor", "min", "max"])   # integer ones: several sites in any order
QUEUE_OPS = frozenset(RMW_OPS) - {"cas"}         # a cas needs two operands
MAX_SITES = 4       # each queue is an array on the stack: 12 KiB for a block whose size is not known
ENABLED = True      # tests compare with the atomics in place


def _atomic(st):
    """(op, type) of a shared atomic the queue can take, else None."""
    if st.opcode not in ("atom", "red") or space_of(st.mods) != "shared":
        return None
    if any(m in ("v2", "v4", "v8") for m in st.mods):
        return None
    op = next((m for m in st.mods if m in QUEUE_OPS), None)
    ts = T.types_in(st.mods)
    if op is None or not ts or not plain_rmw_type(T.llvm_type(ts[-1])):
        return None
    return op, ts[-1]       # (an operation the type does not have is op_atom's error, before the queue)


def _sees_shared(st) -> bool:
    """Whether a statement other than a queued atomic may read or write shared memory."""
    if st.opcode in _OPAQUE:
        return True
    if st.opcode in ("ld", "ldu", "st", "atom", "red"):
        return space_of(st.mods) in (None, "shared", "shared::cluster")
    return False


class RmwQueue:
    """The queued atomics of one region: {body index: (op, type)}, numbered in body order."""

    def __init__(self, sites: dict, size: int):
        self.index = {i: n for n, i in enumerate(sorted(sites))}
        self.ops = [sites[i] for i in sorted(sites)]
        self.size = size
        self.consts = [None] * len(self.ops)     # an operand that is a constant (an immediate) is not queued

    def defers(self, i) -> bool:
        return i in self.index

    def put(self, em, p, b):
        """The atomic at em.cur_index records its address (an offset in the block's shared memory) and operand for
        this thread."""
        n = self.index[em.cur_index]
        f = em.f
        at = f.op(f"ptrtoint ptr {p} to i64")
        base = f.op(f"ptrtoint ptr {em.shared_raw_base()} to i64")
        off = f.op(f"trunc i64 {f.op(f'sub i64 {at}, {base}')} to i32")
        em.f.emit(f"store i32 {off}, ptr %qa.{n}")
        if not b.startswith("%"):
            self.consts[n] = b
        else:
            em.f.emit(f"store {T.llvm_type(self.ops[n][1])} {b}, ptr %qv.{n}")

    def entry_lines(self):
        out = []
        for n, (_, t) in enumerate(self.ops):
            ty = T.llvm_type(t)
            out += [f"  %qa.{n} = alloca i32, align 4", f"  %qv.{n} = alloca {ty}, align 8",
                    f"  %qar.{n} = alloca [{self.size} x i32], align 64",
                    f"  %qvr.{n} = alloca [{self.size} x {ty}], align 64"]
        return out

    def start(self, em):
        """At each thread's start: no update yet. Such a thread's record updates a word past the block's shared
        memory, in the slack the runtime leaves there (ptx_worker.shared: at least 64 bytes)."""
        f = em.f
        total = f.op(f"add i32 {em.load_L_u32(L_STATIC_SHARED)}, {em.load_L_u32(L_DYN_SHARED)}")
        spare = f.op(f"and i32 {f.op(f'add i32 {total}, 7')}, -8")
        for n, (_, t) in enumerate(self.ops):
            f.emit(f"store i32 {spare}, ptr %qa.{n}")
            # (a value carried from the thread before would be a recurrence, which keeps the loop scalar)
            f.emit(f"store {T.llvm_type(t)} undef, ptr %qv.{n}")

    def record(self, f):
        """In the thread loop's latch (every thread passes it): this thread's records, unmasked."""
        for n, (_, t) in enumerate(self.ops):
            ty = T.llvm_type(t)
            a = f.op(f"load i32, ptr %qa.{n}")
            f.emit(f"store i32 {a}, ptr {f.op(f'getelementptr i32, ptr %qar.{n}, i64 %t')}")
            if self.consts[n] is None:
                v = f.op(f"load {ty}, ptr %qv.{n}")
                f.emit(f"store {ty} {v}, ptr {f.op(f'getelementptr {ty}, ptr %qvr.{n}, i64 %t')}")

    def flush_lines(self, em, then, entry="qf.entry"):
        """The loop applying every thread's records in thread order (a thread's in body order), from label `entry`
        on to label `then`."""
        f = em.f
        saved = f.lines, f.terminated
        f.lines, f.terminated = [], True
        f.label(entry)
        f.term("br label %qf.loop")
        f.label("qf.loop")
        f.emit(f"%qf.i = phi i64 [ 0, %{entry} ], [ %qf.n, %qf.loop ]")
        base = em.shared_raw_base()
        for n, (op, t) in enumerate(self.ops):
            ty = T.llvm_type(t)
            off = f.op(f"load i32, ptr {f.op(f'getelementptr i32, ptr %qar.{n}, i64 %qf.i')}")
            a = f.op(f"getelementptr i8, ptr {base}, i64 {f.op(f'zext i32 {off} to i64')}")
            v = self.consts[n] or f.op(f"load {ty}, ptr {f.op(f'getelementptr {ty}, ptr %qvr.{n}, i64 %qf.i')}")
            align = T.size_of(t)
            old = f.op(f"load {ty}, ptr {a}, align {align}")
            f.emit(f"store {ty} {rmw_new(em, op, t, ty, old, v, None)}, ptr {a}, align {align}")
        f.emit("%qf.n = add nuw i64 %qf.i, 1")
        f.emit("%qf.c = icmp ult i64 %qf.n, %n64")
        f.term(f"br i1 %qf.c, label %qf.loop, label %{then}")
        lines = f.lines
        f.lines, f.terminated = saved
        return lines


def plan(body, reach, succ, is_register, size):
    """The region's queue (statements `reach`, successors `succ`), or None: every shared atomic it runs has a result
    nothing reads and runs at most once a thread (outside any loop that does not pass a sync point), nothing else
    in it may touch shared memory (the queue moves the updates after the thread's later statements), and several
    sites share one orderless integer operation."""
    sites = {}
    for i in reach:
        st = body[i]
        if not isinstance(st, A.Instruction) or (sync_kind(st) and not st.guard):
            continue
        rmw = _atomic(st)
        if rmw is None:
            if _sees_shared(st):
                return None
            continue
        if st.opcode == "atom" and _read_anywhere(body, st.operands[0], is_register):
            return None
        if any(i in region_reach(body, succ, s) for s in succ[i]):
            return None
        sites[i] = rmw
    if not sites or len(sites) > MAX_SITES or not ENABLED:
        return None
    kinds = set(sites.values())
    if len(sites) > 1 and (len(kinds) > 1 or any(op not in _ORDERLESS or T.is_float(t) for op, t in kinds)):
        return None
    return RmwQueue(sites, size)


def _read_anywhere(body, dst, is_register) -> bool:
    if not isinstance(dst, A.Reg):
        return True
    return dst.name != "_" and any(isinstance(st, A.Instruction) and dst.name in defs_uses(st, is_register)[1] for st in body)
