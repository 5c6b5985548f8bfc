"""Shared kit for the instruction tests: builds one-thread-per-element PTX kernels, runs them (on our
compiler, or on a real GPU through libcuda when PTXKIT_BACKEND=cuda), and checks results exactly.

Running the same tests against NVIDIA hardware is how the references were validated:
    PTXKIT_BACKEND=cuda python3 -m pytest tests/ptx/test_instr_*.py     (PTXKIT_ERRLOG=f logs .approx errors)
PTXKIT_BACKEND=null runs nothing (every test must then fail by assertion: a check of the references' code).
PTXKIT_BACKEND=gfx1100 (or gfx1100:cumode, gfx950) runs each kernel on the AMD code object in the emulator
(ZLUDA_AMDGPU_EMULATOR) and on the CPU backend, and compares the two (ptxkit_amd.py; not hardware).
Inputs are fresh random each run; a failing test prints PTXKIT_SEED=..., which reproduces it.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import re
import sys
import zlib
from fractions import Fraction

import numpy as np
import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

BACKEND = os.environ.get("PTXKIT_BACKEND", "host")
ON_GPU = BACKEND == "cuda"

HEADER = ".version 8.0\n.target sm_86\n.address_size 64\n"


# ------------------------------------------------------------------ types

class T:
    """A PTX scalar type as the tests see it: numpy storage dtype, register declaration, ld/st type."""

    def __init__(self, name, np_dtype, reg, mem, signed=False, is_float=False, bits=None):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.reg = reg
        self.mem = mem
        self.signed = signed
        self.is_float = is_float
        self.bits = bits or self.np.itemsize * 8

    @property
    def size(self):
        return self.np.itemsize

    def __repr__(self):
        return self.name


TYPES = {}
for _n, _d, _r, _m, _s, _f in [
    ("u8", np.uint8, "b16", "u8", False, False), ("s8", np.int8, "b16", "s8", True, False),
    ("b8", np.uint8, "b16", "u8", False, False),
    ("u16", np.uint16, "u16", "u16", False, False), ("s16", np.int16, "s16", "s16", True, False),
    ("b16", np.uint16, "b16", "b16", False, False),
    ("u32", np.uint32, "u32", "u32", False, False), ("s32", np.int32, "s32", "s32", True, False),
    ("b32", np.uint32, "b32", "b32", False, False),
    ("u64", np.uint64, "u64", "u64", False, False), ("s64", np.int64, "s64", "s64", True, False),
    ("b64", np.uint64, "b64", "b64", False, False),
    ("f16", np.uint16, "b16", "b16", False, True), ("bf16", np.uint16, "b16", "b16", False, True),
    ("f16x2", np.uint32, "b32", "b32", False, True), ("bf16x2", np.uint32, "b32", "b32", False, True),
    ("f32", np.float32, "f32", "f32", True, True), ("f64", np.float64, "f64", "f64", True, True),
    ("pred", np.uint8, "pred", "u8", False, False),
]:
    TYPES[_n] = T(_n, _d, _r, _m, _s, _f)


def t(name):
    return TYPES[name]


# ------------------------------------------------------------------ kernel text

def elementwise(name, body, ins, outs, temps=(), n_param=True):
    """One thread per element i < n: load each input [i], run `body`, store each output [i].

    ins/outs: [(reg, type_name)]; registers are named %<reg>. Predicates travel as bytes 0/1.
    temps: [(reg, reg_decl_type)] extra registers the body uses."""
    decl = [".reg .pred %p_oob;", ".reg .u32 %i, %n;", ".reg .u64 %addr, %base;", ".reg .b16 %pb;"]
    params = []
    load, store = [], []
    for k, (r, tn) in enumerate(ins):
        ty = TYPES[tn]
        decl.append(f".reg .{ty.reg} %{r};")
        params.append(f".param .u64 in{k}")
        load.append(f"ld.param.u64 %base, [in{k}];\ncvta.to.global.u64 %base, %base;")
        load.append(f"mad.wide.u32 %addr, %i, {ty.size}, %base;")
        if tn == "pred":
            load.append(f"ld.global.u8 %pb, [%addr];\nsetp.ne.u16 %{r}, %pb, 0;")
        else:
            load.append(f"ld.global.{ty.mem} %{r}, [%addr];")
    for k, (r, tn) in enumerate(outs):
        ty = TYPES[tn]
        decl.append(f".reg .{ty.reg} %{r};")
        params.append(f".param .u64 out{k}")
        store.append(f"ld.param.u64 %base, [out{k}];\ncvta.to.global.u64 %base, %base;")
        store.append(f"mad.wide.u32 %addr, %i, {ty.size}, %base;")
        if tn == "pred":
            store.append(f"selp.u16 %pb, 1, 0, %{r};\nst.global.u8 [%addr], %pb;")
        else:
            store.append(f"st.global.{ty.mem} [%addr], %{r};")
    for r, decl_ty in temps:
        decl.append(f".reg .{decl_ty} %{r};")
    params.append(".param .u32 n")
    nl = "\n"
    return f"""
