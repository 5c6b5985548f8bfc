"""The CPU runtime's libcall helpers (ptx/runtime/libcalls.c), run from JIT-compiled code for an
x86-64-v2 target, where LLVM calls them for half/bfloat conversions and 128-bit arithmetic: every
rounding decision of every 16-bit encoding, NaNs and the integer builtins against exact references."""

import ctypes
import math
import random
from fractions import Fraction

import numpy as np
import pytest

import ptxkit as K

# the references cast NaN and out-of-range values on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TARGET = "x86-64-v2"    # no F16C, no AVX-512: LLVM lowers half/bfloat conversions to libcalls


def jit(body, in_types, out_type, inputs, libcall=None):
    """Run `body` (LLVM IR defining %r : out_type from %a, %b : in_types) over the input arrays,
    compiled for TARGET; `libcall` must be among the object's undefined symbols (the helper ran)."""
    import llvmlite.binding as llvm
    from ptx import host, host_target
    n = len(inputs[0])
    loads = []
    for k, ty in enumerate(in_types):
        name = "ab"[k]
        loads.append(f"  %p{name} = getelementptr {ty}, ptr %in{k}, i64 %i\n  %{name} = load {ty}, ptr %p{name}")
    ir = f"""
define void @k(ptr %in0, ptr %in1, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
{chr(10).join(loads)}
  {body}
  %po = getelementptr {out_type}, ptr %out, i64 %i
  store {out_type} %r, ptr %po
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %done
done:
  ret void
}}
""" + DECLS
    with host._llvm_lock:
        host._init_llvm()
        tm = host_target.machine(TARGET)[0]
        mod = llvm.parse_assembly(ir)
        mod.verify()
        obj = tm.emit_object(mod)
        if libcall:
            assert libcall in host_target.undefined_symbols(obj), f"LLVM inlined {libcall} here"
        code = host.load_object(obj)
        fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)(
            code.address("k"))
    arrays = [np.ascontiguousarray(a) for a in inputs] + [np.zeros(1, np.uint8)]
    shape = (n, 2) if out_type == "i128" else (n,)
    dtype = {"i16": np.uint16, "half": np.uint16, "bfloat": np.uint16, "i32": np.uint32, "float": np.uint32,
             "i64": np.uint64, "double": np.uint64, "i128": np.uint64}[out_type]
    out = np.zeros(shape, dtype)
    fn(arrays[0].ctypes.data, arrays[1].ctypes.data, out.ctypes.data, n)
    return out


DECLS = """
declare float @llvm.powi.f32.i32(float, i32)
declare double @llvm.powi.f64.i32(double, i32)
declare double @__extendhfdf2(half)
declare float @__extendbfsf2(bfloat)
declare float @__gnu_h2f_ieee(i16)
declare i16 @__gnu_f2h_ieee(float)
declare i128 @__muloti4(i128, i128, ptr)
declare i128 @__multi3(i128, i128)
declare i128 @__divmodti4(i128, i128, ptr)
declare i128 @__udivmodti4(i128, i128, ptr)
declare i128 @__ashlti3(i128, i32)
declare i128 @__ashrti3(i128, i32)
declare i128 @__lshrti3(i128, i32)
declare i32 @__popcountsi2(i32)
declare i32 @__popcountdi2(i64)
declare i32 @__popcountti2(i128)
declare i32 @__paritysi2(i32)
declare i32 @__paritydi2(i64)
declare i32 @__parityti2(i128)
declare i32 @__clzsi2(i32)
declare i32 @__clzdi2(i64)
declare i32 @__clzti2(i128)
declare i32 @__ctzsi2(i32)
declare i32 @__ctzdi2(i64)
declare i32 @__ctzti2(i128)
declare i32 @__bswapsi2(i32)
declare i64 @__bswapdi2(i64)
declare double @__floatuntidf(i128)
declare float @__floattisf(i128)
declare i128 @__fixsfti(float)
declare i128 @__fixunsdfti(double)
"""


