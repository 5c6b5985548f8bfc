"""NVIDIA's texture answers (tests/data/nvidia_texture_answers.json) replayed through the CPU runtime's
texture.c: each case's descriptor, coordinates as PTX passes them, and the hardware's 32-bit results."""

from __future__ import annotations

import ctypes
import json
import struct
from pathlib import Path

from ptx.runtime.texture import Descriptor, MAGIC, TYPES

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia_texture_answers.json"
FORMAT_CODES = {"u8": 0x01, "u16": 0x02, "u32": 0x03, "s8": 0x08, "s16": 0x09, "s32": 0x0A, "f16": 0x10,
                "f32": 0x20}
SIZES = {"u8": 1, "s8": 1, "u16": 2, "s16": 2, "f16": 2, "u32": 4, "s32": 4, "f32": 4}
ADDRESS = {"wrap": 0, "clamp": 1, "mirror": 2, "border": 3}
GEOM = {"1d": 0, "2d": 1, "3d": 2, "a1d": 3, "a2d": 4, "cube": 5, "fetch": 0}


def cases():
    return [c for c in json.loads(DATA.read_text())["cases"] if c["create"] == 0]


def descriptor(case, buf) -> Descriptor:
    d = Descriptor()
    row = case["width"] * case["channels"] * SIZES[case["format"]]
    d.base = ctypes.addressof(buf)
    d.pitch = row
    d.slice = row * max(case["height"], 1)
    d.format = FORMAT_CODES[case["format"]]
    d.channels = case["channels"]
    d.width, d.height, d.depth = case["width"], case["height"], case["depth"]
    d.layers = case["layers"]
    d.linear = 1 if case["kind"] == "fetch" else 0
    d.address[:] = [ADDRESS[case["address"]]] * 3
    d.filter = 1 if case["filter"] == "linear" else 0
    d.read_normalized = 1 if case["read"] == "normalized" else 0
    d.normalized = case["normalized"]
    d.border[:] = case["border"]
    d.magic = MAGIC
    return d


def ptx_coords(case, c):
    """The probe's (x, y, z, layer) float bits as the PTX instruction's coordinate vector."""
    x, y, z, layer = (int(h, 16) for h in c)
    as_int = int(struct.unpack("<f", struct.pack("<I", layer))[0]) & 0xFFFFFFFF
    kind = case["kind"]
    if kind == "a2d":
        return [as_int, x, y, 0]
    if kind == "a1d":
        return [as_int, x, 0, 0]
    if kind == "fetch":
        return [int(struct.unpack("<f", struct.pack("<I", x))[0]) & 0xFFFFFFFF, 0, 0, 0]
    return [x, y, z, 0]


def replay(lib, case):
    """[(coords, ours, nvidia)] for every sample of `case`, run through lib's ptx_tex_fetch/gather."""
    buf = ctypes.create_string_buffer(bytes.fromhex(case["data"]), max(len(case["data"]) // 2, 1))
    d = descriptor(case, buf)
    rtype = TYPES[case["ret"]]
    out = []
    for c, want in zip(case["coords"], case["results"]):
        co = (ctypes.c_uint32 * 4)(*ptx_coords(case, c))
        got = (ctypes.c_uint32 * 4)(0xA5A5A5A5, 0xA5A5A5A5, 0xA5A5A5A5, 0xA5A5A5A5)
        kind = case["kind"]
        if kind.startswith("gather"):
            lib.ptx_tex_gather(ctypes.byref(d), int(kind[-1]), 1, rtype, 0, co, got)
        else:
            lib.ptx_tex_fetch(ctypes.byref(d), GEOM[kind], rtype, 1 if kind == "fetch" else 0, co, got)
        out.append((c, list(got), [int(h, 16) for h in want]))
    return out
