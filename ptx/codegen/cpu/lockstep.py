"""Lockstep loops for barrier-free kernels: each loop header becomes a yield point, so the block's threads run a
loop one iteration at a time, all of them together, as the region loops between barriers do (issue 14)."""

from __future__ import annotations

import dataclasses

from ptx import ast as A
from ptx.passes.sync_points import sync_kind

# Run one thread at a time, a grid-stride loop walks the whole input once per thread with the grid's stride (each
# cache line is fetched again by every thread that shares it), and a thread loop with a loop inside it is not
# vectorised. As a region loop, an iteration runs for every thread before the next one: consecutive threads touch
# consecutive addresses, as on a GPU, and each region is a loop over the threads that LLVM vectorises.
MAX_SOFT_SITES = 8
MAX_HAZARD_SITES = 16   # with the yields after stores that a load of the same iteration follows (store_hazards)
ENABLED = True          # tests compare with the thread-at-a-time code


def all_loop_spans(body) -> dict:
    """{index of a loop header (a label a branch goes back to): index of its last back edge}."""
    labels = {st.name: i for i, st in enumerate(body) if isinstance(st, A.Label)}
    spans = {}
    for i, st in enumerate(body):
        if isinstance(st, A.Instruction) and st.opcode == "bra" and st.operands:
            j = labels.get(getattr(st.operands[0], "name", None))
            if j is not None and j <= i:
                spans[j] = max(spans.get(j, i), i)
    return spans


def loop_spans(body) -> dict:
    """all_loop_spans for the loops that hold no sync point (a loop with a barrier already runs an iteration at a
    time)."""
    syncs = [i for i, st in enumerate(body) if isinstance(st, A.Instruction) and sync_kind(st)]
    return {j: end for j, end in all_loop_spans(body).items() if not any(j <= s <= end for s in syncs)}


def loop_headers(body) -> list:
    """Indices of the headers of the body's loops that hold no sync point, in body order."""
    return sorted(loop_spans(body))


# accesses other threads may see: not .local or .param (nor, for loads, .const or .nc data nothing writes)
def _visible_store(st) -> bool:
    return isinstance(st, A.Instruction) and st.opcode == "st" and not {"local", "param"} & set(st.mods)


def _visible_load(st) -> bool:
    return isinstance(st, A.Instruction) and st.opcode == "ld" and not {"local", "param", "const", "nc"} & set(st.mods)


def store_hazards(body, spans) -> list:
    """Indices of the stores, in loops that run in lockstep, that a load of memory other threads see follows later
    in the same iteration (body order, up to the loop's last back edge). Code written for a converged warp
    reads what a neighbouring lane stored a few instructions before, with no __syncwarp (cuSOLVER's
    svd_music_kernel builds a table that way): a yield after such a store lets every thread store before any
    reads. Where the load sits in a branch the store's thread does not take, threads that skip the store may still
    read before it, as the two sides of a divergent branch may run in either order on a GPU."""
    out = set()
    for j, end in spans.items():
        pending = None
        for i in range(j, end + 1):
            if _visible_store(body[i]):
                pending = i
            elif _visible_load(body[i]) and pending is not None:
                out.add(pending)
                pending = None
    return sorted(out)


# A lockstep loop whose iterations only read memory and update it with atomics (a grid-stride histogram) has a
# thread loop LLVM cannot vectorise (the read-modify-writes' addresses come from the data): an iteration at a time
# for all threads buys no vector code and costs every element a thread's slot stores and a share of the block's
# dispatch. Its region lets each thread run up to ATOMIC_STEPS iterations before it stops at the yield; a row of
# threads then reads ATOMIC_STEPS cache lines, which the next thread of the row finds in L1. A grid stride is
# mostly a power of two, which puts those lines in one set of the 8-way L1 and L2: 4 leaves room (16: 0.66 GB/s,
# 4 and 8: 2.0 GB/s, one at a time: 1.2 GB/s on the bench's histogram, 2-core AMD EPYC).
ATOMIC_STEPS = 4
_WRITERS = frozenset(["stmatrix", "sust", "sured", "cp", "tensormap", "mbarrier", "multimem", "call", "st.async",
                      "red.async", "cp.async", "cp.reduce.async"])


def atomic_loop(body, reach) -> bool:
    """Whether the statements `reach` (a region after a yield, that loops back to it) update memory only with
    atomics: no visible store, nothing else that writes (nor a call that might)."""
    ins = [body[i] for i in reach if isinstance(body[i], A.Instruction)]
    return (any(st.opcode in ("atom", "red") for st in ins)
            and not any(_visible_store(st) or st.opcode in _WRITERS for st in ins))


