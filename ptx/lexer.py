"""PTX lexer: one compiled regex turns the source into a flat token list with line:column positions.

An identifier keeps its dotted suffixes in one WORD token (`ld.global.nc.v4.f32`, `%tid.x`,
`cp.async.bulk.shared::cluster.global`) because PTX forbids whitespace inside them; a stand-alone dotted
name (`.reg`, `.b32`, `.shared::cta`) is a DIR token. Comments, `@@DWARF` lines and whitespace vanish here.
"""

from __future__ import annotations

import re
import struct

from ptx.errors import PTXSyntaxError

# Token kinds (small ints keep the parser's comparisons cheap). INSN: a whole plain instruction (below).
WORD, DIR, INT, FLOAT, STR, PUNCT, ERR, EOF, INSN = range(9)

_SUFFIX = r"(?:\.[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*)"
# The token kinds after words and punctuation, shared by the whole-text and the line-wise patterns.
_LITERALS = (
    r"|(?P<hexf>0[fF][0-9a-fA-F]{8}(?![0-9A-Za-z_$]))"
    r"|(?P<hexd>0[dD][0-9a-fA-F]{16}(?![0-9A-Za-z_$]))"
    r"|(?P<dec>(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)"
    r"(?![0-9A-Za-z_$.]))"
    r"|(?P<int>(?:0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)[uU]?(?![0-9A-Za-z_$.]))"
    r"|(?P<dir>\.[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z0-9_]+)*)"
    r"|(?P<str>\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?P<end>\Z)"
    r"|(?P<err>.))")
# Each match is: skipped whitespace/comments/`@@DWARF` lines, then exactly one token (or the end).
_MASTER = re.compile(
    r"(?:\s+|//[^\n]*|/\*.*?\*/|@@DWARF[^\n]*)*"
    r"(?:(?P<word>[A-Za-z_$%][A-Za-z0-9_$]*" + _SUFFIX + r"*)"
    r"|(?P<ubc>/\*)"
    r"|(?P<punct>[{}()\[\];,:+\-!@|<>=*/~&^%])"
    + _LITERALS,
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


def tokenize(text: str, whole_lines: bool = True) -> list:
    """Token list ending in one EOF token; a token is the tuple (kind, text, value, line, col). Bad
    characters become ERR tokens, so a `.section` skipper can step over them; the parser rejects them
    anywhere else. Raises PTXSyntaxError only for unterminated comments and malformed literals.
    whole_lines: a plain instruction line inside braces may be one INSN token (see _STMT)."""
    if "/*" in text:
        return _tokenize_text(text)
    return _tokenize_lines(text, whole_lines)


def _tokenize_text(text: str) -> list:
    """tokenize() over the whole text at once, as a block comment may span lines."""
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
    r"\s*(?:(?P<word>[A-Za-z_$%][A-Za-z0-9_$]*" + _SUFFIX + r"*)"
    r"|(?P<cmt>//.*|@@DWARF.*)"
    r"|(?P<punct>[{}()\[\];,:+\-!@|<>=*/~&^%])"
    + _LITERALS)
_KIND = {"word": WORD, "punct": PUNCT, "dir": DIR}

# Most lines of a body are one plain instruction: `[@[!]guard] opcode[.mods] [operand, ...];` whose operands
# are registers, names, decimal or hex integers, 0f/0d floats, `[base]`/`[base+-n]` and `{%a, %b}` vectors.
# Such a line becomes one INSN token, matched whole in C instead of token by token; anything else (and
# any line the parser could reject) takes the token path, so errors and their positions stay the same. The
# token is (INSN, its first token's text, the match, line, first column); the parser reads the match.
_REG = r"%[A-Za-z0-9_$]+(?:\.[A-Za-z0-9_]+)?"
_NAME = r"[A-Za-z_$][A-Za-z0-9_$]*"
_OPND = (r"(?P<reg>" + _REG + r")|(?P<name>" + _NAME + r")|(?P<hexf>0[fF][0-9a-fA-F]{8})"
         r"|(?P<hexd>0[dD][0-9a-fA-F]{16})|(?P<int>-?(?:0[xX][0-9a-fA-F]+|[1-9][0-9]*|0)[uU]?)"
         r"|(?P<addr>\[(?P<base>%[A-Za-z0-9_$]+|" + _NAME + r")(?P<off>[+-](?:[1-9][0-9]*|0))?\])"
         r"|(?P<vec>\{[ \t]*" + _REG + r"(?:[ \t]*,[ \t]*" + _REG + r")*[ \t]*\})")
_OPND_NC = re.sub(r"\(\?P<\w+>", "(?:", _OPND)
_STMT = re.compile(
    r"\s*(?:@(?P<neg>!?)(?P<guard>%[A-Za-z0-9_$]+|" + _NAME + r")[ \t]+)?"
    r"(?P<op>(?P<opc>[a-z][a-z0-9_]*)(?:\.[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*)*)"
    r"(?:[ \t]+(?P<ops>(?:" + _OPND_NC + r")(?:[ \t]*,[ \t]*(?:" + _OPND_NC + r"))*))?"
    r"[ \t]*;\s*(?://.*)?")
OPERAND = re.compile(_OPND)      # the parser splits an INSN token's operands with it
VECTOR_REG = re.compile(_REG)


def _tokenize_lines(text: str, whole_lines: bool = True) -> list:
    """tokenize() line by line: no token spans lines without block comments."""
    from ptx.opcodes import OPCODES
    toks = []
    append = toks.append
    finditer = _LINE.finditer
    stmt = _STMT.fullmatch
    kinds = _KIND
    line = 0
    depth = 0       # braces open: a plain instruction line is looked for inside a body only
    for src in text.split("\n"):
        line += 1
        if depth > 0 and whole_lines and ";" in src:
            m = stmt(src)
            if m is not None and m.group("opc") in OPCODES:
                guard = m.group("guard")
                if guard is None:
                    append((INSN, m.group("op"), m, line, m.start("op") + 1))
                    continue
                if guard != "_":
                    append((INSN, "@", m, line, m.start("guard") - len(m.group("neg"))))
                    continue
        for m in finditer(src):
            kind = m.lastgroup
            k = kinds.get(kind)
            if k is not None:
                s = m.group(kind)
                if k == PUNCT:
                    if s == "{":
                        depth += 1
                    elif s == "}":
                        depth -= 1
                append((k, s, None, line, m.start(kind) + 1))
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
