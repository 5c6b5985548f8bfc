"""Warp collectives (shfl, vote, match, redux, activemask, bar.warp.sync, and the word exchange the
tensor-core instructions move data with): each suspends the thread with its inputs in the frame header;
the warp scheduler (warp_scheduler.c) computes the 32-lane result exactly and resumes the lanes (in
region loops, cpu/warp_collectives.py evaluates shfl, vote, redux, match and activemask itself)."""

from __future__ import annotations

import zlib

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import handles, unsupported, semantic

K_SHFL, K_VOTE, K_MATCH, K_REDUX, K_ACTIVEMASK, K_WARPSYNC, K_XCHG = 1, 2, 3, 4, 5, 6, 7
XCHG_WORDS = 512        # words per lane of the exchange area (warp_scheduler.c)
SHFL_MODES = {"up": 0, "down": 1, "bfly": 2, "idx": 3}
VOTE_MODES = {"all": 0, "any": 1, "uni": 2, "ballot": 3}
REDUX_OPS = {"add": 0, "min": 1, "max": 2, "and": 3, "or": 4, "xor": 5}


def _collective(em, kind, mode, mask, a="0", b="0", c="0", pred="false", after=None):
    def setup(k):
        em.store_frame(FE.FH_KIND, "i32", str(kind))
        em.store_frame(FE.FH_MODE, "i32", str(mode))
        em.store_frame(FE.FH_MASK, "i32", mask)
        em.store_frame(FE.FH_A, "i64", a)
        em.store_frame(FE.FH_B, "i32", b)
        em.store_frame(FE.FH_C, "i32", c)
        em.store_frame(FE.FH_SITE, "i32", str(k))
        em.store_frame(FE.FH_PRED_IN, "i32", em.f.op(f"zext i1 {pred} to i32"))
    em.suspend(FE.ST_WARP, setup, after)


def _result(em, ty):
    v = em.load_frame(FE.FH_RESULT, "i64")
    return v if ty == "i64" else em.f.op(f"trunc i64 {v} to {ty}")


def _pred_result(em):
    v = em.load_frame(FE.FH_PRED_OUT, "i32")
    return em.f.op(f"icmp ne i32 {v}, 0")


def _write_b32_pred(em, dst):
    """The b32 result, and the predicate too where the destination is a `d|p` pair."""
    if isinstance(dst, A.PredPair):
        em.write(dst.first, _result(em, "i32"), "b32")
        em.write(dst.second, _pred_result(em), "pred")
    else:
        em.write(dst, _result(em, "i32"), "b32")


@handles("shfl")
def op_shfl(em, ins):
    mode = next((SHFL_MODES[m] for m in ins.mods if m in SHFL_MODES), None)
    if mode is None:
        semantic(ins, "shfl needs .up/.down/.bfly/.idx")
    ops = ins.operands
    dst = ops[0]
    a = em.read(ops[1], "b32")
    b = em.read(ops[2], "u32")
    c = em.read(ops[3], "u32")
    mask = em.read(ops[4], "u32") if "sync" in ins.mods and len(ops) > 4 else "-1"
    a64 = em.f.op(f"zext i32 {a} to i64")

    _collective(em, K_SHFL, mode, mask, a=a64, b=b, c=c, after=lambda: _write_b32_pred(em, dst))


@handles("vote")
def op_vote(em, ins):
    mode = next((VOTE_MODES[m] for m in ins.mods if m in VOTE_MODES), None)
    if mode is None:
        semantic(ins, "vote needs .all/.any/.uni/.ballot")
    ops = ins.operands
    dst = ops[0]
    p = em.read(ops[1], "pred")
    mask = em.read(ops[2], "u32") if "sync" in ins.mods and len(ops) > 2 else "-1"

    def after():
        if mode == 3:
            em.write(dst, _result(em, "i32"), "b32")
        else:
            em.write(dst, _pred_result(em), "pred")
    _collective(em, K_VOTE, mode, mask, pred=p, after=after)


def write_elected(em, dst, members):
    """elect.sync's results from the ballot of the member lanes that executed it: the lowest of them leads
    (the same leader for the same members every time, as the ISA asks); d|p, or _|p."""
    leader = em.call("llvm.cttz.i32", "i32", [("i32", members), ("i1", "false")])
    if not isinstance(dst, A.PredPair):
        semantic(em.cur_ins, "elect.sync needs a d|p destination")
    if not (isinstance(dst.first, A.Reg) and dst.first.name == "_"):
        em.write(dst.first, leader, "b32")
    em.write(dst.second, em.f.op(f"icmp eq i32 {em.lane_id()}, {leader}"), "pred")


@handles("elect")
def op_elect(em, ins):
    if list(ins.mods) != ["sync"] or len(ins.operands) != 2:
        unsupported(ins)
    dst = ins.operands[0]
    mask = em.read(ins.operands[1], "u32")
    # a ballot of the members, all true: .sync waits for every lane of the mask
    _collective(em, K_VOTE, VOTE_MODES["ballot"], mask, pred="true",
                after=lambda: write_elected(em, dst, _result(em, "i32")))


@handles("activemask")
def op_activemask(em, ins):
    dst = ins.operands[0]
    _collective(em, K_ACTIVEMASK, 0, "-1", after=lambda: em.write(dst, _result(em, "i32"), "b32"))


