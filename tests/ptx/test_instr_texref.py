"""Texture, sampler and surface references (.texref, .samplerref, .surfref) in both texturing modes: tex, tld4,
txq, suld/sust/suq, mov and istypep through module variables, registers and kernel parameters, over fresh random
texels and coordinates, outputs poisoned, every element checked against numpy. A reference's variable is
bound here as the driver binds it (zluda_py/driver/texref.py): it holds the address of a texture.h descriptor."""

import ctypes

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)
from ptx.errors import PTXError, PTXSemanticError, PTXUnsupportedError
from ptx.runtime.texture import MAGIC, SAMPLER_MAGIC, Descriptor, Sampler

pytestmark = pytest.mark.skipif(K.ON_GPU or K.BACKEND == "null",
                                reason="NVIDIA's CUDA 13 driver refuses these modules "
                                       "(tests/data/nvidia_texref_answers.json)")

N = 200
W, H = 8, 4             # powers of two: normalised coordinates scale to texel ones exactly
WRAP, CLAMP, MIRROR, BORDER = 0, 1, 2, 3


def _hdr(independent):
    return K.HEADER.replace("sm_86", "sm_86, texmode_independent" if independent else "sm_86")


_PRE = ("  .reg .u64 %rd<16>;\n  .reg .u32 %r<16>;\n  .reg .f32 %f<16>;\n  .reg .pred %p<4>;\n"
        "  mov.u32 %r0, %tid.x;\n  mov.u32 %r1, %ctaid.x;\n  mov.u32 %r2, %ntid.x;\n  mad.lo.u32 %r3, %r1, %r2, %r0;\n"
        "  ld.param.u32 %r4, [n];\n  setp.ge.u32 %p0, %r3, %r4;\n  @%p0 bra done;\n  mul.wide.u32 %rd1, %r3, 4;\n"
        "  mul.wide.u32 %rd2, %r3, 16;\n  ld.param.u64 %rd3, [xs];\n  add.u64 %rd3, %rd3, %rd1;\n"
        "  ld.global.f32 %f1, [%rd3];\n  ld.param.u64 %rd4, [ys];\n  add.u64 %rd4, %rd4, %rd1;\n"
        "  ld.global.f32 %f2, [%rd4];\n  ld.param.u64 %rd5, [out];\n")


def _store(k):
    """Thread i's 4 result words to out[k * n + i]."""
    return (f"  mul.wide.u32 %rd6, %r4, {16 * k};\n  add.u64 %rd6, %rd6, %rd2;\n  add.u64 %rd6, %rd6, %rd5;\n"
            "  st.global.v4.f32 [%rd6], {%f4, %f5, %f6, %f7};\n")


_IO = ".param .u64 out, .param .u64 xs, .param .u64 ys, .param .u32 n"
_V = "{%f4, %f5, %f6, %f7}"

