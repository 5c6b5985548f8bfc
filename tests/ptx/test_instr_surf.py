"""sust.p and sured (.b and .p) on the CPU target: kernels given a texture.h descriptor's address as their surface
handle, over fresh random data and coordinates, surfaces poisoned first, every byte checked against numpy;
then every case an H100 answered (tests/data/nvidia_surface_answers.json, from
scripts/nvidia_surface_probe.cu) replayed and compared byte for byte."""

import ctypes
import json
from pathlib import Path

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)
import ptx
from ptx.errors import PTXError, PTXUnsupportedError
from ptx.runtime.texture import Descriptor, MAGIC

pytestmark = [pytest.mark.skipif(K.BACKEND not in ("host", "null"), reason="the handles are host descriptors"),
              pytest.mark.filterwarnings("ignore:invalid value encountered in cast")]

ANSWERS = json.loads((Path(__file__).resolve().parents[1] / "data" / "nvidia_surface_answers.json").read_text())
# 64-bit sured min/max and sured.p.b64 need ISA 8.1
HEADER = ".version 8.5\n.target sm_80\n.address_size 64\n"

# name -> (CUarray_format, bytes a channel, kind, channels it must have or 0)
FORMATS = {"u8": (0x01, 1, "u", 0), "u16": (0x02, 2, "u", 0), "u32": (0x03, 4, "u", 0), "s8": (0x08, 1, "s", 0),
           "s16": (0x09, 2, "s", 0), "s32": (0x0A, 4, "s", 0), "f16": (0x10, 2, "h", 0), "f32": (0x20, 4, "f", 0)}
