"""Legacy texture and surface references: cuModuleGetTexRef/GetSurfRef, cuTexRef*, cuSurfRef*, cuParamSetTexRef.
A module's .texref/.surfref variable holds the address of its reference's descriptor (texture.h), which the
driver rewrites at each Set* once the context's earlier work is done: a launch sees the bindings made before it.
NVIDIA's CUDA 13 driver refuses modules that use texture or sampler references (LEGACY says how we answer)."""

from __future__ import annotations

import ctypes
import os
import re
import struct
import threading

from ptx.runtime.texture import MAGIC, Descriptor
from zluda_py import cmem, handles
from zluda_py.dispatch import export, fatal
from zluda_py.driver import array as arrays
from zluda_py.driver import context as ctxmod
from zluda_py.driver import init, memory
from zluda_py.driver import module as modmod
from zluda_py.driver.allocations import INDEX
from zluda_py.driver.texture import array_descriptor
from zluda_py.errors import (CudaError, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_IMAGE,
                             CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_SUPPORTED)

TRSA_OVERRIDE_FORMAT = 0x01
TRSF_READ_AS_INTEGER, TRSF_NORMALIZED_COORDINATES = 0x01, 0x02
TRSF_KNOWN = 0x01 | 0x02 | 0x10 | 0x20     # read as integer, normalized, sRGB, no trilinear optimisation (seamless
#                                            cubemaps are texture objects' alone)
PARAM_TR_DEFAULT = -1
TEXTURE_ALIGNMENT, PITCH_ALIGNMENT = 512, 32     # CU_DEVICE_ATTRIBUTE_TEXTURE_(PITCH_)ALIGNMENT of an H100
MAX_1D_LINEAR = 1 << 28                          # maxTexture1DLinear
MAX_2D_LINEAR = (131072, 65000, 2097120)         # maxTexture2DLinear: width, height, pitch
# ZLUDA_TEXREF=1: run what NVIDIA's CUDA 12+ drivers refuse (tests/data/nvidia_texref_answers.json), modules
# that use .texref or .samplerref variables or take them as kernel parameters, as CUDA 11 drivers did
LEGACY = os.environ.get("ZLUDA_TEXREF", "").strip() not in ("", "0")
_OPAQUE_PARAM = re.compile(r"\.param[ \t]+(?:\.u64[ \t]+\.ptr[ \t]+)?\.(texref|samplerref|surfref)\b")
_DECL = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern|common)[ \t]+)?\.global[ \t]+\.(texref|surfref|samplerref)"
                   r"[ \t]+([A-Za-z_$%][\w$]*)", re.M)
_lock = threading.Lock()


class Reference:
    """A CUtexref or CUsurfref: what the Set* calls gave it, and where a kernel finds it (a module's variable)."""

    def __init__(self, kind, module=None, name=None):
        self.kind, self.module, self.name = kind, module, name
        # ("array", Array) | ("mipmap", handle) | ("linear", base, bytes) | ("pitch2d", base, w, h, pitch)
        self.resource = None
        # NVIDIA's defaults (cuTexRefGet* of a reference nothing was set on): float x 1, clamp, point
        self.format, self.channels = 0x20, 1
        self.address = [1, 1, 1]
        self.filter = 0
        self.flags = 0
        self.border = [0.0] * 4
        self.max_anisotropy = 0
        self.mip_filter, self.lod_bias, self.min_lod, self.max_lod = 0, 0.0, 0.0, 0.0
        self.descriptor = None      # the managed allocation its variable points to, once bound
        handles.new(self)

    def check(self):
        if self.module is not None and self.module.unloaded:
            raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"reference {self.name} belongs to an unloaded module")
        return self

    def build(self):
        """texture.h's descriptor of the current binding, or None while unbound."""
        r = self.resource
        if r is None or self.format not in arrays.FORMAT_BYTES or self.channels not in (1, 2, 4):
            return None             # unbound, or a format NVIDIA's driver takes but no texel has: reads 0
        if r[0] == "array":
            if arrays.ARRAYS.get(r[1].handle) is not r[1]:
                return None         # destroyed since: nothing left to read
            d = array_descriptor(r[1])
        elif r[0] == "mipmap":
            from zluda_py.driver import mipmap
            if r[1] not in mipmap.MIPMAPS:
                return None
            d = mipmap.descriptor(r[1])
            d.mip_filter, d.lod_bias, d.min_lod, d.max_lod = self.mip_filter, self.lod_bias, self.min_lod, self.max_lod
            d.max_anisotropy = min(max(self.max_anisotropy, 1), 16)
        else:
            d = Descriptor()
            d.magic = MAGIC
            if r[0] == "linear":        # counted in elements of the format set now (cuTexRefSetFormat)
                d.base, d.linear, d.pitch = r[1], 1, r[2]
                d.width = r[2] // _elem(self.format, self.channels)
            else:
                d.base, d.width, d.height, d.pitch = r[1:5]
                d.slice = d.pitch * d.height
        if self.kind == "surfref":
            return d
        d.format, d.channels = self.format, self.channels
        d.address[:] = self.address
        d.filter = self.filter
        d.normalized = 1 if self.flags & TRSF_NORMALIZED_COORDINATES else 0
        d.read_normalized = 0 if self.flags & TRSF_READ_AS_INTEGER or arrays.FORMAT_BYTES[d.format] == 4 \
            or d.format == 0x10 else 1
        d.border[:] = self.border
        return d

    def publish(self):
        """Point the module's variable at the new binding (a created reference has none: nothing to do)."""
        if self.module is None:
            return
        ctx = self.module.ctx
        d = self.build()
        with _lock:
            memory._quiesce(ctx)          # a kernel launched before this call still reads the old binding
            value = 0
            if d is not None:
                if self.descriptor is None:
                    self.descriptor = memory.allocate(ctx, ctypes.sizeof(d), "managed")
                ctypes.memmove(self.descriptor.base, ctypes.addressof(d), ctypes.sizeof(d))
                value = self.descriptor.base
            addr, _ = self.module.backend_module.global_symbol(self.name)
            _write_u64(ctx, addr, value)

    def release(self):
        if self.descriptor is not None:
            memory._quiesce(self.module.ctx if self.module else None)
            memory.release(self.descriptor)
            self.descriptor = None
        handles.remove(self.handle)


