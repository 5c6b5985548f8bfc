"""The checker refuses the near-miss PTX NVIDIA's ptxas refuses (tests/data/nvidia_ptx_answers.json), at the
line ptxas names, and still takes the valid originals and the modifier spellings real compilers emit."""

import json
import os
import re
import sys

import pytest

import ptx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "driver"))
import near_miss  # noqa: E402

ANSWERS = json.load(open(os.path.join(near_miss.DATA, "nvidia_ptx_answers.json")))
# Decided by the device, not the PTX: the driver refuses these (tests/driver/test_module_errors.py).
DEVICE_CASES = {"target_sm_100", "shared_256k"}
# NVIDIA's 13.0 driver stops at ISA 9.0; the CUDA 13.5 toolchains numba-cuda and cuda.core use emit 9.5.
ISA_CEILING = {"version_9_1": 0}


def code_of(text):
    try:
        ptx.parse(text)
    except ptx.PTXVersionError as e:
        return 222, e
    except ptx.PTXError as e:
        return 218, e
    return 0, None


@pytest.mark.parametrize("name", [n for n in near_miss.names() if n not in DEVICE_CASES])
def test_near_miss_like_ptxas(name):
    nvidia = ANSWERS["cases"][name]
    code, err = code_of(near_miss.case_text(name))
    assert code == ISA_CEILING.get(name, nvidia["code"]), err
    if err is None:
        return
    log = err.ptxas_log()
    m = re.match(r"ptxas application ptx input, line (\d+);", nvidia["error_log"])
    if m:
        assert log.startswith(f"ptxas application ptx input, line {m.group(1)}; "), (log, nvidia["error_log"])
    assert re.search(r"'[^']+'", log), log        # the message names the token
    if code != 222:         # ptxas's fatal version line is the whole log
        assert log.splitlines()[-1] == "ptxas fatal   : Ptx assembly aborted due to errors"


VALID = """
ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
ld.relaxed.gpu.global.u32 %r1, [%rd1];
st.global.L1::evict_last.wt.u32 [%rd1], %r1;
bar.warp.sync -1;
barrier.sync.aligned 0;
atom.global.acq_rel.gpu.cas.b32 %r1, [%rd1], %r2, %r3;
red.shared.add.noftz.f16x2 [%r1], %r2;
cvt.rn.satfinite.relu.f16x2.f32 %r1, %f1, %f2;
cvt.rzi.ftz.s32.f32 %r1, %f1;
cvt.f64.f32 %fd1, %f1;
fma.rn.ftz.sat.f32 %f1, %f2, %f3, %f4;
fma.rn.f16 %h1, %h1, %h1, %h1;
mad.wide.u32 %rd1, %r1, %r2, %rd1;
mul.hi.u64 %rd1, %rd1, %rd1;
mul.rn.f32 %f1, %f1, %f2;
add.f32 %f1, %f1, %r1;
min.NaN.xorsign.abs.f32 %f1, %f2, %f3;
setp.neu.and.ftz.f32 %p1, %f1, %f2, %p1;
shfl.sync.idx.b32 %r1, %r2, 0, 31, -1;
vote.sync.ballot.b32 %r1, %p1, -1;
""".strip().splitlines()


@pytest.mark.parametrize("line", VALID)
def test_modifiers_compilers_emit_are_taken(line):
    text = (".version 8.0\n.target sm_86\n.address_size 64\n.visible .entry k() {\n"
            ".reg .pred %p<2>; .reg .b16 %h<2>; .reg .f32 %f<5>; .reg .f64 %fd<2>; .reg .b32 %r<4>;"
            " .reg .b64 %rd<2>;\n" + line + "\nret;\n}\n")
    code, err = code_of(text)
    assert code == 0, err


@pytest.mark.parametrize("version,target,code", [
    ("9.5", "sm_90a", 0), ("9.6", "sm_90", 222), ("8.3", "sm_100a", 218), ("8.6", "sm_100a", 0),
    ("7.8", "sm_89", 0), ("7.0", "sm_86", 218), ("8.0", "sm_90f", 218), ("8.8", "sm_120f", 0),
    ("8.0", "compute_86", 0), ("8.0", "sm_86, texmode_independent", 0), ("8.0", "gfx1100", 218),
])
def test_version_and_target(version, target, code):
    text = f".version {version}\n.target {target}\n.address_size 64\n"
    assert code_of(text)[0] == code


def test_unsupported_version_wins_over_syntax_it_cannot_read():
    code, err = code_of(".version 10.2\n.target sm_200\n.address_size 64\n.entry k() { frobnicate.now; }\n")
    assert code == 222 and err.line == 1
    assert "Unsupported .version 10.2" in err.ptxas_log()
