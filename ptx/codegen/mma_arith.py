"""The arithmetic of one tensor-core dot product (an element of D = A*B + C), as an H200 computes it
(checked against its answers, tests/data/nvidia_mma_answers.json):
- .f16/.bf16/.tf32 inputs: the products are exact; E, the largest exponent estimate (the sum of the two
  inputs' exponent fields; C's own) of the nonzero terms, fixes a grid of 2^(E-25); each term is truncated
  toward zero onto it, the terms are summed exactly and the sum is truncated to f32 (an .f16 C and D: the
  sum is rounded to f16, ties to even). inf/NaN inputs follow IEEE; a NaN result is 0x7FFFFFFF / 0x7FFF.
- .e4m3/.e5m2 inputs: widened to f16 (exact), two such f16 steps from +0 (the products whose k is 0 or 1
  mod 4, then those at 2 or 3 on that result), then C added by an IEEE add in the accumulator type; see
  fp8_dot.
- mma.m8n8k4 .f16 (not a tensor-core shape on sm_80+): f32 additions, see m8n8k4_f16.
- .f64: a chain of fused multiply-adds from C, in k order, in the rounding mode; NaN operands come out as
  they are, an invalid operation gives the form's default NaN.
- integers: exact, then wrapped or (.satfinite) clamped to s32. .b1: popc of the row and column's xor/and.
Every function takes element values (LLVM SSA names) and returns the result as an LLVM value."""

from __future__ import annotations

FLOATS = {"f16": (5, 10, 15), "bf16": (8, 7, 127), "tf32": (8, 10, 127), "f32": (8, 23, 127)}
GRID_BITS = 25          # the grid: 2^(E - GRID_BITS)
NO_TERM = -4096         # the exponent of a zero term (below any real one)


class Num:
    """A floating element decoded for the dot product: its exact value as a double and its exponent
    estimate (i32)."""

    def __init__(self, value, est):
        self.value, self.est = value, est


def decode(em, raw, ty):
    """Num of a raw element: i8 for e4m3/e5m2 and fp6/fp4 containers, i4 for packed fp4, i16 for f16/bf16, i32
    for tf32 (its low 13 bits unused) and f32."""
    f = em.f
    if ty in ("e4m3", "e5m2"):
        # the hardware's exponent estimate is the widened f16's: an .e4m3 subnormal is an f16 normal
        return decode(em, fp8_to_f16(em, raw, ty), "f16")
    if ty in ("e3m2", "e2m3", "e2m1", "e2m1p"):      # fp6/fp4 (mma_kinds): exact in f16 too
        from ptx.codegen.mma_kinds import narrow_to_f16
        return decode(em, narrow_to_f16(em, raw, ty), "f16")
    eb, mb, bias = FLOATS[ty]
    if ty == "f16":
        v = f.op(f"fpext half {f.op(f'bitcast i16 {raw} to half')} to double")
        w, bits = raw, 16
    elif ty == "bf16":
        w32 = f.op(f"shl i32 {f.op(f'zext i16 {raw} to i32')}, 16")
        v = f.op(f"fpext float {f.op(f'bitcast i32 {w32} to float')} to double")
        w, bits = raw, 16
    else:
        w32 = f.op(f"and i32 {raw}, -8192") if ty == "tf32" else raw
        v = f.op(f"fpext float {f.op(f'bitcast i32 {w32} to float')} to double")
        w, bits, mb = raw, 32, 23
    ity = f"i{bits}"
    e = f.op(f"and {ity} {f.op(f'lshr {ity} {w}, {mb}')}, {(1 << eb) - 1}")
    e = f.op(f"zext {ity} {e} to i32") if bits == 16 else e
    # a subnormal's exponent field reads as the smallest normal's
    est = f.op(f"sub i32 {f.op(f'call i32 @llvm.umax.i32(i32 {e}, i32 1)')}, {bias}")
    em.m.declare("declare i32 @llvm.umax.i32(i32, i32)")
    return Num(v, est)


