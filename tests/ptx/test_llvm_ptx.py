"""PTX from upstream LLVM's NVPTX backend (the one inside llvmlite) for sm_75/86/90 must parse and check:
the same kernels reach us from clang-compiled CUDA, Triton, Julia and other LLVM-based front ends."""

from pathlib import Path

import pytest

import ptx
from ptx import ast

IR = (Path(__file__).resolve().parent / "corpus" / "llvm_kernels.ll").read_text()
# (cpu, PTX ISA feature): sm_75 needs ISA 7.1+ for the packed-struct pointer initialiser.
TARGETS = [("sm_75", "+ptx72"), ("sm_86", "+ptx78"), ("sm_90", "+ptx80")]


def _nvptx_machine(cpu, features):
    llvm = pytest.importorskip("llvmlite.binding")
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    try:
        target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    except RuntimeError:
        pytest.skip("this llvmlite has no NVPTX backend")
    return llvm, target.create_target_machine(cpu=cpu, features=features, opt=3)


@pytest.mark.parametrize("cpu,features", TARGETS)
def test_llvm_nvptx_output_parses(cpu, features):
    llvm, machine = _nvptx_machine(cpu, features)
    module = llvm.parse_assembly(IR)
    module.verify()
    text = machine.emit_assembly(module)
    m = ptx.parse(text)
    assert m.target[0] == cpu
    assert [f.name for f in m.entries()] == ["vadd", "misc"]
    misc = [f for f in m.functions() if f.name == "pick" and f.body][0]

    def walk(body):
        for st in body:
            yield st
            if isinstance(st, ast.Block):
                yield from walk(st.body)

    stmts = list(walk(misc.body))
    tables = [s for s in stmts if isinstance(s, ast.BranchTargets)]
    assert tables and len(tables[0].labels) >= 8, "the dense switch should become a brx.idx jump table"
    assert any(isinstance(s, ast.Instruction) and s.opcode == "brx" for s in stmts)
    pk = [g for g in m.globals() if g.name == "pk"][0]
    masks = [e.mask for e in pk.init if isinstance(e, ast.SymbolExpr)]
    assert masks == [0xFF << (8 * i) for i in range(8)]
