"""Atomics: atom/red in global, shared and generic space, every operation (integer, float and double
add, cas, exch, inc/dec with CUDA's wrap rules), as LLVM atomicrmw/cmpxchg."""

from __future__ import annotations

from ptx.codegen import memcheck
from ptx.codegen import ptxtypes as T
from ptx.codegen.function_emitter import RMW_MARK, handles, unsupported, semantic
from ptx.codegen.ops_float import _suffix as llvm_suffix
from ptx.codegen.ops_mem import space_of

ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel",
         "sc": "seq_cst"}
RMW_OPS = ("and", "or", "xor", "cas", "exch", "add", "inc", "dec", "min", "max")


@handles("atom", "red")
def op_atom(em, ins):
    f = em.f
    mods = ins.mods
    op = next((m for m in mods if m in RMW_OPS), None)
    ts = T.types_in(mods)
    if op is None or not ts:
        semantic(ins, "atom needs an operation and a type")
    if any(m in ("v2", "v4", "v8") for m in mods):
        unsupported(ins)
    t = ts[-1]
    if t in ("f16x2", "bf16x2") and op != "add":
        unsupported(ins)
    order = next((ORDER[m] for m in mods if m in ORDER), "monotonic")
    if op == "cas" and order in ("release", "monotonic"):
        fail_order = "monotonic"
    else:
        fail_order = "acquire" if order in ("acquire", "acq_rel") else \
            ("seq_cst" if order == "seq_cst" else "monotonic")
    space = space_of(mods)
    is_red = ins.opcode == "red"
    ops = ins.operands
    dst = None if is_red else ops[0]
    addr = ops[0] if is_red else ops[1]
    p = em.address(addr, space)
    memcheck.check(em, p, T.size_of(t), True, space)
    ty = T.llvm_type(t)
    if T.is_float(t) and op not in ("add", "exch", "min", "max", "cas"):
        semantic(ins, f"atom.{op} on a float type")
    b = em.read(ops[1] if is_red else ops[2], t)
    if space == "shared" and em.block_private_shared and plain_rmw_type(ty):
        if em.rmw_queue is not None and em.rmw_queue.defers(em.cur_index):
            em.rmw_queue.put(em, p, b)      # its result nothing reads (cpu/rmw_queue.py)
            return
        old = _plain_rmw(em, p, op, t, ty, b, em.read(ops[3], t) if op == "cas" else None)
    elif op == "cas":
        c = em.read(ops[3], t)
        if T.is_float(t):
            ity = f"i{T.bits_of(t)}"
            bi, ci = em.coerce(b, ty, ity), em.coerce(c, ty, ity)
            pair = f.op(f"cmpxchg ptr {p}, {ity} {bi}, {ity} {ci} {order} {fail_order}")
            old = em.coerce(f.op(f"extractvalue {{ {ity}, i1 }} {pair}, 0"), ity, ty)
        else:
            pair = f.op(f"cmpxchg ptr {p}, {ty} {b}, {ty} {c} {order} {fail_order}")
            old = f.op(f"extractvalue {{ {ty}, i1 }} {pair}, 0")
    else:
        if T.is_float(t):
            rmw = {"add": "fadd", "exch": "xchg", "min": "fmin", "max": "fmax"}[op]
        else:
            signed = T.is_signed(t)
            rmw = {"and": "and", "or": "or", "xor": "xor", "exch": "xchg", "add": "add",
                   "inc": "uinc_wrap", "dec": "udec_wrap",
                   "min": "min" if signed else "umin", "max": "max" if signed else "umax"}[op]
        if ty.startswith("<") or ty == "bfloat":
            old = _cas_loop_fadd(em, p, ty, b)
        else:
            old = f.op(f"atomicrmw {rmw} ptr {p}, {ty} {b} {order}")
    if dst is not None:
        em.write(dst, old, t)


def plain_rmw_type(ty) -> bool:
    """Whether a block-private shared atomic of LLVM type ty is a plain load, operate, store (_plain_rmw); packed
    halves and bf16 take a compare-exchange loop."""
    return not (ty.startswith("<") or ty == "bfloat")


