"""Near-miss PTX: nvcc's output for one kernel (tests/data/near_miss_base.ptx) with one token changed per
case, plus parameter-list and JIT-option cases; `python3 tests/driver/near_miss.py DIR` writes them out."""

import os
import sys

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
BASE = open(os.path.join(DATA, "near_miss_base.ptx")).read()

# name -> [(old, new)]: each `old` occurs in the base; its first occurrence becomes `new`.
EDITS = {
    "valid": [],
    "ld_parma": [("ld.param.u64 \t%rd1", "ld.parma.u64 \t%rd1")],
    "ld_volatile_ghobal": [("ld.global.f32 \t%f9", "ld.volatile.ghobal.f32 \t%f9")],
    "ld_volatile_global": [("ld.global.f32 \t%f9", "ld.volatile.global.f32 \t%f9")],
    "mad_lo_s33": [("mad.lo.s32 \t%r3", "mad.lo.s33 \t%r3")],
    "mad_no_half": [("mad.lo.s32 \t%r3", "mad.s32 \t%r3")],
    "unknown_opcode": [("rem.u32", "rme.u32")],
    "add_s31": [("add.s32 \t%r9", "add.s31 \t%r9")],
    "add_f33": [("add.f32", "add.f33")],
    "setp_gee": [("setp.ge.s32", "setp.gee.s32")],
    "cvt_rzz": [("cvt.rzi.s32.f32", "cvt.rzz.s32.f32")],
    "cvt_no_rounding": [("cvt.rn.f32.s32", "cvt.f32.s32")],
    "bar_synk": [("bar.sync", "bar.synk")],
    "shfl_bfli": [("shfl.sync.bfly.b32", "shfl.sync.bfli.b32")],
    "shfl_no_sync": [("shfl.sync.bfly.b32 \t%r18|%p2, %r15, %r11, %r16, %r17",
                      "shfl.bfly.b32 \t%r18|%p2, %r15, %r11, %r16")],
    "atom_ad": [("atom.global.add.u32", "atom.global.ad.u32")],
    "atom_glob": [("atom.global.add.u32", "atom.glob.add.u32")],
    "st_shard": [("st.shared.f32", "st.shard.f32")],
    "fma_no_rounding": [("fma.rn.f32", "fma.f32")],
    "fma_rz": [("fma.rn.f32", "fma.rz.f32")],
    "add_f32_b64_operand": [("add.f32 \t%f3, %f5, %f6", "add.f32 \t%f3, %f5, %rd1")],
    "add_s64_b32_operand": [("add.s64 \t%rd6, %rd4, %rd5", "add.s64 \t%rd6, %rd4, %r3")],
    "add_s32_f32_operand": [("add.s32 \t%r9, %r8, %r7", "add.s32 \t%r9, %r8, %f9")],
    "ld_32bit_address": [("ld.global.f32 \t%f9, [%rd6]", "ld.global.f32 \t%f9, [%r3]")],
    "special_ntid_q": [("%ntid.x", "%ntid.q")],
    "undefined_param": [("[nearmiss_param_4]", "[nearmiss_param_9]")],
    "undefined_label": [("bra \t$L__BB0_4", "bra \t$L__BB0_5")],
    "version_9_9": [(".version 9.0", ".version 9.9")],
    "version_10_0": [(".version 9.0", ".version 10.0")],
    "version_1_0": [(".version 9.0", ".version 1.0")],
    "version_9_1": [(".version 9.0", ".version 9.1")],
    "version_8_9": [(".version 9.0", ".version 8.9")],
    "version_7_9": [(".version 9.0", ".version 7.9")],
    "version_6_5": [(".version 9.0", ".version 6.5")],
    "version_7_0": [(".version 9.0", ".version 7.0")],
    "version_8_8": [(".version 9.0", ".version 8.8")],
    "target_banana": [(".target sm_80", ".target banana")],
    "target_sm_91": [(".target sm_80", ".target sm_91")],
    "target_sm_100": [(".target sm_80", ".target sm_100")],
    "target_sm_90a": [(".target sm_80", ".target sm_90a")],
    "target_sm_86": [(".target sm_80", ".target sm_86")],
    "target_sm_52": [(".target sm_80", ".target sm_52")],
    "target_compute_80": [(".target sm_80", ".target compute_80")],
    "address_size_32": [(".address_size 64", ".address_size 32")],
    "no_address_size": [(".address_size 64", "")],
    "missing_comma": [("ld.param.u64 \t%rd2, [", "ld.param.u64 \t%rd2 [")],
    "shared_48k": [("tile[1024]", "tile[49152]")],
    "shared_48k_plus_4": [("tile[1024]", "tile[49156]")],
    "shared_256k": [("tile[1024]", "tile[262144]")],
}

PARAM_KERNEL = """.version {version}
.target sm_80
.address_size 64

.visible .entry bigparam(
\t.param .align 4 .b8 bigparam_param_0[{size}]
)
{{
\t.reg .b32 \t%r<2>;

\tld.param.u32 \t%r1, [bigparam_param_0];
\tret;

}}
"""
# name -> (PTX ISA version, bytes of the one parameter)
PARAMS = {
    "param_4096_v80": ("8.0", 4096), "param_4100_v80": ("8.0", 4100), "param_4352_v80": ("8.0", 4352),
    "param_4356_v80": ("8.0", 4356), "param_4100_v81": ("8.1", 4100), "param_32764_v81": ("8.1", 32764),
    "param_32768_v81": ("8.1", 32768), "param_40000_v90": ("9.0", 40000),
}


def case_text(name: str) -> str:
    if name in PARAMS:
        version, size = PARAMS[name]
        return PARAM_KERNEL.format(version=version, size=size)
    text = BASE
    for old, new in EDITS[name]:
        assert old in text, (name, old)
        text = text.replace(old, new, 1)
    return text


def names() -> list:
    return list(EDITS) + list(PARAMS)


def changed_line(name: str) -> int:
    """1-based line of the first change (0 for the unchanged original)."""
    a, b = BASE.splitlines(), case_text(name).splitlines()
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i + 1
    return 0


def write_cases(directory: str) -> None:
    """One NAME.ptx per case, the names listed in order in `cases.txt` (what the C probe reads)."""
    os.makedirs(directory, exist_ok=True)
    for n in names():
        with open(os.path.join(directory, n + ".ptx"), "w") as f:
            f.write(case_text(n))
    with open(os.path.join(directory, "cases.txt"), "w") as f:
        f.write("\n".join(names()) + "\n")


if __name__ == "__main__":
    write_cases(sys.argv[1])
