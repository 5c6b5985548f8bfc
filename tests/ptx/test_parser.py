"""Unit tests of the PTX front end: every construct the parser accepts, the exact tree it builds, and the
errors (type, line, column) it gives for malformed modules."""

import struct
import time

import pytest

import ptx
from ptx import ast
from ptx.errors import PTXError, PTXSemanticError, PTXSyntaxError

HEADER = ".version 8.5\n.target sm_86\n.address_size 64\n"


def kernel(body, decls="", params=".param .u64 p0", regs=None):
    """A module whose only kernel `k` declares the usual register files and then holds `body`."""
    if regs is None:
        regs = (".reg .pred %p<8>;\n.reg .b16 %rs<8>;\n.reg .b32 %r<16>;\n.reg .f32 %f<16>;\n"
                ".reg .b64 %rd<16>;\n.reg .f64 %fd<8>;\n")
    return f"{HEADER}{decls}\n.visible .entry k({params})\n{{\n{regs}{body}\n}}\n"


def body_of(text, check=True):
    m = ptx.parse(text, check=check)
    fn = m.functions()[-1]
    return [s for s in fn.body if not isinstance(s, ast.VarDecl) or s.space != "reg"]


def only_instr(body_text, **kw):
    stmts = body_of(kernel(body_text, **kw))
    ins = [s for s in stmts if isinstance(s, ast.Instruction)]
    assert len(ins) == 1
    return ins[0]


def error_of(text, cls=PTXError):
    with pytest.raises(cls) as ei:
        ptx.parse(text)
    return ei.value


def line_col(text, needle, occurrence=1):
    """1-based line:column of the n-th occurrence of needle in text."""
    idx = -1
    for _ in range(occurrence):
        idx = text.index(needle, idx + 1)
    line = text.count("\n", 0, idx) + 1
    col = idx - (text.rfind("\n", 0, idx) + 1) + 1
    return line, col


# ---------------------------------------------------------------- module header and functions

def test_header_fields():
    # the parser's reading only: the checker refuses 9.5 and 32-bit (tests/ptx/test_strict_check.py)
    m = ptx.parse(".version 9.5\n.target sm_90a, texmode_independent, debug\n.address_size 32\n", check=False)
    assert m.version == (9, 5)
    assert m.target == ["sm_90a", "texmode_independent", "debug"]
    assert m.address_size == 32
    assert m.items == []


def test_version_minor_keeps_digits():
    m = ptx.parse(".version 7.10\n.target sm_75\n", check=False)
    assert m.version == (7, 10)
    assert m.address_size == 64


def test_entry_and_func_with_returns_params_and_directives():
    text = HEADER + """
.visible .func (.param .b32 func_retval0) add1(.param .b32 a, .param .b64 b) .noreturn
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [a];
    add.s32 %r2, %r1, 1;
    st.param.b32 [func_retval0+0], %r2;
    ret;
}
.weak .entry k(.param .u64 .ptr.global.align 16 k_p0, .param .align 8 .b8 k_s[24])
.maxntid 256, 2 .reqntid 64 .minnctapersm 4 .maxnreg 32 .pragma "nounroll";
{
    ret;
}
.extern .func ext(.param .b64 x);
"""
    m = ptx.parse(text)
    f, k, e = m.functions()
    assert (f.name, f.kind, f.linkage) == ("add1", "func", "visible")
    assert [(p.name, p.space, p.type.name) for p in f.returns] == [("func_retval0", "param", "b32")]
    assert [(p.name, p.type.name) for p in f.params] == [("a", "b32"), ("b", "b64")]
    assert f.directives == {"noreturn": True}
    assert f.pos == ast.Pos(*line_col(text, ".visible .func"))
    assert (k.kind, k.linkage) == ("entry", "weak")
    p0, s = k.params
    assert (p0.name, p0.type.name, p0.ptr_space, p0.ptr_align, p0.align) == ("k_p0", "u64", "global", 16, None)
    assert (s.name, s.type.name, s.align, s.dims) == ("k_s", "b8", 8, [24])
    assert k.directives == {"maxntid": (256, 2, 1), "reqntid": (64, 1, 1), "minnctapersm": 4, "maxnreg": 32,
                            "pragma": ["nounroll"]}
    assert e.body is None and e.linkage == "extern"
    assert m.entries() == [k]


def test_function_without_parens_and_empty_params():
    m = ptx.parse(HEADER + ".func a\n{\nret;\n}\n.func b()\n{\nret;\n}\n")
    assert [(f.name, f.params) for f in m.functions()] == [("a", []), ("b", [])]


# ---------------------------------------------------------------- declarations