@handles("match")
def op_match(em, ins):
    ts = T.types_in(ins.mods)
    t = ts[-1] if ts else "b32"
    mode = 1 if "all" in ins.mods else 0
    ops = ins.operands
    dst = ops[0]
    a = em.read(ops[1], t)
    a64 = a if T.bits_of(t) == 64 else em.f.op(f"zext i32 {a} to i64")
    mask = em.read(ops[2], "u32")
    # the 64-bit flag rides in bit 8 of the mode
    m = mode | (256 if T.bits_of(t) == 64 else 0)

    _collective(em, K_MATCH, m, mask, a=a64, after=lambda: _write_b32_pred(em, dst))


@handles("redux")
def op_redux(em, ins):
    ts = T.types_in(ins.mods)
    t = ts[-1] if ts else None
    op = next((REDUX_OPS[m] for m in ins.mods if m in REDUX_OPS), None)
    if op is None or t is None or T.is_float(t) or T.bits_of(t) != 32:
        unsupported(ins)
    ops = ins.operands
    dst = ops[0]
    a = em.read(ops[1], t)
    a64 = em.f.op(f"{'sext' if T.is_signed(t) else 'zext'} i32 {a} to i64")
    mask = em.read(ops[2], "u32")
    m = op | (256 if T.is_signed(t) else 0)
    _collective(em, K_REDUX, m, mask, a=a64, after=lambda: em.write(dst, _result(em, "i32"), t))


def warp_sync(em, ins):
    mask = em.read(ins.operands[0], "u32")
    _collective(em, K_WARPSYNC, 0, mask)


class XchgRow:
    """This lane's row of the exchange area after an exchange: the words it offered from 0 on, the ones it
    received from `got_at` on, and room after those (`free_at`) for what the lane computes from them."""

    def __init__(self, em, ptr, n_in, n_out):
        self.em, self.ptr = em, ptr
        self.got_at, self.free_at = n_in, n_in + n_out

    def at(self, i):
        return self.em.f.op(f"getelementptr i32, ptr {self.ptr}, i32 {i}")

    def load(self, i):
        return self.em.f.op(f"load i32, ptr {self.at(i)}")

    def got(self, j):
        return self.load(self.got_at + j)

    def own(self, i):
        return self.load(i)


def lane_constant(em, prefix, values):
    """i32 `values[lane]` for this lane: a constant where every lane has the same, the lane id where each
    has its own, else a load from a 32-entry table (0..255) shared by every site that needs the same."""
    if len(set(values)) == 1:
        return str(values[0])
    if list(values) == list(range(32)):
        return em.lane_id()
    f = em.f
    name = f"{prefix}." + "".join(f"{v:02x}" for v in values)
    body = ", ".join(f"i8 {v}" for v in values)
    em.m.add_helper(name, f'@"{name}" = private unnamed_addr constant [32 x i8] [{body}]')
    p = f.op(f'getelementptr [32 x i8], ptr @"{name}", i32 0, i32 {em.lane_id()}')
    return f.op(f"zext i8 {f.op(f'load i8, ptr {p}')} to i32")


def exchange(em, words, sources, then, room=0):
    """A warp-wide exchange of 32-bit words by source lane: this lane offers `words` (i32 values);
    `sources[lane][j]` = (source lane, index of a word it offers) for every lane (one table, the same
    code in every lane); after the exchange `then(row)` runs with this lane's XchgRow. The values before
    the exchange do not reach `then` (it runs after the thread resumed): it must use the row. `room`:
    words the lane wants after the received ones. This is the CPU's: a suspension that the warp
    scheduler's exchange area serves (FunctionEmitter.exchange_words picks a target's own)."""
    f = em.f
    n_in, n_out = len(words), len(sources[0])
    out_off = n_in
    if out_off + n_out + room > XCHG_WORDS:
        unsupported(em.cur_ins, f"{em.cur_ins.opcode} (exchange of {n_in} + {n_out} words)")
    em.m.declare("declare ptr @ptx_sched_xchg_area(ptr)")
    flat = [ln | w << 5 for row in sources for ln, w in row]
    name = f"xchg.{n_out}.{out_off}.{zlib.crc32(bytes(str(flat), 'ascii')):08x}"
    body = ", ".join(f"i16 {v}" for v in flat)
    em.m.add_helper(name, f'@"{name}" = private unnamed_addr constant <{{ i32, i32, [{len(flat)} x i16] }}> '
                          f'<{{ i32 {n_out}, i32 {out_off}, [{len(flat)} x i16] [{body}] }}>, align 8')

    def row():
        area = f.op(f"call ptr @ptx_sched_xchg_area(ptr {em.W})")
        off = f.op(f"mul i32 {em.lane_id()}, {XCHG_WORDS}")
        return f.op(f"getelementptr i32, ptr {area}, i32 {off}")

    mine = row()
    for i, w in enumerate(words):
        f.emit(f"store i32 {w}, ptr {f.op(f'getelementptr i32, ptr {mine}, i32 {i}')}")
    table = f.op(f'ptrtoint ptr @"{name}" to i64')
    _collective(em, K_XCHG, 0, "-1", a=table, after=lambda: then(XchgRow(em, row(), n_in, n_out)))