def _misalignment(dptr) -> int:
    """Bytes past the texture alignment. NVIDIA's allocations are aligned to it, so cuMemAlloc's pointers need
    no offset (as its documentation promises); counted from the start of the allocation holding dptr, that
    holds here too whatever the backend's allocator aligns to. NVIDIA's driver checks no range (it binds 0 or
    unallocated memory): neither is this."""
    a = INDEX.find(dptr)
    return (dptr - (a.base if a is not None else 0)) % TEXTURE_ALIGNMENT


def _elem(fmt, nch):
    return arrays.FORMAT_BYTES.get(fmt, 0) * nch


def _write_u64(ctx, addr, value):
    """8 bytes into module memory (the device's on a GPU backend) of an idle context: straight on its legacy
    stream's backend, which a stream capture does not record."""
    from zluda_py.driver import stream as streammod
    buf = ctypes.c_uint64(value)
    bs = streammod.legacy_stream(ctx).backend
    bs.copy(addr, ctypes.addressof(buf), 8)
    bs.synchronize()


# --- references of a module ------------------------------------------------------------------------------

def declared(module) -> dict:
    """name -> 'texref' / 'surfref' / 'samplerref' of the module's references, read from its PTX once."""
    refs = getattr(module, "_reference_decls", None)
    if refs is None:
        refs = module._reference_decls = {m.group(2): m.group(1) for m in _DECL.finditer(module.ptx_text or "")}
    return refs


@modmod.on_load
def _as_nvidia_loads(text, name, backend_module) -> None:
    """Refuse what NVIDIA's CUDA 13 driver refuses (unless LEGACY), with its answers: a kernel parameter of an
    opaque type CUDA_ERROR_INVALID_IMAGE, a .samplerref variable CUDA_ERROR_NOT_FOUND, a .texref variable a
    kernel uses CUDA_ERROR_NOT_SUPPORTED. An initialised .texref of unified mode loads, but the kernels that
    use it are not found (under CUDA_MODULE_LOADING=EAGER the load is not). Surface references load there, and
    here."""
    if LEGACY or (".texref" not in text and ".samplerref" not in text and ".surfref" not in text):
        return
    # (kind, initialised): NVIDIA's treats an initialised .texref of unified mode apart
    unified = not re.search(r"^[ \t]*\.target[^\n]*texmode_independent", text, re.M)
    decls = {m.group(2): (m.group(1), unified and text[m.end():m.end() + 64].lstrip().startswith("="))
             for m in _DECL.finditer(text)}
    # a texture reference no instruction names: the JIT drops it, and such a module loads
    used = [n for n, (k, _) in decls.items() if k == "texref" and len(_naming(n).findall(text)) > 1]
    p = _OPAQUE_PARAM.search(text)
    if p:
        code, what = CUDA_ERROR_INVALID_IMAGE, f"a kernel parameter of type .{p.group(1)}"
    elif any(k == "samplerref" for k, _ in decls.values()):
        code, what = CUDA_ERROR_NOT_FOUND, f".samplerref {next(n for n, (k, _) in decls.items() if k == 'samplerref')}"
    elif any(not decls[n][1] for n in used):
        code, what = CUDA_ERROR_NOT_SUPPORTED, f".texref {next(n for n in used if not decls[n][1])}"
    elif used and not modmod._lazy_loading():
        code, what = CUDA_ERROR_NOT_FOUND, f"the initialised .texref {used[0]}"
    else:
        refused = {k: _refusal(CUDA_ERROR_NOT_FOUND, f"{name}: kernel {k} uses the initialised .texref {n}")
                   for n in used for k in _kernels_naming(text, n)}
        if refused:
            backend_module.refused_kernels = refused
        return
    raise _refusal(code, f"{name}: {what}")


