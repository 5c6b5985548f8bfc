"""The offline code-object verifier catches real faults: each check is shown failing on a damaged or
mismatched code object, and passing on the compiler's output."""

import struct

import pytest

import ptx
from conftest import cache_dir, need_linker
from ptx.amdgpu_verify import read_code_object, verify

PTX = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry scale(.param .u64 p, .param .f32 f, .param .u32 n)
.maxntid 256, 1, 1
{
    .reg .b32 %r<4>; .reg .f32 %f<4>; .reg .b64 %rd<4>; .reg .pred %p<2>;
    .shared .align 4 .b8 tile[1024];
    ld.param.u64 %rd1, [p];
    ld.param.f32 %f1, [f];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.f32 %f2, [%rd3];
    mul.f32 %f3, %f2, %f1;
    shl.b32 %r3, %r2, 2;
    mov.u32 %r1, tile;
    add.s32 %r3, %r3, %r1;
    st.shared.f32 [%r3], %f3;
    bar.sync 0;
    ld.shared.f32 %f3, [%r3];
    st.global.f32 [%rd3], %f3;
DONE:
    ret;
}
"""


@pytest.fixture(scope="module")
def code():
    need_linker()
    return ptx.compile(PTX, target="gfx1100", cache_dir=cache_dir())


def test_good_object_passes(code):
    v = verify(code.code_object, "gfx1100", PTX, launch_block=256)
    assert v.ok, v.problems
    k = code.kernel("scale")
    assert k.params == [(0, 8, 8), (8, 4, 4), (12, 4, 4)] and k.param_size == 16
    assert k.max_threads == 256 and k.lds_bytes >= 1024 and k.wavefront_size == 32
    info = read_code_object(code.code_object)
    assert any(s[0] == "scale.kd" and s[2] == 64 for s in info.dynsyms)


def _patched(data, off, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, off, value)
    return bytes(b)


@pytest.mark.parametrize("off,fmt,value,expect", [
    (18, "<H", 62, "e_machine"), (7, "<B", 0, "OS/ABI"), (8, "<B", 2, "ABI version"),
    (16, "<H", 1, "ET_DYN"), (48, "<B", 0x36, "GPU byte")])
def test_damaged_header_is_caught(code, off, fmt, value, expect):
    v = verify(_patched(code.code_object, off, fmt, value), "gfx1100", PTX)
    assert not v.ok and any(expect in p for p in v.problems), v.problems


def test_wrong_target_and_wave_are_caught(code):
    v = verify(code.code_object, "gfx90a", None)
    assert not v.ok
    assert any("GPU byte" in p for p in v.problems) and any("wavefront" in p for p in v.problems)


def test_mismatch_with_the_ptx_is_caught(code):
    other = PTX.replace(".param .u32 n)", ".param .u32 n, .param .u64 extra)").replace(".maxntid 256, 1, 1", "")
    v = verify(code.code_object, "gfx1100", other)
    assert not v.ok
    assert any("explicit args" in p for p in v.problems)
    assert any("max_flat_workgroup_size" in p for p in v.problems)
    v = verify(code.code_object, "gfx1100", PTX, launch_block=512)
    assert not v.ok and any("launch" in p for p in v.problems)


def test_metadata_note_damage_is_caught(code):
    data = bytearray(code.code_object)
    i = data.find(b"amdhsa.kernels")
    assert i > 0
    data[i:i + 14] = b"amdhsa.kernelX"
    v = verify(bytes(data), "gfx1100", PTX)
    assert not v.ok and any("missing from the metadata" in p for p in v.problems)


def test_not_an_elf():
    v = verify(b"not a code object at all" * 4)
    assert not v.ok and "unreadable" in v.problems[0]
