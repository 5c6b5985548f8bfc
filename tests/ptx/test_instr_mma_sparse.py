"""mma.sp (2:4 structured sparse A; 4:8 in pairs for 4-bit types): every form an NVIDIA H100 ran
(tests/data/nvidia_mma_sp_answers.json, from scripts/nvidia_mma_sp_probe.cu), each sparsity selector, each
recorded warp replayed bit for bit (every lane's D registers, outputs poisoned; .e4m3/.e5m2 also on random values
whose sums round); with fresh random values, a sparse product equals the dense mma.sync of A expanded by its
metadata (the same products: the dense forms' arithmetic is checked against an H200 in test_instr_mma.py) and
every integer form equals numpy's; and the forms and selectors ptxas refuses are refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mma_kernels as MK
import mma_ref as R
import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

import ptx

ANSWERS = json.loads((Path(__file__).resolve().parents[1] / "data" / "nvidia_mma_sp_answers.json").read_text())
KS = K.KernelSet(target="sm_90")


def _split(form):
    """(variant, shape, 'row.col' types) of an answers key: 'm16n8k128.satfinite.s32.s4.u4.s32' or
    'm16n8k128.ordered.s32...' (sp::ordered_metadata)."""
    shape, rest = form.split(".", 1)
    if rest.startswith("ordered."):
        return "sp::ordered_metadata", shape, rest[len("ordered."):]
    return "sp", shape, rest


def _regs(form):
    _v, shape, types = _split(form)
    _dt, at, _bt, ct = types.split(".")[-4:]
    k = R.shape_mnk(shape)[2]
    na = k * R.BITS[at] // 128          # k/2 stored columns of 16 rows over 32 lanes; B the same count
    nc = 2 if ct == "f16" else 4
    return na, na, nc


def sparse_kernel(name, form, selector, variant=None):
    """in: per thread a, b, c words and the metadata word; out: d words. One warp per trial."""
    na, nb, nc = _regs(form)
    ra, da = MK._regs("ra", na, False)
    rb, db = MK._regs("rb", nb, False)
    rc, dc = MK._regs("rc", nc, False)
    rd, dd = MK._regs("rd", nc, False)
    n_in = na + nb + nc + 1
    lines = [f".visible .entry {name}"] + MK._prologue(["pin", "pout"]) + [da, db, dc, dd, ".reg .b32 %meta;"]
    lines.append(f"mul.wide.u32 %off, %gt, {n_in * 4};\nadd.u64 %base, %p0, %off;")
    for i, r in enumerate(ra + rb + rc + ["%meta"]):
        lines.append(f"ld.global.b32 {r}, [%base+{i * 4}];")
    var, shape, types = _split(form)
    lines.append(f"mma.{variant or var}.sync.aligned.{shape}.row.col.{types} {{{', '.join(rd)}}}, "
                 f"{{{', '.join(ra)}}}, {{{', '.join(rb)}}}, {{{', '.join(rc)}}}, %meta, {selector};")
    lines.append(f"mul.wide.u32 %off, %gt, {nc * 4};\nadd.u64 %base, %p1, %off;")
    for i, r in enumerate(rd):
        lines.append(f"st.global.b32 [%base+{i * 4}], {r};")
    return "\n".join(lines + ["ret;", "}"])


def _add(form, sel):
    name = K.kname("mmasp", form, sel)
    return KS.add(name, sparse_kernel(name, form, sel))


NAMES = {(form, int(sel)): _add(form, sel) for form, sels in ANSWERS.items() for sel in sels if sel.isdigit()}
# integer forms checked against numpy with fresh values (form, selectors)
INT_FORMS = [("m16n8k32.s32.s8.s8.s32", 2), ("m16n8k32.satfinite.s32.u8.s8.s32", 2), ("m16n8k64.s32.u8.u8.s32", 1),
             ("m16n8k64.s32.s4.s4.s32", 2), ("m16n8k64.satfinite.s32.u4.s4.s32", 2),
             ("m16n8k128.s32.u4.u4.s32", 1), ("m16n8k128.satfinite.s32.s4.u4.s32", 1),
             ("m16n8k128.ordered.s32.s4.s4.s32", 1)]
INT_NAMES = {(form, sel): NAMES.get((form, sel)) or _add(form, sel) for form, n in INT_FORMS for sel in range(n)}


def _words(trials, form):
    na, nb, nc = _regs(form)
    rows = []
    for tr in trials:
        for t in range(32):
            rows.append(tr["a"][t][:na] + tr["b"][t][:nb] + tr["c"][t][:nc] + [tr["e"][t]])
    return np.array(rows, np.uint32)


ORDERED = KS.add("mmasp_ordered", sparse_kernel("mmasp_ordered", "m16n8k32.f32.bf16.bf16.f32", 1,
                                                "sp::ordered_metadata"))


RANDOM = sorted((form, "random") for form, sels in ANSWERS.items() if "random" in sels)


@pytest.mark.parametrize("form,selector", sorted(NAMES) + [("m16n8k32.f32.bf16.bf16.f32", "ordered")] + RANDOM)
def test_recorded_answers(form, selector, rng):
    """(.sp::ordered_metadata: the same products; the recorded metadata is ordered, as it requires. "random": the
    .e4m3/.e5m2 warps of random finite values, whose sums round, with selector 0)"""
    kern = KS.kernel(ORDERED if selector == "ordered" else NAMES[(form, 0 if selector == "random" else selector)])
    rec = ANSWERS[form]["1" if selector == "ordered" else str(selector)]
    assert rec["error"] == 0
    words = _words(rec["trials"], form)
    nc = _regs(form)[2]
    out = K.poison((len(words), nc), np.uint32, rng)
    K.launch(kern, len(rec["trials"]), 32, [words, out])
    want = np.array([tr["d"][t][:nc] for tr in rec["trials"] for t in range(32)], np.uint32)
    bad = np.argwhere(out != want)
    assert not len(bad), f"{len(bad)} of {want.size} D words differ, first at warp/lane {bad[0][0] // 32}/" \
                         f"{bad[0][0] % 32} register {bad[0][1]}: {out[tuple(bad[0])]:#x} != {want[tuple(bad[0])]:#x}"


# ------------------------------------------------------------------ against the dense form

def _meta_cell(shape, ty, sel, r, q):
    """(lane, nibble) of row r's metadata group q: the H100's answers' fit, written here apart from the code
    generator's copy (ptx/codegen/mma_layouts.py)."""
    m, n, k = R.shape_mnk(shape)
    g, hi = r % 8, r // 8
    if R.BITS[ty] <= 8:
        return 4 * g + 2 * (sel + q // 8) + hi, q % 8
    groups = k // 2 if ty == "tf32" else k // 4
    return 4 * g + sel * (groups // 4) + q // 4, 4 * hi + q % 4


@pytest.mark.parametrize("shape,ty,selector", [("m16n8k16", "f16", 0), ("m16n8k16", "f16", 3), ("m16n8k16", "bf16", 1),
                                               ("m16n8k8", "tf32", 2)])
def test_sparse_is_dense_on_expanded_a(shape, ty, selector, rng):
    """Random normal values (inexact sums): the sparse product and the dense one of the expanded A agree bit for
    bit, lane by lane."""
    m, n, k = R.shape_mnk(shape)
    bits = R.BITS[ty]
    lay_a = R.mma_layout(f"m{m}n{n}k{k // 2}", "a", ty)
    lay_ad = R.mma_layout(shape, "a", ty)
    lay_b = R.mma_layout(shape, "b", ty)
    lay_c = R.mma_layout(shape, "c", "f32")

    def raw(x):
        if ty == "f16":
            return int(np.float16(x).view(np.uint16))
        if ty == "bf16":
            return int(np.float32(x).view(np.uint32)) >> 16
        return int(np.float32(x).view(np.uint32)) & ~0x1FFF

    comp = [[raw(rng.standard_normal()) for _ in range(k // 2)] for _ in range(m)]
    bm = [[raw(rng.standard_normal()) for _ in range(n)] for _ in range(k)]
    cm = [[int(np.float32(rng.standard_normal()).view(np.uint32)) for _ in range(n)] for _ in range(m)]
    meta = [0] * 32
    dense = [[0] * k for _ in range(m)]
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    for r in range(m):
        for q in range(k // 2 if ty == "tf32" else k // 4):
            lane, nib = _meta_cell(shape, ty, selector, r, q)
            if ty == "tf32":
                second = int(rng.integers(2))
                meta[lane] |= (0xE if second else 0x4) << (4 * nib)
                dense[r][2 * q + second] = comp[r][q]
            else:
                i0, i1 = pairs[int(rng.integers(6))]
                meta[lane] |= (i0 | i1 << 2) << (4 * nib)
                dense[r][4 * q + i0], dense[r][4 * q + i1] = comp[r][2 * q], comp[r][2 * q + 1]
    a_words = R.from_matrix(comp, lay_a, bits)
    b_words = R.from_matrix(bm, lay_b, bits)
    c_words = R.from_matrix(cm, lay_c, 32)
    form = f"{shape}.row.col.f32.{ty}.{ty}.f32"
    words = np.concatenate([a_words, b_words, c_words, np.array(meta, np.uint32)[:, None]], axis=1)
    kern = KS.kernel(NAMES[(form.replace("row.col.", ""), selector)])
    out = K.poison((32, 4), np.uint32, rng)
    K.launch(kern, 1, 32, [words, out])
    dense_words = np.concatenate([R.from_matrix(dense, lay_ad, bits), b_words, c_words], axis=1)
    text = MK.module(MK.mma_sync_kernel("dense", f"mma.sync.aligned.{form}", dense_words.shape[1] - b_words.shape[1]
                                        - 4, b_words.shape[1], 4, 4, False))
    want = K.poison((32, 4), np.uint32, rng)
    ptx.compile(text).kernel("dense").launch(1, 32, [np.ascontiguousarray(dense_words), want])
    assert np.array_equal(out, want), f"{int(np.sum(out != want))} of 128 D words differ from the dense product's"


def _sparse_b_layout(k, bits):
    """B of mma.sp with 8- or 4-bit elements (ISA: one register per k/4 rows, each holding a lane's
    consecutive elements)."""
    per = 32 // bits
    return [[(per * (lane % 4) + i % per + 4 * per * (i // per), lane // 4) for i in range(k * 8 // 32)]
            for lane in range(32)]


@pytest.mark.parametrize("form,selector", sorted(INT_NAMES))
def test_integer_forms_against_numpy(form, selector, rng):
    """Fresh random values over each type's whole range, and C near the s32 limits: D = A*B + C of A expanded by
    its metadata (8-bit: 2 of each 4 columns; 4-bit: 2 of each 4 column pairs), wrapped or (.satfinite) clamped."""
    _v, shape, types = _split(form)
    _dt, at, bt, _ct = types.split(".")[-4:]
    m, n, k = R.shape_mnk(shape)
    bits = R.BITS[at]
    span = lambda ty: (-(1 << (bits - 1)), 1 << (bits - 1)) if ty[0] == "s" else (0, 1 << bits)
    comp = rng.integers(*span(at), size=(m, k // 2)).tolist()
    bm = rng.integers(*span(bt), size=(k, n)).tolist()
    cm = rng.integers(-2 ** 31, 2 ** 31, size=(m, n))
    cm[::3] = np.clip(cm[::3], 2 ** 31 - 600, None)           # rows whose sums overflow upward
    cm[1::3] = np.clip(cm[1::3], None, -2 ** 31 + 600)        # and downward
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    meta = [0] * 32
    dense = np.zeros((m, k), np.int64)
    per_group = 2 if bits == 8 else 4
    for r in range(m):
        for q in range(k // (4 * per_group // 2)):
            i0, i1 = pairs[int(rng.integers(6))]
            lane, nib = _meta_cell(shape, at, selector, r, q)
            meta[lane] |= (i0 | i1 << 2) << (4 * nib)
            stored = comp[r][per_group * q:per_group * (q + 1)]
            if bits == 8:
                dense[r, 4 * q + i0], dense[r, 4 * q + i1] = stored
            else:
                dense[r, 8 * q + 2 * i0:8 * q + 2 * i0 + 2] = stored[:2]
                dense[r, 8 * q + 2 * i1:8 * q + 2 * i1 + 2] = stored[2:]
    a_words = R.from_matrix(comp, R.mma_layout(f"m{m}n{n}k{k // 2}", "a", at), bits)
    b_words = R.from_matrix(bm, _sparse_b_layout(k, bits), bits)
    c_words = R.from_matrix(cm.tolist(), R.mma_layout(shape, "c", "s32"), 32)
    words = np.concatenate([a_words, b_words, c_words, np.array(meta, np.uint32)[:, None]], axis=1)
    out = K.poison((32, 4), np.uint32, rng)
    K.launch(KS.kernel(INT_NAMES[(form, selector)]), 1, 32, [np.ascontiguousarray(words), out])
    exact = dense @ np.array(bm, np.int64) + cm
    if "satfinite" in form:
        exact = np.clip(exact, -2 ** 31, 2 ** 31 - 1)
    want = R.from_matrix((exact & 0xFFFFFFFF).tolist(), R.mma_layout(shape, "c", "s32"), 32)
    assert np.array_equal(out, want), f"{int(np.sum(out != want))} of 128 D words differ"


@pytest.mark.parametrize("body, why", [
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%r6,%r7}, "
     "{%r0,%r1,%r2,%r3}, %r8, 4;", "sparsity selector 4"),
    ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, "
     "{%r4,%r5,%r6,%r7}, {%r0,%r1,%r2,%r3}, %r8, 2;", "sparsity selector 2"),
    ("mma.sp.sync.aligned.m16n8k128.row.col.s32.s4.s4.s32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, "
     "{%r4,%r5,%r6,%r7}, {%r0,%r1,%r2,%r3}, %r8, 1;", "sparsity selector 1"),
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%r6,%r7}, "
     "{%r0,%r1,%r2,%r3}, %r8, %r9;", "immediate sparsity selector"),
])
def test_bad_selectors_are_errors(body, why):
    text = (f"{MK.HEADER}.visible .entry k()\n{{\n.reg .b32 %r<10>;\n{body}\nret;\n}}\n")
    with pytest.raises(ptx.PTXError, match=why):
        ptx.compile(text)


def test_forms_ptxas_refuses_are_refused():
    """ptxas (CUDA 13.0, sm_90) takes .e4m3/.e5m2 mma.sp with .f32 accumulators only, and no mixed 8- and 4-bit
    types: these are NOT_SUPPORTED."""
    for body in ("mma.sp.sync.aligned.m16n8k64.row.col.f16.e4m3.e4m3.f16 {%r0,%r1}, {%r4,%r5,%r6,%r7}, "
                 "{%r4,%r5,%r6,%r7}, {%r0,%r1}, %r8, 0;",
                 "mma.sp.sync.aligned.m16n8k64.row.col.s32.s8.s4.s32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, "
                 "{%r4,%r5,%r6,%r7}, {%r0,%r1,%r2,%r3}, %r8, 0;"):
        text = f"{MK.HEADER}.visible .entry k()\n{{\n.reg .b32 %r<10>;\n{body}\nret;\n}}\n"
        with pytest.raises(ptx.PTXUnsupportedError):
            ptx.compile(text)