def i128(values):
    """Python ints as little-endian 128-bit elements (uint64 pairs)."""
    return np.array([[v & (2**64 - 1), (v >> 64) & (2**64 - 1)] for v in values], np.uint64)


def ints(pairs, signed):
    out = [int(lo) | (int(hi) << 64) for lo, hi in pairs]
    return [v - (1 << 128) if signed and v >> 127 else v for v in out]


# ------------------------------------------------------------------ 16-bit float formats

FMT = {"half": (10, 5), "bfloat": (7, 8)}      # fraction bits, exponent bits


def narrow_value(bits, fmt):
    """Exact values (float64) of 16-bit encodings."""
    bits = np.asarray(bits, np.uint16)
    if fmt == "half":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def quiet_nan16(src_bits, src_frac, fmt):
    """A NaN narrowed: sign kept, quiet bit set, top of the payload (the helpers' documented rule)."""
    frac, expb = FMT[fmt]
    src_bits = np.asarray(src_bits, np.uint64)
    total = 1 + {23: 8, 52: 11}[src_frac] + src_frac
    sign = (src_bits >> np.uint64(total - 1)) & np.uint64(1)
    payload = (src_bits & np.uint64((1 << src_frac) - 1)) >> np.uint64(src_frac - frac)
    r = (sign << np.uint64(15)) | np.uint64(((1 << expb) - 1) << frac) | np.uint64(1 << (frac - 1)) | payload
    return r.astype(np.uint16)


def neighbourhoods(fmt, src):
    """Inputs in the source type `src` (np.float32/np.float64) around every rounding decision of the
    16-bit format: each finite encoding exactly, the midpoint to the next one up (a tie: the even
    one wins) and the source-type neighbours of that midpoint; the step past the largest finite
    value goes to infinity. Returns (inputs, expected 16-bit encodings)."""
    frac, expb = FMT[fmt]
    inf = ((1 << expb) - 1) << frac
    lo = np.arange(inf, dtype=np.uint32)                  # every finite non-negative encoding
    hi = lo + 1
    lo_v = narrow_value(lo, fmt)
    hi_v = narrow_value(np.minimum(hi, inf - 1), fmt)
    top = hi == inf                                        # virtual next value 2^(emax+1)
    hi_v[top] = lo_v[top] + (lo_v[top] - narrow_value(lo[top] - 1, fmt))
    mid = (lo_v + hi_v) / 2                                # exact in float32 and float64
    even = np.where(lo % 2 == 0, lo, hi)
    mid_s = mid.astype(src)
    below = np.nextafter(mid_s, src(0))
    above = np.nextafter(mid_s, src(np.inf))
    xs = np.concatenate([lo_v.astype(src), mid_s, below, above])
    want = np.concatenate([lo, even, lo, hi]).astype(np.uint16)
    xs = np.concatenate([xs, -xs])
    want = np.concatenate([want, want | np.uint16(0x8000)])
    return xs, want


def specials(src):
    """(NaNs of every kind and payload position, finite and infinite edge values) in type src."""
    if src == np.float32:
        ity, inf, quiet, payloads, sign = np.uint32, 0x7F800000, 1 << 22, (1, 0x1FFF, 0x2000, 0x3FFFFF), 1 << 31
    else:
        ity, inf, quiet, sign = np.uint64, 0x7FF0000000000000, 1 << 51, 1 << 63
        payloads = (1, 0x3FFFFF, 1 << 42, (1 << 51) - 1, 0x5555555555555)
    nans = [inf | q | p for q in (0, quiet) for p in payloads]
    nans = np.array(nans + [v | sign for v in nans], ity)
    finite = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, 1e-300, -1e-300, 1e300, -1e300, 65519.99,
                       65520.0, 3.4e38, -3.4e38, 5.96e-8, 2.98e-8, 2.99e-8], np.float64)
    with np.errstate(over="ignore"):
        finite = finite[np.isfinite(finite.astype(src)) | np.isinf(finite)].astype(src)
    return nans, finite


