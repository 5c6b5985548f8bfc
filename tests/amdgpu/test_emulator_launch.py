"""AmdgpuModule.kernel(name).launch / launch_raw on the emulator: hidden arguments as ROCclr writes them,
geometry, LDS, parameter buffers, globals, the lane-31 repro, WGP and CU mode, and no emulator at all."""

import ctypes
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import ptx
from conftest import cache_dir, need_linker
from ptx.amdgpu_verify import read_code_object

HEADER = ".version 8.0\n.target sm_86\n.address_size 64\n"
SREGS = ["tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z", "ctaid.x", "ctaid.y", "ctaid.z",
         "nctaid.x", "nctaid.y", "nctaid.z", "dynamic_smem_size"]
GEOMETRY = HEADER + f"""
.visible .entry geometry(.param .u64 out)
{{
.reg .u32 %v, %lin, %a, %b, %c; .reg .u64 %p, %off;
mov.u32 %a, %tid.z; mov.u32 %b, %ntid.y; mov.u32 %c, %tid.y;
mad.lo.u32 %lin, %a, %b, %c;
mov.u32 %a, %ntid.x; mov.u32 %c, %tid.x; mad.lo.u32 %lin, %lin, %a, %c;
mov.u32 %a, %ctaid.z; mov.u32 %b, %nctaid.y; mov.u32 %c, %ctaid.y; mad.lo.u32 %v, %a, %b, %c;
mov.u32 %a, %nctaid.x; mov.u32 %c, %ctaid.x; mad.lo.u32 %v, %v, %a, %c;
mov.u32 %a, %ntid.x; mov.u32 %b, %ntid.y; mul.lo.u32 %a, %a, %b; mov.u32 %b, %ntid.z; mul.lo.u32 %a, %a, %b;
mad.lo.u32 %lin, %v, %a, %lin;
mul.wide.u32 %off, %lin, {4 * len(SREGS)};
ld.param.u64 %p, [out]; add.u64 %p, %p, %off;
""" + "\n".join(f"mov.u32 %v, %{s};\nst.global.u32 [%p+{4 * k}], %v;" for k, s in enumerate(SREGS)) + "\nret;\n}\n"

LANE31 = HEADER + """
.visible .entry lane31(.param .u64 o)
{
 .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<2>;
 ld.param.u64 %rd1, [o];
 mov.u32 %r1, %tid.x;
 match.any.sync.b32 %r2, 7, -1;
 match.all.sync.b32 %r3|%p1, 7, -1;
 selp.u32 %r4, 1, 0, %p1;
 redux.sync.add.u32 %r5, 1, -1;
 mul.wide.u32 %rd2, %r1, 16; add.s64 %rd3, %rd1, %rd2;
 st.global.v4.u32 [%rd3], {%r2, %r3, %r4, %r5};
 ret;
}
"""

GLOBALS = HEADER + """
.visible .global .align 4 .u32 table[4] = {10, 20, 30, 40};
.visible .entry use_table(.param .u64 out, .param .u32 k)
{
 .reg .b32 %r<6>; .reg .b64 %rd<6>;
 ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [k];
 mov.u32 %r2, %tid.x; and.b32 %r3, %r2, 3;
 mul.wide.u32 %rd2, %r3, 4; mov.u64 %rd3, table; add.s64 %rd3, %rd3, %rd2;
 ld.global.u32 %r4, [%rd3]; mad.lo.u32 %r4, %r2, %r1, %r4;
 mul.wide.u32 %rd4, %r2, 4; add.s64 %rd4, %rd1, %rd4; st.global.u32 [%rd4], %r4;
 ret;
}
"""

SHARED_SUM = HEADER + """
.visible .entry shared_sum(.param .u64 in, .param .u64 out)
{
 .shared .align 4 .b32 s[256];
 .reg .b32 %r<10>; .reg .b64 %rd<8>;
 ld.param.u64 %rd1, [in]; ld.param.u64 %rd2, [out];
 mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mad.lo.u32 %r3, %r2, 256, %r1;
 mul.wide.u32 %rd3, %r3, 4; add.s64 %rd4, %rd1, %rd3; ld.global.u32 %r4, [%rd4];
 mov.u32 %r9, s; shl.b32 %r8, %r1, 2; add.u32 %r9, %r9, %r8; st.shared.u32 [%r9], %r4;
 bar.sync 0;
 xor.b32 %r5, %r1, 255; shl.b32 %r5, %r5, 2; mov.u32 %r6, s; add.u32 %r6, %r6, %r5; ld.shared.u32 %r7, [%r6];
 add.u32 %r7, %r7, %r4;
 add.s64 %rd5, %rd2, %rd3; st.global.u32 [%rd5], %r7;
 ret;
}
"""


