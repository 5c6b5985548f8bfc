"""Module images (PTX text, fatbin wrapper, fatbin headers, ELF with .nv_fatbin, ar archives): find the
PTX entries, decompress them (LZ4 block / zstd) and pick the one to compile for a compute capability."""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass

from zluda_py import cffi_abi, cmem
from zluda_py.errors import (CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_INVALID_VALUE,
                             CUDA_ERROR_NO_BINARY_FOR_GPU, CudaError)

WRAPPER_MAGIC = 0x466243B1
FATBIN_MAGIC = 0xBA55ED50
ELF_MAGIC = b"\x7fELF"
AR_MAGIC = b"!<arch>\n"

KIND_PTX = 1
KIND_ELF = 2

FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000

_FATBIN_HEADER = struct.Struct("<IHHQ")
_ENTRY_MIN = 64
# A lying size must fail cleanly instead of exhausting memory.
_MAX_IMAGE = 1 << 31
_MAX_PTX = 1 << 30


@dataclass
class FatbinEntry:
    kind: int
    sm: int
    ptx_version: int
    flags: int
    payload: bytes             # as stored (maybe compressed)
    uncompressed_size: int

    @property
    def kind_name(self) -> str:
        return {KIND_PTX: "PTX", KIND_ELF: "SASS"}.get(self.kind, f"kind {self.kind}")

    def ptx_text(self) -> str:
        """The entry's PTX source, decompressed and stripped of NUL padding."""
        data = _decompress(self.payload, self.flags, self.uncompressed_size)
        end = data.find(b"\0")
        if end >= 0:
            data = data[:end]
        return data.decode("utf-8", "replace")


@dataclass
class ModuleImage:
    """What a module image holds: PTX text directly, or fatbin entries."""
    fmt: str                   # 'ptx', 'fatbin', 'wrapper', 'elf', 'archive'
    ptx: str | None = None     # set when fmt == 'ptx'
    entries: list | None = None
    cubin_sm: list | None = None   # SM versions of bare SASS cubins (no .nv_fatbin section)
    # Relocatable device code (-rdc): one entry list per translation unit, whose PTX must be linked
    # together (a version 2 wrapper's fatbins, an executable's __nv_relfatbin section).
    link_groups: list | None = None

    def entries_outside_groups(self) -> list:
        """Entries that are not part of a link group (an executable's already linked .nv_fatbin)."""
        grouped = {id(e) for g in self.link_groups or [] for e in g}
        return [e for e in self.entries or [] if id(e) not in grouped]

    def describe(self) -> str:
        """The entries as 'PTX sm_86, SASS sm_75' for log lines."""
        parts = [f"{e.kind_name} sm_{e.sm}" for e in self.entries or []]
        parts += [f"SASS sm_{sm}" for sm in self.cubin_sm or []]
        return ", ".join(parts) or "nothing"


# --- decompression ----------------------------------------------------------------------------------

def _decompress(payload: bytes, flags: int, size: int) -> bytes:
    if not flags & (FLAG_LZ4 | FLAG_ZSTD):
        return payload
    if size <= 0 or size > _MAX_PTX:
        raise CudaError(CUDA_ERROR_INVALID_IMAGE, f"fatbin entry declares uncompressed size {size}")
    try:
        if flags & FLAG_LZ4:
            import lz4.block
            out = lz4.block.decompress(payload, uncompressed_size=size)
        else:
            import zstandard
            out = zstandard.ZstdDecompressor().decompress(payload, max_output_size=size)
    except CudaError:
        raise
    except ImportError as e:
        # an installation without zluda-py's dependencies (a source tree before scripts/setup), not a bad image
        pkg = (e.name or ("lz4" if flags & FLAG_LZ4 else "zstandard")).split(".")[0]
        raise CudaError(CUDA_ERROR_INVALID_IMAGE,
                        f"a compressed fatbin entry needs the Python package {pkg}, which is not installed "
                        f"(a dependency of zluda-py: pip install {pkg})") from None
    except Exception as e:  # noqa: BLE001 - every codec failure is a bad image, whatever its type
        codec = "LZ4" if flags & FLAG_LZ4 else "zstd"
        raise CudaError(CUDA_ERROR_INVALID_IMAGE, f"corrupt {codec} fatbin entry: {e}") from None
    if len(out) != size:
        raise CudaError(CUDA_ERROR_INVALID_IMAGE,
                        f"fatbin entry decompressed to {len(out)} bytes, header says {size}")
    return out


