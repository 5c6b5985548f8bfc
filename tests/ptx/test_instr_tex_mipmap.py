"""tex.level, tex.grad, tex and tld4 on mipmapped textures, txq.level and txq.num_mipmap_levels, on the CPU
target: kernels given a texture.h descriptor (levels in numpy arrays, fresh random texels) as their handle,
outputs poisoned, every element checked against numpy. The hardware's own answers are replayed by
test_texture_mipmap_hw.py; this file checks the instructions end to end against the model those fixed."""

import ctypes
import math
import subprocess

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)
from ptx.runtime.texture import Descriptor, Level, MAGIC, MAX_LEVELS

W, H, LEVELS = 16, 12, 5        # 16x12, 8x6, 4x3, 2x1, 1x1
N = 256


def _kernel(name, body):
    """Thread i: x = xs[i], y = ys[i] (32-bit words), a0..a7 = args[8i..8i+7]; stores {%r8..%r11} at out[4i]."""
    return (f".visible .entry {name}(.param .u64 tex, .param .u64 xs, .param .u64 ys, .param .u64 args,\n"
            "    .param .u64 out, .param .u32 n)\n{\n"
            "  .reg .u64 %rd<16>;\n  .reg .b32 %r<24>;\n  .reg .f32 %f<24>;\n  .reg .pred %p;\n"
            "  mov.u32 %r0, %tid.x;\n  mov.u32 %r1, %ctaid.x;\n  mov.u32 %r2, %ntid.x;\n"
            "  mad.lo.u32 %r3, %r1, %r2, %r0;\n  ld.param.u32 %r4, [n];\n  setp.ge.u32 %p, %r3, %r4;\n"
            "  @%p bra done;\n  ld.param.u64 %rd0, [tex];\n  mul.wide.u32 %rd1, %r3, 4;\n"
            "  mul.wide.u32 %rd2, %r3, 16;\n  mul.wide.u32 %rd6, %r3, 32;\n"
            "  ld.param.u64 %rd3, [xs];\n  add.u64 %rd3, %rd3, %rd1;\n  ld.global.b32 %r5, [%rd3];\n"
            "  ld.param.u64 %rd4, [ys];\n  add.u64 %rd4, %rd4, %rd1;\n  ld.global.b32 %r6, [%rd4];\n"
            "  ld.param.u64 %rd7, [args];\n  add.u64 %rd7, %rd7, %rd6;\n"
            "  ld.global.v4.b32 {%r12, %r13, %r14, %r15}, [%rd7];\n"
            "  ld.global.v4.b32 {%r16, %r17, %r18, %r19}, [%rd7+16];\n"
            "  mov.b32 %f1, %r5;\n  mov.b32 %f2, %r6;\n  mov.b32 %f12, %r12;\n  mov.b32 %f13, %r13;\n"
            "  mov.b32 %f16, %r16;\n  mov.b32 %f17, %r17;\n"
            "  ld.param.u64 %rd5, [out];\n  add.u64 %rd5, %rd5, %rd2;\n"
            f"{body}\n  st.global.v4.b32 [%rd5], {{%r8, %r9, %r10, %r11}};\ndone:\n  ret;\n}}\n")


_F2R = "  mov.b32 %r8, %f4;\n  mov.b32 %r9, %f5;\n  mov.b32 %r10, %f6;\n  mov.b32 %r11, %f7;\n"
KS = K.KernelSet()
KS.add("level", _kernel("level", "  tex.level.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%f1, %f2}], %f12;\n" + _F2R))
KS.add("ilevel", _kernel("ilevel", "  tex.level.2d.v4.f32.s32 {%f4, %f5, %f6, %f7}, [%rd0, {%r5, %r6}], %r12;\n"
                         + _F2R))
KS.add("grad", _kernel("grad", "  tex.grad.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%f1, %f2}], {%f12, %f13},"
                       " {%f16, %f17};\n" + _F2R))
KS.add("plain", _kernel("plain", "  tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%f1, %f2}];\n" + _F2R))
KS.add("tld4", _kernel("tld4", "  tld4.r.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%f1, %f2}];\n" + _F2R))
KS.add("level1d", _kernel("level1d", "  tex.level.1d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%f1}], %f12;\n" + _F2R))
KS.add("grad1d", _kernel("grad1d", "  tex.grad.1d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd0, {%f1}], {%f12}, {%f16};\n"
                         + _F2R))
