"""Python CUDA frameworks (numba-cuda, cuda.core, cuda.bindings) run unmodified through the shim on the CPU
backend: each program under progs/ runs in its own process via `zluda-py run` and checks its own results."""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")

# program -> the packages it imports (it is skipped, with the reason, when one is not installed)
PROGRAMS = {
    "numba_kernels.py": ("numba_cuda", "cuda.bindings"),
    "numba_streams.py": ("numba_cuda", "cuda.bindings"),
    "numba_nrt.py": ("numba_cuda", "cuda.bindings", "nvrtc"),     # NVRTC builds NRT's nrt.cu
    "cuda_core_program.py": ("cuda.core", "cuda.bindings", "nvrtc"),
    "cuda_bindings_graphs.py": ("cuda.bindings",),
}


def _nvrtc_found() -> bool:
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        load_nvidia_dynamic_lib("nvrtc")
        return True
    except Exception:  # noqa: BLE001 - any failure means the program cannot compile
        return False


def _missing(packages):
    for p in packages:
        if p == "nvrtc":
            if not _nvrtc_found():
                return "NVRTC (nvidia-cuda-nvrtc)"
            continue
        try:
            if importlib.util.find_spec(p) is None:
                return p
        except ModuleNotFoundError:
            return p
    return None


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_client_program(program, shim_libdir):
    missing = _missing(PROGRAMS[program])
    if missing:
        pytest.skip(f"{missing} is not installed (pip install -e '.[clients]')")
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("ZLUDA_LOG", None)
    cmd = [sys.executable, "-m", "zluda_py.cli", "run", "--backend", "cpu", "--",
           sys.executable, os.path.join(PROGS, program)]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    lines = p.stdout.splitlines()
    passed = [ln for ln in lines if ln.startswith("PASS ")]
    failed = [ln for ln in lines if ln.startswith("FAIL ")]
    assert p.returncode == 0 and passed and not failed, (
        f"{program} exited {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr (tail)\n{p.stderr[-3000:]}")


def test_cupy_exits_without_a_word(shim_libdir):
    """CuPy's finalizers unload its modules and free its memory while the interpreter tears down, when no
    Python can run any more: those release calls succeed as on NVIDIA's driver, and nothing reaches stderr
    (it printed "Error in sys.excepthook" from Module.__dealloc__ before)."""
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("cupy is not installed (scripts/setup --clients)")
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for k in ("ZLUDA_LOG", "ZLUDA_TRACE", "ZLUDA_PROFILE"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "zluda_py.cli", "run", "--backend", "cpu", "--",
           sys.executable, os.path.join(PROGS, "cupy_exit.py")]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "PASS" in p.stdout and p.stderr == "", (p.stdout, p.stderr[-3000:])
