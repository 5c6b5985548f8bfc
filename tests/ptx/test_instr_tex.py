"""tex, tld4, txq, suld.b, sust.b and suq on the CPU target: kernels given a texture.h descriptor's address
as their handle, over fresh random texels and coordinates, checked element by element against numpy."""

import ctypes

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)
from ptx.errors import PTXError
from ptx.runtime.texture import Descriptor, MAGIC

N = 256
W, H = 13, 7


def _kernel(name, body, params, regs):
    ps = ",\n".join(f"  .param .{t} {n}" for n, t in params)
    return (f".visible .entry {name}(\n{ps}\n)\n{{\n{regs}\n"
            "  .reg .u64 %rd<16>;\n  .reg .u32 %r<16>;\n  .reg .f32 %f<16>;\n  .reg .pred %p;\n"
            "  mov.u32 %r0, %tid.x;\n  mov.u32 %r1, %ctaid.x;\n  mov.u32 %r2, %ntid.x;\n"
            "  mad.lo.u32 %r3, %r1, %r2, %r0;\n  ld.param.u32 %r4, [n];\n  setp.ge.u32 %p, %r3, %r4;\n"
            "  @%p bra done;\n  ld.param.u64 %rd0, [tex];\n  mul.wide.u32 %rd1, %r3, 4;\n"
            "  mul.wide.u32 %rd2, %r3, 16;\n"
            f"{body}\ndone:\n  ret;\n}}\n")


_IO = [("tex", "u64"), ("xs", "u64"), ("ys", "u64"), ("out", "u64"), ("n", "u32")]
_LOAD_XY = ("  ld.param.u64 %rd3, [xs];\n  add.u64 %rd3, %rd3, %rd1;\n  ld.global.b32 %r5, [%rd3];\n"
            "  ld.param.u64 %rd4, [ys];\n  add.u64 %rd4, %rd4, %rd1;\n  ld.global.b32 %r6, [%rd4];\n"
            "  mov.b32 %f1, %r5;\n  mov.b32 %f2, %r6;\n"
            "  ld.param.u64 %rd5, [out];\n  add.u64 %rd5, %rd5, %rd2;\n")
_STORE4 = "  st.global.v4.b32 [%rd5], {%r8, %r9, %r10, %r11};\n"

KS = K.KernelSet()
KS.add("tex_f32", _kernel("tex_f32", _LOAD_XY + "  tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%f1, %f2}];\n"
                          "  mov.b32 %r8, %f4;\n  mov.b32 %r9, %f5;\n  mov.b32 %r10, %f6;\n  mov.b32 %r11, %f7;\n"
                          + _STORE4, _IO, ""))
KS.add("tex_s32", _kernel("tex_s32", _LOAD_XY + "  tex.2d.v4.u32.s32 {%r8, %r9, %r10, %r11}, [%rd0, {%r5, %r6}];\n"
                          + _STORE4, _IO, ""))
KS.add("tld4_g", _kernel("tld4_g", _LOAD_XY + "  tld4.g.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%f1, %f2}];\n"
                         "  mov.b32 %r8, %f4;\n  mov.b32 %r9, %f5;\n  mov.b32 %r10, %f6;\n  mov.b32 %r11, %f7;\n"
                         + _STORE4, _IO, ""))
KS.add("query", _kernel("query", "  ld.param.u64 %rd5, [out];\n  add.u64 %rd5, %rd5, %rd2;\n"
                        "  txq.width.b32 %r8, [%rd0];\n  txq.height.b32 %r9, [%rd0];\n"
                        "  txq.normalized_coords.b32 %r10, [%rd0];\n  suq.width.b32 %r11, [%rd0];\n" + _STORE4,
                        _IO, ""))
# one kernel stores (thread id, n) at each thread's texel; a second reads 3 texels on (.zero, .clamp)
KS.add("surf_store", _kernel("surf_store", _LOAD_XY + "  sust.b.2d.v2.b32.trap [%rd0, {%r5, %r6}], {%r3, %r4};\n",
                             _IO, ""))
KS.add("surf_load", _kernel("surf_load", _LOAD_XY +
                            "  add.s32 %r7, %r5, 24;\n"
                            "  suld.b.2d.v2.b32.zero {%r8, %r9}, [%rd0, {%r7, %r6}];\n"
                            "  suld.b.2d.b32.clamp {%r10}, [%rd0, {%r7, %r6}];\n  mov.u32 %r11, 7;\n" + _STORE4,
                            _IO, ""))

