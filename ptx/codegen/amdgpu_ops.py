"""amdgcn lowering of the instructions whose CPU lowering calls the CPU runtime or suspends a thread:
barriers, warp collectives (exact 32-lane CUDA semantics on 32- and 64-wide waves), fences and
atomics with scopes, traps and device calls; the rest is ops_*.py through the emitter's target hooks."""

from __future__ import annotations

import re

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen import function_emitter as FE
from ptx.codegen.amdgpu_emitter import amd_handles
from ptx.codegen.function_emitter import semantic, unsupported
from ptx.codegen.ops_mem import space_of
from ptx.codegen.ops_warp import write_elected

_ORDER_AT_END = re.compile(r" (monotonic|acquire|release|acq_rel|seq_cst)( (?:monotonic|acquire|seq_cst))?(, align \d+)?$")


def _scope_of(mods, space):
    """LLVM syncscope for a PTX scope qualifier; '' is the system scope."""
    if space == "shared" or "cta" in mods:
        return "workgroup"
    if "sys" in mods:
        return ""
    return "agent"        # .gpu, .cluster, or none (PTX's default scope is .gpu)


def _with_scope(em, scope, fn, fp_atomic=False):
    """Run the CPU lowering `fn`, then put `syncscope(scope)` on the atomic accesses it emitted."""
    mark = len(em.f.lines)
    fn()
    for i in range(mark, len(em.f.lines)):
        line = em.f.lines[i]
        if not any(k in line for k in ("atomicrmw ", "cmpxchg ", "load atomic ", "store atomic ")):
            continue
        if scope:
            line = _ORDER_AT_END.sub(lambda m: f' syncscope("{scope}") {m.group(1)}{m.group(2) or ""}{m.group(3) or ""}',
                                     line)
        if fp_atomic and "atomicrmw f" in line:
            # memory from hipMalloc is coarse-grained: the native float atomics are exact there
            line += ", !amdgpu.no.fine.grained.memory !{}"
        em.f.lines[i] = line


def _fence(em, order, scope):
    s = f' syncscope("{scope}")' if scope else ""
    em.f.emit(f"fence{s} {order}")


def _workgroup_barrier(em):
    _fence(em, "release", "workgroup")
    em.call("llvm.amdgcn.s.barrier", "void", [])
    _fence(em, "acquire", "workgroup")


# ------------------------------------------------------------------ barriers and fences

@amd_handles("bar", "barrier")
def op_bar(em, ins):
    mods = set(ins.mods)
    if "warp" in mods:
        em.call("llvm.amdgcn.wave.barrier", "void", [])
        _fence(em, "acq_rel", "wavefront")
        return
    if "arrive" in mods and "cluster" in mods:
        # a cluster is this workgroup (ops_cluster.py): barrier.cluster.wait is the workgroup barrier
        _fence(em, "release", "workgroup")
        return
    if "arrive" in mods:
        unsupported(ins, "bar.arrive (producer/consumer named barriers have no AMDGPU equivalent)")
    ops = list(ins.operands)
    red = "red" in mods
    dest = ops.pop(0) if red else None
    has_count = len(ops) > 2 or (len(ops) == 2 and not red)
    if has_count:
        unsupported(ins, "bar.sync with a thread count (named barriers of part of a block)")
    if not red:
        _workgroup_barrier(em)
        return
    redop = "popc" if "popc" in mods else "and" if "and" in mods else "or" if "or" in mods else None
    if redop is None or em.mode == "func" or em.m.bar_red_offset is None:
        unsupported(ins)
    f = em.f
    pred = em.read(ops[-1], "pred")
    slot = em.lds_flat(str(em.m.bar_red_offset))
    first = f.op(f"icmp eq i32 {em.linear_tid()}, 0")
    z, zdone = f.new_label("barred.zero"), f.new_label("barred.go")
    f.term(f"br i1 {first}, label %{z}, label %{zdone}")
    f.label(z)
    f.emit(f"store i32 0, ptr {slot}, align 4")
    f.label(zdone)
    _workgroup_barrier(em)
    counted = f.op(f"xor i1 {pred}, true") if redop == "and" else pred
    one = f.op(f"zext i1 {counted} to i32")
    f.emit(f'atomicrmw add ptr {slot}, i32 {one} syncscope("workgroup") monotonic, align 4')
    _workgroup_barrier(em)
    total = f.op(f"load i32, ptr {slot}, align 4")
    _workgroup_barrier(em)        # everyone has read the count before a later bar.red clears it
    if redop == "popc":
        em.write(dest, total, "u32")
    else:
        em.write(dest, f.op(f"icmp {'eq' if redop == 'and' else 'ne'} i32 {total}, 0"), "pred")


