"""wmma.load / wmma.store / wmma.mma against an NVIDIA H200 (tests/data/nvidia_mma_answers.json): which
element each fragment slot holds (ptx/codegen/mma_layouts.py against the measured maps), every load and
store form on fresh random matrices with padded strides (each slot and each stored element checked,
outputs poisoned), .shared and default-stride forms, every wmma.mma form's recorded trials replayed bit
for bit and fresh random inputs against the references (mma_ref.py), and a tiled GEMM loop."""

from __future__ import annotations

import base64

import numpy as np
import pytest

import mma_inputs as MI
import mma_kernels as MK
import mma_ref as R
import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)
from ptx.codegen import mma_layouts as L

ANSWERS = R.answers()
LOADS = ANSWERS["wmma_load"]
STORES = ANSWERS["wmma_store"]
MMAS = ANSWERS["wmma_mma"]


def _shape(form):
    return next(p for p in form.split(".") if L.shape_mnk(p))


def _cell_map(f):
    """[lane][slot] -> (row, col) from a recorded map of element indices."""
    return [[(i // f["cols"], i % f["cols"]) if i >= 0 else None for i in lane] for lane in f["map"]]


def test_fragment_maps_are_the_h200s():
    for f in LOADS:
        mat = f["matrix"]
        lay = L.wmma_layout(_shape(f["form"]), mat, f["type"])
        assert [list(x) for x in lay] == _cell_map(f), f["form"]
        regs = L.wmma_regs(_shape(f["form"]), mat, f["type"])
        assert regs * (2 if f["type"] == "f64" else 1) == f["words"], f["form"]
    for f in STORES:        # a store writes each element from the slot a load of C fills
        lay = L.wmma_layout(_shape(f["form"]), "c", f["type"])
        slots = len(lay[0])
        for lane in range(32):
            for s, (r, c) in enumerate(lay[lane]):
                assert f["map"][r * f["cols"] + c] == lane * slots + s, f["form"]


def _random_matrix(f, rng, bits):
    """Random raw elements of the whole memory image (padding included) of a load form."""
    n = (f["rows"] if f["layout"] == "row" else f["cols"]) * f["ld"]
    return rng.integers(0, 1 << min(bits, 63), n, dtype=np.uint64) | \
        (rng.integers(0, 2, n, dtype=np.uint64) << 63 if bits == 64 else np.uint64(0))


def _image(vals, bits):
    buf = bytearray((len(vals) * bits + 7) // 8 + 64)
    for e, v in enumerate(vals):
        MI.put_elem(buf, e, bits, int(v))
    return np.frombuffer(bytes(buf), np.uint8).copy()


LOAD_CASES = [(f["form"], sp, st) for f in LOADS for sp, st in (("global", True), ("generic", True))] + \
    [(f["form"], "shared", False) for f in LOADS if f["layout"] == "row" or f["matrix"] == "b"]


@pytest.mark.parametrize("form,space,stride", LOAD_CASES)
def test_wmma_load_puts_each_element_in_its_slot(form, space, stride, rng):
    f = next(x for x in LOADS if x["form"] == form)
    bits = R.BITS[f["type"]]
    lead = f["cols"] if f["layout"] == "row" else f["rows"]
    ld = f["ld"] if stride else lead
    g = dict(f, ld=ld)
    vals = _random_matrix(g, rng, bits)
    head, ty = form.rsplit(".", 1)
    text = K.module(MK.wmma_load_kernel("ld", f"{head}@SS@.{ty}", f["words"], ld if stride else None, space,
                                        f["type"] == "f64"), target="sm_90")
    img = _image(vals, bits)
    out = K.poison((32, f["words"]), np.uint32, rng)
    K.launch(K.compile_text(text).kernel("ld"), 1, 32, [img, out, len(img) & ~3])
    got = R.unpack(out, bits)
    for lane in range(32):
        for s, i in enumerate(f["map"][lane]):
            r, c = divmod(i, f["cols"])
            e = r * ld + c if f["layout"] == "row" else c * ld + r
            assert got[lane][s] == int(vals[e]), f"lane {lane} slot {s} holds element ({r}, {c})"


@pytest.mark.parametrize("form,stride", [(f["form"], st) for f in STORES for st in (True, False)])
def test_wmma_store_writes_each_slot_to_its_element(form, stride, rng):
    f = next(x for x in STORES if x["form"] == form)
    bits = R.BITS[f["type"]]
    lead = f["cols"] if f["layout"] == "row" else f["rows"]
    ld = f["ld"] if stride else lead
    words = rng.integers(0, 1 << 32, (32, f["words"]), dtype=np.uint64).astype(np.uint32)
    major = f["rows"] if f["layout"] == "row" else f["cols"]
    mem = K.poison((major * ld * bits // 8 + 64,), np.uint8, rng)
    before = mem.copy()
    text = K.module(MK.wmma_store_kernel("st", form, f["words"], ld if stride else None, f["type"] == "f64"),
                    target="sm_90")
    K.launch(K.compile_text(text).kernel("st"), 1, 32, [words, mem])
    slots = R.unpack(words, bits)
    written = set()
    for r in range(f["rows"]):
        for c in range(f["cols"]):
            sid = f["map"][r * f["cols"] + c]
            lane, s = divmod(sid, f["slots"])
            e = r * ld + c if f["layout"] == "row" else c * ld + r
            written.add(e)
            assert MI.get_elem(mem, e, bits) == slots[lane][s], f"element ({r}, {c})"
    untouched = [e for e in range(major * ld) if e not in written]
    assert all(MI.get_elem(mem, e, bits) == MI.get_elem(before, e, bits) for e in untouched), "padding written"


def _wmma_kernel(f, name="mm"):
    bufs = MI.wmma_buffers(f, {"seed": "0", "dists": ["zero"] * 3})[0]
    sd = (f["m"] * f["ldd"] * R.BITS[f["dtype"]] // 8 + 255) & ~255
    sizes = (len(bufs[0]), len(bufs[1]), len(bufs[2]), sd)
    return MK.wmma_kernel(name, f["form"], f, sizes), sizes


def _run_wmma(f, trials, rng):
    """D (raw elements, row-major) of each trial run through load/mma/store; [trials][m*n]."""
    text, sizes = _wmma_kernel(f)
    bufs = [MI.wmma_buffers(f, t)[0] for t in trials]
    cat = [np.frombuffer(b"".join(bytes(b[i]) for b in bufs), np.uint8).copy() for i in range(3)]
    D = K.poison((len(trials) * sizes[3],), np.uint8, rng)
    K.launch(K.compile_text(K.module(text, target="sm_90")).kernel("mm"), len(trials), 32, [*cat, D])
    db = R.BITS[f["dtype"]]
    return [[MI.get_elem(D[i * sizes[3]:], r * f["ldd"] + c, db) for r in range(f["m"]) for c in range(f["n"])]
            for i in range(len(trials))]


@pytest.mark.parametrize("form", [f["form"] for f in MMAS])
def test_wmma_mma_matches_the_h200(form, rng):
    f = next(x for x in MMAS if x["form"] == form)
    for t in f["trials"]:
        assert f"{MI.wmma_hash(MI.wmma_buffers(f, t)[0]):016x}" == t["in_hash"], "input generator drifted"
    got = _run_wmma(f, f["trials"], rng)
    db = R.BITS[f["dtype"]]
    for t, d in zip(f["trials"], got):
        raw = base64.b64decode(t["d"])
        want = [MI.get_elem(raw, i, db) for i in range(f["m"] * f["n"])]
        bad = [i for i in range(len(want)) if want[i] != d[i]]
        assert not bad, f"{t['dists']}: elements {bad[:6]}"


def reference(f, trial):
    m, n, k = f["m"], f["n"], f["k"]
    _, (la, lb, lc) = MI.wmma_buffers(f, trial)
    return [R.dot(f, [(la[r * k + q], lb[q * n + c]) for q in range(k)], lc[r * n + c])
            for r in range(m) for c in range(n)]


def test_the_references_reproduce_every_h200_answer():
    for f in MMAS:
        db = R.BITS[f["dtype"]]
        for t in f["trials"]:
            raw = base64.b64decode(t["d"])
            assert reference(f, t) == [MI.get_elem(raw, i, db) for i in range(f["m"] * f["n"])], \
                (f["form"], t["dists"])


PRIMARY = [f["form"] for f in MMAS if (f["alayout"], f["blayout"]) == ("row", "col")]


@pytest.mark.parametrize("form", PRIMARY)
def test_wmma_mma_fresh_random_inputs(form, rng):
    f = next(x for x in MMAS if x["form"] == form)
    isint = f["atype"] in ("s8", "u8", "s4", "u4", "b1")
    dists = [("rand", "rand", "unit"), ("big", "big", "extreme")] if isint else \
        [("unit", "unit", "unit"), ("spread", "spread", "subn"), ("infnan", "unit", "unit")]
    trials = [{"seed": f"{int(rng.integers(0, 1 << 63)):016x}", "dists": list(d)} for d in dists]
    for t, d in zip(trials, _run_wmma(f, trials, rng)):
        want = reference(f, t)
        bad = [i for i in range(len(want)) if want[i] != d[i]]
        assert not bad, f"{t}: elements {bad[:6]}"


def test_a_tiled_gemm_loop(rng):
    """A 32x32 = (32x64) x (64x32) f16 GEMM by a block of four warps: each warp keeps one 16x16 f32
    accumulator across four k-steps of a loop, loading tiles of A and B straight from global memory with
    their strides, then stores it. Small integer values keep every order of summation exact."""
    text = K.module("""
.visible .entry gemm(.param .u64 pa, .param .u64 pb, .param .u64 pc)
{
.reg .b32 %a<8>, %b<8>;
.reg .f32 %c<8>;
.reg .u32 %w, %wr, %wc, %k, %t;
.reg .u64 %A, %B, %C, %p, %off;
.reg .pred %more;
ld.param.u64 %A, [pa];
ld.param.u64 %B, [pb];
ld.param.u64 %C, [pc];
mov.u32 %w, %tid.x;
shr.u32 %w, %w, 5;
shr.u32 %wr, %w, 1;
and.b32 %wc, %w, 1;
wmma.load.c.sync.aligned.row.m16n16k16.f32 {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7}, [%C+0], 32;
mov.f32 %c0, 0f00000000;
mov.f32 %c1, 0f00000000;
mov.f32 %c2, 0f00000000;
mov.f32 %c3, 0f00000000;
mov.f32 %c4, 0f00000000;
mov.f32 %c5, 0f00000000;
mov.f32 %c6, 0f00000000;
mov.f32 %c7, 0f00000000;
mov.u32 %k, 0;
LOOP:
mad.lo.u32 %t, %wr, 1024, %k;
mul.wide.u32 %off, %t, 2;
add.u64 %p, %A, %off;
wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}, [%p], 64;
mad.lo.u32 %t, %wc, 1024, %k;
mul.wide.u32 %off, %t, 2;
add.u64 %p, %B, %off;
wmma.load.b.sync.aligned.col.m16n16k16.global.f16 {%b0, %b1, %b2, %b3, %b4, %b5, %b6, %b7}, [%p], 64;
wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7}, {%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}, {%b0, %b1, %b2, %b3, %b4, %b5, %b6, %b7}, {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7};
add.u32 %k, %k, 16;
setp.lt.u32 %more, %k, 64;
@%more bra LOOP;
mad.lo.u32 %t, %wr, 512, 0;
mad.lo.u32 %t, %wc, 16, %t;
mul.wide.u32 %off, %t, 4;
add.u64 %p, %C, %off;
wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%p], {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7}, 32;
ret;
}""", target="sm_90")
    a = rng.integers(-3, 4, (32, 64)).astype(np.float16)
    b = rng.integers(-3, 4, (64, 32)).astype(np.float16)      # column-major: b.T row-major
    c = K.poison((32, 32), np.float32, rng)
    K.launch(K.compile_text(text).kernel("gemm"), 1, 128, [a, np.ascontiguousarray(b.T), c])
    assert np.array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_compiles_for_every_amd_target():
    """The same lowering with the exchange in lane shuffles (ds_bpermute) on 32- and 64-wide waves; the
    emulated AMD lane (tests/amdgpu/test_emulated.py) runs this file's kernels there."""
    import ptx
    from ptx import amdgpu
    if amdgpu.find_linker() is None:
        pytest.skip("no ld.lld for AMD code objects")
    text = K.module(_wmma_kernel(next(f for f in MMAS if f["form"] == PRIMARY[0]))[0], target="sm_90")
    for target in ("gfx1030", "gfx1100", "gfx90a", "gfx942"):
        assert ptx.compile(text, target=target)
