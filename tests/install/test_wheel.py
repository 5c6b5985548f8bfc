"""The wheel is the product: built as pip builds it, installed non-editable into a fresh venv and used from a
directory outside the checkout, it runs nvcc-built samples and a numba-cuda script, and its doctor is clean."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ("vector_add", "warp_vote")   # warp_vote's match/redux run on the warp scheduler (warp_scheduler.c)
PIP = ["-m", "pip", "--disable-pip-version-check"]

NUMBA_SCRIPT = """
import numpy as np
from numba import cuda, float32

@cuda.jit
def saxpy_block_sums(a, x, y, out, sums):
    tile = cuda.shared.array(256, float32)
    i = cuda.grid(1)
    v = a * x[i] + y[i] if i < x.size else float32(0)
    if i < x.size:
        out[i] = v
    tile[cuda.threadIdx.x] = v
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        s = float32(0)
        for k in range(256):
            s += tile[k]
        sums[cuda.blockIdx.x] = s

n = 10000
x = np.arange(n, dtype=np.float32)
y = np.full(n, 2.0, np.float32)
blocks = (n + 255) // 256
out = cuda.to_device(np.full(n, np.nan, np.float32))
sums = cuda.to_device(np.full(blocks, np.nan, np.float32))
saxpy_block_sums[blocks, 256](np.float32(3.0), cuda.to_device(x), cuda.to_device(y), out, sums)
print("RESULT", repr(float(out.copy_to_host().astype(np.float64).sum())),
      repr(float(sums.copy_to_host().astype(np.float64).sum())))
"""
# sum(3 i + 2) for i < 10000; every partial sum is an integer below 2**24, so float32 adds it exactly
NUMBA_WANT = 3 * 9999 * 10000 // 2 + 2 * 10000


def _run(cmd, timeout=600, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)


def _clean_env():
    """This process's environment less what would make the venv's programs see the checkout or the
    settings of whoever runs the tests."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH")
    return {k: v for k, v in os.environ.items()
            if k not in drop and not k.startswith(("ZLUDA_", "PTXRT_"))}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    p = _run([sys.executable, *PIP, "wheel", "--no-deps", "-w", out, ROOT])
    assert p.returncode == 0, f"pip wheel failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    wheels = list(out.glob("zluda_py-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


class Venv:
    def __init__(self, root: Path, cache: Path, clients: str | None):
        self.root, self.cache = root, cache
        self.bin = root / "bin"
        self.python = self.bin / "python"
        self.clients_missing = clients      # why numba-cuda is not installed, or None
        self.site = Path(_run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                         .stdout.strip())

    def env(self, **extra):
        """As after `source bin/activate`, with its own caches (kernels and helper libraries are built anew)."""
        env = _clean_env()
        env.update(PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}", VIRTUAL_ENV=str(self.root),
                   XDG_CACHE_HOME=str(self.cache))
        env.update(extra)
        return env


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    root = tmp_path_factory.mktemp("venv")
    p = _run([sys.executable, "-m", "venv", root])
    assert p.returncode == 0, p.stderr
    py = root / "bin" / "python"
    # numba-cuda and the CUDA Python packages come with the [clients] extra; without them only the numba test
    # skips, so a failed extra install falls back to the wheel and its own dependencies.
    clients = None
    p = _run([py, *PIP, "install", f"zluda-py[clients] @ {wheel.as_uri()}"], timeout=900)
    if p.returncode != 0:
        clients = f"pip could not install the [clients] extra: {p.stderr.strip()[-500:]}"
        p = _run([py, *PIP, "install", wheel], timeout=900)
        assert p.returncode == 0, f"installing the wheel failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    yield Venv(root, tmp_path_factory.mktemp("cache"), clients)
    shutil.rmtree(root, ignore_errors=True)     # most of a gigabyte with the [clients] extra