.visible .entry {name}({", ".join(params)})
{{
{nl.join(decl)}
.reg .u32 %tx, %cx, %nx;
mov.u32 %tx, %tid.x;
mov.u32 %cx, %ctaid.x;
mov.u32 %nx, %ntid.x;
mad.lo.u32 %i, %cx, %nx, %tx;
ld.param.u32 %n, [n];
setp.ge.u32 %p_oob, %i, %n;
@%p_oob bra $DONE;
{nl.join(load)}
{body}
{nl.join(store)}
$DONE:
ret;
}}
"""


def module(*kernels, target="sm_86"):
    return HEADER.replace("sm_86", target) + "\n".join(kernels)


def kname(*parts):
    """A PTX identifier made from modifier/type names."""
    return "_".join(re.sub(r"[^A-Za-z0-9]", "_", str(p)) for p in parts if p != "")


# ------------------------------------------------------------------ backends

class _CudaBackend:
    """Runs the same launches on a real NVIDIA GPU via libcuda, to validate the references."""

    def __init__(self):
        cu = ctypes.CDLL("libcuda.so.1")
        self.cu = cu
        self._check(cu.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        self._check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        ctx = ctypes.c_void_p()
        self._check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
        self._check(cu.cuCtxSetCurrent(ctx), "setcurrent")

    @staticmethod
    def _check(rc, what):
        if rc != 0:
            raise RuntimeError(f"CUDA {what} failed: {rc}")

    def compile(self, text):
        return _CudaModule(self, text)


class _CudaKernel:
    def __init__(self, be, fn, param_sizes):
        self.be, self.fn, self.param_sizes = be, fn, param_sizes

    def launch(self, grid, block, args, shared_bytes=0):
        cu = self.be.cu
        grid = _dim3(grid)
        block = _dim3(block)
        bufs, holders, ptrs = [], [], []
        seen = {}  # the same array passed twice gets the same device buffer (aliasing params)
        for a, size in zip(args, self.param_sizes):
            if isinstance(a, np.ndarray) and id(a) in seen:
                holder = ctypes.c_uint64(seen[id(a)])
            elif isinstance(a, np.ndarray):
                dptr = ctypes.c_uint64()
                nbytes = max(a.nbytes, 1)
                _CudaBackend._check(cu.cuMemAlloc_v2(ctypes.byref(dptr), ctypes.c_size_t(nbytes)), "alloc")
                _CudaBackend._check(cu.cuMemcpyHtoD_v2(dptr, a.ctypes.data_as(ctypes.c_void_p),
                                                       ctypes.c_size_t(a.nbytes)), "htod")
                bufs.append((a, dptr))
                seen[id(a)] = dptr.value
                holder = ctypes.c_uint64(dptr.value)
            elif isinstance(a, (bytes, bytearray)):
                holder = ctypes.create_string_buffer(bytes(a), size)
            else:
                if isinstance(a, (float, np.floating)):
                    raw = np.array([a], dtype=np.float32 if size == 4 else np.float64).tobytes()
                else:
                    raw = int(a).to_bytes(8, "little", signed=int(a) < 0)[:size]
                holder = ctypes.create_string_buffer(raw, size)
            holders.append(holder)
            ptrs.append(ctypes.cast(ctypes.pointer(holder), ctypes.c_void_p))
        arr = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
        rc = cu.cuLaunchKernel(self.fn, *[ctypes.c_uint(x) for x in grid], *[ctypes.c_uint(x) for x in block],
                               ctypes.c_uint(shared_bytes), None, arr, None)
        _CudaBackend._check(rc, "launch")
        _CudaBackend._check(cu.cuCtxSynchronize(), "sync")
        for a, dptr in bufs:
            _CudaBackend._check(cu.cuMemcpyDtoH_v2(a.ctypes.data_as(ctypes.c_void_p), dptr,
                                                   ctypes.c_size_t(a.nbytes)), "dtoh")
            cu.cuMemFree_v2(dptr)


_PARAM_SIZE = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "f16": 2, "u32": 4, "s32": 4,
               "b32": 4, "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8}


class _CudaModule:
    def __init__(self, be, text):
        self.be, self.text = be, text
        cu = be.cu
        mod = ctypes.c_void_p()
        log = ctypes.create_string_buffer(8192)
        opts = (ctypes.c_int * 2)(5, 6)  # CU_JIT_ERROR_LOG_BUFFER, ..._SIZE_BYTES
        vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(8192))
        rc = cu.cuModuleLoadDataEx(ctypes.byref(mod), ctypes.c_char_p(text.encode()), 2, opts, vals)
        if rc != 0:
            raise RuntimeError(f"cuModuleLoadDataEx failed {rc}: {log.value.decode(errors='replace')}")
        self.mod = mod

    def kernel(self, name):
        fn = ctypes.c_void_p()
        _CudaBackend._check(self.be.cu.cuModuleGetFunction(ctypes.byref(fn), self.mod, name.encode()), name)
        m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", self.text, re.S)
        sizes = []
        for p in (m.group(1).split(",") if m and m.group(1).strip() else []):
            pm = re.search(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+(?:\.ptr(?:\.\w+)*(?:\s+\d+)?\s+)?\w+"
                           r"(?:\[(\d+)\])?", p)
            sizes.append(_PARAM_SIZE[pm.group(1)] * (int(pm.group(2)) if pm.group(2) else 1))
        return _CudaKernel(self.be, fn, sizes)


def _dim3(d):
    if isinstance(d, int):
        return (d, 1, 1)
    d = tuple(d)
    return d + (1,) * (3 - len(d))


@functools.lru_cache(maxsize=None)
def _cuda():
    return _CudaBackend()


_MODULES = {}


def compile_text(text):
    """Compile (cached by text) with the selected backend."""
    mod = _MODULES.get(text)
    if mod is None:
        if ON_GPU:
            mod = _cuda().compile(text)
        elif BACKEND == "null":  # runs nothing: exercises the references and checks (all must fail)
            mod = _NullModule()
        elif BACKEND.startswith("gfx"):
            import ptxkit_amd
            mod = ptxkit_amd.EmulatedModule(text, BACKEND)
        else:
            import ptx
            mod = ptx.compile(text, target="host")
        _MODULES[text] = mod
    return mod


class _NullModule:
    def kernel(self, name):
        return self

    def launch(self, *a, **k):
        pass


class KernelSet:
    """Many kernels in one module, compiled once. A kernel the compiler rejects (its error names a line)
    is dropped from the shared module and compiled alone when asked for, so one gap fails only its own
    tests and the rest still share one compile."""

    def __init__(self, target="sm_86"):
        self.target = target
        self.kernels = {}
        self._whole = None
        self._in_whole = set()
        self._tried = False

    def add(self, name, text):
        assert name not in self.kernels, name
        self.kernels[name] = text
        return name

    def _compile_whole(self):
        self._tried = True
        keep = list(self.kernels)
        for _ in range(64):
            if not keep:
                return
            texts = [self.kernels[n] for n in keep]
            try:
                self._whole = compile_text(module(*texts, target=self.target))
                self._in_whole = set(keep)
                return
            except Exception as e:  # noqa: BLE001 - any rejection: find the kernel it came from
                line = getattr(e, "line", 0)
                if not line:
                    m = re.search(r"line (\d+)", str(e))
                    line = int(m.group(1)) if m else 0
                if not line:
                    return
                start = HEADER.count("\n") + 1
                culprit = None
                for n, t in zip(keep, texts):
                    end = start + t.count("\n") + 1  # module() joins kernels with a newline
                    if start <= line < end:
                        culprit = n
                        break
                    start = end
                if culprit is None:
                    return
                keep.remove(culprit)
                m = re.search(r"unsupported instruction (\S+)", str(e))
                if m:  # every kernel using the same unsupported opcode goes too (they compile alone)
                    root = m.group(1).split(".")[0] + "."
                    keep = [n for n in keep if root not in self.kernels[n]]

    def kernel(self, name):
        if not self._tried:
            self._compile_whole()
        if name in self._in_whole:
            return self._whole.kernel(name)
        return compile_text(module(self.kernels[name], target=self.target)).kernel(name)


# ------------------------------------------------------------------ running

def poison(shape, dtype, rng):
    """An output buffer full of random bytes, so a missing store cannot pass."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    return np.frombuffer(rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes(), dtype=dtype).reshape(shape).copy()


