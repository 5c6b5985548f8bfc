"""sm_120's mma kinds (PTX ISA 8.7+): .kind::f8f6f4 (fp8/fp6/fp4 elements, each in an 8-bit container) and the
block-scaled .kind::mxf8f6f4 / .kind::mxf4 / .kind::mxf4nvf4, D = (A * scale_A) * (B * scale_B) + C, dense and
sparse (mma.sp::ordered_metadata). Which forms exist, the elements' decoding, and where each scale factor comes
from. The ISA leaves the accumulation's order and rounding unspecified and no sm_120 was at hand to measure:
these forms use one grid sum (mma_arith.tensor_dot), which an identity scale leaves unchanged (on sm_120a,
.kind::mxf8f6f4 with unit scales is reported to give .kind::f8f6f4's products bit for bit)."""

from __future__ import annotations

from ptx.codegen import mma_arith as M
from ptx.codegen import mma_layouts as L
from ptx.codegen.function_emitter import semantic, unsupported

NARROW = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
PACKED_FP4 = "e2m1p"            # .e2m1 of .kind::mxf4 / mxf4nvf4: packed eight to a register, no container
# kind -> (dense shape, sparse shape, element types, accumulators, {scale_vec: scale types}, default scale_vec)
KINDS = {
    "f8f6f4": ("m16n8k32", "m16n8k64", NARROW, ("f16", "f32"), None, None),
    "mxf8f6f4": ("m16n8k32", "m16n8k64", NARROW, ("f32",), {"1X": ("ue8m0",)}, "1X"),
    "mxf4": ("m16n8k64", "m16n8k128", ("e2m1",), ("f32",), {"2X": ("ue8m0",)}, "2X"),
    "mxf4nvf4": ("m16n8k64", "m16n8k128", ("e2m1",), ("f32",), {"2X": ("ue8m0",), "4X": ("ue8m0", "ue4m3")},
                 None),
}
SCALE_TYPES = ("ue8m0", "ue4m3")
# valid immediate selectors (ISA table 37): scale_vec -> (byte ids, thread-id-a values, thread-id-b values)
SELECTORS = {"1X": ((0, 1, 2, 3), (0, 1), (0, 1, 2, 3)), "2X": ((0, 2), (0, 1), (0, 1, 2, 3)),
             "4X": ((0,), (0, 1), (0, 1, 2, 3))}


def parse(form, ins, mods):
    """Take a kind form's own modifiers out of `mods` (returned), setting form.kind / form.scale (None or
    (n, stype): n scale factors along k) and the element types the layouts use; refuses what ptxas refuses."""
    kind = next(m for m in mods if m.startswith("kind::"))[len("kind::"):]
    if kind not in KINDS:
        unsupported(ins)
    dense, sparse_shape, elems, accs, scales, default = KINDS[kind]
    vecs = [m[len("scale_vec::"):] for m in mods if m.startswith("scale_vec::")]
    stypes = [m for m in mods if m in SCALE_TYPES]
    block = "block_scale" in mods
    types = [m for m in mods if m in NARROW or m in ("f16", "f32")]
    shapes = [m for m in mods if L.shape_mnk(m)]
    ok = len(types) == 4 and len(shapes) == 1 and len(vecs) <= 1 and block == (scales is not None)
    ok = ok and len(stypes) == (1 if block else 0)
    if ok:
        dt, at, bt, ct = types
        shape = sparse_shape if form.sparse is not None else dense
        vec = vecs[0] if vecs else default
        ok = shapes[0] == shape and at in elems and bt in elems and ct == dt and ct in accs
        ok = ok and (not block or (vec in scales and stypes[0] in scales[vec]))
        ok = ok and (form.sparse is None or "sp::ordered_metadata" in mods)
    if not ok:
        unsupported(ins)
    if form.sparse not in (None, 0):        # every sparse kind form has its metadata in all four lanes of a quad
        semantic(ins, f"sparsity selector {form.sparse} of mma.sp.{shape}.kind::{kind} is not 0")
    form.kind = kind
    form.scale = (int(vec[0]), stypes[0]) if block else None
    if kind in ("mxf4", "mxf4nvf4"):
        at = bt = PACKED_FP4
    drop = {f"kind::{kind}", "block_scale", *(f"scale_vec::{v}" for v in vecs), *stypes}
    out = [m for m in mods if m not in drop and m not in types]
    return out, (dt, at, bt, ct)


def check_selectors(form, ins, pairs):
    """The immediate {byte-id, thread-id} selectors of scale A and B against the ISA's table 37."""
    bytes_ok, tid_a, tid_b = SELECTORS[f"{form.scale[0]}X"]
    for (bid, tid), tids, what in zip(pairs, (tid_a, tid_b), "ab"):
        if bid is not None and bid not in bytes_ok:
            semantic(ins, f"byte-id-{what} {bid} is not one of {bytes_ok} for scale_vec::{form.scale[0]}X")
        if tid is not None and tid not in tids:
            semantic(ins, f"thread-id-{what} {tid} is not one of {tids}")