@amd_handles("membar", "fence")
def op_fence(em, ins):
    mods = set(ins.mods)
    if any(m.startswith("proxy") for m in mods) or "mbarrier_init" in mods:
        return
    if ins.opcode == "membar":
        scope = "workgroup" if "cta" in mods else "" if "sys" in mods else "agent"
        _fence(em, "seq_cst", scope)
        return
    order = "acq_rel" if "acq_rel" in mods else "seq_cst"
    _fence(em, order, _scope_of(mods, None))


# ------------------------------------------------------------------ memory with scopes

@amd_handles("atom", "red")
def op_atom(em, ins):
    t = T.types_in(ins.mods)
    fp = bool(t) and T.is_float(t[-1])
    _with_scope(em, _scope_of(set(ins.mods), space_of(ins.mods)),
                lambda: FE.HANDLERS["atom"](em, ins), fp_atomic=fp)


@amd_handles("ld", "ldu")
def op_ld(em, ins):
    _with_scope(em, _scope_of(set(ins.mods), space_of(ins.mods)), lambda: FE.HANDLERS["ld"](em, ins))


@amd_handles("st")
def op_st(em, ins):
    _with_scope(em, _scope_of(set(ins.mods), space_of(ins.mods)), lambda: FE.HANDLERS["st"](em, ins))


# ------------------------------------------------------------------ warp collectives

SHFL_MODES = ("up", "down", "bfly", "idx")


@amd_handles("shfl")
def op_shfl(em, ins):
    mode = next((m for m in ins.mods if m in SHFL_MODES), None)
    if mode is None:
        semantic(ins, "shfl needs .up/.down/.bfly/.idx")
    f = em.f
    ops = ins.operands
    dst = ops[0]
    a = em.read(ops[1], "b32")
    b = f.op(f"and i32 {em.read(ops[2], 'u32')}, 31")
    c = em.read(ops[3], "u32")
    lane = em.lane_id()
    cval = f.op(f"and i32 {c}, 31")
    seg = f.op(f"and i32 {f.op(f'lshr i32 {c}, 8')}, 31")
    nseg = f.op(f"xor i32 {seg}, -1")
    min_lane = f.op(f"and i32 {lane}, {seg}")
    max_lane = f.op(f"or i32 {min_lane}, {f.op(f'and i32 {cval}, {nseg}')}")
    if mode == "up":
        j = f.op(f"sub i32 {lane}, {b}")
        ok = f.op(f"icmp sge i32 {j}, {max_lane}")
    else:
        if mode == "down":
            j = f.op(f"add i32 {lane}, {b}")
        elif mode == "bfly":
            j = f.op(f"xor i32 {lane}, {b}")
        else:
            j = f.op(f"or i32 {min_lane}, {f.op(f'and i32 {b}, {nseg}')}")
        ok = f.op(f"icmp sle i32 {j}, {max_lane}")
    src = f.op(f"select i1 {ok}, i32 {j}, i32 {lane}")
    _write_b32_pred(em, dst, em.read_lane(a, src), ok)


def _write_b32_pred(em, dst, v, p):
    """`v`, and `p` too where the destination is a `d|p` pair."""
    if isinstance(dst, A.PredPair):
        em.write(dst.first, v, "b32")
        em.write(dst.second, p, "pred")
    else:
        em.write(dst, v, "b32")


def _members(em, mask):
    """The active lanes of this CUDA warp that `mask` names."""
    return em.f.op(f"and i32 {em.ballot('true')}, {mask}")


def _mask(em, ins, index):
    ops = ins.operands
    return em.read(ops[index], "u32") if "sync" in ins.mods and len(ops) > index else "-1"


