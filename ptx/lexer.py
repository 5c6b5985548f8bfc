"""PTX lexer: one compiled regex turns the source into a flat token list with line:column positions.

An identifier keeps its dotted suffixes in one WORD token (`ld.global.nc.v4.f32`, `%tid.x`,
`cp.async.bulk.shared::cluster.global`) because PTX forbids whitespace inside them; a stand-alone dotted
name (`.reg`, `.b32`, `.shared::cta`) is a DIR token. Comments, `@@DWARF` lines and whitespace vanish here.
"""

from __future__ import annotations

import re
import struct

from ptx.errors import PTXSyntaxError

# Token kinds (small ints keep the parser's comparisons cheap).
WORD, DIR, INT, FLOAT, STR, PUNCT, ERR, EOF = range(8)

_SUFFIX = r"(?:\.[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*)"
# Each match is: skipped whitespace/comments/`@@DWARF` lines, then exactly one token (or the end).
_MASTER = re.compile(
    r"(?:\s+|//[^\n]*|/\*.*?\*/|@@DWARF[^\n]*)*"
    r"(?:(?P<word>[A-Za-z_$%][A-Za-z0-9_$]*" + _SUFFIX + r"*)"
    r"|(?P<ubc>/\*)"
    r"|(?P<punct>[{}()\[\];,:+\-!@|<>=*/~&^%])"
    r"|(?P<hexf>0[fF][0-9a-fA-F]{8}(?![0-9A-Za-z_$]))"
    r"|(?P<hexd>0[dD][0-9a-fA-F]{16}(?![0-9A-Za-z_$]))"
    r"|(?P<dec>(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)"
    r"(?![0-9A-Za-z_$.]))"
    r"|(?P<int>(?:0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)[uU]?(?![0-9A-Za-z_$.]))"
    r"|(?P<dir>\.[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z0-9_]+)*)"
    r"|(?P<str>\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?P<end>\Z)"
    r"|(?P<err>.))",
    re.S,
)

_U64 = (1 << 64) - 1


def describe(tok) -> str:
    """How an error message names a token."""
    if tok[0] == EOF:
        return "end of input"
    return repr(tok[1])


def int_literal(text: str, line: int, col: int) -> int:
    body = text[:-1] if text[-1] in "uU" else text
    if body[:2] in ("0x", "0X"):
        value = int(body[2:], 16)
    elif body[:2] in ("0b", "0B"):
        value = int(body[2:], 2)
    elif len(body) > 1 and body[0] == "0":
        if any(c in "89" for c in body):
            raise PTXSyntaxError(f"invalid octal literal {text!r}", line, col)
        value = int(body, 8)
    else:
        value = int(body)
    if value > _U64:
        raise PTXSyntaxError(f"integer literal {text!r} does not fit in 64 bits", line, col)
    return value


def float_bits(raw: int, bits: int) -> float:
    if bits == 32:
        return struct.unpack("<f", struct.pack("<I", raw))[0]
    return struct.unpack("<d", struct.pack("<Q", raw))[0]


def tokenize(text: str) -> list:
    """Token list ending in one EOF token; a token is the tuple (kind, text, value, line, col). Bad
    characters become ERR tokens, so a `.section` skipper can step over them; the parser rejects them
    anywhere else. Raises PTXSyntaxError only for unterminated comments and malformed literals."""
    if "/*" not in text:
        return _tokenize_lines(text)
    toks = []
    append = toks.append
    count = text.count
    line = 1
    line_start = 0
    prev = 0
    for m in _MASTER.finditer(text):
        kind = m.lastgroup
        start = m.start(kind)
        if start != prev:
            n = count("\n", prev, start)
            if n:
                line += n
                line_start = text.rfind("\n", prev, start) + 1
        prev = m.end()
        col = start - line_start + 1
        if kind == "word":
            append((WORD, m.group(kind), None, line, col))
        elif kind == "punct":
            append((PUNCT, m.group(kind), None, line, col))
        elif kind == "int":
            s = m.group(kind)
            append((INT, s, int_literal(s, line, col), line, col))
        elif kind == "dir":
            append((DIR, m.group(kind), None, line, col))
        elif kind == "end":
            break
        elif kind == "hexf":
            s = m.group(kind)
            raw = int(s[2:], 16)
            append((FLOAT, s, (float_bits(raw, 32), 32, raw), line, col))
        elif kind == "hexd":
            s = m.group(kind)
            raw = int(s[2:], 16)
            append((FLOAT, s, (float_bits(raw, 64), 64, raw), line, col))
        elif kind == "dec":
            s = m.group(kind)
            append((FLOAT, s, (float(s), 0, 0), line, col))
        elif kind == "str":
            s = m.group(kind)
            append((STR, s, s[1:-1], line, col))
        elif kind == "ubc":
            raise PTXSyntaxError("unterminated /* comment", line, col)
        else:
            append((ERR, m.group(kind), None, line, col))
    append((EOF, "", None, line, len(text) - line_start + 1))
    return toks


# A line's tokens, for text without block comments (no token then spans lines): the line number is the
# loop's, the column the match's, so no newline is counted per token. Words and punctuation come first.
_LINE = re.compile(
    r"[ \t\r\f\v]*(?:(?P<word>[A-Za-z_$%][A-Za-z0-9_$]*" + _SUFFIX + r"*)"
    r"|(?P<cmt>//.*|@@DWARF.*)"
    r"|(?P<punct>[{}()\[\];,:+\-!@|<>=*/~&^%])"
    r"|(?P<hexf>0[fF][0-9a-fA-F]{8}(?![0-9A-Za-z_$]))"
    r"|(?P<hexd>0[dD][0-9a-fA-F]{16}(?![0-9A-Za-z_$]))"
    r"|(?P<dec>(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)"
    r"(?![0-9A-Za-z_$.]))"
    r"|(?P<int>(?:0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)[uU]?(?![0-9A-Za-z_$.]))"
    r"|(?P<dir>\.[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z0-9_]+)*)"
    r"|(?P<str>\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?P<end>\Z)"
    r"|(?P<err>.))")
_KIND = {"word": WORD, "punct": PUNCT, "dir": DIR}


def _tokenize_lines(text: str) -> list:
    toks = []
    append = toks.append
    finditer = _LINE.finditer
    kinds = _KIND
    line = 0
    for src in text.split("\n"):
        line += 1
        for m in finditer(src):
            kind = m.lastgroup
            k = kinds.get(kind)
            if k is not None:
                append((k, m.group(kind), None, line, m.start(kind) + 1))
                continue
            if kind == "end" or kind == "cmt":
                break
            s = m.group(kind)
            col = m.start(kind) + 1
            if kind == "int":
                append((INT, s, int_literal(s, line, col), line, col))
            elif kind == "hexf":
                raw = int(s[2:], 16)
                append((FLOAT, s, (float_bits(raw, 32), 32, raw), line, col))
            elif kind == "hexd":
                raw = int(s[2:], 16)
                append((FLOAT, s, (float_bits(raw, 64), 64, raw), line, col))
            elif kind == "dec":
                append((FLOAT, s, (float(s), 0, 0), line, col))
            elif kind == "str":
                append((STR, s, s[1:-1], line, col))
            else:
                append((ERR, s, None, line, col))
    append((EOF, "", None, line, len(src) + 1))
    return toks