@pytest.fixture(scope="module")
def rundir(tmp_path_factory) -> Path:
    """A directory outside the checkout holding the nvcc-built samples."""
    d = tmp_path_factory.mktemp("run")
    assert ROOT not in d.resolve().parents
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and os.access(cand, os.X_OK):
            break
    else:
        pytest.skip("nvcc not found: the samples cannot be built")
    p = _run([sys.executable, ROOT / "scripts" / "build_samples", "--flavour", "ptx", "-q", *SAMPLES], cwd=ROOT)
    assert p.returncode == 0, f"scripts/build_samples failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    for name in SAMPLES:
        shutil.copy2(ROOT / "samples" / "build" / "ptx" / name, d / name)
    return d


def test_wheel_holds_every_package_file(wheel):
    """Every file of the packages in the tree (C sources compiled at run time included) is in the wheel."""
    p = _run(["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "ptx", "zluda_py"])
    if p.returncode != 0:
        pytest.skip("not a git checkout: the package files cannot be listed")
    tree = {f for f in p.stdout.split() if (ROOT / f).is_file()}
    names = set(zipfile.ZipFile(wheel).namelist())
    assert tree - names == set()
    assert {"zluda_py/_lib/libcuda.so.1", "zluda_py/_lib/libcuda.so", "zluda_py/_lib/libnvrtc.so.13",
            "zluda_py/_lib/libnvrtc.so", "zluda_py/_lib/libnvJitLink.so.13"} <= names


def test_sdist_builds_the_same_wheel(wheel, venv, tmp_path):
    """pip install from an sdist must give what the wheel gives: the sdist carries every source."""
    p = _run([venv.python, *PIP, "install", "build"])
    if p.returncode != 0:
        pytest.skip(f"the `build` package cannot be installed: {p.stderr.strip()[-300:]}")
    p = _run([venv.python, "-m", "build", "--sdist", "--outdir", tmp_path / "sdist", ROOT], env=venv.env())
    assert p.returncode == 0, f"building the sdist failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    sdist = next((tmp_path / "sdist").glob("zluda_py-*.tar.gz"))
    p = _run([venv.python, *PIP, "wheel", "--no-deps", "-w", tmp_path / "from_sdist", sdist], env=venv.env())
    assert p.returncode == 0, f"building a wheel from the sdist failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    again = next((tmp_path / "from_sdist").glob("zluda_py-*.whl"))
    assert set(zipfile.ZipFile(again).namelist()) == set(zipfile.ZipFile(wheel).namelist())


def test_installed_shim_names_no_build_path(venv, tmp_path):
    """No RUNPATH/RPATH, and no path of the build (the checkout, pip's temporary build tree) in the binaries."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf not installed")
    libdir = venv.site / "zluda_py" / "_lib"
    libs = sorted(p for p in libdir.iterdir() if p.suffix == ".so" or p.name.endswith(".so.1"))
    assert libdir / "libcuda.so.1" in libs
    for lib in libs:
        dyn = _run(["readelf", "-d", lib]).stdout
        paths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", dyn)
        absolute = [d for entry in paths for d in entry.split(":") if not d.startswith("$ORIGIN")]
        assert absolute == [], f"{lib.name} searches {absolute}"
        # what the library holds at run time (the symbol table's file names do not count)
        stripped = tmp_path / lib.name
        blob = stripped.read_bytes() if _run(["strip", "-o", stripped, lib]).returncode == 0 else lib.read_bytes()
        for build_path in (str(ROOT), "/pip-"):
            found = sorted({m.decode(errors="replace") for m in re.findall(re.escape(build_path.encode()) + rb"[^\0'\"]*", blob)})
            assert not found, f"{lib.name} records build paths: {found}"


def _observe_native_helpers(venv):
    """The launch queue and warp scheduler libraries this installation built (they are compiled on first use)."""
    queue = sorted((venv.site / "zluda_py" / "backends" / "cpu" / "_build").glob("liblaunchq-*.so"))
    sched = sorted((venv.cache / "zluda-py").glob("libptxsched-*.so"))
    return queue, sched


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_runs_from_the_installed_wheel(venv, rundir, name, tmp_path):
    dump = tmp_path / "dump"
    env = venv.env(ZLUDA_LOG="1", ZLUDA_DUMP_DIR=str(dump))
    p = _run([venv.bin / "zluda-py", "run", "--", f"./{name}"], cwd=rundir, env=env, timeout=300)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines and lines[-1] == "PASS", f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    # the native launch queue ran the launches (it logs when it cannot), and the helpers were built here
    assert "native launch queue unavailable" not in p.stderr, p.stderr[-2000:]
    queue, sched = _observe_native_helpers(venv)
    assert queue and sched, f"launch queue {queue}, warp scheduler {sched}"
    if name == "warp_vote":
        ir = "".join(f.read_text() for f in dump.glob("*.ll"))
        assert "@ptx_sched_resolve_warp(" in ir, "warp_vote's kernels no longer call the warp scheduler"


def test_sample_runs_from_a_clean_environment(venv, rundir):
    """Started with nothing of a shell (cron, systemd): the shim still starts the venv's own Python."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.path.expanduser("~")}
    p = _run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), venv.bin / "zluda-py", "run", "--",
              f"./{SAMPLES[0]}"], cwd=rundir, timeout=300)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines and lines[-1] == "PASS", f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"


