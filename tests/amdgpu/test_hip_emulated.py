"""nvcc samples through `zluda-py run --backend hip`: the real driver and HIP backend over tests/amdgpu/
hip_double (hip-python's calls, recorded), kernels executed by the RDNA3 emulator. Emulated, not hardware."""

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import need_linker

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = Path(__file__).resolve().parent / "hip_double"


def _need_emulator():
    from ptx import amdgpu_emulator
    why = amdgpu_emulator.available()
    if why:
        pytest.skip(f"no AMD GPU emulator: {why}")
    need_linker()


def _env(tmp_path):
    lib = tmp_path / "libamdhip64.so"
    # the backend's ZLUDA_HIP_LIB check wants a file; hip_double loads no library, so this names it
    lib.write_text("not a library: tests/amdgpu/hip_double answers the HIP calls\n")
    log = tmp_path / "hip_calls.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(DOUBLE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
               ZLUDA_HIP_LIB=str(lib), ZLUDA_HIP_DOUBLE_LOG=str(log), ZLUDA_LOG="1",
               # compile afresh (well under a second a module): the test needs no shared kernel cache
               ZLUDA_JIT_CACHE="0")
    env.pop("ZLUDA_BACKEND", None)
    return env, log


def _calls(log):
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


def _run(built_samples, tmp_path, name):
    """(stdout, recorded calls) of samples/build/ptx/<name> under `zluda-py run --backend hip`; it must PASS."""
    _need_emulator()
    env, log = _env(tmp_path)
    prog = built_samples / "ptx" / name
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--backend", "hip", "--", str(prog)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "PASS", out[-4000:]
    return r.stdout, _calls(log)