@pytest.fixture(scope="module")
def emu():
    need_linker()
    from ptx import amdgpu_emulator
    why = amdgpu_emulator.available()
    if why:
        pytest.skip(f"no AMD GPU emulator: {why}")
    return amdgpu_emulator


@pytest.fixture
def rng():
    return np.random.default_rng(int.from_bytes(os.urandom(4), "little"))


def compile_for(text, target):
    return ptx.compile(text, target=target, cache_dir=cache_dir())


def test_without_an_emulator_a_launch_says_why():
    need_linker()
    code = ("import ptx, numpy as np\n"
            f"m = ptx.compile({LANE31!r}, target='gfx1100')\n"
            "try:\n    m.kernel('lane31').launch(1, 32, [np.zeros(128, np.uint32)])\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    env = {k: v for k, v in os.environ.items() if k != "ZLUDA_AMDGPU_EMULATOR"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "EmulatorUnavailable ZLUDA_AMDGPU_EMULATOR is not set" in r.stdout, r.stdout + r.stderr
    env["ZLUDA_AMDGPU_EMULATOR"] = "/nonexistent"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "is not a tinygrad source tree" in r.stdout, r.stdout + r.stderr


def test_every_fix_applies(emu):
    from ptx.amdgpu_emulator_fixes import FIXES
    emu.emulator()
    assert set(emu.applied_fixes()) == {f.tag for f in FIXES} - set(os.environ.get(
        "ZLUDA_AMDGPU_EMULATOR_NO_FIX", "").split(","))


@pytest.mark.parametrize("target", ["gfx1100", "gfx1100:cumode", "gfx950"])
def test_lane31_repro_gives_the_cpu_backends_answers(emu, target, rng):
    out = np.frombuffer(rng.bytes(512), np.uint32).copy()
    host = out.copy()
    compile_for(LANE31, target).kernel("lane31").launch(1, 32, [out])
    ptx.compile(LANE31, target="host").kernel("lane31").launch(1, 32, [host])
    want = np.tile(np.array([0xFFFFFFFF, 0xFFFFFFFF, 1, 32], np.uint32), 32)
    assert (host == want).all()
    assert (out == want).all(), out.reshape(32, 4)[[0, 30, 31]]


@pytest.mark.parametrize("target", ["gfx1100", "gfx950"])
@pytest.mark.parametrize("grid,block,dyn", [((3, 2, 2), (8, 4, 2), 0), ((2, 1, 3), (40, 1, 1), 4096),
                                            ((1, 3, 1), (5, 7, 3), 100)])
def test_geometry_and_hidden_arguments(emu, target, grid, block, dyn, rng):
    """%ntid/%nctaid come from the hidden group sizes and block counts, %dynamic_smem_size from the
    hidden dynamic LDS size; the segment holds what ROCclr writes for hipModuleLaunchKernel."""
    mod = compile_for(GEOMETRY, target)
    n = int(np.prod(grid) * np.prod(block))
    out = np.frombuffer(rng.bytes(n * 4 * len(SREGS)), np.uint32).reshape(n, len(SREGS)).copy()
    d = mod.kernel("geometry").launch(grid, block, [out], shared_bytes=dyn)
    lin = np.arange(n)
    per_block = int(np.prod(block))
    t, b = lin % per_block, lin // per_block
    want = {"tid.x": t % block[0], "tid.y": t // block[0] % block[1], "tid.z": t // (block[0] * block[1]),
            "ctaid.x": b % grid[0], "ctaid.y": b // grid[0] % grid[1], "ctaid.z": b // (grid[0] * grid[1]),
            "dynamic_smem_size": np.full(n, dyn)}
    want.update({f"ntid.{a}": np.full(n, block[i]) for i, a in enumerate("xyz")})
    want.update({f"nctaid.{a}": np.full(n, grid[i]) for i, a in enumerate("xyz")})
    for k, s in enumerate(SREGS):
        assert (out[:, k] == want[s]).all(), (s, out[:8, k], want[s][:8])
    md = read_code_object(mod.code_object).metadata["amdhsa.kernels"][0]
    hip = {"hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
           "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
           "hidden_remainder_x": 0, "hidden_remainder_y": 0, "hidden_remainder_z": 0, "hidden_grid_dims": 3,
           "hidden_global_offset_x": 0, "hidden_global_offset_y": 0, "hidden_global_offset_z": 0,
           "hidden_dynamic_lds_size": dyn}
    seen = set()
    for a in md[".args"]:
        if a[".value_kind"] in hip:
            got = int.from_bytes(d.kernarg[a[".offset"]:a[".offset"] + a[".size"]], "little")
            assert got == hip[a[".value_kind"]], (a, got)
            seen.add(a[".value_kind"])
    assert {"hidden_block_count_x", "hidden_group_size_x"} <= seen, seen
    assert struct.unpack_from("<Q", d.kernarg, 0)[0] == out.ctypes.data


@pytest.mark.parametrize("target", ["gfx1100", "gfx1100:cumode"])
def test_wgp_and_cu_mode_builds_run_alike(emu, target, rng):
    """gfx1100 as users build it (WGP mode: buffer_gl0_inv after each barrier, replaced by s_nop for the
    emulator) and gfx1100:cumode (none to replace); both give the CPU backend's results."""
    mod = compile_for(SHARED_SUM, target)
    replaced = mod.emulated().replaced.get("buffer_gl0_inv", 0)
    assert (replaced > 0) == (target == "gfx1100"), mod.emulated().replaced
    assert mod.metadata["amdhsa.kernels"][0][".workgroup_processor_mode"] == (target == "gfx1100")
    x = rng.integers(0, 1 << 32, 1024, dtype=np.uint64).astype(np.uint32)
    out = np.frombuffer(rng.bytes(4096), np.uint32).copy()
    mod.kernel("shared_sum").launch(4, 256, [x, out])
    blocks = x.reshape(4, 256)
    assert (out.reshape(4, 256) == blocks + blocks[:, ::-1]).all()


def test_feature_strings_key_the_cache(emu, tmp_path):
    keys = set()
    for target, env in (("gfx1100", None), ("gfx1100:cumode", None), ("gfx1100", "+cumode")):
        old = os.environ.pop("ZLUDA_AMDGPU_FEATURES", None)
        if env:
            os.environ["ZLUDA_AMDGPU_FEATURES"] = env
        try:
            m = ptx.compile(SHARED_SUM, target=target, cache_dir=str(tmp_path))
        finally:
            os.environ.pop("ZLUDA_AMDGPU_FEATURES", None)
            if old is not None:
                os.environ["ZLUDA_AMDGPU_FEATURES"] = old
        keys.add((m.target.key, m.metadata["amdhsa.kernels"][0][".workgroup_processor_mode"]))
    assert keys == {("gfx1100|+wavefrontsize32", 1), ("gfx1100|+wavefrontsize32,+cumode", 0)}
    assert len(list(tmp_path.glob("*.hsaco"))) == 2


def test_launch_raw_takes_a_parameter_buffer_by_address_and_globals_live_in_emulator_memory(emu, rng):
    mod = compile_for(GLOBALS, "gfx1100")
    addr, size = mod.emulated().symbols["table"]
    assert size == 16 and ctypes.string_at(addr, 16) == struct.pack("<4I", 10, 20, 30, 40)
    new = rng.integers(0, 1000, 4).astype(np.uint32)
    ctypes.memmove(addr, new.tobytes(), 16)                  # what hipMemcpyHtoD to the symbol does
    out = np.frombuffer(rng.bytes(256), np.uint32).copy()
    k = int(rng.integers(1, 1000))
    params = ctypes.create_string_buffer(struct.pack("<QI", out.ctypes.data, k), 16)
    mod.kernel("use_table").launch_raw(1, 64, ctypes.addressof(params))
    assert (out == new[np.arange(64) % 4] + np.arange(64, dtype=np.uint32) * k).all()


def test_refusals(emu):
    mod = compile_for(GEOMETRY, "gfx1100")
    out = np.zeros(4, np.uint32)
    with pytest.raises(ValueError, match="exceed"):
        mod.kernel("geometry").launch(1, 1, [out], shared_bytes=65537)
    with pytest.raises(ValueError, match="invalid launch dimensions"):
        mod.kernel("geometry").launch(1, (1025, 1, 1), [out])
    with pytest.raises(ValueError, match="takes"):
        mod.kernel("geometry").launch_raw(1, 1, b"\0" * 4)
    with pytest.raises(emu.EmulatorError, match="RDNA3"):
        compile_for(GEOMETRY, "gfx1030").emulated()
