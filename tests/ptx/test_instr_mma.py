"""mma.sync, every form the probe ran on an NVIDIA H200 (tests/data/nvidia_mma_answers.json): each form's
recorded trials replayed bit for bit (the inputs rebuilt from their seeds, mma_inputs.py), and fresh random
inputs against the references (mma_ref.py: the ISA's fragment layouts, the H200's arithmetic), every
register of every lane checked, outputs poisoned. The references themselves are checked against every
recorded answer, the .e4m3/.e5m2 forms' included."""

from __future__ import annotations

import base64

import numpy as np
import pytest

import mma_inputs as MI
import mma_kernels as MK
import mma_ref as R
import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

ANSWERS = R.answers()
FORMS = ANSWERS["mma_sync"]
KS = K.KernelSet(target="sm_90")
NAMES = {}
for _f in FORMS:
    NAMES[_f["form"]] = KS.add(K.kname("mma", _f["form"]), MK.mma_sync_kernel(
        K.kname("mma", _f["form"]), _f["form"], _f["na"], _f["nb"], _f["nc"], _f["nd"], _f["reg_bits"] == 64))


def _run(kern, f, words, rng):
    """Each warp of `words` ([warps * 32, words in]) runs the form once; the [warps * 32, words out]."""
    nout = f["nd"] * f["reg_bits"] // 32
    out = K.poison((len(words), nout), np.uint32, rng)
    K.launch(kern, len(words) // 32, 32, [np.ascontiguousarray(words), out])
    return out


def reference(f, words):
    """D words of one warp from its input words, by the documented layouts and the H200's arithmetic."""
    shape = f["form"].split(".")[3]
    al, bl = f["form"].split(".")[4:6]
    wpr = f["reg_bits"] // 32
    na, nb = f["na"] * wpr, f["nb"] * wpr
    ea = R.unpack(words[:, :na], R.BITS[f["atype"]])
    eb = R.unpack(words[:, na:na + nb], R.BITS[f["btype"]])
    ec = R.unpack(words[:, na + nb:], R.BITS[f["ctype"]])
    la, lb = R.mma_layout(shape, "a", f["atype"], al), R.mma_layout(shape, "b", f["btype"], bl)
    lc, ld = R.mma_layout(shape, "c", f["ctype"]), R.mma_layout(shape, "d", f["dtype"])
    m, n, k = R.shape_mnk(shape)
    quad = shape == "m8n8k4" and f["atype"] == "f16"
    groups = [[ln for ln in range(32) if R.m8n8k4_group(ln) == g] for g in range(4)] if quad else [range(32)]
    if quad:
        m, n, k = 8, 8, 4
    dslots = [[None] * len(ld[0]) for _ in range(32)]
    for lanes in groups:
        lanes = set(lanes)
        sub = lambda lay: [lay[ln] if ln in lanes else [] for ln in range(32)]
        A, B, C = R.to_matrix(ea, sub(la), m, k), R.to_matrix(eb, sub(lb), k, n), R.to_matrix(ec, sub(lc), m, n)
        for ln in lanes:
            for s, (r, c) in enumerate(ld[ln]):
                dslots[ln][s] = R.dot(f, [(A[r][q], B[q][c]) for q in range(k)], C[r][c])
    return R.pack_slots(dslots, R.BITS[f["dtype"]])


@pytest.mark.parametrize("form", [f["form"] for f in FORMS])
def test_mma_sync_matches_the_h200(form, rng):
    f = next(x for x in FORMS if x["form"] == form)
    words = [MI.mma_words(f, t) for t in f["trials"]]
    for w, t in zip(words, f["trials"]):
        assert f"{MI.mma_hash(w):016x}" == t["in_hash"], "the input generator drifted from the probe's"
    got = _run(KS.kernel(NAMES[form]), f, np.concatenate(words), rng)
    for i, t in enumerate(f["trials"]):
        want = np.frombuffer(base64.b64decode(t["d"]), np.uint32).reshape(32, -1)
        bad = np.argwhere(got[32 * i:32 * (i + 1)] != want)
        assert not len(bad), f"{t['dists']}: lane/word {bad[:4].tolist()} " \
                             f"got {[hex(got[32 * i + a][b]) for a, b in bad[:4]]} want {[hex(want[a][b]) for a, b in bad[:4]]}"


def _fresh_trials(f, rng, n=2):
    dists = ([("unit", "unit", "unit"), ("spread", "spread", "subn"), ("subn", "unit", "infnan")]
             if f["atype"] not in ("s8", "u8", "s4", "u4", "b1") else
             [("rand", "rand", "unit"), ("big", "big", "extreme"), ("rand", "rand", "rand")])
    return [{"seed": f"{int(rng.integers(0, 1 << 63)):016x}", "dists": list(dists[i % len(dists)])} for i in range(n)]


@pytest.mark.parametrize("form", [f["form"] for f in FORMS])
def test_mma_sync_fresh_random_inputs(form, rng):
    f = next(x for x in FORMS if x["form"] == form)
    trials = _fresh_trials(f, rng, 3)
    words = [MI.mma_words(f, t) for t in trials]
    got = _run(KS.kernel(NAMES[form]), f, np.concatenate(words), rng)
    for i, (w, t) in enumerate(zip(words, trials)):
        want = reference(f, w).reshape(32, -1)
        bad = np.argwhere(got[32 * i:32 * (i + 1)] != want)
        assert not len(bad), f"{t}: lane/word {bad[:4].tolist()}"


def test_the_references_reproduce_every_h200_answer():
    """The references the fresh-input tests use give every recorded mma.sync answer bit for bit."""
    for f in FORMS:
        for t in f["trials"]:
            want = np.frombuffer(base64.b64decode(t["d"]), np.uint32).reshape(32, -1)
            assert np.array_equal(reference(f, MI.mma_words(f, t)).reshape(32, -1), want), (f["form"], t["dists"])


def test_m8n8k4_f16_accumulator_divergences_are_known():
    """mma.m8n8k4 with .f16 C and D runs outside the tensor cores on sm_80+; 3 of the 81661 results the
    probe took in bulk differ by one ulp from the model here (none in the recorded set). The model's
    other choices are pinned by one recorded trial whose results need them."""
    f = next(x for x in FORMS if x["form"] == "mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16")
    t = f["trials"][0]
    want = np.frombuffer(base64.b64decode(t["d"]), np.uint32).reshape(32, -1)
    assert np.array_equal(reference(f, MI.mma_words(f, t)).reshape(32, -1), want)


def test_fp8_forms_with_mixed_accumulators_are_refused():
    """.e4m3/.e5m2 with C and D of different types: ptxas (CUDA 13.0) rejects them for sm_90 and sm_120a
    ("Unexpected instruction types specified for 'mma'"), with or without .kind::f8f6f4."""
    for form, regs in (("mma.sync.aligned.m16n8k16.row.col.f16.e4m3.e5m2.f32", (2, 1, 4, 2)),
                       ("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f16", (4, 2, 2, 4))):
        text = K.module(MK.mma_sync_kernel("k", form, *regs, False), target="sm_90")
        with pytest.raises(Exception, match=r"unsupported instruction mma\.sync.*e[45]m[32]"):
            K.compile_text(text)


INT_FORMS = [f for f in FORMS if f["atype"] in ("s8", "u8", "s4", "u4", "b1")]


@pytest.mark.parametrize("cpu", ["x86-64-v3", "x86-64-v2"])
def test_integer_forms_for_each_cpu(cpu, rng):
    """The integer products built for AVX2 and SSE4 machines (LLVM 22 once miscompiled (u8, s8) products
    into an x86-64-v3 vpmaddwd)."""
    if K.BACKEND != "host":
        pytest.skip("CPU targets are the host backend's")
    import ptx
    text = K.module(*(MK.mma_sync_kernel(K.kname("m", f["form"]), f["form"], f["na"], f["nb"], f["nc"], f["nd"],
                                         False) for f in INT_FORMS), target="sm_90")
    mod = ptx.compile(text, target="host", cpu=cpu)
    for f in INT_FORMS:
        words = np.concatenate([MI.mma_words(f, t) for t in f["trials"]])
        got = _run(mod.kernel(K.kname("m", f["form"])), f, words, rng)
        want = np.concatenate([np.frombuffer(base64.b64decode(t["d"]), np.uint32).reshape(32, -1)
                               for t in f["trials"]])
        assert np.array_equal(got, want), f["form"]


def test_a_warp_of_a_larger_block_and_a_loop(rng):
    """Four warps of one block each accumulate D += A*B over three steps of a loop (the exchange resumes
    inside the loop); every lane's accumulator checked against the reference step by step."""
    f = next(x for x in FORMS if x["form"] == "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    text = K.module(f"""
.visible .entry loop3(.param .u64 pin, .param .u64 pout)
{{
.reg .b32 %a<4>, %b<2>, %c<4>;
.reg .u32 %gt, %i;
.reg .u64 %p, %q, %off;
.reg .pred %more;
mov.u32 %gt, %tid.x;
ld.param.u64 %p, [pin];
ld.param.u64 %q, [pout];
mul.wide.u32 %off, %gt, 40;
add.u64 %p, %p, %off;
ld.global.v4.b32 {{%c0, %c1, %c2, %c3}}, [%p+24];
mov.u32 %i, 0;
STEP:
ld.global.v4.b32 {{%a0, %a1, %a2, %a3}}, [%p];
ld.global.v2.b32 {{%b0, %b1}}, [%p+16];
mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{%c0, %c1, %c2, %c3}}, {{%a0, %a1, %a2, %a3}}, {{%b0, %b1}}, {{%c0, %c1, %c2, %c3}};
add.u32 %i, %i, 1;
mul.wide.u32 %off, %i, 5120;
add.u64 %p, %p, %off;
setp.lt.u32 %more, %i, 3;
mul.wide.u32 %off, %gt, 16;
add.u64 %off, %q, %off;
@%more bra STEP;
st.global.v4.b32 [%off], {{%c0, %c1, %c2, %c3}};
ret;
}}""", target="sm_90")
    steps = [np.concatenate([MI.mma_words(f, t) for t in _fresh_trials(f, rng, 4)]) for _ in range(3)]
    # the kernel reads step s of thread t at t * 40 + (1 + 2 + ... + s) * 5120 bytes: lay them out so
    # pin holds [step0 | step1 (offset 5120) | step2 (offset 15360)] of 128 threads x 10 words
    buf = np.zeros(1280 * 4, np.uint32)
    for s, at in zip(steps, (0, 1280, 3840)):
        buf[at:at + 1280] = s.reshape(-1)
    out = K.poison((128, 4), np.uint32, rng)
    K.launch(K.compile_text(text).kernel("loop3"), 1, 128, [buf, out])
    for w in range(4):
        acc = steps[0][32 * w:32 * (w + 1), 6:10]
        for s in range(3):
            words = steps[s][32 * w:32 * (w + 1)].copy()
            words[:, 6:10] = acc
            acc = reference(f, words).reshape(32, -1)
        assert np.array_equal(out[32 * w:32 * (w + 1)], acc), f"warp {w}"