# --- parsing from bytes -----------------------------------------------------------------------------

def _bad(msg: str) -> CudaError:
    return CudaError(CUDA_ERROR_INVALID_IMAGE, msg)


def parse_entries(data: bytes, header_size: int) -> list:
    """The entries following one fatbin header (`data` is exactly the entries' bytes)."""
    entries = []
    off = 0
    while off < len(data):
        if len(data) - off < _ENTRY_MIN:
            raise _bad(f"truncated fatbin entry header at offset {off}")
        kind, _ver, hsize, padded = struct.unpack_from("<HHIQ", data, off)
        if hsize < _ENTRY_MIN or hsize > len(data) - off:
            raise _bad(f"fatbin entry header size {hsize} is invalid")
        compressed, = struct.unpack_from("<I", data, off + 16)
        ptx_version, sm = struct.unpack_from("<II", data, off + 24)
        flags, = struct.unpack_from("<Q", data, off + 40)
        uncompressed, = struct.unpack_from("<Q", data, off + 56)
        stored = compressed if flags & (FLAG_LZ4 | FLAG_ZSTD) and compressed else padded
        body = off + hsize
        if max(stored, padded) > len(data) - body:
            raise _bad(f"fatbin entry payload ({max(stored, padded)} bytes) runs past the fatbin "
                       f"({len(data) - body} left)")
        entries.append(FatbinEntry(kind, sm, ptx_version, flags, data[body:body + stored], uncompressed))
        off = body + max(padded, stored)
    return entries


def parse_fatbins(data: bytes) -> list:
    """Entries of every fatbin header laid back to back in `data` (empty headers skipped)."""
    return [e for group in parse_fatbin_groups(data) for e in group]


def parse_fatbin_groups(data: bytes) -> list:
    """One entry list per non-empty fatbin header laid back to back in `data` (8-byte aligned)."""
    groups = []
    off = 0
    while off + _FATBIN_HEADER.size <= len(data):
        magic, _ver, hsize, size = _FATBIN_HEADER.unpack_from(data, off)
        if magic != FATBIN_MAGIC:
            if off == 0:
                raise _bad(f"bad fatbin magic {magic:#x}")
            break  # section padding after the last fatbin
        if hsize < _FATBIN_HEADER.size:
            raise _bad(f"fatbin header size {hsize} is invalid")
        start = off + hsize
        if size > len(data) - start:
            raise _bad(f"fatbin declares {size} bytes of entries, only {max(len(data) - start, 0)} present")
        if size:
            groups.append(parse_entries(data[start:start + size], hsize))
        off = (start + size + 7) & ~7
    if off == 0:
        raise _bad("truncated fatbin header")
    return groups


_ELF64_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")


def _elf_sections(data: bytes) -> tuple[dict, int]:
    """{name: bytes} of an ELF64 little-endian image, and its e_flags."""
    if len(data) < _ELF64_HEADER.size:
        raise _bad("truncated ELF header")
    (ident, _t, _m, _v, _entry, _phoff, shoff, eflags, _ehsize, _phes, _phn, shentsize, shnum,
     shstrndx) = _ELF64_HEADER.unpack_from(data)
    if ident[4] != 2 or ident[5] != 1:
        raise _bad("not a 64-bit little-endian ELF")
    if shnum == 0:
        return {}, eflags
    if shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise _bad("ELF section header table is out of bounds")
    raw = []
    for i in range(shnum):
        name, stype, _fl, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        raw.append((name, stype, offset, size))
    _n, _t, str_off, str_size = raw[shstrndx]
    if str_off + str_size > len(data):
        raise _bad("ELF string table is out of bounds")
    strtab = data[str_off:str_off + str_size]
    sections = {}
    for name, stype, offset, size in raw:
        end = strtab.find(b"\0", name)
        sname = strtab[name:end if end >= 0 else None].decode("latin-1")
        if stype == 8:  # SHT_NOBITS occupies no file bytes
            continue
        if offset + size > len(data):
            raise _bad(f"ELF section {sname} is out of bounds")
        sections[sname] = data[offset:offset + size]
    return sections, eflags


