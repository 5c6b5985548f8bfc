"""`ptx.compile(text, target="gfx1100")`: PTX -> LLVM IR -> AMDGPU code object (a linked ELF, code
object v5), compiled in a child process, linked with ld.lld, cached on disk, with per-kernel metadata."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ptx.amdgpu_targets import AmdgpuTarget, parse_target, with_features
from ptx.child_process import python_executable, read_exactly
from ptx.errors import PTXUnsupportedError

_compiler_version = None


def compiler_version() -> str:
    """A hash of the compiler's own sources: code objects cached by another compiler build never match."""
    global _compiler_version
    if _compiler_version is None:
        h = hashlib.sha256(b"amdgcn-1")
        for p in sorted(HERE.rglob("*.py")):     # every subpackage: a new one must not be left out
            h.update(str(p.relative_to(HERE)).encode())
            h.update(p.read_bytes())
        # linked in (amdgpu_texture): texture.c includes texture_mip.c and surface.c
        for name in ("texture.c", "texture.h", "texture_mip.c", "surface.c"):
            p = HERE / "runtime" / name
            h.update(p.read_bytes())
        _compiler_version = h.hexdigest()[:16]
    return _compiler_version
HERE = Path(__file__).resolve().parent
_lock = threading.Lock()
_datalayout = None
_linker = None


class ToolchainError(PTXUnsupportedError):
    """A tool the AMDGPU path needs (ld.lld) is missing, or the LLVM child failed."""


# ------------------------------------------------------------------ tools

def find_linker():
    """argv prefix running an ld.lld that links AMDGPU code objects, or None.
    Order: $ZLUDA_LLD, ld.lld on PATH, the newest /usr/lib/llvm-N/bin/ld.lld, ld.lld-N, PyPI ziglang."""
    global _linker
    if _linker is not None:
        return _linker or None
    cands = []
    if os.environ.get("ZLUDA_LLD"):
        cands.append([os.environ["ZLUDA_LLD"]])
    if shutil.which("ld.lld"):
        cands.append([shutil.which("ld.lld")])

    def version(p):
        m = re.search(r"llvm-(\d+)", p) or re.search(r"lld-(\d+)$", p)
        return int(m.group(1)) if m else 0
    for p in sorted(glob.glob("/usr/lib/llvm-*/bin/ld.lld"), key=version, reverse=True):
        cands.append([p])
    for d in os.environ.get("PATH", "").split(os.pathsep):
        for p in sorted(glob.glob(os.path.join(d, "ld.lld-*")), key=version, reverse=True):
            cands.append([p])
    for argv in cands:
        if os.access(argv[0], os.X_OK):
            _linker = argv
            return argv
    try:
        import importlib.util
        if importlib.util.find_spec("ziglang") is not None:
            _linker = [python_executable(), "-m", "ziglang", "ld.lld"]
            return _linker
    except (ImportError, ValueError):
        pass
    _linker = []
    return None


def datalayout() -> str:
    global _datalayout
    with _lock:
        if _datalayout is None:
            import llvmlite.binding as llvm
            llvm.initialize_all_targets()
            tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu="gfx1100")
            _datalayout = str(tm.target_data)
    return _datalayout


def llvm_version() -> str:
    import llvmlite.binding as llvm
    return ".".join(map(str, llvm.llvm_version_info))


# ------------------------------------------------------------------ results

