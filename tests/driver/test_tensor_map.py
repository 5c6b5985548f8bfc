"""Tensor maps and graph memory nodes against NVIDIA's driver: scripts/nvidia_tma_probe.cu, built with nvcc
and run unchanged through the real libcuda.so.1, answers what an H200 answered (tests/data/
nvidia_tma_answers.json) for every cuTensorMapEncode*/cuTensorMapReplaceAddress case and every graph memory
case, and its one hardware-checked bulk tensor copy holds the same bytes. The maps the driver writes are
ptx/tensor_map.py's layout, and a refused argument logs one line naming it."""

import json
import os
import shutil
import subprocess

import pytest

from chost import run_py, user_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSWERS = os.path.join(ROOT, "tests", "data", "nvidia_tma_answers.json")
INVALID_VALUE = 1


@pytest.fixture(scope="module")
def probe_output(shim_libdir, tmp_path_factory):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    exe = str(tmp_path_factory.mktemp("tma") / "probe")
    subprocess.run([nvcc, "-arch=compute_90", "-o", exe, os.path.join(ROOT, "scripts", "nvidia_tma_probe.cu"),
                    "-ldl"], check=True, capture_output=True, timeout=600)
    env = user_env(ZLUDA_CC="9.0", LD_LIBRARY_PATH=shim_libdir)
    r = subprocess.run([exe], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("section", ["before_context", "encode", "graph"])
def test_answers_match_nvidia(probe_output, section):
    theirs = json.load(open(ANSWERS))[section]
    ours = probe_output[section]
    assert set(ours) == set(theirs)
    # where NVIDIA's driver crashes (it reads through a NULL it was given) ours answers INVALID_VALUE
    want = {k: INVALID_VALUE if v == "crash" else v for k, v in theirs.items()}
    diff = {k: (want[k], ours[k]) for k in want if ours[k] != want[k]}
    assert not diff, f"(NVIDIA, ours): {diff}"


def test_bulk_tensor_copies(probe_output):
    theirs = json.load(open(ANSWERS))["tma"]
    ours = probe_output["tma"]
    assert set(ours) == set(theirs)
    checked = [k for k, v in theirs.items() if v.get("launch") == 0 and v.get("complete") == 1]
    assert checked == ["tile_2d_f32_inside"]
    for k in checked:
        assert ours[k] == theirs[k], k
    for k, v in ours.items():       # every copy completes its barrier with exactly the box's bytes
        assert v["encode"] == 0 and v["launch"] == 0 and v.get("complete", 1) == 1, (k, v)


def test_encoded_maps_are_the_layout(shim_libdir):
    code = """
    import struct
    primary()
    buf = ctypes.create_string_buffer(256)
    base = (ctypes.addressof(buf) + 63) // 64 * 64
    m = ctypes.c_void_p(base)
    dev = ctypes.c_uint64()
    ok(lib.cuMemAlloc_v2(P(dev), 1 << 20))
    U64, U32 = ctypes.c_uint64, ctypes.c_uint32
    dims = (U64 * 3)(40, 7, 5); strides = (U64 * 2)(192, 192 * 7); box = (U32 * 3)(8, 4, 3)
    es = (U32 * 3)(3, 2, 2)
    ok(lib.cuTensorMapEncodeTiled(m, 9, 3, ctypes.c_void_p(dev.value), dims, strides, box, es, 0, 1, 2, 1))
    print("tiled", ctypes.string_at(base, 128).hex())
    d4 = (U64 * 4)(16, 10, 9, 3); s4 = (U64 * 3)(64, 640, 5760)
    lower = (ctypes.c_int * 2)(-1, -2); upper = (ctypes.c_int * 2)(0, -1); es4 = (U32 * 4)(1, 2, 1, 1)
    ok(lib.cuTensorMapEncodeIm2col(m, 7, 4, ctypes.c_void_p(dev.value), d4, s4, lower, upper, 8, 48, es4, 0, 0, 0, 0))
    print("im2col", ctypes.string_at(base, 128).hex())
    ok(lib.cuTensorMapReplaceAddress(m, ctypes.c_void_p(dev.value + 4096)))
    print("replaced", ctypes.string_at(base, 128).hex())
    box[1] = 257
    print("bad", lib.cuTensorMapEncodeTiled(m, 9, 3, ctypes.c_void_p(dev.value), dims, strides, box, es, 0, 0, 0, 0))
    print("dev", dev.value)
    """
    r = run_py(shim_libdir, code, ZLUDA_LOG="1")
    assert r.returncode == 0, r.stdout + r.stderr
    out = dict(line.split(" ", 1) for line in r.stdout.split("\n") if line)
    from ptx import tensor_map as TM
    dev = int(out["dev"])
    tiled = TM.pack(addr=dev, dims=[40, 7, 5, 1, 1], strides=[2, 192, 1344, 0, 0], fill=0x7FFF,
                    counts=[8, 2, 2, 1, 1], estrides=[1, 2, 2, 1, 1], rank=3, elem=2, swizzle=1,
                    mode=TM.MODE_TILE, interleave=0)
    assert out["tiled"] == tiled.hex()
    # channels, W, H, (no D), N; W positions -1..9 every 2nd: 6, H positions -2..7: 10
    im2col = TM.pack(addr=dev, dims=[16, 10, 9, 1, 3], strides=[4, 64, 640, 0, 5760], fill=0,
                     counts=[8, 6, 10, 1, 0], estrides=[1, 2, 1, 1, 1], rank=4, elem=4, swizzle=0,
                     mode=TM.MODE_IM2COL, interleave=0, lower=[-1, -2, 0], pixels=48)
    assert out["im2col"] == im2col.hex()
    assert out["replaced"] == TM.replace_address(im2col, dev + 4096).hex()
    assert out["bad"] == str(INVALID_VALUE)
    assert "cuTensorMapEncodeTiled: CUDA_ERROR_INVALID_VALUE: boxDim[1] = 257" in r.stderr