# the same in one kernel across bar.sync: the coordinates in `[h, {x, y}]` are live across the barrier
KS.add("surf_bar", _kernel("surf_bar", _LOAD_XY + "  sust.b.2d.v2.b32.trap [%rd0, {%r5, %r6}], {%r3, %r4};\n"
                           "  bar.sync 0;\n  add.s32 %r7, %r5, 24;\n"
                           "  suld.b.2d.v2.b32.zero {%r8, %r9}, [%rd0, {%r7, %r6}];\n"
                           "  suld.b.2d.b32.clamp {%r10}, [%rd0, {%r7, %r6}];\n  mov.u32 %r11, 7;\n" + _STORE4,
                           _IO, ""))
# coordinates in registers of a nested scope (renamed when scopes are flattened)
KS.add("tex_scoped", _kernel("tex_scoped", _LOAD_XY + "  {\n  .reg .f32 %g<3>;\n  mov.f32 %g1, %f1;\n"
                             "  mov.f32 %g2, %f2;\n"
                             "  tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%g1, %g2}];\n  }\n"
                             "  mov.b32 %r8, %f4;\n  mov.b32 %r9, %f5;\n  mov.b32 %r10, %f6;\n  mov.b32 %r11, %f7;\n"
                             + _STORE4, _IO, ""))


def _descriptor(img, fmt, channels, address=1, filt=0, normalized=0):
    d = Descriptor()
    h, w = img.shape[:2]
    d.base = img.ctypes.data
    d.pitch = img.strides[0]
    d.slice = img.strides[0] * h
    d.format, d.channels, d.width, d.height = fmt, channels, w, h
    d.address[:] = [address] * 3
    d.filter, d.normalized = filt, normalized
    d.border[:] = [0.0, 0.0, 0.0, 0.0]
    d.magic = MAGIC
    return d


def _launch(name, d, xs, ys, rng):
    out = K.poison((len(xs), 4), np.uint32, rng)
    K.launch(KS.kernel(name), (1, 1, 1), (len(xs), 1, 1),
             [ctypes.addressof(d), xs, ys, out, len(xs)])
    return out


@pytest.mark.parametrize("name", ["tex_f32", "tex_scoped"])
def test_tex_2d_point_clamp(rng, name):
    img = rng.standard_normal((H, W)).astype(np.float32)
    d = _descriptor(img, 0x20, 1)
    xs = rng.uniform(-3, W + 3, N).astype(np.float32)
    ys = rng.uniform(-3, H + 3, N).astype(np.float32)
    out = _launch(name, d, xs, ys, rng)
    ix = np.clip(np.floor(xs).astype(int), 0, W - 1)
    iy = np.clip(np.floor(ys).astype(int), 0, H - 1)
    K.check_equal(out[:, 0], img[iy, ix].view(np.uint32), label="x")
    K.check_equal(out[:, 1:], np.zeros((N, 3), np.uint32), label="missing channels")


def test_tex_2d_linear_filtering(rng):
    """Bilinear filtering with the hardware's 8-bit weights (the far corner's the rounded product, the rest
    what is left): integer texels and coordinates on a 1/16 grid make every weighted sum exact."""
    img = rng.integers(-1000, 1000, (H, W)).astype(np.float32)
    d = _descriptor(img, 0x20, 1, filt=1)
    xs = (rng.integers(-32, (W + 2) * 16, N) / 16).astype(np.float32)
    ys = (rng.integers(-32, (H + 2) * 16, N) / 16).astype(np.float32)
    out = _launch("tex_f32", d, xs, ys, rng)
    i0, j0 = np.floor(xs - 0.5).astype(int), np.floor(ys - 0.5).astype(int)
    a = ((xs - 0.5 - i0) * 256).astype(np.int64)
    b = ((ys - 0.5 - j0) * 256).astype(np.int64)
    ab = (a * b + 128) >> 8
    t = lambda di, dj: img[np.clip(j0 + dj, 0, H - 1), np.clip(i0 + di, 0, W - 1)].astype(np.float64)  # noqa: E731
    want = ((256 - a - b + ab) * t(0, 0) + (a - ab) * t(1, 0) + (b - ab) * t(0, 1) + ab * t(1, 1)) / 256
    K.check_equal(out[:, 0], want.astype(np.float32).view(np.uint32), label="filtered x")


@pytest.mark.parametrize("address", [0, 2], ids=["wrap", "mirror"])
def test_wrap_and_mirror_clamp_unnormalised_coordinates(rng, address):
    """Wrap and mirror need normalised coordinates; with texel coordinates the texture clamps, as an H200
    does (tests/data/nvidia_address_mode_answers.txt)."""
    img = rng.standard_normal((H, W)).astype(np.float32)
    d = _descriptor(img, 0x20, 1, address=address)
    xs = rng.uniform(-3, W + 3, N).astype(np.float32)
    ys = rng.uniform(-3, H + 3, N).astype(np.float32)
    out = _launch("tex_f32", d, xs, ys, rng)
    ix = np.clip(np.floor(xs).astype(int), 0, W - 1)
    iy = np.clip(np.floor(ys).astype(int), 0, H - 1)
    K.check_equal(out[:, 0], img[iy, ix].view(np.uint32), label="x")