@dataclass
class AmdgpuKernel:
    name: str
    params: list              # [(offset, size, align)] of the explicit kernel arguments
    param_size: int
    static_shared_bytes: int
    lds_bytes: int            # .group_segment_fixed_size
    max_threads: int          # .max_flat_workgroup_size
    wavefront_size: int
    kernarg_segment_size: int
    private_bytes: int        # .private_segment_fixed_size
    vgpr_count: int
    sgpr_count: int
    maxntid: tuple = None
    reqntid: tuple = None
    param_types: list = field(default_factory=list, repr=False)
    module: "AmdgpuModule" = field(default=None, repr=False, compare=False)

    # The same packing as the host's kernels: numpy arrays pass their data address, which is also the
    # emulator's device address (its global memory is this process's memory).
    def pack_params(self, args) -> bytes:
        from ptx.host import HostKernel
        return HostKernel.pack_params(self, args)

    @property
    def _param_types(self):
        return self.param_types

    def launch(self, grid, block, args, shared_bytes=0):
        """Runs the kernel on the emulator (ZLUDA_AMDGPU_EMULATOR), like HostKernel.launch: arrays are
        read and written in place. Emulation is not hardware: see ptx.amdgpu_emulator."""
        return self.launch_raw(grid, block, self.pack_params(list(args)), shared_bytes)

    def launch_raw(self, grid, block, params, shared_bytes=0):
        """params: the packed explicit arguments (bytes, or the address of param_size bytes)."""
        return self.module.emulated().launch_raw(self.name, grid, block, params, shared_bytes)


class AmdgpuModule:
    def __init__(self, code_object, target, kernels, globals_, ir_text, metadata, cache_hit):
        self.code_object = code_object
        self.target = target
        self.kernels = kernels
        self.globals = globals_
        self.ir = ir_text
        self.metadata = metadata
        self.cache_hit = cache_hit

    def kernel(self, name) -> AmdgpuKernel:
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"no kernel named {name!r} (have {sorted(self.kernels)})") from None

    def emulated(self):
        """This code object loaded into the emulator (ptx.amdgpu_emulator.EmulatedCodeObject): its
        `.symbols[name]` are the (address, size) of the module's globals there."""
        from ptx import amdgpu_emulator
        return amdgpu_emulator.load(self.code_object)


# ------------------------------------------------------------------ compile

