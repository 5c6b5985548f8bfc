"""An unmodified nvcc-built program through libcuda.so.1 whose blocks' threads exit between barriers: the
barrier kernel's general-scheduler fallback is compiled on first use, from the CPU backend's launch
queue (a native thread without the GIL), inside an asynchronous launch on a stream, and gives exact
results; the blocks that need no fallback and a second process on the warm kernel cache do too."""

import os
import random
import shutil
import subprocess

import pytest

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
pytestmark = pytest.mark.skipif(not os.path.exists(NVCC), reason="nvcc (CUDA toolkit) is not installed")

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

// Threads t >= live[blockIdx.x] leave before the barriers: those blocks' threads disagree on the next
// region (the fallback finishes them); blocks with live == blockDim.x stay on the region loops.
extern "C" __global__ void staged(const int *in, const int *live, int *out, int rounds) {
    __shared__ int s[256];
    unsigned t = threadIdx.x, n = blockDim.x;
    int v = in[blockIdx.x * n + t] * 3 + (int)t;
    s[t] = v;
    __syncthreads();
    int w = s[(t + 1) % n];
    if ((int)t >= live[blockIdx.x]) { out[blockIdx.x * n + t] = -w; return; }
    for (int r = 0; r < rounds; r++) {
        __syncthreads();
        s[t] = w + r;
        __syncthreads();
        w = s[(t + 5) % live[blockIdx.x]] * 2 + r;
    }
    out[blockIdx.x * n + t] = w;
}

int main(int argc, char **argv) {
    const int nb = 48, n = 128, rounds = 3;
    srand(argc > 1 ? atoi(argv[1]) : 1);
    int *in = (int *)malloc(nb * n * 4), *live = (int *)malloc(nb * 4), *out = (int *)malloc(nb * n * 4);
    int *ref = (int *)malloc(nb * n * 4);
    for (int i = 0; i < nb * n; i++) in[i] = rand() % 1000 - 500;
    for (int b = 0; b < nb; b++) live[b] = b % 3 == 0 ? n : 1 + rand() % n;
    for (int b = 0; b < nb; b++) {
        int s[n], w[n];
        for (int t = 0; t < n; t++) s[t] = in[b * n + t] * 3 + t;
        for (int t = 0; t < n; t++) w[t] = s[(t + 1) % n];
        int L = live[b];
        for (int t = L; t < n; t++) ref[b * n + t] = -w[t];
        for (int r = 0; r < rounds; r++) {
            for (int t = 0; t < L; t++) s[t] = w[t] + r;
            for (int t = 0; t < L; t++) w[t] = s[(t + 5) % L] * 2 + r;
        }
        for (int t = 0; t < L; t++) ref[b * n + t] = w[t];
    }
    int *din, *dlive, *dout;
    cudaStream_t st;
    cudaStreamCreate(&st);
    cudaMalloc(&din, nb * n * 4); cudaMalloc(&dlive, nb * 4); cudaMalloc(&dout, nb * n * 4);
    cudaMemcpy(din, in, nb * n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dlive, live, nb * 4, cudaMemcpyHostToDevice);
    for (int rep = 0; rep < 2; rep++) {
        cudaMemset(dout, 0x5a, nb * n * 4);
        staged<<<nb, n, 0, st>>>(din, dlive, dout, rounds);
        cudaError_t e = cudaStreamSynchronize(st);
        if (e != cudaSuccess) { printf("FAIL launch: %s\n", cudaGetErrorString(e)); return 1; }
        cudaMemcpy(out, dout, nb * n * 4, cudaMemcpyDeviceToHost);
        for (int i = 0; i < nb * n; i++)
            if (out[i] != ref[i]) { printf("FAIL rep %d at %d: %d != %d\n", rep, i, out[i], ref[i]); return 1; }
    }
    printf("PASS staged\n");
    return 0;
}
"""


def test_fallback_compiled_inside_an_async_launch(shim_libdir, tmp_path):
    (tmp_path / "staged.cu").write_text(PROGRAM)
    exe = tmp_path / "staged"
    subprocess.run([NVCC, "-arch=sm_86", "-o", str(exe), str(tmp_path / "staged.cu")], check=True,
                   capture_output=True)
    env = dict(os.environ, LD_LIBRARY_PATH=shim_libdir, ZLUDA_BACKEND="cpu",
               ZLUDA_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(2):          # cold, then the main object from the kernel cache
        p = subprocess.run([str(exe), str(random.randrange(1 << 30))], capture_output=True, text=True,
                           env=env, timeout=300)
        assert p.returncode == 0 and p.stdout.strip() == "PASS staged", p.stdout + p.stderr
    assert any((tmp_path / "cache").iterdir())