def test_tex_integer_coordinates_border(rng):
    img = rng.integers(0, 1 << 32, (H, W, 2), dtype=np.uint64).astype(np.uint32)
    d = _descriptor(img, 0x03, 2, address=3)
    xs = rng.integers(-3, W + 3, N).astype(np.int32)
    ys = rng.integers(-3, H + 3, N).astype(np.int32)
    out = _launch("tex_s32", d, xs, ys, rng)
    inside = (xs >= 0) & (xs < W) & (ys >= 0) & (ys < H)
    want = np.zeros((N, 4), np.uint32)
    want[inside, :2] = img[ys[inside], xs[inside]]
    K.check_equal(out, want)


def test_tld4_gathers_the_bilinear_footprint(rng):
    img = rng.standard_normal((H, W, 2)).astype(np.float32)
    d = _descriptor(img, 0x20, 2)
    # on a 1/16 grid, so the 8-bit fixed-point position is exact
    xs = (rng.integers(-32, (W + 2) * 16, N) / 16).astype(np.float32)
    ys = (rng.integers(-32, (H + 2) * 16, N) / 16).astype(np.float32)
    out = _launch("tld4_g", d, xs, ys, rng)
    i0 = np.floor(xs - 0.5).astype(int)
    j0 = np.floor(ys - 0.5).astype(int)
    cx = lambda i: np.clip(i, 0, W - 1)   # noqa: E731
    cy = lambda j: np.clip(j, 0, H - 1)   # noqa: E731
    g = img[..., 1]
    want = np.stack([g[cy(j0 + 1), cx(i0)], g[cy(j0 + 1), cx(i0 + 1)], g[cy(j0), cx(i0 + 1)], g[cy(j0), cx(i0)]], 1)
    K.check_equal(out, want.view(np.uint32))


def test_txq_and_suq(rng):
    w, h = int(rng.integers(1, 500)), int(rng.integers(1, 500))
    img = np.zeros((h, w), np.uint8)
    d = _descriptor(img, 0x01, 1, normalized=int(rng.integers(0, 2)))
    out = _launch("query", d, np.zeros(4, np.float32), np.zeros(4, np.float32), rng)
    K.check_equal(out, np.tile(np.array([w, h, d.normalized, w], np.uint32), (4, 1)))


@pytest.mark.parametrize("one_kernel", [False, True])
def test_surface_store_then_load(rng, one_kernel):
    # a 2D surface of 2 x u32 texels; each thread owns one texel; 8 spare columns for the shifted reads
    sw, sh = N // 4, 4
    img = K.poison((sh, sw, 2), np.uint32, rng)
    d = _descriptor(img, 0x03, 2)
    tx = np.arange(N) % sw
    xs = (tx * 8).astype(np.int32)
    ys = (np.arange(N) // sw).astype(np.int32)
    if one_kernel:
        out = _launch("surf_bar", d, xs, ys, rng)
    else:
        _launch("surf_store", d, xs, ys, rng)
        out = _launch("surf_load", d, xs, ys, rng)
    want_img = np.stack([np.arange(N, dtype=np.uint32), np.full(N, N, np.uint32)], 1).reshape(sh, sw, 2)
    K.check_equal(img.reshape(-1), want_img.reshape(-1), label="stored")
    src = tx + 3
    inside = src < sw
    want = np.zeros((N, 4), np.uint32)
    want[inside, 0:2] = want_img[ys[inside], src[inside]]
    # .clamp (4 bytes): inside, component 0 of the texel; past the row, its last 4 bytes
    want[inside, 2] = want_img[ys[inside], src[inside], 0]
    want[~inside, 2] = want_img[ys[~inside], sw - 1, 1]
    want[:, 3] = 7
    for c in range(4):
        K.check_equal(out[:, c], want[:, c], label=f"loaded[{c}]")


@pytest.mark.parametrize("body, what", [
    ("tex.level.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd0, {%f1, %f2}], %f3, {%r1, %r2};", "offset"),
])
def test_unsupported_forms_are_refused_by_name(body, what):
    decl = ".global .texref tref;\n" if "tref" in body else ""
    text = (K.HEADER + decl + ".visible .entry k(.param .u64 p)\n{\n"
            "  .reg .u64 %rd<4>;\n  .reg .u32 %r<4>;\n  .reg .f32 %f<8>;\n"
            f"  ld.param.u64 %rd0, [p];\n  {body}\n  ret;\n}}\n")
    import ptx
    with pytest.raises(PTXError, match=what):
        ptx.compile(text, target="host")
