"""sm_120's mma kinds: .kind::f8f6f4 (fp8/fp6/fp4 in 8-bit containers) and the block-scaled .kind::mxf8f6f4 /
mxf4 / mxf4nvf4, dense and sparse. Fresh random elements, scale factors and selectors, chosen so that every D
element is exact in the accumulator type: any order of accumulation gives it, so these check the layouts (the
ISA's), the element and scale decodings, and which lane and byte each scale factor comes from, against a model
written here from the ISA. The rounding of inexact sums is unspecified and was not measured on an sm_120."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import mma_ref as R
import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)
from test_instr_mma_sparse import _meta_cell, _sparse_b_layout

import ptx

HEADER = ".version 8.8\n.target sm_120a\n.address_size 64\n"
# format -> (exponent bits, mantissa bits, bias); .e4m3's 0x7F / 0xFF and .e5m2's top exponent are not finite
FMT = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15), "e3m2": (3, 2, 3), "e2m3": (2, 3, 1), "e2m1": (2, 1, 1)}


def value(code, ty):
    e_bits, m_bits, bias = FMT[ty]
    sign = -1 if code >> (e_bits + m_bits) & 1 else 1
    e, m = code >> m_bits & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    if e == 0:
        return sign * Fraction(m, 1 << m_bits) * Fraction(2) ** (1 - bias)
    return sign * (1 + Fraction(m, 1 << m_bits)) * Fraction(2) ** (e - bias)


def pool(ty, lo, hi):
    """(code, value) of the finite codes whose magnitude is 0 or within [lo, hi]."""
    e_bits, m_bits, _ = FMT[ty]
    out = []
    for code in range(1 << (1 + e_bits + m_bits)):
        if ty == "e4m3" and code & 0x7F == 0x7F or ty == "e5m2" and code >> 2 & 31 == 31:
            continue
        v = value(code, ty)
        if v == 0 or lo <= abs(v) <= hi:
            out.append((code, v))
    return out


def container(code, ty, packed):
    """The bits an element occupies: packed .e2m1 as is; in a container .e2m1 sits in bits 5..2."""
    return code if packed or ty != "e2m1" else code << 2


UE4M3 = [(c, value(c, "e4m3")) for c in range(0x7F) if value(c, "e4m3") in
         (Fraction(1, 2), Fraction(3, 4), 1, Fraction(3, 2), 2, 3)]


class Case:
    def __init__(self, kind, at, bt, acc="f32", sparse=False, vec=None, stype=None, sel=((0, 0), (0, 0)),
                 reg_sel=False):
        self.kind, self.at, self.bt, self.acc, self.sparse = kind, at, bt, acc, sparse
        self.vec, self.stype, self.sel, self.reg_sel = vec, stype, sel, reg_sel
        self.packed = kind in ("mxf4", "mxf4nvf4")
        k = (64 if self.packed else 32) * (2 if sparse else 1)
        self.shape, self.k = f"m16n8k{k}", k
        self.bits = 4 if self.packed else 8
        self.na = 16 * (k // (2 if sparse else 1)) * self.bits // 1024
        self.nb = k * 8 * self.bits // 1024
        self.nc = 2 if acc == "f16" else 4

    def __repr__(self):
        return (f"{self.kind}-{self.at}-{self.bt}-{self.acc}{'-sp' if self.sparse else ''}"
                f"{'-' + str(self.vec) + 'X-' + self.stype if self.vec else ''}-{self.sel}{'-reg' if self.reg_sel else ''}")

    def ptx(self):
        scale = f".block_scale.scale_vec::{self.vec}X" if self.vec else ""
        op = "mma.sp::ordered_metadata" if self.sparse else "mma"
        ins = (f"{op}.sync.aligned.{self.shape}.row.col.kind::{self.kind}{scale}.{self.acc}.{self.at}.{self.bt}."
               f"{self.acc}{'.' + self.stype if self.vec else ''}")
        regs = lambda p, n: "{" + ", ".join(f"%{p}{i}" for i in range(n)) + "}"
        ops = [regs("d", self.nc), regs("a", self.na), regs("b", self.nb), regs("c", self.nc)]
        loads = [f"%a{i}" for i in range(self.na)] + [f"%b{i}" for i in range(self.nb)] + \
            [f"%c{i}" for i in range(self.nc)]
        if self.sparse:
            ops += ["%e", "0"]
            loads.append("%e")
        if self.vec:
            loads += ["%sa", "%sb"]
            if self.reg_sel:
                loads += ["%sel"]
                sels = ["{%h0, %h1}", "{%h2, %h3}"]
            else:
                sels = ["{%d, %d}" % self.sel[0], "{%d, %d}" % self.sel[1]]
            ops += ["%sa", sels[0], "%sb", sels[1]]
        lines = [".visible .entry k(.param .u64 pin, .param .u64 pout)", "{",
                 f".reg .b32 %a<{self.na}>, %b<{self.nb}>, %c<4>, %d<4>, %e, %sa, %sb, %sel, %lane;",
                 ".reg .b16 %h<4>;", ".reg .u64 %p<2>, %off;",
                 "ld.param.u64 %p0, [pin];", "ld.param.u64 %p1, [pout];", "mov.u32 %lane, %tid.x;",
                 f"mul.wide.u32 %off, %lane, {4 * len(loads)};", "add.u64 %p0, %p0, %off;"]
        lines += [f"ld.global.b32 {r}, [%p0+{4 * i}];" for i, r in enumerate(loads)]
        if self.vec and self.reg_sel:
            for i in range(4):      # byte-id-a, thread-id-a, byte-id-b, thread-id-b: a byte each
                lines += [f"bfe.u32 %e, %sel, {8 * i}, 8;", f"cvt.u16.u32 %h{i}, %e;"]
        lines += [f"{ins} {', '.join(ops)};", f"mul.wide.u32 %off, %lane, {4 * self.nc};", "add.u64 %p1, %p1, %off;"]
        lines += [f"st.global.b32 [%p1+{4 * i}], %d{i};" for i in range(self.nc)]
        # .scale_vec::4X with .ue8m0 scales came in PTX ISA 9.1
        header = HEADER.replace("8.8", "9.1") if (self.vec, self.stype) == (4, "ue8m0") else HEADER
        return header + "\n".join(lines + ["ret;", "}"]) + "\n"


def problem(case, rng, lo=Fraction(1, 2), hi=4):
    """Inputs (the words of each lane) and the exact D, resampled until every D element is exact in the
    accumulator type."""
    m, n, k = 16, 8, case.k
    small = case.acc == "f16"
    pa, pb = pool(case.at, lo, 2 if small else hi), pool(case.bt, lo, 2 if small else hi)
    if small:               # f16 D: halves only, so that sums stay within f16's 11 bits
        pa, pb = ([(c, v) for c, v in p if (2 * v).denominator == 1] for p in (pa, pb))
    nvec = case.vec or 1
    for _ in range(50):
        ca = [[pa[i] for i in rng.integers(len(pa), size=k // (2 if case.sparse else 1))] for _ in range(m)]
        cb = [[pb[i] for i in rng.integers(len(pb), size=n)] for _ in range(k)]
        cc = [[Fraction(int(rng.integers(-64, 65)), 4) for _ in range(n)] for _ in range(m)]
        if case.stype == "ue4m3":
            sa = [[UE4M3[i] for i in rng.integers(len(UE4M3), size=nvec)] for _ in range(m)]
            sb = [[UE4M3[i] for i in rng.integers(len(UE4M3), size=n)] for _ in range(nvec)]
        else:
            ex = lambda: (lambda x: (127 + x, Fraction(2) ** x))(int(rng.integers(-2, 3)))
            sa = [[ex() for _ in range(nvec)] for _ in range(m)]
            sb = [[ex() for _ in range(n)] for _ in range(nvec)]
        if not case.vec:
            sa = [[(0x7F, 1)] for _ in range(m)]
            sb = [[(0x7F, 1)] * n]
        dense = [[(0, Fraction(0))] * k for _ in range(m)]
        meta = [0] * 32
        pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
        if case.sparse:
            per = 4 if case.packed else 2          # stored elements per metadata group
            for r in range(m):
                for q in range(k // (2 * per)):
                    i0, i1 = pairs[int(rng.integers(6))]
                    lane, nib = _meta_cell(case.shape, "s4" if case.packed else "s8", 0, r, q)
                    meta[lane] |= (i0 | i1 << 2) << (4 * nib)
                    st = ca[r][per * q:per * (q + 1)]
                    if case.packed:
                        dense[r][8 * q + 2 * i0:8 * q + 2 * i0 + 2] = st[:2]
                        dense[r][8 * q + 2 * i1:8 * q + 2 * i1 + 2] = st[2:]
                    else:
                        dense[r][4 * q + i0], dense[r][4 * q + i1] = st
        else:
            dense = ca
        d = [[cc[r][c] + sum(dense[r][q][1] * sa[r][q * nvec // k][1] * cb[q][c][1] * sb[q * nvec // k][c][1]
                             for q in range(k)) for c in range(n)] for r in range(m)]
        np_t = np.float16 if small else np.float32
        if all(Fraction(float(np_t(float(x)))) == x for row in d for x in row):
            break
    else:
        raise AssertionError("no exact problem found")
    raw = lambda rows, ty: [[container(code, ty, case.packed) for code, _ in row] for row in rows]
    half_k = f"m16n8k{k // 2}" if case.sparse else case.shape
    elem = "s4" if case.packed else "s8"
    a_words = R.from_matrix(raw(ca, case.at), R.mma_layout(half_k, "a", elem), case.bits)
    b_lay = _sparse_b_layout(k, case.bits) if case.sparse else R.mma_layout(case.shape, "b", elem)
    b_words = R.from_matrix(raw(cb, case.bt), b_lay, case.bits)
    cbits = lambda x: int(np.array([np_t(float(x))]).view(np.uint16 if small else np.uint32)[0])
    c_lay = R.mma_layout(case.shape, "c", "f32")
    cw = R.from_matrix([[cbits(x) for x in row] for row in cc], c_lay, 16 if small else 32)
    dw = R.from_matrix([[cbits(x) for x in row] for row in d], c_lay, 16 if small else 32)
    cols = [a_words, b_words, cw[:, :case.nc]]
    if case.sparse:
        cols.append(np.array(meta, np.uint32)[:, None])
    if case.vec:
        cols.append(scale_words(case, rng, sa, sb))
    return np.ascontiguousarray(np.concatenate(cols, axis=1).astype(np.uint32)), dw[:, :case.nc]


def scale_words(case, rng, sa, sb):
    """Each lane's scale-A and scale-B words (and selector word): random bytes everywhere, the factors only where
    the selectors say (A: row r in lane 4(r%8) + 2 thread-id-a + r//8; B: column n in lane 4n + thread-id-b;
    factor c in byte byte-id + c)."""
    (bid_a, tid_a), (bid_b, tid_b) = case.sel
    w = rng.integers(0, 256, size=(32, 2, 4))
    for r in range(16):
        for c, (code, _) in enumerate(sa[r]):
            w[4 * (r % 8) + 2 * tid_a + r // 8, 0, bid_a + c] = code
    for c, row in enumerate(sb):
        for col, (code, _) in enumerate(row):
            w[4 * col + tid_b, 1, bid_b + c] = code
    words = (w[:, :, 0] | w[:, :, 1] << 8 | w[:, :, 2] << 16 | w[:, :, 3] << 24).astype(np.uint32)
    if case.reg_sel:
        sel = np.full((32, 1), bid_a | tid_a << 8 | bid_b << 16 | tid_b << 24, np.uint32)
        words = np.concatenate([words, sel], axis=1)
    return words


CASES = [
    Case("f8f6f4", "e4m3", "e4m3"), Case("f8f6f4", "e5m2", "e2m1"), Case("f8f6f4", "e3m2", "e2m3", "f16"),
    Case("f8f6f4", "e2m1", "e2m1"), Case("f8f6f4", "e2m3", "e4m3", "f16"),
    Case("f8f6f4", "e2m1", "e3m2", sparse=True), Case("f8f6f4", "e4m3", "e5m2", "f16", sparse=True),
    Case("mxf8f6f4", "e4m3", "e2m1", vec=1, stype="ue8m0", sel=((2, 1), (1, 3))),
    Case("mxf8f6f4", "e3m2", "e3m2", vec=1, stype="ue8m0", sel=((3, 0), (0, 2)), sparse=True),
    Case("mxf8f6f4", "e5m2", "e2m3", vec=1, stype="ue8m0", sel=((1, 1), (2, 1)), reg_sel=True),
    Case("mxf4", "e2m1", "e2m1", vec=2, stype="ue8m0", sel=((2, 0), (0, 2))),
    Case("mxf4", "e2m1", "e2m1", vec=2, stype="ue8m0", sel=((0, 1), (2, 3)), sparse=True),
    Case("mxf4nvf4", "e2m1", "e2m1", vec=2, stype="ue8m0", sel=((2, 1), (2, 1))),
    Case("mxf4nvf4", "e2m1", "e2m1", vec=4, stype="ue8m0", sel=((0, 1), (0, 3))),
    Case("mxf4nvf4", "e2m1", "e2m1", vec=4, stype="ue4m3", sel=((0, 0), (0, 1))),
    Case("mxf4nvf4", "e2m1", "e2m1", vec=4, stype="ue4m3", sel=((0, 1), (0, 2)), sparse=True),
    Case("mxf4nvf4", "e2m1", "e2m1", vec=2, stype="ue8m0", sel=((2, 1), (0, 3)), reg_sel=True),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_exact_products(case, rng):
    words, want = problem(case, rng)
    out = K.poison(want.shape, np.uint32, rng)
    K.launch(K.compile_text(case.ptx()).kernel("k"), 1, 32, [words, out])
    bad = np.argwhere(out != want)
    assert not len(bad), f"{len(bad)} of {want.size} D words differ, first at lane {bad[0][0]} register " \
                         f"{bad[0][1]}: {out[tuple(bad[0])]:#x} != {want[tuple(bad[0])]:#x}"


def test_identity_scale_is_the_plain_kind(rng):
    """Random finite elements and C (inexact sums): .kind::mxf8f6f4 with every scale 2^0 gives .kind::f8f6f4's D
    bit for bit, as sm_120a's do."""
    plain, scaled = Case("f8f6f4", "e4m3", "e5m2"), Case("mxf8f6f4", "e4m3", "e5m2", vec=1, stype="ue8m0")
    codes = {ty: np.array([c for c, _ in pool(ty, Fraction(1, 1 << 20), 1 << 20)], np.uint32) for ty in FMT}
    fp8_words = lambda ty, n: sum(rng.choice(codes[ty], size=(32, n)) << np.uint32(8 * i) for i in range(4))
    c = rng.standard_normal((32, 4)).astype(np.float32).view(np.uint32)
    words = np.concatenate([fp8_words("e4m3", plain.na), fp8_words("e5m2", plain.nb), c], axis=1)
    outs = []
    for case, extra in ((plain, []), (scaled, [np.full((32, 2), 0x7F7F7F7F, np.uint32)])):
        out = K.poison((32, 4), np.uint32, rng)
        args = np.ascontiguousarray(np.concatenate([words] + extra, axis=1).astype(np.uint32))
        K.launch(K.compile_text(case.ptx()).kernel("k"), 1, 32, [args, out])
        outs.append(out)
    assert np.array_equal(*outs)
    assert len(np.unique(outs[0])) > 100       # results of their own, not a constant