def test_module_variables():
    text = HEADER + """
.visible .global .align 4 .u32 g = 5;
.const .align 4 .f32 tab[2][3] = {{1.0, 2.5, 0f3F800000}, {-1, 0x10, 3}};
.global .align 8 .u64 ptrs[2] = {generic(g)+4, g};
.extern .shared .align 16 .b8 dyn[];
.visible .global .attribute(.managed) .align 4 .u32 mv;
.common .global .v4 .f32 vec4;
.global .align 1 .u8 packed[3] = {1, 0xFF(generic(g)+8), 0XFF00(generic(g)+8)};
.global .texref tref;
"""
    m = ptx.parse(text)
    g, tab, ptrs, dyn, mv, vec4, packed, tref = m.globals()
    assert (g.space, g.type, g.align, g.linkage) == ("global", ast.Type("u32"), 4, "visible")
    assert g.init == [ast.Imm(5, ast.Pos(*line_col(text, "5;")))]
    assert tab.dims == [2, 3] and tab.space == "const"
    row0, row1 = tab.init
    assert [type(v) for v in row0] == [ast.FloatImm] * 3
    assert row0[1].value == 2.5 and row0[1].bits == 0
    assert (row0[2].bits, row0[2].raw, row0[2].value) == (32, 0x3F800000, 1.0)
    assert [v.value for v in row1] == [-1, 16, 3]
    a, b = ptrs.init
    assert (a.name, a.offset, a.generic) == ("g", 4, True)
    assert (b.name, b.offset, b.generic) == ("g", 0, False)
    assert (dyn.linkage, dyn.dims, dyn.align, dyn.space) == ("extern", [0], 16, "shared")
    assert mv.attributes == ["managed"]
    assert vec4.type == ast.Type("f32", 4) and vec4.linkage == "common"
    one, lo, hi = packed.init
    assert one == ast.Imm(1, one.pos)
    assert (lo.name, lo.offset, lo.generic, lo.mask) == ("g", 8, True, 0xFF)
    assert (hi.mask, hi.pos) == (0xFF00, ast.Pos(*line_col(text, "0XFF00")))
    assert tref.type.name == "texref"


def test_register_declarations():
    text = kernel("ret;", regs=".reg .b32 %r<10>, %q<3>;\n.reg .v2 .f32 %v;\n.reg .pred p, q;\n"
                              ".local .align 16 .b8 __local_depot0[32];\n.shared .align 4 .f32 sh[4][8];\n")
    fn = ptx.parse(text).functions()[0]
    decls = [s for s in fn.body if isinstance(s, ast.VarDecl)]
    assert [(d.space, d.name, d.count, d.type.name, d.type.vec) for d in decls[:5]] == [
        ("reg", "%r", 10, "b32", 1), ("reg", "%q", 3, "b32", 1), ("reg", "%v", None, "f32", 2),
        ("reg", "p", None, "pred", 1), ("reg", "q", None, "pred", 1)]
    assert (decls[5].space, decls[5].align, decls[5].dims) == ("local", 16, [32])
    assert (decls[6].space, decls[6].dims) == ("shared", [4, 8])
    assert decls[0].pos == ast.Pos(*line_col(text, "%r<10>"))


# ---------------------------------------------------------------- instructions and operands

def test_mods_kept_verbatim_in_order():
    cases = {
        "ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];": ("ld", ("global", "nc", "v4", "f32")),
        "ld.v4.global.nc.f32 {%f1, %f2, %f3, %f4}, [%rd1];": ("ld", ("v4", "global", "nc", "f32")),
        "bar.warp.sync -1;": ("bar", ("warp", "sync")),
        "cp.async.ca.shared.global [%r1], [%rd1], 16;": ("cp", ("async", "ca", "shared", "global")),
        "ld.global.L2::evict_last.f32 %f1, [%rd1];": ("ld", ("global", "L2::evict_last", "f32")),
        "cvt.rn.satfinite.f16x2.f32 %r1, %f1, %f2;": ("cvt", ("rn", "satfinite", "f16x2", "f32")),
        "exit;": ("exit", ()),
    }
    for src, (op, mods) in cases.items():
        ins = only_instr(src)
        assert (ins.opcode, ins.mods) == (op, mods), src


def test_instruction_position_and_guard():
    text = kernel("setp.lt.s32 %p1, %r1, %r2;\n  @%p1 add.s32 %r3, %r1, 1;\n@!%p1 bra.uni L1;\nL1:\nret;")
    stmts = body_of(text)
    setp, add, bra, lab, ret = stmts
    assert add.guard == ("%p1", False) and bra.guard == ("%p1", True) and setp.guard is None
    assert add.pos == ast.Pos(*line_col(text, "add.s32"))
    assert add.operands[0].pos == ast.Pos(*line_col(text, "%r3"))
    assert isinstance(lab, ast.Label) and lab.name == "L1" and lab.pos == ast.Pos(*line_col(text, "L1:"))
    assert bra.operands == [ast.SymbolExpr("L1", 0, ast.Pos(*line_col(text, "L1;")))]