def run_sample(built_samples, tmp_path, name):
    _, calls = _run(built_samples, tmp_path, name)
    faults = [c for c in calls if c["call"] == "device-fault"]
    assert not faults, faults
    launches = [c for c in calls if c["call"] == "hipModuleLaunchKernel"]
    details = [c for c in calls if c["call"] == "hipModuleLaunchKernel.args"]
    ran = [c for c in calls if c["call"] == "emulator.launch_raw"]
    assert launches and all(c["ret"] == "hipSuccess" for c in launches), launches
    # every launch went to the emulator, through HIP's `extra` array holding the packed parameters
    assert len(ran) == len(launches) == len(details)
    assert all(d["via"] == "extra" and d["extra_size"] >= len(d["params"]) // 2 for d in details), details
    assert [c["args"][0] for c in ran] == [d["kernel"] for d in details]
    return calls, details


def _kernels(details):
    return {d["kernel"] for d in details}


def test_vector_add(built_samples, tmp_path):
    calls, details = run_sample(built_samples, tmp_path, "vector_add")
    assert _kernels(details) == {"_Z10vector_addPKfS0_Pfi"}
    assert [(d["grid"], d["block"]) for d in details] == [([1024, 1, 1], [256, 1, 1]), ([37, 1, 1], [128, 1, 1])]
    names = [c["call"] for c in calls]
    assert {"hipMalloc", "hipMemcpyAsync", "hipModuleLoadData", "hipModuleGetFunction", "hipFree"} <= set(names)
    # the device the program saw came from the double's gfx1100
    assert any(c["call"] == "hipGetDeviceProperties" for c in calls)


def test_reduce_shared(built_samples, tmp_path):
    _, details = run_sample(built_samples, tmp_path, "reduce_shared")
    assert len(_kernels(details)) == 3            # reduce_sum<256>, reduce_sum<64> (empty input), reduce_max
    assert any(d["shared"] == 512 * 4 for d in details), "reduce_max's dynamic shared memory"


def test_reduce_warp_shuffle(built_samples, tmp_path):
    _, details = run_sample(built_samples, tmp_path, "reduce_warp_shuffle")
    assert {k.split("P")[0] for k in _kernels(details)} == {"_Z16block_sum_atomic", "_Z8warp_ops"}


def test_atomics(built_samples, tmp_path):
    run_sample(built_samples, tmp_path, "atomics")


def test_symbols_module_globals(built_samples, tmp_path):
    calls, _ = run_sample(built_samples, tmp_path, "symbols")
    found = {c["args"][1] for c in calls if c["call"] == "hipModuleGetGlobal" and c["ret"] == "hipSuccess"}
    assert {"c_coef", "c_params", "d_counter"} <= found, found


def test_streams_events(built_samples, tmp_path):
    calls, details = run_sample(built_samples, tmp_path, "streams_events")
    ok = {c["call"] for c in calls if c.get("ret") == "hipSuccess"}
    assert {"hipStreamCreateWithPriority", "hipEventRecord", "hipStreamWaitEvent", "hipEventElapsedTime",
            "hipEventSynchronize", "hipStreamQuery"} <= ok, ok
    assert len({c["args"][0] for c in calls if c["call"] == "hipEventRecord"}) > 1
    streams = {c["args"][8] for c in calls if c["call"] == "hipModuleLaunchKernel"}
    assert len(streams) >= 4, streams                  # the pipeline's four streams


@pytest.mark.parametrize("name", ["device_info", "error_paths"])
def test_cuda_limits_over_hip(built_samples, tmp_path, name):
    """CUDA's fixed limits hold though HIP's are larger (a block z of 128 must fail, 48 KiB default shared,
    64 KiB constant memory): the attributes come from hipDeviceGetAttribute, capped at CUDA's."""
    _, calls = _run(built_samples, tmp_path, name)
    assert any(c["call"] == "hipDeviceGetAttribute" for c in calls)


BACKEND_PATHS = textwrap.dedent(r"""
    import ctypes, json, struct
    import ptx
    from zluda_py.backends.hip import HipBackend
    from hip import hip
    text = '''.version 8.0
    .target sm_86
    .address_size 64
    .visible .global .align 4 .u32 g_flag = 7;
    .visible .entry fill(.param .u64 out, .param .u32 v)
    {
    .reg .u32 %r<4>; .reg .u64 %rd<4>;
    ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [v]; mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4; add.u64 %rd3, %rd1, %rd2;
    ld.global.u32 %r3, [g_flag]; add.u32 %r1, %r1, %r3; st.global.u32 [%rd3], %r1;
    ret;
    }'''
    ok, why = HipBackend.probe()
    b = HipBackend()
    out = {"probe": ok, "uuid": b.devices()[0].uuid.hex(), "name": b.devices()[0].name}
    s = b.stream_create(0)
    d = b.mem_alloc(0, 4096)
    s.memset(d, 0xDEADBEEF, 4, 64)
    s.memset(d + 256, 0xBEEF, 2, 8)
    h = ctypes.create_string_buffer(4096)
    s.copy(ctypes.addressof(h), d, 512)
    s.synchronize()
    out["d32"] = h.raw[:8].hex(); out["d16"] = h.raw[256:260].hex()
    src = bytes(range(64))
    srcbuf = ctypes.create_string_buffer(src, 64)
    s.copy_2d(d + 1024, 32, ctypes.addressof(srcbuf), 16, 8, 4)
    s.copy(ctypes.addressof(h), d + 1024, 128)
    s.synchronize()
    out["2d"] = [h.raw[32 * r:32 * r + 8].hex() for r in range(4)]
    m = b.module_load(0, text, "t")
    addr, size = m.global_symbol("g_flag")
    out["global"] = [size, struct.unpack("<I", ctypes.string_at(addr, 4))[0]]
    out["missing_global"] = m.global_symbol("nope")
    f = m.functions()["fill"]
    e0, e1 = b.event_create(0), b.event_create(0)
    s.record(e0)
    params = struct.pack("<QI", d + 2048, 100).ljust(f.info.param_size, b"\0")
    s.launch(f, (1, 1, 1), (32, 1, 1), 0, params)
    s.launch(f, (1, 1, 1), (32, 1, 1), 0, struct.pack("<QI", d + 2304, 5).ljust(f.info.param_size, b"\0"),
             cooperative=True)
    s.record(e1)
    e1.synchronize()
    out["elapsed_ok"] = e1.elapsed_ms(e0) >= 0 and e0.query() and e1.query()
    s.copy(ctypes.addressof(h), d + 2048, 512)
    s.synchronize()
    out["fill"] = sorted(set(struct.unpack("<32I", h.raw[:128])))
    out["coop"] = sorted(set(struct.unpack("<32I", h.raw[256:384])))
    out["mem_info"] = list(b.mem_info(0))
    m.unload(); b.mem_free(d); s.destroy()
    print(json.dumps(out))
""")


def test_backend_paths_the_samples_miss(tmp_path):
    """memsets of every width (a D32 pattern >= 2**31), 2-D copies, module globals, kernelParams
    (the cooperative launch), events -- on the backend object, without the shim."""
    _need_emulator()
    env, log = _env(tmp_path)
    r = subprocess.run([sys.executable, "-c", BACKEND_PATHS], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["probe"] and out["name"].endswith("[ZLUDA]")
    assert out["uuid"] == "5a4c554441000044f00d2024aabbccdd"      # all 16 bytes, past the zero byte
    assert out["d32"] == "efbeaddeefbeadde" and out["d16"] == "efbeefbe"
    assert out["2d"] == [bytes(range(16 * r, 16 * r + 8)).hex() for r in range(4)]
    assert out["global"] == [4, 7] and out["missing_global"] is None
    assert out["fill"] == [107] and out["coop"] == [12] and out["elapsed_ok"]
    calls = _calls(log)
    coop = [c for c in calls if c["call"] == "hipModuleLaunchCooperativeKernel.args"]
    assert len(coop) == 1 and coop[0]["via"] == "kernelParams"
    assert out["mem_info"][1] - out["mem_info"][0] == 4096


def test_double_matches_hip_python():
    """The double's signatures, enum numbers and return arity are hip-python's (the installed one)."""
    real = pytest.importorskip("hip.hip", reason="hip-python not installed")
    probe = textwrap.dedent("""
        import inspect, json
        from hip import hip
        names = [n for n in dir(hip) if n.startswith("hip") and callable(getattr(hip, n))
                 and not isinstance(getattr(hip, n), type)]
        print(json.dumps({"sigs": {n: list(inspect.signature(getattr(hip, n)).parameters) for n in names},
                          "errors": {e.name: int(e) for e in hip.hipError_t},
                          "kinds": {e.name: int(e) for e in hip.hipMemcpyKind},
                          "attrs": {e.name: int(e) for e in hip.hipDeviceAttribute_t}}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(DOUBLE), str(ROOT)]))
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    dbl = json.loads(r.stdout)
    used = set(_backend_calls())
    assert used <= set(dbl["sigs"]), used - set(dbl["sigs"])
    for n in sorted(dbl["sigs"]):
        assert dbl["sigs"][n] == list(inspect.signature(getattr(real, n)).parameters), n
    for group, enum in (("errors", real.hipError_t), ("kinds", real.hipMemcpyKind),
                        ("attrs", real.hipDeviceAttribute_t)):
        for name, value in dbl[group].items():
            assert int(getattr(enum, name)) == value, name


def _backend_calls():
    import re
    text = "".join(p.read_text() for p in (ROOT / "zluda_py" / "backends" / "hip").glob("*.py"))
    return set(re.findall(r"hip\.(hip[A-Z]\w+)\b", text)) - {"hipDeviceAttribute_t", "hipDeviceProp_t",
                                                              "hipMemcpyKind"}


def test_texture_surface(built_samples, tmp_path):
    """CUDA arrays, texture and surface objects over HIP: the descriptors in managed memory, the kernels'
    fetches and surface stores through the texture runtime linked into their code object."""
    calls, details = run_sample(built_samples, tmp_path, "texture_surface")
    assert any(c["call"] == "hipMallocManaged" for c in calls), sorted({c["call"] for c in calls})


def test_texture_references(shim_libdir, tmp_path):
    """Legacy texture and surface references over HIP (ZLUDA_TEXREF=1, tests/driver/texref_host.c): each
    reference's variable in the code object written through HIP, its descriptors in managed memory, the fetches
    and surface stores through the texture runtime linked into the code object."""
    import shutil
    _need_emulator()
    cuda_h = "/usr/local/cuda/include"
    if shutil.which("gcc") is None or not os.path.isfile(os.path.join(cuda_h, "cuda.h")):
        pytest.skip("needs gcc and cuda.h")
    exe = tmp_path / "texref_host"
    subprocess.run(["gcc", "-O1", "-I", cuda_h, str(ROOT / "tests" / "driver" / "texref_host.c"), "-o", str(exe),
                    "-L", shim_libdir, "-lcuda", "-lm", f"-Wl,-rpath,{shim_libdir}"], check=True)
    env, log = _env(tmp_path)
    env["ZLUDA_TEXREF"] = "1"
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--backend", "hip", "--", str(exe), "5"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok 0"), (r.stdout + r.stderr)[-4000:]
    calls = _calls(log)
    bound = {c["args"][1] for c in calls if c["call"] == "hipModuleGetGlobal" and c["ret"] == "hipSuccess"}
    assert {"tex2", "tex1", "surf"} <= bound, bound
    assert any(c["call"] == "hipMallocManaged" for c in calls)
    assert sum(c["call"] == "emulator.launch_raw" for c in calls) >= 8
