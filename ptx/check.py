"""Light semantic checks on a parsed module: names resolve, branches reach labels, operand counts and the
unambiguous operand types are right. Raises PTXSemanticError with line:column; never anything else."""

from __future__ import annotations

import bisect
import gc
import re

from ptx import ast, isa
from ptx.errors import PTXError, PTXSemanticError

_SPECIAL_VECTOR = ("tid", "ntid", "ctaid", "nctaid", "cluster_ctaid", "cluster_nctaid", "clusterid",
                   "nclusterid")
_SPECIAL_SCALAR = frozenset("""
laneid warpid nwarpid smid nsmid gridid lanemask_eq lanemask_le lanemask_lt lanemask_ge lanemask_gt
clock clock_hi clock64 globaltimer globaltimer_lo globaltimer_hi total_smem_size aggr_smem_size
dynamic_smem_size reserved_smem_offset_begin reserved_smem_offset_end reserved_smem_offset_cap
reserved_smem_offset_0 reserved_smem_offset_1 cluster_ctarank cluster_nctarank is_explicit_cluster current_graph_exec
locality_domain_id
""".split())
_SPECIAL_RE = re.compile(r"%(?:(?:" + "|".join(_SPECIAL_VECTOR) + r")(?:\.[xyzw])?|envreg(?:[0-9]|[12][0-9]|3[01])"
                         r"|pm[0-7](?:_64)?|" + "|".join(sorted(_SPECIAL_SCALAR)) + r")\Z")
_SPECIAL_64 = frozenset(("%clock64", "%globaltimer", "%gridid", "%current_graph_exec"))
_VEC_COMPONENT = re.compile(r"(.*)\.([xyzwrgba])\Z")
_TRAILING_NUM = re.compile(r"(.*?)([0-9]+)\Z")

_TYPE_BITS = {
    "pred": 1, "b8": 8, "s8": 8, "u8": 8, "e4m3": 8, "e5m2": 8,
    "b16": 16, "s16": 16, "u16": 16, "f16": 16, "bf16": 16, "e4m3x2": 16, "e5m2x2": 16,
    "b32": 32, "s32": 32, "u32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32,
    "b64": 64, "s64": 64, "u64": 64, "f64": 64, "f32x2": 64, "b128": 128,
}

# Operand counts (min, max) of common instructions; others are not checked.
_COUNTS = {
    "add": (3, 3), "sub": (3, 3), "addc": (3, 3), "subc": (3, 3), "mul": (3, 3), "mul24": (3, 3),
    "div": (3, 3), "rem": (3, 3), "and": (3, 3), "or": (3, 3), "xor": (3, 3), "shl": (3, 3), "shr": (3, 3),
    "min": (3, 4), "max": (3, 4), "copysign": (3, 3),
    "mad": (4, 4), "mad24": (4, 4), "madc": (4, 4), "fma": (4, 4), "sad": (4, 4),
    "neg": (2, 2), "not": (2, 2), "cnot": (2, 2), "abs": (2, 2), "popc": (2, 2), "clz": (2, 2),
    "brev": (2, 2), "bfind": (2, 2), "sqrt": (2, 2), "rsqrt": (2, 2), "rcp": (2, 2), "sin": (2, 2),
    "cos": (2, 2), "lg2": (2, 2), "ex2": (2, 2), "tanh": (2, 2), "testp": (2, 2),
    "cvta": (2, 2), "mov": (2, 2), "selp": (4, 4), "slct": (4, 4), "setp": (3, 4), "set": (3, 4),
    "bfe": (4, 4), "bfi": (5, 5), "prmt": (3, 4), "shf": (4, 4), "lop3": (5, 6), "dp4a": (4, 4),
    "dp2a": (4, 4), "bra": (1, 1), "brx": (2, 2), "ret": (0, 0), "exit": (0, 0), "trap": (0, 0),
    "brkpt": (0, 0), "ld": (2, 4), "ldu": (2, 2), "st": (2, 3), "atom": (3, 5), "red": (2, 3),
    "activemask": (1, 1), "membar": (0, 0), "isspacep": (2, 2), "bmsk": (3, 3), "szext": (3, 3),
    "fns": (4, 4), "nanosleep": (1, 1),
}