def _cubin_sm(eflags: int) -> int:
    # CUDA >= 12.x keeps the SM in bits 8..15 of e_flags; older toolkits in bits 0..7.
    sm = (eflags >> 8) & 0xFF
    return sm if sm else eflags & 0xFF


def _parse_elf(data: bytes) -> ModuleImage:
    sections, eflags = _elf_sections(data)
    fat = sections.get(".nv_fatbin")
    rel = sections.get("__nv_relfatbin")
    if fat is None and rel is None:
        return ModuleImage("elf", entries=[], cubin_sm=[_cubin_sm(eflags)])
    entries = parse_fatbins(fat) if fat else []
    groups = parse_fatbin_groups(rel) if rel else None
    if groups:
        entries += [e for g in groups for e in g]
    return ModuleImage("elf", entries=entries, link_groups=groups)


def _parse_archive(data: bytes) -> ModuleImage:
    entries, cubins = [], []
    off = len(AR_MAGIC)
    while off + 60 <= len(data):
        hdr = data[off:off + 60]
        if hdr[58:60] != b"`\n":
            raise _bad(f"bad archive member header at offset {off}")
        try:
            size = int(hdr[48:58].decode("ascii").strip() or "0")
        except ValueError:
            raise _bad("bad archive member size") from None
        name = hdr[:16].decode("latin-1").strip()
        body = data[off + 60:off + 60 + size]
        if len(body) != size:
            raise _bad("truncated archive member")
        if not name.startswith("/") and body[:4] in (ELF_MAGIC, struct.pack("<I", FATBIN_MAGIC)):
            sub = parse_image(body)
            entries += sub.entries or []
            cubins += sub.cubin_sm or []
        off += 60 + size + (size & 1)
    return ModuleImage("archive", entries=entries, cubin_sm=cubins)


def _ptx_from_text(data: bytes) -> ModuleImage:
    end = data.find(b"\0")
    text = data[:end] if end >= 0 else data
    if not text.strip():
        raise CudaError(CUDA_ERROR_INVALID_IMAGE, "module image is empty")
    # PTX is printable ASCII; anything else is an image format we do not know.
    if any(b < 9 or (13 < b < 32) or b == 127 for b in text[:4096]):
        raise _bad(f"unrecognised module image (starts {bytes(text[:8]).hex()})")
    return ModuleImage("ptx", ptx=text.decode("utf-8", "replace"))


def parse_image(data: bytes) -> ModuleImage:
    """Sniff and parse a complete image held in `data`."""
    if len(data) >= 4:
        magic, = struct.unpack_from("<I", data)
        if magic == FATBIN_MAGIC:
            return ModuleImage("fatbin", entries=parse_fatbins(data))
        if magic == WRAPPER_MAGIC:
            raise _bad("a fatbin wrapper holds pointers: load it from memory, not from bytes")
        if data[:4] == ELF_MAGIC:
            return _parse_elf(data)
    if data[:8] == AR_MAGIC:
        return _parse_archive(data)
    return _ptx_from_text(data)


# --- reading from a raw pointer of unknown size -----------------------------------------------------

