"""Near-miss PTX, JIT options and cuLink inputs through the built libcuda.so.1, from C: the same probe
(scripts/nvidia_ptx_probe.c) that gave NVIDIA's answers on an H200 (tests/data/nvidia_ptx_answers.json) runs
on the shim with ZLUDA_CC=9.0, and each code, log line and log size must agree with NVIDIA's."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import near_miss
from test_exports import clean_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSWERS = json.load(open(os.path.join(near_miss.DATA, "nvidia_ptx_answers.json")))
# NVIDIA's 13.0 driver stops at ISA 9.0; the CUDA 13.5 toolchains numba-cuda and cuda.core use emit 9.5.
ISA_CEILING = {"version_9_1": 0}
_LINE = re.compile(r"ptxas application ptx input, line (\d+);")

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


@pytest.fixture(scope="module")
def shim_answers(shim_libdir, tmp_path_factory):
    d = tmp_path_factory.mktemp("near_miss")
    exe = d / "probe"
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-o", str(exe),
                    os.path.join(REPO, "scripts", "nvidia_ptx_probe.c"), "-ldl"], check=True)
    near_miss.write_cases(str(d / "cases"))
    # the H200's compute capability, so .target sm_90a loads and sm_100 does not, as there
    env = clean_env(LD_LIBRARY_PATH=shim_libdir, ZLUDA_CC=ANSWERS["compute_capability"])
    proc = subprocess.run([str(exe), str(d / "cases")], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("name", near_miss.names())
def test_module_load_answers_like_nvidia(shim_answers, name):
    nvidia, ours = ANSWERS["cases"][name], shim_answers["cases"][name]
    assert ours["code"] == ISA_CEILING.get(name, nvidia["code"]), ours
    log = ours["error_log"]
    if ours["code"] == 0:
        assert log == "" and ours["error_size_out"] == 0
        assert ours["info_log"].startswith("ptxas info    : 0 bytes gmem\n")     # CU_JIT_LOG_VERBOSE
        assert ours["info_size_out"] == len(ours["info_log"]) + 1
        return
    assert log.startswith("ptxas ") and ours["error_size_out"] == len(log.encode()) + 1, ours
    want = _LINE.match(nvidia["error_log"])
    if want:    # the line ptxas names first (target/32-bit/shared errors name none there)
        assert _LINE.match(log) and _LINE.match(log).group(1) == want.group(1), (log, nvidia["error_log"])
    assert re.search(r"'[^']+'", log), log      # and the token


@pytest.mark.parametrize("case", list(ANSWERS["options"]))
def test_jit_options_like_nvidia(shim_answers, case):
    nvidia, ours = ANSWERS["options"][case], shim_answers["options"][case]
    assert ours["code"] == nvidia["code"], ours
    if "error_log" in nvidia:
        assert ours["error_size_out"] == nvidia["error_size_out"] if case == "bad_error_log_16_bytes" else True
        assert (ours["error_log"] == "") == (nvidia["error_log"] == "")
        assert ours["info_log"] == nvidia["info_log"] == ""          # nothing without CU_JIT_LOG_VERBOSE
        assert ours["info_size_out"] == nvidia["info_size_out"] == 0
    if case == "bad_error_log_16_bytes":
        assert ours["error_log"] == nvidia["error_log"] == "ptxas applicati"


@pytest.mark.parametrize("case", list(ANSWERS["link"]))
def test_link_like_nvidia(shim_answers, case):
    nvidia, ours = ANSWERS["link"][case], shim_answers["link"][case]
    assert ours["code"] == nvidia["code"], ours
    if case in ("add_ld_parma", "add_version_9_9"):     # refused at cuLinkAddData, with the log
        assert _LINE.match(ours["error_log"]).group(1) == _LINE.match(nvidia["error_log"]).group(1)


ELECT_ANSWERS = json.load(open(os.path.join(near_miss.DATA, "nvidia_elect_answers.json")))
SM86_HEAD = (".version 8.0\n.target sm_86\n.address_size 64\n.visible .entry k(.param .u64 a)\n{\n"
             " .reg .b32 %r<4>;\n .reg .b64 %rd<4>;\n .reg .pred %p<2>;\n")


@pytest.mark.parametrize("case", ELECT_ANSWERS["sm86"], ids=lambda c: c["body"].split()[0])
def test_newer_instructions_below_their_target_like_nvidia(shim_libdir, case):
    """An sm_90 instruction in a .target sm_86 module: 218 and ptxas's first error line, as the H200
    answered (scripts/nvidia_elect_probe.cu); the H200 loads the others, and so do we (they are compiled,
    or refused as not implemented, at their kernel's first launch)."""
    src = SM86_HEAD + " " + case["body"] + " ret;\n}\n"
    code = (r"import ctypes, sys" "\n"
            r"lib = ctypes.CDLL(sys.argv[1] + '/libcuda.so.1'); P = ctypes.byref" "\n"
            r"assert lib.cuInit(0) == 0; ctx = ctypes.c_void_p()" "\n"
            r"assert lib.cuDevicePrimaryCtxRetain(P(ctx), 0) == 0 and lib.cuCtxSetCurrent(ctx) == 0" "\n"
            r"log = ctypes.create_string_buffer(2048); m = ctypes.c_void_p()" "\n"
            r"opts = (ctypes.c_int * 2)(5, 6); vals = (ctypes.c_void_p * 2)(ctypes.addressof(log), 2048)" "\n"
            r"r = lib.cuModuleLoadDataEx(P(m), ctypes.c_char_p(sys.stdin.buffer.read()), 2, opts, vals)" "\n"
            r"print(r); print(log.value.decode().replace('\n', ' ').strip())" "\n")
    env = clean_env(ZLUDA_CC="9.0")
    p = subprocess.run([sys.executable, "-c", code, shim_libdir], input=src.encode(), capture_output=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    rc, log = p.stdout.decode().split("\n", 1)
    assert int(rc) == case["code"], log
    if case["code"]:
        first = case["error_log"].split(" ptxas ")[0]
        assert log.strip().startswith(first), (log, first)