UNIFIED = _hdr(False) + f"""
.global .texref tex2;
.global .texref other;
.global .surfref surf;
.visible .entry fetch({_IO})
{{
{_PRE}  tex.2d.v4.f32.f32 {_V}, [tex2, {{%f1, %f2}}];
{_store(0)}  mov.u64 %rd7, tex2;
  tex.2d.v4.f32.f32 {_V}, [%rd7, {{%f1, %f2}}];
{_store(1)}  tld4.r.2d.v4.f32.f32 {_V}, [tex2, {{%f1, %f2}}];
{_store(2)}  tex.2d.v4.f32.f32 {_V}, [other, {{%f1, %f2}}];
{_store(3)}done:
  ret;
}}
.visible .entry param_fetch({_IO}, .param .texref t)
{{
{_PRE}  tex.2d.v4.f32.f32 {_V}, [t, {{%f1, %f2}}];
{_store(0)}  mov.u64 %rd7, t;
  tex.2d.v4.f32.f32 {_V}, [%rd7, {{%f1, %f2}}];
{_store(1)}done:
  ret;
}}
.visible .entry sampler_fetch({_IO}, .param .u64 samp)
{{
{_PRE}  ld.param.u64 %rd9, [samp];
  tex.2d.v4.f32.f32 {_V}, [tex2, %rd9, {{%f1, %f2}}];
{_store(0)}  tex.2d.v4.f32.f32 {_V}, [tex2, other, {{%f1, %f2}}];
{_store(1)}done:
  ret;
}}
.visible .entry query(.param .u64 out)
{{
  .reg .u64 %rd<8>;
  .reg .u32 %r<16>;
  .reg .pred %p<8>;
  ld.param.u64 %rd1, [out];
  txq.width.b32 %r1, [tex2];
  txq.height.b32 %r2, [tex2];
  txq.normalized_coords.b32 %r3, [tex2];
  txq.filter_mode.b32 %r4, [tex2];
  txq.addr_mode_1.b32 %r5, [tex2];
  suq.width.b32 %r6, [surf];
  suq.height.b32 %r7, [surf];
  mov.u64 %rd2, tex2;
  mov.u64 %rd3, surf;
  txq.width.b32 %r8, [%rd2];
  suq.height.b32 %r9, [%rd3];
  istypep.texref %p1, %rd2;
  selp.u32 %r10, 1, 0, %p1;
  istypep.samplerref %p1, %rd2;
  selp.u32 %r11, 1, 0, %p1;
  istypep.surfref %p1, %rd3;
  selp.u32 %r12, 1, 0, %p1;
  mov.u64 %rd4, other;
  istypep.texref %p1, %rd4;
  selp.u32 %r13, 1, 0, %p1;
  st.global.v4.u32 [%rd1], {{%r1, %r2, %r3, %r4}};
  st.global.v4.u32 [%rd1+16], {{%r5, %r6, %r7, %r8}};
  st.global.v4.u32 [%rd1+32], {{%r9, %r10, %r11, %r12}};
  st.global.u32 [%rd1+48], %r13;
  ret;
}}
.visible .entry surf_store(.param .u32 n)
{{
  .reg .u32 %r<8>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %tid.y;
  mad.lo.u32 %r3, %r2, 1000, %r1;
  ld.param.u32 %r5, [n];
  add.u32 %r3, %r3, %r5;
  shl.b32 %r4, %r1, 2;
  sust.b.2d.b32.trap [surf, {{%r4, %r2}}], {{%r3}};
  ret;
}}
.visible .entry surf_param_load(.param .u64 out, .param .surfref s)
{{
  .reg .u32 %r<8>;
  .reg .u64 %rd<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %tid.y;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r6, %r2, %r3, %r1;
  shl.b32 %r4, %r1, 2;
  add.u32 %r4, %r4, 8;
  suld.b.2d.b32.clamp {{%r5}}, [s, {{%r4, %r2}}];
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r6, 4;
  add.u64 %rd1, %rd1, %rd2;
  st.global.u32 [%rd1], %r5;
  ret;
}}
"""

