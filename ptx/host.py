"""`ptx.compile(text, target="host")`: PTX -> LLVM IR -> a shared object loaded with dlopen, with an
on-disk kernel cache, and HostModule/HostKernel to inspect, launch and close the kernels."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import struct
import threading
from pathlib import Path

from ptx.errors import KernelFault, PTXError, PTXUnsupportedError

def _compiler_version():
    """A hash of the compiler's own sources: cached objects from another compiler build never match."""
    h = hashlib.sha256(b"host-2")
    root = Path(__file__).resolve().parent
    for p in sorted(root.rglob("*")):       # every subpackage: a new one must not be left out
        if p.suffix in (".py", ".c", ".h"):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


COMPILER_VERSION = _compiler_version()
_llvm_lock = threading.RLock()
_llvm_ready = False
_target_machine = None


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


# ------------------------------------------------------------------ kernels

class HostKernel:
    # the block a lazy kernel's code was compiled for (ptx/host_lazy.py): a launch with another block runs
    # for_block(block), the kernel compiled for any block; None: this code runs every block
    spec_block = None

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
        self.interleave = getattr(info, "interleave", False)   # ptxrt.h PTXRT_HINT_INTERLEAVE
        self.address = address
        self._param_types = info.param_types
        self.fallback = None        # a lazy module's kernel has a barrier fallback of its own
        if address:
            register_kernel(address, info)

    def __repr__(self):
        return f"<HostKernel {self.name} params={self.params}>"

    def for_block(self, block) -> "HostKernel":
        """The code that runs a launch of `block` (a tuple of 3): this kernel's, or where it was compiled for
        another block, its copy for any block (compiled at the first such launch; PTXError if it cannot be)."""
        if self.spec_block is None or block == self.spec_block:
            return self
        got = self.__dict__.get("_generic")
        if got is None:
            got = self._generic = self.module._lazy.generic(self)
        return got

    def pack_params(self, args) -> bytes:
        """The packed parameter buffer for python values (numpy arrays pass their data address)."""
        import numpy as np      # here: a driver's module load (a cache hit) must not pay its import
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

    def launch(self, grid, block, args, shared_bytes=0, cluster=None, cooperative=False):
        """`cluster`: CTAs per cluster (an int or 1-3 ints) for a thread-block cluster launch; `cooperative`:
        all blocks co-resident (grid barriers)."""
        from ptx import runtime
        params = self.pack_params(list(args))
        flags = (runtime.cluster_flags(cluster) if cluster is not None else 0) | int(bool(cooperative))
        self.launch_raw(grid, block, params, shared_bytes, flags)

    def launch_raw(self, grid, block, params, shared_bytes=0, cooperative=False):
        from ptx import runtime
        if not self.address:
            raise ValueError(f"{self.name}: its module was closed")
        g, b = _dims(grid), _dims(block)
        if any(x <= 0 for x in g + b):
            raise ValueError(f"invalid launch dimensions grid={g} block={b}")
        if not block_fits(b):
            raise ValueError(f"block {b} exceeds 1024 threads or the per-dimension limits")
        if shared_bytes < 0 or shared_bytes + self.static_shared_bytes > (1 << 30):
            raise ValueError(f"invalid dynamic shared memory size {shared_bytes}")
        if isinstance(params, (bytes, bytearray)) and len(params) < self.param_size:
            raise ValueError(f"{self.name} needs {self.param_size} parameter bytes, got {len(params)}")
        if isinstance(params, bytes) and not params:
            params = bytes(8)
        if self.spec_block is not None and b != self.spec_block:
            return self.for_block(b).launch_raw(grid, block, params, shared_bytes, cooperative)
        status = runtime.launch(self.address, params, g, b, static_shared=self.shared_reserve_bytes,
                                dyn_shared=int(shared_bytes), frame_bytes=self.frame_bytes,
                                cooperative=cooperative)
        if status == 0:
            return      # before the getattr below, whose miss costs an exception per launch
        if status == runtime.TRAP:
            fallback = self.fallback or getattr(self.module, "_fallback", None)
            if fallback is not None and fallback.error is not None:     # its thunk reports it as a trap
                raise KernelFault("trap", f"kernel {self.name}: {fallback.error}")
            raise KernelFault("trap", f"kernel {self.name} executed trap")
        if status == runtime.ASSERT:
            raise KernelFault("assert", f"assertion failed in kernel {self.name}")
        if status == getattr(runtime, "BAD_LAUNCH", 3):
            raise ValueError(f"launch of {self.name} refused by the runtime (resources)")
        if status == runtime.FAULT:     # a block touched memory it may not (ptxrt.h, "memory faults in kernels")
            raise KernelFault("fault", _fault_message(self.name, g))
        if status == runtime.MISALIGNED:    # an access not aligned to its size (a surface's, ops_surf.py)
            raise KernelFault("misaligned", f"kernel {self.name}: misaligned address")
        if status != 0:
            raise KernelFault("fault", f"kernel {self.name} status {status}")


