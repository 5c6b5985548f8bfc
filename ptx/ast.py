"""The PTX syntax tree the parser produces and the code generators consume (the contract between them).

Design: instructions keep their dot-modifiers verbatim, in source order (`ld.global.nc.v4.f32` ->
opcode 'ld', mods ('global', 'nc', 'v4', 'f32')); semantic passes interpret them. Every node carries
(line, col) so errors can name a position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Union


class Pos:
    """A source position; a value (equal by line and column), never changed once made. A plain class with
    slots, not a frozen dataclass: the parser makes one per node, and a frozen one costs three times as much."""
    __slots__ = ("line", "col")

    def __init__(self, line: int = 0, col: int = 0):
        self.line = line
        self.col = col

    def __eq__(self, other):
        if type(other) is not Pos:
            return NotImplemented
        return self.line == other.line and self.col == other.col

    def __hash__(self):
        return hash((self.line, self.col))

    def __repr__(self):
        return f"Pos(line={self.line}, col={self.col})"

    def __str__(self):
        return f"{self.line}:{self.col}"


# ---------------------------------------------------------------- operands

@dataclass
class Reg:
    """A register (`%r1`, `%tid.x`, or a plain name declared `.reg`, as inline asm does: `c`). Other names
    (variables of other state spaces, functions, labels) are SymbolExpr."""
    name: str                      # '%tid.x' keeps its component: special registers are named whole
    pos: Pos = field(default_factory=Pos)
    sel: str = ""                  # a video instruction's part selector: 'b0', 'h1', 'h10', 'b7654', ...


@dataclass
class Imm:
    """Integer literal (decimal/hex/octal/binary, optional U suffix, unary minus folded)."""
    value: int
    pos: Pos = field(default_factory=Pos)


@dataclass
class FloatImm:
    """Float literal: `0f3F800000` (bits=32), `0d3FF0000000000000` (bits=64), or decimal `1.5` (bits=0:
    decimal, converted to the instruction's type by the code generator)."""
    value: float
    bits: int = 0
    raw: int = 0                   # the exact bit pattern for 0f/0d forms
    pos: Pos = field(default_factory=Pos)


@dataclass
class Vector:
    """`{%r1, %r2, _}` -- elements are Reg, Imm, FloatImm or Sink."""
    elems: list
    pos: Pos = field(default_factory=Pos)


@dataclass
class Sink:
    """`_` -- a discarded destination."""
    pos: Pos = field(default_factory=Pos)


@dataclass
class Address:
    """`[base+offset]`, `[base]`, `[symbol+4]`, `[100]`: base is a register/variable name or None."""
    base: Optional[str]
    offset: int = 0
    pos: Pos = field(default_factory=Pos)
    extra: list = field(default_factory=list)  # operands after the base: `[tex, {%f1, %f2}]` (tex/surface)


@dataclass
class Negated:
    """`!%p` as a source operand (predicate logic ops)."""
    operand: Reg
    pos: Pos = field(default_factory=Pos)


@dataclass
class PredPair:
    """`%p|%q` -- the two destinations of setp / the pred outputs of some ops."""
    first: Union[Reg, Sink]
    second: Union[Reg, Sink]
    pos: Pos = field(default_factory=Pos)


@dataclass
class SymbolExpr:
    """A symbol or label used as a value (`mov.u64 %rd1, shared_buf;`, `bra LBB0_2;`), with optional
    `+offset` (`mov.u64 %rd1, arr+8;`)."""
    name: str
    offset: int = 0
    pos: Pos = field(default_factory=Pos)
    generic: bool = False          # `generic(sym)` in an initialiser: the symbol's generic address
    mask: int = 0                  # `0xFF00(generic(sym)+4)` in a byte-array initialiser: this element is
                                   # ((address + offset) & mask) >> (trailing zeros of mask); 0: no mask


@dataclass
class ParenList:
    """`(%r1, %r2)` in `call` argument / return lists."""
    items: list
    pos: Pos = field(default_factory=Pos)


@dataclass
class FieldInit:
    """`filter_mode = linear` in a `.texref`/`.samplerref`/`.surfref` initialiser: a named member and its value
    (a name such as `clamp_to_edge`, or an integer)."""
    name: str
    value: Union[str, int]
    pos: Pos = field(default_factory=Pos)


Operand = Union[Reg, Imm, FloatImm, Vector, Sink, Address, Negated, PredPair, SymbolExpr, ParenList]


# ---------------------------------------------------------------- types and declarations

@dataclass
class Type:
    """A scalar PTX type name without the dot ('u32', 'f16x2', 'pred', 'b128', ...), optionally a
    vector (`.v2 .f32` -> Type('f32', vec=2))."""
    name: str
    vec: int = 1


@dataclass
class VarDecl:
    """`.reg .b32 %r<10>;`, `.shared .align 4 .b8 buf[1024];`, `.global .u32 g = 5;`,
    `.extern .shared .align 16 .b8 dyn[];`, `.const .f32 tab[4] = {1.0, ...};`.
    `count` is N for the parameterised form `%r<N>` (declares %r0..%r{N-1}); `dims` holds the array
    dimensions, with 0 for an unsized `[]`. `init` is a flat or nested list of Imm/FloatImm/SymbolExpr
    (`generic(sym)` initialisers are SymbolExpr with `generic=True`); for the opaque types (.texref,
    .samplerref, .surfref) a list of FieldInit."""
    space: str                     # 'reg','shared','local','const','global','param','tex','sreg'
    type: Type
    name: str
    count: Optional[int] = None
    dims: list = field(default_factory=list)
    align: Optional[int] = None
    init: Optional[list] = None
    linkage: Optional[str] = None  # 'visible','extern','weak','common', or None
    attributes: list = field(default_factory=list)   # e.g. ['managed'] from .attribute(.managed)
    ptr_space: Optional[str] = None                  # kernel params: .ptr.global / .ptr.shared ...
    ptr_align: Optional[int] = None
    pos: Pos = field(default_factory=Pos)


@dataclass
class Instruction:
    opcode: str                    # 'add', 'ld', 'setp', 'call', 'bra', ...
    mods: tuple                    # verbatim dot-modifiers in order, without dots
    operands: list                 # [Operand]
    guard: Optional[tuple] = None  # (register name, negated: bool) from `@%p` / `@!%p`
    pos: Pos = field(default_factory=Pos)

    def __post_init__(self):
        if self.opcode in VIDEO_OPCODES:
            for o in self.operands:
                if isinstance(o, Reg):
                    base, dot, sel = o.name.rpartition(".")
                    if dot and _VIDEO_SEL.match(sel):
                        o.name, o.sel = base, sel


# `%r1.b0`, `%r2.h10`: the lexer keeps a register's dotted suffix; on these opcodes it selects a part
VIDEO_OPCODES = frozenset("""vadd vsub vabsdiff vmin vmax vshl vshr vmad vset vadd2 vsub2 vavrg2 vabsdiff2 vmin2
vmax2 vset2 vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4 vset4""".split())
_VIDEO_SEL = re.compile(r"[bh][0-7]+\Z")


@dataclass
class Label:
    name: str
    pos: Pos = field(default_factory=Pos)


@dataclass
class Block:
    """A `{ ... }` scope inside a body; its declarations shadow outer ones."""
    body: list
    pos: Pos = field(default_factory=Pos)


@dataclass
class Pragma:
    text: str
    pos: Pos = field(default_factory=Pos)


@dataclass
class BranchTargets:
    """`ts: .branchtargets L1, L2;` for brx.idx, or `ct: .calltargets f, g;` (is_call) for indirect call."""
    name: str
    labels: list
    pos: Pos = field(default_factory=Pos)
    is_call: bool = False          # .calltargets: `labels` are function names


@dataclass
class CallPrototype:
    """`proto: .callprototype (.param .b32 _) _ (.param .b64 _);` for indirect calls."""
    name: str
    returns: list                  # [VarDecl] in .param space
    params: list
    pos: Pos = field(default_factory=Pos)


Statement = Union[Instruction, Label, VarDecl, Block, Pragma, BranchTargets, CallPrototype]


@dataclass
class Function:
    name: str
    kind: str                      # 'entry' or 'func'
    params: list                   # [VarDecl] (space 'param' or 'reg')
    returns: list = field(default_factory=list)
    body: Optional[list] = None    # None: a declaration / prototype only
    linkage: Optional[str] = None  # 'visible','extern','weak', or None
    directives: dict = field(default_factory=dict)  # 'maxntid': (x,y,z), 'reqntid', 'minnctapersm',
                                                   # 'maxnreg', 'maxclusterrank', 'noreturn': True, ...
    pos: Pos = field(default_factory=Pos)
    end: Optional[Pos] = None      # the body's closing brace (ptxas reports parameter-space errors there)


@dataclass
class Module:
    version: tuple                 # (major, minor)
    target: list                   # ['sm_86'] or ['sm_90a', 'texmode_independent', ...]
    address_size: int = 64
    items: list = field(default_factory=list)       # [Function | VarDecl] in source order
    source: str = ""
    header_lines: dict = field(default_factory=dict)  # 'version' / 'target' / 'address_size' -> line

    def functions(self):
        return [i for i in self.items if isinstance(i, Function)]

    def entries(self):
        return [i for i in self.items if isinstance(i, Function) and i.kind == "entry"]

    def globals(self):
        return [i for i in self.items if isinstance(i, VarDecl)]