SAMPLERS = ["s_point", "s_lin", "s_unnorm", "s_default"]
INDEPENDENT = _hdr(True) + f"""
.global .texref itex;
.global .samplerref s_point = {{ addr_mode_0 = clamp_to_edge, addr_mode_1 = clamp_to_edge, filter_mode = nearest }};
.global .samplerref s_lin = {{ addr_mode_0 = wrap, addr_mode_1 = mirror, filter_mode = linear }};
.global .samplerref s_unnorm = {{ addr_mode_0 = clamp_to_border, addr_mode_1 = 4, filter_mode = nearest,
                                force_unnormalized_coords = 1 }};
.global .samplerref s_default;
.visible .entry fetch({_IO}, .param .u64 txs, .param .u64 tys)
{{
{_PRE}  tex.2d.v4.f32.f32 {_V}, [itex, s_point, {{%f1, %f2}}];
{_store(0)}  tex.2d.v4.f32.f32 {_V}, [itex, s_lin, {{%f1, %f2}}];
{_store(1)}  tex.2d.v4.f32.f32 {_V}, [itex, s_default, {{%f1, %f2}}];
{_store(3)}  mov.u64 %rd7, itex;
  mov.u64 %rd8, s_lin;
  tex.2d.v4.f32.f32 {_V}, [%rd7, %rd8, {{%f1, %f2}}];
{_store(4)}  tld4.r.2d.v4.f32.f32 {_V}, [itex, s_point, {{%f1, %f2}}];
{_store(5)}  ld.param.u64 %rd3, [txs];
  add.u64 %rd3, %rd3, %rd1;
  ld.global.f32 %f1, [%rd3];
  ld.param.u64 %rd4, [tys];
  add.u64 %rd4, %rd4, %rd1;
  ld.global.f32 %f2, [%rd4];
  tex.2d.v4.f32.f32 {_V}, [itex, s_unnorm, {{%f1, %f2}}];
{_store(2)}done:
  ret;
}}
.visible .entry param_fetch({_IO}, .param .texref t, .param .samplerref s)
{{
{_PRE}  tex.2d.v4.f32.f32 {_V}, [t, s, {{%f1, %f2}}];
{_store(0)}done:
  ret;
}}
.visible .entry query(.param .u64 out)
{{
  .reg .u64 %rd<8>;
  .reg .u32 %r<8>;
  .reg .pred %p<4>;
  ld.param.u64 %rd1, [out];
""" + "".join(f"""  txq.filter_mode.b32 %r1, [{s}];
  txq.addr_mode_0.b32 %r2, [{s}];
  txq.addr_mode_1.b32 %r3, [{s}];
  txq.force_unnormalized_coords.b32 %r4, [{s}];
  st.global.v4.u32 [%rd1+{16 * k}], {{%r1, %r2, %r3, %r4}};
""" for k, s in enumerate(SAMPLERS)) + """  mov.u64 %rd2, s_lin;
  txq.addr_mode_1.b32 %r1, [%rd2];
  mov.u64 %rd3, itex;
  txq.width.b32 %r2, [%rd3];
  istypep.samplerref %p1, %rd2;
  selp.u32 %r3, 1, 0, %p1;
  istypep.texref %p1, %rd2;
  selp.u32 %r4, 1, 0, %p1;
  st.global.v4.u32 [%rd1+64], {%r1, %r2, %r3, %r4};
  txq.width.b32 %r1, [itex];
  txq.height.b32 %r2, [itex];
  txq.normalized_coords.b32 %r3, [itex];
  istypep.texref %p1, %rd3;
  selp.u32 %r4, 1, 0, %p1;
  st.global.v4.u32 [%rd1+80], {%r1, %r2, %r3, %r4};
  ret;
}
"""


# ------------------------------------------------------------------ binding, as the driver does

def _addresses(mod, name):
    """Where the variable `name` lives in every compiled copy of the module (the emulated AMD lane runs the
    kernel on the AMD code object and on the CPU backend)."""
    if hasattr(mod, "amd"):
        return [mod.amd.emulated().symbols[name][0], mod.host.globals[name][0]]
    return [mod.globals[name][0]]


def _bind(mod, name, value):
    for a in _addresses(mod, name):
        ctypes.c_uint64.from_address(a).value = value


def _descriptor(img, address, filt, normalized, border=(0.0, 0.0, 0.0, 0.0), fmt=0x20):
    d = Descriptor()
    h, w = img.shape[:2]
    d.base, d.pitch, d.slice = img.ctypes.data, img.strides[0], img.strides[0] * h
    d.format, d.channels = fmt, 1 if img.ndim == 2 else img.shape[2]
    d.width, d.height = w, h
    d.address[:] = address
    d.filter, d.normalized = filt, normalized
    d.border[:] = border
    d.magic = MAGIC
    return d


# ------------------------------------------------------------------ numpy's texture unit (f32, one channel)