@amd_handles("vote")
def op_vote(em, ins):
    mode = next((m for m in ins.mods if m in ("all", "any", "uni", "ballot")), None)
    if mode is None:
        semantic(ins, "vote needs .all/.any/.uni/.ballot")
    f = em.f
    ops = ins.operands
    p = em.read(ops[1], "pred")
    mask = _mask(em, ins, 2)
    yes = f.op(f"and i32 {em.ballot(p)}, {mask}")
    if mode == "ballot":
        em.write(ops[0], yes, "b32")
        return
    if mode == "any":
        r = f.op(f"icmp ne i32 {yes}, 0")
    else:
        members = _members(em, mask)
        r = f.op(f"icmp eq i32 {yes}, {members}")
        if mode == "uni":
            r = f.op(f"or i1 {r}, {f.op(f'icmp eq i32 {yes}, 0')}")
    em.write(ops[0], r, "pred")


@amd_handles("elect")
def op_elect(em, ins):
    if list(ins.mods) != ["sync"] or len(ins.operands) != 2:
        unsupported(ins)
    write_elected(em, ins.operands[0], _members(em, em.read(ins.operands[1], "u32")))


@amd_handles("activemask")
def op_activemask(em, ins):
    em.write(ins.operands[0], em.ballot("true"), "b32")


def _lane_loop(em, init_ty, init_val, body):
    """acc = init; for i in 0..31: acc = body(i, acc); returns acc after the last lane (an IR loop, uniform
    trip count). The header's phi holds the value *before* lane i, so the result is the body's value: the
    latch is the loop's only exit and the body's last block dominates it."""
    f = em.f
    pre = f.new_label("lanes.pre")
    f.term(f"br label %{pre}")
    f.label(pre)
    loop, done = f.new_label("lanes.loop"), f.new_label("lanes.done")
    f.term(f"br label %{loop}")
    f.label(loop)
    i, acc = f.tmp(), f.tmp()
    f.emit(f"{i} = phi i32 [ 0, %{pre} ], [ %INEXT, %LATCH ]")
    phi_i = len(f.lines) - 1
    f.emit(f"{acc} = phi {init_ty} [ {init_val}, %{pre} ], [ %ACCNEXT, %LATCH ]")
    phi_acc = len(f.lines) - 1
    nxt = body(i, acc)
    latch = f.new_label("lanes.latch")
    f.term(f"br label %{latch}")
    f.label(latch)
    inext = f.op(f"add nuw i32 {i}, 1")
    more = f.op(f"icmp ult i32 {inext}, 32")
    f.term(f"br i1 {more}, label %{loop}, label %{done}")
    f.label(done)
    f.lines[phi_i] = f.lines[phi_i].replace("%INEXT", inext).replace("%LATCH", f"%{latch}")
    f.lines[phi_acc] = f.lines[phi_acc].replace("%ACCNEXT", nxt).replace("%LATCH", f"%{latch}")
    return nxt


def _lane_bit(em, members, i):
    f = em.f
    return f.op(f"trunc i32 {f.op(f'lshr i32 {members}, {i}')} to i1")


@amd_handles("match")
def op_match(em, ins):
    ts = T.types_in(ins.mods)
    t = ts[-1] if ts else "b32"
    f = em.f
    ops = ins.operands
    dst = ops[0]
    wide = T.bits_of(t) == 64
    a = em.read(ops[1], "b64" if wide else "b32")
    mask = em.read(ops[2], "u32")
    members = _members(em, mask)
    if wide:
        lo = f.op(f"trunc i64 {a} to i32")
        hi = f.op(f"trunc i64 {f.op(f'lshr i64 {a}, 32')} to i32")

    def body(i, acc):
        if wide:
            vlo, vhi = em.read_lane(lo, i), em.read_lane(hi, i)
            eq = f.op(f"and i1 {f.op(f'icmp eq i32 {vlo}, {lo}')}, {f.op(f'icmp eq i32 {vhi}, {hi}')}")
        else:
            eq = f.op(f"icmp eq i32 {em.read_lane(a, i)}, {a}")
        take = f.op(f"and i1 {eq}, {_lane_bit(em, members, i)}")
        bit = f.op(f"shl i32 {f.op(f'zext i1 {take} to i32')}, {i}")
        return f.op(f"or i32 {acc}, {bit}")
    same = _lane_loop(em, "i32", "0", body)
    if "all" in ins.mods:
        allsame = f.op(f"icmp eq i32 {same}, {members}")
        _write_b32_pred(em, dst, f.op(f"select i1 {allsame}, i32 {mask}, i32 0"), allsame)
    else:
        em.write(dst.first if isinstance(dst, A.PredPair) else dst, same, "b32")


