"""Corpus test: every CUDA source of the project (samples/, tests/ptx/corpus/, other .cu under tests/)
compiled by nvcc -ptx for compute_75, compute_86 and compute_90 (plus -G and -lineinfo builds of a few) must
parse and pass the semantic checks. PTX is built at test time on a small thread pool, once per session,
and kept in a cache keyed by nvcc's version, the flags and the source bytes (with its directory's headers)."""

import concurrent.futures
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import ptx

ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
SAMPLES_DIR = ROOT / "samples"
ARCHS = ("75", "86", "90")
# Debug builds add .file/.loc/.section DWARF blocks; a couple of files are enough to cover them.
EXTRA_BUILDS = {"calls.cu": (("75", ("-G",)), ("86", ("-lineinfo",))),
                "memory_spaces.cu": (("90", ("-G",)),)}


def _nvcc():
    found = shutil.which("nvcc")
    if found:
        return found
    default = "/usr/local/cuda/bin/nvcc"
    return default if os.access(default, os.X_OK) else None


def _sources():
    """samples/, tests/ptx/corpus/, and any other CUDA test kernel under tests/."""
    own = sorted(SAMPLES_DIR.glob("*.cu")) + sorted(CORPUS_DIR.glob("*.cu"))
    others = [p for p in sorted((ROOT / "tests").rglob("*.cu")) if p not in own]
    return own + others


def _builds():
    builds = []
    for src in _sources():
        for arch in ARCHS:
            builds.append((src, arch, ()))
        for arch, flags in EXTRA_BUILDS.get(src.name, ()):
            builds.append((src, arch, flags))
    return builds


def _build_id(build):
    src, arch, flags = build
    return f"{src.parent.relative_to(ROOT)}/{src.name}-sm{arch}{''.join(flags)}"


BUILDS = _builds()


def _cache_dir():
    """Where PTX built by earlier runs is kept (keyed by everything that determines it), so re-runs skip
    nvcc: ZLUDA_PTX_CORPUS_CACHE, else ~/.cache/zluda-py/ptx-corpus; 'off' disables it."""
    where = os.environ.get("ZLUDA_PTX_CORPUS_CACHE")
    if where == "off":
        return None
    path = Path(where) if where else Path.home() / ".cache" / "zluda-py" / "ptx-corpus"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path


def _build_key(nvcc_version, build):
    src, arch, flags = build
    h = hashlib.sha256()
    h.update(nvcc_version.encode())
    h.update(repr((arch, flags)).encode())
    h.update(src.read_bytes())
    for header in sorted(src.parent.glob("*.h")) + sorted(src.parent.glob("*.cuh")):
        h.update(header.name.encode())
        h.update(header.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="session")
def built_ptx(tmp_path_factory):
    """{build id: (ptx path or None, nvcc error text)} for every build, compiled in parallel once."""
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc not installed")
    out_dir = tmp_path_factory.mktemp("ptx_corpus")
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    cache = _cache_dir()

    def compile_one(build):
        src, arch, flags = build
        bid = _build_id(build)
        out = out_dir / (bid.replace("/", "_") + ".ptx")
        cached = cache / (_build_key(nvcc_version, build) + ".ptx") if cache else None
        if cached is not None and cached.is_file():
            shutil.copyfile(cached, out)
            return bid, (out, "")
        cmd = [nvcc, "-ptx", f"-arch=compute_{arch}", *flags, "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            return bid, (None, proc.stderr[-2000:])
        if cached is not None:
            try:
                tmp = cached.with_suffix(f".{os.getpid()}.tmp")
                shutil.copyfile(out, tmp)
                os.replace(tmp, cached)
            except OSError:
                pass
        return bid, (out, "")

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(compile_one, BUILDS))


@pytest.mark.parametrize("build", BUILDS, ids=[_build_id(b) for b in BUILDS])
def test_nvcc_ptx_parses_and_checks(build, built_ptx):
    src = build[0]
    path, err = built_ptx[_build_id(build)]
    if path is None:
        if src.parent != CORPUS_DIR:
            # sources outside tests/ptx/corpus belong to other work; one nvcc rejects is no parser failure
            pytest.skip(f"nvcc could not compile this source: {err.strip()[-300:]}")
        pytest.fail(f"nvcc failed on a corpus kernel:\n{err}")
    text = path.read_text()
    module = ptx.parse(text)
    assert module.version >= (7, 0)
    if src.parent == CORPUS_DIR:
        assert module.entries(), "every corpus kernel file defines at least one kernel"


def test_corpus_covers_the_hard_constructs(built_ptx):
    """The corpus must keep exercising the constructs it was written for."""
    texts = {bid: p.read_text() for bid, (p, _) in built_ptx.items() if p is not None}
    joined = "\n".join(texts.values())
    for needle in ("brx.idx", ".branchtargets", ".callprototype", "vprintf", "__assertfail", "tex.", "suld.",
                   "sust.", "wmma.", "cp.async", "atom.", "red.", "0xFF00(generic(", "generic(",
                   ".attribute(.managed)", ".extern .shared", "match.any", "vote.", "shfl.sync", ".loc",
                   ".section", "barrier.sync", "bfe.u32", "lop3.b32", ".maxntid", ".minnctapersm", ".maxnreg",
                   ".reqnctapercluster", "mapa."):
        assert needle in joined, f"no corpus PTX contains {needle!r}"


def test_numba_ptx_parses():
    cuda = pytest.importorskip("numba.cuda", reason="numba-cuda not installed")
    from numba import float32, int32, void

    def saxpy(out, a, x, y):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    def reduce_shared(out, x):
        buf = cuda.shared.array(128, float32)
        t = cuda.threadIdx.x
        buf[t] = x[cuda.grid(1)]
        cuda.syncthreads()
        s = 128 // 2
        while s > 0:
            if t < s:
                buf[t] += buf[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            cuda.atomic.add(out, 0, buf[0])

    def warp_math(out, x):
        i = cuda.grid(1)
        v = x[i]
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, 1)
        out[i] = int32(v) + cuda.popc(i) + cuda.clz(i)

    sigs = [(saxpy, void(float32[:], float32, float32[:], float32[:])),
            (reduce_shared, void(float32[:], float32[:])),
            (warp_math, void(int32[:], float32[:]))]
    for fn, sig in sigs:
        for cc in ((7, 5), (9, 0)):
            try:
                text, _ = cuda.compile_ptx(fn, sig, cc=cc)
            except Exception as exc:  # no libnvvm/NVRTC on this machine: nothing to test against
                pytest.skip(f"numba-cuda cannot generate PTX here: {type(exc).__name__}: {exc}")
            module = ptx.parse(text)
            assert module.entries()
