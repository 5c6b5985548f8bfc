"""`ptx.compile(text, target="host")`: PTX -> LLVM IR -> host machine code (llvmlite MCJIT), with an
on-disk object cache, and HostModule/HostKernel to inspect and launch the kernels."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import itertools
import os
import struct
import tempfile
import threading
from pathlib import Path

import numpy as np

from ptx.errors import KernelFault, PTXError, PTXUnsupportedError

def _compiler_version():
    """A hash of the compiler's own sources: cached objects from another compiler build never match."""
    h = hashlib.sha256(b"host-2")
    root = Path(__file__).resolve().parent
    for sub in ("", "codegen", "passes", "runtime"):
        for p in sorted((root / sub).glob("*")):
            if p.suffix in (".py", ".c", ".h"):
                h.update(p.name.encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:16]


COMPILER_VERSION = _compiler_version()
_llvm_lock = threading.RLock()
_llvm_ready = False
_target_machine = None
_engines = []           # keep every JIT engine (and the code it owns) alive for the process


def _init_llvm():
    global _llvm_ready, _target_machine
    if _llvm_ready:
        return
    import llvmlite.binding as llvm
    from ptx import host_target
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    host_target.register_runtime()
    _target_machine = host_target.machine("")[0]     # for _optimize callers that pass none
    _llvm_ready = True


# ------------------------------------------------------------------ object cache

class _ObjectCache:
    """Disk cache of the JIT's object file: `<dir>/<key>.o` holding sha256(data) + data."""

    def __init__(self, cache_dir: str, key: str):
        self.path = Path(cache_dir) / f"{key}.o"
        self.hit = False

    def load(self):
        try:
            blob = self.path.read_bytes()
        except OSError:
            return None
        digest, data = blob[:32], blob[32:]
        if hashlib.sha256(data).digest() != digest:
            return None                      # corrupt: rebuilt and rewritten below
        self.hit = True
        return data

    def store(self, data: bytes):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(hashlib.sha256(data).digest() + data)
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


# ------------------------------------------------------------------ kernels