_libc = None
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _mapped(addr: int, n: int) -> bool:
    """Whether [addr, addr+n) is mapped memory: a lying size in an image must not fault the process."""
    global _libc
    if _libc is None:
        import cffi
        ffi = cffi.FFI()
        ffi.cdef("int mincore(void *addr, size_t length, unsigned char *vec);")
        _libc = (ffi, cffi_abi.dlopen(ffi, None))
    ffi, libc = _libc
    start = addr & ~(_PAGE - 1)
    length = addr + n - start
    vec = ffi.new("unsigned char[]", (length + _PAGE - 1) // _PAGE or 1)
    return libc.mincore(ffi.cast("void *", start), length, vec) == 0


def _read(addr: int, n: int, what: str) -> bytes:
    if n and addr and not _mapped(addr, n):
        raise _bad(f"{what} at {addr:#x} declares {n} bytes that run past mapped memory")
    return cmem.read_bytes(addr, n, what)

def _read_fatbins_at(addr: int) -> list:
    """Entries of the fatbin header at `addr`; empty headers before a real one are skipped."""
    entries = []
    for _ in range(64):
        hdr = _read(addr, _FATBIN_HEADER.size, "fatbin")
        magic, _ver, hsize, size = _FATBIN_HEADER.unpack(hdr)
        if magic != FATBIN_MAGIC:
            raise _bad(f"bad fatbin magic {magic:#x} at {addr:#x}")
        if hsize < _FATBIN_HEADER.size or size > _MAX_IMAGE:
            raise _bad(f"fatbin header at {addr:#x} declares header size {hsize}, entries size {size}")
        if size:
            return parse_entries(_read(addr + hsize, size, "fatbin entries"), hsize)
        addr += hsize
        # An -rdc executable's .nv_fatbin may be nothing but one empty header (its code is in the wrapper's
        # prelinked list): what follows is another section, not a fatbin.
        if not _mapped(addr, 4) or struct.unpack("<I", cmem.read_bytes(addr, 4, "fatbin"))[0] != FATBIN_MAGIC:
            break
    return entries


def _read_elf_at(addr: int) -> bytes:
    hdr = _read(addr, _ELF64_HEADER.size, "ELF image")
    f = _ELF64_HEADER.unpack(hdr)
    phoff, shoff, phentsize, phnum, shentsize, shnum = f[5], f[6], f[9], f[10], f[11], f[12]
    end = max(_ELF64_HEADER.size, phoff + phentsize * phnum, shoff + shentsize * shnum)
    if end > _MAX_IMAGE:
        raise _bad("ELF headers declare an impossible size")
    if shnum and shentsize >= 64:
        table = _read(addr + shoff, shentsize * shnum, "ELF section headers")
        for i in range(shnum):
            _n, stype, _fl, _a, offset, size = struct.unpack_from("<IIQQQQ", table, i * shentsize)
            if stype != 8:
                end = max(end, offset + size)
        if end > _MAX_IMAGE:
            raise _bad("ELF sections declare an impossible size")
    return _read(addr, end, "ELF image")


def _read_archive_at(addr: int) -> bytes:
    off = len(AR_MAGIC)
    for _ in range(1 << 16):
        hdr = _read(addr + off, 60, "archive member")
        if hdr[58:60] != b"`\n":
            break
        try:
            size = int(hdr[48:58].decode("ascii").strip() or "0")
        except ValueError:
            raise _bad("bad archive member size") from None
        off += 60 + size + (size & 1)
        if off > _MAX_IMAGE:
            raise _bad("archive declares an impossible size")
        # A member may be the last thing mapped: stop where a following header would not fit.
        nxt = _read(addr + off, 1, "archive")
        if nxt == b"\0":
            break
    return _read(addr, off, "archive")


def read_image(addr: int) -> ModuleImage:
    """Sniff and parse an image given only its address (cuModuleLoadData, cuLibraryLoadData, ...)."""
    if not addr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "image pointer is NULL")
    head = _read(addr, 4, "image")
    magic, = struct.unpack("<I", head)
    if magic == WRAPPER_MAGIC:
        _m, version, data, extra = struct.unpack("<IIQQ", _read(addr, 24, "fatbin wrapper"))
        if version not in (1, 2):
            raise _bad(f"fatbin wrapper version {version} is not 1 or 2")
        if not data:
            raise _bad("fatbin wrapper has no data pointer")
        entries = _read_fatbins_at(data)
        if version == 2 and extra:
            groups = [entries]
            for i in range(4096):
                sub, = struct.unpack("<Q", _read(extra + 8 * i, 8, "prelinked fatbin list"))
                if not sub:
                    break
                groups.append(_read_fatbins_at(sub))
            return ModuleImage("wrapper", entries=[e for g in groups for e in g], link_groups=groups)
        return ModuleImage("wrapper", entries=entries)
    if magic == FATBIN_MAGIC:
        return ModuleImage("fatbin", entries=_read_fatbins_at(addr))
    if head == ELF_MAGIC:
        return _parse_elf(_read_elf_at(addr))
    if head == AR_MAGIC[:4] and _read(addr, 8, "image") == AR_MAGIC:
        return _parse_archive(_read_archive_at(addr))
    text = cmem.read_cstring(addr, "PTX image", limit=_MAX_PTX).encode("utf-8", "surrogateescape")
    return _ptx_from_text(text)


