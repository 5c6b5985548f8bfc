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


def _version_key(header: str):
    m = re.search(r"\.version\s+(\d+)\.(\d+)", header)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


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

    def drop(m):
        name = _extern_name(m.group(0))
        if name in defined or name in seen_externs:
            return ""
        seen_externs.add(name)
        return m.group(0)
    merged = [_EXTERN.sub(drop, b) for b in bodies]
    header = max(headers, key=_version_key)
    return header + "\n" + "\n".join(merged)
