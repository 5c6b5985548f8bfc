"""zluda_py.ptxlink: PTX of several translation units (nvcc -rdc) merged into one module the compiler accepts."""

import os
import shutil
import subprocess

import pytest

from zluda_py.ptxlink import merge_ptx

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"

HEADER = "template <typename T> __device__ __noinline__ T sq(T x) { return x * x; }\n"
TU_A = HEADER + r"""
extern __device__ float cube(float x);
extern __device__ int table[4];
extern "C" __global__ void k(float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sq(y[i]) + cube(y[i]) + table[i % 4];
}
"""
TU_B = HEADER + r"""
__device__ int table[4] = {1, 2, 3, 4};
__device__ float cube(float x) { return sq(x) * x; }
"""


@pytest.mark.skipif(not os.path.exists(NVCC), reason="nvcc is not installed")
def test_merge_rdc_units(tmp_path):
    texts = []
    for name, src in (("a", TU_A), ("b", TU_B)):
        (tmp_path / f"{name}.cu").write_text(src)
        subprocess.run([NVCC, "-rdc=true", "-ptx", "-arch=compute_86", "-o", str(tmp_path / f"{name}.ptx"),
                        str(tmp_path / f"{name}.cu")], check=True, capture_output=True)
        texts.append((tmp_path / f"{name}.ptx").read_text())
    merged = merge_ptx(texts)
    assert merged.count(".version") == 1 and merged.count(".target") == 1
    assert ".extern" not in merged                           # every extern is defined by the other unit
    defs = [ln for ln in merged.splitlines() if ln.startswith(".weak .func") and "_Z2sqIfET_S0_(" in ln]
    assert len(defs) == 1                                    # the template instance kept once
    assert merge_ptx([texts[0]]) == texts[0]
    import ptx
    module = ptx.parse(merged)                               # one well-formed module
    assert [e.name for e in module.entries()] == ["k"]
