"""The host compiler's LLVM step runs in a child process: an LLVM abort or a module that does not verify is a
PTXError for the caller, which goes on compiling (the child is started again)."""

import pytest

import ptx
from ptx import host_llc

# x86 code generation cannot select an AMDGPU intrinsic: "LLVM ERROR: Cannot select", then abort()
ABORTS = """declare i32 @llvm.amdgcn.workitem.id.x()
define i32 @f() {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  ret i32 %x
}
"""
# the shape of ggml's mmvq miscompile: a use before its definition, which LLVM's passes abort on
BROKEN = """define i32 @f(i32 %a) {
entry:
  br label %next
next:
  %y = add i32 %z, 1
  %z = add i32 %a, 1
  ret i32 %y
}
"""
GOOD = "define i32 @f(i32 %a) {\n  %b = add i32 %a, 1\n  ret i32 %b\n}\n"


def test_an_llvm_abort_is_an_error_and_the_next_compile_works():
    with pytest.raises(ptx.PTXUnsupportedError, match=r"LLVM aborted compiling k \(signal 6: LLVM ERROR: "
                                                      r"Cannot select: intrinsic %llvm.amdgcn.workitem.id.x"):
        host_llc.compile_object(ABORTS, "", 3, "k")
    assert host_llc.compile_object(GOOD, "", 3)[:4] == b"\x7fELF"


def test_ir_that_does_not_verify_is_caught_before_any_pass():
    with pytest.raises(ptx.PTXError, match="internal code generation error in k: Instruction does not "
                                           "dominate all uses"):
        host_llc.compile_object(BROKEN, "", 3, "k")
    assert host_llc.compile_object(GOOD, "", 0)[:4] == b"\x7fELF"
