"""ptx.compile for AMD targets: target names, the cache, LLVM aborts contained in the child process,
and HIP's launch `extra` array built from a packed parameter buffer."""

import ctypes
import os

import numpy as np
import pytest

import ptx
from conftest import need_linker
from ptx.amdgpu_targets import parse_target

PTX = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry add1(.param .u64 p, .param .u32 n)
{
    .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .pred %p<2>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    atom.global.add.u32 %r3, [%rd3], 1;
DONE:
    ret;
}
"""


def test_target_names():
    assert parse_target("amdgcn:gfx1100").cpu == "gfx1100"
    t = parse_target("gfx90a:sramecc+:xnack-")
    assert t.cpu == "gfx90a" and t.wave == 64 and t.llvm_features == "+sramecc,-xnack"
    assert parse_target("gfx1030").llvm_features == "+wavefrontsize32"
    with pytest.raises(ptx.PTXUnsupportedError, match="Polaris"):
        parse_target("gfx803")
    with pytest.raises(ptx.PTXUnsupportedError, match="unknown AMD GPU"):
        parse_target("gfx9999")


def test_cache_is_keyed_by_target(tmp_path):
    need_linker()
    a = ptx.compile(PTX, target="gfx1100", cache_dir=str(tmp_path))
    b = ptx.compile(PTX, target="gfx1100", cache_dir=str(tmp_path))
    c = ptx.compile(PTX, target="gfx1030", cache_dir=str(tmp_path))
    assert not a.cache_hit and b.cache_hit and not c.cache_hit
    assert a.code_object == b.code_object and a.code_object != c.code_object
    assert len(list(tmp_path.glob("*.hsaco"))) == 2


def test_llvm_abort_stays_in_the_child():
    """An intrinsic the AMDGPU backend cannot select aborts LLVM: the caller gets PTXUnsupportedError."""
    from ptx.amdgpu import _compile_object, datalayout
    ir = f'''target triple = "amdgcn-amd-amdhsa"
target datalayout = "{datalayout()}"
declare double @llvm.sin.f64(double)
define amdgpu_kernel void @k(ptr addrspace(1) %p) {{
  %x = load double, ptr addrspace(1) %p
  %y = call double @llvm.sin.f64(double %x)
  store double %y, ptr addrspace(1) %p
  ret void
}}
'''
    with pytest.raises(ptx.PTXUnsupportedError, match="rejected the module"):
        _compile_object(ir, parse_target("gfx1100"), 2, 120)
    # the next module gets a fresh child
    need_linker()
    assert ptx.compile(PTX, target="gfx1100").kernel("add1").param_size == 12


def test_unsupported_feature_is_a_clean_error():
    text = PTX.replace("atom.global.add.u32 %r3, [%rd3], 1;", "sin.approx.f64 %fd1, %fd1;") \
              .replace(".reg .pred %p<2>;", ".reg .pred %p<2>; .reg .f64 %fd<2>;")
    with pytest.raises(ptx.PTXError):
        ptx.compile(text, target="gfx1100")


def test_hip_extra_array_layout():
    from zluda_py.backends.hip.backend import launch_extra
    params = np.random.default_rng().integers(0, 256, 28, dtype=np.uint8).tobytes()
    extra, buf, size = launch_extra(params)
    vals = [extra[i] or 0 for i in range(5)]
    assert vals[0] == 1 and vals[2] == 2 and vals[4] == 3
    assert vals[1] == ctypes.addressof(buf) and ctypes.string_at(vals[1], 28) == params
    assert ctypes.c_size_t.from_address(vals[3]).value == 28


SURFACE_PTX = """
.version 8.5
.target sm_80
.address_size 64
.visible .entry surf(.param .u64 s, .param .u64 v)
{
    .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .f32 %f<2>;
    ld.param.u64 %rd0, [s];
    ld.param.u64 %rd1, [v];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.b32 %f1, %r1;
    sust.p.2d.v4.b32.trap [%rd0, {%r1, %r2}], {%r1, %r2, %f1, 7};
    sured.b.add.2d.u32.zero [%rd0, {%r1, %r2}], %r2;
    sured.p.max.1d.b64.clamp [%rd0, {%r1}], %rd1;
    sured.b.or.3d.b32.trap [%rd0, {%r1, %r2, %r2, %r2}], %r1;
    ret;
}
"""


@pytest.mark.parametrize("target", ["gfx1100", "gfx90a"])
def test_surface_stores_and_reductions_compile(target):
    """sust.p and sured link the texture runtime's ptx_surf_store_p / ptx_surf_reduce, whose reductions are
    the target's atomic instructions on a flat address (the surface may be in any memory)."""
    import re
    import subprocess
    import tempfile
    from ptx.amdgpu_texture import find_clang
    need_linker()
    if find_clang() is None:
        pytest.skip("no clang to build the texture runtime")
    mod = ptx.compile(SURFACE_PTX, target=target)
    assert "surf" in mod.kernels
    # the disassembler of the clang that built the runtime knows the targets that clang knows
    objdump = os.path.join(os.path.dirname(find_clang()), "llvm-objdump")
    if not os.access(objdump, os.X_OK):
        return
    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(mod.code_object)
        f.flush()
        asm = subprocess.run([objdump, "-d", f"--mcpu={target}", f.name], capture_output=True, text=True).stdout
    ops = set(re.findall(r"\b(?:flat|global)_atomic_(\w+?)(?:_u32|_u64|_b32|_b64|_x2)?\b", asm))
    # add stays one instruction; min/max (and, at system scope, and/or) are compare-and-swap loops
    assert {"add", "cmpswap"} <= ops, sorted(ops)