def register_kernel(address: int, info) -> None:
    """Make a loaded kernel launchable from device code (its address is what `mov.u64 %rd, kernel` gives)."""
    from ptx import runtime
    runtime.register_kernel(address, getattr(info, "shared_reserve_bytes", info.static_shared_bytes),
                            info.frame_bytes, info.param_size)
    if getattr(info, "interleave", False):
        runtime.kernel_hints(address, runtime.HINT_INTERLEAVE)


class LazyKernel(HostKernel):
    """A kernel of a lazy module: its parameters and launch bounds are known at load; any other field (its
    code, shared and frame sizes) compiles it first (ptx.host_lazy), raising PTXError if it cannot be."""

    def __init__(self, module, name, layout):     # noqa: super().__init__ runs when it is compiled
        self.module = module
        self.name = name
        self.params = [tuple(p) for p in layout["params"]]
        self.param_size = layout["param_size"]
        self._param_types = layout["param_types"]
        self.maxntid = tuple(layout["maxntid"]) if layout["maxntid"] else None
        self.reqntid = tuple(layout["reqntid"]) if layout["reqntid"] else None
        self.shared_hint = layout.get("shared_hint", 0)
        self.layout = layout

    def prepare(self, block) -> None:
        """Compile it, if it is not yet, for launches of `block` (3 positive ints within CUDA's limits); a
        launch of another block compiles it again for any block (for_block)."""
        if "address" not in self.__dict__:
            self.module._lazy.load(self, _dims(block))

    def launch_raw(self, grid, block, params, shared_bytes=0, cooperative=False):
        self.prepare(block)         # a first launch compiles it for its block
        return super().launch_raw(grid, block, params, shared_bytes, cooperative)

    @property
    def loaded(self) -> bool:
        return "address" in self.__dict__

    def __getattr__(self, attr):
        if attr.startswith("__") or attr in ("module", "name"):
            raise AttributeError(attr)
        self.module._lazy.load(self)
        return object.__getattribute__(self, attr)

    def __repr__(self):
        return f"<LazyKernel {self.name} params={self.params} loaded={self.loaded}>"


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


def block_fits(b) -> bool:
    """Whether a block of 3 dimensions is within CUDA's limits: 1024 threads, 1024 x 1024 x 64, none empty."""
    return min(b) > 0 and b[0] * b[1] * b[2] <= 1024 and b[0] <= 1024 and b[1] <= 1024 and b[2] <= 64


def _dims(d):
    if isinstance(d, int):
        return (d, 1, 1)
    d = tuple(int(x) for x in d)
    return d + (1,) * (3 - len(d))


