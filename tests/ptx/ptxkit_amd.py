"""ptxkit's emulated AMD backend (PTXKIT_BACKEND=gfx1100, gfx1100:cumode, gfx950): each launch runs on the
emulator and, on copies of the arguments, on the CPU backend, and the two are compared."""

# PTXKIT_EMU_HOST=strict (default): an array the two leave different fails the launch (NaN matches NaN in
# float arrays); =report: the difference is only recorded. PTXKIT_EMU_STATS=<file> appends one JSON line per
# launch: kernel, arrays written, elements compared, elements that differ from the CPU backend.

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest


# Outputs the order threads run in, or the machine, decides (the emulator runs waves one after another, the
# CPU backend blocks on several threads): those elements are not compared with the CPU backend; the test's
# own check still applies. [(kernel name test, argument, why, elements: None for all, or array -> mask)]
def _column(k, ncols):
    return lambda a: (np.arange(a.size) % ncols) == k


def _atomic(name):
    return name.startswith(("atom_", "red_"))


SCHEDULE_DEPENDENT = [
    (lambda k: k == "cas_counter", 1, "CAS retries per thread depend on which thread wins each round", None),
    (lambda k: k == "sregs", 0, "%smid is the number of the SM (CU) that ran the block", _column(21, 23)),
    (_atomic, 2, "the old value a thread gets is its place in the serial order of the atomics", None),
    (lambda k: _atomic(k) and ("_exch_" in k or "_cas_" in k), 0, "the last exch/cas decides the final value",
     None),
]


def _schedule_dependent(name, k):
    """Mask of the elements of argument k of kernel `name` not compared, or None."""
    hits = [skip for test, arg, _, skip in SCHEDULE_DEPENDENT if arg == k and test(name)]
    if not hits:
        return None
    return lambda a: np.logical_or.reduce([np.ones(a.size, bool) if s is None else s(a) for s in hits])


def _cache_dir():
    where = os.environ.get("ZLUDA_AMDGPU_TEST_CACHE") or str(Path.home() / ".cache" / "zluda-py" / "amdgpu-tests")
    os.makedirs(where, exist_ok=True)
    return where


class EmulatedModule:
    def __init__(self, text, target):
        import ptx
        from ptx import amdgpu_emulator
        why = amdgpu_emulator.available()
        if why:
            pytest.skip(f"no AMD GPU emulator: {why}")
        self.target = target
        self.amd = ptx.compile(text, target=target, cache_dir=_cache_dir())
        self.host = ptx.compile(text, target="host")

    def kernel(self, name):
        return EmulatedKernel(self, name)


def _same(a, b):
    """Per element: equal bits, or both NaN where the array holds floats."""
    if a.dtype.kind == "f":
        return (a.view(np.uint8).reshape(a.shape + (-1,)) == b.view(np.uint8).reshape(b.shape + (-1,))).all(-1) \
            | (np.isnan(a) & np.isnan(b))
    return a == b


class EmulatedKernel:
    def __init__(self, mod, name):
        self.mod, self.name = mod, name
        self.amd = mod.amd.kernel(name)
        self.host = mod.host.kernel(name)

    def launch(self, grid, block, args, shared_bytes=0):
        args = list(args)
        copies = {}                         # one copy per distinct array: aliasing survives
        host_args = [copies.setdefault(id(a), np.array(a, copy=True)) if isinstance(a, np.ndarray) else a
                     for a in args]
        before = {id(a): np.array(a, copy=True) for a in args if isinstance(a, np.ndarray)}
        self.amd.launch(grid, block, args, shared_bytes)
        self.host.launch(grid, block, host_args, shared_bytes)
        written, elements, differ, seen = 0, 0, {}, set()
        for k, a in enumerate(args):
            if not isinstance(a, np.ndarray) or id(a) in seen:
                continue
            seen.add(id(a))
            h = copies[id(a)]
            old = before[id(a)]
            if (a.view(np.uint8) == old.view(np.uint8)).all() and (h.view(np.uint8) == old.view(np.uint8)).all():
                continue                    # an input neither side wrote
            written += 1
            elements += a.size
            ok = _same(a, h).reshape(-1)
            skip = _schedule_dependent(self.name, k)
            if skip is not None:
                ok |= skip(a.reshape(-1))
            bad = int((~ok).sum())
            if bad:
                differ[k] = (ok, bad)
        self._record(written, elements, differ)
        if differ and os.environ.get("PTXKIT_EMU_HOST", "strict") == "strict":
            detail = ", ".join(f"argument {k}: {n} of {args[k].size}" for k, (_, n) in differ.items())
            first = next(iter(differ))
            i = int(np.flatnonzero(~differ[first][0])[0])
            raise AssertionError(f"{self.name} on {self.mod.target} (emulated) differs from the CPU backend: "
                                 f"{detail}; first at [{i}]: emulator {args[first].reshape(-1)[i]!r}, "
                                 f"CPU {copies[id(args[first])].reshape(-1)[i]!r}")

    def _record(self, written, elements, differ):
        path = os.environ.get("PTXKIT_EMU_STATS")
        if not path:
            return
        rec = {"test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0], "target": self.mod.target,
               "kernel": self.name, "outputs": written, "elements": elements,
               "differ": sum(n for _, n in differ.values())}
        with open(path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