def fp8_to_f16(em, raw, ty):
    """i16 f16 bits of an i8 .e4m3/.e5m2 element (f16 holds every fp8 value exactly; NaN as 0x7E00)."""
    f = em.f
    w = f.op(f"zext i8 {raw} to i16")
    if ty == "e5m2":
        return f.op(f"shl i16 {w}, 8")
    mag = f.op(f"and i16 {w}, 127")
    sign = f.op(f"shl i16 {f.op(f'and i16 {w}, 128')}, 8")
    # a normal: the f16 exponent is .e4m3's plus 8 (the biases 15 - 7), the 3 mantissa bits at the top
    normal = f.op(f"add i16 {f.op(f'shl i16 {mag}, 7')}, 8192")
    # a subnormal (m * 2^-9) is an f16 normal: convert it as a number, exactly
    m = f.op(f"uitofp i16 {f.op(f'and i16 {mag}, 7')} to float")
    sub = f.op(f"fptrunc float {f.op(f'fmul float {m}, 0x3F60000000000000')} to half")
    sub = f.op(f"bitcast half {sub} to i16")
    bits = f.op(f"select i1 {f.op(f'icmp ult i16 {mag}, 8')}, i16 {sub}, i16 {normal}")
    bits = f.op(f"select i1 {f.op(f'icmp eq i16 {mag}, 127')}, i16 32256, i16 {bits}")
    return f.op(f"or i16 {bits}, {sign}")


def _pow2(em, e_i32, plus):
    """2^(e + plus) as a double (e + plus within the normal range)."""
    f = em.f
    b = f.op(f"zext i32 {f.op(f'add i32 {e_i32}, {1023 + plus}')} to i64")
    return f.op(f"bitcast i64 {f.op(f'shl i64 {b}, 52')} to double")


def grid_dot(em, pairs, c):
    """The exact grid sum of c + sum(a*b) (see the module docstring) as a double."""
    f = em.f
    em.m.declare("declare i32 @llvm.smax.i32(i32, i32)")
    em.m.declare("declare double @llvm.trunc.f64(double)")
    vals, ests = [], []
    for a, b in pairs:
        vals.append(f.op(f"fmul double {a.value}, {b.value}"))
        ests.append(f.op(f"add i32 {a.est}, {b.est}"))
    vals.append(c.value)
    ests.append(c.est)
    top = str(NO_TERM)
    for v, e in zip(vals, ests):
        nz = f.op(f"fcmp une double {v}, 0.0")
        top = f.op(f"call i32 @llvm.smax.i32(i32 {top}, i32 {f.op(f'select i1 {nz}, i32 {e}, i32 {NO_TERM}')})")
    top = f.op(f"call i32 @llvm.smax.i32(i32 {top}, i32 -990)")      # all zero: any finite grid will do
    inv = _pow2(em, f.op(f"sub i32 0, {top}"), GRID_BITS)
    total = "0.0"      # a +0 start: a sum of negative zeros is +0 (the hardware's)
    for v in vals:
        t = f.op(f"call double @llvm.trunc.f64(double {f.op(f'fmul double {v}, {inv}')})")
        total = f.op(f"fadd double {total}, {t}")
    return f.op(f"fmul double {total}, {_pow2(em, top, -GRID_BITS)}")


def rz_f32(em, x):
    """A double truncated to f32 (toward zero; past the range: the largest finite), NaN canonical."""
    f = em.f
    em.m.declare("declare double @llvm.fabs.f64(double)")
    r = f.op(f"fptrunc double {x} to float")
    back = f.op(f"fpext float {r} to double")
    grew = f.op(f"fcmp ogt double {f.op(f'call double @llvm.fabs.f64(double {back})')}, "
                f"{f.op(f'call double @llvm.fabs.f64(double {x})')}")
    rb = f.op(f"bitcast float {r} to i32")
    rb = f.op(f"select i1 {grew}, i32 {f.op(f'sub i32 {rb}, 1')}, i32 {rb}")
    return canon_nan32(em, f.op(f"bitcast i32 {rb} to float"), rb)


def canon_nan32(em, v, bits=None):
    """i32 bits of an f32 value, NaN as 0x7FFFFFFF."""
    f = em.f
    bits = bits or f.op(f"bitcast float {v} to i32")
    nan = f.op(f"fcmp uno float {v}, 0.0")
    return f.op(f"select i1 {nan}, i32 2147483647, i32 {bits}")


def f16_bits(em, v, ty="float"):
    """i16 bits of a float/double rounded to f16 (ties to even), NaN as 0x7FFF."""
    f = em.f
    h = f.op(f"bitcast half {f.op(f'fptrunc {ty} {v} to half')} to i16")
    nan = f.op(f"fcmp uno {ty} {v}, 0.0")
    return f.op(f"select i1 {nan}, i16 32767, i16 {h}")


