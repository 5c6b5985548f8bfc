"""Legacy texture and surface references through the real libcuda.so.1. scripts/nvidia_texref_probe.c, run
against the shim, answers what it answered on NVIDIA's CUDA 13 driver (tests/data/nvidia_texref_answers.json:
modules using texture or sampler references refused, the cuTexRef* calls' errors and defaults); with
ZLUDA_TEXREF=1, tests/driver/texref_host.c binds, launches and rebinds references as a CUDA 11 program did."""

import json
import os
import random
import re
import subprocess
import sys

import pytest

from chost import C_HOST, build_c_host, user_env

pytestmark = C_HOST
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSWERS = json.load(open(os.path.join(ROOT, "tests", "data", "nvidia_texref_answers.json")))
# answers that differ for reasons of their own
DIFFERENT = {
    "about": "the probe's phase", "driver_version": "the machine", "device": "the machine", "cc": "the machine",
    "Destroy_twice": "NVIDIA's driver crashes destroying a reference twice; the shim answers INVALID_HANDLE",
}
JIT_DIFFERENT = {
    "i_txq_reg.ptx": "NVIDIA's JIT drops a txq whose result is unused, and with it the reference: the module "
                     "loads; here an instruction naming a .texref refuses the module",
    "u_tex_1d_nobrace.ptx": "the same: an unused tex",
    "u_txq_texref_filter.ptx": "the same: an unused txq",
    "u_tld4_sampler.ptx": "[t, t, c] in unified mode: NVIDIA's takes a .texref as the sampler; refused here",
    "texref_array.ptx": "an array of .texref (unused there): refused here as not supported",
    "init_bad_value.ptx": "NVIDIA's JIT crashes on an unknown member value; refused here (CUDA_ERROR_INVALID_PTX)",
}


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    exe = tmp_path_factory.mktemp("texref") / "texref_probe"
    subprocess.run(["gcc", "-std=gnu11", "-O1", "-Wall", "-Werror", os.path.join(ROOT, "scripts",
                    "nvidia_texref_probe.c"), "-o", str(exe), "-ldl"], check=True)
    return str(exe)


def _run_probe(probe, shim_libdir, phase, **env):
    r = subprocess.run([probe, phase, os.path.join(shim_libdir, "libcuda.so.1")], capture_output=True, text=True,
                       timeout=600, env=user_env(**env))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(r.stdout)


def _compare(got, want):
    bad = {k: (got.get(k), v) for k, v in want.items()
           if k not in DIFFERENT and not k.endswith(".log") and got.get(k) != v}
    assert not bad, "(shim, NVIDIA): " + json.dumps(bad)[:3000]


@pytest.mark.parametrize("phase, section, env", [
    ("main", "main", {}),
    ("inits", "lazy", {}),
    ("inits", "eager", {"CUDA_MODULE_LOADING": "EAGER"}),
    ("created", "created", {}),
    ("unloaded", "unloaded", {}),
    ("unbound", "unbound", {}),
], ids=["main", "inits-lazy", "inits-eager", "created", "unloaded", "unbound"])
def test_probe_answers_as_nvidia(probe, shim_libdir, phase, section, env):
    want = ANSWERS["inits"][section] if phase == "inits" else ANSWERS[section]
    _compare(_run_probe(probe, shim_libdir, phase, **env), want)


def test_jit_answers_as_nvidia(probe, shim_libdir, tmp_path):
    """What a module load answers for each small module NVIDIA's JIT was given (the semantic errors of
    ptx/check.py are its CUDA_ERROR_INVALID_PTX)."""
    files = []
    for name, a in ANSWERS["loads"].items():
        (tmp_path / name).write_text(a["ptx"])
        files.append(str(tmp_path / name))
    r = subprocess.run([probe, "load", *files], capture_output=True, text=True, timeout=600,
                       env=user_env(LD_LIBRARY_PATH=shim_libdir))
    assert r.returncode == 0, r.stderr[-2000:]
    got = {k[len("load."):]: v for k, v in json.loads(r.stdout).items() if not k.endswith(".log")}
    bad = {n: (got.get(n), a["answer"]) for n, a in ANSWERS["loads"].items()
           if n not in JIT_DIFFERENT and got.get(n) != a["answer"]}
    assert not bad, f"(shim, NVIDIA): {bad}"
    assert got["init_bad_value.ptx"] == 218


@pytest.fixture(scope="module")
def host(shim_libdir, tmp_path_factory):
    return build_c_host(shim_libdir, "texref_host.c", tmp_path_factory.mktemp("texref") / "texref_host", libs=["-lm"])


