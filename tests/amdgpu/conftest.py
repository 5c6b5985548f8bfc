"""Fixtures of the AMD GPU tests: the PTX corpus (built by tests/ptx/test_corpus.py's nvcc builds),
every corpus module compiled for the five targets once per session on a process pool of 2 (and
cached on disk across sessions), and a skip with the reason where no ld.lld exists."""

import concurrent.futures
import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from ptx.amdgpu_targets import PRIMARY

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("ptx_corpus_builds", HERE.parent / "ptx" / "test_corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

built_ptx = corpus.built_ptx          # the session fixture that runs nvcc -ptx (shared cache)
PRIMARY_TARGET = "gfx1100"
ALL_ARCHS_FOR = PRIMARY_TARGET        # every compute_XX build for this target; compute_86 for the others
OTHER_ARCH = "86"

# features with no AMDGPU lowering yet: compiling them must fail with PTXUnsupportedError naming them
KNOWN_UNSUPPORTED = ("printf: ", "malloc", "free in device code", "unsupported instruction bar.arrive",
                     "need clang to build the texture runtime")      # only where no clang is installed


def need_linker():
    from ptx.amdgpu import find_linker
    if find_linker() is None:
        pytest.skip("no ld.lld to link AMDGPU code objects (apt-get install lld-19, or pip install ziglang)")


def cache_dir():
    where = os.environ.get("ZLUDA_AMDGPU_TEST_CACHE") or str(Path.home() / ".cache" / "zluda-py" / "amdgpu-tests")
    os.makedirs(where, exist_ok=True)
    return where


def jobs(built):
    """[(build id, target, ptx path)] -- one compile per distinct (PTX text, target)."""
    out, seen = [], set()
    for build in corpus.BUILDS:
        bid = corpus._build_id(build)
        path, _ = built.get(bid, (None, ""))
        if path is None:
            continue
        text = Path(path).read_text()
        for tgt in PRIMARY:
            if tgt != ALL_ARCHS_FOR and build[1] != OTHER_ARCH:
                continue
            if (text, tgt) in seen:
                continue
            seen.add((text, tgt))
            out.append((bid, tgt, str(path)))
    return out


def compile_and_verify(job):
    """Run in a pool process: (build id, target, None | ('unsupported', msg) | ('error', msg), facts)."""
    bid, tgt, path = job
    import ptx
    from ptx.amdgpu_verify import verify
    text = Path(path).read_text()
    try:
        mod = ptx.compile(text, target=tgt, cache_dir=cache_dir())
    except ptx.PTXUnsupportedError as e:
        return bid, tgt, ("unsupported", str(e)), None
    except Exception as e:  # noqa: BLE001 - reported by the test as a failure
        return bid, tgt, ("error", f"{type(e).__name__}: {e}"), None
    v = verify(mod.code_object, tgt, text)
    return bid, tgt, (None if v.ok else ("error", "verifier: " + "; ".join(v.problems))), len(mod.kernels)


@pytest.fixture(scope="session")
def amdgpu_corpus(built_ptx):
    """{(build id, target): result} for every corpus module and target."""
    need_linker()
    work = jobs(built_ptx)
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(compile_and_verify, work, chunksize=4))
    return {(bid, tgt): (res, n) for bid, tgt, res, n in results}


def objdump():
    for cand in ("llvm-objdump-19", "llvm-objdump"):
        if shutil.which(cand):
            return shutil.which(cand)
    for p in sorted(Path("/usr/lib").glob("llvm-*/bin/llvm-objdump"), reverse=True):
        return str(p)
    return None