def launch(kernel, grid, block, args, shared_bytes=0):
    kernel.launch(grid, block, args, shared_bytes=shared_bytes)


def run_elementwise(ks, name, inputs, out_types, rng, block=128):
    """Launch elementwise kernel `name` of KernelSet `ks` over the inputs; returns the outputs."""
    n = len(inputs[0])
    outs = [poison((n,), TYPES[tn].np, rng) for tn in out_types]
    ins = [np.ascontiguousarray(x) for x in inputs]
    k = ks.kernel(name)
    launch(k, ((n + block - 1) // block, 1, 1), (block, 1, 1), [*ins, *outs, n])
    return outs


# ------------------------------------------------------------------ random inputs with edge values

def rng_for(request):
    """Fresh random inputs each run; the seed is printed on failure (PTXKIT_SEED reproduces it)."""
    base = int(os.environ.get("PTXKIT_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    seed = (base ^ zlib.crc32(request.node.nodeid.encode())) & 0xFFFFFFFF
    request.node.user_properties.append(("ptxkit_seed", base))
    print(f"PTXKIT_SEED={base}")
    return np.random.default_rng(seed)


@pytest.fixture
def rng(request):
    return rng_for(request)


def int_edges(tn):
    ty = TYPES[tn]
    bits = ty.bits
    if ty.signed:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        vals = [0, 1, -1, 2, -2, lo, lo + 1, hi, hi - 1, 3, 7, -7, 1 << (bits // 2), -(1 << (bits // 2))]
    else:
        hi = (1 << bits) - 1
        vals = [0, 1, 2, 3, 7, hi, hi - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1, 1 << (bits // 2)]
    return np.array(vals, dtype=ty.np)


def rand_ints(rng, tn, n, edges=True):
    """n values: random bit patterns, small numbers, and the type's edge values at random positions."""
    ty = TYPES[tn]
    raw = rng.integers(0, 256, n * ty.size, dtype=np.uint8).tobytes()
    x = np.frombuffer(raw, dtype=ty.np).copy()
    small = rng.integers(-40 if ty.signed else 0, 40, n).astype(ty.np)
    pick = rng.random(n) < 0.25
    x[pick] = small[pick]
    if edges:
        e = int_edges(tn)
        pos = rng.choice(n, size=min(n, 4 * len(e)), replace=False)
        x[pos] = np.resize(e, len(pos))
    return x


_FLOAT_INFO = {  # (numpy dtype, uint dtype, mantissa bits, exponent bits)
    "f16": (np.float16, np.uint16, 10, 5),
    "bf16": (None, np.uint16, 7, 8),
    "f32": (np.float32, np.uint32, 23, 8),
    "f64": (np.float64, np.uint64, 52, 11),
}


def float_specials_bits(tn):
    """Bit patterns: ±0, ±inf, NaNs, denormals, min normal, max, 1, ties."""
    _, ut, mb, eb = _FLOAT_INFO[tn]
    sign = 1 << (mb + eb)
    exp_all = ((1 << eb) - 1) << mb
    bias = (1 << (eb - 1)) - 1
    one = bias << mb
    vals = [0, exp_all, exp_all | 1, exp_all | (1 << (mb - 1)), 1, (1 << mb) - 1, 1 << mb,
            exp_all - 1, one, one | (1 << (mb - 1)), (bias + 1) << mb | (1 << (mb - 1)),
            (bias - 1) << mb, one + 1, one - 1, (bias + 5) << mb | 3, (bias + mb) << mb]
    out = []
    for v in vals:
        out.append(v)
        out.append(v | sign)
    return np.array(out, dtype=ut)


def rand_float_bits(rng, tn, n, cross_with=None, specials=True):
    """Bit patterns of tn floats: mostly 'ordinary' magnitudes, some raw random bits (NaN/denormal/huge),
    and the special values at random positions."""
    _, ut, mb, eb = _FLOAT_INFO[tn]
    bias = (1 << (eb - 1)) - 1
    width = 1 + mb + eb
    raw = rng.integers(0, 1 << min(width, 63), n, dtype=np.uint64)
    if width == 64:
        raw = raw | (rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63))
    raw = raw.astype(ut)
    # ordinary numbers: exponent within +-12 of 1.0 (rounding matters, no overflow)
    e = rng.integers(bias - 12, bias + 12, n).astype(np.uint64)
    m = rng.integers(0, 1 << mb, n, dtype=np.uint64)
    s = rng.integers(0, 2, n).astype(np.uint64)
    ordinary = ((s << np.uint64(width - 1)) | (e << np.uint64(mb)) | m).astype(ut)
    pick = rng.random(n) < 0.7
    raw[pick] = ordinary[pick]
    if specials:
        sp = float_specials_bits(tn)
        pos = rng.choice(n, size=min(n, 2 * len(sp)), replace=False)
        raw[pos] = np.resize(sp, len(pos))
    return raw


def ordinary_floats(rng, n, lo=-12, hi=12):
    """float64 values of random sign with exponents in [lo, hi): no specials, no denormals."""
    return rng.uniform(1, 2, n) * np.exp2(rng.integers(lo, hi, n)) * rng.choice([-1.0, 1.0], n)


def rand_floats(rng, tn, n, specials=True):
    return rand_float_bits(rng, tn, n, specials=specials).view(_FLOAT_INFO[tn][0])


def cross_specials(rng, tn, arrays_n, n):
    """k arrays of n bit patterns whose first len(S)^k elements are the full cross product of specials."""
    sp = float_specials_bits(tn)
    if len(sp) ** arrays_n > n // 2:
        per = max(2, int((n // 2) ** (1.0 / arrays_n)))
        sp = rng.choice(sp, size=min(per, len(sp)), replace=False)
    k = arrays_n
    grids = np.meshgrid(*([sp] * k), indexing="ij")
    cols = [g.ravel() for g in grids]
    out = []
    for c in cols:
        r = rand_float_bits(rng, tn, n, specials=False)
        m = min(n, len(c))
        r[:m] = c[:m]
        out.append(r)
    return out


# ------------------------------------------------------------------ exact rounding

FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127), "f64": (53, -1022, 1023),
           "tf32": (11, -126, 127)}


def _max_finite(fmt):
    p, _, emax = FORMATS[fmt]
    return Fraction((1 << p) - 1) * Fraction(2) ** (emax - p + 1)


def round_fraction(x, fmt, mode="rn"):
    """Round an exact rational to format fmt (with subnormals) in mode rn/rz/rm/rp/rna. Returns a Python
    float (exact: every format here fits in a double) or +-inf."""
    if x == 0:
        return 0.0
    p, emin, emax = FORMATS[fmt]
    neg = x < 0
    a = -x if neg else x
    # exponent e with 2^e <= a < 2^(e+1)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    elif Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    q = Fraction(2) ** (e - p + 1)
    m = a / q
    fl = m.numerator // m.denominator
    rem = m - fl
    if rem == 0:
        r = fl
    elif mode == "rn":
        r = fl + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1) else 0)
    elif mode == "rna":
        r = fl + (1 if rem >= Fraction(1, 2) else 0)
    elif mode == "rz":
        r = fl
    elif mode == "rp":
        r = fl if neg else fl + 1
    elif mode == "rm":
        r = fl + 1 if neg else fl
    else:
        raise ValueError(mode)
    v = r * q
    if v > _max_finite(fmt):
        up = mode in ("rn", "rna") or (mode == "rp" and not neg) or (mode == "rm" and neg)
        v = None if up else _max_finite(fmt)
    if v is None:
        return -np.inf if neg else np.inf
    f = float(v)
    return -f if neg else f


def float_to_bits(vals, tn):
    """Python/np float values (already representable) -> storage bit patterns of tn."""
    vals = np.asarray(vals, dtype=np.float64)
    if tn == "f64":
        return vals.view(np.uint64)
    if tn == "f32":
        return vals.astype(np.float32).view(np.uint32)
    if tn == "f16":
        return vals.astype(np.float16).view(np.uint16)
    if tn == "bf16":
        b = vals.astype(np.float32).view(np.uint32)
        out = (b >> np.uint32(16)).astype(np.uint16)
        nan = np.isnan(vals)
        out[nan] = 0x7FFF
        return out
    raise ValueError(tn)


def bits_to_float(bits, tn):
    """Storage bit patterns -> float64 values."""
    bits = np.asarray(bits)
    if tn == "f64":
        return bits.astype(np.uint64).view(np.float64)
    if tn == "f32":
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if tn == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if tn == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    raise ValueError(tn)


def is_subnormal(vals, tn):
    p, emin, _ = FORMATS[tn]
    a = np.abs(np.asarray(vals, dtype=np.float64))
    return (a > 0) & (a < 2.0 ** emin)


def ftz(vals, tn):
    """Flush subnormals to sign-preserving zero (values as float64)."""
    v = np.array(vals, dtype=np.float64)
    sub = is_subnormal(v, tn)
    v[sub] = np.copysign(0.0, v[sub])
    return v


def ulp_of(vals, tn):
    """The spacing of tn floats at |vals| (float64)."""
    p, emin, _ = FORMATS[tn]
    a = np.abs(np.asarray(vals, dtype=np.float64))
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, emin)
    return np.exp2(e - (p - 1))


# ------------------------------------------------------------------ checks

def _describe(idx, got, want, inputs, label, limit=8):
    lines = [f"{label}: {len(idx)} of {len(got)} elements wrong"]
    for i in idx[:limit]:
        ins = ", ".join(_show(x[i]) for x in inputs)
        lines.append(f"  [{i}] in=({ins}) got={_show(got[i])} want={_show(want[i])}")
    return "\n".join(lines)


def _show(v):
    v = np.asarray(v)
    if v.dtype.kind == "f":
        u = v.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[v.itemsize])
        return f"{float(v)!r}[0x{int(u):0{v.itemsize * 2}x}]"
    if v.dtype.kind in "iu":
        return f"{int(v)}[0x{int(v) & ((1 << (v.itemsize * 8)) - 1):0{v.itemsize * 2}x}]"
    return repr(v)


def check_equal(got, want, inputs=(), label="result"):
    """Bitwise equality of every element (integers, bit patterns)."""
    got = np.asarray(got)
    want = np.asarray(want).astype(got.dtype)
    bad = np.nonzero(got != want)[0]
    assert len(bad) == 0, _describe(bad, got, want, inputs, label)


def _as_bits(x, tn):
    x = np.asarray(x)
    ut = _FLOAT_INFO[tn][1]
    if x.dtype.kind == "f":
        native = _FLOAT_INFO[tn][0]
        return x.view(ut) if native is not None and x.dtype == np.dtype(native) else float_to_bits(x, tn)
    return x.astype(ut)


def check_float(got, want, tn, inputs=(), label="result", nan_bits=False, alt=None):
    """Exact float equality by bits (so -0 != +0); any NaN matches any NaN unless nan_bits.
    got/want: storage arrays (float32/float64 or uint16 bit patterns for f16/bf16); `alt`, like want,
    holds a second acceptable result per element."""
    gb = _as_bits(got, tn)
    wb = _as_bits(want, tn)
    if alt is not None:
        ab = _as_bits(alt, tn)
        wb = np.where(gb == ab, ab, wb)
    gnan = np.isnan(bits_to_float(gb, tn))
    wnan = np.isnan(bits_to_float(wb, tn))
    ok = (gb == wb) if nan_bits else np.where(wnan, gnan, gb == wb)
    bad = np.nonzero(~ok)[0]
    if len(bad):
        shown_g = bits_to_float(gb, tn)
        shown_w = bits_to_float(wb, tn)
        lines = [f"{label} ({tn}): {len(bad)} of {len(gb)} elements wrong"]
        for i in bad[:8]:
            ins = ", ".join(_show(x[i]) for x in inputs)
            lines.append(f"  [{i}] in=({ins}) got={shown_g[i]!r}[0x{int(gb[i]):x}] "
                         f"want={shown_w[i]!r}[0x{int(wb[i]):x}]")
        raise AssertionError("\n".join(lines))


def check_close(got, exact, tn, inputs=(), label="result", ulps=None, abs_err=None, rel_err=None):
    """Approximate results: |got - exact| within `ulps` of tn at the exact value, or abs_err, or rel_err
    (any that is given suffices). Infinities and NaN must match exactly; exact: float64 (or better)."""
    g = bits_to_float(np.asarray(got).view(_FLOAT_INFO[tn][1]) if np.asarray(got).dtype.kind == "f"
                      else np.asarray(got), tn)
    x = np.asarray(exact, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g - x)
        tol = np.zeros_like(x)
        if ulps is not None:
            tol = np.maximum(tol, ulps * ulp_of(x, tn))
        if abs_err is not None:
            tol = np.maximum(tol, abs_err)
        if rel_err is not None:
            tol = np.maximum(tol, rel_err * np.abs(x))
        special = ~np.isfinite(x)
        ok_special = np.where(np.isnan(x), np.isnan(g), g == x)
        ok = np.where(special, ok_special, np.isfinite(g) & (err <= tol))
    bad = np.nonzero(~ok)[0]
    if os.environ.get("PTXKIT_ERRLOG"):  # how close the implementation runs to each bound
        fin = np.isfinite(x) & np.isfinite(g)
        worst = float(np.max(np.where(fin, err / np.maximum(tol, 1e-300), 0))) if fin.any() else 0.0
        ulps_seen = float(np.max(np.where(fin, err / ulp_of(x, tn), 0))) if fin.any() else 0.0
        with open(os.environ["PTXKIT_ERRLOG"], "a") as f:
            f.write(f"{label}: worst err/tol={worst:.3f} max ulps={ulps_seen:.2f} bad={len(bad)}\n")
    if len(bad):
        lines = [f"{label} ({tn}): {len(bad)} of {len(g)} elements outside tolerance"]
        for i in bad[:8]:
            ins = ", ".join(_show(xx[i]) for xx in inputs)
            lines.append(f"  [{i}] in=({ins}) got={g[i]!r} exact={x[i]!r} err={err[i]:.3g} tol={tol[i]:.3g}")
        raise AssertionError("\n".join(lines))


def wrap(vals, tn):
    """Python ints -> tn storage with two's complement wrap."""
    ty = TYPES[tn]
    mask = (1 << ty.bits) - 1
    u = np.array([int(v) & mask for v in vals], dtype=np.uint64 if ty.bits == 64 else np.int64)
    return u.astype(np.uint64).astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[ty.size]).view(ty.np)


def cases(names, xfail=None):
    """Parametrize values; names in `xfail` (name -> exact missing feature) are strict xfails, so the mark
    itself fails once the compiler gets it right and the mark must go."""
    xfail = xfail or {}
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=xfail[n])) if n in xfail else n
            for n in names]