def _refusal(code, what):
    return fatal(CudaError(code, f"{what}: NVIDIA's CUDA 12 and later drivers refuse texture and sampler "
                                 "references; ZLUDA_TEXREF=1 runs them as CUDA 11 drivers did"), "texref")


def _naming(name):
    return re.compile(r"(?<![\w$.%])" + re.escape(name) + r"(?![\w$])")


def _kernels_naming(text, name):
    """The kernels whose bodies name `name` (each body runs to the next .entry or .func)."""
    starts = [(m.start(), m.group(1) if m.group(0).startswith(".entry") else None)
              for m in re.finditer(r"\.entry[ \t\r\n]+([\w$]+)|\.func\b", text)]
    pat = _naming(name)
    return [k for (a, k), (b, _) in zip(starts, starts[1:] + [(len(text), None)]) if k and pat.search(text, a, b)]


def _module_reference(pref, hmod, name, kind):
    m = modmod.get_module(hmod)         # first: NVIDIA's answers a NULL module so whatever else is NULL
    if not pref or not name:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pTexRef/pSurfRef or name is NULL")
    n = cmem.read_cstring(name, "name")
    if declared(m).get(n) != kind or m.backend_module.global_symbol(n) is None:
        raise CudaError(CUDA_ERROR_NOT_FOUND, f"module {m.name} has no .{kind} named {n!r}")
    with _lock:
        refs = m.__dict__.setdefault("references", {})
        ref = refs.get(n)
        if ref is None:
            ref = refs[n] = Reference(kind, m, n)
    cmem.write_ptr(pref, ref.handle)


@modmod.on_unload
def _module_unloaded(m) -> None:
    for ref in getattr(m, "references", {}).values():
        ref.release()


@export("cuModuleGetTexRef")
def module_get_texref(pref, hmod, name):
    _module_reference(pref, hmod, name, "texref")


@export("cuModuleGetSurfRef")
def module_get_surfref(pref, hmod, name):
    _module_reference(pref, hmod, name, "surfref")


def _ref(h, kind="texref") -> Reference:
    init.require_init()
    r = handles.get(h, Reference, CUDA_ERROR_INVALID_HANDLE, "texture reference" if kind == "texref"
                    else "surface reference")
    if r.kind != kind:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"{h:#x} is a .{r.kind}, not a .{kind}")
    return r.check()


def _out(p, what):
    if not p:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} is NULL")
    return p


# --- cuTexRefCreate/Destroy: references of no module, whose state only the Get* calls see --------------------

@export("cuTexRefCreate")
def texref_create(pref):
    init.require_init()
    ctxmod.current_context()
    cmem.write_ptr(_out(pref, "pTexRef"), Reference("texref").handle)


@export("cuTexRefDestroy")
def texref_destroy(h):
    r = _ref(h)
    if r.module is not None:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"{r.name} is a module's reference: its module frees it")
    r.release()


# --- bindings --------------------------------------------------------------------------------------------

@export("cuTexRefSetArray")
def texref_set_array(h, harray, flags):
    r = _ref(h)
    if flags & ~TRSA_OVERRIDE_FORMAT:       # NVIDIA's takes 0 as well as CU_TRSA_OVERRIDE_FORMAT
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"Flags {flags:#x} must be CU_TRSA_OVERRIDE_FORMAT")
    a = arrays.lookup(harray)           # NULL: CUDA_ERROR_INVALID_HANDLE, as NVIDIA answers
    r.resource = ("array", a)
    r.format, r.channels = a.format, a.channels
    r.publish()


