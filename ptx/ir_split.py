"""Splitting a large LLVM IR module (text) into parts LLVM can optimise and compile at the same time, in separate
processes, for a shorter first compile: the parts' objects are merged into one before linking (host_llc.py)."""

from __future__ import annotations

import re

# below this many lines a module compiles in well under 0.1 s: the parts' overhead outweighs the gain (LLVM's
# time per line varies tenfold with the loops in it: 600-1,800-line kernels with both children up took 20-35 %
# less time split, a 2,400-line one 40 %)
MIN_LINES = 600

_DEFINE = re.compile(r'^define ((?:internal|private|hidden|dso_local|external)\s+)*(.*?)(@(?:"[^"]*"|[\w.$-]+))\(')
# a variable definition with a type simple enough to declare: name, linkage, type
_VARIABLE = re.compile(r'^(@(?:"[^"]*"|[\w.$-]+)) = ((?:internal|private|hidden|dso_local) )?global '
                       r'(ptr|i\d+|float|double|\[\d+ x (?:i\d+|ptr|float|double)\]) ')
# header variables every part may copy: read-only data private to each part, declarations
_SHAREABLE_VAR = re.compile(r'^@(?:"[^"]*"|[\w.$-]+) = (?:(?:internal|private)\s+(?:unnamed_addr\s+)?constant|'
                            r'external\s+(?:global|constant))\b')


def _items(text: str):
    """(header lines, [(name, lines of the function)]) or None when the module has something a split cannot copy
    or move safely. A header line is text, or (the first part's definition, the others' declaration)."""
    header, funcs = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("define "):
            m = _DEFINE.match(ln)
            if m is None or not ln.rstrip().endswith("{"):
                return None
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            if j == len(lines):
                return None
            funcs.append((m.group(3), lines[i:j + 1]))
            i = j + 1
            continue
        if ln.startswith(("module asm", "$")):
            return None         # assembly or a comdat every copy would define again
        if ln.startswith("@") and not _SHAREABLE_VAR.match(ln):
            # a variable defined here: one definition (the first part's), declared in the others
            m = _VARIABLE.match(ln)
            if m is None:
                return None
            vis = "" if m.group(2) in (None, "dso_local ") else "hidden "
            header.append((re.sub(r"= (?:internal|private) ", "= hidden ", ln),
                           f"{m.group(1)} = external {vis}global {m.group(3)}"))
            i += 1
            continue
        header.append(ln)
        i += 1
    return header, funcs


def _movable(body) -> bool:
    """A function a part other than its callers' may hold: one LLVM must not inline anyway."""
    head = body[0]
    return "noinline" in head[head.rfind(")"):]


def _declaration(body) -> str:
    head = body[0].rstrip()[:-1].rstrip()
    head = re.sub(r"^define\s+(?:(?:internal|private|hidden|dso_local)\s+)*", "declare ", head)
    return head


def _public(body) -> list:
    """The definition with internal/private linkage made hidden: visible to the other parts of the object the
    parts are merged into, not outside the shared object."""
    return [re.sub(r"^define\s+(?:internal|private)\s+", "define hidden ", body[0])] + body[1:]


def _local(body) -> bool:
    return re.match(r"^define\s+(?:internal|private)\s", body[0]) is not None


def split(text: str, unit: int = 0) -> list | None:
    """The module as modules whose objects together define what it defines (the first holds everything that
    stays put, each other one or more noinline functions of about `unit` lines or more, largest first), or None
    when a split does not pay or is not safe. Only noinline functions move (no call LLVM could inline crosses
    modules), each made hidden and declared in every other module; the other internal functions are copied into
    every module (LLVM drops the copies a module does not call), the rest stay in the first."""
    if text.count("\n") < MIN_LINES:
        return None
    got = _items(text)
    if got is None:
        return None
    header, funcs = got
    unit = unit or max(text.count("\n") // 8, 200)
    groups, cur, size = [], [], 0
    for name, body in sorted(funcs, key=lambda f: -len(f[1])):
        if _movable(body):
            cur.append(name)
            size += len(body)
            if size >= unit:
                groups.append(cur)
                cur, size = [], 0
    if cur:
        groups.append(cur)
    if not groups:
        return None
    where = {name: k + 1 for k, g in enumerate(groups) for name in g}
    out = []
    for p in range(len(groups) + 1):
        lines = [h if isinstance(h, str) else h[p != 0] for h in header]
        for name, body in funcs:
            k = where.get(name, None if _local(body) else 0)
            if k is None:
                lines.extend(body)
            elif k == p:
                lines.extend(_public(body) if k else body)
            else:
                lines.append(_declaration(body))
        out.append("\n".join(lines) + "\n")
    return out