class HostModule:
    def __init__(self, kernels, globals_, ir_text, code, cache_hit, resources=None, memcheck=False):
        self.kernels = kernels
        self.globals = globals_
        self.ir = ir_text           # the LLVM IR ("" on a cache hit: nothing was lowered)
        self.resources = resources or {}    # kernel name -> what ptx.resources estimates, as attributes
        self.cache_hit = cache_hit
        self._code = code
        self._fallback = None
        self._memcheck = memcheck
        self._lazy = None           # host_lazy.LazyKernels of a lazy module

    @property
    def lazy(self) -> bool:
        return self._lazy is not None

    def load_all(self) -> dict:
        """Compile every kernel of a lazy module now (CUDA_MODULE_LOADING=EAGER): name -> the PTXError of
        each that cannot be; it is raised again by every use of that kernel."""
        failed = {}
        for k in list(self.kernels.values()):
            if isinstance(k, LazyKernel):
                try:
                    self._lazy.load(k)
                except PTXError as e:
                    failed[k.name] = e
        return failed

    def kernel(self, name) -> HostKernel:
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"no kernel named {name!r} (have {sorted(self.kernels)})") from None

    def close(self) -> None:
        """Unmap the code and its data; the caller knows no launch may still run it."""
        if self._code is None:
            return
        if self._fallback is not None:
            self._fallback.close()
        if self._lazy is not None:
            self._lazy.close()          # the kernels' copies before the globals' copy they bind to
        if self._memcheck:
            from ptx import runtime
            for addr, size in self.globals.values():
                if size:
                    runtime.library().ptx_rt_memcheck_remove(ctypes.c_uint64(addr), ctypes.c_uint64(size))
        from ptx import runtime
        for k in self.kernels.values():
            if k.__dict__.get("address"):
                runtime.unregister_kernel(k.address)
        code, self._code = self._code, None
        code.close()
        for k in self.kernels.values():
            k.address = 0
            k.fallback = None
        self.kernels, self.globals, self._fallback, self._lazy = {}, {}, None, None


# ------------------------------------------------------------------ compile

_FORMAT = "so-1"        # what a cache entry holds: a shared object and host_meta's metadata


def _optimize(llmod, opt_level, tm=None):
    import llvmlite.binding as llvm
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    pto.loop_vectorization = opt_level >= 2
    pto.slp_vectorization = opt_level >= 2
    pb = llvm.create_pass_builder(tm or _target_machine, pto)
    mpm = pb.getModulePassManager()
    mpm.run(llmod, pb)


def emit_object(llmod, opt_level, tm):
    """The optimized module's object code for tm: what host_loader links, and host_target.check_object
    reads."""
    _optimize(llmod, opt_level, tm)
    return tm.emit_object(llmod)


def load_object(obj: bytes, what="kernel code", directory=None):
    """A loaded copy (host_loader.LoadedCode) of a checked object, linked into a shared object."""
    from ptx import host_loader, host_target
    host_target.check_object(obj, what)
    return host_loader.LoadedCode(host_loader.link(obj, what), directory)


def cache_key(text, fma_contract=False, opt_level=3, cpu=None, memcheck=False, lazy=False) -> str:
    """What names a module's cache entry: its text and everything that changes its code, known without
    parsing it."""
    from ptx import host_target
    parts = [text, COMPILER_VERSION, str(fma_contract), str(opt_level), host_target.key_part(cpu), _FORMAT]
    parts += (["memcheck"] if memcheck else []) + (["lazy"] if lazy else [])
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def compile_host(text: str, cache_dir=None, fma_contract=False, opt_level=3, dump_dir=None, cpu=None,
                 memcheck=False, cache_max_mb=None, lazy=False, isolate=False, **_):
    """cpu: the LLVM CPU name to build for (None: ZLUDA_CPU_TARGET; "" or unset: this machine's).
    memcheck: check every access against the runtime's range table (ptx/codegen/memcheck.py).
    lazy: build only the globals now, each kernel on first use (LazyKernel); otherwise the whole module,
    or (isolate) when one of its kernels cannot be, every kernel on its own: the others keep working.
    A cache hit (cache_dir) loads the stored shared object and metadata: nothing is parsed or compiled;
    dump_dir asks for the IR, so it always compiles (and whole)."""
    from ptx import host_meta, parse
    from ptx.host_cache import KernelCache
    cache = key = None
    opts = (fma_contract, opt_level, cpu, memcheck)
    if cache_dir:
        key = cache_key(text, fma_contract, opt_level, cpu, memcheck)
        cache = KernelCache(cache_dir, None if cache_max_mb is None else cache_max_mb * (1 << 20))
        got = None if dump_dir else cache.load(key)     # lazy too: a whole module compiled is best
        if got is not None:
            meta, so = got
            try:
                if "lazy" in meta:      # a module compiled kernel by kernel (one could not be)
                    mod = _instantiate_lazy(text, None, meta, so, True, opts, cache, _lazy_key(key, text, opts))
                    mod.load_all()
                    return mod
                return _instantiate(meta, so, True, opt_level, cpu, memcheck, cache, key)
            except (PTXError, KeyError, TypeError, ValueError):
                pass                # an entry another build wrote differently: compiled again below
    from ptx import host_llc
    host_llc.start()                # its start-up overlaps the parse
    if lazy and not dump_dir:
        mod = _compile_lazy(text, None, opts, cache, key and _lazy_key(key, text, opts))
        if mod is not None:
            return mod
    module = parse(text)            # invalid PTX fails the load, whole or lazy
    try:
        meta, so, ir_text = host_meta.build(text, fma_contract, opt_level, dump_dir, cpu, memcheck, module)
    except PTXError:
        # one kernel's gap (an instruction not implemented, a compiler failure) costs that kernel only
        mod = None if dump_dir or not isolate else _compile_lazy(text, module, opts, cache, key and _lazy_key(key, text, opts))
        if mod is None:
            raise
        if cache is not None:
            cache.store(key, mod._meta, mod._so)
        mod.load_all()
        return mod
    if cache is not None:
        cache.store(key, meta, so)
    mod = _instantiate(meta, so, False, opt_level, cpu, memcheck, cache, key)
    mod.ir = ir_text
    return mod


