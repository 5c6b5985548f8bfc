"""Calls through a `.extern .func` prototype that disagrees with the definition in another linked input
(NVIDIA's linker accepts it; numba declares a C `void` function as returning .b64): the merged module
compiles and runs, while a call that disagrees with the prototype in force is still an error at its
line:column."""

import numpy as np
import pytest

import ptx
from ptx.errors import PTXSemanticError
from zluda_py.ptxlink import merge_ptx

HEADER = ".version 8.0\n.target sm_86\n.address_size 64\n"

# The caller's view: `store` returns a .b64 and takes (pointer, value); `pair` takes three arguments.
CALLER = HEADER + """
.extern .func (.param .b64 func_retval0) store
(
    .param .b64 store_param_0,
    .param .b32 store_param_1
)
;
.extern .func (.param .b32 func_retval0) pair
(
    .param .b32 pair_param_0,
    .param .b32 pair_param_1,
    .param .b32 pair_param_2
)
;
.visible .entry k(.param .u64 k_out, .param .u64 k_ret)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [k_out];
    ld.param.u64 %rd2, [k_ret];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s32 %r2, %r1, 1000;
    mov.u64 %rd9, -1;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd4;
    .param .b32 param1;
    st.param.b32 [param1+0], %r2;
    .param .b64 retval0;
    call.uni (retval0), store, (param0, param1);
    ld.param.b64 %rd9, [retval0+0];
    }
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u64 [%rd6], %rd9;
    {
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 param1;
    st.param.b32 [param1+0], 7;
    .param .b32 param2;
    st.param.b32 [param2+0], 9;
    .param .b32 retval0;
    call.uni (retval0), pair, (param0, param1, param2);
    ld.param.b32 %r3, [retval0+0];
    }
    cvt.u64.u32 %rd7, %r3;
    st.global.u64 [%rd6+8], %rd7;
    ret;
}
"""

# The definitions: `store` returns nothing, `pair` takes two arguments.
CALLEE = HEADER + """
.visible .func store(.param .b64 store_param_0, .param .b32 store_param_1)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [store_param_0];
    ld.param.u32 %r1, [store_param_1];
    st.global.u32 [%rd1], %r1;
    ret;
}
.visible .func (.param .b32 func_retval0) pair(.param .b32 pair_param_0, .param .b32 pair_param_1)
{
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [pair_param_0];
    ld.param.u32 %r2, [pair_param_1];
    mad.lo.s32 %r3, %r1, 100, %r2;
    st.param.b32 [func_retval0+0], %r3;
    ret;
}
"""


def line_col(text, needle, occurrence=1):
    idx = -1
    for _ in range(occurrence):
        idx = text.index(needle, idx + 1)
    return text.count("\n", 0, idx) + 1, idx - (text.rfind("\n", 0, idx) + 1) + 1


@pytest.mark.parametrize("order", ["caller_first", "callee_first"])
def test_mismatched_prototype_links_and_runs(order):
    texts = [CALLER, CALLEE] if order == "caller_first" else [CALLEE, CALLER]
    merged = merge_ptx(texts)
    assert ".extern .func (.param .b64 func_retval0) store" in " ".join(merged.split())
    mod = ptx.compile(merged, target="host")
    n = 32
    out = np.full(n, 0x5A5A5A5A, dtype=np.uint32)
    ret = np.full((n, 2), 0xDEADBEEFDEADBEEF, dtype=np.uint64)
    mod.kernel("k").launch((1,), (n,), [out, ret])
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.uint32) + 1000)
    # the return value `store` never writes reads as 0; `pair` got its two arguments, the third dropped
    np.testing.assert_array_equal(ret[:, 0], np.zeros(n, dtype=np.uint64))
    np.testing.assert_array_equal(ret[:, 1], np.arange(n, dtype=np.uint64) * 100 + 7)


def test_matching_prototype_is_dropped_when_linked():
    same = CALLER.replace(".extern .func (.param .b64 func_retval0) store", ".extern .func store") \
                 .replace("call.uni (retval0), store,", "call.uni store,") \
                 .replace("ld.param.b64 %rd9, [retval0+0];", "")
    merged = merge_ptx([same, CALLEE])
    assert ".extern .func store" not in merged and ".extern .func (.param .b32 func_retval0) pair" in merged


def test_call_against_the_prototype_in_force_is_checked():
    # the caller's input passes two arguments where its own prototype of `pair` takes three
    bad = CALLER.replace("call.uni (retval0), pair, (param0, param1, param2);",
                         "call.uni (retval0), pair, (param0, param1);")
    merged = merge_ptx([bad, CALLEE])
    with pytest.raises(PTXSemanticError) as ei:
        ptx.parse(merged)
    assert (ei.value.line, ei.value.col) == line_col(merged, "(param0, param1);", 2)
    assert "passes 2 arguments, the callee takes 3" in ei.value.message


def test_call_against_a_definition_in_the_same_module_is_checked():
    # one input (no link): the call's return list disagrees with the definition it sees
    text = CALLEE + """
.visible .entry k2(.param .u64 p)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b32 param1;
    st.param.b32 [param1+0], 1;
    .param .b64 retval0;
    call.uni (retval0), store, (param0, param1);
    }
    ret;
}
"""
    with pytest.raises(PTXSemanticError) as ei:
        ptx.parse(text)
    assert (ei.value.line, ei.value.col) == line_col(text, "(retval0), store")
    assert "1 return values, the callee returns 0" in ei.value.message
    with pytest.raises(PTXSemanticError):
        ptx.compile(text, target="host")


def test_repeated_weak_variables_kept_once():
    # every unit including a header defines its template constants as .weak: the link keeps one copy
    unit = HEADER + """
.weak .global .align 1 .u8 _ZN4cuda3std3__417integral_constantIbLb0EE5valueE;
.weak .global .align 4 .b8 tab[8] = {1, 2, 3, 4, 5, 6, 7, 8};
"""
    user = unit + """
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    ld.global.u32 %r1, [tab+4];
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
    merged = merge_ptx([user, unit])
    assert merged.count("integral_constantIbLb0EE5valueE;") == 1 and merged.count(" tab[8]") == 1
    out = np.zeros(1, dtype=np.uint32)
    ptx.compile(merged, target="host").kernel("k").launch((1,), (1,), [out])
    assert out[0] == 0x08070605


def test_parameter_the_caller_never_passes_reads_zero():
    caller = HEADER + """
.extern .func (.param .b32 r) f(.param .b32 a);
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    {
    .param .b32 p0;
    st.param.b32 [p0], 5;
    .param .b32 rv;
    call.uni (rv), f, (p0);
    ld.param.b32 %r1, [rv];
    }
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
    callee = HEADER + """
.visible .func (.param .b32 r) f(.param .b32 a, .param .b32 b)
{
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [a];
    ld.param.u32 %r2, [b];
    mad.lo.s32 %r3, %r2, 1000, %r1;
    st.param.b32 [r], %r3;
    ret;
}
"""
    out = np.full(1, 0xFFFFFFFF, dtype=np.uint32)
    ptx.compile(merge_ptx([caller, callee]), target="host").kernel("k").launch((1,), (1,), [out])
    assert out[0] == 5