@export("cuTexRefSetMipmappedArray")
def texref_set_mipmapped_array(h, hmip, flags):
    from zluda_py.driver import mipmap
    r = _ref(h)
    if flags & ~TRSA_OVERRIDE_FORMAT:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"Flags {flags:#x} must be CU_TRSA_OVERRIDE_FORMAT")
    m = mipmap.lookup(hmip)
    r.resource = ("mipmap", hmip)
    r.format, r.channels = m.format, m.channels
    r.publish()


@export("cuTexRefSetAddress_v2")
def texref_set_address(poffset, h, dptr, nbytes):
    r = _ref(h)
    # the texture starts at the aligned address at or below dptr: the kernel adds the offset (in elements)
    offset = _misalignment(dptr)
    if offset and not poffset:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dptr {dptr:#x} is {offset} bytes past the texture alignment "
                                                  "and ByteOffset is NULL")
    elem = _elem(r.format, r.channels)
    if elem and (offset + nbytes) // elem > MAX_1D_LINEAR:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{nbytes} bytes exceed maxTexture1DLinear ({MAX_1D_LINEAR} "
                                                  "elements)")
    r.resource = ("linear", dptr - offset, offset + nbytes)
    r.publish()
    if poffset:
        cmem.write_u64(poffset, offset)


@export("cuTexRefSetAddress2D_v3", "cuTexRefSetAddress2D_v2")
def texref_set_address_2d(h, pdesc, dptr, pitch):
    r = _ref(h)
    if not pdesc:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "desc is NULL")
    w, hh = cmem.read_u64(pdesc), cmem.read_u64(pdesc + 8)
    fmt, nch = cmem.read_u32(pdesc + 16), cmem.read_u32(pdesc + 20)
    if nch not in (1, 2, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"desc NumChannels {nch}")
    if _misalignment(dptr):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dptr {dptr:#x} is not aligned to {TEXTURE_ALIGNMENT} bytes")
    elem = _elem(fmt, nch)
    if pitch % PITCH_ALIGNMENT or pitch < w * elem or not pitch or not w or not hh:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{w}x{hh} texels of {elem} bytes, pitch {pitch} (a multiple "
                                                  f"of {PITCH_ALIGNMENT})")
    if w > MAX_2D_LINEAR[0] or hh > MAX_2D_LINEAR[1] or pitch > MAX_2D_LINEAR[2]:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{w}x{hh} pitch {pitch} exceeds maxTexture2DLinear")
    r.resource = ("pitch2d", dptr, w, hh, pitch)
    r.format, r.channels = fmt, nch
    r.publish()


@export("cuTexRefSetFormat")
def texref_set_format(h, fmt, nch):
    r = _ref(h)
    # NVIDIA's driver takes any format code and 0 components: such a texture reads as 0 here
    if nch not in (0, 1, 2, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{nch} components (1, 2 or 4)")
    r.format, r.channels = fmt, nch
    if r.resource is not None:
        r.publish()


@export("cuTexRefSetAddressMode")
def texref_set_address_mode(h, dim, mode):
    r = _ref(h)
    if not 0 <= dim <= 2:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dim {dim} is not 0, 1 or 2")
    if mode <= 3:
        r.address[dim] = mode   # NVIDIA's driver answers success for another (4) and keeps the mode it had
    r.publish()


@export("cuTexRefSetFilterMode")
def texref_set_filter_mode(h, mode):
    r = _ref(h)
    r.filter = mode             # NVIDIA's driver takes 2 and reads it back: any but point filters linearly
    r.publish()


@export("cuTexRefSetFlags")
def texref_set_flags(h, flags):
    r = _ref(h)
    if flags & ~TRSF_KNOWN:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x}")
    r.flags = flags
    r.publish()


@export("cuTexRefSetBorderColor")
def texref_set_border_color(h, pcolor):
    r = _ref(h)
    r.border = list(struct.unpack("<4f", cmem.read_bytes(_out(pcolor, "pBorderColor"), 16)))
    r.publish()


@export("cuTexRefSetMaxAnisotropy")
def texref_set_max_anisotropy(h, n):
    r = _ref(h)
    r.max_anisotropy = n
    r.publish()


@export("cuTexRefSetMipmapFilterMode")
def texref_set_mipmap_filter_mode(h, mode):
    r = _ref(h)
    if mode > 1:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"mipmap filter mode {mode}")
    r.mip_filter = mode
    r.publish()


@export("cuTexRefSetMipmapLevelBias")
def texref_set_mipmap_level_bias(h, bias):
    r = _ref(h)
    r.lod_bias = bias
    r.publish()


@export("cuTexRefSetMipmapLevelClamp")
def texref_set_mipmap_level_clamp(h, lo, hi):
    r = _ref(h)
    r.min_lod, r.max_lod = lo, hi
    r.publish()


# --- Get* ------------------------------------------------------------------------------------------------

