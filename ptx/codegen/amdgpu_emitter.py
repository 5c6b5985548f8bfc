"""The amdgcn flavour of the function emitter: one PTX thread is one GPU lane, so registers, addresses
and special registers map onto address spaces and AMDGPU intrinsics instead of the CPU runtime.

The per-instruction lowering of ops_*.py is reused through the FunctionEmitter methods overridden
here (space_ptr, symbol_address, cvta_shared, space_tests, approx_math, lane_id, globaltimer,
grid_workspace, handler); amdgpu_ops.py replaces only what has no shared meaning. Every address is a flat
(`ptr`) pointer built here from an `addrspacecast` of a global/LDS/constant pointer, and LLVM's
InferAddressSpaces pass turns the accesses back into global_/ds_/s_load instructions."""

from __future__ import annotations

from ptx.codegen import function_emitter as FE
from ptx.codegen.function_emitter import FunctionEmitter, semantic
from ptx.codegen.irtext import IRFunction
from ptx.codegen.reserved_smem import RESERVED_SMEM_BYTES
from ptx.codegen.module_context import ModuleContext, llvm_name
from ptx.errors import PTXUnsupportedError

# v5 hidden kernel arguments (offsets from llvm.amdgcn.implicitarg.ptr)
HID_BLOCK_COUNT, HID_GROUP_SIZE = 0, 12
HANDLERS = {}        # opcode -> fn(emitter, instruction): the amdgcn overrides of FE.HANDLERS
amd_handles = FE.registrar(HANDLERS)


class AmdIRFunction(IRFunction):
    """Allocas live in the private address space (5); the body sees them as flat pointers."""

    def alloca(self, ty: str, align: int = 0, count: int = 0) -> str:
        name = self.tmp()
        n = f", i64 {count}" if count else ""
        a = f", align {align}" if align else ""
        self.entry_allocas.append(f"  {name}.p5 = alloca {ty}{n}{a}, addrspace(5)")
        self.entry_allocas.append(f"  {name} = addrspacecast ptr addrspace(5) {name}.p5 to ptr")
        return name


class AmdModuleContext(ModuleContext):
    def __init__(self, module, target, fma_contract=False):
        super().__init__(module, fma_contract)
        self.target = target
        self.kernel_dynamic_base = 0      # LDS offset of `extern .shared` in the kernel being emitted
        self.kernel_static_shared = 0     # its PTX static shared bytes
        self.bar_red_offset = None        # LDS scratch word of bar.red in that kernel

    def add_helper(self, name, text):
        from ptx.codegen.amdgpu_rounding import replacement
        r = replacement(name)
        if r is not None:
            decls, text = r
            for d in decls:
                self.declare(d)
        super().add_helper(name, text)

    def global_symbol(self, name):
        g = self.global_syms.get(name)
        if g is not None:
            return f"addrspacecast (ptr addrspace(1) {g[0]} to ptr)"
        f = self.func_decls.get(name)
        if f is not None and f.body is not None:
            return llvm_name("f", name)
        return None


