"""PTX scalar types: their LLVM spelling, size, and class (signed/unsigned/bits/float/pred)."""

from ptx.errors import PTXUnsupportedError

SCALAR_TYPES = {
    'pred': ('i1', 1), 'b8': ('i8', 1), 'u8': ('i8', 1), 's8': ('i8', 1),
    'b16': ('i16', 2), 'u16': ('i16', 2), 's16': ('i16', 2),
    'b32': ('i32', 4), 'u32': ('i32', 4), 's32': ('i32', 4),
    'b64': ('i64', 8), 'u64': ('i64', 8), 's64': ('i64', 8), 'b128': ('i128', 16),
    'f16': ('half', 2), 'bf16': ('bfloat', 2), 'f32': ('float', 4), 'f64': ('double', 8),
    'f16x2': ('<2 x half>', 4), 'bf16x2': ('<2 x bfloat>', 4), 'tf32': ('i32', 4),
    'e4m3x2': ('i16', 2), 'e5m2x2': ('i16', 2),
}
TYPE_NAMES = frozenset(SCALAR_TYPES)
FLOATS = frozenset({'f16', 'bf16', 'f32', 'f64', 'f16x2', 'bf16x2'})


def llvm_type(t: str) -> str:
    try:
        return SCALAR_TYPES[t][0]
    except KeyError:
        raise PTXUnsupportedError(f"type .{t}") from None


OPAQUE = frozenset(('texref', 'samplerref', 'surfref'))   # kernel parameters of these hold a 64-bit handle


def size_of(t: str) -> int:
    return 8 if t in OPAQUE else SCALAR_TYPES[t][1]


def bits_of(t: str) -> int:
    return 1 if t == 'pred' else SCALAR_TYPES[t][1] * 8


def is_float(t: str) -> bool:
    return t in FLOATS


def is_signed(t: str) -> bool:
    return t[0] == 's'


def int_type_of_size(nbytes: int) -> str:
    return f"i{nbytes * 8}"


def types_in(mods) -> list:
    return [m for m in mods if m in TYPE_NAMES]
