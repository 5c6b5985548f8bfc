"""The CPU runtime's mipmapped sampling (ptx/runtime/texture.c) against an H100's answers for the same levels,
coordinates, LODs and gradients (tests/data/nvidia_mipmap_answers.json, made by scripts/nvidia_mipmap_probe.cu),
and txq/txq.level against the extents it answered."""

import collections

import pytest

import mipmap_answers as MA
from ptx import runtime

ANSWERS = MA.answers()
CASES = [c for c in ANSWERS["cases"] if c["create"] == 0 and "launch" not in c]
TEXTURES = {k: MA.Texture(v) for k, v in ANSWERS["textures"].items()}


def _kind(c):
    """Which model a case tests: bit-exact ones first, then those matched in part (README)."""
    if c["aniso"] > 1:
        return "anisotropic"        # the H100 lowers the LOD and adds taps; the runtime stays isotropic
    if c["mode"] == "grad" and c["kind"] == "cube":
        return "cube_grad"
    if c["mode"] == "grad":
        return "grad"
    if c["filter"] == "linear":
        return "linear_3d" if c["kind"] == "3d" else "linear"
    return "exact"


EXACT = [c for c in CASES if _kind(c) == "exact"]


def _label(c):
    return (f"{c['label']}-t{c['texture']}-{c['kind']}-{c['mode']}-{c['filter']}-{c['mipfilter']}-"
            f"{c['address']}-b{c['bias']}-{c['min_clamp']}-{c['max_clamp']}")


@pytest.mark.parametrize("case", EXACT, ids=[f"{i}-{_label(c)}" for i, c in enumerate(EXACT)])
def test_lod_selection_and_blend_match_hardware(case):
    """Explicit LODs (float and integer), the bias and both clamps, plain tex and tld4 on a mipmapped texture,
    NaN and infinite LODs, nearest-level and blended (8-bit weight, the LOD truncated) point sampling."""
    bad = [(c, a, [hex(g) for g in got], [hex(w) for w in want])
           for c, a, got, want in MA.replay(runtime.library(), TEXTURES, case) if got != want]
    assert not bad, f"{len(bad)} of {len(case['results'])} differ, first: {bad[0]}"


def test_every_probe_case_is_replayed():
    kinds = collections.Counter(_kind(c) for c in CASES)
    assert {"exact", "grad", "linear", "linear_3d", "cube_grad", "anisotropic"} == set(kinds)
    assert len(CASES) == 156 and kinds["exact"] == 89, kinds
    assert {c["kind"] for c in CASES} == {"1d", "2d", "3d", "a1d", "a2d", "cube", "gather0"}


def test_partly_matched_models_keep_their_agreement():
    """tex.grad's LOD (the gradients as 10-bit floats, lengths as the longest component plus 11/32 of the
    rest, the longest of both gradients and 11/16 of their sum and difference, log2 from a 256-entry table)
    and linear filtering blended across two levels (the level weight split along x, then y) agree for
    nearly every sample; 3D filtering as the non-mipmapped 3D filter does; cube gradients and anisotropic
    filtering are not modelled. The floors are what the runtime reaches now: a change that loses agreement
    fails."""
    exact, total = collections.Counter(), collections.Counter()
    for case in CASES:
        k = _kind(case)
        if k == "exact":
            continue
        for _, _, got, want in MA.replay(runtime.library(), TEXTURES, case):
            total[k] += 1
            exact[k] += got == want
    assert total == {"grad": 5947, "linear": 1280, "linear_3d": 128, "cube_grad": 128, "anisotropic": 1024}, total
    floors = {"grad": 5877, "linear": 1253, "linear_3d": 90, "cube_grad": 90, "anisotropic": 58}
    low = {k: (exact[k], floors[k]) for k in floors if exact[k] < floors[k]}
    assert not low, f"(now, floor): {low}"


@pytest.mark.parametrize("name", sorted(ANSWERS["queries"]))
def test_txq_answers_match_hardware(name):
    """txq.width/height/depth and txq.level.* at LODs -1..8, run through the runtime's query. The H100's driver
    does not load a kernel with txq.num_mipmap_levels or txq.array_size (CUDA_ERROR_NOT_FOUND): those two
    follow the PTX ISA and are checked by test_instr_tex_mipmap.py."""
    import ctypes
    q = ANSWERS["queries"][name]
    if q["texture"] >= 0:
        d = TEXTURES[str(q["texture"])].descriptor(CASES[0] | {"address": "clamp", "filter": "point",
                                                             "mipfilter": "point", "normalized": 1})
    else:       # a plain 16x12 float array
        d = MA.Descriptor()
        d.magic, d.format, d.channels, d.width, d.height = MA.MAGIC, 0x20, 1, 16, 12
    lib = runtime.library()
    lib.ptx_tex_query_level.restype = ctypes.c_int32
    for what, key in enumerate(("width", "height", "depth")):
        code, value = q[key]
        assert code == 0
        assert lib.ptx_tex_query_level(ctypes.byref(d), what, 0) == value, key
        got = [lib.ptx_tex_query_level(ctypes.byref(d), what, lod) for lod in range(-1, 9)]
        assert got == [v for _, v in q[f"level_{key}_from_-1"]], key
    assert q["num_mipmap_levels"][0] != 0 and q["array_size"][0] != 0
