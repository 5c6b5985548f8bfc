"""Every kernel of the PTX corpus (samples/ and tests/ptx/corpus/, built by nvcc) compiles for the five
AMD targets and passes the offline verifier; the only accepted failures are the features listed in
conftest.KNOWN_UNSUPPORTED, refused with PTXUnsupportedError naming them."""

import pytest

from conftest import KNOWN_UNSUPPORTED, PRIMARY_TARGET


def test_every_corpus_module_compiles_and_verifies(amdgpu_corpus):
    failures, unsupported, ok = [], [], 0
    for (bid, tgt), (res, n) in sorted(amdgpu_corpus.items()):
        if res is None:
            ok += 1
        elif res[0] == "unsupported" and any(k in res[1] for k in KNOWN_UNSUPPORTED):
            unsupported.append((bid, tgt))
        else:
            failures.append(f"{bid} [{tgt}]: {res[1][:400]}")
    assert not failures, f"{len(failures)} of {len(amdgpu_corpus)} compiles failed:\n" + "\n".join(failures)
    assert ok >= 0.8 * len(amdgpu_corpus), f"only {ok} of {len(amdgpu_corpus)} compiled"
    targets = {tgt for (_, tgt) in amdgpu_corpus}
    assert targets == {"gfx1030", "gfx1100", "gfx1201", "gfx90a", "gfx942"}


@pytest.mark.parametrize("source", ["vector_add", "reduce_shared", "reduce_warp_shuffle", "scan", "histogram",
                                    "warp_vote", "atomics", "matmul_tiled", "transpose", "math_float",
                                    "math_double", "half_bf16", "bitonic_sort", "dynamic_shared"])
def test_sample_compiles_for_every_target(amdgpu_corpus, source):
    got = {tgt: res for (bid, tgt), (res, _) in amdgpu_corpus.items() if bid.startswith(f"samples/{source}.cu-")}
    assert set(got) == {"gfx1030", "gfx1100", "gfx1201", "gfx90a", "gfx942"}, f"{source}: targets {sorted(got)}"
    bad = {t: r for t, r in got.items() if r is not None}
    assert not bad, f"{source}: {bad}"
    assert PRIMARY_TARGET in got