KS.add("level_a2d", _kernel("level_a2d", "  tex.level.a2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, "
                            "[%rd0, {%r12, %f1, %f2, %f2}], %f13;\n" + _F2R))
KS.add("query", _kernel("query", "  txq.level.width.b32 %r8, [%rd0], %r12;\n  txq.level.height.b32 %r9, [%rd0], %r12;\n"
                        "  txq.num_mipmap_levels.b32 %r10, [%rd0];\n  txq.depth.b32 %r11, [%rd0];\n"))


class Mip:
    """Levels of random integer texels (every blend of two is exact in float) and a descriptor over them."""

    def __init__(self, rng, w=W, h=H, levels=LEVELS, layers=0):
        self.w, self.h, self.layers = w, h, layers
        self.levels = []
        for lv in range(levels):
            lw, lh = max(1, w >> lv), (max(1, h >> lv) if h else 1)
            shape = (max(layers, 1), lh, lw)
            self.levels.append(rng.integers(-2048, 2048, shape).astype(np.float32))

    def descriptor(self, filt=0, mip_filter=0, bias=0.0, lo=0.0, hi=100.0, address=1):
        d = Descriptor()
        d.magic, d.format, d.channels = MAGIC, 0x20, 1
        d.mip_levels = len(self.levels)
        for i, img in enumerate(self.levels):
            lv = d.level[i]
            lv.base = img.ctypes.data
            lv.pitch, lv.slice = img.strides[1], img.strides[0]
            lv.width, lv.height = img.shape[2], (img.shape[1] if self.h else 0)
        d.base, d.pitch, d.slice = d.level[0].base, d.level[0].pitch, d.level[0].slice
        d.width, d.height, d.layers = d.level[0].width, d.level[0].height, self.layers
        d.address[:] = [address] * 3
        d.filter, d.normalized, d.mip_filter = filt, 1, mip_filter
        d.lod_bias, d.min_lod, d.max_lod = bias, lo, hi
        return d

    def texel(self, lv, u, v, layer=0):
        """Point sampling of level lv at normalised (u, v), clamped."""
        img = self.levels[lv][layer]
        x = np.clip(np.floor(u * img.shape[1]).astype(int), 0, img.shape[1] - 1)
        y = np.clip(np.floor(v * img.shape[0]).astype(int), 0, img.shape[0] - 1)
        return img[y, x]