@pytest.mark.parametrize("fmt,src,libcall", [("half", np.float32, "__truncsfhf2"),
                                             ("half", np.float64, "__truncdfhf2"),
                                             ("bfloat", np.float32, "__truncsfbf2"),
                                             ("bfloat", np.float64, "__truncdfbf2")])
def test_narrowing_rounds_every_encoding_to_nearest_even(fmt, src, libcall):
    sty = "float" if src == np.float32 else "double"
    ity = "i32" if src == np.float32 else "i64"
    body = f"%x = bitcast {ity} %a to {sty}\n  %h = fptrunc {sty} %x to {fmt}\n  %r = bitcast {fmt} %h to i16"
    xs, want = neighbourhoods(fmt, src)
    nans, finite = specials(src)
    rng = np.random.default_rng(7)
    rand = rng.integers(0, 2**63, 200000, dtype=np.uint64)
    rand = (rand.astype(np.uint32) if src == np.float32 else rand).view(src)
    rand = rand[~np.isnan(rand)]
    if fmt == "half":      # numpy rounds directly from either type (no double rounding through f32)
        ref = np.concatenate([finite, rand]).astype(np.float16).view(np.uint16)
    else:
        vals = np.concatenate([finite, rand[:20000]])
        ref = [K.round_fraction(Fraction(float(v)), "bf16") if math.isfinite(v) else float(v) for v in vals]
        ref = np.copysign(np.array(ref, np.float32), vals.astype(np.float32))     # the zeros' signs
        ref = (ref.view(np.uint32) >> 16).astype(np.uint16)
        rand = rand[:20000]
    ins = np.concatenate([xs, finite, rand]).astype(src)
    got = jit(body, [ity], "i16", [ins.view(np.uint32 if src == np.float32 else np.uint64)], libcall)
    want = np.concatenate([want, ref])
    bad = np.nonzero(got != want)[0]
    assert not len(bad), [(float(ins[i]), hex(got[i]), hex(want[i])) for i in bad[:8]]
    got = jit(body, [ity], "i16", [nans], libcall)
    want = quiet_nan16(nans, 23 if src == np.float32 else 52, fmt)
    assert np.array_equal(got, want), [(hex(a), hex(b), hex(c)) for a, b, c in zip(nans, got, want)]


def widen_reference(bits, fmt, dst):
    """Exact widening; a NaN keeps sign and payload and gets the quiet bit."""
    frac, expb = FMT[fmt]
    vals = narrow_value(bits, fmt).astype(dst)
    out = vals.view(np.uint32 if dst == np.float32 else np.uint64).copy()
    nan = np.isnan(vals)
    dfrac, dexp = (23, 8) if dst == np.float32 else (52, 11)
    b = bits[nan].astype(np.uint64)
    out[nan] = ((b >> np.uint64(15)) << np.uint64(dfrac + dexp)) | np.uint64(((1 << dexp) - 1) << dfrac) \
        | np.uint64(1 << (dfrac - 1)) | ((b & np.uint64((1 << frac) - 1)) << np.uint64(dfrac - frac))
    return out


@pytest.mark.parametrize("fmt,dst,body,libcall", [
    ("half", "float", "%r0 = fpext half %h to float", "__extendhfsf2"),
    ("half", "double", "%r0 = call double @__extendhfdf2(half %h)", None),
    ("bfloat", "float", "%r0 = call float @__extendbfsf2(bfloat %h)", None),
    ("half", "float", "%r0 = call float @__gnu_h2f_ieee(i16 %a)", None),
])
def test_widening_is_exact_for_every_encoding(fmt, dst, body, libcall):
    ity = "i32" if dst == "float" else "i64"
    ir = f"%h = bitcast i16 %a to {fmt}\n  {body}\n  %r = bitcast {dst} %r0 to {ity}"
    bits = np.arange(65536, dtype=np.uint16)
    got = jit(ir, ["i16"], ity, [bits], libcall)
    want = widen_reference(bits, fmt, np.float32 if dst == "float" else np.float64)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), [(hex(bits[i]), hex(got[i]), hex(want[i])) for i in bad[:8]]


