"""Control flow: bra, brx.idx, ret, exit, trap, call (direct, indirect, runtime builtins), block
barriers (suspension points), membar/fence and no-op hints."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import handles, unsupported, semantic


def _label_of(em, op):
    if isinstance(op, (A.Reg, A.SymbolExpr)):
        return em.label_name(op.name)
    semantic(em.cur_ins, "branch target is not a label")


SPIN_ORDERS = frozenset({"acquire", "volatile", "relaxed", "sc"})


def _is_spin_read(st):
    """A read that may see another block's write: shared memory is the block's own (its threads run one at a
    time, or in lockstep at loop headers, where a yield to other blocks frees nothing), and `red` reads nothing."""
    if not isinstance(st, A.Instruction) or "shared" in st.mods:
        return False
    if st.opcode == "atom":
        return True
    return st.opcode in ("ld", "ldu") and bool(SPIN_ORDERS & set(st.mods))


def _backward_spin(em, ins):
    """A backward branch over a loop that reads memory other blocks write (acquire/volatile/relaxed
    loads, atomics): a spin-wait, which must let the runtime run the other blocks (ptxrt.h)."""
    name = getattr(ins.operands[0], "name", None)
    labels = getattr(em, "_label_index", None)
    if labels is None:
        labels = em._label_index = {st.name: i for i, st in enumerate(em.flat.body)
                                    if isinstance(st, A.Label)}
    start = labels.get(name)
    if start is None or start > em.cur_index:
        return False
    return any(_is_spin_read(st) for st in em.flat.body[start:em.cur_index])


@handles("bra")
def op_bra(em, ins):
    f = em.f
    target = _label_of(em, ins.operands[0])
    if em.yields_in_spin_loops and _backward_spin(em, ins):
        em.call("ptx_rt_yield", "void", [("ptr", em.W)])
    if ins.guard:
        g = em.read(A.Reg(ins.guard[0], ins.pos), "pred")
        fall = f.new_label("fall")
        if ins.guard[1]:
            f.term(f"br i1 {g}, label %{fall}, label %{target}")
        else:
            f.term(f"br i1 {g}, label %{target}, label %{fall}")
        f.label(fall)
    else:
        f.term(f"br label %{target}")


@handles("brx")
def op_brx(em, ins):
    if "idx" not in ins.mods:
        unsupported(ins)
    f = em.f
    idx = em.read(ins.operands[0], "u32")
    tbl = ins.operands[1]
    bt = em.flat.branch_targets.get(tbl.name)
    if bt is None:
        semantic(ins, f"undefined .branchtargets {tbl.name}")
    labels = [em.label_name(n) for n in bt.labels]
    cases = " ".join(f"i32 {i}, label %{l}" for i, l in enumerate(labels))
    f.term(f"switch i32 {idx}, label %{labels[0]} [ {cases} ]")


@handles("ret")
def op_ret(em, ins):
    if em.mode == "func":
        em.f.term(f"br label %{em.ret_label}")
    else:
        em.thread_exit()


@handles("exit")
def op_exit(em, ins):
    em.thread_exit()


@handles("trap")
def op_trap(em, ins):
    em.call("ptx_rt_trap", "void", [("ptr", em.W)])
    em.abort("1")


@handles("brkpt", "nanosleep", "pmevent", "prefetch", "prefetchu", "applypriority", "discard",
         "createpolicy", "griddepcontrol", "setmaxnreg")
def op_hint(em, ins):
    if ins.opcode == "createpolicy":
        em.write(ins.operands[0], "0", "b64")


@handles("membar", "fence")
def op_fence(em, ins):
    if any(m.startswith("proxy") for m in ins.mods) or "proxy" in ins.mods:
        return
    em.f.emit("fence seq_cst")


# ------------------------------------------------------------------ barriers

@handles("bar", "barrier")
def op_bar(em, ins):
    mods = set(ins.mods)
    if "warp" in mods:
        from ptx.codegen.ops_warp import warp_sync
        return warp_sync(em, ins)
    if "arrive" in mods:
        em.f.emit("fence seq_cst")
        return
    if "cluster" in mods:
        return _cluster_wait(em)
    ops = list(ins.operands)
    red = "red" in mods
    dest = ops.pop(0) if red else None
    bar_id = em.read(ops[0], "u32")
    count = em.read(ops[1], "u32") if len(ops) > 2 or (len(ops) == 2 and not red) else "0"
    pred = em.read(ops[-1], "pred") if red else "false"
    redop = 0
    if red:
        redop = 1 if "popc" in mods else 2 if "and" in mods else 3 if "or" in mods else None
        if redop is None:
            unsupported(ins)

    def setup(k):
        em.store_frame(FE.FH_KIND, "i32", bar_id)
        em.store_frame(FE.FH_COUNT, "i32", count)
        em.store_frame(FE.FH_MODE, "i32", str(redop))
        p = em.f.op(f"zext i1 {pred} to i32")
        em.store_frame(FE.FH_PRED_IN, "i32", p)

    def after():
        if redop == 1:
            v = em.load_frame(FE.FH_RESULT, "i32")
            em.write(dest, v, "u32")
        elif redop:
            v = em.load_frame(FE.FH_PRED_OUT, "i32")
            em.write(dest, em.f.op(f"icmp ne i32 {v}, 0"), "pred")

    em.suspend(FE.ST_BARRIER, setup, after if red else None)


def _cluster_wait(em):
    """barrier.cluster.wait: a block barrier, then the runtime's cluster barrier (the block's first thread
    waits there for every CTA of the cluster, ptxrt.h), then a block barrier again, so that no thread of the
    block goes on before the cluster has arrived. barrier.cluster.arrive orders memory only (above)."""
    def setup(k):
        for off in (FE.FH_KIND, FE.FH_COUNT, FE.FH_MODE, FE.FH_PRED_IN):
            em.store_frame(off, "i32", "0")
    em.f.emit("fence seq_cst")
    em.suspend(FE.ST_BARRIER, setup)
    em.call("ptx_rt_cluster_wait", "void", [("ptr", em.W)])
    em.suspend(FE.ST_BARRIER, setup)
    em.call("ptx_rt_cluster_wait_end", "void", [("ptr", em.W)])
    em.f.emit("fence seq_cst")


# ------------------------------------------------------------------ calls

def _call_parts(ins):
    ops = list(ins.operands)
    rets = []
    if ops and isinstance(ops[0], A.ParenList):
        rets = ops.pop(0).items
    if not ops:
        semantic(ins, "call without a target")
    target = ops.pop(0)
    args = []
    if ops and isinstance(ops[0], A.ParenList):
        args = ops.pop(0).items
    proto = ops[0] if ops else None
    return rets, target, args, proto


def _is_var(em, op):
    return isinstance(op, (A.Reg, A.SymbolExpr)) and op.name in em.addr_vars


def _arg_ptr(em, op, formal: A.VarDecl):
    """A pointer holding the argument value (a body .param variable, or a temporary)."""
    if _is_var(em, op):
        return em.addr_vars[op.name][0]
    size = max(_formal_size(formal), 1)
    tmp = em.f.alloca(f"[{size} x i8]", align=16)
    if op is not None:
        t = formal.type.name
        v = em.read(op, t)
        em.f.emit(f"store {T.llvm_type(t)} {v}, ptr {tmp}")
    return tmp


def _formal_size(d):
    from ptx.codegen.module_context import decl_size
    return decl_size(d)


def _arg_value(em, op, ptype):
    if _is_var(em, op):
        p = em.addr_vars[op.name][0]
        return em.f.op(f"load {T.llvm_type(ptype)}, ptr {p}")
    return em.read(op, ptype)


def _set_ret(em, op, val, ptype):
    if op is None:
        return
    if _is_var(em, op):
        p = em.addr_vars[op.name][0]
        em.f.emit(f"store {T.llvm_type(ptype)} {val}, ptr {p}")
    else:
        em.write(op, val, ptype)


@handles("call")
def op_call(em, ins):
    f = em.f
    rets, target, args, proto = _call_parts(ins)
    indirect = isinstance(target, A.Reg) and em.is_register(target.name)
    name = None if indirect else target.name
    if name in FE.BUILTIN_FUNCS:
        callee = em.m.func_decls.get(name)
        if callee is None or callee.body is None:
            return _builtin(em, ins, name, rets, args)
    if indirect:
        if proto is None:
            semantic(ins, "indirect call without a prototype")
        pr = em.flat.prototypes.get(proto.name)
        if pr is None:
            semantic(ins, f"undefined prototype {proto.name}")
        formals_r, formals_a = pr.returns, pr.params
        fptr = f.op(f"inttoptr i64 {em.read(target, 'u64')} to ptr")
    else:
        callee = em.m.func_decls.get(name)
        if callee is None:
            semantic(ins, f"call to undefined function {name}")
        if callee.body is None:
            from ptx.codegen import ops_cdp     # the device runtime's functions (-rdc -lcudadevrt)
            if ops_cdp.lower_call(em, ins, name, callee, rets, args):
                return
            unsupported(ins, f"call to external function {name}")
        if callee.kind != "func":
            semantic(ins, f"call to a kernel {name}")
        formals_r, formals_a = callee.returns, callee.params
        fptr = f'@"f.{name}"'
    if indirect and (len(formals_r) != len(rets) or len(formals_a) != len(args)):
        semantic(ins, "argument count mismatch in call to pointer")
    # A direct call may disagree with the definition when its module was linked from inputs whose
    # prototype differed (ptx/check.py allows only that): as after NVIDIA's link, a return value the
    # callee never writes and a parameter the caller never passes are undefined (here 0); extra
    # arguments are ignored.
    ptrs = []
    ret_tmps = []
    for k, d in enumerate(formals_r):
        op = rets[k] if k < len(rets) else None
        p = _arg_ptr(em, op if op is not None and _is_var(em, op) else None, d)
        ptrs.append(p)
        if op is not None and not _is_var(em, op):
            ret_tmps.append((op, d, p))
    for op in rets[len(formals_r):]:
        if _is_var(em, op):
            vp, vsize = em.addr_vars[op.name]
            f.emit(f"store [{vsize} x i8] zeroinitializer, ptr {vp}")
        elif isinstance(op, A.Reg) and em.is_register(op.name):
            rty, rp = em.reg(op.name, ins)
            f.emit(f"store {rty} zeroinitializer, ptr {rp}")
    for k, d in enumerate(formals_a):
        p = _arg_ptr(em, args[k] if k < len(args) else None, d)
        if k >= len(args):
            f.emit(f"store [{max(_formal_size(d), 1)} x i8] zeroinitializer, ptr {p}")
        ptrs.append(p)
    frame = em.frame if em.mode != "fast" else "null"
    ctx = f"ptr {em.L}, ptr {em.W}, ptr {frame}, i32 {em.tid[0]}, i32 {em.tid[1]}, i32 {em.tid[2]}, " \
          f"i32 {em.ctaid[0]}, i32 {em.ctaid[1]}, i32 {em.ctaid[2]}"
    argtxt = ctx + "".join(f", ptr {p}" for p in ptrs)
    st = f.op(f"call i32 {fptr}({argtxt})")
    cont, other = f.new_label("call.ok"), f.new_label("call.stop")
    ok = f.op(f"icmp eq i32 {st}, 0")
    f.term(f"br i1 {ok}, label %{cont}, label %{other}")
    f.label(other)
    is_exit = f.op(f"icmp eq i32 {st}, 1")
    ex, ab = f.new_label("call.exit"), f.new_label("call.abort")
    f.term(f"br i1 {is_exit}, label %{ex}, label %{ab}")
    f.label(ex)
    em.thread_exit()
    f.label(ab)
    if em.mode == "fast":
        code = f.op(f"sub i32 {st}, {FE.ST_ABORT_BASE}")
        f.term(f"ret i32 {code}")
    else:
        f.term(f"ret i32 {st}")
    f.label(cont)
    for op, d, p in ret_tmps:
        t = d.type.name
        v = f.op(f"load {T.llvm_type(t)}, ptr {p}")
        em.write(op, v, t)


def _builtin(em, ins, name, rets, args):
    f = em.f
    if name == "vprintf":
        fmt = _arg_value(em, args[0], "u64")
        buf = _arg_value(em, args[1], "u64")
        fp = f.op(f"inttoptr i64 {fmt} to ptr")
        bp = f.op(f"inttoptr i64 {buf} to ptr")
        r = em.call("ptx_rt_vprintf", "i32", [("ptr", em.W), ("ptr", fp), ("ptr", bp)])
        if rets:
            _set_ret(em, rets[0], r, "b32")
    elif name == "malloc":
        size = _arg_value(em, args[0], "u64")
        p = em.call("ptx_rt_malloc", "ptr", [("i64", size)])
        if rets:
            _set_ret(em, rets[0], f.op(f"ptrtoint ptr {p} to i64"), "b64")
    elif name == "free":
        v = _arg_value(em, args[0], "u64")
        em.call("ptx_rt_free", "void", [("ptr", f.op(f"inttoptr i64 {v} to ptr"))])
    elif name == "__assertfail":
        msg = f.op(f"inttoptr i64 {_arg_value(em, args[0], 'u64')} to ptr")
        file = f.op(f"inttoptr i64 {_arg_value(em, args[1], 'u64')} to ptr")
        line = _arg_value(em, args[2], "u32")
        fn = f.op(f"inttoptr i64 {_arg_value(em, args[3], 'u64')} to ptr")
        cta = f.alloca("[3 x i32]", align=4)
        tid = f.alloca("[3 x i32]", align=4)
        for i in range(3):
            pc = f.op(f"getelementptr i32, ptr {cta}, i64 {i}")
            f.emit(f"store i32 {em.ctaid[i]}, ptr {pc}")
            pt = f.op(f"getelementptr i32, ptr {tid}, i64 {i}")
            f.emit(f"store i32 {em.tid[i]}, ptr {pt}")
        em.call("ptx_rt_assertfail", "void", [("ptr", em.W), ("ptr", msg), ("ptr", file),
                                              ("i32", line), ("ptr", fn), ("ptr", cta), ("ptr", tid)])
        em.abort("2")