class _CompilerChild:
    """One long-lived LLVM child (amdgpu_llc.py --serve), restarted after it dies: an abort costs one
    module, and the interpreter and LLVM start once per process instead of once per module."""

    def __init__(self):
        self.proc = None
        self.err = None
        self.owner = None            # pid that started the child: a forked process starts its own
        self.lock = threading.Lock()

    def _start(self):
        self.owner = os.getpid()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([python_executable(), str(HERE / "amdgpu_llc.py"), "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)

    def _stop(self):
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.proc = None

    def _read(self, n, deadline):
        return read_exactly(self.proc.stdout, n, deadline)

    def _readline(self, deadline):
        line = b""
        while not line.endswith(b"\n"):
            line += self._read(1, deadline)
        return line

    def compile(self, ir: bytes, target: AmdgpuTarget, opt_level: int, timeout: float, link=None) -> bytes:
        import time
        with self.lock:
            if self.proc is None or self.owner != os.getpid() or self.proc.poll() is not None:
                self._start()
            deadline = time.monotonic() + timeout
            try:
                extra = f" {link}" if link else ""
                self.proc.stdin.write(f"{target.cpu} {target.llvm_features or '-'} {opt_level} {len(ir)}{extra}\n"
                                      .encode() + ir)
                self.proc.stdin.flush()
                status, n = self._readline(deadline).split()
                payload = self._read(int(n), deadline)
            except TimeoutError:
                self._stop()
                raise ToolchainError(f"LLVM took longer than {timeout:.0f} s compiling for {target.cpu}") from None
            except (EOFError, BrokenPipeError, OSError):
                code = self.proc.wait()
                self.err.seek(0)
                err = self.err.read().decode(errors="replace").strip().splitlines()
                self.proc = None
                why = next((ln for ln in err if "LLVM ERROR" in ln or "error" in ln.lower()), err[-1] if err else "")
                sig = f"signal {-code}" if code < 0 else f"exit {code}"
                raise PTXUnsupportedError(f"the AMDGPU backend of LLVM rejected the module for {target.cpu} "
                                          f"({sig}): {why[:400]}") from None
            if status == b"OK":
                return payload
            raise PTXUnsupportedError(f"the AMDGPU backend of LLVM rejected the module for {target.cpu}: "
                                      f"{payload.decode(errors='replace')[:400]}")


_child = _CompilerChild()


def _compile_object(ir: str, target: AmdgpuTarget, opt_level: int, timeout: float, cache_dir=None) -> bytes:
    from ptx import amdgpu_texture
    link = amdgpu_texture.bitcode(cache_dir) if amdgpu_texture.needed(ir) else None
    return _child.compile(ir.encode(), target, opt_level, timeout, link)


def _link(obj: bytes, timeout: float) -> bytes:
    ld = find_linker()
    if ld is None:
        raise ToolchainError("no ld.lld found to link AMDGPU code objects: install lld "
                             "(Debian/Ubuntu: apt-get install lld-19) or `pip install ziglang`, "
                             "or set ZLUDA_LLD to an ld.lld")
    with tempfile.TemporaryDirectory(prefix="zluda-amdgcn-") as d:
        o, out = os.path.join(d, "k.o"), os.path.join(d, "k.hsaco")
        with open(o, "wb") as fh:
            fh.write(obj)
        try:
            r = subprocess.run(ld + ["-shared", "--no-undefined", "-o", out, o], capture_output=True,
                               timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ToolchainError(f"ld.lld failed to run: {e}") from None
        if r.returncode != 0:
            msg = r.stderr.decode(errors="replace").strip()
            raise PTXUnsupportedError(f"linking the code object failed: {msg[:600]}")
        with open(out, "rb") as fh:
            return fh.read()


def _cache(cache_dir, key):
    from ptx.object_cache import ObjectCache
    return ObjectCache(cache_dir, key, ".hsaco")


def compile_amdgpu(text: str, target: str = "gfx1100", cache_dir=None, fma_contract=False, opt_level=3,
                   dump_dir=None, timeout=300, **_) -> AmdgpuModule:
    from ptx import pipeline
    from ptx.codegen.amdgpu_module import build_amdgpu_ir
    from ptx.amdgpu_verify import read_code_object

    tgt = parse_target(target)
    if os.environ.get("ZLUDA_AMDGPU_FEATURES"):             # e.g. "+cumode": added to every AMD compile
        tgt = with_features(tgt, os.environ["ZLUDA_AMDGPU_FEATURES"], "ZLUDA_AMDGPU_FEATURES")
    air = pipeline.lower(text, lambda module: build_amdgpu_ir(module, tgt, datalayout(), fma_contract=fma_contract))
    if dump_dir:
        pipeline.dump(dump_dir, text, air.text, f"{tgt.cpu}.ll")
    cache = None
    if cache_dir:
        key = hashlib.sha256("\0".join([text, compiler_version(), tgt.key, str(fma_contract), str(opt_level),
                                        llvm_version()]).encode()).hexdigest()
        cache = _cache(cache_dir, key)
    code = cache.load() if cache else None
    if code is None:
        code = _link(_compile_object(air.text, tgt, opt_level, timeout, cache_dir), timeout)
        if cache is not None:
            cache.store(code)
    info = read_code_object(code)
    meta = {k[".name"]: k for k in info.metadata.get("amdhsa.kernels", [])}
    kernels = {}
    for name, k in air.kernels.items():
        m = meta.get(name, {})
        kernels[name] = AmdgpuKernel(
            name, k.params, k.param_size, k.static_shared_bytes, m.get(".group_segment_fixed_size", k.lds_bytes),
            m.get(".max_flat_workgroup_size", k.max_threads), m.get(".wavefront_size", tgt.wave),
            m.get(".kernarg_segment_size", k.param_size), m.get(".private_segment_fixed_size", 0),
            m.get(".vgpr_count", 0), m.get(".sgpr_count", 0), k.maxntid, k.reqntid, list(k.param_types))
    mod = AmdgpuModule(code, tgt, kernels, dict(air.globals), air.text, info.metadata, bool(cache and cache.hit))
    for k in kernels.values():
        k.module = mod
    return mod