def _lazy_key(key, text, opts):
    return cache_key(text, *opts, lazy=True)


def _compile_lazy(text, module, opts, cache, key):
    """A lazy module (its globals built or from the cache), or None when it must be compiled whole."""
    from ptx import host_lazy, parse
    got = cache.load(key) if cache is not None else None
    if got is not None:
        try:
            return _instantiate_lazy(text, None, got[0], got[1], True, opts, cache, key)
        except (PTXError, KeyError, TypeError, ValueError):
            pass
    if module is None:
        module = parse(text)
    built = host_lazy.build_globals(module, *opts)
    if built is None:
        return None
    if cache is not None:
        cache.store(key, *built)
    return _instantiate_lazy(text, module, built[0], built[1], False, opts, cache, key)


def _instantiate_lazy(text, module, meta, so, hit, opts, cache, key) -> HostModule:
    from ptx import host_lazy, host_loader, host_target
    host_target.check_names(meta["undefined"], "the module's globals")
    code = host_loader.LoadedCode(so, cache.dir if cache is not None else None)
    try:
        globals_ = {name: (code.address(gname), size) for name, (gname, size) in meta["globals"].items()}
        _apply_relocations(code, meta, globals_)
    except BaseException:
        code.close()
        raise
    if opts[3]:
        _memcheck_globals(globals_)
    kernels = {name: LazyKernel(None, name, layout) for name, layout in meta["lazy"].items()}
    mod = HostModule(kernels, globals_, "", code, hit, {}, opts[3])
    mod._lazy = host_lazy.LazyKernels(text, module, opts, cache, key, code,
                                      [gname for gname, _ in meta["globals"].values()])
    mod._meta, mod._so = meta, so
    for k in kernels.values():
        k.module = mod
    return mod


def _instantiate(meta, so, hit, opt_level, cpu, memcheck, cache, key) -> HostModule:
    """A module running a copy of `so`, described by `meta` (host_meta.build)."""
    from ptx import host_loader, host_meta
    from ptx import host_target
    host_target.check_names(meta["undefined"])     # a hit too: the set of symbols may have changed
    code = host_loader.LoadedCode(so, cache.dir if cache is not None else None)
    try:
        kernels = {}
        for name, info in meta["kernels"].items():
            info = host_meta.kernel_info(info)
            kernels[name] = HostKernel(None, info, code.address(info.symbol))
        globals_ = {name: (code.address(gname), size) for name, (gname, size) in meta["globals"].items()}
        _apply_relocations(code, meta, globals_)
    except BaseException:
        code.close()
        raise
    if memcheck:
        _memcheck_globals(globals_)
    mod = HostModule(kernels, globals_, "", code, hit, host_meta.resources(meta), memcheck)
    if meta["fallback"]:
        fb_key = key and key + "-fallback"
        mod._fallback = _LazyFallback(meta, code, opt_level, cpu, cache, fb_key)
    for k in kernels.values():
        k.module = mod
    return mod