def tensor_dot(em, pairs, c, out, block=None):
    """D element of the tensor-core float forms: i32 f32 bits (out 'f32'), or i16 f16 bits ('f16' from an f32
    C: the f32 result converted; 'f16-acc': an f16 C and D, the grid sum rounded once). `block`: how many
    products one step takes (wmma .tf32 runs two steps of four); each step's f32 result is the next one's
    C."""
    block = block or len(pairs)
    for s in range(0, len(pairs), block):
        last = s + block >= len(pairs)
        x = grid_dot(em, pairs[s:s + block], c)
        if last and out == "f16-acc":
            return f16_bits(em, x, "double")
        bits = rz_f32(em, x)
        if last:
            if out == "f16":
                return f16_bits(em, em.f.op(f"bitcast i32 {bits} to float"))
            return bits
        c = decode(em, bits, "f32")


def fp8_dot(em, pairs, c_raw, out):
    """D element of the .e4m3/.e5m2 forms (pairs: Nums of the widened elements, in k order; c_raw: C's i32 f32
    or i16 f16 bits; out: 'f32' or 'f16', C's and D's type): i32 / i16 bits. sm_90 runs these as two f16
    tensor-core steps from +0, the low half of each A/B register (k = 0, 1 mod 4) and then the high half on
    its result, each step rounded as an f16 step rounds into `out`, and adds C last."""
    f = em.f
    acc = Num("0.0", "0")
    for half in (0, 1):
        x = grid_dot(em, [p for q, p in enumerate(pairs) if q % 4 // 2 == half], acc)
        bits = f16_bits(em, x, "double") if out == "f16" else rz_f32(em, x)
        acc = decode(em, bits, out)
    if out == "f16":
        # two f16 values sum exactly in a double: its conversion is the add's one rounding
        c = f.op(f"fpext half {f.op(f'bitcast i16 {c_raw} to half')} to double")
        return f16_bits(em, f.op(f"fadd double {acc.value}, {c}"), "double")
    return canon_nan32(em, f.op(f"fadd float {f.op(f'bitcast i32 {bits} to float')}, "
                                f"{f.op(f'bitcast i32 {c_raw} to float')}"))


def m8n8k4_f16(em, products, c, ctype, out):
    """mma.m8n8k4 .f16 on sm_80+: .f32 D = (((p0 + p1) + p2) + p3) + c in f32 (round to nearest); .f16 D =
    (p0 + p1) + (p2 + p3) in f32, plus c rounded once to f16. `products`: exact f32 products (float);
    c: float (an .f16 C widened)."""
    f = em.f
    if out == "f32":
        acc = products[0]
        for p in products[1:]:
            acc = f.op(f"fadd float {acc}, {p}")
        return canon_nan32(em, f.op(f"fadd float {acc}, {c}"))
    x = f.op(f"fadd float {f.op(f'fadd float {products[0]}, {products[1]}')}, "
             f"{f.op(f'fadd float {products[2]}, {products[3]}')}")
    return f16_bits(em, odd_sum(em, f.op(f"fpext float {x} to double"), f.op(f"fpext float {c} to double")),
                    "double")


def odd_sum(em, a, b):
    """a + b (doubles) rounded to odd: one more rounding to a format of < 52 bits is then correct."""
    f = em.f
    s = f.op(f"fadd double {a}, {b}")
    bb = f.op(f"fsub double {s}, {a}")
    ea = f.op(f"fsub double {a}, {f.op(f'fsub double {s}, {bb}')}")
    err = f.op(f"fadd double {ea}, {f.op(f'fsub double {b}, {bb}')}")
    sb = f.op(f"bitcast double {s} to i64")
    # rounded away from zero (the error's sign differs from the sum's): one step back toward zero
    away = f.op(f"fcmp olt double {f.op(f'fmul double {err}, {s}')}, 0.0")
    sb = f.op(f"select i1 {away}, i64 {f.op(f'sub i64 {sb}, 1')}, i64 {sb}")
    inexact = f.op(f"fcmp one double {err}, 0.0")
    sb = f.op(f"select i1 {inexact}, i64 {f.op(f'or i64 {sb}, 1')}, i64 {sb}")
    finite = f.op(f"fcmp one double {f.op(f'call double @llvm.fabs.f64(double {s})')}, 0x7FF0000000000000")
    em.m.declare("declare double @llvm.fabs.f64(double)")
    return f.op(f"select i1 {finite}, double {f.op(f'bitcast i64 {sb} to double')}, double {s}")


def f64_chain(em, pairs, c, rnd, default_nan):
    """i64 bits of the .f64 dot product: c, then fma(a, b, acc) along k in rounding mode `rnd`. NaNs (rare)
    are sorted out on a side path: the accumulator's NaN, else a's, else b's, comes out unchanged; an
    invalid operation gives `default_nan`."""
    from ptx.codegen.ops_float import call_strict, ROUNDING
    f = em.f
    acc = c
    for a, b in pairs:
        if rnd == "rn":
            acc = em.call("llvm.fma.f64", "double", [("double", a), ("double", b), ("double", acc)])
        else:
            acc = call_strict(em, "fma", "double", [("double", a), ("double", b), ("double", acc)],
                              ROUNDING[rnd], "f64")
    fast = f.op(f"bitcast double {acc} to i64")
    isnan = f.op(f"fcmp uno double {acc}, 0.0")
    slow, join = f.new_label("mma.nan"), f.new_label("mma.nan.done")
    here = f.new_label("mma.fast")
    f.term(f"br i1 {isnan}, label %{slow}, label %{here}")
    f.label(here)
    f.term(f"br label %{join}")
    f.label(slow)
    state = f.op(f"bitcast double {c} to i64")
    done = f.op(f"fcmp uno double {c}, 0.0")
    for a, b in pairs:
        an, bn = f.op(f"fcmp uno double {a}, 0.0"), f.op(f"fcmp uno double {b}, 0.0")
        prod = f.op(f"fmul double {a}, {b}")
        # this step's value when no NaN comes in: the product and the accumulator as IEEE has them
        step = f.op(f"fadd double {prod}, {f.op(f'bitcast i64 {state} to double')}")
        sb = f.op(f"bitcast double {step} to i64")
        sb = f.op(f"select i1 {f.op(f'fcmp uno double {step}, 0.0')}, i64 {default_nan}, i64 {sb}")
        sb = f.op(f"select i1 {bn}, i64 {f.op(f'bitcast double {b} to i64')}, i64 {sb}")
        sb = f.op(f"select i1 {an}, i64 {f.op(f'bitcast double {a} to i64')}, i64 {sb}")
        state = f.op(f"select i1 {done}, i64 {state}, i64 {sb}")
        done = f.op(f"or i1 {done}, {f.op(f'or i1 {an}, {bn}')}")
        done = f.op(f"or i1 {done}, {f.op(f'fcmp uno double {step}, 0.0')}")
    f.term(f"br label %{join}")
    f.label(join)
    return f.op(f"phi i64 [ {fast}, %{here} ], [ {state}, %{slow} ]")


def int_dot(em, pairs, c, sat, signed):
    """i32 of c + sum(a*b) over the products of sign/zero-extended (i32) elements, wrapped or clamped.
    `signed`: an operand is signed, so every product fits in i16."""
    f = em.f
    acc = f.op(f"sext i32 {c} to i64")
    for a, b in pairs:
        if signed:
            # i16 products: LLVM 22 turns i32 products of (u8, s8) pairs into an x86-64-v3 vpmaddwd that
            # gets some of them wrong
            p = f.op(f"mul i16 {f.op(f'trunc i32 {a} to i16')}, {f.op(f'trunc i32 {b} to i16')}")
            p = f.op(f"sext i16 {p} to i64")
        else:
            p = f.op(f"zext i32 {f.op(f'mul i32 {a}, {b}')} to i64")
        acc = f.op(f"add i64 {acc}, {p}")
    if sat:
        em.m.declare("declare i64 @llvm.smin.i64(i64, i64)")
        em.m.declare("declare i64 @llvm.smax.i64(i64, i64)")
        acc = f.op(f"call i64 @llvm.smin.i64(i64 {acc}, i64 2147483647)")
        acc = f.op(f"call i64 @llvm.smax.i64(i64 {acc}, i64 -2147483648)")
    return f.op(f"trunc i64 {acc} to i32")


def popc_dot(em, word_pairs, c, op):
    """i32 of c + the popcount of (a op b) over pairs of 32-bit words of one row of A and column of B."""
    f = em.f
    em.m.declare("declare i32 @llvm.ctpop.i32(i32)")
    acc = c
    for a, b in word_pairs:
        x = f.op(f"{op} i32 {a}, {b}")
        acc = f.op(f"add i32 {acc}, {f.op(f'call i32 @llvm.ctpop.i32(i32 {x})')}")
    return acc