class HostKernel:
    def __init__(self, module, info, address):
        self.module = module
        self.name = info.name
        self.params = info.params
        self.param_size = info.param_size
        self.static_shared_bytes = info.static_shared_bytes
        self.shared_reserve_bytes = getattr(info, "shared_reserve_bytes", info.static_shared_bytes)
        self.local_bytes = info.local_bytes
        self.frame_bytes = info.frame_bytes
        self.maxntid = info.maxntid
        self.reqntid = info.reqntid
        self.uses_sync = info.uses_sync
        self.address = address
        self._param_types = info.param_types

    def __repr__(self):
        return f"<HostKernel {self.name} params={self.params}>"

    def pack_params(self, args) -> bytes:
        """The packed parameter buffer for python values (numpy arrays pass their data address)."""
        if len(args) != len(self.params):
            raise ValueError(f"{self.name} takes {len(self.params)} arguments, got {len(args)}")
        buf = bytearray(self.param_size)
        for (off, size, _), t, a in zip(self.params, self._param_types, args):
            if isinstance(a, np.ndarray):
                raw = struct.pack("<Q", a.ctypes.data)[:size]
            elif isinstance(a, (bytes, bytearray, memoryview)):
                raw = bytes(a)
                if len(raw) != size:
                    raise ValueError(f"parameter at offset {off} takes {size} bytes, got {len(raw)}")
            elif isinstance(a, np.generic):
                raw = a.tobytes()
                if len(raw) != size:
                    raise ValueError(f"parameter at offset {off} takes {size} bytes, got {len(raw)}")
            elif isinstance(a, float) or (t.startswith("f") and isinstance(a, (int, float))):
                fmt = {2: "<e", 4: "<f", 8: "<d"}.get(size)
                if fmt is None:
                    raise ValueError(f"cannot pack a float into {size} bytes")
                raw = struct.pack(fmt, float(a))
            elif isinstance(a, (int, np.integer)) or isinstance(a, bool):
                a = int(a)
                raw = (a & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            elif isinstance(a, ctypes.c_void_p):
                raw = struct.pack("<Q", a.value or 0)[:size]
            else:
                raise TypeError(f"cannot pass {type(a).__name__} as a kernel parameter")
            buf[off:off + size] = raw
        return bytes(buf)

    def launch(self, grid, block, args, shared_bytes=0):
        params = self.pack_params(list(args))
        self.launch_raw(grid, block, params, shared_bytes)

    def launch_raw(self, grid, block, params, shared_bytes=0, cooperative=False):
        from ptx import runtime
        g, b = _dims(grid), _dims(block)
        if any(x <= 0 for x in g + b):
            raise ValueError(f"invalid launch dimensions grid={g} block={b}")
        if b[0] * b[1] * b[2] > 1024 or b[0] > 1024 or b[1] > 1024 or b[2] > 64:
            raise ValueError(f"block {b} exceeds 1024 threads or the per-dimension limits")
        if shared_bytes < 0 or shared_bytes + self.static_shared_bytes > (1 << 30):
            raise ValueError(f"invalid dynamic shared memory size {shared_bytes}")
        if isinstance(params, (bytes, bytearray)) and len(params) < self.param_size:
            raise ValueError(f"{self.name} needs {self.param_size} parameter bytes, got {len(params)}")
        if isinstance(params, bytes) and not params:
            params = bytes(8)
        status = runtime.launch(self.address, params, g, b, static_shared=self.shared_reserve_bytes,
                                dyn_shared=int(shared_bytes), frame_bytes=self.frame_bytes,
                                cooperative=cooperative)
        if status == 0:
            return      # before the getattr below, whose miss costs an exception per launch
        if status == runtime.TRAP:
            fallback = getattr(self.module, "_fallback", None)
            if fallback is not None and fallback.error is not None:     # its thunk reports it as a trap
                raise KernelFault("trap", f"kernel {self.name}: {fallback.error}")
            raise KernelFault("trap", f"kernel {self.name} executed trap")
        if status == runtime.ASSERT:
            raise KernelFault("assert", f"assertion failed in kernel {self.name}")
        if status == getattr(runtime, "BAD_LAUNCH", 3):
            raise ValueError(f"launch of {self.name} refused by the runtime (resources)")
        if status == _FAULT:
            raise KernelFault("fault", _fault_message(self.name, g))
        if status != 0:
            raise KernelFault("fault", f"kernel {self.name} status {status}")


_FAULT = 4      # PTXRT_FAULT: a block touched memory it may not (ptxrt.h, "memory faults in kernels")


class _FaultInfo(ctypes.Structure):     # ptx_fault_info
    _fields_ = [("addr", ctypes.c_uint64), ("pc", ctypes.c_uint64), ("first_block", ctypes.c_uint64),
                ("last_block", ctypes.c_uint64), ("signo", ctypes.c_int32), ("code", ctypes.c_int32),
                ("access", ctypes.c_int32), ("worker_id", ctypes.c_uint32)]


def _fault_message(name, grid):
    """One line on the first fault of this thread's last launch (what the runtime's handler saw)."""
    from ptx import runtime
    import signal
    info = _FaultInfo()
    if runtime.library().ptx_rt_last_fault(ctypes.byref(info)) != 0:
        return f"kernel {name}: illegal memory access"
    access = {1: "read", 2: "write"}.get(info.access, "access")
    sig = "SIGBUS" if info.signo == signal.SIGBUS else "SIGSEGV" if info.signo else "memcheck"
    if info.addr or info.code not in (0x80, -6):
        where = f"address 0x{info.addr:x}"
    elif info.code == 0x80:                          # SI_KERNEL: x86-64 gives no address for those
        where = "a non-canonical address"
    else:                                            # SI_TKILL: re-raised by a handler ahead of ours
        where = "an unknown address"
    gx, gy = grid[0], grid[1]

    def coords(b):
        return f"({b % gx},{b // gx % gy},{b // (gx * gy)})"
    blocks = (f"block {coords(info.first_block)}" if info.last_block - info.first_block <= 1
              else f"one of blocks {coords(info.first_block)}..{coords(info.last_block - 1)}")
    return f"kernel {name}: illegal memory {access} at {where} ({sig}) in {blocks}"


def _dims(d):
    if isinstance(d, int):
        return (d, 1, 1)
    d = tuple(int(x) for x in d)
    return d + (1,) * (3 - len(d))


class HostModule:
    def __init__(self, kernels, globals_, ir_text, engine, cache_hit):
        self.kernels = kernels
        self.globals = globals_
        self.ir = ir_text
        self._engine = engine
        self.cache_hit = cache_hit

    def kernel(self, name) -> HostKernel:
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"no kernel named {name!r} (have {sorted(self.kernels)})") from None