@pytest.mark.parametrize("src,value", [
    ("0", 0), ("42", 42), ("-42", -42), ("0x1F", 31), ("0XffffffffU", 0xFFFFFFFF), ("017", 15),
    ("0b101", 5), ("0B11U", 3), ("7U", 7), ("-2147483648", -2147483648),
    ("18446744073709551615", 2**64 - 1), ("-0x10", -16),
])
def test_integer_literals(src, value):
    ins = only_instr(f"mov.u64 %rd1, {src};")
    assert ins.operands[1] == ast.Imm(value, ins.operands[1].pos)


@pytest.mark.parametrize("src,bits,raw", [
    ("0f3F800000", 32, 0x3F800000), ("0F7FC00001", 32, 0x7FC00001), ("0f80000000", 32, 0x80000000),
    ("0f00000001", 32, 1), ("0d3FF0000000000000", 64, 0x3FF0000000000000),
    ("0dFFF0000000000001", 64, 0xFFF0000000000001), ("-0f3F800000", 32, 0xBF800000),
])
def test_hex_float_bits_exact(src, bits, raw):
    ins = only_instr(f"mov.b{bits} {'%f1' if bits == 32 else '%fd1'}, {src};")
    f = ins.operands[1]
    assert isinstance(f, ast.FloatImm) and (f.bits, f.raw) == (bits, raw)
    fmt = ("<I", "<f") if bits == 32 else ("<Q", "<d")
    expected = struct.unpack(fmt[1], struct.pack(fmt[0], raw))[0]
    assert struct.pack(fmt[1], f.value) == struct.pack(fmt[1], expected)


@pytest.mark.parametrize("src,value", [("1.5", 1.5), ("-0.25", -0.25), ("1e3", 1000.0), ("2.5E-2", 0.025),
                                       ("3.", 3.0)])
def test_decimal_floats(src, value):
    f = only_instr(f"mov.f32 %f1, {src};").operands[1]
    assert isinstance(f, ast.FloatImm) and f.bits == 0 and f.value == value


def test_addresses():
    text = kernel("ld.global.u32 %r1, [%rd1+8];\nld.param.u64 %rd2, [p0];\nld.shared.u32 %r2, [sh+12];\n"
                  "ld.global.u32 %r3, [256];\nst.local.u32 [%rd1+-4], %r1;\nld.global.u32 %r4, [%rd1-8];\n"
                  "ld.const.f32 %f1, [tab+4+4];",
                  decls=".shared .align 4 .b8 sh[64];\n.const .align 4 .f32 tab[4];\n")
    addrs = [s.operands[0] if s.opcode == "st" else s.operands[1] for s in body_of(text)]
    assert [(a.base, a.offset) for a in addrs] == [("%rd1", 8), ("p0", 0), ("sh", 12), (None, 256),
                                                  ("%rd1", -4), ("%rd1", -8), ("tab", 8)]
    assert addrs[0].pos == ast.Pos(*line_col(text, "[%rd1+8]"))


def test_vector_sink_predpair_negated():
    text = kernel("mov.b64 {%r1, _}, %rd1;\nshfl.sync.down.b32 %r2|%p1, %r3, 1, 31, -1;\n"
                  "setp.eq.s32 _|%p2, %r1, 0;\nand.pred %p3, !%p1, %p2;\n"
                  "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f6}];")
    mov, shfl, setp, andp, tex = body_of(text)
    vec = mov.operands[0]
    assert isinstance(vec, ast.Vector) and [type(e) for e in vec.elems] == [ast.Reg, ast.Sink]
    pair = shfl.operands[0]
    assert isinstance(pair, ast.PredPair) and (pair.first.name, pair.second.name) == ("%r2", "%p1")
    assert shfl.operands[4] == ast.Imm(-1, shfl.operands[4].pos)
    assert isinstance(setp.operands[0].first, ast.Sink)
    neg = andp.operands[1]
    assert isinstance(neg, ast.Negated) and neg.operand.name == "%p1"
    assert neg.pos == ast.Pos(*line_col(text, "!%p1"))
    addr = tex.operands[1]
    assert addr.base == "%rd1" and isinstance(addr.extra[0], ast.Vector) and len(addr.extra[0].elems) == 2


