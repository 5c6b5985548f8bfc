"""Offline checks of an AMDGPU code object: the ELF header, segments, dynamic symbols and the
NT_AMDGPU_METADATA note, checked against the target and against the PTX it was compiled from.
Used by the tests and by `zluda-py inspect`; reads bytes only (no LLVM)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
ABI_VERSION_FOR_V5 = 3
ET_DYN = 3
PT_LOAD = 1
SHT_NOTE, SHT_DYNSYM = 7, 11
NT_AMDGPU_METADATA = 32
STT_OBJECT, STT_FUNC = 1, 2
KD_SIZE = 64


@dataclass
class CodeObjectInfo:
    elf_class: int = 0
    data: int = 0
    osabi: int = 0
    abi_version: int = 0
    e_type: int = 0
    machine: int = 0
    e_flags: int = 0
    load_segments: int = 0
    dynsyms: list = field(default_factory=list)      # (name, type, size, defined, value)
    metadata: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)     # structural problems met while reading

    @property
    def mach(self) -> int:
        return self.e_flags & 0xFF


class CodeObjectError(ValueError):
    pass


def _cstr(buf, off):
    end = buf.find(b"\0", off)
    return buf[off:end if end >= 0 else len(buf)].decode(errors="replace")


def read_code_object(data: bytes) -> CodeObjectInfo:
    """Parse what the checks need; raises CodeObjectError when it is no ELF64 little-endian file."""
    info = CodeObjectInfo()
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise CodeObjectError("not an ELF file")
    info.elf_class, info.data, _, info.osabi, info.abi_version = data[4], data[5], data[6], data[7], data[8]
    if info.elf_class != 2 or info.data != 1:
        raise CodeObjectError(f"not ELF64 little-endian (class {info.elf_class}, data {info.data})")
    (info.e_type, info.machine, _, _, phoff, shoff, info.e_flags, _, phentsize, phnum, shentsize, shnum,
     _) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
    for i in range(phnum):
        (p_type,) = struct.unpack_from("<I", data, phoff + i * phentsize)
        if p_type == PT_LOAD:
            info.load_segments += 1
    sections = []
    for i in range(shnum):
        sections.append(struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize))
    for sh in sections:
        _, sh_type, _, _, off, size, link, _, _, entsize = sh
        if sh_type == SHT_NOTE:
            _read_notes(data[off:off + size], info)
        elif sh_type == SHT_DYNSYM:
            stroff, strsize = sections[link][4], sections[link][5]
            strtab = data[stroff:stroff + strsize]
            for j in range(1, size // (entsize or 24)):
                st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, off + j * 24)
                info.dynsyms.append((_cstr(strtab, st_name), st_info & 0xF, st_size, st_shndx != 0, st_value))
    return info


def _read_notes(buf, info):
    off = 0
    while off + 12 <= len(buf):
        namesz, descsz, ntype = struct.unpack_from("<III", buf, off)
        name = buf[off + 12:off + 12 + namesz].rstrip(b"\0")
        doff = off + 12 + ((namesz + 3) & ~3)
        desc = buf[doff:doff + descsz]
        if name == b"AMDGPU" and ntype == NT_AMDGPU_METADATA:
            try:
                import msgpack
                info.metadata = msgpack.unpackb(desc, raw=False, strict_map_key=False)
            except Exception as e:  # noqa: BLE001 - any decoding failure is a finding, not a crash
                info.problems.append(f"NT_AMDGPU_METADATA does not decode as msgpack: {e}")
        off = doff + ((descsz + 3) & ~3)


def expected_kernels(ptx_text: str) -> dict:
    """name -> {'params': [(offset, size, align)], 'kernarg': size, 'max_threads': n} from the PTX."""
    import ptx
    from ptx import ast as A
    from ptx.codegen.module_context import layout_params
    out = {}
    for item in ptx.parse(ptx_text).items:
        if isinstance(item, A.Function) and item.kind == "entry" and item.body is not None:
            params, size = layout_params(item.params)
            dims = item.directives.get("reqntid") or item.directives.get("maxntid")
            n = 1024
            if dims:
                n = 1
                for x in dims:
                    n *= int(x)
                n = min(n, 1024)
            out[item.name] = {"params": params, "kernarg": size, "max_threads": n}
    return out


@dataclass
class Verdict:
    ok: bool
    problems: list
    facts: list          # human-readable lines of what was found


def verify(data: bytes, target=None, ptx_text: str | None = None, launch_block: int | None = None) -> Verdict:
    """Check a code object; `target` (an AmdgpuTarget or a name) and `ptx_text` add the cross-checks."""
    from ptx.amdgpu_targets import TARGETS, parse_target
    problems, facts = [], []
    try:
        info = read_code_object(data)
    except (CodeObjectError, struct.error, IndexError) as e:
        return Verdict(False, [f"unreadable code object: {e}"], [])
    problems += info.problems
    if isinstance(target, str):
        target = parse_target(target)
    mach_name = next((t.cpu for t in TARGETS.values() if t.mach == info.mach), f"0x{info.mach:02x}")
    facts.append(f"ELF64 LE, e_machine {info.machine}, OS/ABI {info.osabi}, ABI version {info.abi_version}, "
                 f"type {info.e_type}, {info.load_segments} PT_LOAD, e_flags 0x{info.e_flags:x} ({mach_name})")
    if info.machine != EM_AMDGPU:
        problems.append(f"e_machine is {info.machine}, not {EM_AMDGPU} (EM_AMDGPU)")
    if info.osabi != ELFOSABI_AMDGPU_HSA:
        problems.append(f"OS/ABI is {info.osabi}, not {ELFOSABI_AMDGPU_HSA} (HSA)")
    if info.abi_version != ABI_VERSION_FOR_V5:
        problems.append(f"ABI version is {info.abi_version}, not {ABI_VERSION_FOR_V5} (code object v5)")
    if info.e_type != ET_DYN or info.load_segments == 0:
        problems.append("not a linked shared object (ET_DYN with PT_LOAD segments): HIP refuses it")
    if target is not None and info.mach != target.mach:
        problems.append(f"e_flags GPU byte 0x{info.mach:02x} ({mach_name}) is not {target.cpu} (0x{target.mach:02x})")
    undefined = [s[0] for s in info.dynsyms if not s[3] and s[0]]
    if undefined:
        problems.append(f"undefined dynamic symbols: {', '.join(undefined)}")
    syms = {s[0]: s for s in info.dynsyms}
    md = info.metadata
    if not md:
        problems.append("no NT_AMDGPU_METADATA note")
    else:
        facts.append(f"metadata: amdhsa.version {md.get('amdhsa.version')}, target {md.get('amdhsa.target')}")
        if target is not None and md.get("amdhsa.target", "").split("--")[-1].split(":")[0] != target.cpu:
            problems.append(f"metadata target {md.get('amdhsa.target')} is not {target.cpu}")
    kernels = {k.get(".name"): k for k in md.get("amdhsa.kernels", [])}
    for name, k in kernels.items():
        explicit = [a for a in k.get(".args", []) if not str(a.get(".value_kind", "")).startswith("hidden_")]
        facts.append(f"kernel {name}: {len(explicit)} args, kernarg {k.get('.kernarg_segment_size')} B, "
                     f"LDS {k.get('.group_segment_fixed_size')} B, scratch {k.get('.private_segment_fixed_size')} B, "
                     f"max block {k.get('.max_flat_workgroup_size')}, wave {k.get('.wavefront_size')}, "
                     f"{k.get('.vgpr_count')} VGPRs, {k.get('.sgpr_count')} SGPRs")
        kd = syms.get(k.get(".symbol", name + ".kd"))
        if kd is None:
            problems.append(f"{name}: no {name}.kd dynamic symbol")
        elif kd[2] != KD_SIZE or kd[1] != STT_OBJECT or not kd[3]:
            problems.append(f"{name}.kd is not a defined 64-byte object (size {kd[2]}, type {kd[1]})")
        ws = k.get(".wavefront_size")
        if ws not in (32, 64):
            problems.append(f"{name}: .wavefront_size {ws}")
        elif target is not None and ws != target.wave:
            problems.append(f"{name}: .wavefront_size {ws}, the target runs {target.wave}-wide waves")
        if launch_block is not None and k.get(".max_flat_workgroup_size", 0) < launch_block:
            problems.append(f"{name}: .max_flat_workgroup_size {k.get('.max_flat_workgroup_size')} "
                            f"< the launch's {launch_block} threads")
    if ptx_text is not None:
        problems += _check_against_ptx(kernels, ptx_text)
    return Verdict(not problems, problems, facts)


def _check_against_ptx(kernels, ptx_text):
    problems = []
    try:
        want = expected_kernels(ptx_text)
    except Exception as e:  # noqa: BLE001 - a PTX that does not parse is a finding
        return [f"the PTX does not parse: {e}"]
    for name, exp in want.items():
        k = kernels.get(name)
        if k is None:
            problems.append(f"kernel {name} of the PTX is missing from the metadata")
            continue
        explicit = [a for a in k.get(".args", []) if not str(a.get(".value_kind", "")).startswith("hidden_")]
        if len(explicit) != len(exp["params"]):
            problems.append(f"{name}: {len(explicit)} explicit args, the PTX has {len(exp['params'])}")
        for i, (a, (off, size, _)) in enumerate(zip(explicit, exp["params"])):
            if a.get(".offset") != off or a.get(".size") != size:
                problems.append(f"{name}: arg {i} at {a.get('.offset')}+{a.get('.size')}, the PTX says {off}+{size}")
        ks = k.get(".kernarg_segment_size", 0)
        if ks < exp["kernarg"]:
            problems.append(f"{name}: .kernarg_segment_size {ks} < the PTX's {exp['kernarg']} parameter bytes")
        hidden = [a for a in k.get(".args", []) if str(a.get(".value_kind", "")).startswith("hidden_")]
        if hidden:
            first = min(a[".offset"] for a in hidden)
            end = max((off + size for off, size, _ in exp["params"]), default=0)
            if first < end or first % 8:
                problems.append(f"{name}: hidden arguments start at {first}, inside or misaligned after "
                                f"the explicit ones (end {end})")
        mf = k.get(".max_flat_workgroup_size", 0)
        if mf < exp["max_threads"]:
            problems.append(f"{name}: .max_flat_workgroup_size {mf} < {exp['max_threads']} (PTX .maxntid/.reqntid or 1024)")
    for name in kernels:
        if name not in want:
            problems.append(f"metadata kernel {name} is not in the PTX")
    return problems