# ------------------------------------------------------------------ compile

def _optimize(llmod, opt_level, tm=None):
    import llvmlite.binding as llvm
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    pto.loop_vectorization = opt_level >= 2
    pto.slp_vectorization = opt_level >= 2
    pb = llvm.create_pass_builder(tm or _target_machine, pto)
    mpm = pb.getModulePassManager()
    mpm.run(llmod, pb)


def emit_object(llmod, opt_level, tm):
    """The optimized module's object code for tm: what MCJIT loads, the disk cache keeps, and
    host_target.check_object reads."""
    _optimize(llmod, opt_level, tm)
    return tm.emit_object(llmod)


def _load_object(llmod, obj, tm):
    """An MCJIT engine running `obj` (llmod's code): it takes the object from its object cache rather
    than compiling the module a second time, so what was checked is what runs."""
    import llvmlite.binding as llvm
    engine = llvm.create_mcjit_compiler(llmod, tm)
    engine.set_object_cache(None, lambda mod: obj)
    engine.finalize_object()
    _engines.append(engine)
    return engine


def compile_host(text: str, cache_dir=None, fma_contract=False, opt_level=3, dump_dir=None, cpu=None,
                 memcheck=False, **_):
    """cpu: the LLVM CPU name to build for (None: ZLUDA_CPU_TARGET; "" or unset: this machine's).
    memcheck: check every access against the runtime's range table (ptx/codegen/memcheck.py)."""
    from ptx import host_target, pipeline
    from ptx.codegen.host_module import build_host_ir
    import llvmlite.binding as llvm

    hir = pipeline.lower(text, lambda module: build_host_ir(module, fma_contract=fma_contract,
                                                            memcheck=memcheck))
    if dump_dir:
        pipeline.dump(dump_dir, text, hir.text)
        if hir.fallback:
            pipeline.dump(dump_dir, text, hir.fallback, ir_suffix="fallback.ll")
    with _llvm_lock:
        _init_llvm()
        tm, tm_key = host_target.machine(cpu)
        cache = None
        if cache_dir:
            key = hashlib.sha256("\0".join([text, COMPILER_VERSION, str(fma_contract), str(opt_level),
                                            tm_key] + (["memcheck"] if memcheck else [])).encode()).hexdigest()
            cache = _ObjectCache(cache_dir, key)
        try:
            llmod = llvm.parse_assembly(hir.text)
            llmod.verify()
        except RuntimeError as e:
            raise PTXError(f"internal code generation error: {e}") from e
        obj = cache.load() if cache else None
        fresh = obj is None
        if fresh:
            obj = emit_object(llmod, opt_level, tm)
        host_target.check_object(obj)       # a cached object too: the set of symbols may have changed
        if fresh and cache is not None:
            cache.store(obj)
        engine = _load_object(llmod, obj, tm)
        kernels = {}
        for name, info in hir.kernels.items():
            addr = engine.get_function_address(info.symbol)
            kernels[name] = HostKernel(None, info, addr)
        globals_ = {}
        for name, (gname, size) in hir.globals.items():
            globals_[name] = (engine.get_global_value_address(gname), size)
        _apply_relocations(engine, hir, globals_)
        if memcheck:
            _memcheck_globals(globals_)
        fallback = _LazyFallback(hir, engine, globals_, opt_level, tm) if hir.fallback else None
    mod = HostModule(kernels, globals_, hir.text, engine, bool(cache and cache.hit))
    mod._fallback = fallback
    for k in kernels.values():
        k.module = mod
    return mod


