"""Golden checks on the disassembly of a few kernels (llvm-objdump): the instructions CUDA semantics need
must be there -- LDS (ds_*) for shared memory, s_barrier for __syncthreads, ds_bpermute_b32 (or DPP) for
shuffles, global_atomic_* for atomics on global memory, global_load/store for plain accesses."""

import re
import subprocess
from pathlib import Path

import pytest

import ptx
from conftest import cache_dir, need_linker, objdump

TARGETS = ("gfx1030", "gfx1100", "gfx1201", "gfx90a", "gfx942")
GOLDEN = {
    "vector_add": [r"global_load_(b32|dword)", r"global_store_(b32|dword)"],
    "reduce_shared": [r"s_barrier", r"ds_(write|store)", r"ds_(read|load)"],
    "reduce_warp_shuffle": [r"ds_bpermute_b32|_dpp"],
    "scan": [r"s_barrier", r"ds_(read|load)", r"ds_(write|store)"],
    "histogram": [r"global_atomic_add", r"ds_add_u32|ds_add_rtn_u32", r"s_barrier"],
}
# what must NOT appear: a CPU runtime call or flat accesses where the address space is known
FORBIDDEN = [r"s_swappc", r"\bscratch_store"]


def _disassemble(code: bytes, cpu: str, tmp_path: Path) -> str:
    tool = objdump()
    if tool is None:
        pytest.skip("no llvm-objdump (apt-get install llvm-19)")
    f = tmp_path / f"k.{cpu}.hsaco"
    f.write_bytes(code)
    return subprocess.run([tool, "-d", f"--mcpu={cpu}", str(f)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sample", sorted(GOLDEN))
def test_disassembly_has_the_expected_instructions(built_ptx, sample, target, tmp_path):
    need_linker()
    path, err = built_ptx.get(f"samples/{sample}.cu-sm86", (None, "not built"))
    assert path is not None, err
    mod = ptx.compile(Path(path).read_text(), target=target, cache_dir=cache_dir())
    asm = _disassemble(mod.code_object, target, tmp_path)
    for pat in GOLDEN[sample]:
        assert re.search(pat, asm), f"{sample} on {target}: no {pat!r} in the disassembly"
    for pat in FORBIDDEN:
        assert not re.search(pat, asm), f"{sample} on {target}: unexpected {pat!r}"
    if target in ("gfx90a", "gfx942"):
        assert all(k.wavefront_size == 64 for k in mod.kernels.values())
    else:
        assert all(k.wavefront_size == 32 for k in mod.kernels.values())


def test_shuffle_on_wave64_stays_in_the_half_wave(tmp_path):
    """On 64-wide waves a CUDA warp is half a wave: the source lane of a shuffle gets the half's base
    (lane & 32) ORed in, and ballots shift the 64-bit mask by it."""
    need_linker()
    text = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 bal)
{
    .reg .b32 %r<8>; .reg .b64 %rd<6>; .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd4, [bal];
    mov.u32 %r1, %tid.x;
    shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
    setp.lt.u32 %p1, %r1, 40;
    vote.sync.ballot.b32 %r3, %p1, -1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    add.s64 %rd5, %rd4, %rd2;
    st.global.u32 [%rd5], %r3;
    ret;
}
"""
    mod = ptx.compile(text, target="gfx90a", cache_dir=cache_dir())
    ir = mod.ir
    assert "llvm.amdgcn.mbcnt.hi" in ir and "and i32" in ir and "llvm.amdgcn.ballot.i64" in ir
    asm = _disassemble(mod.code_object, "gfx90a", tmp_path)
    assert "ds_bpermute_b32" in asm or "_dpp" in asm
    mod32 = ptx.compile(text, target="gfx1100", cache_dir=cache_dir())
    assert "llvm.amdgcn.ballot.i32" in mod32.ir and "mbcnt.hi" not in mod32.ir