# texref_host.c's bad calls -> the probe's key for the same call on NVIDIA's driver
SAME_CALL = {
    "SetArray_flags0": "SetArray_flags0", "SetFormat_bad_format": "SetFormat_bad_format",
    "SetFormat_3_channels": "SetFormat_3_channels", "SetAddressMode_dim3": "SetAddressMode_dim3",
    "SetFilterMode_2": "SetFilterMode_2", "SetFlags_unknown_bit": "SetFlags_unknown_bit",
    "SetBorderColor_null": "SetBorderColor_null", "GetBorderColor_null": "GetBorderColor_null",
    "SetArray_null_array": "SetArray_null_array", "SurfSetArray_flags1": "SurfSetArray_flags1",
    "SetAddress2D_misaligned": "SetAddress2D_misaligned_dptr", "SetAddress2D_bad_pitch": "SetAddress2D_bad_pitch",
    "GetAddress_of_array_binding": "U1.GetAddress", "GetArray_of_linear_binding": "GetArray_after_SetAddress",
    "SetMipmappedArray_null": "SetMipmappedArray_null", "GetArray_of_mipmapped_binding": "GetArray_unbound",
}
# calls NVIDIA's driver could not be asked (its modules with references do not load): CUDA's documentation
DOCUMENTED = {
    "GetTexRef_unknown": 500, "GetTexRef_of_surfref": 500, "GetSurfRef_of_texref": 500,   # CUDA_ERROR_NOT_FOUND
    "ParamSetTexRef_unit0": 1,          # texunit must be CU_PARAM_TR_DEFAULT
    "ParamSetTexRef_created": 1,        # "the texture-reference must be obtained via cuModuleGetTexRef()"
    "Destroy_module_ref": 400, "Destroy_null": 400,
    "GetFilterMode_after_unload": 400, "SetArray_after_unload": 400, "SurfGetArray_after_unload": 400,
}


def test_references_bound_launched_and_rebound(host):
    seed = random.randint(1, 10**6)
    r = subprocess.run([host, str(seed)], capture_output=True, text=True, timeout=600,
                       env=user_env(ZLUDA_TEXREF="1", ZLUDA_LOG="1"))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok 0"), f"seed {seed}\n{r.stdout}\n{r.stderr[-3000:]}"
    codes = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"^code (\w+) (-?\d+)$", r.stdout, re.M))
    assert set(codes) == set(SAME_CALL) | set(DOCUMENTED)
    want = {k: ANSWERS["main"][v] for k, v in SAME_CALL.items()} | DOCUMENTED
    assert codes == want, {k: (codes[k], want[k]) for k in codes if codes[k] != want[k]}
    # ZLUDA_LOG=1: one line for each bad call, saying what was wrong
    for line in ("cuTexRefSetFormat: CUDA_ERROR_INVALID_VALUE: 3 components (1, 2 or 4)",
                 "cuTexRefSetAddress2D_v3: CUDA_ERROR_INVALID_VALUE: dptr ",
                 "cuParamSetTexRef: CUDA_ERROR_INVALID_VALUE: texunit 0 must be CU_PARAM_TR_DEFAULT (-1)",
                 "cuSurfRefSetArray: CUDA_ERROR_INVALID_VALUE: Flags 0x1 must be 0"):
        assert sum(ln.startswith("[zluda] " + line) for ln in r.stderr.splitlines()) == 1, (line, r.stderr[-3000:])


SURFREF = r"""
primary()
import numpy as np
ptx = (b".version 8.0\n.target sm_80\n.address_size 64\n.global .surfref s;\n"
       b".visible .entry k(.param .u32 base)\n{\n  .reg .u32 %r<8>;\n  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %tid.y;\n"
       b"  ld.param.u32 %r3, [base];\n  mad.lo.u32 %r3, %r2, 1000, %r3;\n  add.u32 %r3, %r3, %r1;\n"
       b"  shl.b32 %r4, %r1, 2;\n  sust.b.2d.b32.trap [s, {%r4, %r2}], {%r3};\n  ret;\n}\n")
mod, ref, fn, arr = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
ok(lib.cuModuleLoadData(P(mod), ptx), "load")
ok(lib.cuModuleGetSurfRef(P(ref), mod, b"s"), "cuModuleGetSurfRef")
ok(lib.cuModuleGetFunction(P(fn), mod, b"k"))
raw = bytes((ctypes.c_size_t * 3)(8, 4, 0)) + bytes((ctypes.c_uint32 * 3)(0x03, 1, 0x02))  # u32 x 1, SURFACE_LDST
ok(lib.cuArray3DCreate_v2(P(arr), raw), "array")
ok(lib.cuSurfRefSetArray(ref, arr, 0), "cuSurfRefSetArray")
base = ctypes.c_uint32(int(sys.argv[2]))
args = (ctypes.c_void_p * 1)(ctypes.cast(P(base), ctypes.c_void_p))
ok(lib.cuLaunchKernel(fn, 1, 1, 1, 8, 4, 1, 0, None, args, None), "launch")
got = np.zeros((4, 8), np.uint32)
ok(lib.cuMemcpyAtoH_v2(got.ctypes.data_as(ctypes.c_void_p), arr, ctypes.c_uint64(0), ctypes.c_uint64(got.nbytes)))
want = base.value + 1000 * np.arange(4)[:, None] + np.arange(8)[None, :]
assert (got == want).all(), got
print("done")
"""


def test_surface_reference_by_default(shim_libdir):
    """Surface references, which NVIDIA's CUDA 13 driver still loads, work without ZLUDA_TEXREF."""
    from chost import CTYPES_PRELUDE
    r = subprocess.run([sys.executable, "-c", CTYPES_PRELUDE + SURFREF, shim_libdir, str(random.randint(0, 10**6))],
                       env=user_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "done" in r.stdout, r.stdout + r.stderr[-3000:]


def test_references_refused_as_nvidia_by_default(host):
    """Without ZLUDA_TEXREF the module answers what NVIDIA's CUDA 13 driver answers, and says why even
    without ZLUDA_LOG."""
    r = subprocess.run([host, "1"], capture_output=True, text=True, timeout=600, env=user_env())
    assert "cuModuleLoadData(&mod, PTX) -> 801" in r.stdout, r.stdout + r.stderr
    assert "ZLUDA_TEXREF=1" in r.stderr and ".texref tex2" in r.stderr, r.stderr
