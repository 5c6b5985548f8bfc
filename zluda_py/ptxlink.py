"""Textual linking of PTX modules: one module from several (relocatable device code, cuLink inputs), the
newest header kept, bodies concatenated, and .extern declarations dropped where another input defines them."""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\.(version|target|address_size)\b[^\n]*\n?", re.M)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_EXTERN = re.compile(r"\.extern\b[^;{]*;")
_DEFINED = re.compile(r"\.(?:entry|func)\s*(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)\s*\(?[^;{]*\{", re.S)
_DEFINED_VAR = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:global|const)\b[^;(]*?([A-Za-z_$%][\w$]*)"
                          r"\s*(?:\[[^\]]*\]\s*)*(?:=[^;]*)?;", re.M)


def _extern_name(decl: str):
    m = re.match(r"\.extern\s+\.func\s*(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)", decl)
    if m:
        return m.group(1)
    m = re.search(r"([A-Za-z_$%][\w$]*)\s*(?:\[[^\]]*\]\s*)*;$", decl)
    return m.group(1) if m else None


_FUNC_HEAD = re.compile(r"\.func\s*(?:\(([^)]*)\)\s*)?([A-Za-z_$%][\w$]*)\s*\(([^)]*)\)", re.S)
_PARAM_NAME = re.compile(r"[A-Za-z_$%][\w$]*(\s*\[[^\]]*\])?\s*$")


def _signature(head) -> tuple:
    """A .func header's return and parameter declarations without their names."""
    def decls(text):
        return tuple(" ".join(_PARAM_NAME.sub(r"\1", d).split()) for d in (text or "").split(",") if d.strip())
    return decls(head.group(1)), decls(head.group(3))


def _version_key(header: str):
    m = re.search(r"\.version\s+(\d+)\.(\d+)", header)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


_WEAK_FUNC = re.compile(r"\.weak\s+\.func\s*(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)\s*\(")


def _definition_end(text: str, params_open: int) -> int:
    """Index just past the body of the function whose parameter list opens at `params_open` (the index
    just after its `(`); -1 for a declaration (`;` before any `{`)."""
    close = text.find(")", params_open)
    if close < 0:
        return -1
    brace, semi = text.find("{", close), text.find(";", close)
    if brace < 0 or 0 <= semi < brace:
        return -1
    depth = 0
    for i in range(brace, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _drop_repeated_weak(bodies: list) -> list:
    """Each translation unit carries its own copy of inline/template functions as .weak: keep the first."""
    seen = set()
    out = []
    for b in bodies:
        pieces, pos = [], 0
        for m in _WEAK_FUNC.finditer(b):
            if m.start() < pos:
                continue
            end = _definition_end(b, m.end())
            if end < 0:   # a prototype: redundant once a definition was kept
                end = b.find(";", m.end()) + 1
                if m.group(1) in seen and end > 0:
                    pieces.append(b[pos:m.start()])
                    pos = end
                continue
            if m.group(1) in seen:
                pieces.append(b[pos:m.start()])
                pos = end
            else:
                seen.add(m.group(1))
        pieces.append(b[pos:])
        out.append("".join(pieces))
    return out


_WEAK_VAR = re.compile(r"^[ \t]*\.weak\s+\.(?:global|const)\b[^;(]*?([A-Za-z_$%][\w$]*)\s*(?:\[[^\]]*\]\s*)*"
                       r"(?:=[^;]*)?;[ \t]*\n?", re.M)


def _drop_repeated_weak_vars(bodies: list) -> list:
    """Header-defined variables (a template's static constexpr member) come as .weak from every unit that
    includes the header; like the linker, keep the first."""
    seen = set()

    def drop(m):
        if m.group(1) in seen:
            return ""
        seen.add(m.group(1))
        return m.group(0)
    return [_WEAK_VAR.sub(drop, b) for b in bodies]


def merge_ptx(texts: list) -> str:
    """One PTX module from several: the newest .version header, the bodies in order, and .extern
    declarations dropped where another input defines the symbol."""
    if len(texts) == 1:
        return texts[0]
    headers, bodies = [], []
    for t in texts:
        t = _COMMENT.sub("", t)
        headers.append("".join(m.group(0) for m in _HEADER.finditer(t)))
        bodies.append(_HEADER.sub("", t))
    defined = set()
    for b in bodies:
        defined.update(m.group(1) for m in _DEFINED.finditer(b))
        defined.update(m.group(1) for m in _DEFINED_VAR.finditer(b) if ".extern" not in m.group(0))
    seen_externs = set()
    def_sigs = {}
    for b in bodies:
        for m in _FUNC_HEAD.finditer(b):
            if _definition_end(b, m.start(3)) >= 0:
                def_sigs[m.group(2)] = _signature(m)
    kept_prototypes = set()

    def drop(m):
        decl = m.group(0)
        name = _extern_name(decl)
        head = _FUNC_HEAD.search(decl) if decl.startswith(".extern") else None
        if head is not None and name in def_sigs and _signature(head) != def_sigs[name]:
            # A prototype that disagrees with the definition in another input stays: it is the signature
            # this input's calls were written against (ptx/check.py matches them to it; NVIDIA's linker,
            # resolving by name, accepts the pair: numba declares a C `void` function as returning .b64).
            key = (name, _signature(head))
            if key in kept_prototypes:
                return ""
            kept_prototypes.add(key)
            return decl
        if name in defined or name in seen_externs:
            return ""
        seen_externs.add(name)
        return decl
    merged = _drop_repeated_weak_vars(_drop_repeated_weak([_EXTERN.sub(drop, b) for b in bodies]))
    header = max(headers, key=_version_key)
    return header + "\n" + "\n".join(merged)


_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)\s*[,;]")


def undefined_calls(inputs: list, provided) -> list:
    """(function, input name) for each function an input calls that no input defines and that is not one of
    `provided` (what the target serves itself: vprintf, malloc, the device runtime): what nvlink reports as
    "Undefined reference to 'f' in 'input'". inputs: (name, PTX text) pairs."""
    texts = [(name, _COMMENT.sub("", t)) for name, t in inputs]
    defined = {m.group(1) for _, t in texts for m in _DEFINED.finditer(t)}
    out, seen = [], set()
    for name, t in texts:
        for m in _CALL.finditer(t):
            f = m.group(1)
            if f not in defined and f not in provided and (f, name) not in seen:
                seen.add((f, name))
                out.append((f, name))
    return out


_ENTRY = re.compile(r"\.entry\s+[A-Za-z_$%][\w$]*\s*")


def with_max_registers(text: str, n: int) -> str:
    """`.maxnreg n` on every kernel without one: the linked image carries CU_JIT_MAX_REGISTERS (ptxas's
    -maxrregcount) to whoever loads it, and a kernel's own .maxnreg wins, as with ptxas."""
    out, pos = [], 0
    for m in _ENTRY.finditer(text):
        start = m.end()
        if start < pos:
            continue
        close = text.find(")", start) if text.startswith("(", start) else start - 1
        brace = text.find("{", close + 1)
        if close < 0 or brace < 0 or ";" in text[close + 1:brace]:
            continue
        if ".maxnreg" not in text[close + 1:brace]:
            out.append(text[pos:brace])
            out.append(f".maxnreg {int(n)}\n")
            pos = brace
    out.append(text[pos:])
    return "".join(out)