def _launch(name, d, xs, ys, args, rng):
    n = len(xs)
    out = K.poison((n, 4), np.uint32, rng)
    a = np.zeros((n, 8), np.uint32)
    a[:, :args.shape[1]] = args
    K.launch(KS.kernel(name), ((n + 127) // 128, 1, 1), (128, 1, 1),
             [ctypes.addressof(d), np.ascontiguousarray(xs), np.ascontiguousarray(ys), a, out, n])
    return out


def _f32bits(x):
    return np.asarray(x, np.float32).view(np.uint32).reshape(-1, 1)


def _lod_to_level(lod, bias, lo, hi, top, linear):
    """The hardware's LOD pipeline: bias, max then min clamp, the level range, 8 fractional bits truncated;
    (level, blend weight in 1/256)."""
    lod = np.nan_to_num(lod.astype(np.float32) + np.float32(bias), nan=0.0)
    lod = np.maximum(np.minimum(lod, np.float32(hi)), np.float32(lo))
    lod = np.clip(lod, 0, top)
    q = np.floor(lod.astype(np.float64) * 256).astype(np.int64)
    if linear:
        l0, w = q >> 8, q & 255
        w = np.where(l0 >= top, 0, w)
        return np.minimum(l0, top), w
    return (q + 128) >> 8, np.zeros_like(q)


def test_descriptor_layout_matches_texture_h(tmp_path):
    """texture.h's struct and texture.py's ctypes mirror: every field at the same offset, the same size."""
    from ptx.runtime.build import HERE, _compiler
    fields = [f for f, _ in Descriptor._fields_]
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "texture.h"\nint main(void) {\n'
                   + "".join(f'    printf("%zu\\n", offsetof(ptx_texture, {f}));\n' for f in fields)
                   + '    printf("%zu\\n%zu\\n", sizeof(ptx_texture), sizeof(ptx_texture_level));\n}\n')
    exe = tmp_path / "layout"
    subprocess.run([_compiler(), "-I", str(HERE), str(src), "-o", str(exe)], check=True)
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    want = [getattr(Descriptor, f).offset for f in fields] + [ctypes.sizeof(Descriptor), ctypes.sizeof(Level)]
    assert got == want
    assert MAX_LEVELS >= 16          # log2(32768) + 1: the largest mipmapped extent


@pytest.mark.parametrize("mip_filter", [0, 1], ids=["mip_point", "mip_linear"])
def test_tex_level_selects_and_blends_levels(rng, mip_filter):
    m = Mip(rng)
    bias = float(rng.choice([0.0, 0.5, -0.75, 1.25]))
    lo, hi = sorted(rng.choice([-1.0, 0.0, 0.75, 1.5, 2.25, 3.0, 10.0], 2, replace=False))
    if rng.integers(0, 4) == 0:
        lo, hi = hi, lo              # crossed clamps: the minimum wins
    d = m.descriptor(mip_filter=mip_filter, bias=bias, lo=lo, hi=hi)
    xs = rng.uniform(-0.2, 1.2, N).astype(np.float32)
    ys = rng.uniform(-0.2, 1.2, N).astype(np.float32)
    lods = (rng.integers(-3 * 256, 7 * 256, N) / 256).astype(np.float32)
    out = _launch("level", d, xs, ys, _f32bits(lods), rng)
    l0, w = _lod_to_level(lods, bias, lo, hi, LEVELS - 1, mip_filter)
    t0 = np.choose(l0, [m.texel(i, xs, ys) for i in range(LEVELS)])
    t1 = np.choose(np.minimum(l0 + 1, LEVELS - 1), [m.texel(i, xs, ys) for i in range(LEVELS)])
    want = ((t0.astype(np.float64) * (256 - w) + t1.astype(np.float64) * w) / 256).astype(np.float32)
    K.check_equal(out[:, 0], want.view(np.uint32), label="x")
    K.check_equal(out[:, 1:], np.zeros((N, 3), np.uint32), label="missing channels")


def test_tex_level_integer_lod_names_a_level(rng):
    """tex.level with .s32 coordinates: texel indices of the level the LOD names, whatever the bias and clamps;
    a LOD outside the chain reads 0."""
    m = Mip(rng)
    d = m.descriptor(mip_filter=1, bias=0.5, lo=1.5, hi=2.5)
    lods = rng.integers(-2, LEVELS + 3, N).astype(np.int32)
    xs = rng.integers(-3, W + 3, N).astype(np.int32)
    ys = rng.integers(-3, H + 3, N).astype(np.int32)
    out = _launch("ilevel", d, xs, ys, lods.view(np.uint32).reshape(-1, 1), rng)
    want = np.zeros(N, np.float32)
    for i in range(N):
        if 0 <= lods[i] < LEVELS:
            img = m.levels[lods[i]][0]
            want[i] = img[np.clip(ys[i], 0, img.shape[0] - 1), np.clip(xs[i], 0, img.shape[1] - 1)]
    K.check_equal(out[:, 0], want.view(np.uint32), label="x")


def _approx_length(x, y):
    ax, ay = np.abs(x), np.abs(y)
    return np.maximum(ax, ay) + np.minimum(ax, ay) * (11 / 32)


def test_tex_grad_picks_the_level_of_the_footprint(rng):
    """tex.grad with nearest-level filtering: log2 of the footprint's longer extent, the longest of the two
    gradients and 11/16 of their sum and difference, each length the longest texel-space component plus 11/32
    of the other. Samples whose LOD lies within 0.02 of a level boundary are left to the hardware replay (the
    LOD unit's 10-bit gradients and log2 table decide those)."""
    m = Mip(rng)
    bias = float(rng.choice([0.0, 0.25, -0.5]))
    d = m.descriptor(bias=bias)
    xs = rng.uniform(0, 1, N).astype(np.float32)
    ys = rng.uniform(0, 1, N).astype(np.float32)
    g = np.zeros((N, 8), np.float32)
    mag = np.exp2(rng.uniform(-2, 6, (N, 2)))
    ang = rng.uniform(0, 2 * np.pi, (N, 2))
    axis = rng.integers(0, 3, N)        # some gradients along an axis, where the length is exact
    ang[axis == 0] = np.round(ang[axis == 0] / (np.pi / 2)) * (np.pi / 2)
    g[:, 0], g[:, 1] = mag[:, 0] * np.cos(ang[:, 0]) / W, mag[:, 0] * np.sin(ang[:, 0]) / H
    g[:, 4], g[:, 5] = mag[:, 1] * np.cos(ang[:, 1]) / W, mag[:, 1] * np.sin(ang[:, 1]) / H
    out = _launch("grad", d, xs, ys, g.view(np.uint32), rng)
    a = g[:, [0, 1]].astype(np.float64) * [W, H]
    b = g[:, [4, 5]].astype(np.float64) * [W, H]
    rho = np.maximum.reduce([_approx_length(*a.T), _approx_length(*b.T),
                             _approx_length(*(a + b).T) * 11 / 16, _approx_length(*(a - b).T) * 11 / 16])
    lod = np.log2(rho) + bias
    clear = np.abs((np.clip(lod, 0, LEVELS - 1) % 1) - 0.5) > 0.02
    level = np.clip(np.floor(lod + 0.5), 0, LEVELS - 1).astype(int)
    want = np.choose(level, [m.texel(i, xs, ys) for i in range(LEVELS)])
    assert clear.sum() > N // 2
    K.check_equal(out[clear, 0], want[clear].view(np.uint32), label="x")


def test_plain_tex_and_tld4_on_a_mipmapped_texture(rng):
    """tex without .level/.grad: LOD 0 under the clamps, without the bias; tld4: always level 0."""
    m = Mip(rng)
    lo = float(rng.choice([0.0, 1.0, 2.0]))
    d = m.descriptor(bias=2.0, lo=lo, hi=100.0)
    xs = rng.uniform(-0.1, 1.1, N).astype(np.float32)
    ys = rng.uniform(-0.1, 1.1, N).astype(np.float32)
    out = _launch("plain", d, xs, ys, np.zeros((N, 1), np.uint32), rng)
    K.check_equal(out[:, 0], m.texel(int(lo), xs, ys).view(np.uint32), label="tex")
    out = _launch("tld4", d, xs, ys, np.zeros((N, 1), np.uint32), rng)
    img = m.levels[0][0]
    # the footprint from the position in 8 fractional bits, rounded (as the filter places it)
    i0 = np.floor((xs.astype(np.float64) * W - 0.5) * 256 + 0.5).astype(int) >> 8
    j0 = np.floor((ys.astype(np.float64) * H - 0.5) * 256 + 0.5).astype(int) >> 8
    t = lambda i, j: img[np.clip(j, 0, H - 1), np.clip(i, 0, W - 1)]   # noqa: E731
    want = np.stack([t(i0, j0 + 1), t(i0 + 1, j0 + 1), t(i0 + 1, j0), t(i0, j0)], 1)
    K.check_equal(out, want.view(np.uint32), label="tld4")


def test_linear_filtering_blended_across_levels(rng):
    """Linear filtering in each level (its own extents) blended by the LOD fraction: the level's weight split
    along x (the upper texel's share rounded), then along y (the lower texel's share rounded); a LOD on a level
    filters that level alone. Coordinates in 1/4096 (exact in texels of every level) and integer texels make
    every weighted sum exact."""
    m = Mip(rng)
    d = m.descriptor(filt=1, mip_filter=1)
    lods = (rng.integers(0, (LEVELS - 1) * 256, N) / 256).astype(np.float32)
    l0, w = _lod_to_level(lods, 0.0, 0.0, 100.0, LEVELS - 1, True)
    xs = (rng.integers(-64, 4096 + 64, N) / 4096).astype(np.float32)
    ys = (rng.integers(-64, 4096 + 64, N) / 4096).astype(np.float32)
    out = _launch("level", d, xs, ys, _f32bits(lods), rng)
    r8 = lambda n: (n + 128) >> 8     # noqa: E731
    want = np.zeros(N, np.float64)
    for i in range(N):
        total = 0
        for k, wl in ((0, 256 - int(w[i])), (1, int(w[i]))):
            lv = min(int(l0[i]) + k, LEVELS - 1)
            if wl == 0:
                continue
            img = m.levels[lv][0]
            h_, w_ = img.shape
            qx = math.floor((float(xs[i]) * w_ - 0.5) * 256 + 0.5)
            qy = math.floor((float(ys[i]) * h_ - 0.5) * 256 + 0.5)
            a, b = qx & 255, qy & 255
            x1, ab = r8(a * wl), r8(a * b)
            for cx, xw in ((0, wl - x1), (1, x1)):
                y0 = r8(xw * (256 - b))
                for cy, tw in ((0, y0), (1, xw - y0)):
                    if wl == 256:   # one level: the plain bilinear weights (the far corner's product rounded)
                        tw = (ab if cy else a - ab) if cx else (b - ab if cy else 256 - a - b + ab)
                    tex = img[min(max((qy >> 8) + cy, 0), h_ - 1), min(max((qx >> 8) + cx, 0), w_ - 1)]
                    total += tw * int(tex)
        want[i] = total / 256
    K.check_equal(out[:, 0], want.astype(np.float32).view(np.uint32), label="x")


def test_one_dimensional_and_layered_levels(rng):
    """tex.level.1d / tex.grad.1d over a 1D chain, tex.level.a2d over layers that every level keeps."""
    m = Mip(rng, w=32, h=0, levels=6)
    d = m.descriptor()
    xs = rng.uniform(-0.1, 1.1, N).astype(np.float32)
    lods = (rng.integers(-256, 7 * 256, N) / 256).astype(np.float32)
    out = _launch("level1d", d, xs, xs, _f32bits(lods), rng)
    level, _ = _lod_to_level(lods, 0, 0, 100, 5, False)
    want = np.choose(level, [m.texel(i, xs, np.zeros(N)) for i in range(6)])
    K.check_equal(out[:, 0], want.view(np.uint32), label="1d level")
    g = np.zeros((N, 8), np.float32)
    k = rng.integers(-2, 7, N)
    g[:, 0] = np.exp2(k + rng.choice([0.25, 0.3, 0.7], N)) / 32 * rng.choice([-1, 1], N)
    out = _launch("grad1d", d, xs, xs, g.view(np.uint32), rng)
    level = np.clip(np.floor(np.log2(np.abs(g[:, 0]) * 32) + 0.5), 0, 5).astype(int)
    want = np.choose(level, [m.texel(i, xs, np.zeros(N)) for i in range(6)])
    K.check_equal(out[:, 0], want.view(np.uint32), label="1d grad")
    m = Mip(rng, w=8, h=8, levels=4, layers=3)
    d = m.descriptor()
    layers = rng.integers(0, 3, N).astype(np.uint32)
    lods = (rng.integers(-256, 5 * 256, N) / 256).astype(np.float32)
    args = np.stack([layers, lods.view(np.uint32)], 1)
    ys = rng.uniform(0, 1, N).astype(np.float32)
    out = _launch("level_a2d", d, xs, ys, args, rng)
    level, _ = _lod_to_level(lods, 0, 0, 100, 3, False)
    want = np.array([m.texel(level[i], xs[i], ys[i], layers[i]) for i in range(N)], np.float32)
    K.check_equal(out[:, 0], want.view(np.uint32), label="a2d level")


def test_txq_level_and_num_mipmap_levels(rng):
    w, h = int(rng.integers(1, 3000)), int(rng.integers(1, 3000))
    levels = int(rng.integers(1, max(w, h).bit_length() + 1))
    d = Descriptor()
    d.magic, d.format, d.channels, d.width, d.height, d.mip_levels = MAGIC, 0x01, 1, w, h, levels
    for i in range(levels):
        d.level[i].width, d.level[i].height = max(1, w >> i), max(1, h >> i)
    lods = rng.integers(-2, 20, N).astype(np.int32)
    out = _launch("query", d, np.zeros(N, np.float32), np.zeros(N, np.float32),
                  lods.view(np.uint32).reshape(-1, 1), rng)
    inside = (lods >= 0) & (lods < levels)
    shift = np.clip(lods, 0, 31)
    want = np.stack([np.where(inside, np.maximum(w >> shift, 1), 0), np.where(inside, np.maximum(h >> shift, 1), 0),
                     np.full(N, levels), np.zeros(N)], 1).astype(np.uint32)
    K.check_equal(out, want)
