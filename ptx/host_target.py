"""What the host JIT builds kernel code for and what that code may call: the target machine (this CPU, or
the one ZLUDA_CPU_TARGET names), the closed set of symbols kernel code may call, and the check that an
object needs nothing outside it."""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
import tempfile

from ptx.errors import PTXError, PTXUnsupportedError

CPU_ENV = "ZLUDA_CPU_TARGET"
_HOST_NAMES = ("", "host", "native")
# Always on for an explicit x86-64 CPU: LLVM aborts the process emitting 64-bit code for a 32-bit CPU
# name (i686, pentium4), and every x86-64 CPU has these anyway.
_X86_64_BASELINE = "+64bit,+cmov,+cx8,+fxsr,+mmx,+sse,+sse2"

_registered = None         # the names kernel code may call (filled from the runtime on first use)
_machines: dict = {}       # CPU name ("" = the host) -> (TargetMachine, cache key) or the PTXError
# function_emitter's MEMBASE_SYMBOL and LOCALS_BASE_FN: named here so that a cache hit, which checks
# a stored module's names, imports no code generator
_RUNTIME_DATA = ("ptx_rt_membase", "ptx_rt_locals_base")


# ------------------------------------------------------------------ the symbols

def _names() -> set:
    global _registered
    if _registered is None:
        _registered = set(runtime_symbols())
    return _registered


def register(name: str, address: int) -> None:
    """Make `name` known (at `address`) to MCJIT too; only registered names pass check_object."""
    import llvmlite.binding as llvm
    if not address:
        raise PTXError(f"internal error: {name} has no address to register")
    llvm.add_symbol(name, address)
    _names().add(name)


def registered() -> frozenset:
    return frozenset(_names())


def runtime_symbols() -> dict:
    """Everything the code generator or LLVM may make kernel code call, by name: the runtime's callbacks
    and globals, the warp scheduler's helpers, and libcalls.c's table (libm and compiler builtins)."""
    from ptx import runtime
    from ptx.codegen.native_helpers import helper_symbols
    lib = runtime.library()
    symbols = {**runtime.symbols(), **runtime.libcalls(), **helper_symbols()}
    for name in _RUNTIME_DATA:
        symbols[name] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    return symbols


def register_runtime() -> None:
    for name, address in runtime_symbols().items():
        register(name, address)