class AmdgpuFunctionEmitter(FunctionEmitter):
    """mode 'fast' for a kernel body (an i32 function the kernel calls), 'func' for a .func.
    %L is the flat kernarg pointer, %W the flat pointer to the dynamic shared memory base."""

    yields_in_spin_loops = False    # waves of a GPU make progress on their own
    block_private_shared = False    # a block's waves run at once
    space_scopes = False
    directed_f32_in_f64 = False     # f64 is slow on most AMD GPUs; their instructions take a rounding mode

    def __init__(self, mctx, flat, mode):
        super().__init__(mctx, flat, mode)
        self.f = AmdIRFunction()
        self.tid = ["%hw.tid.x", "%hw.tid.y", "%hw.tid.z"]
        self.ctaid = ["%hw.ctaid.x", "%hw.ctaid.y", "%hw.ctaid.z"]
        self.wave = mctx.target.wave

    def start_entry(self):
        """Entry-block definitions of the hardware ids (used by the body and passed to callees)."""
        self.entry_code = []
        for i, c in enumerate("xyz"):
            self.m.declare(f"declare i32 @llvm.amdgcn.workitem.id.{c}()")
            self.m.declare(f"declare i32 @llvm.amdgcn.workgroup.id.{c}()")
            self.entry_code.append(f"  %hw.tid.{c} = call i32 @llvm.amdgcn.workitem.id.{c}()")
            self.entry_code.append(f"  %hw.ctaid.{c} = call i32 @llvm.amdgcn.workgroup.id.{c}()")

    # ------------------------------------------------------------ launch geometry
    def implicit_arg(self, off, ty):
        self.m.declare("declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()")
        base = self.invariant("implicitarg", lambda: "call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()")
        p = self.invariant(("ia.p", off), lambda: f"getelementptr i8, ptr addrspace(4) {base}, i64 {off}")
        v = self.invariant(("ia", off, ty), lambda: f"load {ty}, ptr addrspace(4) {p}, align {int(ty[1:]) // 8}, !invariant.load !{{}}")
        if ty == "i32":
            return v
        return self.invariant(("ia.z", off), lambda: f"zext {ty} {v} to i32")

    def group_segment_size(self):
        """LDS bytes of this dispatch (static + dynamic): the AQL packet's group_segment_size (+28)."""
        def dp():
            self.m.declare("declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()")
            return "call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()"
        base = self.invariant("dispatch", dp)
        p = self.invariant("dispatch.gss.p", lambda: f"getelementptr i8, ptr addrspace(4) {base}, i64 28")
        return self.invariant("dispatch.gss", lambda: f"load i32, ptr addrspace(4) {p}, align 4, !invariant.load !{{}}")

    def dynamic_base(self):
        """LDS offset where `extern .shared` memory starts (i32 text)."""
        if self.mode == "func":
            f = self.f
            p3 = f.op(f"addrspacecast ptr {self.W} to ptr addrspace(3)")
            return f.op(f"ptrtoint ptr addrspace(3) {p3} to i32")
        return str(self.m.kernel_dynamic_base)

    def ntid(self, i):
        return self.implicit_arg(HID_GROUP_SIZE + 2 * i, "i16")

    def nctaid(self, i):
        return self.implicit_arg(HID_BLOCK_COUNT + 4 * i, "i32")

    def params_base(self):
        return self.L

    def shared_base(self):
        return self.lds_flat("0")

    def load_L_u32(self, off):
        semantic(self.cur_ins, "a CPU launch-record field used on amdgcn")

    CLUSTERS = False

    def address(self, op, space, ins=None):
        return super().address(op, "shared" if space == "shared::cluster" else space, ins)

    def cluster_nctaid(self, i):
        # the AMD target runs clusters of one CTA only (the HIP backend refuses larger cluster launches)
        return "1"

    def is_explicit_cluster(self):
        return "false"

    # ------------------------------------------------------------ lanes
    def wave_lane(self):
        """The lane's index in its hardware wave (0..31 or 0..63)."""
        def lo():
            self.m.declare("declare i32 @llvm.amdgcn.mbcnt.lo(i32, i32)")
            return "call i32 @llvm.amdgcn.mbcnt.lo(i32 -1, i32 0)"
        v = self.invariant("mbcnt.lo", lo)
        if self.wave == 32:
            return v

        def hi():
            self.m.declare("declare i32 @llvm.amdgcn.mbcnt.hi(i32, i32)")
            return f"call i32 @llvm.amdgcn.mbcnt.hi(i32 -1, i32 {v})"
        return self.invariant("mbcnt.hi", hi)

    def lane_id(self):
        """The CUDA lane (0..31): on 64-wide waves a warp is half a wave."""
        if self.wave == 32:
            return self.wave_lane()
        wl = self.wave_lane()
        return self.invariant("laneid", lambda: f"and i32 {wl}, 31")

    def half_base(self):
        """First wave lane of this lane's CUDA warp (0 on 32-wide waves; 0 or 32 on 64-wide)."""
        if self.wave == 32:
            return "0"
        wl = self.wave_lane()
        return self.invariant("halfbase", lambda: f"and i32 {wl}, 32")

    def ballot(self, pred):
        """The 32-bit CUDA-warp ballot of `pred` over the active lanes."""
        f = self.f
        if self.wave == 32:
            return self.call("llvm.amdgcn.ballot.i32", "i32", [("i1", pred)])
        b = self.call("llvm.amdgcn.ballot.i64", "i64", [("i1", pred)])
        sh = f.op(f"zext i32 {self.half_base()} to i64")
        return f.op(f"trunc i64 {f.op(f'lshr i64 {b}, {sh}')} to i32")

    def read_lane(self, value, src_lane):
        """`value` (i32) of CUDA lane `src_lane` (0..31) of this warp, through ds_bpermute."""
        f = self.f
        idx = src_lane if self.wave == 32 else f.op(f"or i32 {self.half_base()}, {src_lane}")
        addr = f.op(f"shl i32 {idx}, 2")
        return self.call("llvm.amdgcn.ds.bpermute", "i32", [("i32", addr), ("i32", value)])

    def exchange_words(self, words, sources, then, room=0):
        """The exchange in registers: each received word is a ds_bpermute of the offered word from its
        source lane (a select among those the lanes want where they want different ones). The row is a
        private array with constant indices, which LLVM keeps in registers."""
        from ptx.codegen.ops_warp import XchgRow, lane_constant
        f = self.f
        n_in, n_out = len(words), len(sources[0])
        row = f.alloca(f"[{n_in + n_out + room} x i32]", 4)
        at = lambda i: f.op(f"getelementptr i32, ptr {row}, i32 {i}")
        for i, w in enumerate(words):
            f.emit(f"store i32 {w}, ptr {at(i)}")
        for j in range(n_out):
            src = lane_constant(self, "xchg.lane", [sources[ln][j][0] for ln in range(32)])
            wanted = [sources[ln][j][1] for ln in range(32)]
            which = lane_constant(self, "xchg.word", wanted)
            got = None
            for w in sorted(set(wanted)):
                v = self.read_lane(words[w], src)
                got = v if got is None else f.op(f"select i1 {f.op(f'icmp eq i32 {which}, {w}')}, i32 {v}, "
                                                 f"i32 {got}")
            f.emit(f"store i32 {got}, ptr {at(n_in + j)}")
        then(XchgRow(self, row, n_in, n_out))

    # ------------------------------------------------------------ addresses
    def lds_flat(self, off32):
        """Flat pointer to LDS byte offset `off32` (an i32 value)."""
        f = self.f
        p3 = f.op(f"inttoptr i32 {off32} to ptr addrspace(3)")
        return f.op(f"addrspacecast ptr addrspace(3) {p3} to ptr")

    def space_ptr(self, av64, space):
        f = self.f
        if space == "shared":
            return self.lds_flat(f.op(f"trunc i64 {av64} to i32") if not av64.lstrip("-").isdigit() else av64)
        if space == "global":
            p = f.op(f"inttoptr i64 {av64} to ptr addrspace(1)")
            return f.op(f"addrspacecast ptr addrspace(1) {p} to ptr")
        if space == "const":
            p = f.op(f"inttoptr i64 {av64} to ptr addrspace(4)")
            return f.op(f"addrspacecast ptr addrspace(4) {p} to ptr")
        return f.op(f"inttoptr i64 {av64} to ptr")

    def register_address(self, av, wide, offset, space):
        if space != "shared":
            return super().register_address(av, wide, offset, space)
        f = self.f             # an LDS offset is 32 bits: the arithmetic stays in i32
        av = f.op(f"trunc i64 {av} to i32") if wide else av
        return self.lds_flat(f.op(f"add i32 {av}, {offset}") if offset else av)

    def cvta_shared(self, v, bits, to):
        f = self.f
        if to:
            g = v if bits == 64 else f.op(f"zext i32 {v} to i64")
            p3 = f.op(f"addrspacecast ptr {f.op(f'inttoptr i64 {g} to ptr')} to ptr addrspace(3)")
            return f.op(f"ptrtoint ptr addrspace(3) {p3} to i{bits}")
        off = v if bits == 32 else f.op(f"trunc i64 {v} to i32")
        return f.op(f"ptrtoint ptr {self.lds_flat(off)} to i{bits}")

    def space_tests(self, a):
        p = self.f.op(f"inttoptr i64 {a} to ptr")
        return (self.call("llvm.amdgcn.is.shared", "i1", [("ptr", p)]),
                self.call("llvm.amdgcn.is.private", "i1", [("ptr", p)]))

    def shared_symbol_offset(self, name):
        """LDS offset (i32 value text) of a .shared variable, or None."""
        if name in self.m.dynamic_shared_names:
            return self.dynamic_base()
        sh = self.m.shared_offset(name)
        return None if sh is None else str(sh)

    def symbol_value(self, name, offset, ins):
        f = self.f
        sh = self.shared_symbol_offset(name)
        if sh is not None:
            v = f.op(f"add i32 {sh}, {offset}") if offset else sh
            return f.op(f"zext i32 {v} to i64") if not v.lstrip("-").isdigit() else v
        p = self.symbol_ptr(name, ins, allow_shared=False)
        v = f.op(f"ptrtoint ptr {p} to i64")
        return f.op(f"add i64 {v}, {offset}") if offset else v

    def symbol_address(self, name, offset, space, ins):
        sh = self.shared_symbol_offset(name)
        if sh is None:
            p = self.symbol_ptr(name, ins, allow_shared=False)
            return self.f.op(f"getelementptr i8, ptr {p}, i64 {offset}") if offset else p
        if space not in ("shared", None):
            semantic(ins, f"{name} is not in the .{space} state space")
        return self.lds_flat(self.f.op(f"add i32 {sh}, {offset}") if offset else sh)

    # ------------------------------------------------------------ special registers
    def globaltimer(self):
        # the steady counter runs at 100 MHz on every supported GPU: nanoseconds = ticks * 10
        return self.f.op(f"mul i64 {self.call('llvm.readsteadycounter', 'i64', [])}, 10")

    def grid_workspace(self):
        # a zeroed module global serves (each completed grid barrier leaves its low bits as they were)
        self.m.add_helper("@grid_workspace", "@zluda.grid_workspace = internal addrspace(1) global "
                                             "[64 x i8] zeroinitializer, align 64")
        return self.f.op("ptrtoint ptr addrspace(1) @zluda.grid_workspace to i64")

    def special_register(self, name, ins):
        f = self.f
        if name == "%smid":
            return "0", "i32"
        if name in ("%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size"):
            dyn = f.op(f"sub i32 {self.group_segment_size()}, {self.dynamic_base()}")
            if name == "%dynamic_smem_size" or self.mode == "func":
                return dyn, "i32"
            # the reservation (reserved_smem.py) sits in the static area; only the aggregate counts it
            total = f.op(f"add i32 {dyn}, {self.m.kernel_static_shared - self.m.reserved_smem_bytes}")
            if name == "%aggr_smem_size":
                return f.op(f"add i32 {total}, {RESERVED_SMEM_BYTES}"), "i32"
            return total, "i32"
        return super().special_register(name, ins)

    # ------------------------------------------------------------ control
    def abort(self, code_val):
        self.call("llvm.trap", "void", [])
        self.f.term("unreachable")

    def handler(self, opcode):
        return HANDLERS.get(opcode) or FE.HANDLERS.get(opcode)

    # ------------------------------------------------------------ math
    def approx_math(self, ins, x, elem):
        """The .approx transcendentals on the native f32 instructions (AMDGPU has none for f64)."""
        f = self.f
        if elem == "double":
            raise PTXUnsupportedError(f"{ins.opcode}.approx.f64 has no AMDGPU instruction",
                                      ins.pos.line, ins.pos.col)
        xf = f.op(f"fpext {elem} {x} to float") if elem != "float" else x
        if ins.opcode == "tanh":
            r = self.tanh_f32(xf)
        else:
            name = {"sin": "sin", "cos": "cos", "lg2": "log2", "ex2": "exp2"}[ins.opcode]
            r = self.call(f"llvm.{name}.f32", "float", [("float", xf)])
        return f.op(f"fptrunc float {r} to {elem}") if elem != "float" else r

    def tanh_f32(self, x):
        """tanh(x) = sign(x) * (1 - 2 / (2^(2|x| log2 e) + 1)); below |x| = 2^-4 an odd polynomial keeps
        the relative error far inside tanh.approx's 2^-10.7 (the subtraction would cancel there)."""
        f = self.f
        ax = self.call("llvm.fabs.f32", "float", [("float", x)])
        e = self.call("llvm.exp2.f32", "float", [("float", f.op(f"fmul float {ax}, 0x4007154760000000"))])
        e1 = f.op(f"fadd float {e}, 1.0")
        big = f.op(f"fsub float 1.0, {f.op(f'fdiv float 2.0, {e1}')}")
        big = self.call("llvm.copysign.f32", "float", [("float", big), ("float", x)])
        x2 = f.op(f"fmul float {x}, {x}")
        poly = f.op(f"fmul float {x2}, 0x3FC1111120000000")             # 2/15
        poly = f.op(f"fadd float {poly}, 0xBFD5555560000000")            # -1/3
        poly = f.op(f"fmul float {poly}, {x2}")
        px = f.op(f"fmul float {poly}, {x}")
        small = f.op(f"fadd float {px}, {x}")
        tiny = f.op(f"fcmp olt float {ax}, 0x3FB0000000000000")         # 2^-4
        return f.op(f"select i1 {tiny}, float {small}, float {big}")