def _fold(u, mode):
    """A normalised coordinate as wrap and mirror fold it into [0, 1)."""
    fl = np.floor(u)
    if mode == WRAP:
        return u - fl
    if mode == MIRROR:
        return np.where(fl.astype(np.int64) & 1, 1 - (u - fl), u - fl)
    return u


def _index(i, n, mode):
    """texture.c's address(): a texel index under an addressing mode, -1 for the border."""
    if mode == WRAP:
        return i % n
    if mode == MIRROR:
        p = i % (2 * n)
        return np.where(p < n, p, 2 * n - 1 - p)
    if mode == BORDER:
        return np.where((i >= 0) & (i < n), i, -1)
    return np.clip(i, 0, n - 1)


def _texel(img, iy, ix, border):
    inside = (ix >= 0) & (iy >= 0)
    return np.where(inside, img[np.maximum(iy, 0), np.maximum(ix, 0)], border).astype(np.float64)


def _sample(img, xs, ys, modes, linear, normalized, border=0.0):
    """What a 2D f32 texture answers in channel 0 (coordinates on a 1/16 texel grid: the 8-bit weights exact)."""
    h, w = img.shape
    pos = []
    for u, n, mode in ((xs.astype(np.float64), w, modes[0]), (ys.astype(np.float64), h, modes[1])):
        if not normalized and mode in (WRAP, MIRROR):
            mode = CLAMP         # wrap and mirror need normalised coordinates: texel ones clamp
        t = _fold(u, mode) * n if normalized else u
        pos.append((t, n, mode))
    if not linear:
        (tx, nx, mx), (ty, ny, my) = pos
        ix = _index(np.floor(tx).astype(np.int64), nx, mx)
        iy = _index(np.floor(ty).astype(np.int64), ny, my)
        return _texel(img, iy, ix, border)
    q = [np.floor((t - 0.5) * 256 + 0.5).astype(np.int64) for t, _, _ in pos]
    (i0, a), (j0, b) = [(v >> 8, v & 255) for v in q]
    ab = (a * b + 128) >> 8
    (_, nx, mx), (_, ny, my) = pos

    def t(di, dj):
        return _texel(img, _index(j0 + dj, ny, my), _index(i0 + di, nx, mx), border)
    return ((256 - a - b + ab) * t(0, 0) + (a - ab) * t(1, 0) + (b - ab) * t(0, 1) + ab * t(1, 1)) / 256


def _gather(img, xs, ys, comp_img):
    """tld4 of texel coordinates, clamped: (i0,j1) (i1,j1) (i1,j0) (i0,j0)."""
    h, w = img.shape
    i0 = np.floor(xs.astype(np.float64) - 0.5).astype(np.int64)
    j0 = np.floor(ys.astype(np.float64) - 0.5).astype(np.int64)
    cx, cy = (lambda i: np.clip(i, 0, w - 1)), (lambda j: np.clip(j, 0, h - 1))
    return np.stack([comp_img[cy(j0 + 1), cx(i0)], comp_img[cy(j0 + 1), cx(i0 + 1)],
                     comp_img[cy(j0), cx(i0 + 1)], comp_img[cy(j0), cx(i0)]], 1)


def _image(rng):
    return rng.integers(-1000, 1000, (H, W)).astype(np.float32)


def _texel_coords(rng, n, lo=-2, hi=2):
    xs = (rng.integers(lo * 16, (W + hi) * 16, n) / 16).astype(np.float32)
    ys = (rng.integers(lo * 16, (H + hi) * 16, n) / 16).astype(np.float32)
    return xs, ys


def _launch(mod, name, args, n, rng, extra=(), slots=4):
    out = K.poison((slots, n, 4), np.float32, rng)
    K.launch(mod.kernel(name), (1, 1, 1), (n, 1, 1), [out, *args, n, *extra])
    return out


