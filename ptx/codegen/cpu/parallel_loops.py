"""Thread loops declared parallel: the threads of a barrier-free region do not depend on one another through
global or shared memory (a program whose thread reads another's store with no barrier between them races on a GPU,
and an H100 gives every thread the value from before the launch: tests/data/nvidia_overlap_race.json), so each
plain global and shared access and each access of a thread's own register slots joins one access group that the
thread loops declare parallel, and LLVM's vectorizer needs no runtime check that a loop's pointers do not overlap.
Those checks cost most where a block's rows are short (16 threads: one vector) and, where the trip count is known,
make it keep them scalar. Local memory (a frame every thread of the loop reuses), generic accesses (which may reach
it) and block-shared read-modify-writes stay out: a loop with any of them gets LLVM's own dependence analysis."""

from __future__ import annotations

import re

from ptx.codegen.function_emitter import GLOBAL_SCOPE, RMW_MARK, SHARED_SCOPE
from ptx.codegen.cpu.slot_scopes import LIST_BASE

ENABLED = True
assert RMW_MARK.startswith(";")     # _line keeps any access with a comment out

_GROUP = "!9100"
_PARALLEL = "!9101"
# the thread loops' own properties (region_loops.py, thread_loops.py) with parallel_accesses added; loops
# that must stay scalar (vectorize.enable false: !8988) are left as they are
_LOOPS = {None: ("!9102", ""), "8998": ("!9103", ", !8999, !8990"), "8992": ("!9104", ", !8991, !8993")}
_HEAD = f'{_GROUP} = distinct !{{}}\n{_PARALLEL} = !{{!"llvm.loop.parallel_accesses", {_GROUP}}}\n'
_LATCH = re.compile(r"^(\s*br i1 %([\w.]*)tx\.c, label %\2tx\.head, label %[^,\s]+)(, !llvm\.loop !(\d+))?$")
# a masked region (cpu/region_loops.py: the threads still at one site of a block whose others are elsewhere, often
# a few of them): vectorised over every thread with masks, a naive SGEMM's edge blocks made n=1000 take 4x as long
_MASKED = 'define internal i32 @"rm'
_ACCESS = re.compile(r"^\s*(?:%\S+ = load |store )")
_SCOPE = re.compile(r"!alias\.scope !(\d+)\b")


def _scoped(line: str) -> bool:
    """Whether an access is a plain global or shared one (FunctionEmitter.space_scope) or one of the register
    slots, one element per thread (the scope lists of cpu/slot_scopes.py, numbered from LIST_BASE)."""
    m = _SCOPE.search(line)
    n = int(m.group(1)) if m else -1
    return n in (GLOBAL_SCOPE, SHARED_SCOPE) or LIST_BASE <= n < LIST_BASE + 100000


def _line(line: str, used: set) -> str:
    if _ACCESS.match(line):
        if (";" in line or "!llvm.access.group" in line or " volatile " in line or " atomic " in line
                or not _scoped(line)):
            return line     # RMW_MARK: lanes of one vector may update the same word
        return f"{line}, !llvm.access.group {_GROUP}"
    m = _LATCH.match(line)
    if m:
        got = _LOOPS.get(m.group(4))
        if got is not None:
            used.add(got)
            return f"{m.group(1)}, !llvm.loop {got[0]}"
    return line


def mark(bodies: list) -> tuple:
    """(bodies with their accesses grouped and their thread loops parallel, the metadata they need or "")."""
    if not ENABLED:
        return bodies, ""
    out, used, marked = [], set(), False
    for body in bodies:
        if "tx.c, label %" not in body or body.startswith(_MASKED):
            out.append(body)
            continue
        marked = True
        out.append("\n".join(_line(line, used) for line in body.split("\n")))
    if not marked:
        return out, ""
    return out, _HEAD + "".join(f"{new} = distinct !{{{new}{props}, {_PARALLEL}}}\n" for new, props in sorted(used))
