"""Runs AMDGPU code objects on tinygrad's RDNA3/CDNA instruction emulator (`ZLUDA_AMDGPU_EMULATOR`), with
the kernarg segment, dispatch packet and user SGPRs set up as HIP would. Emulation is not hardware."""

from __future__ import annotations

import atexit
import ctypes
import glob
import hashlib
import os
import re
import shutil
import struct
import sys
import tempfile
import threading
from dataclasses import dataclass

from ptx.amdgpu_emulator_fixes import EmulatorUnavailable, apply_fixes, disabled_fixes
from ptx.amdgpu_verify import read_code_object

ENV = "ZLUDA_AMDGPU_EMULATOR"
# What the emulator models, by the code object's GPU family; RDNA1/2 and CDNA1/2 decode differently or
# need the private segment buffer (MUBUF scratch), which the emulator does not set up.
_ISA = {"RDNA3": "rdna3", "RDNA3.5": "rdna3", "RDNA4": "rdna4", "CDNA3": "cdna", "CDNA4": "cdna"}

# kernel descriptor (LLVM AMDGPUUsage, "Kernel Descriptor"): byte offsets of the fields read here
_KD = struct.Struct("<IIIIq20xIIIHH4x")
_KCP_PRIVATE_SEGMENT_BUFFER, _KCP_DISPATCH_PTR, _KCP_QUEUE_PTR, _KCP_KERNARG_PTR = 1, 2, 4, 8
_KCP_DISPATCH_ID, _KCP_FLAT_SCRATCH_INIT, _KCP_PRIVATE_SEGMENT_SIZE, _KCP_DYNAMIC_STACK = 16, 32, 64, 1 << 11
_RSRC2_USER_SGPRS = 0x3E
_RSRC2_WORKGROUP_INFO = 1 << 10
_RSRC2_LDS_SHIFT, _RSRC2_LDS_MASK = 15, 0x1FF << 15
_LDS_GRANULE = 512                   # what the emulator multiplies the rsrc2 LDS field by
_LDS_LIMIT = {"rdna3": 64 << 10, "rdna4": 64 << 10, "cdna": 160 << 10}
_CLR_STACK, _CLR_STACK_CAP = 1024, 16 << 10    # ROCclr: scratch of a dynamic-stack kernel
_PRINTF_BUFFER = 1 << 20
R_AMDGPU_ABS64, R_AMDGPU_RELATIVE64 = 3, 13
# Cache maintenance the emulator cannot run: it has no caches, so `s_nop 0` in their place is the same
# program. RDNA's are MUBUF, which its decoder does not know (found by encoding); LLVM emits them for
# workgroup-scope acquires in WGP mode (after every barrier). CDNA's decode, but would run as buffer
# accesses through s[0:3]; LLVM emits them around agent/system-scope atomics and fences.
_CACHE_INVALIDATES = {bytes.fromhex("0000ace000000000"): "buffer_gl0_inv",
                      bytes.fromhex("0000b0e000000000"): "buffer_gl1_inv"}
_CACHE_OPS = {"BUFFER_WBL2", "BUFFER_INV", "BUFFER_WBINVL1", "BUFFER_WBINVL1_VOL"}
_S_NOP = bytes.fromhex("000080bf")


class EmulatorError(RuntimeError):
    """A kernel the emulator cannot run as asked (unsupported setup, instruction or launch)."""


# ------------------------------------------------------------------ finding and loading the emulator

_lock = threading.RLock()
_run_lock = threading.Lock()
_emu = None
_applied = ()


def _clang_on_path():
    """The emulator runs `clang` by that name (to build each instruction and its FTZ switch): put one on PATH."""
    if shutil.which("clang"):
        return
    def version(p):
        m = re.search(r"(\d+)(?:/bin/clang)?$", p)
        return int(m.group(1)) if m else 0
    cands = [p for d in os.environ.get("PATH", "").split(os.pathsep) for p in glob.glob(os.path.join(d, "clang-[0-9]*"))
             if re.fullmatch(r"clang-\d+", os.path.basename(p))]
    cands += glob.glob("/usr/lib/llvm-*/bin/clang")
    cands = sorted((p for p in cands if os.access(p, os.X_OK)), key=version, reverse=True)
    if not cands:
        raise EmulatorUnavailable("the emulator needs clang on PATH (Debian/Ubuntu: apt-get install clang-19)")
    d = tempfile.mkdtemp(prefix="zluda-emu-clang-")
    os.symlink(cands[0], os.path.join(d, "clang"))
    os.environ["PATH"] = d + os.pathsep + os.environ.get("PATH", "")