def test_special_registers_are_regs_with_full_name():
    names = ["%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ctaid.y", "%nctaid.z", "%laneid", "%warpid",
             "%nwarpid", "%smid", "%nsmid", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge",
             "%lanemask_gt", "%clock", "%dynamic_smem_size", "%envreg0", "%envreg31", "%total_smem_size",
             "%aggr_smem_size"]
    body = "\n".join(f"mov.u32 %r1, {n};" for n in names)
    body += "\nmov.u64 %rd1, %clock64;\nmov.u64 %rd2, %globaltimer;"
    ops = [s.operands[1] for s in body_of(kernel(body))]
    assert ops == [ast.Reg(n, o.pos) for n, o in zip(names + ["%clock64", "%globaltimer"], ops)]


def test_symbols_and_plain_named_registers():
    text = kernel("mov.u64 %rd1, arr+8;\nmov.u64 %rd2, arr;\n{\n.reg .b16 c;\nmov.b16 c, 0x8000U;\n"
                  "fma.rn.bf16 %rs1, %rs2, %rs3, c;\n}\nmov.u32 %r1, 0;",
                  decls=".global .align 4 .b8 arr[16];\n")
    m1, m2, blk, m3 = body_of(text)
    assert m1.operands[1] == ast.SymbolExpr("arr", 8, m1.operands[1].pos)
    assert m2.operands[1] == ast.SymbolExpr("arr", 0, m2.operands[1].pos)
    assert isinstance(blk, ast.Block)
    decl, mov, fma = blk.body
    assert decl.name == "c" and mov.operands[0] == ast.Reg("c", mov.operands[0].pos)
    assert fma.operands[3] == ast.Reg("c", fma.operands[3].pos)
    assert mov.operands[1].value == 0x8000


def test_direct_and_indirect_calls():
    text = HEADER + """
.func (.param .b32 r) f(.param .b32 a, .param .b32 b)
{
    ret;
}
.entry k(.param .u64 fp)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [fp];
    { // callseq 0, 0
    .param .b32 param0;
    st.param.b32 [param0+0], 1;
    .param .b32 param1;
    st.param.b32 [param1+0], 2;
    .param .b32 retval0;
    call.uni (retval0),
    f,
    (
    param0,
    param1
    );
    ld.param.b32 %r1, [retval0+0];
    }
    {
    .param .b32 param0;
    .param .b32 param1;
    .param .b32 retval0;
    prototype_1 : .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _);
    call (retval0), %rd1, (param0, param1), prototype_1;
    prototype_2 : .callprototype ()_ ();
    call %rd1, (), prototype_2;
    }
    ret;
}
"""
    k = ptx.parse(text).entries()[0]
    blk1, blk2 = [s for s in k.body if isinstance(s, ast.Block)]
    call = [s for s in blk1.body if isinstance(s, ast.Instruction) and s.opcode == "call"][0]
    assert call.mods == ("uni",)
    rets, target, args = call.operands
    assert isinstance(rets, ast.ParenList) and [r.name for r in rets.items] == ["retval0"]
    assert target == ast.SymbolExpr("f", 0, target.pos) and target.pos == ast.Pos(*line_col(text, "f,\n"))
    assert [a.name for a in args.items] == ["param0", "param1"]
    proto = [s for s in blk2.body if isinstance(s, ast.CallPrototype)]
    assert [(p.name, len(p.returns), len(p.params)) for p in proto] == [("prototype_1", 1, 2), ("prototype_2", 0, 0)]
    assert proto[0].params[0].name == "_" and proto[0].params[0].type.name == "b32"
    icall, vcall = [s for s in blk2.body if isinstance(s, ast.Instruction)]
    assert [type(o) for o in icall.operands] == [ast.ParenList, ast.Reg, ast.ParenList, ast.SymbolExpr]
    assert icall.operands[3].name == "prototype_1"
    assert [type(o) for o in vcall.operands] == [ast.Reg, ast.ParenList, ast.SymbolExpr]
    assert vcall.operands[1].items == []


def test_brx_idx_and_branchtargets():
    text = kernel("ts: .branchtargets L0, L1, L2;\nbrx.idx %r1, ts;\nL0:\nret;\nL1:\nret;\nL2:\nret;")
    stmts = body_of(text)
    bt = stmts[0]
    assert isinstance(bt, ast.BranchTargets) and bt.name == "ts" and bt.labels == ["L0", "L1", "L2"]
    brx = stmts[1]
    assert (brx.opcode, brx.mods) == ("brx", ("idx",))
    assert brx.operands[1] == ast.SymbolExpr("ts", 0, brx.operands[1].pos)