# --- selection --------------------------------------------------------------------------------------

_TARGET_SM = re.compile(r"^\s*\.target\s+(sm_(\d+)[a-z]?)", re.M)


def select_ptx(image: ModuleImage, sm: int, name: str = "module") -> str:
    """The PTX to compile for a device of compute capability `sm` (e.g. 86): the entry with the highest
    SM <= sm. Raises CUDA_ERROR_NO_BINARY_FOR_GPU, naming what the image carries, when none fits."""
    if image.ptx is not None:
        target = _TARGET_SM.search(image.ptx)
        from ptx.isa import known_target
        # a target that does not exist is the compiler's to refuse, as ptxas's 'Unsupported .target'
        if target and int(target.group(2)) > sm and known_target(target.group(1)):
            # What the driver's JIT says of PTX written for a newer GPU (ptxas refuses the .target).
            e = CudaError(CUDA_ERROR_INVALID_PTX,
                          f"{name}: PTX targets sm_{target.group(2)}, newer than the device's sm_{sm}")
            line = image.ptx.count("\n", 0, target.start(1)) + 1
            e.jit_log = (f"ptxas application ptx input, line {line}; fatal   : SM version specified by .target "
                         f"'{target.group(1)}' is higher than the device's 'sm_{sm}'")
            raise e
        return image.ptx
    ptx = [e for e in image.entries or [] if e.kind == KIND_PTX]
    usable = [e for e in ptx if e.sm <= sm]
    if usable and image.link_groups and not _best(image.entries_outside_groups(), sm):
        texts = []
        from zluda_py.cudadevrt import is_nvidia_device_runtime
        for group in image.link_groups:
            best = _best(group, sm)
            if best is not None:
                text = best.ptx_text()
                if text not in texts and not is_nvidia_device_runtime(text):
                    texts.append(text)
        from zluda_py.ptxlink import merge_ptx
        return merge_ptx(texts)
    if usable:
        return max(usable, key=lambda e: (e.sm, e.ptx_version)).ptx_text()
    if ptx:
        why = (f"its PTX targets {', '.join(f'sm_{e.sm}' for e in ptx)}, newer than the device's sm_{sm}")
    else:
        why = f"it carries no PTX, only {image.describe()} (SASS cannot run here)"
    raise CudaError(CUDA_ERROR_NO_BINARY_FOR_GPU, f"{name}: no usable binary for sm_{sm}: {why}")


def _best(entries, sm: int):
    usable = [e for e in entries if e.kind == KIND_PTX and e.sm <= sm]
    return max(usable, key=lambda e: (e.sm, e.ptx_version)) if usable else None


def load_ptx_from_address(addr: int, sm: int, name: str = "module") -> str:
    return select_ptx(read_image(addr), sm, name)


def load_ptx_from_bytes(data: bytes, sm: int, name: str = "module") -> str:
    return select_ptx(parse_image(data), sm, name)