def emulator():
    """The patched emulator module (test.mockgpu.amd.emu of the tinygrad tree at $ZLUDA_AMDGPU_EMULATOR)."""
    global _emu, _applied
    with _lock:
        if _emu is not None:
            return _emu
        root = os.environ.get(ENV)
        if not root:
            raise EmulatorUnavailable(f"{ENV} is not set: point it at an unpacked tinygrad source tree "
                                      "(../shared/amd_emu/tinygrad-a9069c17.tar.gz)")
        here = os.path.join(root, "test", "mockgpu", "amd")
        if not os.path.isfile(os.path.join(here, "emu.py")) or not os.path.isdir(os.path.join(root, "tinygrad")):
            raise EmulatorUnavailable(f"{ENV}={root} is not a tinygrad source tree with test/mockgpu/amd/emu.py")
        _clang_on_path()
        if root not in sys.path:
            sys.path.insert(0, root)
        applied = []
        for name in ("pcode", "emu"):          # pcode first: emu imports it
            mod, tags = _load_patched(f"test.mockgpu.amd.{name}", os.path.join(here, name + ".py"), name, root)
            applied += tags
        _emu, _applied = mod, tuple(applied)
        atexit.register(_quiet_shutdown)
        return mod


def _quiet_shutdown():
    # tinygrad's UOp.__del__ looks a UOp up in a WeakKeyDictionary, which fails with a printed traceback
    # once interpreter shutdown has cleared the weakref module; with its `Ops` gone it skips that lookup
    # (the guard tinygrad itself has for shutdown).
    ops = sys.modules.get("tinygrad.uop.ops")
    if ops is not None:
        ops.Ops = None


def _load_patched(qualname, path, module, root):
    import importlib.util
    import types
    with open(path) as fh:
        src, tags = apply_fixes(fh.read(), path, module, disabled_fixes())
    spec = importlib.util.spec_from_file_location(qualname, path)
    mod = types.ModuleType(qualname)
    mod.__file__, mod.__package__, mod.__spec__ = path, qualname.rpartition(".")[0], spec
    sys.modules[qualname] = mod
    try:
        exec(compile(src, path, "exec"), mod.__dict__)
    except Exception as e:
        sys.modules.pop(qualname, None)
        raise EmulatorUnavailable(f"the emulator at {root} does not import: {type(e).__name__}: {e}") from e
    return mod, tags


def applied_fixes() -> tuple:
    return _applied


def available() -> str | None:
    """None when the emulator can run here, else why not (for a test's skip reason)."""
    try:
        emulator()
    except EmulatorUnavailable as e:
        return str(e)
    return None


# ------------------------------------------------------------------ the code object in emulator memory

class _Buffer:
    """Zeroed host memory at an aligned address; the emulator's global memory is this process's memory."""

    def __init__(self, size, align=256):
        self._raw = ctypes.create_string_buffer(size + align)
        self.address = (ctypes.addressof(self._raw) + align - 1) & ~(align - 1)
        self.size = size

    def write(self, data, offset=0):
        ctypes.memmove(self.address + offset, bytes(data), len(data))

    def read(self, size=None, offset=0):
        return ctypes.string_at(self.address + offset, self.size - offset if size is None else size)