def undefined_symbols(obj: bytes) -> set:
    """The names an ELF64 relocatable object refers to without defining them (st_shndx == SHN_UNDEF)."""
    if obj[:4] != b"\x7fELF" or len(obj) < 64 or obj[4] != 2 or obj[5] not in (1, 2):
        raise PTXError("internal error: the JIT's object is not ELF64, its symbols cannot be checked")
    e = "<" if obj[5] == 1 else ">"
    shoff, = struct.unpack_from(e + "Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from(e + "HH", obj, 0x3A)

    def section(i):     # (type, offset, size, link, entsize)
        _, typ, _, _, off, size, link, _, _, entsize = struct.unpack_from(e + "IIQQQQIIQQ", obj,
                                                                          shoff + i * shentsize)
        return typ, off, size, link, entsize
    if shnum == 0 and shoff:            # more than 0xff00 sections: the count is in section 0
        shnum = section(0)[2]
    names = set()
    for i in range(shnum):
        typ, off, size, link, entsize = section(i)
        if typ != 2 or not entsize:     # SHT_SYMTAB
            continue
        strtab = section(link)[1]
        for st_name, _, _, shndx, _, _ in struct.iter_unpack(e + "IBBHQQ", obj[off:off + size]):
            if shndx == 0 and st_name:
                names.add(obj[strtab + st_name:obj.index(b"\0", strtab + st_name)].decode())
    return names


def rename_undefined(obj: bytes, names: dict) -> bytes:
    """`obj` with its undefined references to names' keys made to their values: a new symbol string
    table appended at the end, the old one left in place (section names may share it)."""
    e = "<" if obj[5] == 1 else ">"
    out = bytearray(obj)
    shoff, = struct.unpack_from(e + "Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from(e + "HH", obj, 0x3A)
    if shnum == 0 and shoff:
        shnum, = struct.unpack_from(e + "Q", obj, shoff + 0x20)
    for i in range(shnum):
        hdr = shoff + i * shentsize
        _, typ, _, _, off, size, link, _, _, entsize = struct.unpack_from(e + "IIQQQQIIQQ", obj, hdr)
        if typ != 2 or not entsize:     # SHT_SYMTAB
            continue
        str_hdr = shoff + link * shentsize
        str_off, str_size = struct.unpack_from(e + "QQ", obj, str_hdr + 0x18)
        table = bytearray(obj[str_off:str_off + str_size])
        changed = False
        for at in range(off, off + size, entsize):
            st_name, _, _, shndx = struct.unpack_from(e + "IBBH", obj, at)
            if shndx or not st_name:
                continue
            end = obj.index(b"\0", str_off + st_name)
            new = names.get(obj[str_off + st_name:end].decode())
            if new is not None:
                struct.pack_into(e + "I", out, at, len(table))
                table += new.encode() + b"\0"
                changed = True
        if changed:
            struct.pack_into(e + "QQ", out, str_hdr + 0x18, len(out), len(table))
            out += table
    return bytes(out)


def check_object(obj: bytes, what: str = "kernel code") -> None:
    """Refuse an object that needs a symbol nobody registered: it would fail to load, or call address 0."""
    check_names(undefined_symbols(obj), what)


def check_names(names, what: str = "kernel code") -> None:
    missing = sorted(set(names) - _names())
    if missing:
        names = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " and " + missing[-1]
        raise PTXUnsupportedError(f"{what} needs {names}, which the CPU runtime does not provide")


# ------------------------------------------------------------------ the target machine

def cpu_name(cpu=None) -> str:
    """The CPU asked for: `cpu`, else ZLUDA_CPU_TARGET; "" means this machine's own."""
    name = (os.environ.get(CPU_ENV, "") if cpu is None else cpu).strip()
    return "" if name in _HOST_NAMES else name


def key_part(cpu=None) -> str:
    """What names machine(cpu)'s code in the object-cache key, found without loading LLVM (a cache hit must
    not pay llvmlite's import): the CPU asked for, or this one's identity (/proc/cpuinfo), and the LLVM
    build llvmlite carries."""
    name = cpu_name(cpu)
    llvm_build = _llvm_build()
    ident = None if name else _host_cpu_identity()
    if llvm_build is None or (not name and ident is None):
        return machine(cpu)[1]
    if name:
        features = _X86_64_BASELINE if platform.machine().lower() in ("x86_64", "amd64") else ""
        return f"{name}|{features}|{llvm_build}|pic"
    return f"host:{ident}|{llvm_build}|pic"


def _llvm_build():
    import importlib.util
    try:
        spec = importlib.util.find_spec("llvmlite")
        st = os.stat(os.path.join(spec.submodule_search_locations[0], "binding", "libllvmlite.so"))
    except (ImportError, AttributeError, TypeError, IndexError, OSError):
        return None
    return f"llvmlite:{st.st_size}:{st.st_mtime_ns}"


def _first_cpu() -> dict:
    """/proc/cpuinfo's fields for the first CPU ({} where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n", 1)[0]
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in first.splitlines() if ":" in line)}


def _host_cpu_identity():
    """The first CPU's vendor, family, model and flags: what LLVM's host CPU name and features come from."""
    fields = _first_cpu()
    parts = [fields.get(k, "") for k in ("vendor_id", "cpu family", "model", "flags")]
    if not parts[3]:
        return None
    import hashlib
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]


def machine(cpu=None):
    """(target machine, its part of the object-cache key) for cpu_name(cpu), made once per name."""
    name = cpu_name(cpu)
    got = _machines.get(name)
    if got is None:
        try:
            got = _create(name)
        except PTXError as e:
            got = e
        _machines[name] = got
    if isinstance(got, PTXError):
        raise got
    return got


def _create(name):
    import llvmlite.binding as llvm
    llvm.initialize_native_target()     # idempotent; a caller may ask before ptx.host has compiled
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    if not name:
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        tm = target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic",
                                          codemodel="default")
    else:
        cpu, features = name, _X86_64_BASELINE if target.triple.startswith("x86_64") else ""
        # LLVM only says so on stderr, then goes on with a generic CPU (or aborts in code generation)
        tm, said = _stderr_of(lambda: target.create_target_machine(cpu=cpu, features=features, opt=3,
                                                                   reloc="pic", codemodel="default"))
        if "not a recognized processor" in said:
            raise PTXUnsupportedError(
                f"{CPU_ENV}={name!r}: LLVM {'.'.join(map(str, llvm.llvm_version_info))} knows no such CPU "
                f"for {target.triple} (e.g. x86-64-v2, x86-64-v3, znver3; empty for this machine's CPU)")
        if said:
            os.write(2, said.encode())
    # position-independent code: it is linked into a shared object and loaded with dlopen (host_loader)
    return tm, f"{cpu}|{features}|{llvm.llvm_version_info}|pic"


def _stderr_of(fn):
    """(fn(), what it wrote to file descriptor 2)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 2)
            try:
                result = fn()
            finally:
                os.dup2(saved, 2)
            tmp.seek(0)
            return result, tmp.read().decode(errors="replace")
    finally:
        os.close(saved)