def test_comments_debug_directives_and_pragmas_dropped_or_kept():
    text = HEADER + """// line comment
/* block
   comment */
.file 1 "/tmp/a.cu", 1700000000, 1234
.entry k()
{
    .reg .b32 %r<2>;
    .loc 1 5 3, function_name $L__info_string0, inlined_at 1 9 1
    mov.u32 %r1, 1; /* trailing */ // more
$L__BB0_1:
    .pragma "nounroll";
    ret;
}
.section .debug_info
{
.b32 .debug_abbrev
.b8 1, 2, 3
@@DWARF .ascii "x"
$L__info_string0:
.b8 97,0
}
.section .debug_macinfo { }
"""
    m = ptx.parse(text)
    (k,) = m.items
    kinds = [type(s).__name__ for s in k.body]
    assert kinds == ["VarDecl", "Instruction", "Label", "Pragma", "Instruction"]
    assert k.body[3].text == "nounroll"
    assert k.body[1].pos == ast.Pos(*line_col(text, "mov.u32"))


def test_nested_blocks_scope_plain_register_names():
    text = kernel("{\n.reg .b32 t;\nmov.b32 t, 1;\n{\nadd.s32 t, t, 1;\n}\n}\n")
    (outer,) = body_of(text)
    inner = outer.body[2]
    assert isinstance(inner, ast.Block)
    assert all(isinstance(o, ast.Reg) for o in inner.body[0].operands[:2])


def test_bytes_input_and_blank_module():
    m = ptx.parse(HEADER.encode())
    assert m.version == (8, 5)
    assert error_of("", PTXSyntaxError).message.startswith("PTX module must start with .version")


# ---------------------------------------------------------------- errors

def test_truncated_module_points_at_end():
    text = kernel("add.s32 %r1, %r2, %r3;\nret;")
    cut = text[: text.index("ret;")]
    e = error_of(cut, PTXSyntaxError)
    assert (e.line, e.col) == (cut.count("\n") + 1, 1)
    assert "not closed" in e.message


def test_truncated_mid_instruction():
    text = kernel("add.s32 %r1, %r2, %r3;")
    cut = text[: text.index("%r3;")]
    e = error_of(cut, PTXSyntaxError)
    assert e.line == cut.count("\n") + 1


def test_unknown_opcode_position():
    text = kernel("mov.u32 %r1, 1;\n    frobnicate.u32 %r1, %r1;")
    e = error_of(text, PTXSyntaxError)
    assert (e.line, e.col) == line_col(text, "frobnicate")
    assert "unknown instruction 'frobnicate'" in e.message


def test_bad_operands():
    for src, needle in [("add.s32 %r1, , %r2;", ", %r2"), ("add.s32 %r1 %r2, %r3;", "%r2,"),
                        ("ld.global.u32 %r1, [%rd1+];", "];"), ("mov.u32 %r1, #;", "#"),
                        ("mov.u32 %r1, {};", "}"), ("@ add.s32 %r1, %r1, 1;", "add.s32 %r1, %r1")]:
        text = kernel(src)
        e = error_of(text, PTXSyntaxError)
        assert (e.line, e.col) == line_col(text, needle), src


def test_undefined_label_and_register():
    text = kernel("bra.uni NOWHERE;\nret;")
    e = error_of(text, PTXSemanticError)
    assert (e.line, e.col) == line_col(text, "NOWHERE") and "undefined label" in e.message
    text = kernel("add.s32 %r1, %zz9, 1;")
    e = error_of(text, PTXSemanticError)
    assert (e.line, e.col) == line_col(text, "%zz9") and "undefined register" in e.message
    text = kernel("add.s32 %r16, %r1, 1;")        # %r<16> declares %r0..%r15
    e = error_of(text, PTXSemanticError)
    assert (e.line, e.col) == line_col(text, "%r16")
    text = kernel("ld.global.u32 %r1, [nosuch+4];")
    e = error_of(text, PTXSemanticError)
    assert (e.line, e.col) == line_col(text, "[nosuch")


def test_duplicate_label_and_scoped_labels():
    text = kernel("L1:\nret;\nL1:\nret;")
    e = error_of(text, PTXSemanticError)
    assert (e.line, e.col) == line_col(text, "L1:", 2)
    ptx.parse(kernel("{\nL1:\nret;\n}\n{\nL1:\nbra.uni L1;\n}\nret;"))   # sibling scopes may reuse labels


def test_type_mismatches():
    cases = [
        ("add.s32 %r1, %p1, 1;", "%p1", "pred"),
        ("setp.eq.s32 %r1, %r2, 0;", "%r1,", "not a .pred"),
        ("add.s32 %r1, %rd1, 1;", "%rd1", "64-bit"),
        ("mul.wide.s32 %r1, %r2, 4;", "%r1,", "32-bit"),
        ("selp.b32 %r1, %r2, %r3, %r4;", "%r4", "selector"),
        ("and.pred %p1, %p2, %r1;", "%r1", "not a .pred"),
    ]
    for src, needle, word in cases:
        text = kernel(src)
        e = error_of(text, PTXSemanticError)
        assert (e.line, e.col) == line_col(text, needle), src
        assert word in e.message, (src, e.message)
    text = kernel("@%r1 ret;")
    e = error_of(text, PTXSemanticError)
    assert "guard" in e.message and (e.line, e.col) == line_col(text, "ret;")


