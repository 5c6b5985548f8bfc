"""A program built against NVIDIA's CUDA 13.5 runtime (the pip `nvidia-cuda-runtime` wheel), which needs the
21318c60 export table, runs through the shim: allocation, copies, a kernel launch and a synchronize."""

import glob
import json
import os
import random
import shutil
import subprocess
import sys
import zipfile

import pytest

from chost import user_env

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void axpb(const float *x, float *y, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __fadd_rn(__fmul_rn(a, x[i]), b);  /* no fma: the host checks with a separate rounding */
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]); float a = atof(argv[2]), b = atof(argv[3]);
    float *hx = (float *)malloc(n * 4), *hy = (float *)malloc(n * 4);
    srand(atoi(argv[4]));
    for (int i = 0; i < n; i++) { hx[i] = (float)rand() / RAND_MAX - 0.5f; hy[i] = -12345.0f; }
    float *x, *y;
    int rv = 0; cudaRuntimeGetVersion(&rv); printf("runtime %d\n", rv);
    printf("malloc %d %d\n", cudaMalloc(&x, n * 4), cudaMalloc(&y, n * 4));
    printf("poison %d\n", cudaMemcpy(y, hy, n * 4, cudaMemcpyHostToDevice));
    printf("copy %d\n", cudaMemcpy(x, hx, n * 4, cudaMemcpyHostToDevice));
    axpb<<<(n + 127) / 128, 128>>>(x, y, a, b, n);
    printf("launch %d\n", cudaGetLastError());
    printf("sync %d\n", cudaDeviceSynchronize());
    printf("back %d\n", cudaMemcpy(hy, y, n * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) { volatile float p = a * hx[i]; if (hy[i] != p + b) bad++; }
    printf("bad %d\n", bad);
    printf("free %d\n", cudaFree(x));
    return 0;
}
"""


def _cudart_13_5(tmp_path_factory):
    """The wheel's lib directory: installed beside this Python, else downloaded (skip when offline)."""
    for site in sys.path:
        for lib in glob.glob(os.path.join(site, "nvidia", "cu13", "lib", "libcudart.so.13")):
            return os.path.dirname(lib)
    where = tmp_path_factory.mktemp("cudart135")
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(where),
                        "nvidia-cuda-runtime>=13.4,<14"], capture_output=True, text=True, timeout=300)
    wheels = glob.glob(str(where / "nvidia_cuda_runtime-*.whl"))
    if r.returncode or not wheels:
        pytest.skip(f"the nvidia-cuda-runtime 13.4+ wheel is not installable here: {r.stderr.strip()[-200:]}")
    zipfile.ZipFile(wheels[0]).extractall(where / "wheel")
    return str(where / "wheel" / "nvidia" / "cu13" / "lib")


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.isfile(nvcc):
        pytest.skip("nvcc not installed")
    lib = _cudart_13_5(tmp_path_factory)
    d = tmp_path_factory.mktemp("axpb")
    (d / "axpb.cu").write_text(PROGRAM)
    exe = d / "axpb"
    subprocess.run([nvcc, "-arch=compute_86", "-code=compute_86", "-cudart", "shared", str(d / "axpb.cu"),
                    "-o", str(exe), f"-L{lib}", f"-Xlinker=-rpath={lib}"], check=True, timeout=600)
    return str(exe)


def test_runtime_13_5_program_runs(shim_libdir, program):
    n, a, b, seed = random.randint(300, 5000), random.uniform(-4, 4), random.uniform(-4, 4), random.randint(1, 10**6)
    r = subprocess.run([program, str(n), repr(a), repr(b), str(seed)], capture_output=True, text=True, timeout=600,
                       env=user_env(LD_LIBRARY_PATH=shim_libdir, ZLUDA_LOG="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert int(lines["runtime"]) >= 13040, lines
    for key in ("malloc", "poison", "copy", "launch", "sync", "back", "free"):
        assert set(lines[key].split()) == {"0"}, (key, r.stdout, r.stderr)
    assert lines["bad"] == "0"
    assert "21318c60" not in r.stderr


def test_21318c60_table_shape_matches_nvidia(shim_libdir):
    """Same size slot and NULL slots as NVIDIA's: cudart reads slots by index."""
    import ctypes
    nvidia = json.load(open(os.path.join(DATA, "nvidia_export_tables_13.json")))["tables"]
    lib = ctypes.CDLL(os.path.join(shim_libdir, "libcuda.so.1"))
    assert lib.cuInit(0) == 0
    want = nvidia["21318c60971432488ca641ff7324c8f2"]
    table = ctypes.c_void_p()
    assert lib.cuGetExportTable(ctypes.byref(table), bytes.fromhex("21318c60971432488ca641ff7324c8f2")) == 0
    slots = (ctypes.c_uint64 * (want["size_slot"] // 8)).from_address(table.value)
    assert slots[0] == want["size_slot"]
    assert [i for i in range(1, len(slots)) if slots[i] == 0] == want["null_slots"]


def test_tools_state_slots_cublaslt_calls(shim_libdir):
    """cuBLASLt 13 calls TOOLS_TLS[2](&tls) then 21318c60[4](tls, &x) before each call and gives up with
    CUBLAS_STATUS_NOT_SUPPORTED if either fails: both succeed, tls is the calling thread's own block."""
    import ctypes
    import threading
    lib = ctypes.CDLL(os.path.join(shim_libdir, "libcuda.so.1"))
    assert lib.cuInit(0) == 0

    def slot(hexid, index, *argtypes):
        table = ctypes.c_void_p()
        assert lib.cuGetExportTable(ctypes.byref(table), bytes.fromhex(hexid)) == 0
        addr = ctypes.c_uint64.from_address(table.value + 8 * index).value
        return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(addr)

    get_tls = slot("42d85a8123f6cb478298f6e78a3aecdc", 2, ctypes.c_void_p)
    get_x = slot("21318c60971432488ca641ff7324c8f2", 4, ctypes.c_void_p, ctypes.c_void_p)
    seen = []

    def ask():
        tls, x = ctypes.c_void_p(), ctypes.c_uint64(random.getrandbits(64) | 1)
        assert get_tls(ctypes.addressof(tls)) == 0 and tls.value
        assert get_x(tls.value, ctypes.addressof(x)) == 0 and x.value == 0
        seen.append(tls.value)

    ask()
    t = threading.Thread(target=ask)
    t.start()
    t.join()
    ask()
    assert seen[0] == seen[2] != seen[1]
    assert get_tls(None) == 1