def narrow_to_f16(em, raw, ty):
    """i16 f16 bits (exact) of a raw fp6/fp4 element: an 8-bit container (.e2m1 in bits 5..2, .e3m2/.e2m3 in
    bits 5..0) or a packed 4-bit .e2m1."""
    from ptx.codegen.ops_narrow_float import FORMATS, decode_half
    f = em.f
    width = 4 if ty == PACKED_FP4 else 8
    code = f.op(f"zext i{width} {raw} to i32")
    if ty == "e2m1":
        code = f.op(f"and i32 {f.op(f'lshr i32 {code}, 2')}, 15")
    elif ty in ("e3m2", "e2m3"):
        code = f.op(f"and i32 {code}, 63")
    return decode_half(em, code, FORMATS["e2m1" if ty == PACKED_FP4 else ty], False)


def scale_factor(em, byte, stype):
    """(double value, i32 exponent estimate) of a scale factor byte (i32): .ue8m0 2^(x-127) (0xFF: NaN);
    .ue4m3 an unsigned e4m3 (bit 7 unused; 0x7F: NaN)."""
    from ptx.codegen.ops_narrow_float import FORMATS, decode_half
    f = em.f
    if stype == "ue8m0":
        biased = f.op(f"add i32 {byte}, 896")          # the double's exponent field: x - 127 + 1023
        bits = f.op(f"shl i64 {f.op(f'zext i32 {biased} to i64')}, 52")
        v = f.op(f"bitcast i64 {bits} to double")
        v = f.op(f"select i1 {f.op(f'icmp eq i32 {byte}, 255')}, double 0x7FF8000000000000, double {v}")
        return v, f.op(f"sub i32 {byte}, 127")
    code = f.op(f"and i32 {byte}, 127")
    h = decode_half(em, code, FORMATS["e4m3"], False)
    v = f.op(f"fpext half {f.op(f'bitcast i16 {h} to half')} to double")
    em.m.declare("declare i32 @llvm.umax.i32(i32, i32)")
    e = f.op(f"call i32 @llvm.umax.i32(i32 {f.op(f'lshr i32 {code}, 3')}, i32 1)")
    return v, f.op(f"sub i32 {e}, 7")


def scaled_pairs(em, form, pairs, chunk_of, scales, word):
    """The products' elements times their scale factors: `chunk_of(q)` the k chunk of pair q, `scales` the slot's
    (scale-A words of the row's quad, scale-B words of the column's quad, the selector word, row >= 8),
    `word(req)` a requested word's value. Row r's scale A comes from lane 4(r%8) + 2 thread-id-a + (r >= 8),
    column n's scale B from lane 4n + thread-id-b; chunk c's factor is byte byte-id + c of that word."""
    f = em.f
    n, stype = form.scale
    sfa, sfb, sel, hi = scales
    s = word(sel)
    field = lambda i: f.op(f"and i32 {f.op(f'lshr i32 {s}, {8 * i}')}, 255")
    bid_a, tid_a, bid_b, tid_b = (field(i) for i in range(4))

    def pick(reqs, idx):
        v = word(reqs[0])
        for i, r in enumerate(reqs[1:], 1):
            v = f.op(f"select i1 {f.op(f'icmp eq i32 {idx}, {i}')}, i32 {word(r)}, i32 {v}")
        return v

    pair = f.op(f"shl i32 {f.op(f'and i32 {tid_a}, 1')}, 1")
    wa = pick(sfa, f.op(f"add i32 {pair}, {hi}"))
    wb = pick(sfb, f.op(f"and i32 {tid_b}, 3"))

    def factor(w, bid, c):
        byte = f.op(f"and i32 {f.op(f'add i32 {bid}, {c}')}, 3")
        shift = f.op(f"shl i32 {byte}, 3")
        return scale_factor(em, f.op(f"and i32 {f.op(f'lshr i32 {w}, {shift}')}, 255"), stype)

    memo = {}
    out = []
    for q, (a, b) in enumerate(pairs):
        c = chunk_of(q)
        if c not in memo:
            memo[c] = (factor(wa, bid_a, c), factor(wb, bid_b, c))
        (va, ea), (vb, eb) = memo[c]
        out.append((M.Num(f.op(f"fmul double {a.value}, {va}"), f.op(f"add i32 {a.est}, {ea}")),
                    M.Num(f.op(f"fmul double {b.value}, {vb}"), f.op(f"add i32 {b.est}, {eb}"))))
    return out
