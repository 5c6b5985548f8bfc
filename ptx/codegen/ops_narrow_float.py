"""cvt to and from the narrow float formats (fp8 e4m3/e5m2, fp6 e2m3/e3m2, fp4 e2m1, packed in pairs) and
cvt.pack's saturating integer packing. Encoding rounds to nearest even; .satfinite clamps to the largest
finite value; a NaN becomes the format's NaN (fp8) or its largest positive value (fp6/fp4, which have no
NaN), as NVIDIA's conversions (cuda_fp8.hpp, cuda_fp6.hpp, cuda_fp4.hpp) do. Decoding is exact."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ptx.codegen import ptxtypes as T
from ptx.codegen.function_emitter import HANDLERS, check_mods, semantic, unsupported


@dataclass(frozen=True)
class Fmt:
    e: int          # exponent bits
    m: int          # mantissa bits
    bias: int
    maxcode: int    # the largest finite magnitude's code
    nan: int | None  # the code a NaN becomes (None: no NaN, a NaN becomes +maxcode)
    lane: int       # bits per value in the packed register (fp6 values sit in bytes)

    @property
    def width(self):
        return 1 + self.e + self.m


FORMATS = {
    "e4m3": Fmt(4, 3, 7, 0x7E, 0x7F, 8),
    "e5m2": Fmt(5, 2, 15, 0x7B, 0x7F, 8),
    "e2m3": Fmt(2, 3, 1, 0x1F, None, 8),
    "e3m2": Fmt(3, 2, 3, 0x1F, None, 8),
    "e2m1": Fmt(2, 1, 1, 0x7, None, 4),
}
_PAIRS = {f"{k}x2": k for k in FORMATS}


def _fconst(x: float) -> str:
    """An LLVM float constant (the double-precision hex form LLVM wants, exact for these powers of two)."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


def _encode(em, x, fmt, relu):
    """The code (i32, sign included) of float `x` in `fmt`, rounded to nearest even, finite-saturated."""
    f = em.f
    if relu:
        neg = f.op(f"fcmp ole float {x}, 0.0")
        x = f.op(f"select i1 {neg}, float 0.0, float {x}")
    bits = f.op(f"bitcast float {x} to i32")
    ax = f.op(f"and i32 {bits}, 2147483647")
    sign = f.op(f"shl i32 {f.op(f'lshr i32 {bits}, 31')}, {fmt.width - 1}")
    # normal results: round the f32 significand to m bits (nearest even) and rebias the exponent
    shift = 23 - fmt.m
    odd = f.op(f"and i32 {f.op(f'lshr i32 {ax}, {shift}')}, 1")
    rounded = f.op(f"add i32 {f.op(f'add i32 {ax}, {(1 << (shift - 1)) - 1}')}, {odd}")
    normal = f.op(f"sub i32 {f.op(f'lshr i32 {rounded}, {shift}')}, {(127 - fmt.bias) << fmt.m}")
    # below the smallest normal: a multiple of the smallest subnormal (exact scaling, then rint)
    a = f.op(f"bitcast i32 {ax} to float")
    scale = 2.0 ** (fmt.bias - 1 + fmt.m)
    q = em.call("llvm.rint.f32", "float", [("float", f.op(f"fmul float {a}, {_fconst(scale)}"))])
    sub = f.op(f"fptoui float {q} to i32")
    min_normal_bits = (127 + 1 - fmt.bias) << 23
    tiny = f.op(f"icmp ult i32 {ax}, {min_normal_bits}")
    code = f.op(f"select i1 {tiny}, i32 {sub}, i32 {normal}")
    code = em.call("llvm.umin.i32", "i32", [("i32", code), ("i32", str(fmt.maxcode))])   # .satfinite
    code = f.op(f"or i32 {code}, {sign}")
    is_nan = f.op(f"icmp ugt i32 {ax}, 2139095040")
    return f.op(f"select i1 {is_nan}, i32 {fmt.nan if fmt.nan is not None else fmt.maxcode}, i32 {code}")


def decode_half(em, code, fmt, relu):
    """The half (exact) of `code` (i32 holding one value) in `fmt`."""
    f = em.f
    mag_mask = (1 << (fmt.e + fmt.m)) - 1
    mag = f.op(f"and i32 {code}, {mag_mask}")
    neg = f.op(f"icmp ne i32 {f.op(f'and i32 {code}, {1 << (fmt.e + fmt.m)}')}, 0")
    exp = f.op(f"lshr i32 {mag}, {fmt.m}")
    man = f.op(f"and i32 {mag}, {(1 << fmt.m) - 1}")
    is_sub = f.op(f"icmp eq i32 {exp}, 0")
    # value = significand * 2^(exponent - bias - m), the significand with its leading one for normals
    sig = f.op(f"select i1 {is_sub}, i32 {man}, i32 {f.op(f'or i32 {man}, {1 << fmt.m}')}")
    e = f.op(f"select i1 {is_sub}, i32 1, i32 {exp}")
    pow_bits = f.op(f"shl i32 {f.op(f'add i32 {e}, {127 - fmt.bias - fmt.m}')}, 23")
    v = f.op(f"fmul float {f.op(f'uitofp i32 {sig} to float')}, {f.op(f'bitcast i32 {pow_bits} to float')}")
    v = f.op(f"select i1 {neg}, float {f.op(f'fneg float {v}')}, float {v}")
    h = f.op(f"bitcast half {f.op(f'fptrunc float {v} to half')} to i16")
    top = (1 << fmt.e) - 1
    if fmt.nan is not None:          # fp8: NaN becomes the canonical f16 NaN; e5m2 has infinities
        if fmt.e == 4:
            nan = f.op(f"icmp eq i32 {mag}, {mag_mask}")
        else:
            nan = f.op(f"and i1 {f.op(f'icmp eq i32 {exp}, {top}')}, {f.op(f'icmp ne i32 {man}, 0')}")
            inf = f.op(f"and i1 {f.op(f'icmp eq i32 {exp}, {top}')}, {f.op(f'icmp eq i32 {man}, 0')}")
            h = f.op(f"select i1 {inf}, i16 {f.op(f'select i1 {neg}, i16 -1024, i16 31744')}, i16 {h}")
        h = f.op(f"select i1 {nan}, i16 32767, i16 {h}")
    if relu:
        # negative (and -0) becomes +0; a NaN stays the canonical NaN
        negative = f.op(f"icmp slt i16 {h}, 0")
        h = f.op(f"select i1 {negative}, i16 0, i16 {h}")
    return h