def test_operand_count():
    text = kernel("add.s32 %r1, %r2;")
    e = error_of(text, PTXSemanticError)
    assert (e.line, e.col) == line_col(text, "add.s32") and "3 operands" in e.message


def test_check_can_be_skipped_and_run_separately():
    text = kernel("bra.uni NOWHERE;")
    m = ptx.parse(text, check=False)
    with pytest.raises(PTXSemanticError):
        ptx.check(m)


def test_deep_nesting_is_an_error_not_a_crash():
    text = kernel("{" * 5000 + "}" * 5000)
    e = error_of(text, PTXSyntaxError)
    assert "nesting" in e.message
    text = HEADER + ".global .u32 g[1] = " + "{" * 5000 + "1" + "}" * 5000 + ";"
    assert "nesting" in error_of(text, PTXSyntaxError).message


def test_parse_speed_5000_lines():
    block = """    ld.global.f32 %f1, [%rd1+4];
    fma.rn.f32 %f2, %f1, 0f3F800000, %f3;
    setp.lt.s32 %p1, %r1, %r2;
    @%p1 bra LOOP;
    mad.lo.s32 %r3, %r1, %r2, %r4;
    st.global.v2.f32 [%rd2+8], {%f1, %f2};
    shfl.sync.bfly.b32 %r5|%p2, %r6, 16, 31, -1;
    add.s64 %rd3, %rd1, %rd2;
"""
    text = kernel("LOOP:\n" + block * 625)
    assert text.count("\n") > 5000
    # CPU time, not wall time: the shared test machines are often oversubscribed.
    t0 = time.process_time()
    m = ptx.parse(text)
    elapsed = time.process_time() - t0
    assert len(m.entries()[0].body) > 5000
    assert elapsed < 1.0, f"parsing and checking 5000 lines took {elapsed:.2f}s of CPU"


# ---------------------------------------------------------------- more constructs and checks

def test_reg_params_and_calltargets_and_vector_components():
    text = HEADER + """
.func (.reg .b32 r) inc(.reg .b32 a)
{
    add.s32 r, a, 1;
    ret;
}
.entry k()
{
    .reg .v4 .f32 %v;
    .reg .f32 %f<2>;
    .reg .b64 %rd<2>;
    mov.f32 %f1, %v.y;
    ftargets: .calltargets inc;
    ret;
}
"""
    m = ptx.parse(text)
    inc, k = m.functions()
    assert [(p.space, p.name) for p in inc.params + inc.returns] == [("reg", "a"), ("reg", "r")]
    add = inc.body[0]
    assert add.operands == [ast.Reg("r", add.operands[0].pos), ast.Reg("a", add.operands[1].pos),
                            ast.Imm(1, add.operands[2].pos)]
    mov = [s for s in k.body if isinstance(s, ast.Instruction)][0]
    assert mov.operands[1].name == "%v.y"
    targets = [s for s in k.body if isinstance(s, ast.BranchTargets)][0]
    assert (targets.name, targets.labels, targets.is_call) == ("ftargets", ["inc"], True)


def test_crlf_line_endings_and_byte_order_mark():
    text = "\ufeff" + kernel("mov.u32 %r1, 1;\n  add.s32 %r2, %r1, 2;").replace("\n", "\r\n")
    add = body_of(text)[1]
    clean = text[1:]
    assert add.pos == ast.Pos(*line_col(clean, "add.s32"))


def test_lexer_errors_have_positions():
    text = kernel("mov.u32 %r1, 1; /* never closed")
    e = error_of(text, PTXSyntaxError)
    assert (e.line, e.col) == line_col(text, "/*") and "unterminated" in e.message
    text = kernel("mov.u32 %r1, 1;\n   mov.u32 %r2, 2 # 3;")
    e = error_of(text, PTXSyntaxError)
    assert (e.line, e.col) == line_col(text, "#")
    text = kernel("mov.u32 %r1, 09;")
    e = error_of(text, PTXSyntaxError)
    assert (e.line, e.col) == line_col(text, "09") and "octal" in e.message
    text = kernel("mov.u64 %rd1, 18446744073709551616;")
    assert "64 bits" in error_of(text, PTXSyntaxError).message