def _volatile(st) -> bool:
    return "volatile" in st.mods and (_visible_store(st) or _visible_load(st))


def volatile_steps(body) -> tuple:
    """(stores a yield goes before, stores a yield goes after): volatile accesses written for a converged warp
    (the classic warp-synchronous reduction and scan: `if (t < 32) { s[t] += s[t + 16]; s[t] += s[t + 8]; ... }`
    on a `volatile` array, no __syncwarp) run each step's loads for every thread, then its stores, then the next
    step's loads, as a warp does. A yield goes before a volatile store that a volatile load precedes and after one
    that a volatile load follows (body order, between sync points), next to the store so that a branch around
    either side cannot skip it."""
    before, after = set(), set()
    loaded, stored = False, None
    for i, st in enumerate(body):
        if not isinstance(st, A.Instruction):
            continue
        if sync_kind(st):
            loaded, stored = False, None
        elif _volatile(st) and st.opcode == "st":
            if loaded:
                before.add(i)
            loaded, stored = False, i
        elif _volatile(st):
            if stored is not None:
                after.add(stored)
            loaded, stored = True, None
    return sorted(before), sorted(after)


def with_yields(flat):
    """A copy of `flat` with a yield (`bar.sync.yield 0`: a barrier to the region loops, nothing to the resumable
    thread) after each loop header, after each store_hazards store and around volatile_steps stores (while they
    fit), or None when it has none or too many. The threads need not agree at a yield: the block function runs one
    that some wait at, for those threads only (region_kernel.py's soft region kernels), which is one of the orders
    independent threads may run in."""
    spans = loop_spans(flat.body)
    if len(spans) > MAX_SOFT_SITES:
        return None
    if any(isinstance(st, A.Instruction) and st.opcode == "brx" for st in flat.body):
        return None
    at, pre = set(spans), set()
    hazards = set(store_hazards(flat.body, spans))
    vbefore, vafter = volatile_steps(flat.body)
    hazards.update(vafter)
    if len(at) + len(hazards) + len(vbefore) <= MAX_HAZARD_SITES:
        at.update(hazards)
        pre.update(vbefore)
    if not at and not pre:
        return None
    body = []
    for i, st in enumerate(flat.body):
        if i in pre:
            body.append(A.Instruction("bar", ("sync", "yield"), [A.Imm(0)], pos=st.pos))
        body.append(st)
        if i in at:
            body.append(A.Instruction("bar", ("sync", "yield"), [A.Imm(0)], pos=st.pos))
    return dataclasses.replace(flat, body=body)


def lowest_waiting(name: str, yields, nsites: int) -> str:
    """The block function's helper: the first yield after `ran` (0: the first of all) that a thread of the block
    waits at (each thread's site word at soa[t]), else the first one, 0 when no thread waits at one."""
    table = ", ".join(f"i8 {int(k in yields)}" for k in range(nsites + 1))
    return f"""@"ly.{name}" = internal constant [{nsites + 1} x i8] [{table}]
define internal i32 @"lw.{name}"(ptr %soa, i64 %n64, i32 %ran) noinline {{
entry:
  br label %loop
loop:
  %t = phi i64 [ 0, %entry ], [ %t.next, %loop ]
  %m = phi i32 [ -1, %entry ], [ %m.next, %loop ]
  %a = phi i32 [ -1, %entry ], [ %a.next, %loop ]
  %p = getelementptr i32, ptr %soa, i64 %t
  %s = load i32, ptr %p
  %s64 = zext i32 %s to i64
  %yp = getelementptr [{nsites + 1} x i8], ptr @"ly.{name}", i64 0, i64 %s64
  %y = load i8, ptr %yp
  %isy = icmp ne i8 %y, 0
  %s1 = add i32 %s, -1
  %c = select i1 %isy, i32 %s1, i32 -1
  %m.next = call i32 @llvm.umin.i32(i32 %m, i32 %c)
  %later = icmp ugt i32 %s, %ran
  %ca = select i1 %later, i32 %c, i32 -1
  %a.next = call i32 @llvm.umin.i32(i32 %a, i32 %ca)
  %t.next = add nuw i64 %t, 1
  %more = icmp ult i64 %t.next, %n64
  br i1 %more, label %loop, label %out
out:
  %none = icmp eq i32 %a.next, -1
  %pick = select i1 %none, i32 %m.next, i32 %a.next
  %r = add i32 %pick, 1
  ret i32 %r
}}"""


