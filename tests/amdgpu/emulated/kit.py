"""A kernel on the emulated AMD target (ZLUDA_EMU_TARGET) and the CPU backend with the same inputs, checked
element by element, exactly or within a stated tolerance (ZLUDA_EMU_STATS: one JSON line per output)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

TARGET = os.environ.get("ZLUDA_EMU_TARGET", "gfx1100")
_MODULES = {}


def cache_dir():
    where = os.environ.get("ZLUDA_AMDGPU_TEST_CACHE") or str(Path.home() / ".cache" / "zluda-py" / "amdgpu-tests")
    os.makedirs(where, exist_ok=True)
    return where


def modules(text):
    """(AMD module for TARGET, host module) of a PTX text, compiled once per process."""
    import ptx
    from ptx import amdgpu_emulator
    why = amdgpu_emulator.available()
    if why:
        pytest.skip(f"no AMD GPU emulator: {why}")
    if text not in _MODULES:
        _MODULES[text] = (ptx.compile(text, target=TARGET, cache_dir=cache_dir()), ptx.compile(text, target="host"))
    return _MODULES[text]


def poison(rng, shape, dtype):
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    return np.frombuffer(rng.integers(0, 256, n, dtype=np.uint8).tobytes(), dtype).reshape(shape).copy()


class Run:
    """One launch on both backends: `emu` holds the arguments after the emulated run, `cpu` the CPU
    backend's copies after its run (one copy per distinct array, so aliasing stays)."""

    def __init__(self, text, kernel, grid, block, args, shared_bytes=0):
        amd, host = modules(text)
        names = [k for k in amd.kernels if k == kernel or k.startswith(f"_Z{len(kernel)}{kernel}")]
        if len(names) != 1:
            raise KeyError(f"kernel {kernel!r}: {names or sorted(amd.kernels)}")
        self.kernel = names[0]
        copies = {}
        self.emu = list(args)
        self.cpu = [copies.setdefault(id(a), np.array(a, copy=True)) if isinstance(a, np.ndarray) else a
                    for a in args]
        amd.kernel(self.kernel).launch(grid, block, self.emu, shared_bytes)
        host.kernel(self.kernel).launch(grid, block, self.cpu, shared_bytes)

    def out(self, k):
        return self.emu[k], self.cpu[k]


def _record(kernel, what, n, differ=0):
    path = os.environ.get("ZLUDA_EMU_STATS")
    if path:
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        with open(path, "a") as fh:
            fh.write(json.dumps({"test": test, "target": TARGET, "kernel": kernel, "output": what, "outputs": 1,
                                 "elements": int(n), "differ": int(differ)}) + "\n")


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    eq = a.view(np.uint8).reshape(a.size, -1) == b.view(np.uint8).reshape(b.size, -1)
    same = eq.all(axis=1)
    if a.dtype.kind == "f":
        same |= np.isnan(a.reshape(-1)) & np.isnan(b.reshape(-1))
    return same


def _first_bad(ok, got, want, what):
    i = int(np.flatnonzero(~ok)[0])
    return (f"{what}: {int((~ok).sum())} of {ok.size} elements wrong; first [{i}]: got "
            f"{np.asarray(got).reshape(-1)[i]!r}, want {np.asarray(want).reshape(-1)[i]!r}")


def exact(run, k, want, what, cpu="exact"):
    """Output k equals `want` in every element, and the CPU backend's (cpu="exact") or is only checked
    against `want` too (cpu="reference": a result the order of threads decides, stated by the case)."""
    got, host = run.out(k)
    if got.dtype.names:                      # a struct: each field on its own, named in the message
        want = np.asarray(want, dtype=got.dtype).reshape(got.shape)
        for f in got.dtype.names:
            sub = _Fields(run, k, f)
            exact(sub, 0, want[f], f"{what}.{f}", cpu)
        return
    want = np.ascontiguousarray(np.asarray(want, dtype=got.dtype).reshape(got.shape))
    ok = _same_bits(got, want)
    _record(run.kernel, what, got.size, int((~ok).sum()))
    assert ok.all(), _first_bad(ok, got, want, f"{run.kernel} {what} (emulated {TARGET} vs numpy)")
    ok = _same_bits(host, want if cpu == "reference" else got)
    assert ok.all(), _first_bad(ok, host, got, f"{run.kernel} {what} (CPU backend)")


class _Fields:
    def __init__(self, run, k, field):
        self.kernel = run.kernel
        self._out = (np.ascontiguousarray(run.emu[k][field]), np.ascontiguousarray(run.cpu[k][field]))

    def out(self, _):
        return self._out


def within(run, k, want, tol, what, cpu_tol=None):
    """|output - want| <= tol elementwise (tol: array or scalar, in the output's units), NaN only where
    want is NaN; the CPU backend's result within cpu_tol of the emulated one (default: bit-equal)."""
    got, host = run.out(k)
    g, w = got.astype(np.float64).reshape(-1), np.asarray(want, np.float64).reshape(-1)
    tol = np.asarray(tol, np.float64)
    tol = tol.reshape(-1) if tol.size == w.size else np.broadcast_to(tol, w.shape)
    ok = (np.abs(g - w) <= tol) | (np.isnan(g) & np.isnan(w)) | ((g == w) & np.isinf(w))
    _record(run.kernel, what, got.size, int((~ok).sum()))
    assert ok.all(), _first_bad(ok, g, w, f"{run.kernel} {what} (emulated {TARGET} vs numpy, tol)")
    if cpu_tol is None:
        ok = _same_bits(host, got)
    else:
        h = host.astype(np.float64).reshape(-1)
        ct = np.asarray(cpu_tol, np.float64)
        ct = ct.reshape(-1) if ct.size == w.size else np.broadcast_to(ct, w.shape)
        ok = (np.abs(h - g) <= ct) | (np.isnan(h) & np.isnan(g)) | ((h == g) & np.isinf(g))
    assert ok.all(), _first_bad(ok, host, got, f"{run.kernel} {what} (CPU backend vs emulated)")


def ulps(want32):
    """The spacing of float32 at each value of want32 (the ulp the tolerances are written in)."""
    a = np.abs(np.asarray(want32, np.float32))
    a = np.where(np.isfinite(a), a, np.float32(1))
    return (np.nextafter(a, np.float32(np.inf)) - a).astype(np.float64)
