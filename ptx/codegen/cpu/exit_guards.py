"""Finds a kernel's exit guards: the `if (i < n)` prologue (pure instructions, then predicated branches to a
bare `ret`) that nearly every CUDA kernel starts with, so a block whose threads all pass it can run a copy of the
body without it (no masked memory operations in the vectorised thread loop)."""

from __future__ import annotations

from dataclasses import dataclass

from ptx import ast as A

# Instructions with no effect but their destination registers, and no trap: running them for a thread that
# the guard would stop changes nothing. Loads only from the kernel's parameters (`.param` space).
_PURE = frozenset({
    "mov", "add", "sub", "mul", "mad", "mul24", "mad24", "sad", "cvt", "cvta", "shl", "shr", "and", "or",
    "xor", "not", "cnot", "neg", "abs", "min", "max", "setp", "set", "selp", "slct", "bfe", "bfi", "brev",
    "popc", "clz", "prmt",
})


@dataclass
class ExitGuards:
    end: int          # index in the body just past the prologue (its last guard)
    guards: tuple     # indices of the guard instructions (a thread whose guard holds does nothing more)


def _exit_labels(body):
    """Labels whose code is a bare `ret`/`exit` (or the end of the body): branching there ends the thread."""
    out = set()
    pending = []
    for st in body:
        if isinstance(st, A.Label):
            pending.append(st.name)
            continue
        if st.opcode in ("ret", "exit") and not st.guard:
            out.update(pending)
        pending = []
    out.update(pending)
    return out


def _is_pure(st):
    if st.opcode == "ld":
        return "param" in st.mods and not st.guard
    return st.opcode in _PURE


def find_exit_guards(body) -> ExitGuards | None:
    """The straight-line prologue of `body` up to its last exit guard, or None when it has none."""
    exits = _exit_labels(body)
    guards, end = [], 0
    for i, st in enumerate(body):
        if isinstance(st, A.Label):
            break
        if st.guard and (st.opcode in ("ret", "exit")
                         or st.opcode == "bra" and getattr(st.operands[0], "name", None) in exits):
            guards.append(i)
            end = i + 1
            continue
        if not _is_pure(st):
            break
    if not guards:
        return None
    return ExitGuards(end, tuple(guards))