# ------------------------------------------------------------------ exact IEEE operations

def _fr(x):
    return Fraction(x)


def _sqrt_round(x, tn, mode):
    """Correctly rounded sqrt of a positive rational: isqrt brackets the root, then a point strictly
    inside the bracket rounds the same way as the irrational root."""
    s = 1300
    num, den = x.numerator, x.denominator
    big = (num << (2 * s)) // den
    q = math.isqrt(big)
    if q * q * den == num << (2 * s):
        return round_fraction(Fraction(q, 1 << s), tn, mode)
    return round_fraction(Fraction(2 * q + 1, 1 << (s + 1)), tn, mode)


def _zero_sum_sign(x, y, mode):
    if x == 0 and y == 0 and math.copysign(1, x) == math.copysign(1, y):
        return math.copysign(0.0, x)
    return -0.0 if mode == "rm" else 0.0


class Either(tuple):
    """A reference element with two acceptable results."""

    def __new__(cls, a, b):
        return tuple.__new__(cls, (a, b))


def split_either(values):
    """A reference list that may hold Either elements -> (primary, alternative) lists."""
    first = [v[0] if isinstance(v, Either) else v for v in values]
    second = [v[1] if isinstance(v, Either) else v for v in values]
    return first, second


def exact_op(op, vals, tn, mode, ftz=False):
    """One element of the IEEE operation with exact rounding (inputs already flushed if .ftz).
    With ftz, a result whose exact value is below the normal range becomes a signed zero: the GPU
    detects tininess before rounding (checked on H200: -2^-126 / (1+2^-23) with .rm.ftz gives -0)."""
    a = vals[0]
    if any(math.isnan(v) for v in vals):
        return math.nan
    fin = all(math.isfinite(v) for v in vals)

    def rnd(r):
        if ftz and abs(r) < Fraction(2) ** FORMATS[tn][1]:
            zero = -0.0 if r < 0 else 0.0
            rounded = round_fraction(r, tn, mode)
            if abs(rounded) >= 2.0 ** FORMATS[tn][1]:
                # tiny before rounding, normal (the smallest) after: whether the GPU flushes this is not
                # settled (the H200 cases seen were tiny either way), so both answers are accepted
                return Either(zero, rounded)
            return zero
        return round_fraction(r, tn, mode)

    if op in ("add", "sub", "mul", "fma", "div", "rcp"):
        if op == "rcp":
            vals, op = [1.0, a], "div"
        if op == "sub":
            vals, op = [vals[0], -vals[1]], "add"
        x, y = vals[0], vals[1]
        if op == "div" and (y == 0 or not fin):
            with np.errstate(all="ignore"):
                return float(np.float64(x) / np.float64(y))
        if not fin:
            with np.errstate(all="ignore"):
                if op == "add":
                    return x + y
                if op == "mul":
                    return float(np.float64(x) * np.float64(y))
                c = vals[2]
                if math.isfinite(x) and math.isfinite(y):
                    return c  # the exact (finite) product cannot cancel an infinite addend
                p = float(np.float64(x) * np.float64(y))
                return p + c if not math.isnan(p) else math.nan
        if op == "add":
            r = _fr(x) + _fr(y)
            return rnd(r) if r != 0 else _zero_sum_sign(x, y, mode)
        if op == "mul":
            r = _fr(x) * _fr(y)
            return rnd(r) if r != 0 else math.copysign(0.0, x) * math.copysign(1, y)
        if op == "div":
            r = _fr(x) / _fr(y)
            return rnd(r) if r != 0 else math.copysign(0.0, x) * math.copysign(1, y)
        if op == "fma":
            c = vals[2]
            p = _fr(x) * _fr(y)
            r = p + _fr(c)
            if r != 0:
                return rnd(r)
            psign = math.copysign(1, x) * math.copysign(1, y)
            if p == 0 and c == 0:
                return _zero_sum_sign(math.copysign(0.0, psign), c, mode)
            return -0.0 if mode == "rm" else 0.0
    if op == "sqrt":
        if a == 0 or a == math.inf:
            return a
        if a < 0:
            return math.nan
        return _sqrt_round(_fr(a), tn, mode)
    raise ValueError(op)


