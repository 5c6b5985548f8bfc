"""NVIDIA's mipmapped-texture answers (tests/data/nvidia_mipmap_answers.json, from scripts/nvidia_mipmap_probe.cu)
replayed through the CPU runtime's texture.c: each case's levels as a texture.h descriptor, its coordinates
and LOD or gradients as PTX passes them, and the hardware's 32-bit results."""

from __future__ import annotations

import ctypes
import json
import struct
from pathlib import Path

from ptx.runtime.texture import Descriptor, MAGIC, MIP_MODES, TEX_CUBEMAP

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia_mipmap_answers.json"
FORMATS = {"f32": (0x20, 1), "u8": (0x01, 4)}          # the probe's formats: code, channels
GEOM = {"1d": 0, "2d": 1, "3d": 2, "a1d": 3, "a2d": 4, "cube": 5, "gather0": 1}
ADDRESS = {"wrap": 0, "clamp": 1, "mirror": 2, "border": 3}


def answers():
    return json.loads(DATA.read_text())


def f32(h: str) -> float:
    return struct.unpack("<f", struct.pack("<I", int(h, 16)))[0]


def level_extents(tex, level):
    w = max(1, tex["width"] >> level)
    h = max(1, tex["height"] >> level) if tex["height"] else 0
    d = max(1, tex["depth"] >> level) if tex["kind"] == "3d" else 0
    return w, h, d


class Texture:
    """A probe texture's levels in memory, and descriptors over them."""

    def __init__(self, tex):
        self.tex = tex
        self.bufs = [ctypes.create_string_buffer(bytes.fromhex(h), len(h) // 2) for h in tex["data"]]

    def descriptor(self, case) -> Descriptor:
        tex = self.tex
        fmt, nch = FORMATS[tex["format"]]
        d = Descriptor()
        d.magic = MAGIC
        d.format, d.channels = fmt, nch
        d.layers = tex["layers"]
        d.mip_levels = tex["levels"]
        for i, buf in enumerate(self.bufs):
            w, h, dd = level_extents(tex, i)
            lv = d.level[i]
            lv.base = ctypes.addressof(buf)
            lv.pitch = w * 4
            lv.slice = w * 4 * max(h, 1)
            lv.width, lv.height, lv.depth = w, h, dd
        first = d.level[0]
        d.base, d.pitch, d.slice = first.base, first.pitch, first.slice
        d.width, d.height, d.depth = first.width, first.height, first.depth
        d.address[:] = [ADDRESS[case["address"]]] * 3
        d.filter = 1 if case["filter"] == "linear" else 0
        d.read_normalized = 1 if tex["format"] == "u8" else 0
        d.normalized = case["normalized"]
        d.border[:] = case["border"]
        d.mip_filter = 1 if case["mipfilter"] == "linear" else 0
        d.lod_bias, d.min_lod, d.max_lod = f32(case["bias"]), f32(case["min_clamp"]), f32(case["max_clamp"])
        d.max_anisotropy = min(max(case["aniso"], 1), 16)
        d.tex_flags = TEX_CUBEMAP if tex["kind"] == "cube" else 0
        return d


def ptx_coords(case, c):
    """The probe's coordinate words (x[, y[, z]][, layer as a float]) as the PTX coordinate vector."""
    words = [int(h, 16) for h in c]
    kind = case["kind"]
    if case["mode"] == "ilevel":        # integer texel coordinates, stored by the probe as floats
        return [int(f32(h)) & 0xFFFFFFFF for h in c] + [0, 0]
    if kind in ("a1d", "a2d"):
        layer = int(f32(c[-1])) & 0xFFFFFFFF
        return [layer] + words[:-1] + [0] * (4 - len(words))
    return words + [0] * (4 - len(words))


def ptx_args(case, a):
    """tex.level's LOD or tex.grad's dPdx, dPdy as ptx_tex_fetch_mip's eight words."""
    words = [int(h, 16) for h in a]
    if case["mode"] == "ilevel":
        return [int(f32(a[0])) & 0xFFFFFFFF] + [0] * 7
    if case["mode"] == "level":
        return words + [0] * 7
    n = len(words) // 2
    return words[:n] + [0] * (4 - n) + words[n:] + [0] * (4 - n)


def replay(lib, textures, case):
    """[(coords, args, ours, nvidia)] for every sample of `case`, through lib's texture entry points."""
    t = textures[str(case["texture"])]
    d = t.descriptor(case)
    nres = len(case["results"][0])
    shared = len(case["coords"]) == 1
    out = []
    for i, want in enumerate(case["results"]):
        c = case["coords"][0 if shared else i]
        a = case["args"][i] if case["args"] else []
        co = (ctypes.c_uint32 * 4)(*ptx_coords(case, c))
        got = (ctypes.c_uint32 * 4)(*[0xA5A5A5A5] * 4)
        geom = GEOM[case["kind"]]
        if case["kind"] == "gather0":
            lib.ptx_tex_gather(ctypes.byref(d), 0, geom, 0, 0, co, got)
        elif case["mode"] == "plain":
            lib.ptx_tex_fetch(ctypes.byref(d), geom, 0, 0, co, got)
        else:
            mode = MIP_MODES["grad" if case["mode"] == "grad" else "level"]
            ctype = 1 if case["mode"] == "ilevel" else 0
            args = (ctypes.c_uint32 * 8)(*ptx_args(case, a))
            lib.ptx_tex_fetch_mip(ctypes.byref(d), geom, 0, ctype, mode, co, args, got)
        out.append((c, a, list(got)[:nres], [int(h, 16) for h in want]))
    return out