@pytest.mark.parametrize("decls,needle,word", [
    (".global .align 3 .u32 g;", ".align 3", "power of two"),
    (".shared .u32 s = 4;", "s = 4", "initialiser"),
    (".global .u32 a[0];", "a[0]", "positive"),
    (".global .u32 _;", "_;", "'_'"),
    (".global .align 4 b;", "b;", "type"),
    (".global .u64 p = nosuch;", "nosuch", "undefined symbol"),
])
def test_declaration_errors(decls, needle, word):
    text = HEADER + decls + "\n"
    e = error_of(text)
    assert (e.line, e.col) == line_col(text, needle), e
    assert word in e.message


def test_module_header_errors():
    assert "must start with .version" in error_of(".target sm_80\n").message
    assert "no .target" in error_of(".version 8.0\n").message
    e = error_of(".version 8\n.target sm_80\n", PTXSyntaxError)
    assert (e.line, e.col) == (1, 10)
    e = error_of(HEADER + "add.s32 %r1, %r2, %r3;\n", PTXSyntaxError)
    assert e.line == 4 and "expected a directive" in e.message


def test_control_flow_check_errors():
    cases = [
        ("tbl: .branchtargets L0, MISSING;\nbrx.idx %r1, tbl;\nL0:\nret;", "tbl:", "not a label"),
        ("L0:\nbrx.idx %r1, L0;", "L0;", ".branchtargets"),
        ("call.uni nosuchfn, ();", "nosuchfn", "undefined symbol"),
        ("call.uni p0, ();", "p0, ()", "not a function"),
        ("@%q1 ret;", "ret;", "undefined register"),
        ("@!%r1 ret;", "ret;", "guard"),
        ("L0:\nret;\nL0: .branchtargets L0;", "L0: .b", "duplicate"),
        ("bra.uni %r1;", "%r1", "label"),
    ]
    for body, needle, word in cases:
        text = kernel(body)
        e = error_of(text, PTXSemanticError)
        assert (e.line, e.col) == line_col(text, needle), (body, e)
        assert word in e.message, (body, e.message)


def test_branch_to_label_in_enclosing_block_is_fine():
    ptx.parse(kernel("OUT:\n{\n.reg .pred q;\nsetp.eq.s32 q, %r1, 0;\n@q bra.uni OUT;\n}\nret;"))


ISA_FORMS = """
    ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
    ld.global.L2::cache_hint.b32 %r1, [%rd1], %rd2;
    st.global.L1::no_allocate.v2.u32 [%rd1+8], {%r1, %r2};
    st.global.b128 [%rd1], %q1;
    ldu.global.f32 %f1, [%rd1];
    atom.global.cas.b32 %r1, [%rd1], %r2, %r3;
    atom.acq_rel.gpu.global.add.u64 %rd3, [%rd1], 1;
    atom.global.add.noftz.f16x2 %r1, [%rd1], %r2;
    red.relaxed.sys.global.add.f32 [%rd1], %f1;
    shfl.sync.idx.b32 %r1|%p1, %r2, 0, 31, -1;
    vote.sync.ballot.b32 %r1, %p1, -1;
    vote.sync.any.pred %p2, !%p1, -1;
    match.all.sync.b32 %r1|%p1, %r2, -1;
    redux.sync.add.u32 %r1, %r2, -1;
    activemask.b32 %r1;
    elect.sync %r1|%p1, -1;
    bar.sync 0, 128;
    bar.red.popc.u32 %r1, 0, %p1;
    bar.red.and.pred %p2, 1, !%p1;
    barrier.sync.aligned 0;
    bar.warp.sync -1;
    barrier.cluster.arrive.release.aligned;
    membar.gl;
    fence.acq_rel.gpu;
    fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;
    mbarrier.init.shared::cta.b64 [%r1], 32;
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    cp.async.ca.shared.global [%r1], [%rd1], 16;
    cp.async.commit_group;
    cp.async.wait_group 0;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};
    wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd1], 16;
    tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, %rd2, {%f5, %f6}];
    tld4.r.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f6}];
    suld.b.2d.v4.b32.trap {%r1, %r2, %r3, %r4}, [%rd1, {%r5, %r6}];
    sust.b.1d.b32.clamp [%rd1, {%r5}], {%r1};
    txq.width.b32 %r1, [%rd1];
    prmt.b32.f4e %r1, %r2, %r3, %r4;
    lop3.b32 %r1, %r2, %r3, %r4, 0xE8;
    shf.r.clamp.b32 %r1, %r2, %r3, %r4;
    bfe.s64 %rd1, %rd2, %r1, %r2;
    bmsk.clamp.b32 %r1, %r2, %r3;
    szext.wrap.s32 %r1, %r2, %r3;
    dp4a.u32.s32 %r1, %r2, %r3, %r4;
    cvt.rn.satfinite.e4m3x2.f32 %rs1, %f1, %f2;
    cvt.rzi.s32.f32 %r1, %f1;
    cvt.pack.sat.u8.s32.b32 %r1, %r2, %r3, %r4;
    testp.notanumber.f64 %p1, %fd1;
    copysign.f32 %f1, %f2, %f3;
    ex2.approx.ftz.bf16x2 %r1, %r2;
    tanh.approx.f32 %f1, %f2;
    rcp.approx.ftz.f64 %fd1, %fd2;
    mad.wide.u32 %rd1, %r1, %r2, %rd2;
    mul.hi.u64 %rd1, %rd2, %rd3;
    add.cc.u32 %r1, %r2, %r3;
    addc.cc.u32 %r1, %r2, %r3;
    max.xorsign.abs.bf16x2 %r1, %r2, %r3;
    min.NaN.f32 %f1, %f2, %f3;
    setp.ne.and.b32 %p1, %r1, 0, %p2;
    set.lt.u32.s32 %r1, %r2, %r3;
    selp.f32 %f1, 0f3F800000, 0fBF800000, %p1;
    slct.s32.f32 %r1, %r2, %r3, %f1;
    isspacep.shared %p1, %rd1;
    cvta.to.shared.u64 %rd1, %rd2;
    mapa.shared::cluster.u32 %r1, %r2, %r3;
    getctarank.shared::cluster.u32 %r1, %r2;
    griddepcontrol.wait;
    prefetch.global.L2::evict_last [%rd1];
    createpolicy.fractional.L2::evict_last.b64 %rd1, 0.5;
    applypriority.global.L2::evict_normal [%rd1], 128;
    discard.global.L2 [%rd1], 128;
    nanosleep.u32 100;
    setmaxnreg.inc.sync.aligned.u32 232;
    stacksave.u64 %rd1;
    stackrestore.u64 %rd1;
    alloca.u64 %rd1, %rd2, 16;
    pmevent 1;
    mov.u32 %r1, %envreg3;
    mov.u32 %r1, %cluster_ctarank;
    mov.u64 %rd1, %globaltimer;
    multimem.ld_reduce.relaxed.sys.global.add.f32 %f1, [%rd1];
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;
    clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r1], [%r2];
    brkpt;
    @%p1 trap;
    @!%p1 exit;
    ret;
"""


