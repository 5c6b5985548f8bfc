"""NVIDIA's cuRAND (the nvidia-curand wheel) through the shim: every generator type, each distribution it
offers, on the device; each compared bit for bit with cuRAND's host generator of the same type, seed, offset
and ordering (NVIDIA's own CPU implementation), and its statistics with numpy. Prints PASS/FAIL lines.
Usage: curand_generators.py SEED [N]"""

import ctypes
import glob
import os
import sys
import sysconfig

import numpy as np

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 1234
N = int(sys.argv[2]) if len(sys.argv) > 2 else 4096

PSEUDO = {"XORWOW": 101, "MRG32K3A": 121, "MTGP32": 141, "MT19937": 142, "PHILOX4_32_10": 161}
QUASI = {"SOBOL32": 201, "SCRAMBLED_SOBOL32": 202, "SOBOL64": 203, "SCRAMBLED_SOBOL64": 204}


def load(name):
    for d in glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "lib")):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return ctypes.CDLL(p)
    return ctypes.CDLL(name)


cu = ctypes.CDLL("libcuda.so.1")
rand = load("libcurand.so.10")
P = ctypes.byref
failures = 0


def ok(r, what):
    if r != 0:
        raise SystemExit(f"FAIL {what} -> {r}")


def verdict(name, good, detail=""):
    global failures
    print(f"{'PASS' if good else 'FAIL'} {name} {detail}".rstrip())
    failures += not good


ok(cu.cuInit(0), "cuInit")
ctx = ctypes.c_void_p()
ok(cu.cuDevicePrimaryCtxRetain(P(ctx), 0), "retain")
ok(cu.cuCtxSetCurrent(ctx), "set current")


def create(kind, gen_type, device):
    """A generator of gen_type, seeded, with an offset where the type takes one (on the device, or cuRAND's
    host generator)."""
    g = ctypes.c_void_p()
    ok((rand.curandCreateGenerator if device else rand.curandCreateGeneratorHost)(P(g), gen_type), f"{kind} create")
    if gen_type in PSEUDO.values():
        ok(rand.curandSetPseudoRandomGeneratorSeed(g, ctypes.c_ulonglong(SEED)), "seed")
    else:
        ok(rand.curandSetQuasiRandomGeneratorDimensions(g, 4), "dimensions")   # N is a multiple of it
    if gen_type not in (PSEUDO["MTGP32"], PSEUDO["MT19937"]):      # these two take no offset (cuRAND's 103)
        ok(rand.curandSetGeneratorOffset(g, ctypes.c_ulonglong(SEED % 1000)), "offset")
    return g


def generate(g, kind, fn, dtype, count, *extra, device=True):
    """The next `count` values of distribution `fn` from generator g, in a poisoned buffer."""
    host = np.frombuffer(np.random.default_rng().integers(0, 256, count * np.dtype(dtype).itemsize, dtype=np.uint8)
                         .tobytes(), dtype=dtype).copy()
    nbytes = host.nbytes
    if device:
        d = ctypes.c_uint64()
        ok(cu.cuMemAlloc_v2(P(d), ctypes.c_size_t(nbytes)), "alloc")
        ok(cu.cuMemcpyHtoD_v2(d, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(nbytes)), "poison")
        ok(getattr(rand, fn)(g, ctypes.c_void_p(d.value), ctypes.c_size_t(count), *extra), f"{kind} {fn}")
        ok(cu.cuCtxSynchronize(), "sync")
        ok(cu.cuMemcpyDtoH_v2(host.ctypes.data_as(ctypes.c_void_p), d, ctypes.c_size_t(nbytes)), "back")
        cu.cuMemFree_v2(d)
    else:
        ok(getattr(rand, fn)(g, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(count), *extra),
           f"host {fn}")
    return host


F = ctypes.c_float
D = ctypes.c_double
# (function, dtype, extra arguments, statistics check)
DISTRIBUTIONS = [
    ("curandGenerate", np.uint32, (), lambda x: abs(x.astype(np.float64).mean() / 2**32 - 0.5) < 0.05),
    ("curandGenerateUniform", np.float32, (), lambda x: x.min() > 0 and x.max() <= 1 and abs(x.mean() - 0.5) < 0.05),
    ("curandGenerateNormal", np.float32, (F(1.5), F(2.0)),
     lambda x: abs(x.mean() - 1.5) < 0.2 and abs(x.std() - 2.0) < 0.2),
    ("curandGenerateLogNormal", np.float32, (F(0.0), F(0.5)),
     lambda x: x.min() > 0 and abs(np.log(x).mean()) < 0.1 and abs(np.log(x).std() - 0.5) < 0.1),
    ("curandGenerateUniformDouble", np.float64, (), lambda x: x.min() > 0 and x.max() <= 1 and abs(x.mean() - 0.5) < 0.05),
    ("curandGeneratePoisson", np.uint32, (D(4.0),), lambda x: abs(x.mean() - 4.0) < 0.3 and abs(x.var() - 4.0) < 0.6),
]

only = os.environ.get("CURAND_ONLY")
for kind, gen_type in {**PSEUDO, **QUASI}.items():
    if only and kind not in only.split(","):
        continue
    dists = list(DISTRIBUTIONS)
    if kind in ("SOBOL64", "SCRAMBLED_SOBOL64"):
        dists = [("curandGenerateLongLong", np.uint64, (), lambda x: abs(x.astype(np.float64).mean() / 2**64 - 0.5) < 0.05)] + \
            [d for d in dists if d[0] in ("curandGenerateUniformDouble", "curandGenerateNormal")]
    # one generator of each kind on each side, every distribution drawn from it in turn (MT19937's
    # initialisation, a jump-ahead kernel, runs for a minute on two cores)
    gd, gh = create(kind, gen_type, True), create(kind, gen_type, False)
    for fn, dtype, extra, stats in dists:
        dev = generate(gd, kind, fn, dtype, N, *extra)
        ref = generate(gh, kind, fn, dtype, N, *extra, device=False)
        same = np.array_equal(dev.view(np.uint8), ref.view(np.uint8))
        err = np.zeros(1)
        if not same and np.dtype(dtype).kind == "f":
            # Box-Muller's sin/cos/log: the device's approximate math against the host's libm
            err = np.abs(dev.astype(np.float64) - ref) / (1 + np.abs(ref))
            print(f"  {kind} {fn}: largest difference to the host generator {err.max():.3g} x (1 + |x|)")
        close = same or (np.dtype(dtype).kind == "f" and err.max() < 1e-5)
        verdict(f"{kind} {fn}", close and stats(dev.astype(np.float64) if dtype != np.uint64 else dev),
                "" if same else f"(bitwise {np.mean(dev.view(np.uint8) == ref.view(np.uint8)):.3f})")
    ok(rand.curandDestroyGenerator(gd), "destroy")
    ok(rand.curandDestroyGenerator(gh), "destroy")

print(f"failures {failures}")
sys.exit(failures != 0)
