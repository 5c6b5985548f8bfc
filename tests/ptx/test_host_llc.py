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


# ------------------------------------------------------------------ a large module compiled in parts

# functions a split moves (noinline), one it copies (internal, inlinable), a variable they share, a constant table
SHARED_STATE = """@cnt = internal global i32 0, align 4
@tab = private unnamed_addr constant [2 x i32] [i32 3, i32 4]
define internal i32 @twice(i32 %x) {
  %y = mul i32 %x, 2
  ret i32 %y
}
define internal i32 @a(i32 %x) noinline {
  %c = load i32, ptr @cnt
  %t = call i32 @twice(i32 %x)
  %n = add i32 %c, %t
  store i32 %n, ptr @cnt
  ret i32 %n
}
define internal i32 @b(i32 %x) noinline {
  %p = getelementptr [2 x i32], ptr @tab, i32 0, i32 1
  %k = load i32, ptr %p
  %m = mul i32 %x, %k
  %r = call i32 @a(i32 %m)
  ret i32 %r
}
define i32 @entry(i32 %x) {
  %r1 = call i32 @a(i32 %x)
  %r2 = call i32 @b(i32 %x)
  %c = load i32, ptr @cnt
  ret i32 %c
}
"""


def test_split_parts_define_each_symbol_once(monkeypatch):
    from ptx import ir_split
    monkeypatch.setattr(ir_split, "MIN_LINES", 0)
    parts = ir_split.split(SHARED_STATE, unit=1)
    assert len(parts) == 3                  # what stays (entry), then each noinline function on its own
    defined = [ln.split(" = ")[0] if ln.startswith("@") else ln.split("@")[1].split("(")[0]
               for p in parts for ln in p.splitlines()
               if ln.startswith("define") or (ln.startswith("@") and " external " not in ln)]
    # the constant table and the inlinable helper are copied (private, internal), everything else is defined once
    assert sorted(defined) == sorted(["@cnt", "entry", "a", "b"] + ["@tab"] * 3 + ["twice"] * 3)
    assert "@cnt = external hidden global i32" in parts[1] and "define hidden i32 @a(" in "".join(parts)


def test_a_module_compiled_in_parts_shares_its_state(monkeypatch):
    """Through the children and the merge, linked and called: the moved functions update the one variable."""
    import ctypes
    from ptx import host_loader, ir_split
    if host_llc._cores() < 2:
        pytest.skip("one core: modules are not split")
    monkeypatch.setattr(ir_split, "MIN_LINES", 0)
    before = host_llc.SPLITS["modules"]
    obj = host_llc.compile_object(SHARED_STATE, "", 3)
    assert host_llc.SPLITS["modules"] == before + 1
    code = host_loader.LoadedCode(host_loader.link(obj, "the split test"))
    try:
        entry = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(code.address("entry"))
        x = 5
        # a(x): cnt = 2x; b(x): a(4x): cnt = 2x + 8x
        assert entry(x) == 10 * x
        assert entry(1) == 10 * x + 10       # the same variable, kept between calls
    finally:
        code.close()


def test_the_bench_warp_reduction_compiles_in_parts_and_runs():
    """scripts/bench_kernels/reduce_shfl.ptx (its warp chains and region loops: a module past ir_split's size)."""
    from pathlib import Path
    import numpy as np
    from ptx import ir_split
    src = (Path(__file__).resolve().parents[2] / "scripts/bench_kernels/reduce_shfl.ptx").read_text()
    before = host_llc.SPLITS["modules"]
    m = ptx.compile(src)
    assert ir_split.split(m.ir) is not None
    if host_llc._cores() > 1:
        assert host_llc.SPLITS["modules"] > before
    rng = np.random.default_rng()
    for nb in (1, 7, 64):
        x = rng.standard_normal(nb * 256).astype(np.float32)
        out = np.full(nb, np.nan, np.float32)
        m.kernel("reduce_shfl").launch(nb, 256, [x, out])
        want = x.reshape(nb, 256).astype(np.float64).sum(axis=1)
        assert np.allclose(out, want, rtol=1e-5, atol=1e-4), f"{int(np.sum(~np.isclose(out, want)))} of {nb} differ"