# Instructions whose operands are all values of the instruction type: none may be a predicate unless
# the type is .pred.
_VALUE_OPS = frozenset(("add", "sub", "addc", "subc", "mul", "mul24", "div", "rem", "and", "or", "xor",
                        "not", "cnot", "shl", "shr", "min", "max", "mad", "mad24", "madc", "fma", "sad",
                        "neg", "abs", "popc", "clz", "brev", "bfind", "bfe", "bfi", "prmt", "shf", "lop3",
                        "sqrt", "rsqrt", "rcp", "sin", "cos", "lg2", "ex2", "tanh", "copysign", "cvt",
                        "cvta", "mov", "dp4a", "dp2a", "ld", "st", "atom", "red", "ldu"))
# Instructions where every register operand must have exactly the instruction type's width
# (`.wide` forms and shift counts are handled separately).
_SAME_WIDTH = frozenset(("add", "sub", "addc", "subc", "mul", "div", "rem", "and", "or", "xor", "not",
                         "min", "max", "mad", "madc", "fma", "neg", "abs", "shl", "shr", "copysign"))


def check(module: ast.Module) -> ast.Module:
    """Run the checks; returns the module unchanged so calls can chain."""
    # A big tree is alive and we allocate as we walk it: cyclic GC passes would rescan it again and again.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _Checker(module).run()
    except PTXError:
        raise
    except RecursionError:
        raise PTXSemanticError("nesting too deep") from None
    except Exception as exc:  # a checker bug must still surface as our error type
        raise PTXSemanticError(f"internal checker error ({type(exc).__name__}: {exc})") from None
    finally:
        if gc_was_enabled:
            gc.enable()
    return module


_OPAQUE = frozenset(("texref", "samplerref", "surfref"))
# what may not address a reference's variable: only tex/tld4/txq/suld/sust/sured/suq, mov and istypep take one
_TEXTURE_OPS = frozenset(("tex", "tld4", "txq", "suld", "sust", "sured", "suq"))
_SAMPLER_QUERIES = frozenset(("filter_mode", "addr_mode_0", "addr_mode_1", "addr_mode_2", "force_unnormalized_coords"))
_MEMORY_OPS = frozenset(("ld", "ldu", "st", "atom", "red", "prefetch", "prefetchu", "cp", "cvta", "isspacep"))


def _check_opaque(module):
    """Where .texref/.samplerref/.surfref may appear (as ptxas has it): module variables in .global, kernel
    parameters; .samplerref only in independent texturing mode, which excludes unified mode."""
    if "texmode_unified" in module.target and "texmode_independent" in module.target:
        _fail("Conflicting .target options texmode_unified and texmode_independent",
              ast.Pos(module.header_lines.get("target", 0), 1))
    independent = "texmode_independent" in module.target
    for item in module.items:
        decls = [item] if isinstance(item, ast.VarDecl) else list(item.params) + list(item.returns)
        for d in decls:
            if d.type.name not in _OPAQUE:
                continue
            if isinstance(item, ast.Function) and (item.kind != "entry" or d in item.returns):
                _fail(f".{d.type.name} {d.name}: only a kernel's parameters may be texture, sampler or surface "
                      "references", d.pos)
            if isinstance(item, ast.VarDecl) and d.space != "global":
                _fail(f".{d.type.name} {d.name}: texture, sampler and surface variables are declared in .global "
                      "space", d.pos)
            if d.type.name == "samplerref" and not independent:
                _fail(f".samplerref {d.name}: samplers apart from textures need .target texmode_independent",
                      d.pos)


def _fail(msg, pos):
    raise PTXSemanticError(msg, pos.line, pos.col)


def _instr_type(mods):
    """The last modifier that names a type: `cvt.rn.f32.s32` -> 'f32'... callers handle cvt separately."""
    for m in reversed(mods):
        if m in _TYPE_BITS:
            return m
    return None


class _Scope:
    __slots__ = ("parent", "regs", "reg_ranges", "symbols", "labels", "protos", "resolved")

    def __init__(self, parent):
        self.parent = parent
        self.regs = {}        # name -> ast.Type
        self.reg_ranges = {}  # prefix -> (count, ast.Type) from %r<N>
        self.symbols = {}     # name -> kind ('var', 'targets', 'calltargets', 'proto')
        self.labels = set()
        self.protos = {}      # call prototype name -> (returns, params) counts
        # register name -> what resolve_reg found, from here outwards; a declaration here forgets it (an
        # enclosing scope gains none while this one is being checked)
        self.resolved = {}


