"""PTX parser: recursive descent over the lexer's tokens, producing the tree of `ptx.ast`.

Conventions the code generators can rely on:
- `Instruction.opcode` is the word before the first dot; every further dotted word is a modifier, kept in
  order (`bar.warp.sync` -> 'bar', ('warp', 'sync'); `cp.async.ca.shared.global` -> 'cp', ('async', ...)).
  `Instruction.pos` is the opcode's position.
- A name used as an operand is a `Reg` when it starts with `%` or is declared `.reg` in an enclosing scope
  (inline-asm blocks declare plain names such as `c`); any other name (a variable of another state space,
  a function, a label, a call prototype) is a `SymbolExpr`.
- `.file`, `.loc`, `.section` blocks, `@@DWARF` lines and module-level `.pragma` are dropped.
- `.calltargets` lists are returned as `BranchTargets` with is_call=True.
- The predefined constant `WARP_SZ` becomes `Imm(32)`.
Every failure is a `PTXError` subclass carrying line and column; nothing else escapes `parse`.
"""

from __future__ import annotations

import gc
import re

from ptx import ast
from ptx.errors import PTXError, PTXSyntaxError, PTXUnsupportedError
from ptx.lexer import WORD, DIR, INT, FLOAT, STR, PUNCT, ERR, EOF, INSN, OPERAND, VECTOR_REG, tokenize, \
    describe, int_literal, float_bits
from ptx.opcodes import OPCODES

SCALAR_TYPES = frozenset("""
s8 s16 s32 s64 u8 u16 u32 u64 b8 b16 b32 b64 b128 f16 f16x2 f32 f32x2 f64 bf16 bf16x2 tf32 pred
e4m3 e5m2 e4m3x2 e5m2x2 e2m1x2 e2m3x2 e3m2x2 ue8m0x2 s2f6x2 e2m1 e2m3 e3m2 ue8m0
texref samplerref surfref
""".split())
OPAQUE_TYPES = frozenset(("texref", "samplerref", "surfref"))
STATE_SPACES = frozenset(("reg", "sreg", "const", "global", "local", "param", "shared", "tex"))
LINKAGES = frozenset(("visible", "extern", "weak", "common"))
# Function performance directives whose operands are a list of integers.
_INT_DIRECTIVES = frozenset(("maxntid", "reqntid", "minnctapersm", "maxnreg", "maxclusterrank",
                             "reqnctapercluster", "abi_preserve", "abi_preserve_control"))
_DIM3_DIRECTIVES = frozenset(("maxntid", "reqntid", "reqnctapercluster"))
_FLAG_DIRECTIVES = frozenset(("noreturn", "explicitcluster", "blocksareclusters"))
_MAX_NESTING = 200


def parse(text: str, check: bool = True, whole_lines: bool = True) -> ast.Module:
    """Parse PTX source into an `ast.Module` and (unless check=False) run the semantic checks of
    `ptx.check`; raises only `PTXError` subclasses. whole_lines=False: every line token by token (the
    same tree, slower; tests compare the two)."""
    if not isinstance(text, str):
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        else:
            raise PTXSyntaxError(f"PTX source must be text, not {type(text).__name__}")
    if text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark some editors add is not part of the module
    # The tree is acyclic and allocation-heavy: cyclic GC passes over it only cost time.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        toks = tokenize(text, whole_lines)
        try:
            module = _module(toks)
        except PTXError:
            if not any(t[0] == INSN for t in toks):
                raise
            # A whole-line instruction token met where no statement may be: the text is invalid, and the
            # token path names the error as it always has (a valid text parses the same either way).
            module = _module(tokenize(text, whole_lines=False))
    except PTXError:
        if check:
            _version_first(text)
        raise
    finally:
        # Straight into the oldest generation: left young, the tree would be scanned by the next two
        # collections and then trigger a full one (a third of a lazy load's time on a large module).
        gc.freeze()
        gc.unfreeze()
        if gc_was_enabled:
            gc.enable()
    module.source = text
    if check:
        from ptx.check import check as run_checks
        run_checks(module)
    return module