def _check(got, want_x, label):
    """Channel 0 as numpy says; the missing channels of a one-channel texture 0."""
    K.check_equal(got[:, 0].view(np.uint32), want_x.astype(np.float32).view(np.uint32), label=label)
    K.check_equal(got[:, 1:].view(np.uint32).reshape(-1), np.zeros(3 * len(got), np.uint32),
                  label=label + " (y, z, w)")


# ------------------------------------------------------------------ unified mode

def test_unified_reference_by_name_register_and_gather(rng):
    mod = K.compile_text(UNIFIED)
    img = _image(rng)
    filt = int(rng.integers(0, 2))
    d = _descriptor(img, [CLAMP] * 3, filt, 0)
    _bind(mod, "tex2", ctypes.addressof(d))
    _bind(mod, "other", 0)          # never bound: reads 0
    xs, ys = _texel_coords(rng, N)
    out = _launch(mod, "fetch", [xs, ys], N, rng)
    want = _sample(img, xs, ys, (CLAMP, CLAMP), filt, False)
    _check(out[0], want, "tex [tex2]")
    _check(out[1], want, "tex [mov.u64 of tex2]")
    K.check_equal(out[2].view(np.uint32).reshape(-1), _gather(img, xs, ys, img).view(np.uint32).reshape(-1),
                  label="tld4 [tex2]")
    K.check_equal(out[3].view(np.uint32).reshape(-1), np.zeros(4 * N, np.uint32), label="unbound reference")


@pytest.mark.parametrize("modes", [(WRAP, MIRROR), (MIRROR, BORDER), (BORDER, WRAP)], ids=["wm", "mb", "bw"])
def test_unified_reference_normalised_addressing(rng, modes):
    """A rebinding is what the next launch sees: the same module, the reference pointed at a new descriptor."""
    mod = K.compile_text(UNIFIED)
    img = _image(rng)
    border = float(rng.integers(-50, 50))
    d = _descriptor(img, [*modes, CLAMP], 1, 1, border=(border, 0, 0, 0))
    _bind(mod, "tex2", ctypes.addressof(d))
    xs, ys = _texel_coords(rng, N, -12, 12)
    out = _launch(mod, "fetch", [xs / W, ys / H], N, rng)
    want = _sample(img, xs / W, ys / H, modes, True, True, border)
    _check(out[0], want, f"tex, modes {modes}")
    _check(out[1], want, f"tex through a register, modes {modes}")


def test_texref_kernel_parameter(rng):
    """A .param .texref holds a handle: a texture object's (a descriptor's address)."""
    mod = K.compile_text(UNIFIED)
    img = _image(rng)
    d = _descriptor(img, [CLAMP] * 3, 0, 0)
    xs, ys = _texel_coords(rng, N)
    out = _launch(mod, "param_fetch", [xs, ys], N, rng, extra=[ctypes.addressof(d)], slots=2)
    want = _sample(img, xs, ys, (CLAMP, CLAMP), False, False)
    _check(out[0], want, "tex [t]")
    _check(out[1], want, "tex [mov.u64 of t]")


def test_unified_mode_sampler_of_another_texture(rng):
    """[texture, sampler, {c}] in unified mode (ptxas takes it): the texels of the first, the filtering,
    addressing and normalisation of the second (a handle, or a .texref); the border colour stays the texture's."""
    mod = K.compile_text(UNIFIED)
    img, unused = _image(rng), _image(rng)
    border = float(rng.integers(-50, 50))
    d = _descriptor(img, [WRAP] * 3, 0, 0, border=(border, 0, 0, 0))
    lin = _descriptor(unused, [CLAMP] * 3, 1, 0)
    edge = _descriptor(unused, [BORDER, MIRROR, CLAMP], 0, 1)
    _bind(mod, "tex2", ctypes.addressof(d))
    _bind(mod, "other", ctypes.addressof(edge))
    xs, ys = _texel_coords(rng, N, -12, 12)
    out = _launch(mod, "sampler_fetch", [xs, ys], N, rng, extra=[ctypes.addressof(lin)], slots=2)
    _check(out[0], _sample(img, xs, ys, (CLAMP, CLAMP), True, False), "sampler: a handle (linear, clamp)")
    out = _launch(mod, "sampler_fetch", [xs / W, ys / H], N, rng, extra=[ctypes.addressof(lin)], slots=2)
    _check(out[1], _sample(img, xs / W, ys / H, (BORDER, MIRROR), False, True, border),
           "sampler: .texref other (border, mirror, normalised)")