class _Checker:
    def __init__(self, module):
        self.module = module
        self.globals = {}     # module-level name -> 'var' | 'func'
        # name -> ([module item index], [(returns, params) counts]) of each declaration and definition.
        # A call is checked against the one in force where the caller stands: a linked module (cuLink,
        # -rdc) keeps each input's `.extern .func` prototype, and like NVIDIA's linker, which resolves
        # by name only, we accept a prototype that disagrees with the definition in another input (numba
        # declares a C `void` function as returning a .b64); within one input a call must match.
        self.fn_sigs = {}
        self.item_index = 0
        self.mods_ok = set()  # (opcode, modifiers) that passed isa.check_modifiers: it looks at nothing else

    def run(self):
        isa.check_header(self.module)
        defined = set()
        for k, item in enumerate(self.module.items):
            if isinstance(item, ast.Function):
                if item.body is not None:
                    if item.name in defined:
                        _fail(f"function '{item.name}' is defined twice", item.pos)
                    defined.add(item.name)
                self.globals[item.name] = "func"
                at, sigs = self.fn_sigs.setdefault(item.name, ([], []))
                at.append(k)
                sigs.append((len(item.returns), len(item.params)))
            elif isinstance(item, ast.VarDecl):
                self.globals[item.name] = "var"
        _check_opaque(self.module)
        self.opaque_globals = {i.name: i.type.name for i in self.module.items
                               if isinstance(i, ast.VarDecl) and i.type.name in _OPAQUE}
        for item in self.module.items:
            if isinstance(item, ast.VarDecl) and item.type.name not in _OPAQUE:
                self.check_init(item, item.init)
        for k, item in enumerate(self.module.items):
            if isinstance(item, ast.Function) and item.body is not None:
                self.item_index = k
                self.check_function(item)
                if item.kind == "entry":
                    isa.check_params(item, self.module)

    def signature_at(self, name):
        """(returns, params) of the declaration of `name` in force at the function being checked: the
        last one before it (its own, for recursion), else the first (PTX lets a definition come later)."""
        entry = self.fn_sigs.get(name)
        if entry is None:
            return None
        at, sigs = entry
        i = bisect.bisect_right(at, self.item_index) - 1
        return sigs[max(i, 0)]

    def check_init(self, decl, init):
        if not init:
            return
        for v in init:
            if isinstance(v, list):
                self.check_init(decl, v)
            elif isinstance(v, ast.SymbolExpr) and v.name not in self.globals:
                _fail(f"undefined symbol '{v.name}' in the initialiser of '{decl.name}'", v.pos)

    # ------------------------------------------------------------ scopes

    def declare(self, scope, decl):
        if decl.space == "reg":
            scope.resolved.clear()
            if decl.count is not None:
                scope.reg_ranges[decl.name] = (decl.count, decl.type)
            else:
                scope.regs[decl.name] = decl.type
        else:
            scope.symbols[decl.name] = "var"

    def reg_type(self, scope, name):
        """The declared type of a register, or None when it is undeclared."""
        s = scope
        m = None
        while s is not None:
            t = s.regs.get(name)
            if t is not None:
                return t
            if s.reg_ranges:
                if m is None:
                    m = _TRAILING_NUM.match(name) or False
                if m:
                    r = s.reg_ranges.get(m.group(1))
                    if r is not None and int(m.group(2)) < r[0]:
                        return r[1]
            s = s.parent
        return None

    def resolve_reg(self, scope, reg):
        """Type of a register operand; 'special' for special registers; raises if undefined."""
        name = reg.name
        t = scope.resolved.get(name)
        if t is not None:
            return t
        t = self.reg_type(scope, name)
        if t is None:
            if _SPECIAL_RE.match(name):
                t = "special"
            else:
                m = _VEC_COMPONENT.match(name)
                vt = self.reg_type(scope, m.group(1)) if m else None
                if vt is None or vt.vec <= 1:
                    _fail(f"undefined register '{name}'", reg.pos)
                t = ast.Type(vt.name)
        scope.resolved[name] = t
        return t

    def has_label(self, scope, name):
        s = scope
        while s is not None:
            if name in s.labels:
                return True
            s = s.parent
        return False

    def symbol_kind(self, scope, name):
        s = scope
        while s is not None:
            k = s.symbols.get(name)
            if k is not None:
                return k
            if name in s.labels:
                return "label"
            s = s.parent
        return self.globals.get(name)

    # ------------------------------------------------------------ functions

    def check_function(self, fn):
        self.opaque = dict(self.opaque_globals)
        self.opaque.update({p.name: p.type.name for p in fn.params if p.type.name in _OPAQUE})
        scope = _Scope(None)
        for p in list(fn.params) + list(fn.returns):
            self.declare(scope, p)
        self.check_block(fn.body, scope)

    def check_block(self, body, scope):
        for st in body:
            if isinstance(st, ast.VarDecl) and st.type.name in _OPAQUE:
                _fail(f".{st.type.name} {st.name}: texture, sampler and surface variables are declared at module "
                      "scope or as kernel parameters", st.pos)
            if isinstance(st, ast.Label):
                if st.name in scope.labels:
                    _fail(f"duplicate label '{st.name}'", st.pos)
                scope.labels.add(st.name)
            elif isinstance(st, (ast.BranchTargets, ast.CallPrototype)):
                if st.name in scope.labels or st.name in scope.symbols:
                    _fail(f"duplicate label '{st.name}'", st.pos)
        for st in body:
            if isinstance(st, ast.Instruction):
                if st.opcode in _TEXTURE_OPS:
                    self.check_texturing(st, scope)
                elif self.opaque and st.opcode in _MEMORY_OPS:
                    for op in st.operands:
                        if isinstance(op, ast.Address) and op.base in self.opaque:
                            _fail(f"Illegal operand type to instruction '{st.opcode}': {op.base} is a texture, "
                                  "sampler or surface reference", st.pos)
                self.check_instruction(st, scope)
            elif isinstance(st, ast.VarDecl):
                self.declare(scope, st)
            elif isinstance(st, ast.Block):
                self.check_block(st.body, _Scope(scope))
            elif isinstance(st, ast.BranchTargets):
                for lab in st.labels:
                    if st.is_call:
                        if self.globals.get(lab) != "func":
                            _fail(f"call target '{lab}' is not a function", st.pos)
                    elif not self.has_label(scope, lab):
                        _fail(f"branch target '{lab}' is not a label", st.pos)
                scope.symbols[st.name] = "calltargets" if st.is_call else "targets"
            elif isinstance(st, ast.CallPrototype):
                scope.symbols[st.name] = "proto"
                scope.protos[st.name] = (len(st.returns), len(st.params))

    # ------------------------------------------------------------ instructions

    def check_texturing(self, ins, scope):
        """Which reference kinds tex/tld4/txq/suld/sust/suq take, and the texturing mode's operand forms (as
        ptxas answers: a module that breaks them does not load)."""
        addr = next((o for o in ins.operands if isinstance(o, ast.Address)), None)
        if addr is None or addr.base is None:
            return
        independent = "texmode_independent" in self.module.target

        def kind_of(name):
            t = None if name is None else self.reg_type(scope, name)
            if t is not None or (name or "").startswith("%"):
                if t is not None and _TYPE_BITS.get(t.name) != 64:
                    _fail(f"Arguments mismatch for instruction '{ins.opcode}': the handle {name} is not a "
                          ".u64 register", ins.pos)
                return None         # a register: a handle of any kind
            return self.opaque.get(name, "other")

        def want(name, kinds):
            k = kind_of(name)
            if k is not None and k not in kinds:
                _fail(f"operand {name} of '{ins.opcode}': a {' or '.join('.' + x for x in kinds)} or a .u64 register "
                      "expected", ins.pos)
        op = ins.opcode
        if op in ("tex", "tld4"):
            sampled = len(addr.extra) > 1
            if independent and not sampled:
                _fail(f"'{op}' takes [texture, sampler, coordinates] in independent texturing mode", ins.pos)
            want(addr.base, ("texref",))
            if sampled:         # unified mode's sampler is a texture's (ptxas takes a .texref or a register)
                s = addr.extra[0]
                want(s.name if isinstance(s, (ast.Reg, ast.SymbolExpr)) else None,
                     ("samplerref",) if independent else ("texref",))
        elif op == "txq":
            sampler_query = any(m in _SAMPLER_QUERIES for m in ins.mods)
            if "force_unnormalized_coords" in ins.mods and not independent:
                _fail("txq.force_unnormalized_coords queries a .samplerref (independent texturing mode)", ins.pos)
            want(addr.base, ("samplerref",) if sampler_query and independent else ("texref",))
        else:
            want(addr.base, ("surfref",))

    def check_instruction(self, ins, scope):
        op = ins.opcode
        ops = ins.operands
        counts = _COUNTS.get(op)
        if counts is not None and not (counts[0] <= len(ops) <= counts[1]):
            if counts[0] == counts[1]:
                want = f"{counts[0]}"
            else:
                want = f"{counts[0]} to {counts[1]}"
            _fail(f"'{op}' takes {want} operands, not {len(ops)}", ins.pos)
        if ins.guard is not None:
            gname = ins.guard[0]
            gt = scope.resolved.get(gname) or self.resolve_reg(scope, ast.Reg(gname, ins.pos))
            if gt == "special" or gt.name != "pred":
                _fail(f"guard '{gname}' is not a .pred register", ins.pos)
        key = (op, ins.mods)
        if key not in self.mods_ok:
            isa.check_modifiers(ins, self.module)
            self.mods_ok.add(key)
        types = []
        resolved = scope.resolved
        for o in ops:
            # a register met before in this scope: its type without the walk (most operands)
            t = resolved.get(o.name) if type(o) is ast.Reg else None
            types.append(t if t is not None else self.operand_type(o, scope, ins))
        if op in ("ld", "st", "atom", "red", "ldu", "prefetch"):
            for o in ops:
                if isinstance(o, ast.Address) and o.base is not None and o.base.startswith("%"):
                    isa.check_address_width(ins, self.module, self.reg_type(scope, o.base))
        if op == "bra":
            self.check_branch_target(ops[0], scope)
        elif op == "brx":
            t = ops[1]
            if not isinstance(t, ast.SymbolExpr) or self.symbol_kind(scope, t.name) != "targets":
                _fail("brx.idx needs a .branchtargets list as its second operand", t.pos)
        elif op == "call":
            self.check_call(ins, scope)
        self.check_types(ins, types, scope)
        isa.check_operand_kinds(ins, types)

    def check_branch_target(self, target, scope):
        if not isinstance(target, ast.SymbolExpr):
            _fail("a branch target must be a label", target.pos)
        if not self.has_label(scope, target.name):
            _fail(f"branch to undefined label '{target.name}'", target.pos)

    def check_call(self, ins, scope):
        ops = ins.operands
        if not ops:
            _fail("call needs a target", ins.pos)
        i = 1 if isinstance(ops[0], ast.ParenList) else 0
        if i >= len(ops):
            _fail("call needs a target", ins.pos)
        target = ops[i]
        if isinstance(target, ast.SymbolExpr):
            if self.symbol_kind(scope, target.name) != "func":
                _fail(f"call target '{target.name}' is not a function", target.pos)
            sig = self.signature_at(target.name)
        elif isinstance(target, ast.Reg):
            sig = None
            if i + 2 < len(ops) and isinstance(ops[-1], ast.SymbolExpr):
                sig = self.prototype(scope, ops[-1].name)
        else:
            _fail("call target must be a function or a register", target.pos)
        if sig is None:
            return
        nret = len(ops[0].items) if i == 1 else 0
        args = ops[i + 1] if i + 1 < len(ops) and isinstance(ops[i + 1], ast.ParenList) else None
        nargs = len(args.items) if args is not None else 0
        if nret > sig[0]:
            _fail(f"call takes {nret} return values, the callee returns {sig[0]}", ops[0].pos)
        if nargs != sig[1]:
            _fail(f"call passes {nargs} arguments, the callee takes {sig[1]}", (args or target).pos)

    def prototype(self, scope, name):
        s = scope
        while s is not None:
            p = s.protos.get(name)
            if p is not None:
                return p
            s = s.parent
        return None

    def operand_type(self, o, scope, ins):
        """Resolve names inside an operand (raising on undefined ones); return a register's Type for a
        plain register operand, 'special' for special registers, None for anything else."""
        if isinstance(o, ast.Reg):      # a video selector (`%r1.b0`) is already split off by ast.Instruction
            return self.resolve_reg(scope, o)
        if isinstance(o, ast.SymbolExpr):
            if ins.opcode in ("bra",) or self.symbol_kind(scope, o.name) is not None:
                return None
            _fail(f"undefined symbol '{o.name}'", o.pos)
        if isinstance(o, ast.Address):
            if o.base is not None:
                if o.base.startswith("%") or self.reg_type(scope, o.base) is not None:
                    self.resolve_reg(scope, ast.Reg(o.base, o.pos))
                elif self.symbol_kind(scope, o.base) is None:
                    _fail(f"undefined symbol '{o.base}' in address", o.pos)
            for e in o.extra:
                self.operand_type(e, scope, ins)
            return None
        if isinstance(o, ast.Vector):
            for e in o.elems:
                self.operand_type(e, scope, ins)
            return None
        if isinstance(o, ast.Negated):
            t = self.resolve_reg(scope, o.operand)
            if t == "special" or t.name != "pred":
                _fail(f"'!' needs a .pred register, '{o.operand.name}' is not one", o.pos)
            return None
        if isinstance(o, ast.PredPair):
            for e in (o.first, o.second):
                if isinstance(e, ast.Reg):
                    self.resolve_reg(scope, e)
            return None
        if isinstance(o, ast.ParenList):
            for e in o.items:
                self.operand_type(e, scope, ins)
            return None
        return None

    def check_types(self, ins, types, scope):
        op = ins.opcode
        ops = ins.operands

        def is_pred(t):
            return isinstance(t, ast.Type) and t.name == "pred" and t.vec == 1

        if op in ("setp", "set") and ops:
            first = ops[0]
            if op == "setp":
                dests = [first.first, first.second] if isinstance(first, ast.PredPair) else [first]
                for d in dests:
                    if isinstance(d, ast.Reg):
                        if not is_pred(self.resolve_reg(scope, d)):
                            _fail(f"setp destination '{d.name}' is not a .pred register", d.pos)
                    elif not isinstance(d, ast.Sink):
                        _fail("setp destination must be a predicate register", d.pos)
            for k in (1, 2):
                if k < len(ops) and is_pred(types[k]):
                    _fail(f"'{ops[k].name}' is a .pred register; {op} compares values", ops[k].pos)
            if len(ops) == 4 and not (is_pred(types[3]) or isinstance(ops[3], ast.Negated)):
                _fail(f"the last operand of {op} with a boolean op must be a predicate", ops[3].pos)
            return
        if op == "selp" and len(ops) == 4:
            if not (is_pred(types[3]) or isinstance(ops[3], ast.Negated)):
                _fail("the selector of selp must be a .pred register", ops[3].pos)
            for k in range(3):
                if is_pred(types[k]):
                    _fail(f"'{ops[k].name}' is a .pred register; selp selects values", ops[k].pos)
            return
        if op not in _VALUE_OPS:
            return
        itype = ins.mods[-1] if ins.mods else None
        pred_type = itype == "pred"
        for o, t in zip(ops, types):
            if isinstance(t, ast.Type):
                if is_pred(t) and not pred_type and op not in ("ld", "st", "atom", "red", "ldu"):
                    _fail(f"'{o.name}' is a .pred register, but {op}.{'.'.join(ins.mods)} needs a "
                          f"{itype} value", o.pos)
                if pred_type and not is_pred(t):
                    _fail(f"'{o.name}' is not a .pred register", o.pos)
        if op in ("ld", "st", "ldu") and "pred" not in ins.mods:
            for o, t in zip(ops, types):
                if is_pred(t):
                    _fail(f"'{o.name}' is a .pred register; {op} moves values", o.pos)
        if op in _SAME_WIDTH and itype in _TYPE_BITS and not pred_type:
            self.check_widths(ins, types, _TYPE_BITS[itype])

    def check_widths(self, ins, types, bits):
        op = ins.opcode
        mods = ins.mods
        wide = "wide" in mods
        for k, (o, t) in enumerate(zip(ins.operands, types)):
            if not isinstance(t, ast.Type) or t.vec != 1:
                continue
            have = _TYPE_BITS.get(t.name)
            if have is None:
                continue
            want = bits
            if wide and (k == 0 or (op == "mad" and k == 3)):
                want = bits * 2
            if op in ("shl", "shr") and k == 2:
                want = 32
            if have != want:
                _fail(f"'{o.name}' is a {have}-bit register, but operand {k + 1} of "
                      f"{op}.{'.'.join(mods)} is {want}-bit", o.pos)