def _module(toks) -> ast.Module:
    parser = Parser(toks)
    try:
        return parser.module()
    except PTXError:
        raise
    except RecursionError:
        line, col = parser.here()
        raise PTXSyntaxError("nesting too deep", line, col) from None
    except Exception as exc:  # a parser bug must still surface as our error type, never a crash
        line, col = parser.here()
        raise PTXSyntaxError(f"internal parser error ({type(exc).__name__}: {exc})", line, col) from None


_VERSION_RE = re.compile(r"^[ \t]*\.version[ \t]+([0-9]+)\.([0-9]+)", re.M)


def _version_first(text: str) -> None:
    """ptxas reads .version before anything else: a module of an unsupported ISA fails for that, whatever
    else in it does not parse."""
    m = _VERSION_RE.search(text)
    if m:
        from ptx.isa import check_version
        check_version((int(m.group(1)), int(m.group(2))), text.count("\n", 0, m.start()) + 1)


class Parser:
    """One pass over a token list (ending in EOF); `module()` returns the tree."""

    def __init__(self, toks):
        self.toks = toks
        self.i = 0
        self.reg_scopes = []      # sets of non-% names declared .reg, innermost last
        self.depth = 0

    # ------------------------------------------------------------ token helpers

    def here(self):
        t = self.toks[min(self.i, len(self.toks) - 1)]
        return t[3], t[4]

    def peek(self, k=0):
        j = self.i + k
        toks = self.toks
        return toks[j] if j < len(toks) else toks[-1]

    def next(self):
        t = self.toks[self.i]
        if t[0] != EOF:
            self.i += 1
        return t

    def error(self, msg, tok=None, cls=PTXSyntaxError):
        tok = tok if tok is not None else self.peek()
        if tok[0] == ERR:
            msg = f"invalid character {tok[1]!r}"
        return cls(msg, tok[3], tok[4])

    def expect_punct(self, ch):
        t = self.toks[self.i]
        if t[0] == PUNCT and t[1] == ch:
            self.i += 1
            return t
        raise self.error(f"expected '{ch}' but found {describe(t)}", t)

    def accept_punct(self, ch):
        t = self.toks[self.i]
        if t[0] == PUNCT and t[1] == ch:
            self.i += 1
            return True
        return False

    def is_punct(self, ch, k=0):
        t = self.peek(k)
        return t[0] == PUNCT and t[1] == ch

    def expect_int(self, what="integer"):
        t = self.toks[self.i]
        neg = False
        if t[0] == PUNCT and t[1] == "-":
            neg = True
            self.i += 1
            t = self.toks[self.i]
        if t[0] != INT:
            raise self.error(f"expected {what} but found {describe(t)}", t)
        self.i += 1
        return -t[2] if neg else t[2]

    def expect_name(self, what="a name"):
        t = self.toks[self.i]
        if t[0] != WORD:
            raise self.error(f"expected {what} but found {describe(t)}", t)
        self.i += 1
        return t

    def enter(self):
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise self.error("nesting too deep")

    def is_reg_name(self, name):
        if name[0] == "%":
            return True
        for scope in reversed(self.reg_scopes):
            if name in scope:
                return True
        return False

    # ------------------------------------------------------------ module level

    def module(self) -> ast.Module:
        version = None
        target = []
        address_size = 64
        items = []
        lines = {}
        while True:
            t = self.peek()
            kind, text = t[0], t[1]
            if kind == EOF:
                break
            if kind == DIR:
                d = text[1:]
                if d == "version":
                    lines.setdefault("version", t[3])
                    self.next()
                    version = self.version_number()
                    continue
                if d == "target":
                    lines.setdefault("target", t[3])
                    self.next()
                    target.append(self.expect_name("a target name")[1])
                    while self.accept_punct(","):
                        target.append(self.expect_name("a target name")[1])
                    continue
                if d == "address_size":
                    lines.setdefault("address_size", t[3])
                    self.next()
                    address_size = self.expect_int("an address size")
                    if address_size not in (32, 64):
                        raise self.error(f"address size must be 32 or 64, not {address_size}", t)
                    continue
                if d in ("file", "loc"):
                    self.skip_line(t)
                    continue
                if d == "section":
                    self.skip_section()
                    continue
                if d == "pragma":
                    self.next()
                    self.pragma_text()
                    continue
                if d == "alias":
                    raise self.error(".alias is not supported", t, PTXUnsupportedError)
                if version is None:
                    raise self.error("PTX module must start with .version", t)
                items.extend(self.top_level_item())
                continue
            if kind == PUNCT and text == ";":
                self.next()
                continue
            raise self.error(f"expected a directive but found {describe(t)}", t)
        if version is None:
            raise self.error("PTX module must start with .version")
        if not target:
            raise self.error("PTX module has no .target directive")
        return ast.Module(version=version, target=target, address_size=address_size, items=items,
                          header_lines=lines)

    def version_number(self):
        t = self.next()
        if t[0] == FLOAT and t[2][1] == 0 and "." in t[1] and "e" not in t[1].lower():
            major, minor = t[1].split(".")
            if major and minor:
                return int(major), int(minor)
        raise self.error(f"expected a version number like 8.5 but found {describe(t)}", t)

    def skip_line(self, start_tok):
        """Drop a directive that ends with its line (`.loc 1 5 3, function_name ...`, `.file 1 "a.cu"`)."""
        self.next()
        line = start_tok[3]
        toks = self.toks
        while toks[self.i][0] != EOF and toks[self.i][3] == line:
            self.i += 1

    def skip_section(self):
        t = self.next()
        # `.section .debug_info { ... }`: content is opaque DWARF we do not use.
        while True:
            u = self.peek()
            if u[0] == EOF:
                raise self.error("unterminated .section", t)
            if u[0] == PUNCT and u[1] == "{":
                break
            self.next()
        depth = 0
        while True:
            u = self.next()
            if u[0] == EOF:
                raise self.error("unterminated .section", t)
            if u[0] == PUNCT:
                if u[1] == "{":
                    depth += 1
                elif u[1] == "}":
                    depth -= 1
                    if depth == 0:
                        return

    def pragma_text(self):
        t = self.next()
        if t[0] != STR:
            raise self.error(f"expected a string after .pragma but found {describe(t)}", t)
        texts = [t[2]]
        while self.accept_punct(","):
            u = self.next()
            if u[0] != STR:
                raise self.error(f"expected a string but found {describe(u)}", u)
            texts.append(u[2])
        self.expect_punct(";")
        return ", ".join(texts)

    def top_level_item(self):
        start = self.peek()
        linkage = None
        while True:
            t = self.peek()
            if t[0] == DIR and t[1][1:] in LINKAGES:
                if linkage is not None:
                    raise self.error("more than one linkage directive", t)
                linkage = t[1][1:]
                self.next()
                continue
            break
        t = self.peek()
        if t[0] == DIR and t[1] in (".entry", ".func"):
            return [self.function(linkage, start)]
        if t[0] == DIR and t[1][1:] in STATE_SPACES:
            decls = self.var_decl(linkage, start)
            self.expect_punct(";")
            return decls
        raise self.error(f"expected .entry, .func or a variable declaration but found {describe(t)}", t)

    # ------------------------------------------------------------ functions

    def function(self, linkage, start) -> ast.Function:
        kind_tok = self.next()
        kind = kind_tok[1][1:]
        returns = []
        if kind == "func" and self.is_punct("("):
            returns = self.param_list()
        name_tok = self.expect_name("a function name")
        name = name_tok[1]
        if "." in name or name[0] == "%":
            raise self.error(f"invalid function name {name!r}", name_tok)
        params = []
        if self.is_punct("("):
            params = self.param_list()
        directives = {}
        while True:
            t = self.peek()
            if t[0] != DIR:
                break
            d = t[1][1:]
            if d in _INT_DIRECTIVES:
                self.next()
                values = [self.expect_int(f"an integer after .{d}")]
                while self.accept_punct(","):
                    values.append(self.expect_int(f"an integer after .{d}"))
                if d in _DIM3_DIRECTIVES:
                    if len(values) > 3:
                        raise self.error(f".{d} takes at most 3 values", t)
                    directives[d] = tuple(values + [1] * (3 - len(values)))
                else:
                    if len(values) != 1:
                        raise self.error(f".{d} takes one value", t)
                    directives[d] = values[0]
            elif d in _FLAG_DIRECTIVES:
                self.next()
                directives[d] = True
            elif d == "pragma":
                self.next()
                directives.setdefault("pragma", []).append(self.pragma_text())
            elif d in ("loc", "file"):
                self.skip_line(t)
            else:
                raise self.error(f"unexpected directive {t[1]} in function header", t)
        body = None
        end = None
        pos = ast.Pos(start[3], start[4])
        if self.accept_punct(";"):
            pass
        elif self.is_punct("{"):
            self.reg_scopes.append({p.name for p in params + returns if p.space == "reg"})
            try:
                body = self.block_body()
                close = self.toks[self.i - 1]
                end = ast.Pos(close[3], close[4])
            finally:
                self.reg_scopes.pop()
        else:
            raise self.error(f"expected '{{' or ';' after function header but found {describe(self.peek())}")
        return ast.Function(name=name, kind=kind, params=params, returns=returns, body=body,
                            linkage=linkage, directives=directives, pos=pos, end=end)

    def param_list(self):
        self.expect_punct("(")
        params = []
        if self.accept_punct(")"):
            return params
        while True:
            t = self.peek()
            if not (t[0] == DIR and t[1] in (".param", ".reg")):
                raise self.error(f"expected .param or .reg but found {describe(t)}", t)
            params.extend(self.var_decl(None, t, allow_sink=True, single=True))
            if self.accept_punct(")"):
                return params
            self.expect_punct(",")

    # ------------------------------------------------------------ declarations

    def var_decl(self, linkage, start, allow_sink=False, single=False):
        """`.space [attributes] [.align N] [.vN] .type name[<N>][dims] [= init] {, name ...}`.
        The state-space token is next. Returns a list of VarDecl."""
        space_tok = self.next()
        space = space_tok[1][1:]
        align = None
        vec = 1
        tname = None
        attributes = []
        ptr = False
        ptr_space = None
        ptr_align = None
        while True:
            t = self.peek()
            if t[0] != DIR:
                break
            d = t[1][1:]
            if d == "align":
                self.next()
                value = self.expect_int("an alignment")
                if value <= 0 or value & (value - 1):
                    raise self.error(f"alignment must be a power of two, not {value}", t)
                if ptr:
                    ptr_align = value
                else:
                    align = value
            elif d in ("v2", "v4", "v8"):
                self.next()
                vec = int(d[1:])
            elif ptr and d in OPAQUE_TYPES:
                self.next()         # `.param .u64 .ptr .texref t` (LLVM's image parameters): a handle
                ptr_space = d
            elif d in SCALAR_TYPES:
                if tname is not None:
                    raise self.error(f"more than one type in declaration ({t[1]})", t)
                self.next()
                tname = d
            elif d == "ptr":
                self.next()
                ptr = True
            elif ptr and d in ("global", "shared", "const", "local"):
                self.next()
                ptr_space = d
            elif d == "attribute":
                self.next()
                self.expect_punct("(")
                while True:
                    a = self.next()
                    if a[0] != DIR:
                        raise self.error(f"expected an attribute like .managed but found {describe(a)}", a)
                    attributes.append(a[1][1:])
                    if not self.accept_punct(","):
                        break
                self.expect_punct(")")
            else:
                break
        if tname is None:
            raise self.error(f"expected a type in the {space_tok[1]} declaration but found {describe(self.peek())}")
        vtype = ast.Type(tname, vec)
        decls = []
        while True:
            name_tok = self.peek()
            if name_tok[0] != WORD:
                raise self.error(f"expected a variable name but found {describe(name_tok)}", name_tok)
            self.next()
            name = name_tok[1]
            if "." in name:
                raise self.error(f"invalid variable name {name!r}", name_tok)
            if name == "_" and not allow_sink:
                raise self.error("'_' cannot name a variable", name_tok)
            count = None
            dims = []
            if self.accept_punct("<"):
                count = self.expect_int("a register count")
                if count < 0:
                    raise self.error("register count must be positive", name_tok)
                self.expect_punct(">")
            while self.accept_punct("["):
                if self.accept_punct("]"):
                    dims.append(0)
                    continue
                n = self.expect_int("an array size")
                if n <= 0:
                    raise self.error(f"array size must be positive, not {n}", name_tok)
                dims.append(n)
                self.expect_punct("]")
            init = None
            if self.accept_punct("="):
                if space not in ("global", "const"):
                    raise self.error(f"a .{space} variable cannot have an initialiser", name_tok)
                init = self.opaque_initializer() if tname in OPAQUE_TYPES else self.initializer()
            decls.append(ast.VarDecl(space=space, type=vtype, name=name, count=count, dims=dims, align=align,
                                     init=init, linkage=linkage, attributes=list(attributes),
                                     ptr_space=ptr_space, ptr_align=ptr_align,
                                     pos=ast.Pos(name_tok[3], name_tok[4])))
            if space == "reg" and name[0] != "%" and self.reg_scopes:
                self.reg_scopes[-1].add(name)
            if single or not self.is_punct(","):
                break
            self.next()
        return decls

    def initializer(self):
        """`= value` -> [value]; `= {...}` -> a list whose items are scalars or nested lists."""
        v = self.init_value()
        return v if isinstance(v, list) else [v]

    def opaque_initializer(self):
        """`{ filter_mode = linear, addr_mode_0 = wrap, force_unnormalized_coords = 1 }` -> [FieldInit]."""
        self.expect_punct("{")
        items = []
        if self.accept_punct("}"):
            return items
        while True:
            name = self.expect_name("a member name")
            self.expect_punct("=")
            t = self.peek()
            if t[0] == WORD:
                self.next()
                value = t[1]
            else:
                value = self.expect_int("a member value")
            items.append(ast.FieldInit(name[1], value, ast.Pos(name[3], name[4])))
            if self.accept_punct("}"):
                return items
            self.expect_punct(",")

    def init_value(self):
        t = self.peek()
        if t[0] == PUNCT and t[1] == "{":
            self.enter()
            self.next()
            items = []
            if not self.accept_punct("}"):
                while True:
                    items.append(self.init_value())
                    if self.accept_punct("}"):
                        break
                    self.expect_punct(",")
            self.depth -= 1
            return items
        return self.init_scalar()

    def init_scalar(self):
        t = self.peek()
        pos = ast.Pos(t[3], t[4])
        if t[0] == WORD:
            self.next()
            if t[1] == "generic" and self.is_punct("("):
                self.next()
                sym = self.expect_name("a symbol")
                self.expect_punct(")")
                return ast.SymbolExpr(sym[1], self.symbol_offset(), pos, generic=True)
            return ast.SymbolExpr(t[1], self.symbol_offset(), pos)
        if t[0] == INT and self.is_punct("(", 1):
            # `0xFF00(generic(sym)+4)`: one byte of a pointer inside a packed byte array
            mask = t[2]
            if mask == 0:
                raise self.error("an initialiser mask must not be zero", t)
            self.i += 2
            inner = self.init_scalar()
            if not isinstance(inner, ast.SymbolExpr):
                raise self.error("a mask initialiser needs a symbol inside", t)
            self.expect_punct(")")
            inner.mask = mask
            inner.pos = pos
            return inner
        return self.number()

    def symbol_offset(self):
        off = 0
        while True:
            t = self.peek()
            if t[0] == PUNCT and (t[1] == "+" or t[1] == "-"):
                self.next()
                v = self.expect_int(f"an integer offset after '{t[1]}'")
                off += v if t[1] == "+" else -v
                continue
            return off

    def number(self):
        """An integer or float literal, optionally negated."""
        t = self.next()
        pos = ast.Pos(t[3], t[4])
        neg = False
        if t[0] == PUNCT and t[1] == "-":
            neg = True
            t = self.next()
        if t[0] == INT:
            return ast.Imm(-t[2] if neg else t[2], pos)
        if t[0] == FLOAT:
            value, bits, raw = t[2]
            if neg:
                value = -value
                if bits:
                    raw ^= 1 << (bits - 1)
            return ast.FloatImm(value, bits, raw, pos)
        raise self.error(f"expected a number but found {describe(t)}", t)

    # ------------------------------------------------------------ bodies

    def block_body(self):
        """`{ statements }` -> list of statements; the '{' is next."""
        open_tok = self.expect_punct("{")
        self.enter()
        body = []
        toks = self.toks
        while True:
            t = toks[self.i]
            kind = t[0]
            if kind == INSN:
                self.i += 1
                body.append(self.plain_instruction(t))
                continue
            if kind == PUNCT:
                p = t[1]
                if p == "}":
                    self.i += 1
                    self.depth -= 1
                    return body
                if p == "{":
                    self.reg_scopes.append(set())
                    try:
                        inner = self.block_body()
                    finally:
                        self.reg_scopes.pop()
                    body.append(ast.Block(inner, ast.Pos(t[3], t[4])))
                    continue
                if p == ";":
                    self.i += 1
                    continue
                if p == "@":
                    body.append(self.instruction())
                    continue
                raise self.error(f"expected a statement but found {describe(t)}", t)
            if kind == WORD:
                n = toks[self.i + 1]
                if n[0] == PUNCT and n[1] == ":":
                    body.append(self.labelled(t))
                    continue
                body.append(self.instruction())
                continue
            if kind == DIR:
                d = t[1][1:]
                if d in STATE_SPACES:
                    body.extend(self.var_decl(None, t))
                    self.expect_punct(";")
                    continue
                if d == "pragma":
                    self.next()
                    body.append(ast.Pragma(self.pragma_text(), ast.Pos(t[3], t[4])))
                    continue
                if d in ("loc", "file"):
                    self.skip_line(t)
                    continue
                if d == "section":
                    self.skip_section()
                    continue
                raise self.error(f"unexpected directive {t[1]} in a function body", t)
            if kind == EOF:
                raise self.error(f"unexpected end of input: '{{' at {open_tok[3]}:{open_tok[4]} is not closed", t)
            raise self.error(f"expected a statement but found {describe(t)}", t)

    def labelled(self, name_tok):
        """`name:` then a label, or `name: .callprototype ...`, or `name: .branchtargets ...`."""
        self.i += 2
        name = name_tok[1]
        pos = ast.Pos(name_tok[3], name_tok[4])
        if "." in name or name[0] == "%":
            raise self.error(f"invalid label name {name!r}", name_tok)
        t = self.peek()
        if t[0] == DIR and t[1] in (".branchtargets", ".calltargets"):
            self.next()
            labels = [self.expect_name("a label")[1]]
            while self.accept_punct(","):
                labels.append(self.expect_name("a label")[1])
            self.expect_punct(";")
            return ast.BranchTargets(name, labels, pos, is_call=t[1] == ".calltargets")
        if t[0] == DIR and t[1] == ".callprototype":
            self.next()
            returns = []
            if self.is_punct("("):
                returns = self.param_list()
            u = self.next()
            if not (u[0] == WORD and u[1] == "_"):
                raise self.error(f"expected '_' in .callprototype but found {describe(u)}", u)
            params = []
            if self.is_punct("("):
                params = self.param_list()
            while self.peek()[0] == DIR and self.peek()[1] == ".noreturn":
                self.next()
            self.expect_punct(";")
            return ast.CallPrototype(name, returns, params, pos)
        return ast.Label(name, pos)

    def instruction(self):
        guard = None
        toks = self.toks
        t = toks[self.i]
        if t[0] == PUNCT and t[1] == "@":
            self.next()
            neg = self.accept_punct("!")
            g = self.peek()
            if g[0] != WORD or g[1] == "_" or "." in g[1]:
                raise self.error(f"expected a predicate register after '@' but found {describe(g)}", g)
            self.next()
            guard = (g[1], neg)
            t = toks[self.i]
        if t[0] != WORD:
            raise self.error(f"expected an instruction but found {describe(t)}", t)
        self.i += 1
        parts = t[1].split(".")
        opcode, mods = parts[0], tuple(parts[1:])
        if opcode not in OPCODES:
            raise self.error(f"unknown instruction '{opcode}'", t)
        if "" in mods:
            raise self.error(f"malformed instruction {t[1]!r}", t)
        operands = []
        n = toks[self.i]
        if n[0] == PUNCT and n[1] == ";":
            self.i += 1
        else:
            operand = self.operand
            append = operands.append
            while True:
                append(operand())
                n = toks[self.i]
                if n[0] == PUNCT:
                    if n[1] == ";":
                        self.i += 1
                        break
                    if n[1] == ",":
                        self.i += 1
                        continue
                raise self.error(f"expected ',' or ';' after an operand but found {describe(n)}", n)
        return ast.Instruction(opcode, mods, operands, guard, ast.Pos(t[3], t[4]))

    def plain_instruction(self, t):
        """The Instruction of an INSN token (the lexer has checked its form, opcode and guard), as
        instruction() builds it from the line's tokens. What instruction() would refuse raises, and
        parse() then takes the token path for the error."""
        m = t[2]
        line = t[3]
        opword = m.group("op")
        parts = opword.split(".")
        operands = []
        append = operands.append
        Pos = ast.Pos
        if m.group("ops") is not None:
            for o in OPERAND.finditer(m.string, m.start("ops"), m.end("ops")):
                kind = o.lastgroup
                col = o.start() + 1
                if kind == "reg":
                    append(ast.Reg(o.group(kind), Pos(line, col)))
                elif kind == "name":
                    append(self.plain_name(o.group(kind), Pos(line, col)))
                elif kind == "addr":
                    base, off = o.group("base", "off")
                    if base == "_":
                        raise self.error("invalid address base '_'", t)
                    append(ast.Address(base, int(off) if off else 0, Pos(line, col), extra=[]))
                elif kind == "int":
                    text = o.group(kind)
                    if text[0] == "-":
                        append(ast.Imm(-int_literal(text[1:], line, col + 1), Pos(line, col)))
                    else:
                        append(ast.Imm(int_literal(text, line, col), Pos(line, col)))
                elif kind == "vec":
                    elems = [ast.Reg(v.group(), Pos(line, v.start() + 1))
                             for v in VECTOR_REG.finditer(m.string, o.start(), o.end())]
                    if len(elems) > 256:
                        raise self.error("a vector operand has too many elements", t)
                    append(ast.Vector(elems, Pos(line, col)))
                else:
                    raw = int(o.group(kind)[2:], 16)
                    bits = 32 if kind == "hexf" else 64
                    append(ast.FloatImm(float_bits(raw, bits), bits, raw, Pos(line, col)))
        guard = m.group("guard")
        return ast.Instruction(parts[0], tuple(parts[1:]), operands,
                               None if guard is None else (guard, m.group("neg") == "!"),
                               Pos(line, m.start("op") + 1))

    def plain_name(self, name, pos):
        """name_operand() for a bare name with nothing after it (no `+offset`, no `generic(`)."""
        if name == "_":
            return ast.Sink(pos)
        if name == "WARP_SZ":
            return ast.Imm(32, pos)
        if self.is_reg_name(name):
            return ast.Reg(name, pos)
        return ast.SymbolExpr(name, 0, pos)

    # ------------------------------------------------------------ operands

    def name_operand(self, t):
        """A WORD token already consumed -> Reg / Sink / SymbolExpr (with `+offset` for symbols)."""
        name = t[1]
        pos = ast.Pos(t[3], t[4])
        if name[0] == "%":
            return ast.Reg(name, pos)
        if name in ("_", "WARP_SZ") or self.is_reg_name(name):
            return self.plain_name(name, pos)
        if "." in name:
            raise self.error(f"invalid operand {name!r}", t)
        if name == "generic" and self.is_punct("("):
            self.next()
            sym = self.expect_name("a symbol")
            self.expect_punct(")")
            return ast.SymbolExpr(sym[1], self.symbol_offset(), pos, generic=True)
        return ast.SymbolExpr(name, self.symbol_offset(), pos)

    def operand(self):
        t = self.toks[self.i]
        kind = t[0]
        if kind == WORD:
            self.i += 1
            first = self.name_operand(t)
            n = self.toks[self.i]
            if n[0] == PUNCT and n[1] == "|":
                self.next()
                u = self.next()
                if u[0] != WORD:
                    raise self.error(f"expected a predicate after '|' but found {describe(u)}", u)
                second = self.name_operand(u)
                if not isinstance(first, (ast.Reg, ast.Sink)) or not isinstance(second, (ast.Reg, ast.Sink)):
                    raise self.error("a '|' pair needs two registers", t)
                return ast.PredPair(first, second, ast.Pos(t[3], t[4]))
            return first
        if kind == INT or kind == FLOAT:
            return self.number()
        if kind == PUNCT:
            p = t[1]
            if p == "-":
                return self.number()
            if p == "[":
                return self.address()
            if p == "{":
                return self.vector()
            if p == "(":
                return self.paren_list()
            if p == "!":
                self.next()
                u = self.next()
                if u[0] != WORD or u[1] == "_":
                    raise self.error(f"expected a predicate after '!' but found {describe(u)}", u)
                inner = self.name_operand(u)
                if not isinstance(inner, ast.Reg):
                    raise self.error(f"'!' needs a predicate register, not {u[1]!r}", u)
                return ast.Negated(inner, ast.Pos(t[3], t[4]))
        raise self.error(f"expected an operand but found {describe(t)}", t)

    def address(self):
        open_tok = self.next()
        pos = ast.Pos(open_tok[3], open_tok[4])
        t = self.peek()
        base = None
        offset = 0
        if t[0] == WORD:
            if t[1] == "_" or "." in t[1] and not t[1].startswith("%"):
                raise self.error(f"invalid address base {t[1]!r}", t)
            self.next()
            base = t[1]
            offset = self.symbol_offset()
        elif t[0] == INT or (t[0] == PUNCT and t[1] == "-"):
            offset = self.expect_int("an address")
            offset += self.symbol_offset()
        else:
            raise self.error(f"expected a register, symbol or integer address but found {describe(t)}", t)
        extra = []
        while self.accept_punct(","):
            extra.append(self.operand())
        self.expect_punct("]")
        return ast.Address(base, offset, pos, extra=extra)

    def vector(self):
        open_tok = self.next()
        pos = ast.Pos(open_tok[3], open_tok[4])
        elems = []
        while True:
            t = self.peek()
            if t[0] == WORD:
                self.next()
                e = self.name_operand(t)
                if isinstance(e, ast.SymbolExpr):
                    raise self.error(f"{t[1]!r} is not a register", t)
                elems.append(e)
            elif t[0] in (INT, FLOAT) or (t[0] == PUNCT and t[1] == "-"):
                elems.append(self.number())
            else:
                raise self.error(f"expected a vector element but found {describe(t)}", t)
            if self.accept_punct("}"):
                break
            self.expect_punct(",")
        if len(elems) > 256:   # wgmma/tcgen05 use up to 128; anything far beyond is garbage
            raise self.error(f"a vector operand cannot have {len(elems)} elements", open_tok)
        return ast.Vector(elems, pos)

    def paren_list(self):
        open_tok = self.next()
        pos = ast.Pos(open_tok[3], open_tok[4])
        items = []
        if self.accept_punct(")"):
            return ast.ParenList(items, pos)
        while True:
            t = self.peek()
            if t[0] == WORD:
                self.next()
                items.append(self.name_operand(t))
            elif t[0] in (INT, FLOAT) or (t[0] == PUNCT and t[1] == "-"):
                items.append(self.number())
            else:
                raise self.error(f"expected a call argument but found {describe(t)}", t)
            if self.accept_punct(")"):
                break
            self.expect_punct(",")
        return ast.ParenList(items, pos)