def test_unified_queries_and_istypep(rng):
    mod = K.compile_text(UNIFIED)
    w, h = int(rng.integers(1, 300)), int(rng.integers(1, 300))
    sw, sh = int(rng.integers(1, 300)), int(rng.integers(1, 300))
    img, simg = np.zeros((h, w), np.float32), np.zeros((sh, sw), np.uint32)
    filt, norm, mode = int(rng.integers(0, 2)), int(rng.integers(0, 2)), int(rng.integers(0, 4))
    d = _descriptor(img, [CLAMP, mode, CLAMP], filt, norm)
    s = _descriptor(simg, [CLAMP] * 3, 0, 0, fmt=0x03)
    _bind(mod, "tex2", ctypes.addressof(d))
    _bind(mod, "surf", ctypes.addressof(s))
    _bind(mod, "other", 0)
    out = K.poison(13, np.uint32, rng)
    K.launch(mod.kernel("query"), (1, 1, 1), (1, 1, 1), [out])
    want = [w, h, norm, filt, mode, sw, sh, w, sh, 1, 0, 1, 0]
    K.check_equal(out, np.array(want, np.uint32), label="txq/suq/istypep (the unbound one is no texture)")


def test_surface_reference_store_and_parameter_load(rng):
    mod = K.compile_text(UNIFIED)
    sw, sh = 8, 4
    simg = K.poison((sh, sw), np.uint32, rng)
    s = _descriptor(simg, [CLAMP] * 3, 0, 0, fmt=0x03)
    _bind(mod, "surf", ctypes.addressof(s))
    base = int(rng.integers(0, 1 << 20))
    K.launch(mod.kernel("surf_store"), (1, 1, 1), (sw, sh, 1), [base])
    want = base + np.arange(sh)[:, None] * 1000 + np.arange(sw)[None, :]
    K.check_equal(simg.reshape(-1), want.astype(np.uint32).reshape(-1), label="sust [surf]")
    out = K.poison((sh, sw), np.uint32, rng)
    K.launch(mod.kernel("surf_param_load"), (1, 1, 1), (sw, sh, 1), [out, ctypes.addressof(s)])
    src = np.minimum(np.arange(sw) + 2, sw - 1)          # .clamp: 2 texels on, the last one past the row
    K.check_equal(out.reshape(-1), want[:, src].astype(np.uint32).reshape(-1),
                  label="suld.clamp [s] (a .param .surfref)")


# ------------------------------------------------------------------ independent mode

def test_independent_samplers_override_the_texture(rng):
    """The texture's own state (linear filtering, border addressing) is the samplers' to replace: each sampler's
    filter and addressing apply, normalised coordinates as the texture has them unless the sampler forces
    texel ones."""
    mod = K.compile_text(INDEPENDENT)
    img = _image(rng)
    d = _descriptor(img, [BORDER] * 3, 1, 1, border=(99.0, 0, 0, 0))
    _bind(mod, "itex", ctypes.addressof(d))
    xs, ys = _texel_coords(rng, N, -12, 12)
    txs, tys = _texel_coords(rng, N)
    out = _launch(mod, "fetch", [xs / W, ys / H], N, rng, extra=[txs, tys], slots=6)
    u, v = xs / W, ys / H
    _check(out[0], _sample(img, u, v, (CLAMP, CLAMP), False, True), "s_point (clamp_to_edge, nearest)")
    lin = _sample(img, u, v, (WRAP, MIRROR), True, True)
    _check(out[1], lin, "s_lin (wrap, mirror, linear)")
    _check(out[2], _sample(img, txs, tys, (BORDER, BORDER), False, False, 99.0),
           "s_unnorm (clamp_to_border, force_unnormalized_coords)")
    _check(out[3], _sample(img, u, v, (WRAP, WRAP), False, True), "s_default (no initialiser: wrap, nearest)")
    _check(out[4], lin, "tex [mov.u64 itex, mov.u64 s_lin]")
    # tld4 gathers the footprint s_point's clamp addresses, in texel space
    K.check_equal(out[5].view(np.uint32).reshape(-1), _gather(img, u * W, v * H, img).view(np.uint32).reshape(-1),
                  label="tld4 s_point")


