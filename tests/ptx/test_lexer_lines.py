"""The lexer's whole-line instruction tokens against its token-by-token path: random bodies, valid and
broken, must give the same tree, or the same error at the same position, either way."""

import random

import pytest

from ptx import lexer, parser
from ptx.errors import PTXError

HEADER = ".version 8.5\n.target sm_86\n.address_size 64\n"
_REGS = ".reg .pred %p<8>;\n.reg .b32 %r<16>;\n.reg .f32 %f<16>;\n.reg .b64 %rd<16>;\n"
_OPERANDS = ["%r1", "%r15", "%f3", "%rd2", "%tid.x", "%ctaid.y", "buf", "WARP_SZ", "_", "c", "0", "17", "-4",
             "0x1fU", "0f3F800000", "0d3FF0000000000000", "[%rd1]", "[%rd1+8]", "[%rd1-16]", "[buf+4]",
             "[_]", "{%f1, %f2}", "{%f1,%f2,%f3,%f4}", "%p1|%p2", "!%p1", "(%r1)", "07", "1.5", "sym+4"]
_OPCODES = ["add.s32", "ld.global.f32", "st.shared.v2.f32", "mov.u32", "setp.lt.s32", "bra", "bra.uni",
            "ret", "fma.rn.f32", "shfl.sync.down.b32", "notanop", "ld..f32", "cvt.rn.f32.s32", "mad.lo.s32"]
_NOISE = [",", ";", "", " ", "@", "%", "{", "}", "[", "]", "$", ".", "-", "//", ":", "\t", "é", "\r"]


def _line(rng):
    guard = rng.choice(["", "", "@%p1 ", "@!%p2 ", "@_ ", "@%p.x ", "@c "])
    pool = _OPERANDS[:6] if rng.random() < 0.5 else _OPERANDS     # mostly fine, or anything
    ops = ", ".join(rng.choice(pool) for _ in range(rng.randint(0, 4)))
    text = f"{guard}{rng.choice(_OPCODES)}{' ' + ops if ops else ''};"
    if rng.random() < 0.1:
        j = rng.randrange(len(text) + 1)
        text = text[:j] + rng.choice(_NOISE) + text[j + 1 if rng.random() < 0.5 else j:]
    return rng.choice(["\t", "  ", ""]) + text + rng.choice(["", " // note", "\t"])


def _module(rng):
    body = [_line(rng) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.3:
        body.insert(rng.randrange(len(body) + 1), "{ .reg .b32 c;\n" + _line(rng) + "\n}")
    if rng.random() < 0.2:
        body.insert(rng.randrange(len(body) + 1), "$L1:")
    decls = ".shared .align 4 .b8 buf[64];\n"
    return f"{HEADER}{decls}.visible .entry k(.param .u64 p0)\n{{\n{_REGS}" + "\n".join(body) + "\n}\n"


def _outcome(text, whole_lines, check):
    try:
        return "tree", repr(parser.parse(text, check=check, whole_lines=whole_lines).items)
    except PTXError as e:
        return "error", type(e).__name__, e.message, e.line, e.col


@pytest.mark.parametrize("seed", [random.randrange(1 << 30) for _ in range(4)])
def test_whole_lines_parse_as_tokens(seed):
    rng = random.Random(seed)
    trees = 0
    for _ in range(250):
        text = _module(rng)
        check = rng.random() < 0.5
        fast = _outcome(text, True, check)
        assert fast == _outcome(text, False, check), (seed, text)
        trees += fast[0] == "tree"
    assert trees >= 5      # the bodies are not all broken: the whole-line path ran on valid ones


def test_whole_lines_are_taken():
    text = f"{HEADER}.visible .entry k()\n{{\n{_REGS}\tadd.s32 %r1, %r2, 4;\n\t@!%p1 bra $L1;\n$L1:\n\tret;\n}}\n"
    kinds = [t[0] for t in lexer.tokenize(text)]
    assert kinds.count(lexer.INSN) == 3
    assert lexer.INSN not in [t[0] for t in lexer.tokenize(text, whole_lines=False)]
