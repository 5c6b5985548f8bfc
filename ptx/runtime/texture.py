"""texture.h's descriptor as a ctypes structure: what a texture or surface handle points to on the CPU,
filled by whoever creates the object (the driver) and read by kernel code through texture.c."""

from __future__ import annotations

import ctypes

MAGIC = 0x54585452
FORMATS = {0x01: 1, 0x02: 2, 0x03: 4, 0x08: 1, 0x09: 2, 0x0A: 4, 0x10: 2, 0x20: 4}   # code -> bytes
GEOMETRIES = ("1d", "2d", "3d", "a1d", "a2d", "cube", "acube", "2dms", "a2dms")
TYPES = {"f32": 0, "s32": 1, "u32": 2, "f16": 3}
CLAMPS = {"trap": 0, "clamp": 1, "zero": 2}
QUERIES = ("width", "height", "depth", "channel_data_type", "channel_order", "normalized_coords",
           "filter_mode", "addr_mode_0", "addr_mode_1", "addr_mode_2", "array_size", "num_mipmap_levels",
           "num_samples")
ENTRY_POINTS = ("ptx_tex_fetch", "ptx_tex_gather", "ptx_tex_query", "ptx_surf_access", "ptx_tex_fetch_mip",
                "ptx_tex_query_level", "ptx_tex_sampled", "ptx_sampler_query", "ptx_handle_is",
                "ptx_surf_store_p", "ptx_surf_reduce")
MAX_LEVELS = 16
TEX_CUBEMAP = 1          # tex_flags
MIP_MODES = {"base": 0, "level": 1, "grad": 2}


class Level(ctypes.Structure):
    """One level of a mipmapped texture (texture.h's ptx_texture_level)."""
    _fields_ = [("base", ctypes.c_uint64), ("pitch", ctypes.c_uint64), ("slice", ctypes.c_uint64),
                ("width", ctypes.c_uint32), ("height", ctypes.c_uint32), ("depth", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)]


class Descriptor(ctypes.Structure):
    _fields_ = [("base", ctypes.c_uint64), ("pitch", ctypes.c_uint64), ("slice", ctypes.c_uint64),
                ("format", ctypes.c_uint32), ("channels", ctypes.c_uint32),
                ("width", ctypes.c_uint32), ("height", ctypes.c_uint32), ("depth", ctypes.c_uint32),
                ("layers", ctypes.c_uint32), ("linear", ctypes.c_uint32),
                ("address", ctypes.c_uint32 * 3), ("filter", ctypes.c_uint32),
                ("read_normalized", ctypes.c_uint32), ("normalized", ctypes.c_uint32),
                ("border", ctypes.c_float * 4), ("magic", ctypes.c_uint32), ("filtering", ctypes.c_uint32),
                ("mip_levels", ctypes.c_uint32), ("mip_filter", ctypes.c_uint32), ("lod_bias", ctypes.c_float),
                ("min_lod", ctypes.c_float), ("max_lod", ctypes.c_float), ("max_anisotropy", ctypes.c_uint32),
                ("tex_flags", ctypes.c_uint32), ("level", Level * MAX_LEVELS)]


SAMPLER_MAGIC = 0x534D504C
SAMPLER_MODES = ("wrap", "mirror", "clamp_ogl", "clamp_to_edge", "clamp_to_border")   # PTX_SA_*, PTX's enum
QUERY_FORCE_UNNORMALIZED = 13
KINDS = {"texref": 0, "samplerref": 1, "surfref": 2}     # PTX_KIND_*


class Sampler(ctypes.Structure):
    """texture.h's ptx_sampler: a .samplerref's filtering and addressing (independent texturing mode)."""
    _fields_ = [("magic", ctypes.c_uint32), ("filter", ctypes.c_uint32), ("mode", ctypes.c_uint32 * 3),
                ("force_unnormalized", ctypes.c_uint32)]