def _memcheck_globals(globals_):
    """A checked kernel may reach its module's variables through any pointer: they join the range table
    (for the process: the code, and so the variables, stay mapped after an unload)."""
    from ptx import runtime
    lib = runtime.library()
    lib.ptx_rt_memcheck_enable(1)
    for addr, size in globals_.values():
        if size:
            lib.ptx_rt_memcheck_add(ctypes.c_uint64(addr), ctypes.c_uint64(size), 3)


_FALLBACK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
_TRAP = 1               # PTXRT_TRAP
_fallback_ids = itertools.count()


class _LazyFallback:
    """The region kernels' general-scheduler fallbacks (HostIR.fallback), compiled the first time a
    block needs one (threads disagreeing at a barrier): until then each kernel's slot holds a Python
    callback that compiles them, points every slot at its compiled entry and runs it. Most kernels
    never need it, and it is about half of their compile time."""

    def __init__(self, hir, engine, globals_, opt_level, tm):
        import llvmlite.binding as llvm
        from ptx import host_target
        from ptx.codegen.host_module import FALLBACK_GLOBAL
        # resolved here: the first call runs on a runtime worker, maybe while the launching thread
        # holds an import lock
        self.llvm, self.global_prefix, self.target = llvm, FALLBACK_GLOBAL, host_target
        self.text = hir.fallback
        self.opt_level = opt_level
        self.tm = tm
        self.globals = {hir.globals[name][0]: addr for name, (addr, _) in globals_.items()}
        self.entries = None
        self.error = None
        self.slots, self.thunks = {}, {}
        for name, info in hir.kernels.items():
            if info.fallback_slot:
                slot = engine.get_global_value_address(info.fallback_slot)
                thunk = _FALLBACK_FN(functools.partial(self._first_call, name))
                self.slots[name], self.thunks[name] = slot, thunk
                ctypes.c_void_p.from_address(slot).value = ctypes.cast(thunk, ctypes.c_void_p).value
        _engines.append(self)       # the callbacks live as long as the code that may call them

    def _first_call(self, name, L, b, W, scratch, soa, n):
        # runs on a runtime worker, inside a launch: never raise into ctypes
        try:
            entry = self.compile()[name]
        except Exception as e:  # noqa: BLE001 - reported through the launch status
            self.error = e
            return _TRAP
        return entry(L, b, W, scratch, soa, n)

    def compile(self):
        llvm, generic = self.llvm, self.global_prefix
        with _llvm_lock:
            if self.entries is not None:
                return self.entries
            if self.error is not None:
                raise self.error
            # the main module's globals under names of this module's own (other modules have an "x")
            prefix = f"{generic[:-1]}{next(_fallback_ids)}."
            for gname, addr in self.globals.items():
                self.target.register(prefix + gname[2:], addr)
            llmod = llvm.parse_assembly(self.text.replace('@"' + generic, '@"' + prefix))
            llmod.verify()
            obj = emit_object(llmod, self.opt_level, self.tm)
            self.target.check_object(obj, "the barrier fallback's code")
            engine = _load_object(llmod, obj, self.tm)
            entries = {}
            for name, slot in self.slots.items():
                addr = engine.get_function_address(f"fb.{name}")
                entries[name] = _FALLBACK_FN(addr)
                ctypes.c_void_p.from_address(slot).value = addr
            self.entries = entries
            return entries


def _apply_relocations(engine, hir, globals_):
    for gname, off, size, mask, sym, addend in hir.relocations:
        if sym in globals_:
            target = globals_[sym][0]
        elif sym in hir.functions:
            holder = engine.get_global_value_address(hir.functions[sym])
            target = ctypes.c_uint64.from_address(holder).value if holder else 0
        else:
            raise PTXUnsupportedError(f"initialiser of {gname} refers to {sym}, which has no address")
        if not target:
            raise PTXUnsupportedError(f"initialiser of {gname} refers to {sym}, which has no address")
        value = target + addend
        if mask:
            shift = (mask & -mask).bit_length() - 1
            value = (value & mask) >> shift
        value &= (1 << (8 * size)) - 1
        ctypes.memmove(globals_[gname][0] + off, value.to_bytes(size, "little"), size)
