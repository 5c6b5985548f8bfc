"""ldmatrix / stmatrix (m8n8 .b16, x1/x2/x4, .trans) and movmatrix: the H200's answers for numbered elements
and rows in shuffled order (tests/data/nvidia_mma_answers.json) replayed, and fresh random tables, rows and
registers against the PTX ISA's figures (each lane's row address serves one row of one matrix; a group of
four lanes holds a row, two elements each), outputs poisoned."""

from __future__ import annotations

import numpy as np
import pytest

import mma_kernels as MK
import mma_ref as R
import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

MOVES = R.answers()["matrix_moves"]
KS = K.KernelSet(target="sm_90")
for _f in MOVES:
    KS.add(K.kname("mv", _f["form"]), MK.matrix_move_kernel(K.kname("mv", _f["form"]), _f["form"], _f["n"]))


def run(form, table, rows, regs, rng):
    n = regs.shape[1]
    out = K.poison((32, n), np.uint32, rng)
    mem = K.poison((512,), np.uint16, rng)
    K.launch(KS.kernel(K.kname("mv", form)), 1, 32,
             [np.ascontiguousarray(table, np.uint16), np.ascontiguousarray(rows, np.uint32),
              np.ascontiguousarray(regs, np.uint32), out, mem])
    return out, mem


def expected(form, n, table, rows, regs):
    """(register words, table after) by the ISA: matrix i's row r is at lane 8i+r's address."""
    trans = ".trans" in form
    out = [[int(w) for w in lane] for lane in regs]
    mem = [int(v) for v in table]
    half = lambda w, j: (int(w) >> (16 * j)) & 0xFFFF
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        if form.startswith("movmatrix"):     # the transpose's (g, 2t+j) is the source's (2t+j, g)
            out[lane][0] = sum(half(regs[4 * (2 * t + j) + g // 2][0], g & 1) << (16 * j) for j in range(2))
            continue
        for i in range(n):
            # this lane's elements j of matrix i: (row, column) (g, 2t+j), or (2t+j, g) transposed
            cells = [rows[8 * i + (g if not trans else 2 * t + j)] * 8 + (2 * t + j if not trans else g)
                     for j in range(2)]
            if form.startswith("ldmatrix"):
                out[lane][i] = mem[cells[0]] | mem[cells[1]] << 16
            else:
                for j in range(2):
                    mem[cells[j]] = half(regs[lane][i], j)
    return np.array(out, np.uint32), np.array(mem, np.uint16)


@pytest.mark.parametrize("form", [f["form"] for f in MOVES])
def test_matches_the_h200(form, rng):
    f = next(x for x in MOVES if x["form"] == form)
    n = f["n"]
    rows = np.array(f["rowsel"], np.uint32)
    if form.startswith("ldmatrix"):
        table = np.arange(512, dtype=np.uint16)
        out, _ = run(form, table, rows, np.zeros((32, n), np.uint32), rng)
        assert out.reshape(-1).tolist() == f["out"]
    elif form.startswith("stmatrix"):
        table = np.full(512, 0xFFFF, np.uint16)
        regs = np.array([[(2 * (ln * n + i)) | (2 * (ln * n + i) + 1) << 16 for i in range(n)] for ln in range(32)],
                        np.uint32)
        _, mem = run(form, table, rows, regs, rng)
        assert [-1 if v == 0xFFFF else int(v) for v in mem] == f["mem"]
    else:
        regs = np.array([[(2 * ln) | (2 * ln + 1) << 16] for ln in range(32)], np.uint32)
        out, _ = run(form, np.zeros(512, np.uint16), rows, regs, rng)
        assert out.reshape(-1).tolist() == f["out"]


@pytest.mark.parametrize("form", [f["form"] for f in MOVES])
def test_fresh_random(form, rng):
    n = next(x for x in MOVES if x["form"] == form)["n"]
    table = rng.integers(0, 1 << 16, 512, dtype=np.uint64).astype(np.uint16)
    rows = rng.permutation(64)[:32].astype(np.uint32)
    regs = rng.integers(0, 1 << 32, (32, n), dtype=np.uint64).astype(np.uint32)
    out, mem = run(form, table, rows, regs, rng)
    want_out, want_mem = expected(form, n, table, rows, regs)
    if not form.startswith("stmatrix"):
        assert np.array_equal(out, want_out)
    assert np.array_equal(mem, want_mem), "the table after"