def test_independent_kernel_parameters(rng):
    """.param .texref and .param .samplerref: a descriptor's and a sampler's address."""
    mod = K.compile_text(INDEPENDENT)
    img = _image(rng)
    d = _descriptor(img, [BORDER] * 3, 0, 0)
    mode0, mode1 = int(rng.integers(0, 2)), int(rng.integers(0, 2))      # wrap or mirror
    s = Sampler(magic=SAMPLER_MAGIC, filter=1)
    s.mode[:] = [mode0, mode1, 0]
    xs, ys = _texel_coords(rng, N, -12, 12)
    out = _launch(mod, "param_fetch", [xs / W, ys / H], N, rng, extra=[ctypes.addressof(d), ctypes.addressof(s)],
                  slots=1)
    # the sampler's addressing; the texture's own coordinates are texel ones, so wrap and mirror clamp
    want = _sample(img, xs / W, ys / H, (mode0 * 2, mode1 * 2), True, False)
    _check(out[0], want, "tex [t, s]")


def test_independent_sampler_queries(rng):
    mod = K.compile_text(INDEPENDENT)
    w, h, norm = int(rng.integers(1, 300)), int(rng.integers(1, 300)), int(rng.integers(0, 2))
    d = _descriptor(np.zeros((h, w), np.float32), [CLAMP] * 3, 0, norm)
    _bind(mod, "itex", ctypes.addressof(d))
    out = K.poison(24, np.uint32, rng)
    K.launch(mod.kernel("query"), (1, 1, 1), (1, 1, 1), [out])
    # filter_mode, addr_mode_0, addr_mode_1 (PTX's enum: wrap, mirror, clamp_ogl, clamp_to_edge, clamp_to_border),
    # force_unnormalized_coords of each sampler; then through registers, and the texture's own
    want = [0, 3, 3, 0, 1, 0, 1, 0, 0, 4, 4, 1, 0, 0, 0, 0, 1, w, 1, 0, w, h, norm, 1]
    K.check_equal(out, np.array(want, np.uint32), label="txq / istypep")


# ------------------------------------------------------------------ what is refused, and why

def _module(decls, body, independent=False, params=".param .u64 p"):
    return (_hdr(independent) + decls + f"\n.visible .entry k({params})\n{{\n  .reg .u64 %rd<4>;\n"
            "  .reg .u32 %r<4>;\n  .reg .f32 %f<8>;\n  .reg .pred %p;\n" + body + "\n  ret;\n}\n")


