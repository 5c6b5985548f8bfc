"""Translates one flattened PTX function body into LLVM IR text: registers, operands, addresses,
guards and labels; the instruction families live in ops_*.py and register themselves in HANDLERS."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import ptxtypes as T
from ptx.codegen.irtext import IRFunction
from ptx.errors import PTXSemanticError, PTXUnsupportedError

HANDLERS = {}        # opcode -> fn(emitter, instruction)

LLVM_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "i128": 128, "half": 16,
             "bfloat": 16, "float": 32, "double": 64, "<2 x half>": 32, "<2 x bfloat>": 32,
             "<2 x i16>": 32, "<4 x i8>": 32}
FLOAT_LLVM = frozenset({"half", "bfloat", "float", "double"})
# ends a load or store by which one thread updates what others of its block update too (a block-private
# atomic, an mbarrier): the CPU's thread loops leave such accesses out of their parallel ones
RMW_MARK = "; block-shared update"
# the alias-scope lists of plain global and shared accesses (FunctionEmitter.space_scope)
GLOBAL_SCOPE, SHARED_SCOPE = 99993, 99994
# Functions a module calls without defining them, which each target serves itself
BUILTIN_FUNCS = frozenset({"vprintf", "malloc", "free", "__assertfail"})

from ptx.codegen.ptxrt_layout import (L_PARAMS, L_GRID, L_BLOCK, L_DYN_SHARED,  # noqa: F401
                                      L_STATIC_SHARED, L_GRID_WORKSPACE, W_SHARED, W_SCRATCH, W_WORKER_ID)
from ptx.codegen.special_registers import SpecialRegisters

# thread-function status codes (see ptx/codegen/warp_scheduler.c)
ST_DONE, ST_BARRIER, ST_WARP, ST_ABORT_BASE = 0, 1, 2, 0x100
# frame header field offsets (see warp_scheduler.c, struct frame_header)
FH_RESUME, FH_KIND, FH_MODE, FH_MASK, FH_B, FH_C, FH_SITE = 0, 8, 12, 16, 20, 24, 28
FH_A, FH_RESULT, FH_PRED_IN, FH_PRED_OUT, FH_COUNT = 32, 40, 48, 52, 56
FRAME_HEADER_BYTES = 64
# What ptxrt.c guarantees: a block's shared memory starts 128-aligned (SHARED_ALIGN), a resumable
# thread's frame 64-aligned (SCRATCH_ALIGN and frame sizes rounded to 64). Larger .align requests are
# met in code, from room the kernel reserves.
RUNTIME_SHARED_ALIGN = 128
RUNTIME_FRAME_ALIGN = 64


_position = [(0, 0)]


def current_position():
    """(line, col) of the instruction being translated, for internal error reports."""
    return _position[0]


def registrar(table):
    """The decorator `@handles(*opcodes)` that enters a lowering into `table` (a target's has its own)."""
    def handles(*opcodes):
        def deco(fn):
            for o in opcodes:
                table[o] = fn
            return fn
        return deco
    return handles


handles = registrar(HANDLERS)


def unsupported(ins, what=None):
    name = ".".join((ins.opcode,) + tuple(ins.mods))
    raise PTXUnsupportedError(f"unsupported instruction {what or name}", ins.pos.line, ins.pos.col)


def check_mods(ins, allowed):
    """Modifiers this translation does not know must fail loudly, never be ignored."""
    from ptx.codegen.ptxtypes import TYPE_NAMES
    for m in ins.mods:
        if m not in allowed and m not in TYPE_NAMES:
            unsupported(ins, f"{'.'.join((ins.opcode,) + tuple(ins.mods))} (modifier .{m})")


def semantic(ins, msg):
    raise PTXSemanticError(f"{msg} in {'.'.join((ins.opcode,) + tuple(ins.mods))}",
                           ins.pos.line, ins.pos.col)


# Generic and global addresses are 64-bit integers; every access through one is a byte offset from this one
# pointer, which is null at run time (ptxrt.c) but opaque to LLVM. An inttoptr per access hides the address
# from SCEV (no vectorised thread loops); offsets from one common base are affine, so the vectoriser can
# compare them with runtime overlap checks, and since LLVM never learns the base is null, no access is
# assumed away (a gep on a known-null pointer would be UB).
MEMBASE_SYMBOL = "ptx_rt_membase"
# LLVM knows this function's allocas (.local, body .param) and, by provenance, lets no pointer it did not
# derive from them touch them: turning their address into an integer (ptrtoint) does not count. When the
# function takes such an integer address, its base instead comes from this opaque call (it returns NULL)
# given those allocas, so every generic access may be one of them.
LOCALS_BASE_FN = "ptx_rt_locals_base"


class FunctionEmitter(SpecialRegisters):
    """mode: 'fast' (kernel body inlined in thread loops), 'sync' (resumable thread function),
    'func' (a .func as an LLVM function)."""

    CLUSTERS = True                 # thread-block clusters of several CTAs (ops_cluster.py)
    yields_in_spin_loops = True     # a backward spin-wait branch lets the runtime run other blocks
    # A block's threads all run on one worker thread, one at a time between collectives, so nothing else can
    # touch its shared memory during an atom.shared: a plain read-modify-write is exact, without a bus lock.
    block_private_shared = True
    rmw_queue = None                # a region's queued shared atomics (cpu/rmw_queue.py)
    # On a GPU a global and a shared access never touch the same bytes (the state spaces are apart): plain ones carry
    # alias scopes saying so, and LLVM vectorises a thread loop that copies a tile between them with no runtime
    # overlap check (which, for a 16-thread row, kept the loop scalar). Generic, atomic and cluster accesses carry none.
    space_scopes = True
    # f32 .rz/.rm/.rp add, sub, mul and fma computed exactly in f64 and stepped (directed_rounding.py) rather
    # than under a switched rounding mode, which costs two serialising instructions and stops vectorisation
    directed_f32_in_f64 = True

    def __init__(self, mctx, flat, mode: str):
        self.m = mctx
        self.flat = flat
        self.mode = mode
        self.f = IRFunction()
        self.regs = {}              # register name -> (llvm type, alloca)
        self.addr_vars = {}         # .local/.param variable in body -> (pointer value, size)
        self.func_params = {}       # .func param name -> pointer argument
        self.local_vars = []        # (pointer, size) of this function's .local variables
        self.sync_sites = []        # [(label to resume at, post-resume callback)]
        self.L = "%L"
        self.W = "%W"
        self.frame = "%frame"
        self.tid = ["%tid.x", "%tid.y", "%tid.z"]
        self.ctaid = ["%ctaid.x", "%ctaid.y", "%ctaid.z"]
        self.exit_label = None      # where `exit` (and `ret` in an entry) goes
        self.ret_label = None       # where `ret` goes in a .func
        self.frame_local_offset = FRAME_HEADER_BYTES
        self._cache = {}            # per-function invariant loads (entry block)
        self._membase = None        # (value, index of its line in entry_code)
        self._escaped = []          # pointers of locals whose address the body takes as an integer
        self.cur_ins = None
        self.uses_warp_info = False
        self.cur_index = -1
        self.written = {}           # statement index -> registers its translation writes

    # ------------------------------------------------------------ entry-block invariants
    def space_scope(self, space):
        """The metadata suffix of a plain access in `space` (space_scopes), or ""."""
        if not self.space_scopes or space not in ("global", "shared"):
            return ""
        self.m.add_helper("space.scopes", '!99990 = distinct !{!99990, !"zluda.spaces"}\n'
                                          '!99991 = distinct !{!99991, !99990}\n!99992 = distinct !{!99992, !99990}\n'
                                          f'!{GLOBAL_SCOPE} = !{{!99991}}\n!{SHARED_SCOPE} = !{{!99992}}')
        return f", !alias.scope !{GLOBAL_SCOPE}, !noalias !{SHARED_SCOPE}" if space == "global" else \
            f", !alias.scope !{SHARED_SCOPE}, !noalias !{GLOBAL_SCOPE}"

    def invariant(self, key, text_fn):
        """A value computed once in the entry block (loads from L/W)."""
        v = self._cache.get(key)
        if v is None:
            v = self.f.tmp()
            self.entry_code.append(f"  {v} = " + text_fn())
            self._cache[key] = v
        return v

    entry_code: list

    def load_L_u32(self, off):
        g = self.invariant(("Lp", off), lambda: f"getelementptr i8, ptr {self.L}, i64 {off}")
        return self.invariant(("L", off), lambda: f"load i32, ptr {g}, align 4")

    def params_base(self):
        return self.invariant("params", lambda: f"load ptr, ptr {self.L}, align 8")

    def shared_raw_base(self):
        """The block's shared memory as the runtime gives it (ptx_worker.shared), before shared_base's alignment."""
        if getattr(self.m, "shared_align", 0) <= RUNTIME_SHARED_ALIGN:
            return self.shared_base()
        return self.invariant("shared.raw", lambda: f"load ptr, ptr {self.W}, align 8")

    def shared_base(self):
        align = getattr(self.m, "shared_align", 0)
        if align <= RUNTIME_SHARED_ALIGN:
            return self.invariant("shared", lambda: f"load ptr, ptr {self.W}, align 8")
        # a variable asks for more than the runtime's alignment: every function of the module moves the
        # base up to the module's largest one (the kernel reserved the room), a gep so it stays a pointer
        raw = self.shared_raw_base()
        addr = self.invariant("shared.int", lambda: f"ptrtoint ptr {raw} to i64")
        neg = self.invariant("shared.neg", lambda: f"sub i64 0, {addr}")
        pad = self.invariant("shared.pad", lambda: f"and i64 {neg}, {align - 1}")
        return self.invariant("shared", lambda: f"getelementptr i8, ptr {raw}, i64 {pad}")

    def mem_base(self):
        """The base every integer address is an offset from (see MEMBASE_SYMBOL)."""
        if self._membase is None:
            self._membase = (self.f.tmp(), len(self.entry_code))
            self.entry_code.append("")
            self._write_mem_base()
        return self._membase[0]

    def _write_mem_base(self):
        # rewritten in place as the body reveals escaping locals: the line stays where the base was first
        # needed, after every local's pointer (allocas, frame slots, arguments) is defined
        v, at = self._membase
        if self._escaped:
            self.m.declare(f"declare ptr @{LOCALS_BASE_FN}(ptr, ...) nounwind willreturn memory(none)")
            args = ", ".join(f"ptr {p}" for p in self._escaped)
            self.entry_code[at] = f"  {v} = call ptr (ptr, ...) @{LOCALS_BASE_FN}({args})"
        else:
            self.m.declare(f"@{MEMBASE_SYMBOL} = external constant ptr")
            self.entry_code[at] = f"  {v} = load ptr, ptr @{MEMBASE_SYMBOL}, align 8"

    def escape_local(self, ptr):
        if ptr not in self._escaped:
            self._escaped.append(ptr)
            if self._membase is not None:
                self._write_mem_base()

    def int_to_ptr(self, addr):
        """An i64 address as a pointer LLVM can analyse (not inbounds: any integer is allowed)."""
        return self.f.op(f"getelementptr i8, ptr {self.mem_base()}, i64 {addr}")

    def ntid(self, i):
        block = self.m.block
        if block is not None:
            return str(block[i])
        return self.load_L_u32(L_BLOCK + 4 * i)

    def nctaid(self, i):
        return self.load_L_u32(L_GRID + 4 * i)

    # ------------------------------------------------------------ registers
    def reg(self, name, ins=None):
        r = self.regs.get(name)
        if r is not None:
            return r
        d = self.flat.lookup(name)
        if d is None or d.space != "reg":
            if ins is not None:
                semantic(ins, f"undefined register {name}")
            raise PTXSemanticError(f"undefined register {name}")
        if d.type.vec != 1:
            unsupported(ins, f"vector register {name}")
        ty = T.llvm_type(d.type.name)
        ptr = self.f.alloca(ty)
        self.regs[name] = (ty, ptr)
        return self.regs[name]

    def touch_all_registers(self):
        """Create storage for every register the body names (resumable threads save a fixed set)."""
        def visit(op):
            if isinstance(op, (A.Reg, A.SymbolExpr)):
                if self.is_register(op.name):
                    self.reg(op.name)
            elif isinstance(op, A.Address):
                if op.base and self.is_register(op.base):
                    self.reg(op.base)
            elif isinstance(op, A.Vector):
                for e in op.elems:
                    visit(e)
            elif isinstance(op, A.Negated):
                visit(op.operand)
            elif isinstance(op, A.PredPair):
                visit(op.first)
                visit(op.second)
            elif isinstance(op, A.ParenList):
                for e in op.items:
                    visit(e)
        for st in self.flat.body:
            if isinstance(st, A.Instruction):
                for op in st.operands:
                    visit(op)
                if st.guard and self.is_register(st.guard[0]):
                    self.reg(st.guard[0])

    def is_register(self, name):
        if name in self.regs:
            return True
        d = self.flat.lookup(name)
        return d is not None and d.space == "reg"

    # ------------------------------------------------------------ conversions
    def coerce(self, val, src, dst, signed=False):
        if src == dst:
            return val
        f = self.f
        sb, db = LLVM_BITS[src], LLVM_BITS[dst]
        if src == "i1":
            return self.coerce(f.op(f"zext i1 {val} to i32"), "i32", dst, False) if dst != "i32" \
                else f.op(f"zext i1 {val} to i32")
        if dst == "i1":
            iv = self.coerce(val, src, f"i{sb}")
            return f.op(f"icmp ne i{sb} {iv}, 0")
        if sb == db:
            return f.op(f"bitcast {src} {val} to {dst}")
        si = f"i{sb}"
        di = f"i{db}"
        iv = val if src == si else f.op(f"bitcast {src} {val} to {si}")
        if sb > db:
            iv = f.op(f"trunc {si} {iv} to {di}")
        else:
            iv = f.op(f"{'sext' if signed else 'zext'} {si} {iv} to {di}")
        return iv if dst == di else f.op(f"bitcast {di} {iv} to {dst}")

    # ------------------------------------------------------------ operands
    def read(self, op, ptype, ins=None):
        """The value of a source operand as the LLVM type of PTX type `ptype`."""
        ins = ins or self.cur_ins
        ty = T.llvm_type(ptype)
        if isinstance(op, A.Reg):
            name = op.name
            if self.is_register(name):
                rty, ptr = self.reg(name, ins)
                v = self.f.op(f"load {rty}, ptr {ptr}")
                return self.coerce(v, rty, ty, T.is_signed(ptype))
            sv = self.special_register(name, ins)
            if sv is not None:
                v, vty = sv
                return self.coerce(v, vty, ty, False)
            if name.startswith("%") and ins is not None:
                semantic(ins, f"undefined register {name}")
            addr = self.symbol_value(name, 0, ins)
            return self.coerce(addr, "i64", ty)
        if isinstance(op, A.Imm):
            return self.int_const(op.value, ptype)
        if isinstance(op, A.FloatImm):
            return self.float_imm(op, ptype)
        if isinstance(op, A.SymbolExpr):
            return self.coerce(self.symbol_value(op.name, op.offset, ins), "i64", ty)
        if isinstance(op, A.Negated):
            v = self.read(op.operand, "pred", ins)
            return self.f.op(f"xor i1 {v}, true")
        semantic(ins, f"bad source operand {type(op).__name__}")

    def int_const(self, value, ptype):
        ty = T.llvm_type(ptype)
        if ty == "i1":
            return "true" if value else "false"
        if ty in FLOAT_LLVM or ty.startswith("<"):
            # an integer literal where a float is expected: its numeric value (PTX converts)
            if ty.startswith("<"):
                bits = LLVM_BITS[ty]
                return self.f.op(f"bitcast i{bits} {value & ((1 << bits) - 1)} to {ty}")
            return self.f.op(f"sitofp i64 {value} to {ty}")
        bits = LLVM_BITS[ty]
        v = value & ((1 << bits) - 1)
        if v >= 1 << (bits - 1):
            v -= 1 << bits
        return str(v)

    def float_imm(self, op, ptype):
        import struct
        ty = T.llvm_type(ptype)
        if op.bits == 32:
            raw, rty = op.raw, "float"
        elif op.bits == 64:
            raw, rty = op.raw, "double"
        else:
            raw, rty = struct.unpack("<Q", struct.pack("<d", op.value))[0], "double"
        if ty in ("i32", "i64", "i16", "i8", "i128") and op.bits:
            return self.int_const(raw, ptype)
        irty = "i32" if rty == "float" else "i64"
        v = self.f.op(f"bitcast {irty} {raw} to {rty}")
        if ty == rty:
            return v
        if ty in FLOAT_LLVM:
            return self.f.op(f"{'fptrunc' if LLVM_BITS[ty] < LLVM_BITS[rty] else 'fpext'} {rty} {v} to {ty}")
        return self.coerce(v, rty, ty)

    def write(self, op, val, ptype, ins=None, signed=None):
        """Store `val` (LLVM type of `ptype`) into a destination operand."""
        ins = ins or self.cur_ins
        if isinstance(op, A.Sink):
            return
        if not isinstance(op, A.Reg) or not self.is_register(op.name):
            semantic(ins, "destination is not a register")
        rty, ptr = self.reg(op.name, ins)
        ty = T.llvm_type(ptype)
        sg = T.is_signed(ptype) if signed is None else signed
        v = self.coerce(val, ty, rty, sg)
        self.f.emit(f"store {rty} {v}, ptr {ptr}")
        self.written.setdefault(self.cur_index, set()).add(op.name)

    def write_llvm(self, op, val, ty, signed=False):
        if isinstance(op, A.Sink):
            return
        rty, ptr = self.reg(op.name, self.cur_ins)
        v = self.coerce(val, ty, rty, signed)
        self.f.emit(f"store {rty} {v}, ptr {ptr}")
        self.written.setdefault(self.cur_index, set()).add(op.name)

    # ------------------------------------------------------------ symbols and addresses
    def symbol_value(self, name, offset, ins):
        """A symbol used as a value: its address in its own state space, as i64."""
        f = self.f
        sh = self.m.shared_offset(name)
        if sh is not None:
            return str(sh + offset)
        p = self.symbol_ptr(name, ins, allow_shared=False)
        if name in self.addr_vars or name in self.func_params:
            self.escape_local(p)
        v = f.op(f"ptrtoint ptr {p} to i64")
        return f.op(f"add i64 {v}, {offset}") if offset else v

    def symbol_ptr(self, name, ins, allow_shared=True):
        """Host pointer to a named variable (None if `name` is no variable)."""
        if name in self.addr_vars:
            return self.addr_vars[name][0]
        if name in self.func_params:
            return self.func_params[name]
        kp = self.m.kernel_param_offset(name)
        if kp is not None:
            base = self.params_base()
            return self.invariant(("kp", name), lambda: f"getelementptr i8, ptr {base}, i64 {kp}")
        if allow_shared:
            sh = self.m.shared_offset(name)
            if sh is not None:
                base = self.shared_base()
                return self.invariant(("sh", name), lambda: f"getelementptr i8, ptr {base}, i64 {sh}")
        g = self.m.global_symbol(name)
        if g is not None:
            return g
        semantic(ins, f"undefined symbol {name}")

    def address(self, op, space, ins=None):
        """Host pointer for a memory operand `[base+off]` in state space `space` (None: generic)."""
        ins = ins or self.cur_ins
        if not isinstance(op, A.Address):
            if isinstance(op, (A.Reg, A.SymbolExpr)):
                op = A.Address(op.name, getattr(op, "offset", 0), op.pos)
            else:
                semantic(ins, "expected an address operand")
        base = op.base
        if base is not None and not self.is_register(base):
            # a variable's own address is this CTA's, in .shared::cluster too
            return self.symbol_address(base, op.offset, "shared" if space == "shared::cluster" else space, ins)
        if base is None:
            return self.space_ptr(str(op.offset), space)
        rty, _ = self.reg(base, ins)
        wide = LLVM_BITS[rty] >= 64
        return self.register_address(self.read(A.Reg(base, op.pos), "u64" if wide else "u32", ins), wide,
                                     op.offset, space)

    def register_address(self, av, wide, offset, space):
        """Pointer for `[reg+offset]`: `av` is the register's value (i64 if `wide`, else i32)."""
        f = self.f
        if not wide:
            # a 32-bit address (a .shared/.local window offset) wraps at 2^32, offset included: cuRAND's
            # MT19937 reads [%r+39808] with %r just below 2^32
            if offset:
                av = f.op(f"add i32 {av}, {offset}")
            return self.space_ptr(f.op(f"zext i32 {av} to i64"), space)
        if offset:
            av = f.op(f"add i64 {av}, {offset}")
        return self.space_ptr(av, space)

    def symbol_address(self, name, offset, space, ins):
        """Pointer to the variable `name` plus `offset` bytes, accessed in state space `space`."""
        p = self.symbol_ptr(name, ins, allow_shared=(space in ("shared", None, "generic")))
        if space not in ("shared",) and self.m.shared_offset(name) is not None and space is not None:
            semantic(ins, f"{name} is not in the .{space} state space")
        return self.f.op(f"getelementptr i8, ptr {p}, i64 {offset}") if offset else p

    def space_ptr(self, av, space):
        """Pointer for the i64 address `av` of state space `space` (a .shared one is an offset)."""
        if space == "shared":
            return self.f.op(f"getelementptr i8, ptr {self.shared_base()}, i64 {av}")
        if space == "shared::cluster":
            from ptx.codegen import ops_cluster
            return ops_cluster.cluster_ptr(self, av)
        return self.int_to_ptr(av)

    def cvta_shared(self, v, bits, to):
        """cvta between a generic address and a .shared offset (`to`: generic -> shared)."""
        f = self.f
        base = f.op(f"ptrtoint ptr {self.shared_base()} to i{bits}")
        return f.op(f"{'sub' if to else 'add'} i{bits} {v}, {base}")

    def space_tests(self, a):
        """(is shared, is local) of the generic address `a` (i64), for isspacep."""
        f = self.f
        rel = f.op(f"sub i64 {a}, {f.op(f'ptrtoint ptr {self.shared_base()} to i64')}")
        tot = f.op(f"add i32 {self.load_L_u32(L_DYN_SHARED)}, {self.load_L_u32(L_STATIC_SHARED)}")
        in_shared = f.op(f"icmp ult i64 {rel}, {f.op(f'zext i32 {tot} to i64')}")
        # local memory is this function's .local variables (host stack or thread frame)
        in_local = "false"
        for p, size in self.local_vars:
            lo = f.op(f"ptrtoint ptr {p} to i64")
            inside = f.op(f"icmp ult i64 {f.op(f'sub i64 {a}, {lo}')}, {size}")
            in_local = f.op(f"or i1 {in_local}, {inside}")
        return in_shared, in_local

    def exchange_words(self, words, sources, then, room=0):
        """The tensor-core instructions' warp-wide exchange of i32 words by source lane (ops_warp.exchange
        says what the arguments are): on the CPU a suspension that the warp scheduler serves."""
        from ptx.codegen.ops_warp import exchange    # ops_warp builds on this module
        exchange(self, words, sources, then, room)

    def approx_math(self, ins, x, elem):
        """sin/cos/lg2/ex2/tanh.approx of one `elem` value: in f64 (vector_math's IR for f32 and narrower,
        libm for f64), then the GPU's side of the half rounding boundaries (approx_points.py)."""
        from ptx.codegen import approx_points
        f = self.f
        xd = f.op(f"fpext {elem} {x} to double") if elem != "double" else x
        name = {"sin": "sin", "cos": "cos", "lg2": "log2", "ex2": "exp2", "tanh": "tanh"}[ins.opcode]
        if elem != "double":            # IR: vectorises
            from ptx.codegen import vector_math
            rd = getattr(vector_math, name)(self, xd)
        elif name == "tanh":
            rd = self.call("tanh", "double", [("double", xd)])
        else:
            rd = self.call(f"llvm.{name}.f64", "double", [("double", xd)])
        out = f.op(f"fptrunc double {rd} to {elem}") if elem != "double" else rd
        if T.types_in(ins.mods)[-1:] == ["f32"]:
            out = approx_points.apply(self, ins.opcode, x, out)
        return out

    # ------------------------------------------------------------ labels and control flow
    label_prefix = ""               # set while a second copy of the body is emitted into one function

    def label_name(self, ptx_label):
        return self.label_prefix + "p." + ptx_label

    def emit_body(self, skip=()):
        """The whole body, but for the statements whose indices are in `skip`."""
        for i, st in enumerate(self.flat.body):
            self.cur_index = i
            if isinstance(st, A.Label):
                self.f.label(self.label_name(st.name))
            elif i not in skip:
                self.emit_instruction(st)

    def normalize(self, op):
        """Registers named without `%` reach us as SymbolExpr: make every register operand a Reg."""
        if isinstance(op, A.SymbolExpr) and not op.offset and self.is_register(op.name):
            return A.Reg(op.name, op.pos)
        if isinstance(op, A.Vector):
            return A.Vector([self.normalize(e) for e in op.elems], op.pos)
        if isinstance(op, A.PredPair):
            return A.PredPair(self.normalize(op.first), self.normalize(op.second), op.pos)
        if isinstance(op, A.Negated):
            return A.Negated(self.normalize(op.operand), op.pos)
        if isinstance(op, A.ParenList):
            return A.ParenList([self.normalize(e) for e in op.items], op.pos)
        return op

    def emit_instruction(self, ins):
        if any(isinstance(o, (A.SymbolExpr, A.Vector, A.PredPair, A.Negated, A.ParenList))
               for o in ins.operands):
            ins = A.Instruction(ins.opcode, ins.mods, [self.normalize(o) for o in ins.operands],
                                ins.guard, ins.pos)
        self.cur_ins = ins
        _position[0] = (ins.pos.line, ins.pos.col)
        h = self.handler(ins.opcode)
        if h is None:
            unsupported(ins)
        f = self.f
        if ins.guard and ins.opcode != "bra":
            g = self.read(A.Reg(ins.guard[0], ins.pos), "pred", ins)
            run, skip = f.new_label("g.run"), f.new_label("g.skip")
            if ins.guard[1]:
                f.term(f"br i1 {g}, label %{skip}, label %{run}")
            else:
                f.term(f"br i1 {g}, label %{run}, label %{skip}")
            f.label(run)
            h(self, ins)
            f.label(skip)
        else:
            h(self, ins)

    def handler(self, opcode):
        """The lowering of `opcode`; a target overrides the few whose meaning needs its own code."""
        return HANDLERS.get(opcode)

    def abort(self, code_val):
        """Stop the whole launch: the thread trapped, asserted or faulted (code: PTXRT_TRAP/ASSERT/FAULT/MISALIGNED,
        a constant or an i32 value)."""
        f = self.f
        if self.mode == "fast":
            f.term(f"ret i32 {code_val}")
        else:
            v = f.op(f"add i32 {code_val}, {ST_ABORT_BASE}")
            f.term(f"ret i32 {v}")

    def thread_exit(self):
        f = self.f
        if self.mode == "func":
            f.term("ret i32 1")
        else:
            f.term(f"br label %{self.exit_label}")

    # ------------------------------------------------------------ calls
    def call(self, fname, retty, args):
        """Call an intrinsic or runtime function, declaring it in the module."""
        self.m.declare(f"declare {retty} @{fname}({', '.join(t for t, _ in args)})")
        argtxt = ", ".join(f"{t} {v}" for t, v in args)
        if retty == "void":
            self.f.emit(f"call void @{fname}({argtxt})")
            return None
        return self.f.op(f"call {retty} @{fname}({argtxt})")

    # ------------------------------------------------------------ suspension (sync mode)
    def suspend(self, status, setup, after=None):
        """Suspend the thread: `setup()` writes the frame header (collective inputs); on resume
        `after()` reads the results. Only valid in 'sync' mode."""
        if self.mode not in ("sync", "region"):
            unsupported(self.cur_ins, f"{self.cur_ins.opcode} outside a kernel (in a called function)")
        f = self.f
        k = len(self.sync_sites) + 1
        cont = f.new_label(f"resume{k}.cont")
        setup(k)
        # a lockstep yield (cpu/lockstep.py) is where region loops split; the resumable thread only resumes there
        yields = self.mode == "sync" and "yield" in self.cur_ins.mods
        f.term(f"br label %{cont if yields else f'save.{k}'}")
        self.sync_sites.append((k, status, cont, after, self.cur_index))
        f.label(cont)

    def frame_field(self, off):
        return self.f.op(f"getelementptr i8, ptr {self.frame}, i64 {off}")

    def store_frame(self, off, ty, val):
        p = self.frame_field(off)
        self.f.emit(f"store {ty} {val}, ptr {p}")

    def load_frame(self, off, ty):
        p = self.frame_field(off)
        return self.f.op(f"load {ty}, ptr {p}")