def test_nan_scale_gives_nan(rng):
    case = Case("mxf4", "e2m1", "e2m1", vec=2, stype="ue8m0")
    words, _ = problem(case, rng)
    words[:, -2] = 0xFFFFFFFF          # every scale-A byte 0xFF: NaN
    out = K.poison((32, 4), np.uint32, rng)
    K.launch(K.compile_text(case.ptx()).kernel("k"), 1, 32, [words, out])
    assert (out == 0x7FFFFFFF).all()


BAD = [
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.block_scale.f32.e4m3.e4m3.f32.ue8m0", "unsupported"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e4m3.e4m3.f32.ue8m0", "unsupported"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.f32.e2m1.e2m1.f32.ue8m0", "unsupported"),
    ("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.f16.e4m3.e4m3.f16.ue8m0", "unsupported"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue4m3",
     "unsupported"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32", "unsupported"),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.s8.s8.f32", "unsupported"),
]


@pytest.mark.parametrize("ins,why", BAD)
def test_forms_ptxas_refuses(ins, why):
    scaled = "block_scale" in ins
    ops = "{%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r0,%r1,%r2,%r3}" + \
        (", %r10, {0, 0}, %r11, {0, 0}" if scaled else "")
    text = f"{HEADER}.visible .entry k()\n{{\n.reg .b32 %r<12>;\n{ins} {ops};\nret;\n}}\n"
    with pytest.raises(ptx.PTXUnsupportedError):
        ptx.compile(text)


@pytest.mark.parametrize("vec,sel,why", [(2, "{1, 0}", "byte-id-a 1"), (4, "{2, 0}", "byte-id-a 2"),
                                         (1, "{0, 2}", "thread-id-a 2")])
def test_bad_selectors(vec, sel, why):
    kind = {1: "mxf8f6f4", 2: "mxf4", 4: "mxf4nvf4"}[vec]
    shape = "m16n8k32" if vec == 1 else "m16n8k64"
    ins = (f"mma.sync.aligned.{shape}.row.col.kind::{kind}.block_scale.scale_vec::{vec}X.f32."
           f"{'e4m3.e4m3' if vec == 1 else 'e2m1.e2m1'}.f32.{'ue4m3' if vec == 4 else 'ue8m0'}")
    text = (f"{HEADER}.visible .entry k()\n{{\n.reg .b32 %r<12>;\n{ins} {{%r0,%r1,%r2,%r3}}, {{%r4,%r5,%r6,%r7}}, "
            f"{{%r8,%r9}}, {{%r0,%r1,%r2,%r3}}, %r10, {sel}, %r11, {{0, 0}};\nret;\n}}\n")
    with pytest.raises(ptx.PTXError, match=why):
        ptx.compile(text)