_TEX = "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, "
REFUSED = [
    ("sampler in unified mode", _module(".global .texref t;\n.global .samplerref s;", ""), PTXSemanticError,
     "texmode_independent"),
    ("a 32-bit register as the sampler", _module(".global .texref t;", f"  {_TEX}[t, %rd1, {{%f1, %f2}}];\n"
     "  .reg .b32 %x;\n  tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [t, %x, {%f1, %f2}];"), PTXSemanticError,
     "Arguments mismatch"),
    ("tex [t, c] in independent mode", _module(".global .texref t;", f"  {_TEX}[t, {{%f1, %f2}}];", True),
     PTXSemanticError, "independent texturing mode"),
    ("tex of a surface", _module(".global .surfref s;", f"  {_TEX}[s, {{%f1, %f2}}];"), PTXSemanticError,
     "a .texref or a .u64 register expected"),
    ("suld of a texture", _module(".global .texref t;", "  suld.b.2d.b32.trap {%r1}, [t, {%r1, %r1}];"),
     PTXSemanticError, "a .surfref or a .u64 register expected"),
    ("sampler query of a texture in independent mode",
     _module(".global .texref t;", "  txq.filter_mode.b32 %r1, [t];", True), PTXSemanticError,
     "a .samplerref or a .u64 register expected"),
    ("force_unnormalized_coords in unified mode",
     _module(".global .texref t;", "  txq.force_unnormalized_coords.b32 %r1, [t];"), PTXSemanticError,
     "samplerref"),
    ("ld of a reference", _module(".global .texref t;", "  ld.global.u64 %rd1, [t];"), PTXSemanticError,
     "Illegal operand type"),
    ("a .const reference", _module(".const .texref t;", ""), PTXSemanticError, ".global space"),
    ("a reference in a body", _module("", "  .local .texref t;"), PTXSemanticError, "module scope"),
    ("a .func parameter", _hdr(False) + ".func f(.param .texref t)\n{\n  ret;\n}\n", PTXSemanticError,
     "kernel's parameters"),
    ("both modes", _hdr(True).replace("texmode_independent", "texmode_independent, texmode_unified"),
     PTXSemanticError, "Conflicting"),
    ("an unknown member", _module(".global .texref t = { foo = 1 };", ""), PTXSemanticError,
     "Unrecognized field name 'foo'"),
    ("an unknown value", _module(".global .samplerref s = { filter_mode = bogus };", "", True), PTXSemanticError,
     "Unrecognized initial value symbol 'bogus'"),
    ("an array of references", _module(".global .texref t[4];", ""), PTXUnsupportedError, "an array of .texref"),
]


@pytest.mark.parametrize("text, cls, what", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_with_the_reason(text, cls, what):
    import ptx
    with pytest.raises(cls, match=what):
        ptx.compile(text, target="host")


def test_initialisers_are_read():
    """Members of a texture reference's initialiser are checked and left to the driver, which (as NVIDIA's does
    after such a load) keeps its own defaults; a sampler's become its bytes."""
    import ptx
    text = _module(".global .texref t = { normalized_coords = 1, filter_mode = linear, addr_mode_0 = wrap };\n"
                   ".global .samplerref s = { filter_mode = 1, addr_mode_2 = mirror, force_unnormalized_coords = 1 };",
                   "  mov.u64 %rd1, s;", True)
    m = ptx.parse(text)
    t, s = m.items[0], m.items[1]
    assert [(f.name, f.value) for f in t.init] == [("normalized_coords", 1), ("filter_mode", "linear"),
                                                   ("addr_mode_0", "wrap")]
    mod = ptx.compile(text, target="host")
    addr, size = mod.globals["s"]
    got = Sampler.from_address(addr)
    assert (got.magic, got.filter, list(got.mode), got.force_unnormalized) == (SAMPLER_MAGIC, 1, [0, 0, 1], 1)
    assert mod.globals["t"][1] == 8 and ctypes.c_uint64.from_address(mod.globals["t"][0]).value == 0


def test_ptr_texref_parameter_parses():
    """LLVM's image parameters: `.param .u64 .ptr .texref t`, a u64 holding a handle."""
    import ptx
    m = ptx.parse(_module("", "  ld.param.u64 %rd1, [t];", params=".param .u64 .ptr .texref t"))
    p = m.entries()[0].params[0]
    assert (p.type.name, p.ptr_space) == ("u64", "texref")


def test_errors_name_a_line():
    with pytest.raises(PTXError) as e:
        import ptx
        ptx.compile(_module(".global .texref t;", f"  {_TEX}[t, {{%f1, %f2}}];", True), target="host")
    assert e.value.line > 0