def _cvt_narrow(em, ins, dt, st):
    mods = set(ins.mods)
    f = em.f
    relu = "relu" in mods
    check_mods(ins, {"rn", "satfinite", "relu"} | set(_PAIRS))
    if dt in _PAIRS:                                     # encode two values
        fmt = FORMATS[_PAIRS[dt]]
        if "rn" not in mods or "satfinite" not in mods:
            semantic(ins, f"cvt to .{dt} needs .rn.satfinite")
        if st == "f32":
            hi, lo = em.read(ins.operands[1], "f32"), em.read(ins.operands[2], "f32")
        elif st == "f16x2" and fmt.lane == 8 and fmt.e in (4, 5):
            v = em.read(ins.operands[1], "b32")
            halves = [f.op(f"trunc i32 {f.op(f'lshr i32 {v}, {s}')} to i16") for s in (16, 0)]
            hi, lo = (f.op(f"fpext half {f.op(f'bitcast i16 {h} to half')} to float") for h in halves)
        else:
            unsupported(ins)
        code = f.op(f"or i32 {f.op(f'shl i32 {_encode(em, hi, fmt, relu)}, {fmt.lane}')}, "
                    f"{_encode(em, lo, fmt, relu)}")
        out_bits = 2 * fmt.lane
        em.write(ins.operands[0], f.op(f"trunc i32 {code} to i{out_bits}"), f"b{out_bits}")
        return
    if dt == "f16x2" and st in _PAIRS:                   # decode two values
        fmt = FORMATS[_PAIRS[st]]
        if "rn" not in mods or "satfinite" in mods:
            semantic(ins, f"cvt from .{st} takes .rn (and .relu) only")
        v = f.op(f"zext i{2 * fmt.lane} {em.read(ins.operands[1], f'b{2 * fmt.lane}')} to i32")
        lo = decode_half(em, f.op(f"and i32 {v}, {(1 << fmt.lane) - 1}"), fmt, relu)
        hi = decode_half(em, f.op(f"lshr i32 {v}, {fmt.lane}"), fmt, relu)
        hi32, lo32 = f.op(f"zext i16 {hi} to i32"), f.op(f"zext i16 {lo} to i32")
        r = f.op(f"or i32 {f.op(f'shl i32 {hi32}, 16')}, {lo32}")
        em.write(ins.operands[0], r, "b32")
        return
    unsupported(ins)


_PACK_WIDTH = {"u16": 16, "s16": 16, "u8": 8, "s8": 8, "u4": 4, "s4": 4, "u2": 2, "s2": 2}


def _cvt_pack(em, ins):
    """cvt.pack.sat.{u16,s16}.s32 d, a, b and cvt.pack.sat.{u8,s8,u4,s4,u2,s2}.s32.b32 d, a, b, c: a and b
    saturated to the narrow type, a above b, in the low bits of d; the low bits of c above them."""
    f = em.f
    conv = next((m for m in ins.mods if m in _PACK_WIDTH), None)
    if conv is None or "sat" not in ins.mods or "s32" not in ins.mods:
        unsupported(ins)
    w = _PACK_WIDTH[conv]
    lo_lim, hi_lim = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if conv[0] == "s" else (0, (1 << w) - 1)

    def sat(op):
        v = em.read(op, "s32")
        v = em.call("llvm.smax.i32", "i32", [("i32", v), ("i32", str(lo_lim))])
        v = em.call("llvm.smin.i32", "i32", [("i32", v), ("i32", str(hi_lim))])
        return f.op(f"and i32 {v}, {(1 << w) - 1}")
    r = f.op(f"or i32 {f.op(f'shl i32 {sat(ins.operands[1])}, {w}')}, {sat(ins.operands[2])}")
    if w < 16:
        if len(ins.operands) != 4 or "b32" not in ins.mods:
            semantic(ins, f"cvt.pack to .{conv} takes a .b32 operand c")
        c = em.read(ins.operands[3], "b32")
        r = f.op(f"or i32 {r}, {f.op(f'shl i32 {c}, {2 * w}')}")
    em.write(ins.operands[0], r, "b32")


def _wrap(scalar_cvt):
    def op_cvt(em, ins):
        if "pack" in ins.mods:
            return _cvt_pack(em, ins)
        ts = [m for m in ins.mods if m in _PAIRS or m in T.TYPE_NAMES]
        if any(t in _PAIRS for t in ts) and len(ts) == 2:
            return _cvt_narrow(em, ins, ts[0], ts[1])
        return scalar_cvt(em, ins)
    return op_cvt


HANDLERS["cvt"] = _wrap(HANDLERS["cvt"])