def test_numba_cuda_script_from_the_installed_wheel(venv, tmp_path):
    if venv.clients_missing:
        pytest.skip(venv.clients_missing)
    script = tmp_path / "saxpy.py"
    script.write_text(NUMBA_SCRIPT)
    p = _run([venv.bin / "zluda-py", "run", "--backend", "cpu", "--", "python", script.name], cwd=tmp_path,
             env=venv.env(), timeout=300)
    result = [ln.split()[1:] for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and result, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    assert [float(v) for v in result[0]] == [NUMBA_WANT, NUMBA_WANT]


def test_doctor_is_clean_in_the_venv(venv, tmp_path):
    p = _run([venv.bin / "zluda-py", "doctor"], cwd=tmp_path, env=venv.env(), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "[ok] cpu backend: a kernel compiled and launched through the shim gives every element right" in out
    assert "the shim starts this installation's Python" in out
    assert "no problems found" in out


def test_version_names_the_package_and_llvm(venv, tmp_path):
    p = _run([venv.bin / "zluda-py", "--version"], cwd=tmp_path, env=venv.env())
    assert p.returncode == 0, p.stderr
    declared = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert re.fullmatch(rf"zluda-py {re.escape(declared)} \(llvmlite [\d.]+, LLVM \d+\.\d+\.\d+; Python [\d.]+\)\n",
                        p.stdout), p.stdout


def test_doctor_catches_missing_c_sources(venv, tmp_path):
    """What issue 10 shipped: the package without warp_scheduler.c and launchq.c. Doctor must say so, name
    the files, and fail (it said "no problems found")."""
    files = [venv.site / "ptx" / "codegen" / "warp_scheduler.c", venv.site / "zluda_py" / "backends" / "cpu" / "launchq.c"]
    for f in files:
        f.rename(f.with_name(f.name + ".hidden"))
    try:
        # a fresh cache: already built helpers would hide nothing at run time, but must not hide it here
        p = _run([venv.bin / "zluda-py", "doctor"], cwd=tmp_path, env=venv.env(XDG_CACHE_HOME=str(tmp_path / "c")),
                 timeout=600)
    finally:
        for f in files:
            f.with_name(f.name + ".hidden").rename(f)
    assert p.returncode == 1, p.stdout
    for f in files:
        assert re.search(rf"\[!!\] .*{re.escape(str(f))} missing from this installation", p.stdout), p.stdout
    assert "no problems found" not in p.stdout


def test_doctor_catches_a_shim_starting_another_python(venv, shim_libdir, tmp_path):
    """The checkout's libcuda.so.1 starts the checkout's Python: seen from the venv, that is the wrong one."""
    code = ("import sys\nfrom zluda_py import doctor\nrep = doctor.Report()\n"
            "doctor.check_clean_environment(rep, doctor.Probe(), sys.argv[1])\nsys.exit(rep.failed)\n")
    p = _run([venv.python, "-c", code, Path(shim_libdir) / "libcuda.so.1"], cwd=tmp_path, env=venv.env())
    assert p.returncode == 1, p.stdout + p.stderr
    assert "the shim starts the wrong Python" in p.stdout and f"not {venv.root}" in p.stdout, p.stdout
