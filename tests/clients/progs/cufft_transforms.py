"""NVIDIA's cuFFT (the nvidia-cufft wheel) through the shim: 1D, 2D and 3D plans, complex-to-complex both
ways, real-to-complex and complex-to-real, single and double precision, batched, each on fresh random data
in poisoned output buffers and checked element for element against numpy.fft. Prints PASS/FAIL lines.
Usage: cufft_transforms.py SEED"""

import ctypes
import glob
import os
import sys
import sysconfig

import numpy as np

rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else None)


def load(name):
    for d in glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "lib")):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return ctypes.CDLL(p)
    return ctypes.CDLL(name)


cu = ctypes.CDLL("libcuda.so.1")
fft = load("libcufft.so.12")
P = ctypes.byref
failures = 0
R2C, C2R, C2C, D2Z, Z2D, Z2Z = 0x2A, 0x2C, 0x29, 0x6A, 0x6C, 0x69
FORWARD, INVERSE = -1, 1


def ok(r, what):
    if r != 0:
        raise SystemExit(f"FAIL {what} -> {r}")


ok(cu.cuInit(0), "cuInit")
ctx = ctypes.c_void_p()
ok(cu.cuDevicePrimaryCtxRetain(P(ctx), 0), "retain")
ok(cu.cuCtxSetCurrent(ctx), "set current")


def device(arr):
    d = ctypes.c_uint64()
    ok(cu.cuMemAlloc_v2(P(d), ctypes.c_size_t(max(arr.nbytes, 1))), "alloc")
    ok(cu.cuMemcpyHtoD_v2(d, arr.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(arr.nbytes)), "upload")
    return d


def back(d, like):
    out = np.empty_like(like)
    ok(cu.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), d, ctypes.c_size_t(out.nbytes)), "download")
    return out


def poison(shape, dtype):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.frombuffer(rng.integers(0, 256, n, dtype=np.uint8).tobytes(), dtype=dtype).reshape(shape).copy()


def plan_many(dims, kind, batch):
    p = ctypes.c_int()
    n = (ctypes.c_int * len(dims))(*dims)
    ok(fft.cufftPlanMany(P(p), len(dims), n, None, 1, 0, None, 1, 0, kind, batch), f"plan {dims} {kind:#x}")
    return p


def run(name, dims, batch, kind, double):
    cplx = np.complex128 if double else np.complex64
    real = np.float64 if double else np.float32
    shape = (batch, *dims)
    if kind in (C2C, Z2Z):
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(cplx)
        y = poison(shape, cplx)
    elif kind in (R2C, D2Z):
        x = rng.standard_normal(shape).astype(real)
        y = poison((*shape[:-1], shape[-1] // 2 + 1), cplx)
    else:   # C2R / Z2D: a Hermitian input, the spectrum of a real signal
        sig = rng.standard_normal(shape)
        x = np.fft.rfftn(sig, axes=tuple(range(1, len(shape)))).astype(cplx)
        y = poison(shape, real)
    p = plan_many(dims, kind, batch)
    dx, dy = device(x), device(y)
    results = {}
    directions = (FORWARD, INVERSE) if kind in (C2C, Z2Z) else (None,)
    axes = tuple(range(1, len(shape)))
    for direction in directions:
        ok(cu.cuMemcpyHtoD_v2(dy, y.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(y.nbytes)), "poison")
        if kind == C2C:
            ok(fft.cufftExecC2C(p, ctypes.c_void_p(dx.value), ctypes.c_void_p(dy.value), direction), "exec")
        elif kind == Z2Z:
            ok(fft.cufftExecZ2Z(p, ctypes.c_void_p(dx.value), ctypes.c_void_p(dy.value), direction), "exec")
        elif kind == R2C:
            ok(fft.cufftExecR2C(p, ctypes.c_void_p(dx.value), ctypes.c_void_p(dy.value)), "exec")
        elif kind == D2Z:
            ok(fft.cufftExecD2Z(p, ctypes.c_void_p(dx.value), ctypes.c_void_p(dy.value)), "exec")
        elif kind == C2R:
            ok(fft.cufftExecC2R(p, ctypes.c_void_p(dx.value), ctypes.c_void_p(dy.value)), "exec")
        else:
            ok(fft.cufftExecZ2D(p, ctypes.c_void_p(dx.value), ctypes.c_void_p(dy.value)), "exec")
        ok(cu.cuCtxSynchronize(), "sync")
        got = back(dy, y)
        if kind in (C2C, Z2Z):
            # cuFFT's inverse is unnormalised: n times numpy's ifftn
            want = np.fft.fftn(x, axes=axes) if direction == FORWARD else \
                np.fft.ifftn(x, axes=axes) * np.prod(dims)
        elif kind in (R2C, D2Z):
            want = np.fft.rfftn(x, axes=axes)
        else:
            want = np.fft.irfftn(x, s=dims, axes=axes) * np.prod(dims)
        scale = np.abs(want).max() + 1e-30
        err = np.abs(got.astype(np.complex128) - want).max() / scale
        tol = 1e-12 if double else 2e-5
        label = f"{name}{'' if direction is None else (' forward' if direction == FORWARD else ' inverse')}"
        results[label] = (err, err <= tol and not np.isnan(got.view(real)).any())
    ok(fft.cufftDestroy(p), "destroy")
    cu.cuMemFree_v2(dx)
    cu.cuMemFree_v2(dy)
    for label, (err, good) in results.items():
        global failures
        print(f"{'PASS' if good else 'FAIL'} {label} err={err:.2e}")
        failures += not good


CASES = [
    ("C2C 1D n=64 batch 3", (64,), 3, C2C, False),
    ("C2C 1D n=60 batch 2", (60,), 2, C2C, False),
    ("R2C 1D n=48 batch 4", (48,), 4, R2C, False),
    ("C2R 1D n=48 batch 2", (48,), 2, C2R, False),
    ("C2C 2D 16x12 batch 2", (16, 12), 2, C2C, False),
    ("R2C 2D 8x10", (8, 10), 1, R2C, False),
    ("C2R 2D 8x10", (8, 10), 1, C2R, False),
    ("C2C 3D 8x6x4", (8, 6, 4), 1, C2C, False),
    ("R2C 3D 4x6x8 batch 2", (4, 6, 8), 2, R2C, False),
    ("C2R 3D 4x6x8", (4, 6, 8), 1, C2R, False),
    ("Z2Z 1D n=32 batch 2", (32,), 2, Z2Z, True),
    ("D2Z 2D 6x8", (6, 8), 1, D2Z, True),
    ("Z2D 1D n=40", (40,), 1, Z2D, True),
]
only = os.environ.get("CUFFT_ONLY")
for case in CASES:
    if only and not any(o in case[0] for o in only.split(",")):
        continue
    run(*case)
print(f"failures {failures}")
sys.exit(failures != 0)