def test_gnu_f2h_ieee_takes_and_gives_integers():
    xs, want = neighbourhoods("half", np.float32)
    got = jit("%x = bitcast i32 %a to float\n  %r = call i16 @__gnu_f2h_ieee(float %x)", ["i32"], "i16",
              [xs.view(np.uint32)])
    assert np.array_equal(got, want)


# ------------------------------------------------------------------ 128-bit integers

def operands(rng, n, signed):
    out = []
    for _ in range(n):
        a = rng.getrandbits(rng.randint(0, 127 if signed else 128))
        b = rng.getrandbits(rng.randint(1, 127 if signed else 128)) or 1
        if signed:
            a, b = a * rng.choice((1, -1)), b * rng.choice((1, -1))
        out.append((a, b))
    lo = -(1 << 127) if signed else 0
    hi = (1 << 127) - 1 if signed else (1 << 128) - 1
    out += [(hi, 1), (lo, 1), (hi, hi), (0, hi), (hi, 3), (lo + 1, -1 if signed else 2), (7, 1 << 100),
            ((1 << 64) + 5, (1 << 64) - 1), ((1 << 64) - 1, (1 << 32))]
    return out


def tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@pytest.mark.parametrize("op,signed,libcall,ref", [
    ("udiv", False, "__udivti3", lambda a, b: a // b),
    ("urem", False, "__umodti3", lambda a, b: a % b),
    ("sdiv", True, "__divti3", tdiv),
    ("srem", True, "__modti3", lambda a, b: a - tdiv(a, b) * b),
])
def test_128_bit_division(op, signed, libcall, ref):
    pairs = operands(random.Random(op), 3000, signed)
    got = jit(f"%r = {op} i128 %a, %b", ["i128", "i128"], "i128",
              [i128([a for a, _ in pairs]), i128([b for _, b in pairs])], libcall)
    got = ints(got, signed)
    bad = [(a, b, g, ref(a, b)) for (a, b), g in zip(pairs, got) if g != ref(a, b)]
    assert not bad, bad[:5]


def wrap(v, signed=True):
    v &= (1 << 128) - 1
    return v - (1 << 128) if signed and v >> 127 else v


def test_128_bit_builtins_llvm_expands_itself_here():
    """__muloti4, __multi3, the divmods, shifts and bit counts: compiler-rt names LLVM may call on
    other targets; called by name, their results are Python's."""
    rng = random.Random(5)
    pairs = operands(rng, 400, True)
    pairs += [((1 << 63), (1 << 64)), ((1 << 63), -(1 << 64)), (-(1 << 127), -1), (-(1 << 127), 1),
              ((1 << 126), 2), (-(1 << 126), 2), ((1 << 64) - 1, (1 << 64) - 1), (3, 0), (0, -(1 << 127))]
    A, B = i128([a for a, _ in pairs]), i128([b for _, b in pairs])

    def run(body, out="i128", signed=True, ins=("i128", "i128")):
        got = jit(body, list(ins), out, [A, B])
        return ints(got, signed) if out == "i128" else [int(v) for v in got]
    mulo = "%o = alloca i32\n  %p = call i128 @__muloti4(i128 %a, i128 %b, ptr %o)\n  %ov = load i32, ptr %o\n  "
    assert run(mulo + "%r = add i128 %p, 0") == [wrap(a * b) for a, b in pairs]
    assert run(mulo + "%r = zext i32 %ov to i128") == [int(not -(1 << 127) <= a * b < (1 << 127))
                                                        for a, b in pairs]
    assert run("%r = call i128 @__multi3(i128 %a, i128 %b)") == [wrap(a * b) for a, b in pairs]
    nz = [(a, b) for a, b in pairs if b and not (a == -(1 << 127) and b == -1)]
    A, B = i128([a for a, _ in nz]), i128([b for _, b in nz])
    q = run("%m = alloca i128\n  %r = call i128 @__divmodti4(i128 %a, i128 %b, ptr %m)")
    rem = run("%m = alloca i128\n  %q = call i128 @__divmodti4(i128 %a, i128 %b, ptr %m)\n"
              "  %r = load i128, ptr %m")
    assert q == [tdiv(a, b) for a, b in nz] and rem == [a - tdiv(a, b) * b for a, b in nz]
    ua = [a & ((1 << 128) - 1) for a, _ in nz]
    ub = [b & ((1 << 128) - 1) for _, b in nz]
    rem = run("%m = alloca i128\n  %q = call i128 @__udivmodti4(i128 %a, i128 %b, ptr %m)\n"
              "  %r = load i128, ptr %m", signed=False)
    assert rem == [x % y for x, y in zip(ua, ub)]
    sh = [(int(lo) % 128) for lo, _ in B]
    assert run("%s = trunc i128 %b to i32\n  %s7 = and i32 %s, 127\n  %r = call i128 @__ashlti3(i128 %a, i32 %s7)") \
        == [wrap(a << s) for (a, _), s in zip(nz, sh)]
    assert run("%s = trunc i128 %b to i32\n  %s7 = and i32 %s, 127\n  %r = call i128 @__ashrti3(i128 %a, i32 %s7)") \
        == [a >> s for (a, _), s in zip(nz, sh)]
    assert run("%s = trunc i128 %b to i32\n  %s7 = and i32 %s, 127\n  %r = call i128 @__lshrti3(i128 %a, i32 %s7)",
               signed=False) == [u >> s for u, s in zip(ua, sh)]
    counts = {"popcount": lambda v, w: bin(v).count("1"), "parity": lambda v, w: bin(v).count("1") & 1,
              "clz": lambda v, w: w - v.bit_length(), "ctz": lambda v, w: (v & -v).bit_length() - 1 if v else w}
    for name, ref in counts.items():
        for sfx, w in (("si2", 32), ("di2", 64), ("ti2", 128)):
            if name in ("clz", "ctz") and sfx != "ti2":
                vals = [u & ((1 << w) - 1) for u in ua if u & ((1 << w) - 1)]
            else:
                vals = [u & ((1 << w) - 1) for u in ua]
            arg = "%a" if w == 128 else "%t"
            pre = "" if w == 128 else f"%t = trunc i128 %a to i{w}\n  "
            got = jit(f"{pre}%r = call i32 @__{name}{sfx}(i{w} {arg})", ["i128"], "i32", [i128(vals)])
            assert [int(g) for g in got] == [ref(v, w) for v in vals], (name, sfx)
    vals = [u & (2**64 - 1) for u in ua]
    got = jit("%t = trunc i128 %a to i64\n  %r = call i64 @__bswapdi2(i64 %t)", ["i128"], "i64", [i128(vals)])
    assert [int(g) for g in got] == [int.from_bytes(v.to_bytes(8, "little"), "big") for v in vals]
    got = jit("%t = trunc i128 %a to i32\n  %r = call i32 @__bswapsi2(i32 %t)", ["i128"], "i32", [i128(vals)])
    assert [int(g) for g in got] == [int.from_bytes((v & 0xFFFFFFFF).to_bytes(4, "little"), "big") for v in vals]


def test_128_bit_integer_float_conversions():
    rng = random.Random(11)
    vals = [rng.getrandbits(rng.randint(0, 127)) * rng.choice((1, -1)) for _ in range(3000)]
    vals += [(1 << 127) - 1, -(1 << 127), (1 << 53) + 1, (1 << 54) + 3, (1 << 24) + 1, (1 << 100) + (1 << 47),
             (1 << 100) + (1 << 47) + 1, (1 << 100) + (3 << 47), 0, -1]
    got = jit("%f = sitofp i128 %a to double\n  %r = bitcast double %f to i64", ["i128"], "i64",
              [i128(vals)], "__floattidf")
    assert list(got.view(np.float64)) == [float(v) for v in vals]
    want = np.array([K.round_fraction(Fraction(v), "f32") for v in vals], np.float32)
    got = jit("%f = call float @__floattisf(i128 %a)\n  %r = bitcast float %f to i32", ["i128"], "i32",
              [i128(vals)])
    assert np.array_equal(got.view(np.float32), want)
    uvals = [abs(v) * 2 + (v & 1) for v in vals if abs(v) < (1 << 127)] + [(1 << 128) - 1]
    got = jit("%f = uitofp i128 %a to float\n  %r = bitcast float %f to i32", ["i128"], "i32",
              [i128(uvals)], "__floatuntisf")
    want = np.array([K.round_fraction(Fraction(v), "f32") for v in uvals], np.float32)
    assert np.array_equal(got.view(np.float32), want)
    got = jit("%f = call double @__floatuntidf(i128 %a)\n  %r = bitcast double %f to i64", ["i128"], "i64",
              [i128(uvals)])
    assert list(got.view(np.float64)) == [float(v) for v in uvals]
    ds = np.array([float(v) for v in vals if abs(v) < (1 << 126)] + [0.5, -0.99, 1.5e-300, -2.5, 1e38],
                  np.float64)
    got = ints(jit("%x = bitcast i64 %a to double\n  %r = fptosi double %x to i128", ["i64"], "i128",
                   [ds.view(np.uint64)], "__fixdfti"), True)
    assert got == [int(x) for x in ds]
    fs = np.abs(ds).astype(np.float32)
    got = ints(jit("%x = bitcast i32 %a to float\n  %r = fptoui float %x to i128", ["i32"], "i128",
                   [fs.view(np.uint32)], "__fixunssfti"), False)
    assert got == [int(x) for x in fs]
    got = ints(jit("%x = bitcast i32 %a to float\n  %r = call i128 @__fixsfti(float %x)", ["i32"], "i128",
                   [(-fs).view(np.uint32)]), True)
    assert got == [int(x) for x in -fs]
    got = ints(jit("%x = bitcast i64 %a to double\n  %r = call i128 @__fixunsdfti(double %x)", ["i64"], "i128",
                   [np.abs(ds).view(np.uint64)]), False)
    assert got == [int(x) for x in np.abs(ds)]


@pytest.mark.parametrize("ty,libcall", [("float", "__powisf2"), ("double", "__powidf2")])
def test_powi_is_repeated_squaring(ty, libcall):
    """compiler-rt's definition (what LLVM folds and expands llvm.powi by), in the argument's type."""
    npt, ity = (np.float32, "i32") if ty == "float" else (np.float64, "i64")
    rng = np.random.default_rng(3)
    xs = (rng.standard_normal(4000) * rng.choice([0.5, 2.0, 30.0], 4000)).astype(npt)
    es = rng.integers(-40, 41, 4000).astype(np.int32)
    sfx = "f32" if ty == "float" else "f64"
    got = jit(f"%x = bitcast {ity} %a to {ty}\n  %p = call {ty} @llvm.powi.{sfx}.i32({ty} %x, i32 %b)\n"
              f"  %r = bitcast {ty} %p to {ity}", [ity, "i32"], ity, [xs.view(ity.replace("i", "uint")), es],
              libcall)

    def ref(a, b):
        r, recip = npt(1), b < 0
        while True:
            if b & 1:
                r = npt(r * a)
            b = int(b / 2)
            if b == 0:
                break
            a = npt(a * a)
        return npt(1) / r if recip else r
    with np.errstate(all="ignore"):
        want = np.array([ref(a, int(b)) for a, b in zip(xs, es)], npt)
    assert np.array_equal(got.view(npt), want, equal_nan=True)
