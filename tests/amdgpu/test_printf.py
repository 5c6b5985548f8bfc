"""Device printf on AMD: every format of samples/device_printf.cu reaches the code object's
`amdhsa.printf` metadata with the argument sizes its conversions need, constant %s strings are copied,
and the kernels get the hidden printf buffer argument the ROCm runtime fills."""

from pathlib import Path

import pytest

import ptx
from conftest import cache_dir, need_linker
from ptx.amdgpu_verify import read_code_object


@pytest.mark.parametrize("target", ["gfx1100", "gfx90a"])
def test_printf_formats_in_metadata(built_ptx, target):
    need_linker()
    path, err = built_ptx.get("samples/device_printf.cu-sm86", (None, "not built"))
    assert path is not None, err
    text = Path(path).read_text()
    mod = ptx.compile(text, target=target, cache_dir=cache_dir())
    md = read_code_object(mod.code_object).metadata
    fmts = md.get("amdhsa.printf", [])
    joined = "\n".join(fmts)
    # "ID:NARGS:SIZES...:FORMAT", the format escaped by LLVM (':' as \72, newline as backslash-n)
    assert any(f.endswith(r"int=%d unsigned=%u hex=%x HEX=%08X\n") and ":4:4:4:4:4:" in f for f in fmts), joined
    assert any("ll=%lld" in f and ":4:8:4:4:" in f for f in fmts), joined          # %lld is 8 bytes, %c 4
    assert any("float=%.3f" in f and ":5:8:8:8:8:4:" in f for f in fmts), joined    # floats arrive as doubles
    assert any(f.endswith(r" %s\n") for f in fmts), joined
    assert any("hidden_printf_buffer" in [a.get(".value_kind") for a in k[".args"]] for k in md["amdhsa.kernels"])


def test_printf_with_a_runtime_format_is_refused():
    text = """
.version 7.0
.target sm_70
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.visible .entry k(.param .u64 f)
{
    .reg .b32 %r<2>; .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [f];
    mov.u64 %rd2, 0;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b64 param1;
    st.param.b64 [param1+0], %rd2;
    .param .b32 retval0;
    call.uni (retval0), vprintf, (param0, param1);
    ld.param.b32 %r1, [retval0+0];
    }
    ret;
}
"""
    with pytest.raises(ptx.PTXUnsupportedError, match="format string"):
        ptx.compile(text, target="gfx1100")