def _plain_rmw(em, p, op, t, ty, b, c):
    """The atomic's effect as load, operate, store (see FunctionEmitter.block_private_shared); the old value."""
    f = em.f
    align = T.size_of(t)
    old = f.tmp()
    # the comment keeps the load and store out of the thread loops' parallel accesses (cpu/parallel_loops.py):
    # two lanes of one vector may update the same word
    f.emit(f"{old} = load {ty}, ptr {p}, align {align} {RMW_MARK}")
    f.emit(f"store {ty} {rmw_new(em, op, t, ty, old, b, c)}, ptr {p}, align {align} {RMW_MARK}")
    return old


def rmw_new(em, op, t, ty, old, b, c):
    """The value an atomic `op` of type t stores over `old`, with operands b (and c for cas)."""
    f = em.f
    if op == "cas":
        if T.is_float(t):       # compared as bits, as the hardware does
            ity = f"i{T.bits_of(t)}"
            eq = f.op(f"icmp eq {ity} {em.coerce(old, ty, ity)}, {em.coerce(b, ty, ity)}")
        else:
            eq = f.op(f"icmp eq {ty} {old}, {b}")
        return f.op(f"select i1 {eq}, {ty} {c}, {ty} {old}")
    if op == "exch":
        return b
    if T.is_float(t):
        if op == "add":
            return f.op(f"fadd {ty} {old}, {b}")
        return em.call(f"llvm.{'minnum' if op == 'min' else 'maxnum'}.{llvm_suffix(ty)}", ty, [(ty, old), (ty, b)])
    if op in ("and", "or", "xor", "add"):
        return f.op(f"{op} {ty} {old}, {b}")
    if op in ("min", "max"):
        fn = ("s" if T.is_signed(t) else "u") + op
        return em.call(f"llvm.{fn}.{ty}", ty, [(ty, old), (ty, b)])
    if op == "inc":             # old >= b ? 0 : old + 1
        ge = f.op(f"icmp uge {ty} {old}, {b}")
        return f.op(f"select i1 {ge}, {ty} 0, {ty} {f.op(f'add {ty} {old}, 1')}")
    # dec: old == 0 || old > b ? b : old - 1
    z = f.op(f"icmp eq {ty} {old}, 0")
    gt = f.op(f"icmp ugt {ty} {old}, {b}")
    wrap = f.op(f"or i1 {z}, {gt}")
    return f.op(f"select i1 {wrap}, {ty} {b}, {ty} {f.op(f'sub {ty} {old}, 1')}")


def _cas_loop_fadd(em, p, ty, b):
    """Atomic packed/bf16 float add as a compare-exchange loop; returns the old value."""
    from ptx.codegen.ops_float import bf16_to_f32, f32_to_bf16
    f = em.f
    bits = 32 if ty.startswith("<") else 16
    ity = f"i{bits}"
    start = f.op(f"load atomic {ity}, ptr {p} monotonic, align {bits // 8}")
    pre = f.new_label("cas.pre")
    f.term(f"br label %{pre}")
    f.label(pre)
    loop, done = f.new_label("cas.loop"), f.new_label("cas.done")
    f.term(f"br label %{loop}")
    f.label(loop)
    cur = f.tmp()
    f.emit(f"{cur} = phi {ity} [ {start}, %{pre} ], [ %LOOPNEXT, %{loop} ]")
    phi_index = len(f.lines) - 1
    cv = f.op(f"bitcast {ity} {cur} to {ty}")
    if "bfloat" in ty:
        wide = "<2 x float>" if ty.startswith("<") else "float"
        s_ = f.op(f"fadd {wide} {bf16_to_f32(em, cv, ty)}, {bf16_to_f32(em, b, ty)}")
        nv = f32_to_bf16(em, s_, ty)
    else:
        nv = f.op(f"fadd {ty} {cv}, {b}")
    ni = f.op(f"bitcast {ty} {nv} to {ity}")
    pair = f.op(f"cmpxchg ptr {p}, {ity} {cur}, {ity} {ni} seq_cst seq_cst")
    nxt = f.op(f"extractvalue {{ {ity}, i1 }} {pair}, 0")
    ok = f.op(f"extractvalue {{ {ity}, i1 }} {pair}, 1")
    f.lines[phi_index] = f.lines[phi_index].replace("%LOOPNEXT", nxt)
    f.term(f"br i1 {ok}, label %{done}, label %{loop}")
    f.label(done)
    return f.op(f"bitcast {ity} {cur} to {ty}")