@export("cuTexRefGetAddress_v2")
def texref_get_address(pdptr, h):
    r = _ref(h)
    cmem.write_u64(_out(pdptr, "pdptr"), 0)        # NVIDIA's clears it, bound or not
    if r.resource is None or r.resource[0] not in ("linear", "pitch2d"):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{r.name or 'the reference'} is bound to no device memory")
    cmem.write_u64(pdptr, r.resource[1])


@export("cuTexRefGetArray")
def texref_get_array(parray, h):
    r = _ref(h)
    _out(parray, "phArray")
    if r.resource is None or r.resource[0] != "array":
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{r.name or 'the reference'} is bound to no CUDA array")
    cmem.write_ptr(parray, r.resource[1].handle)


@export("cuTexRefGetMipmappedArray")
def texref_get_mipmapped_array(pmip, h):
    r = _ref(h)
    _out(pmip, "phMipmappedArray")
    if r.resource is None or r.resource[0] != "mipmap":
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{r.name or 'the reference'} is bound to no mipmapped array")
    cmem.write_ptr(pmip, r.resource[1])


@export("cuTexRefGetAddressMode")
def texref_get_address_mode(pmode, h, dim):
    r = _ref(h)
    if not 0 <= dim <= 2:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dim {dim}")
    cmem.write_u32(_out(pmode, "pam"), r.address[dim])


@export("cuTexRefGetFilterMode")
def texref_get_filter_mode(pmode, h):
    cmem.write_u32(_out(pmode, "pfm"), _ref(h).filter)


@export("cuTexRefGetFormat")
def texref_get_format(pfmt, pnch, h):
    r = _ref(h)
    if pfmt:
        cmem.write_u32(pfmt, r.format)
    if pnch:
        cmem.write_u32(pnch, r.channels)


@export("cuTexRefGetFlags")
def texref_get_flags(pflags, h):
    cmem.write_u32(_out(pflags, "pFlags"), _ref(h).flags)


@export("cuTexRefGetBorderColor")
def texref_get_border_color(pcolor, h):
    cmem.write_bytes(_out(pcolor, "pBorderColor"), struct.pack("<4f", *_ref(h).border))


@export("cuTexRefGetMaxAnisotropy")
def texref_get_max_anisotropy(pn, h):
    cmem.write_u32(_out(pn, "pmaxAniso"), _ref(h).max_anisotropy)


@export("cuTexRefGetMipmapFilterMode")
def texref_get_mipmap_filter_mode(pmode, h):
    cmem.write_u32(_out(pmode, "pfm"), _ref(h).mip_filter)


@export("cuTexRefGetMipmapLevelBias")
def texref_get_mipmap_level_bias(pbias, h):
    cmem.write_bytes(_out(pbias, "pbias"), struct.pack("<f", _ref(h).lod_bias))


@export("cuTexRefGetMipmapLevelClamp")
def texref_get_mipmap_level_clamp(plo, phi, h):
    r = _ref(h)
    cmem.write_bytes(_out(plo, "pminMipmapLevelClamp"), struct.pack("<f", r.min_lod))
    cmem.write_bytes(_out(phi, "pmaxMipmapLevelClamp"), struct.pack("<f", r.max_lod))


# --- surface references ----------------------------------------------------------------------------------

@export("cuSurfRefSetArray")
def surfref_set_array(h, harray, flags):
    r = _ref(h, "surfref")
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"Flags {flags:#x} must be 0")
    a = arrays.lookup(harray)
    if not a.flags & arrays.SURFACE_LDST:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"array {harray:#x} was made without CUDA_ARRAY3D_SURFACE_LDST")
    r.resource = ("array", a)
    r.publish()


@export("cuSurfRefGetArray")
def surfref_get_array(parray, h):
    r = _ref(h, "surfref")
    _out(parray, "phArray")
    if r.resource is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{r.name} is bound to no CUDA array")
    cmem.write_ptr(parray, r.resource[1].handle)


# --- legacy launch ---------------------------------------------------------------------------------------

@export("cuParamSetTexRef")
def param_set_tex_ref(hfunc, texunit, h):
    """Since CUDA 3.0 every texture reference of a kernel's module is available to it: the call only checks
    its arguments (texunit must be CU_PARAM_TR_DEFAULT, the reference the function's module's)."""
    f = modmod.get_function(hfunc)
    r = _ref(h)
    if texunit != PARAM_TR_DEFAULT:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"texunit {texunit} must be CU_PARAM_TR_DEFAULT (-1)")
    if r.module is not f.module:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"reference {r.name or hex(h)} is not of {f.name}'s module")