REDUX = {"add": ("add", "0", "0"), "and": ("and", "-1", "-1"), "or": ("or", "0", "0"),
         "xor": ("xor", "0", "0"), "min": ("umin", "-1", "2147483647"), "max": ("umax", "0", "-2147483648")}


@amd_handles("redux")
def op_redux(em, ins):
    ts = T.types_in(ins.mods)
    t = ts[-1] if ts else None
    op = next((m for m in ins.mods if m in REDUX), None)
    if op is None or t is None or T.is_float(t) or T.bits_of(t) != 32:
        unsupported(ins)
    f = em.f
    signed = T.is_signed(t)
    kind, ident_u, ident_s = REDUX[op]
    ident = ident_s if signed else ident_u
    if signed and kind in ("umin", "umax"):
        kind = "s" + kind[1:]
    ops = ins.operands
    a = em.read(ops[1], "b32")
    members = _members(em, em.read(ops[2], 'u32'))

    def body(i, acc):
        v = em.read_lane(a, i)
        if kind in ("add", "and", "or", "xor"):
            n = f.op(f"{kind} i32 {acc}, {v}")
        else:
            n = em.call(f"llvm.{kind}.i32", "i32", [("i32", acc), ("i32", v)])
        return f.op(f"select i1 {_lane_bit(em, members, i)}, i32 {n}, i32 {acc}")
    em.write(ops[0], _lane_loop(em, "i32", ident, body), t)


# ------------------------------------------------------------------ control

@amd_handles("trap")
def op_trap(em, ins):
    em.abort("1")


@amd_handles("call")
def op_call(em, ins):
    from ptx.codegen.ops_ctrl import _call_parts
    rets, target, args, proto = _call_parts(ins)
    name = getattr(target, "name", None)
    callee = em.m.func_decls.get(name)
    if name in FE.BUILTIN_FUNCS and (callee is None or callee.body is None):
        if name == "__assertfail":
            # the GPU stops the kernel; the HIP runtime reports the fault (the message is not printed)
            em.abort("2")
            return
        if name == "vprintf":
            from ptx.codegen.amdgpu_printf import lower_vprintf
            return lower_vprintf(em, ins, rets, args)
        return _device_heap(em, name, rets, args)
    FE.HANDLERS["call"](em, ins)


HEAP_BYTES = 8 << 20      # CUDA's default cudaLimitMallocHeapSize


def _device_heap(em, name, rets, args):
    """Device malloc/free: a bump allocator over an 8 MiB heap in the module's .bss (16-byte aligned
    blocks; NULL once it is used up, as CUDA answers on an exhausted heap); free releases nothing."""
    from ptx.codegen.ops_ctrl import _arg_value, _set_ret
    f = em.f
    if name == "free":
        return
    em.m.add_helper("@device_heap", f"@zluda.heap = internal addrspace(1) global [{HEAP_BYTES} x i8] "
                                    "zeroinitializer, align 16\n"
                                    "@zluda.heap.top = internal addrspace(1) global i64 0, align 8")
    size = _arg_value(em, args[0], "u64")
    n = f.op(f"and i64 {f.op(f'add i64 {size}, 15')}, -16")
    old = f.op(f'atomicrmw add ptr addrspace(1) @zluda.heap.top, i64 {n} syncscope("agent") monotonic, align 8')
    end = f.op(f"add i64 {old}, {n}")
    fits = f.op(f"icmp ule i64 {end}, {HEAP_BYTES}")
    base = f.op("ptrtoint ptr addrspace(1) @zluda.heap to i64")
    p = f.op(f"select i1 {fits}, i64 {f.op(f'add i64 {base}, {old}')}, i64 0")
    if rets:
        _set_ret(em, rets[0], p, "b64")