def _elf_layout(data):
    """(PT_LOAD segments, dynamic relocations, executable sections) of a linked ELF64."""
    (phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = struct.unpack_from("<QQIHHHHHH", data, 32)
    segs = []
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from("<IIQQQQQQ", data,
                                                                                   phoff + i * phentsize)
        if p_type == 1:
            segs.append((p_offset, p_vaddr, p_filesz, p_memsz))
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    relocs, code = [], []
    for _, sh_type, flags, addr, off, size, link, _, _, entsize in sections:
        if sh_type == 1 and flags & 4:                     # SHT_PROGBITS, SHF_EXECINSTR
            code.append((addr, size))
        if sh_type == 4:                                   # SHT_RELA
            symtab = sections[link]
            for j in range(size // (entsize or 24)):
                r_offset, r_info, r_addend = struct.unpack_from("<QQq", data, off + j * 24)
                sym_value = 0
                if r_info >> 32:
                    sym_value = struct.unpack_from("<Q", data, symtab[4] + (r_info >> 32) * 24 + 8)[0]
                relocs.append((r_offset, r_info & 0xFFFFFFFF, sym_value, r_addend))
    return segs, relocs, code


def _isa_of(info):
    from ptx.amdgpu_targets import TARGETS
    tgt = next((t for t in TARGETS.values() if t.mach == info.mach), None)
    if tgt is None or tgt.family not in _ISA:
        have = tgt.cpu + " (" + tgt.family + ")" if tgt else f"GPU byte 0x{info.mach:02x}"
        raise EmulatorError(f"the emulator runs RDNA3, RDNA4 and CDNA3/4 code, not {have}")
    return tgt, _ISA[tgt.family]


class EmulatedCodeObject:
    """A linked code object loaded into this process for the emulator: segments at their virtual addresses,
    dynamic relocations applied, the cache maintenance it cannot run (no caches) replaced by s_nop.

    Device memory is host memory: a pointer in the kernel arguments is an address in this process (a numpy
    array's `.ctypes.data`, a ctypes buffer, ...), read and written in place by the kernel."""

    def __init__(self, code_object: bytes):
        emu = emulator()
        data = bytes(code_object)
        self.info = read_code_object(data)
        self.target, self.isa = _isa_of(self.info)
        self.kernels = {k[".name"]: k for k in self.info.metadata.get("amdhsa.kernels", [])}
        segs, relocs, code = _elf_layout(data)
        span = max((v + m for _, v, _, m in segs), default=0)
        self._image = _Buffer(span + 64, align=4096)           # +64: the decoder reads 16 bytes past the end
        base = self.address = self._image.address
        for off, vaddr, filesz, _ in segs:
            self._image.write(data[off:off + filesz], vaddr)
        for r_offset, r_type, sym_value, addend in relocs:
            if r_type == R_AMDGPU_RELATIVE64:
                val = base + addend
            elif r_type == R_AMDGPU_ABS64:
                val = base + sym_value + addend
            else:
                raise EmulatorError(f"dynamic relocation type {r_type} at 0x{r_offset:x} is not one a loader "
                                    "of linked code objects handles")
            self._image.write(struct.pack("<Q", val), r_offset)
        self.symbols = {name: (base + value, size) for name, _, size, defined, value in self.info.dynsyms
                        if defined and name}
        self.replaced = self._replace_cache_invalidates(emu, code)

    def _replace_cache_invalidates(self, emu, code):
        """Walks the code sections with the emulator's own decoder, so instruction sizes (literals) are exact."""
        counts = {}
        for start, size in code:
            pc = start
            while pc < start + size:
                word = self._image.read(16, pc)
                name = _CACHE_INVALIDATES.get(word[:8])
                if name:
                    self._image.write(_S_NOP * 2, pc)
                    counts[name] = counts.get(name, 0) + 1
                    pc += 8
                    continue
                try:
                    inst = emu.decode_inst(word, self.isa)
                except ValueError:         # the emulator would stop there too, if a kernel reached it
                    counts["undecodable"] = counts.get("undecodable", 0) + 1
                    pc += 4
                    continue
                name = emu._op_name(inst)
                if name in _CACHE_OPS:
                    self._image.write(_S_NOP * (inst.size() // 4), pc)
                    counts[name.lower()] = counts.get(name.lower(), 0) + 1
                pc += inst.size()
        return counts

    def _descriptor(self, name):
        if name not in self.kernels:
            raise KeyError(f"no kernel named {name!r} (have {sorted(self.kernels)})")
        addr, _ = self.symbols[name + ".kd"]
        g, p, ka, _, entry, r3, r1, r2, kcp, preload = _KD.unpack(ctypes.string_at(addr, 64))
        return dict(address=addr, group=g, private=p, kernarg=ka, entry=entry, rsrc1=r1, rsrc2=r2, rsrc3=r3,
                    kcp=kcp, preload_len=preload & 0x7F, preload_off=preload >> 7)

    # -------------------------------------------------------------- what HIP writes before a dispatch

    def kernarg_segment(self, name, grid, block, explicit: bytes, shared_bytes=0, hidden_values=None) -> bytearray:
        """The kernarg segment ROCclr builds for hipModuleLaunchKernel: the explicit arguments at their
        metadata offsets, then the code-object-v5 hidden arguments (hipModuleLaunchKernel launches 3-D)."""
        meta = self.kernels[name]
        seg = bytearray(meta[".kernarg_segment_size"])
        args = meta.get(".args", [])
        explicit_args = [a for a in args if not a[".value_kind"].startswith("hidden_")]
        need = max((a[".offset"] + a[".size"] for a in explicit_args), default=0)
        if len(explicit) < need:
            raise ValueError(f"{name} takes {need} bytes of explicit arguments, got {len(explicit)}")
        for a in explicit_args:
            seg[a[".offset"]:a[".offset"] + a[".size"]] = explicit[a[".offset"]:a[".offset"] + a[".size"]]
        values = {"hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
                  "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
                  "hidden_remainder_x": 0, "hidden_remainder_y": 0, "hidden_remainder_z": 0,
                  "hidden_global_offset_x": 0, "hidden_global_offset_y": 0, "hidden_global_offset_z": 0,
                  "hidden_grid_dims": 3, "hidden_dynamic_lds_size": shared_bytes,
                  # no device enqueue, not a multi-grid launch; no apertures: gfx9+ code reads src_*_base
                  "hidden_default_queue": 0, "hidden_completion_action": 0, "hidden_multigrid_sync_arg": 0,
                  "hidden_private_base": 0, "hidden_shared_base": 0, "hidden_none": 0,
                  **(hidden_values or {})}
        for a in args:
            kind = a[".value_kind"]
            if not kind.startswith("hidden_"):
                continue
            if kind not in values:
                raise EmulatorError(f"{name}: hidden argument {kind} is not one this launcher fills")
            seg[a[".offset"]:a[".offset"] + a[".size"]] = int(values[kind]).to_bytes(a[".size"], "little")
        return seg

    # -------------------------------------------------------------- launch

    def launch_raw(self, name, grid, block, params, shared_bytes=0):
        """Runs kernel `name` on a grid of `grid` workgroups of `block` threads. `params` is the explicit
        arguments laid out as the metadata says (bytes, or the int address of such a buffer: the packed
        parameter buffer of cuLaunchKernel / HIP_LAUNCH_PARAM_BUFFER_POINTER). Blocks until done; returns
        the Dispatch record (kernarg bytes, printf buffer contents)."""
        g, b = _dims(grid), _dims(block)
        if any(x <= 0 for x in g + b) or b[0] * b[1] * b[2] > 1024 or b[2] > 1024:
            raise ValueError(f"invalid launch dimensions grid={g} block={b}")
        meta = self.kernels.get(name)
        if meta is None:
            raise KeyError(f"no kernel named {name!r} (have {sorted(self.kernels)})")
        if b[0] * b[1] * b[2] > meta.get(".max_flat_workgroup_size", 1024):
            raise ValueError(f"{name}: block {b} exceeds its .max_flat_workgroup_size "
                             f"{meta['.max_flat_workgroup_size']}")
        kd = self._descriptor(name)
        if isinstance(params, int):
            need = max((a[".offset"] + a[".size"] for a in meta.get(".args", [])
                        if not a[".value_kind"].startswith("hidden_")), default=0)
            params = ctypes.string_at(params, need) if need else b""
        lds = kd["group"] + int(shared_bytes)
        if shared_bytes < 0 or lds > _LDS_LIMIT[self.isa]:
            raise ValueError(f"{name}: {kd['group']} static + {shared_bytes} dynamic shared bytes exceed "
                             f"{_LDS_LIMIT[self.isa]}")
        scratch = kd["private"]
        if kd["kcp"] & _KCP_DYNAMIC_STACK:
            scratch = min(max(_CLR_STACK, scratch), _CLR_STACK_CAP)

        keep = []                    # host memory the dispatch points at, alive until it returns

        def buffer(size, align=64):
            buf = _Buffer(size, align)
            keep.append(buf)
            return buf
        hidden = {}
        kinds = {a[".value_kind"] for a in meta.get(".args", [])}
        queue = buffer(256)          # stand-in for the amd_queue_t: zeroed, read by no gfx9+ code
        hidden["hidden_queue_ptr"] = queue.address
        printf = None
        if "hidden_printf_buffer" in kinds:
            printf = buffer(_PRINTF_BUFFER, 8)                  # header as ROCclr writes it: used 0, room size-8
            printf.write(struct.pack("<II", 0, _PRINTF_BUFFER - 8))
            hidden["hidden_printf_buffer"] = printf.address
        if "hidden_heap_v1" in kinds or "hidden_hostcall_buffer" in kinds:
            raise EmulatorError(f"{name}: device malloc / hostcall need a service thread the emulator has not")
        seg = self.kernarg_segment(name, g, b, bytes(params), int(shared_bytes), hidden)
        kernarg = buffer(max(len(seg), 8), max(16, meta.get(".kernarg_segment_align", 16)))
        kernarg.write(seg)
        user = self._user_sgprs(name, kd, g, b, lds, scratch, kernarg, buffer, queue, seg)
        rsrc2 = (kd["rsrc2"] & ~_RSRC2_LDS_MASK) | ((-(-lds // _LDS_GRANULE)) << _RSRC2_LDS_SHIFT)
        flush = _flushes_denormals(name, kd["rsrc1"])
        emu = emulator()
        with _run_lock:             # the emulator's state (instruction caches, FPU mode) is per process
            try:
                rc = emu.run_asm(kd["address"] + kd["entry"], 0, *g, *b, kernarg.address, rsrc2=rsrc2,
                                 scratch_size=scratch, arch=self.isa, user_data=user, flush_denormals=flush)
            except RuntimeError as e:
                raise EmulatorError(f"{name}: {e}") from None
        if rc != 0:
            raise EmulatorError(f"{name}: the emulator returned {rc}")
        used = struct.unpack("<I", printf.read(4))[0] if printf else 0
        return Dispatch(bytes(seg), printf.read(min(used, _PRINTF_BUFFER - 8), 8) if printf else b"")

    def _user_sgprs(self, name, kd, g, b, lds, scratch, kernarg, buffer, queue, seg):
        """s[0..] at wave start, in the ABI's order (AMDGPUUsage, "Initial Kernel Execution State")."""
        kcp = kd["kcp"]
        refused = [what for bit, what in ((_KCP_PRIVATE_SEGMENT_BUFFER, "the private segment buffer"),
                                          (_KCP_FLAT_SCRATCH_INIT, "flat scratch init")) if kcp & bit]
        if kd["rsrc2"] & _RSRC2_WORKGROUP_INFO:
            refused.append("the workgroup info SGPR")
        if refused:
            raise EmulatorError(f"{name}: the descriptor asks for {', '.join(refused)}, which the emulator "
                                "does not set up")
        user = []

        def ptr(addr):
            user.extend((addr & 0xFFFFFFFF, addr >> 32))
        if kcp & _KCP_DISPATCH_PTR:
            pkt = buffer(64)
            pkt.write(struct.pack("<HHHHHHIIIIIQQQQ", 2 | (1 << 8), 3, b[0], b[1], b[2], 0, g[0] * b[0],
                                  g[1] * b[1], g[2] * b[2], scratch, lds, kd["address"], kernarg.address, 0, 0))
            ptr(pkt.address)
        if kcp & _KCP_QUEUE_PTR:
            ptr(queue.address)
        if kcp & _KCP_KERNARG_PTR:
            ptr(kernarg.address)
        if kcp & _KCP_DISPATCH_ID:
            ptr(0)
        if kcp & _KCP_PRIVATE_SEGMENT_SIZE:
            user.append(scratch)
        if kd["preload_len"]:
            off = kd["preload_off"] * 4
            words = bytes(seg[off:off + 4 * kd["preload_len"]]).ljust(4 * kd["preload_len"], b"\0")
            user.extend(struct.unpack(f"<{kd['preload_len']}I", words))
        want = (kd["rsrc2"] & _RSRC2_USER_SGPRS) >> 1
        if len(user) > want:
            raise EmulatorError(f"{name}: {len(user)} user SGPRs set up, the descriptor's rsrc2 has room for {want}")
        return user + [0] * (want - len(user))


def _flushes_denormals(name, rsrc1):
    """rsrc1 FLOAT_DENORM_MODE_32 / _16_64 (3: keep in and out, 0: flush): the host FPU the emulator
    computes with has one switch for both, so a kernel wanting different modes is refused."""
    f32, f64 = (rsrc1 >> 16) & 3, (rsrc1 >> 18) & 3
    if f32 == f64 == 3:
        return False
    if f32 == f64 == 0:
        return True
    raise EmulatorError(f"{name}: denormal modes f32={f32} f16/f64={f64}; the emulator models 'keep all' (3) "
                        "or 'flush all' (0) only")


@dataclass
class Dispatch:
    kernarg: bytes              # the kernarg segment the kernel ran with
    printf: bytes               # the printf buffer's records (after its 8-byte header), b"" without printf


def _dims(d):
    t = tuple(int(x) for x in (d if isinstance(d, (tuple, list)) else (d,)))
    return t + (1,) * (3 - len(t))


_loaded = {}


def load(code_object: bytes) -> EmulatedCodeObject:
    """The code object loaded for the emulator (one copy per distinct code object in this process)."""
    key = hashlib.sha256(bytes(code_object)).digest()
    with _lock:
        if key not in _loaded:
            _loaded[key] = EmulatedCodeObject(code_object)
        return _loaded[key]