def _memcheck_globals(globals_):
    """A checked kernel may reach its module's variables through any pointer: they join the range table
    (until the module is closed)."""
    from ptx import runtime
    lib = runtime.library()
    lib.ptx_rt_memcheck_enable(1)
    for addr, size in globals_.values():
        if size:
            lib.ptx_rt_memcheck_add(ctypes.c_uint64(addr), ctypes.c_uint64(size), 3)


_FALLBACK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
_TRAP = 1               # PTXRT_TRAP


class _LazyFallback:
    """The region kernels' general-scheduler fallbacks (HostIR.fallback), compiled the first time a
    block needs one (threads disagreeing at a barrier): until then each kernel's slot holds a Python
    callback that compiles them, points every slot at its compiled entry and runs it. Most kernels
    never need it, and it is about half of their compile time. Its shared object binds to the main
    module's copy (its globals) and is cached beside it."""

    def __init__(self, meta, code, opt_level, cpu, cache, key, main=None, main_names=None):
        from ptx import host_llc, host_loader, host_target
        # resolved here: the first call runs on a runtime worker, maybe while the launching thread
        # holds an import lock
        self.loader, self.target, self.llc = host_loader, host_target, host_llc
        self.text = meta["fallback"]
        self.opt_level, self.cpu, self.cache, self.key = opt_level, cpu, cache, key
        # bound to the copy holding the globals: the module's own, or a lazy module's globals' copy
        self.main = main if main is not None else code
        self.main_names = main_names if main_names is not None else \
            {gname for gname, _ in meta["globals"].values()}
        self.code = None
        self.entries = None
        self.error = None
        self.slots, self.thunks = {}, {}
        for name, info in meta["kernels"].items():
            if info.get("fallback_slot"):
                slot = code.address(info["fallback_slot"])
                thunk = _FALLBACK_FN(functools.partial(self._first_call, name))
                self.slots[name], self.thunks[name] = slot, thunk
                ctypes.c_void_p.from_address(slot).value = ctypes.cast(thunk, ctypes.c_void_p).value

    def _first_call(self, name, L, b, W, scratch, soa, n):
        # runs on a runtime worker, inside a launch: never raise into ctypes
        try:
            entry = self.compile()[name]
        except Exception as e:  # noqa: BLE001 - reported through the launch status
            self.error = e
            return _TRAP
        return entry(L, b, W, scratch, soa, n)

    def _build(self):
        what = "the barrier fallback's code"
        obj = self.llc.compile_object(self.text, self.target.cpu_name(self.cpu), self.opt_level, what)
        undefined = sorted(self.target.undefined_symbols(obj) - self.main_names)
        self.target.check_names(undefined, what)
        return self.loader.link(obj, what, needs_main=True), undefined

    def compile(self):
        with _llvm_lock:
            if self.entries is not None:
                return self.entries
            if self.error is not None:
                raise self.error
            if self.main.handle is None:
                raise PTXError("the module was unloaded")
            got = self.cache.load(self.key) if self.cache is not None else None
            if got is not None:
                self.target.check_names(got[0]["undefined"], "the barrier fallback's code")
                so = got[1]
            else:
                so, undefined = self._build()
                if self.cache is not None:
                    self.cache.store(self.key, {"undefined": undefined}, so)
            self.code = self.loader.LoadedCode(so, self.cache.dir if self.cache else None, main=self.main)
            entries = {}
            for name, slot in self.slots.items():
                addr = self.code.address(f"fb.{name}")
                entries[name] = _FALLBACK_FN(addr)
                ctypes.c_void_p.from_address(slot).value = addr
            self.entries = entries
            return entries

    def close(self):
        if self.code is not None:
            self.code.close()


def _apply_relocations(code, meta, globals_):
    functions = meta["functions"]
    for gname, off, size, mask, sym, addend in meta["relocations"]:
        if sym in globals_:
            target = globals_[sym][0]
        elif sym in functions:
            holder = code.address(functions[sym])
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
