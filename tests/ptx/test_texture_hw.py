"""The CPU runtime's texture unit (ptx/runtime/texture.c) against an H200's answers for the same texels and
coordinates (tests/data/nvidia_texture_answers.json, made by scripts/nvidia_texture_probe.cu)."""

import collections
import ctypes
import struct

import pytest

import texture_answers as TA
from ptx import runtime

CASES = TA.cases()
# Bit-exact: point sampling of every format, geometry and address mode (border colours quantised to the
# format), integer fetches, gathers (tld4), and nearly all of linear filtering (weights of 8 fractional
# bits, the far corner's weight rounded, the sum exact and rounded once: to float, ties away; to 16-bit
# fixed point for 8/16-bit normalised formats; to a half's precision for f16). Not yet matched: the order
# in which 3D weights are rounded, mirror at some coordinates, s8/s16 in the last 16-bit step.
EXACT = [c for c in CASES if c["filter"] == "point"]


def _lib():
    return runtime.library()


def _f(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def _label(c):
    return f"{c['kind']}-{c['format']}x{c['channels']}-{c['filter']}-{c['read']}-{c['address']}-n{c['normalized']}"


@pytest.mark.parametrize("case", EXACT, ids=[_label(c) for c in EXACT])
def test_point_sampling_matches_hardware(case):
    bad = [(c, [hex(g) for g in got], [hex(w) for w in want])
           for c, got, want in TA.replay(_lib(), case) if got != want]
    assert not bad, f"{len(bad)} of {len(case['results'])} differ, first: {bad[0]}"


def test_every_probe_case_is_replayed():
    kinds = collections.Counter(c["kind"] for c in CASES)
    assert {"1d", "2d", "3d", "a1d", "a2d", "cube", "fetch", "gather0", "gather3"} <= set(kinds)
    assert len(CASES) == 222


def test_linear_filtering_agreement():
    """Linear filtering: how many results are bit-exact, and how far the rest are. The floors are what this
    runtime reaches now (3461 of 3536 outside 3D, 261 of 336 in 3D); a change that loses agreement fails."""
    exact = collections.Counter()
    total = collections.Counter()
    worst = 0.0
    for case in CASES:
        if case["filter"] != "linear":
            continue
        key = "3d" if case["kind"] == "3d" else "other"
        for _, got, want in TA.replay(_lib(), case):
            total[key] += 1
            exact[key] += got == want
            if key == "other" and case["read"] == "normalized" and case["address"] != "mirror":
                worst = max(worst, max(abs(_f(g) - _f(w)) for g, w in zip(got, want)))
    assert total == {"other": 3536, "3d": 336}
    assert exact["other"] >= 3461, exact
    assert exact["3d"] >= 261, exact
    # normalised 8/16-bit textures: the misses are a unit or two of the 16-bit fixed-point sum
    assert worst <= 3 / 32767, worst