for _i, (_k, _b) in enumerate([("unorm", 8), ("unorm", 16), ("snorm", 8), ("snorm", 16)]):
    for _j, _n in enumerate((1, 2, 4)):
        FORMATS[f"{_k}{_b}x{_n}"] = (0xC0 + 3 * _i + _j, _b // 8, _k, _n)
GEOMS = ("1d", "2d", "3d", "a1d", "a2d")
COORDS = {"1d": "{%r10}", "2d": "{%r10, %r11}", "3d": "{%r10, %r11, %r12, %r13}", "a1d": "{%r10, %r11}",
          "a2d": "{%r10, %r11, %r12, %r13}"}
UDT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


# ------------------------------------------------------------------ surfaces and kernels

class Surface:
    """A poisoned array of w x h x d texels (layers for a1d/a2d) and the descriptor over it."""

    def __init__(self, fmt, nch, w, h=0, d=0, layered=False, rng=None, fill=None):
        code, size, _, _ = FORMATS[fmt]
        self.fmt, self.nch, self.size = fmt, nch, size
        self.w, self.h, self.d = w, h, d
        shape = (max(d, 1), max(h, 1), w * nch * size)
        self.img = K.poison(shape, np.uint8, rng) if fill is None else np.full(shape, fill, np.uint8)
        t = Descriptor()
        t.base = self.img.ctypes.data
        t.pitch = w * nch * size
        t.slice = t.pitch * max(h, 1)
        t.format, t.channels, t.width, t.height = code, nch, w, h
        if layered:
            t.layers = d
        else:
            t.depth = d
        t.magic = MAGIC
        self.desc = t

    @property
    def handle(self):
        return ctypes.addressof(self.desc)

    def texels(self):
        """(depth or layers, height, width, channels) of the channels' raw bits."""
        return self.img.view(UDT[self.size]).reshape(max(self.d, 1), max(self.h, 1), self.w, self.nch)


def _entry(name, params, body):
    ps = ", ".join(f".param .{t} {n}" for n, t in params)
    return (f".visible .entry {name}({ps})\n{{\n  .reg .u64 %rd<16>;\n  .reg .u32 %r<32>;\n  .reg .pred %p;\n"
            "  mov.u32 %r0, %tid.x;\n  mov.u32 %r1, %ctaid.x;\n  mov.u32 %r2, %ntid.x;\n"
            "  mad.lo.u32 %r3, %r1, %r2, %r0;\n  ld.param.u32 %r4, [n];\n  setp.ge.u32 %p, %r3, %r4;\n"
            "  @%p bra done;\n  ld.param.u64 %rd0, [s];\n"
            # thread i's coordinates: 4 x s32 at coords + 16 i, in the order of PTX's vector
            "  ld.param.u64 %rd1, [coords];\n  mul.wide.u32 %rd2, %r3, 16;\n  add.u64 %rd1, %rd1, %rd2;\n"
            "  ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%rd1];\n"
            f"{body}done:\n  ret;\n}}\n")


def _store_p_kernel(g, vec, clamp):
    """Thread i stores values[4 i .. 4 i + vec - 1] with sust.p at its coordinates."""
    regs = ", ".join(f"%r{20 + c}" for c in range(vec))
    body = ("  ld.param.u64 %rd3, [vals];\n  add.u64 %rd3, %rd3, %rd2;\n"
            "  ld.global.v4.u32 {%r20, %r21, %r22, %r23}, [%rd3];\n"
            f"  sust.p.{g}{'.v%d' % vec if vec > 1 else ''}.b32.{clamp} [%rd0, {COORDS[g]}], {{{regs}}};\n")
    name = f"sustp_{g}_{vec}_{clamp}"
    return name, _entry(name, [("s", "u64"), ("vals", "u64"), ("coords", "u64"), ("n", "u32")], body)


def _sured_kernel(form, g, clamp):
    """Thread i reduces operands[i] into its coordinates with `form` (sured.b.add.u32: the geometry goes
    after the op)."""
    kind, op, ty = form.split(".")[1:]
    wide = ty.endswith("64")
    body = (f"  ld.param.u64 %rd3, [ops];\n  mul.wide.u32 %rd4, %r3, {8 if wide else 4};\n"
            "  add.u64 %rd3, %rd3, %rd4;\n"
            + ("  ld.global.u64 %rd5, [%rd3];\n" if wide else "  ld.global.u32 %r20, [%rd3];\n")
            + f"  sured.{kind}.{op}.{g}.{ty}.{clamp} [%rd0, {COORDS[g]}], {'%rd5' if wide else '%r20'};\n")
    name = f"sured_{kind}_{op}_{g}_{ty}_{clamp}"
    return name, _entry(name, [("s", "u64"), ("ops", "u64"), ("coords", "u64"), ("n", "u32")], body)


def _kernel(name, text):
    return K.compile_text(HEADER + text).kernel(name)


def _run(kernel, args, n, block=128):
    K.launch(kernel, ((n + block - 1) // block, 1, 1), (block, 1, 1), [*args, n])


def _coords(g, x, y=None, z=None, layer=None):
    """The 4 x s32 coordinate vectors, in PTX's order (the layer first for a1d/a2d)."""
    n = len(x)
    c = np.zeros((n, 4), np.int32)
    cols = {"1d": [x], "2d": [x, y], "3d": [x, y, z], "a1d": [layer, x], "a2d": [layer, x, y]}[g]
    for i, v in enumerate(cols):
        c[:, i] = v
    return c


# ------------------------------------------------------------------ numpy references

def _sat_unsigned(v, bits):
    return np.minimum(v.astype(np.uint64), (1 << bits) - 1)


def _sat_signed(v, bits):
    s = v.view(np.int32).astype(np.int64)
    return np.clip(s, -(1 << (bits - 1)), (1 << (bits - 1)) - 1) & ((1 << bits) - 1)


def _half_rz(v):
    """Toward zero: to nearest, then one step back where that went past the value (65504 past the top);
    a NaN keeps its sign and top 10 payload bits (1 where those are 0)."""
    f = v.view(np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        h = f.astype(np.float16)
    back = np.abs(h.astype(np.float64)) > np.abs(f)
    h = np.where(back, np.nextafter(h, np.float16(0)), h)
    out = h.view(np.uint16).astype(np.uint64)
    nan = np.isnan(f)
    payload = (v >> 13) & 0x3FF
    out[nan] = (((v[nan] >> 16) & 0x8000) | 0x7C00 | payload[nan] | (payload[nan] == 0)).astype(np.uint64)
    return out


def _norm(v, bits, signed):
    """unorm/snorm as an H100 stores them: clamped, cut to 4 bits below the code's magnitude (8, 16 bits for
    unorm, 7, 15 for snorm), rounded half down."""
    f = v.view(np.float32).astype(np.float64)
    f = np.where(np.isnan(f), 0.0, np.clip(f, -1.0 if signed else 0.0, 1.0))
    scale = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    m = bits - signed + 4
    q = np.floor(np.abs(f) * 2.0 ** m).astype(np.int64)
    n = (q * scale + (1 << (m - 1)) - 1) >> m
    return (np.where(f < 0, -n, n) & ((1 << bits) - 1)).astype(np.uint64)


def convert(fmt, v):
    """What sust.p stores in a channel of `fmt` for the 32-bit values v."""
    _, size, kind, _ = FORMATS[fmt]
    v = np.asarray(v, np.uint32)
    if kind == "u":
        return _sat_unsigned(v, 8 * size)
    if kind == "s":
        return _sat_signed(v, 8 * size)
    if kind == "h":
        return _half_rz(v)
    if kind == "f":
        return v.astype(np.uint64)
    return _norm(v, 8 * size, kind == "snorm")


def _values(rng, n):
    """32-bit data for sust.p: random bits, floats in and past [-1, 1], integers at the formats' edges,
    specials (NaNs with payloads, infinities, signed zeros, denormals)."""
    kinds = rng.integers(0, 5, n)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    floats = rng.uniform(-1.6, 1.6, n).astype(np.float32).view(np.uint32)
    edges = np.array([0, 1, 127, 128, 255, 256, 32767, 32768, 65535, 65536, 0x7FFFFFFF, 0x80000000,
                      0xFFFFFFFF, 0xFFFFFF80, 0xFFFFFF7F, 0xFFFF8000, 0xFFFF7FFF], np.uint32)
    specials = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC01234, 0x7F800001, 0x80000000, 0x00000001,
                         0x477FF000, 0x477FEFFF, 0x3F801000, 0x33800000, 0x33000000, 0x3F800000, 0xBF800000,
                         0x3F000000, 0x7149F2CA], np.uint32)
    near = (rng.uniform(-1, 1, n) * rng.choice([1.0, 1e-3, 1e3], n)).astype(np.float32).view(np.uint32)
    return np.select([kinds == 0, kinds == 1, kinds == 2, kinds == 3],
                     [bits, floats, rng.choice(edges, n), rng.choice(specials, n)], near).astype(np.uint32)


def _store_reference(s, vals, vec, coords_of_texel):
    """The texels a sust.p of each value vector writes, at the (layer/z, y, x) each names."""
    want = s.texels().astype(np.uint64).copy()
    for (zz, yy, xx), v in zip(coords_of_texel, vals):
        for c in range(s.nch):
            want[zz, yy, xx, c] = convert(s.fmt, v[c:c + 1])[0] if c < vec else 0
    return want


# ------------------------------------------------------------------ sust.p

_STORE_CASES = [(f, nch, vec) for f, (_, _, _, fixed) in FORMATS.items() for nch in (1, 2, 4)
                if not fixed or fixed == nch for vec in (1, 2, 4)]


@pytest.mark.parametrize("fmt, nch, vec", _STORE_CASES, ids=[f"{f}x{n}v{v}" for f, n, v in _STORE_CASES])
def test_sust_p_converts_to_the_format(rng, fmt, nch, vec):
    """Every texel of a 2D surface written once, in random order: each channel the converted value, channels
    past the data 0, data past the channels dropped."""
    w, h = int(rng.integers(5, 40)), int(rng.integers(2, 9))
    s = Surface(fmt, nch, w, h, rng=rng)
    order = rng.permutation(w * h)
    xs, ys = (order % w).astype(np.int32), (order // w).astype(np.int32)
    vals = _values(rng, 4 * w * h).reshape(-1, 4)
    name, text = _store_p_kernel("2d", vec, "trap")
    _run(_kernel(name, text), [s.handle, vals, _coords("2d", xs, ys)], w * h)
    want = _store_reference(s, vals, vec, zip(np.zeros_like(xs), ys, xs))
    K.check_equal(s.texels().astype(np.uint64).ravel(), want.ravel(), label=f"{fmt}x{nch} v{vec}")


@pytest.mark.parametrize("g", GEOMS)
@pytest.mark.parametrize("clamp", ["clamp", "zero"])
def test_sust_p_geometries_out_of_range(rng, g, clamp):
    """x counts texels; y, z and the layer as their geometry has them. Out of range, .zero drops the store and
    .clamp moves it to the nearest texel: here only onto texels no other thread writes. (The layer stays in
    range: the probe measured x and y out of range only.)"""
    w = int(rng.integers(3, 12))
    h = int(rng.integers(2, 6)) if g in ("2d", "3d", "a2d") else 0
    d = int(rng.integers(2, 4)) if g in ("3d", "a1d", "a2d") else 0
    s = Surface("u32", 1, w, h, d, layered=g.startswith("a"), rng=rng)
    dims = [max(d, 1), max(h, 1), w]
    cells = [(zz, yy, xx) for zz in range(dims[0]) for yy in range(dims[1]) for xx in range(dims[2])]
    rng.shuffle(cells)
    coords, targets = [], []
    for zz, yy, xx in cells[: len(cells) * 3 // 4]:
        c = [zz, yy, xx]
        if clamp == "clamp":        # an edge texel: reach it from outside, as often as not
            for k, n in enumerate(dims):
                if (k == 0 and (not d or g.startswith("a"))) or (k == 1 and not h):
                    continue
                if c[k] == 0 and rng.integers(0, 2):
                    c[k] = -int(rng.integers(1, 1000))
                elif c[k] == n - 1 and rng.integers(0, 2):
                    c[k] = n - 1 + int(rng.integers(1, 1000))
        coords.append(c)
        targets.append((zz, yy, xx))
    if clamp == "zero":             # stores that go nowhere
        for _ in range(len(cells) // 2):
            c = [int(rng.integers(0, n)) for n in dims]
            k = int(rng.choice([k for k in range(3)
                                if not ((k == 0 and (not d or g.startswith("a"))) or (k == 1 and not h))]))
            c[k] = int(rng.choice([-1, -int(rng.integers(2, 5000)), dims[k], dims[k] + int(rng.integers(1, 5000))]))
            coords.append(c)
            targets.append(None)
    coords = np.array(coords, np.int32)
    n = len(coords)
    vals = rng.integers(0, 1 << 32, (n, 4), dtype=np.uint64).astype(np.uint32)
    want = s.texels().copy()
    for t, v in zip(targets, vals):
        if t is not None:
            want[t][0] = v[0]
    name, text = _store_p_kernel(g, 1, clamp)
    _run(_kernel(name, text), [s.handle, vals, _coords(g, coords[:, 2], coords[:, 1], coords[:, 0], coords[:, 0])],
         n, block=32)
    K.check_equal(s.texels().ravel(), want.ravel(), label=f"sust.p.{g}.{clamp}")


def test_sust_p_trap_out_of_range_faults(rng):
    s = Surface("f32", 2, 8, 4, rng=rng)
    name, text = _store_p_kernel("2d", 2, "trap")
    k = _kernel(name, text)
    x = rng.integers(0, 8, 32).astype(np.int32)
    y = rng.integers(0, 4, 32).astype(np.int32)
    bad = int(rng.integers(0, 32))
    x[bad] = int(rng.choice([-1, 8, 100000]))
    with pytest.raises(ptx.KernelFault) as info:
        _run(k, [s.handle, np.zeros((32, 4), np.uint32), _coords("2d", x, y)], 32)
    assert info.value.kind == "fault"   # an H100: CUDA_ERROR_ILLEGAL_ADDRESS


# ------------------------------------------------------------------ sured

_NP = {"u32": np.uint32, "s32": np.int32, "b32": np.uint32, "u64": np.uint64, "s64": np.int64, "b64": np.uint64}
_UFUNC = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or}


def _operands(rng, n, ty, op):
    dt = np.dtype(_NP[ty])
    bits = rng.integers(0, 1 << 63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
    v = bits.astype(np.uint64 if dt.itemsize == 8 else np.uint32, copy=False) if dt.itemsize == 8 \
        else (bits & 0xFFFFFFFF).astype(np.uint32)
    if op == "and":         # clear a few bits each, so the result is not just 0
        v = ~((np.uint32(1) << rng.integers(0, 32, n).astype(np.uint32))
              | (np.uint32(1) << rng.integers(0, 32, n).astype(np.uint32)))
    elif op == "or":
        v = (np.uint32(1) << rng.integers(0, 32, n).astype(np.uint32)) | \
            (np.uint32(1) << rng.integers(0, 32, n).astype(np.uint32))
    v = v.view(dt).copy()
    edges = [0, 1, -1, np.iinfo(dt).min, np.iinfo(dt).max] if dt.kind == "i" else [0, 1, np.iinfo(dt).max,
                                                                                    np.iinfo(dt).max // 2 + 1]
    if op in ("min", "max", "add"):
        k = rng.integers(0, n, n // 8)
        v[k] = rng.choice(np.array(edges, dt), len(k))
    return v


def _reduce(mem, slots, ops, op):
    out = mem.copy()
    keep = slots >= 0
    _UFUNC[op].at(out, slots[keep], ops[keep])
    return out


_RED_B = [("add", "u32"), ("add", "s32"), ("add", "u64"), ("min", "u32"), ("min", "s32"), ("min", "u64"),
          ("min", "s64"), ("max", "u32"), ("max", "s32"), ("max", "u64"), ("max", "s64"), ("and", "b32"),
          ("or", "b32")]


@pytest.mark.parametrize("op, ty", _RED_B, ids=[f"{o}.{t}" for o, t in _RED_B])
@pytest.mark.parametrize("g", ["1d", "2d", "3d"])
def test_sured_b(rng, op, ty, g):
    """Byte-addressed reductions of the instruction's type, from threads of several blocks onto a few texels
    (each texel's result the reduction of every operand sent to it, in any order)."""
    size = 8 if ty.endswith("64") else 4
    w, h, d = int(rng.integers(2, 6)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
    h, d = (0, 0) if g == "1d" else (h, 0) if g == "2d" else (h, d)
    s = Surface("u32", size // 4, w, h, d, rng=rng)
    n = int(rng.integers(600, 3000))
    xs, ys, zs = rng.integers(0, w, n), rng.integers(0, max(h, 1), n), rng.integers(0, max(d, 1), n)
    ops = _operands(rng, n, ty, op)
    mem = s.img.view(_NP[ty]).ravel()
    slots = (zs * max(h, 1) + ys) * w + xs
    want = _reduce(mem, slots, ops, op)
    name, text = _sured_kernel(f"sured.b.{op}.{ty}", g, "trap")
    _run(_kernel(name, text), [s.handle, ops, _coords(g, (xs * size).astype(np.int32), ys, zs)], n)
    K.check_equal(mem, want, label=f"sured.b.{op}.{g}.{ty}")


_RED_P = [(o, "b32", f, n) for o in ("add", "min", "max", "and", "or")
          for f, n in (("u32", 1), ("s32", 1), ("u8", 4), ("s16", 2), ("f32", 1), ("f16", 2))] + \
         [(o, "b64", f, n) for o in ("min", "max") for f, n in (("u32", 2), ("s32", 2), ("s16", 4))]


@pytest.mark.parametrize("op, ty, fmt, nch", _RED_P, ids=[f"{o}.{t}.{f}x{n}" for o, t, f, n in _RED_P])
def test_sured_p(rng, op, ty, fmt, nch):
    """Sample-addressed reductions, as an H100 does them over any format: x counts operands along the row's
    raw words, and the format says signed (s8/s16/s32) or unsigned (the rest, floats too)."""
    size = 8 if ty == "b64" else 4
    w, h = int(rng.integers(2, 9)), int(rng.integers(1, 4))
    s = Surface(fmt, nch, w, h, rng=rng)
    per_row = w * nch * FORMATS[fmt][1] // size
    n = int(rng.integers(600, 3000))
    xs, ys = rng.integers(0, per_row, n), rng.integers(0, h, n)
    signed = FORMATS[fmt][2] == "s"
    as_ty = ("s" if signed else "u") + str(8 * size)
    ops = _operands(rng, n, as_ty, op)
    mem = s.img.view(_NP[as_ty]).ravel()
    want = _reduce(mem, ys * per_row + xs, ops, op)
    name, text = _sured_kernel(f"sured.p.{op}.{ty}", "2d", "trap")
    _run(_kernel(name, text), [s.handle, ops, _coords("2d", xs.astype(np.int32), ys)], n)
    K.check_equal(mem, want, label=f"sured.p.{op}.{ty} over {fmt}x{nch}")


@pytest.mark.parametrize("ty", ["u32", "u64"])
def test_sured_contended_adds_all_count(rng, ty):
    """Many blocks (on every worker thread) adding into the same four texels: not one add lost."""
    size = 8 if ty == "u64" else 4
    s = Surface("u32", size // 4, 4, fill=0)
    n = 256 * 256
    ops = rng.integers(0, 1 << 40 if ty == "u64" else 1 << 20, n, dtype=np.uint64).astype(_NP[ty])
    xs = rng.integers(0, 4, n)
    name, text = _sured_kernel(f"sured.b.add.{ty}", "1d", "trap")
    _run(_kernel(name, text), [s.handle, ops, _coords("1d", (xs * size).astype(np.int32))], n, block=256)
    want = np.array([ops[xs == i].astype(np.uint64).sum() for i in range(4)]).astype(_NP[ty])
    K.check_equal(s.img.view(_NP[ty]).ravel(), want, label="sums")


@pytest.mark.parametrize("kind", ["b", "p"])
@pytest.mark.parametrize("clamp", ["clamp", "zero"])
def test_sured_out_of_range(rng, kind, clamp):
    """.clamp reduces into the nearest texel, .zero drops the operand."""
    w, h = int(rng.integers(2, 9)), int(rng.integers(1, 5))
    s = Surface("u32", 1, w, h, rng=rng)
    n = 2000
    xs = rng.integers(-2 * w, 3 * w, n)
    ys = rng.integers(-3, h + 3, n)
    ops = _operands(rng, n, "u32", "add")
    inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    slots = np.clip(ys, 0, h - 1) * w + np.clip(xs, 0, w - 1)
    if clamp == "zero":
        slots = np.where(inside, slots, -1)
    mem = s.img.view(np.uint32).ravel()
    want = _reduce(mem, slots, ops, "add")
    form = "sured.b.add.u32" if kind == "b" else "sured.p.add.b32"
    name, text = _sured_kernel(form, "2d", clamp)
    _run(_kernel(name, text), [s.handle, ops, _coords("2d", (xs * (4 if kind == "b" else 1)).astype(np.int32), ys)], n)
    K.check_equal(mem, want, label=f"sured.{kind}.{clamp}")


@pytest.mark.parametrize("what", ["trap", "misaligned"])
def test_sured_faults(rng, what):
    """Out of range under .trap, or misaligned in any mode: the launch stops (an H100: ILLEGAL_ADDRESS, and
    MISALIGNED_ADDRESS for the latter)."""
    s = Surface("u32", 1, 8, 4, rng=rng)
    n = 64
    xs = (rng.integers(0, 8, n) * 4).astype(np.int32)
    ys = rng.integers(0, 4, n).astype(np.int32)
    bad = int(rng.integers(0, n))
    xs[bad] = 32 if what == "trap" else xs[bad] + int(rng.integers(1, 4))
    name, text = _sured_kernel("sured.b.add.u32", "2d", "trap" if what == "trap" else "zero")
    with pytest.raises(ptx.KernelFault) as info:
        _run(_kernel(name, text), [s.handle, np.ones(n, np.uint32), _coords("2d", xs, ys)], n)
    assert info.value.kind == ("fault" if what == "trap" else "misaligned")


# ------------------------------------------------------------------ the H100's answers

HW = ".version {v}\n.target sm_80\n.address_size 64\n"


def _hex(b):
    return bytes(np.ascontiguousarray(b).view(np.uint8)).hex()


def _load(text, name="k"):
    return ptx.compile(text, target="host").kernel(name)


def _launch_expect(c, kernel, grid, block, args):
    """Run a probe case's kernel: a fault of the H100's kind where it faulted, else a clean run."""
    if c.get("sync", 0):
        with pytest.raises(ptx.KernelFault) as info:
            K.launch(kernel, grid, block, args)
        assert info.value.kind == {700: "fault", 716: "misaligned"}[c["sync"]], c["case"]
        return False
    K.launch(kernel, grid, block, args)
    return True


def _cases(kind):
    return [c for c in ANSWERS["cases"] if c.get("kind") == kind]


def test_the_driver_refuses_what_nvidia_refuses():
    """Each form the JIT was given: loaded where NVIDIA's loaded it, refused as invalid PTX where it answered
    CUDA_ERROR_INVALID_PTX, refused as unsupported where its JIT crashed (undocumented sured ops)."""
    forms = _cases("jit") + [c for c in ANSWERS["cases"] if "crashed" in c and "form" in c]
    assert forms
    for c in forms:
        text = (HW.format(v=c.get("version") or "8.5") + ".visible .entry k(.param .u64 p)\n{\n"
                "  .reg .u64 %rd<4>;\n  .reg .u32 %r<8>;\n  .reg .f32 %f<4>;\n  .reg .b16 %h<4>;\n"
                "  ld.param.u64 %rd0, [p];\n  ld.param.u32 %r1, [p];\n  ld.param.u32 %r2, [p+4];\n"
                "  ld.param.u32 %r3, [p];\n  ld.param.u32 %r4, [p+4];\n  ld.param.u64 %rd1, [p];\n"
                f"  mov.b32 %f1, %r1;\n  cvt.u16.u32 %h1, %r1;\n  {c['form']}\n  ret;\n}}\n")
        if "crashed" in c:
            with pytest.raises(PTXUnsupportedError):
                ptx.compile(text, target="host")
        elif c["load"] == 0:
            ptx.compile(text, target="host")
        else:
            with pytest.raises(PTXError) as info:
                ptx.compile(text, target="host")
            assert not isinstance(info.value, PTXUnsupportedError), c["form"]
            want = c["log"].split("error   : ")[1].split("\n")[0]
            assert want in str(info.value), (c["form"], str(info.value))


def test_sust_p_stores_what_the_h100_stored():
    """Every format, channel count and vector width of the probe: thread i stores values[(vec i + c) % n]
    as component c at x = i, over a surface of 0xa5 bytes."""
    vals = np.frombuffer(bytes.fromhex(ANSWERS["values"]), np.uint32)
    nv = len(vals)
    cases = _cases("store")
    assert len(cases) == 108
    for c in cases:
        s = Surface(c["format"], c["nch"], nv, fill=0xA5)
        vec = c["vec"]
        data = np.zeros((nv, 4), np.uint32)
        for k in range(vec):
            data[:, k] = vals[(vec * np.arange(nv) + k) % nv]
        name, text = _store_p_kernel("1d", vec, "trap")
        _run(_kernel(name, text), [s.handle, data, _coords("1d", np.arange(nv, dtype=np.int32))], nv)
        assert _hex(s.img) == c["result"], (c["format"], c["nch"], vec)


def test_dense_conversions_match_the_h100():
    """Random floats and floats near every rounding boundary of unorm/snorm 8/16 and half: what the H100
    stored (present once the probe's dense cases were run)."""
    cases = _cases("norm")
    if not cases:
        pytest.skip("no dense conversion answers recorded")
    for c in cases:
        vals = np.frombuffer(bytes.fromhex(c["values"]), np.uint32)
        w, h = c["width"], c["height"]
        s = Surface(c["format"], 1, w, h, fill=0)
        data = np.zeros((w * h, 4), np.uint32)
        data[:, 0] = vals
        i = np.arange(w * h, dtype=np.int32)
        name, text = _store_p_kernel("2d", 1, "trap")
        _run(_kernel(name, text), [s.handle, data, _coords("2d", i % w, i // w)], w * h, block=256)
        got = s.img.view(UDT[FORMATS[c["format"]][1]]).ravel()
        want = np.frombuffer(bytes.fromhex(c["result"]), got.dtype)
        bad = np.nonzero(got != want)[0]
        assert not len(bad), (c["format"], [(hex(vals[k]), hex(got[k]), hex(want[k])) for k in bad[:8]])


def test_geometries_match_the_h100():
    for c in _cases("geom"):
        g, w, h, d = c["geom"], c["width"], c["height"], c["depth"]
        s = Surface("u32", 1, w, h, d, layered=g.startswith("a"), fill=0)
        n = w * max(h, 1) * max(d, 1)
        t = np.arange(n)
        x, y, z = t % w, t // w % max(h, 1), t // (w * max(h, 1))
        data = np.zeros((n, 4), np.uint32)
        data[:, 0] = t + 1
        name, text = _store_p_kernel(g, 1, "trap")
        _run(_kernel(name, text), [s.handle, data, _coords(g, x, y, z, z)], n)
        assert _hex(s.img) == c["result"], g


def test_out_of_range_and_traps_match_the_h100():
    """One thread, one instruction at (x, y) on an 8x4 u32 surface of sentinels: where it lands under .clamp
    and .zero, and the faults (.trap out of range, misaligned .b accesses)."""
    cases = _cases("oor") + _cases("trap")
    assert len(cases) >= 84
    for c in cases:
        s = Surface("u32", 1, 8, 4, fill=0)
        s.img.view(np.uint32).ravel()[:] = 0xEE000000 + np.arange(32, dtype=np.uint32)
        v2 = ".v2" in c["form"]
        data = "%r3" if c["form"].startswith("sured") else "{%r3, %r4}" if v2 else "{%r3}"
        text = (HW.format(v="8.5") + ".visible .entry k(.param .u64 s, .param .u32 x, .param .u32 y)\n{\n"
                "  .reg .u64 %rd<4>;\n  .reg .u32 %r<16>;\n  ld.param.u64 %rd0, [s];\n  ld.param.u32 %r1, [x];\n"
                "  ld.param.u32 %r2, [y];\n  mov.u32 %r3, 0x11110001;\n  mov.u32 %r4, 0x22220002;\n"
                f"  {c['form']}.{c['mode']} [%rd0, {{%r1, %r2}}], {data};\n  ret;\n}}\n")
        if _launch_expect(c, _load(text), 1, 1, [s.handle, c["x"], c["y"]]):
            assert _hex(s.img) == c["result"], (c["form"], c["mode"], c["x"], c["y"])


def test_reductions_match_the_h100():
    """The probe's reductions replayed: its initial texels and operands, thread t on slot t % slots (x in
    bytes for .b, operands for .p), 1024 threads in blocks of 128 (or one a slot, in .zero mode)."""
    cases = _cases("red")
    assert len(cases) >= 36
    for c in cases:
        form, fmt, nch = c["form"], c["format"], c["nch"]
        kind, ty = form.split(".")[1], form.split(".")[-1]
        size = 8 if ty.endswith("64") else 4
        mode = c.get("mode", "trap")
        scale = size if kind == "b" and mode == "trap" else 1
        s = Surface(fmt, nch, c["width"], fill=0)
        s.img.ravel()[:] = np.frombuffer(bytes.fromhex(c["init"]), np.uint8)
        ops = np.frombuffer(bytes.fromhex(c["operands"]), UDT[size]).copy()
        text = (HW.format(v="8.5") + ".visible .entry k(.param .u64 s, .param .u64 v, .param .u32 n)\n{\n"
                "  .reg .u64 %rd<8>;\n  .reg .u32 %r<16>;\n  mov.u32 %r0, %tid.x;\n  mov.u32 %r1, %ctaid.x;\n"
                "  mov.u32 %r3, %ntid.x;\n  mad.lo.u32 %r0, %r1, %r3, %r0;\n  ld.param.u64 %rd0, [s];\n"
                "  ld.param.u64 %rd1, [v];\n  ld.param.u32 %r2, [n];\n  rem.u32 %r5, %r0, %r2;\n"
                f"  mul.lo.u32 %r5, %r5, {scale};\n  mul.wide.u32 %rd2, %r0, {size};\n  add.u64 %rd2, %rd1, %rd2;\n"
                f"  ld.global.u{size * 8} {'%rd3' if size == 8 else '%r6'}, [%rd2];\n"
                f"  {form}.{mode} [%rd0, {{%r5}}], {'%rd3' if size == 8 else '%r6'};\n  ret;\n}}\n")
        grid = c["threads"] // c["block"]
        if _launch_expect(c, _load(text), grid, c["block"], [s.handle, ops, c["slots"]]):
            assert _hex(s.img) == c["result"], (form, fmt, nch)