def test_isa_instruction_forms_parse_and_check():
    # sm_100: the forms include mapa, getctarank, griddepcontrol (sm_90) and tcgen05 (sm_100a)
    text = kernel(ISA_FORMS, regs=".reg .pred %p<4>;\n.reg .b16 %rs<4>;\n.reg .b32 %r<10>;\n.reg .f32 %f<10>;\n"
                                  ".reg .b64 %rd<4>;\n.reg .f64 %fd<4>;\n.reg .b128 %q<2>;\n")
    text = text.replace(".version 8.5\n.target sm_86", ".version 8.7\n.target sm_100a", 1)
    ins = [s for s in body_of(text) if isinstance(s, ast.Instruction)]
    assert len(ins) == ISA_FORMS.count(";")
    bulk = [i for i in ins if i.opcode == "cp" and "bulk" in i.mods][0]
    assert bulk.mods[-1] == "mbarrier::complete_tx::bytes"
    src = bulk.operands[1]
    assert src.base == "%rd1" and isinstance(src.extra[0], ast.Vector)
    tex = [i for i in ins if i.opcode == "tex"][0]
    assert [type(e).__name__ for e in tex.operands[1].extra] == ["Reg", "Vector"]
    assert ins[-2].guard == ("%p1", True) and (ins[-2].opcode, ins[-2].operands) == ("exit", [])


def test_call_argument_counts_checked():
    text = HEADER + """
.func (.param .b32 r) f(.param .b32 a, .param .b32 b)
{
    ret;
}
.entry k(.param .u64 fp)
{
    .reg .b64 %rd<2>;
    {
    .param .b32 param0;
    .param .b32 retval0;
    call.uni (retval0), f, (param0);
    }
    ret;
}
"""
    e = error_of(text, PTXSemanticError)
    assert (e.line, e.col) == line_col(text, "(param0)") and "1 arguments" in e.message
    text2 = text.replace("call.uni (retval0), f, (param0);",
                         "proto: .callprototype (.param .b32 _) _ (.param .b32 _);\n"
                         "    call (retval0), %rd1, (param0, param0), proto;")
    e = error_of(text2, PTXSemanticError)
    assert (e.line, e.col) == line_col(text2, "(param0, param0)") and "takes 1" in e.message


def test_function_defined_twice():
    text = HEADER + ".func f()\n{\nret;\n}\n.func f();\n.func f()\n{\nret;\n}\n"
    e = error_of(text, PTXSemanticError)
    assert (e.line, e.col) == (9, 1) and "defined twice" in e.message