def checked_site(name: str, k: int, call: str, otherwise: str, fresh: bool, proven: bool = False) -> str:
    """The block function's blocks for site k whose registers may be affine (cpu/affine.py): reg.k checks them
    (uc{k}), then runs the region that recomputes them (ureg.k, %u{k}) or, where the check fails, `otherwise`
    (greg.k, %r{k}). call/otherwise: region {1} of kernel {0}'s calls, as region_kernel.py formats them. fresh: the
    checked region that ran last may have verified them itself for the next round of its loop (%fresh, %ufl.k),
    then the check is skipped. proven: the loop keeps them affine (round_loops.barrier_loop_proof), so once checked
    in a block they need no check (%ok.k)."""
    checked = call.replace('@"r{1}', '@"ru{1}')[:-1] + ", ptr %uni)"
    check = f"ucheck.{k}" if fresh or proven else f"reg.{k}"
    head = f"reg.{k}:\n  %fr.{k} = icmp ne i32 %fresh, 0\n  br i1 %fr.{k}, label %ureg.{k}, label %{check}\n" \
        if fresh else f"reg.{k}:\n  br i1 %ok.{k}, label %ureg.{k}, label %{check}\n" if proven else ""
    return (head + f'{check}:\n  %uok.{k} = call i32 @"uc{k}.{name}"(ptr %soa, i64 %n64, i32 %bx, i32 %by, i32 %bz, '
            f'ptr %uni)\n  %uyes.{k} = icmp ne i32 %uok.{k}, 0\n  br i1 %uyes.{k}, label %ureg.{k}, label %greg.{k}\n'
            f"ureg.{k}:\n  %u{k} = {checked.format(name, k)}\n" + (f"  %ufl.{k} = load i32, ptr %uni\n" if fresh else "") +
            f"  br label %disp\ngreg.{k}:\n  %r{k} = {otherwise.format(name, k)}\n  br label %disp\n")


def soft_dispatch(name: str, call: str, sites, yields, uniform):
    """The block function's part for a kernel with yields (region_kernel.emit_region_kernel): (the blocks of the
    yields that carry affine registers, the incoming values of its %s phi, its %ran and %turn phis, and the
    block `fallback` where threads disagree). call: the call of region {1} of kernel {0}, as region_kernel.py formats
    it; sites: every site's number; uniform: {yield: affine candidates}."""
    masked = call.replace('@"r{1}', '@"rm{1}')
    # all threads at a yield whose carried registers may be affine in %tid: checked, then the region that
    # recomputes them (or, when they are not, the masked one, which runs them all)
    blocks = "".join(checked_site(name, k, call, masked, fresh=True) for k in sorted(uniform))
    ends = [(k, f"%r{k}", f"reg.{k}") for k in sites if k not in uniform]
    ends += [(k, v, b) for k in sorted(uniform) for v, b in ((f"%r{k}", f"greg.{k}"), (f"%u{k}", f"ureg.{k}"))]
    ends += [(k, f"%m{k}", f"mreg.{k}") for k in sorted(yields)]
    incoming = ", ".join(["[ %r0, %head ]"] + [f"[ {v}, %{b} ]" for _, v, b in ends])
    ran = ", ".join(["[ 0, %head ]"] + [f"[ {k}, %{b} ]" for k, _, b in ends])
    turn = ", ".join(["[ 0, %head ]"] + [f"[ %turn{'.n' if b.startswith('mreg') else ''}, %{b} ]"
                                         for _, _, b in ends])
    fresh = ", ".join(["[ 0, %head ]"] + [f"[ {'%ufl.' + str(k) if b.startswith('ureg') else 0}, %{b} ]"
                                         for k, _, b in ends])
    phis = f"  %ran = phi i32 {ran}\n  %turn = phi i32 {turn}\n  %fresh = phi i32 {fresh}\n"
    # threads disagree: the first yield some wait at (the threads behind it catch up), for those threads only;
    # every 64th time the first after the yield that ran last, so that a thread spinning until another one
    # writes lets it run; none (all at barriers or exited): the general scheduler (realfb)
    real = len(yields) < len(sites)
    disagree = "".join(
        ["fallback:\n  %turn.n = add i32 %turn, 1\n  %rr.m = and i32 %turn.n, 63\n  %rr = icmp eq i32 %rr.m, 0\n"
         "  %after = select i1 %rr, i32 %ran, i32 0\n"
         f'  %low = call i32 @"lw.{name}"(ptr %soa, i64 %n64, i32 %after)\n'
         f'  switch i32 %low, label %{"realfb" if real else "next"} '
         f'[ {" ".join(f"i32 {k}, label %mreg.{k}" for k in sorted(yields))} ]\n'] +
        [f"mreg.{k}:\n  %m{k} = {masked.format(name, k)}\n  br label %disp\n" for k in sorted(yields)])
    return blocks, incoming, phis, disagree
