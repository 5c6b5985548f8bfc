"""Lazy kernels (CUDA_MODULE_LOADING=LAZY): a load builds a shared object of the module's globals alone; each
kernel, with the functions it calls, becomes a shared object of its own, bound to those globals by soname."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import threading
import time
from types import SimpleNamespace

from ptx.errors import PTXError

_TEX_SPACES = ("tex", "surf", "sampler", "texref", "surfref", "samplerref")
# a global's definition in a kernel's IR -> a declaration: the one definition is in the globals' object
_GLOBAL_DEF = re.compile(r'^(@"g\.[^"]*") = global (\[\d+ x i8\]) .*?(, align \d+)$', re.M)
_DEFINES = re.compile(r"^(define|@)", re.M)     # IR that defines something: a function or a variable
STATS = {"compiled": 0, "cached": 0, "failed": 0}     # kernels built per process (tests, benches read it)


# A lazy kernel is compiled for the block of the launch that compiles it: %ntid is a constant, the thread loops'
# trip counts are known (a 16x16 block's rows are one vector each, with no remainder; see README). ZLUDA_SPECIALIZE=0
# compiles every kernel for any block.
SPECIALIZE = os.environ.get("ZLUDA_SPECIALIZE", "1") != "0"


def _valid_block(block, kernel):
    """`block` as a tuple of 3 when `kernel` may be launched with it (CUDA's limits, its .reqntid and .maxntid),
    else None."""
    if block is None:
        return None
    from ptx.host import block_fits
    b = tuple(int(x) for x in block) + (1,) * (3 - len(block))
    if len(b) != 3 or not block_fits(b):
        return None
    req, most = getattr(kernel, "reqntid", None), getattr(kernel, "maxntid", None)
    if req and b != tuple(req) + (1,) * (3 - len(req)):
        return None
    if most and b[0] * b[1] * b[2] > _product(most):
        return None
    return b


def _product(dims) -> int:
    n = 1
    for d in dims:
        n *= max(int(d), 1)
    return n


def _block_key(key: str, block) -> str:
    return key and f"{key}-b{block[0]}x{block[1]}x{block[2]}"


def specializable(kmod, name: str) -> bool:
    """Whether a kernel's code may be compiled for one block: not where it reaches another kernel (a device-side
    launch's copy of it would run any block)."""
    from ptx import ast as A
    return not any(isinstance(i, A.Function) and i.kind == "entry" and i.body is not None and i.name != name
                   for i in kmod.items)


def kernel_key(module_key: str, name: str) -> str:
    return hashlib.sha256(f"{module_key}\0kernel\0{name}".encode()).hexdigest()


def _walk(x, out: set):
    """Every name an operand mentions (calls, function addresses, .calltargets)."""
    if isinstance(x, str):
        out.add(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _walk(y, out)
    elif dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            if f.name not in ("pos", "mods", "opcode", "type"):
                _walk(getattr(x, f.name), out)


def _body_names(body, out: set, calls: list):
    from ptx import ast as A
    for s in body:
        if isinstance(s, A.Instruction):
            _walk(s.operands, out)
            if s.opcode == "call":
                names = set()
                _walk(s.operands, names)
                calls.append(names)
        elif isinstance(s, A.Block):
            _body_names(s.body, out, calls)
        elif isinstance(s, A.BranchTargets) and s.is_call:
            out.update(s.labels)


def kernel_module(module, name: str):
    """The module cut down to one kernel, the functions it reaches and every variable and declaration."""
    from ptx import ast as A
    funcs = {i.name: i for i in module.items if isinstance(i, A.Function) and i.body is not None}
    declared = {i.name for i in module.items if isinstance(i, A.Function)}
    need, todo = {name}, [funcs[name]]
    while todo:
        names, calls = set(), []
        _body_names(todo.pop().body, names, calls)
        if any(not (c & declared) for c in calls):
            need = set(funcs)       # a call through a pointer may reach any function of the module
            break
        for n in names & funcs.keys() - need:
            need.add(n)
            todo.append(funcs[n])
    items = [i for i in module.items if isinstance(i, A.VarDecl) or i.body is None or i.name in need]
    return dataclasses.replace(module, items=items)


def globals_module(module):
    """The variables alone (texture references are refused by the kernels that use them, not the load)."""
    from ptx import ast as A
    items = [i for i in module.items if (isinstance(i, A.VarDecl) and i.space not in _TEX_SPACES)
             or (isinstance(i, A.Function) and i.body is None)]
    return dataclasses.replace(module, items=items)


def layouts(module) -> dict:
    """name -> what a kernel's handle needs before it is compiled: its parameters and launch bounds."""
    from ptx import ast as A
    from ptx.codegen.module_context import layout_params, decl_size
    common = sum(decl_size(i) for i in module.items if isinstance(i, A.VarDecl) and i.space == "shared")
    out = {}
    for f in module.entries():
        if f.body is None:
            continue
        params, size = layout_params(f.params)
        out[f.name] = {"params": params, "param_size": size, "param_types": [p.type.name for p in f.params],
                       "maxntid": f.directives.get("maxntid"), "reqntid": f.directives.get("reqntid"),
                       # at most its static shared bytes: a load refuses a kernel over the limit, as ptxas
                       "shared_hint": common + _body_shared(f.body)}
    return out


def _body_shared(body) -> int:
    from ptx import ast as A
    from ptx.codegen.module_context import decl_size
    n = 0
    for s in body:
        if isinstance(s, A.VarDecl) and s.space == "shared":
            n += decl_size(s) + (s.align or 0)
        elif isinstance(s, A.Block):
            n += _body_shared(s.body)
    return n


def build_globals(module, fma_contract, opt_level, cpu, memcheck):
    """(metadata, shared object) of the module's globals, or None when a load must compile it whole (an
    initialiser holds a function's address, which only the whole module's object has)."""
    from ptx import host_llc, host_loader, host_target
    from ptx.codegen.cpu.module import build_host_ir
    hir = build_host_ir(globals_module(module), fma_contract=fma_contract, memcheck=memcheck)
    if any(r[4] not in hir.globals for r in hir.relocations):
        return None
    meta = {"lazy": layouts(module), "globals": hir.globals, "relocations": hir.relocations,
            "functions": {}, "fallback": "", "resources": {}, "undefined": []}
    if not hir.globals and not _DEFINES.search(hir.text):
        # nothing to compile (most modules: their kernels' own data only): no wait for the LLVM child, which
        # the first kernel's compile then finds started
        return meta, host_loader.empty_shared_object("the module's globals")
    obj = host_llc.compile_object(hir.text, host_target.cpu_name(cpu), opt_level, "the module's globals")
    host_target.check_object(obj, "the module's globals")
    meta["undefined"] = sorted(host_target.undefined_symbols(obj))
    return meta, host_loader.link(obj, "the module's globals")


def build_kernel(module, name, fma_contract, opt_level, cpu, memcheck, global_names, block=None, kmod=None):
    """(metadata, shared object) of one kernel; its globals stay undefined, bound to the globals' copy. `block`:
    the (x, y, z) block every launch of this code will have, or None."""
    from ptx import host_llc, host_loader, host_meta, host_target, pipeline
    from ptx.codegen.cpu.module import FALLBACK_GLOBAL, build_host_ir
    kmod = kmod or kernel_module(module, name)
    what = f"kernel {name}"
    hir = pipeline.lower_module(kmod, lambda m: build_host_ir(m, fma_contract=fma_contract, memcheck=memcheck,
                                                              block=block))
    text = _GLOBAL_DEF.sub(r"\1 = external global \2\3", hir.text)
    obj = host_llc.compile_object(text, host_target.cpu_name(cpu), opt_level, what)
    undefined = sorted(host_target.undefined_symbols(obj) - set(global_names))
    host_target.check_names(undefined, what)
    # kernels whose address it takes (device-side launches) are compiled into its object too
    others = {n: dataclasses.asdict(k) for n, k in hir.kernels.items() if n != name}
    meta = {"kernel": dataclasses.asdict(hir.kernels[name]), "others": others, "undefined": undefined,
            "fallback": hir.fallback.replace('@"' + FALLBACK_GLOBAL, '@"g.'),
            "resources": host_meta._estimate(kmod).get(name)}
    return meta, host_loader.link(obj, what, needs_main=True)


def _error(stored) -> PTXError:
    from ptx import errors
    cls = getattr(errors, stored[0], PTXError)
    return cls(*stored[1:]) if isinstance(cls, type) and issubclass(cls, PTXError) else PTXError(*stored[1:])


class LazyKernels:
    """A lazy module's kernels: each compiled (or taken from the cache) on first use, its failure kept and
    raised again at every later use, so that one kernel's gap costs that kernel only."""

    def __init__(self, text, module_ast, options, cache, key, globals_code, global_names):
        self.text, self.ast = text, module_ast      # the AST is parsed again on a cache hit's first miss
        self.options = options                      # (fma_contract, opt_level, cpu, memcheck)
        self.cache, self.key = cache, key
        self.globals_code, self.global_names = globals_code, global_names
        self.lock = threading.RLock()
        self.codes, self.fallbacks, self.errors = [], [], {}
        self.copies = []        # addresses of kernels compiled into another kernel's object (registered)

    def _ast(self):
        if self.ast is None:
            from ptx import parse
            self.ast = parse(self.text, check=False)    # it passed the checker when it was first loaded
        return self.ast

    def load(self, kernel, block=None) -> None:
        """Fill a LazyKernel in place (HostKernel's fields); PTXError when it cannot be compiled. `block`: the
        block of the launch that asks, which the code is compiled for where it may be (specializable)."""
        from ptx import host, host_loader, host_meta, host_target
        with self.lock:
            if "address" in kernel.__dict__:
                return
            if kernel.name in self.errors:
                raise self.errors[kernel.name]
            if self.globals_code.handle is None:
                raise PTXError("the module was unloaded")
            fma_contract, opt_level, cpu, memcheck = self.options
            key = self.key and kernel_key(self.key, kernel.name)
            spec = _valid_block(block, kernel) if SPECIALIZE else None
            got, kmod = None, None
            if spec is not None and self.cache is not None:
                got = self.cache.load(_block_key(key, spec))    # (a gap's error too: any block's code has it)
            if got is None and spec is not None:
                kmod = kernel_module(self._ast(), kernel.name)
                if not specializable(kmod, kernel.name):
                    spec = None
            if spec is not None:
                key = key and _block_key(key, spec)
            elif self.cache is not None:
                got = self.cache.load(key)
            t0 = time.perf_counter_ns()
            try:
                if got is not None and "error" in got[0]:
                    raise _error(got[0]["error"])       # a gap is remembered: no parse to find it again
                if got is not None:
                    host_target.check_names(got[0]["undefined"], f"kernel {kernel.name}")
                    meta, so = got
                else:
                    try:
                        with host._llvm_lock:      # the LLVM work is the child's: llvmlite stays unloaded here
                            meta, so = build_kernel(self._ast(), kernel.name, fma_contract, opt_level, cpu,
                                                    memcheck, self.global_names, spec, kmod)
                    except PTXError as e:
                        if self.cache is not None:
                            self.cache.store(key, {"error": [type(e).__name__, e.message, e.line, e.col]}, b"")
                        raise
                    if self.cache is not None:
                        self.cache.store(key, meta, so)
                code = host_loader.LoadedCode(so, self.cache.dir if self.cache else None, main=self.globals_code)
            except PTXError as e:
                STATS["failed"] += 1
                self.errors[kernel.name] = e
                raise
            self.codes.append(code)
            info = host_meta.kernel_info(meta["kernel"])
            host.HostKernel.__init__(kernel, kernel.module, info, code.address(info.symbol))
            others = meta.get("others", {})
            for other in others.values():     # this object's copies of the kernels it launches
                oinfo = host_meta.kernel_info(other)
                address = code.address(oinfo.symbol)
                host.register_kernel(address, oinfo)
                self.copies.append(address)
            if meta.get("resources"):
                kernel.module.resources[kernel.name] = SimpleNamespace(**meta["resources"])
            if meta["fallback"]:
                fb_meta = {"fallback": meta["fallback"], "kernels": {kernel.name: meta["kernel"], **others},
                           "globals": {}}
                fb = host._LazyFallback(fb_meta, code, opt_level, cpu, self.cache, key and key + "-fallback",
                                        main=self.globals_code, main_names=set(self.global_names))
                self.fallbacks.append(fb)
                kernel.fallback = fb
            STATS["cached" if got is not None else "compiled"] += 1
            kernel.compile_ns, kernel.compile_hit = time.perf_counter_ns() - t0, got is not None
            kernel.spec_block = spec

    def generic(self, kernel):
        """A HostKernel of `kernel`'s code for any block, beside its code for one (HostKernel.for_block)."""
        from ptx import host
        copy = host.LazyKernel(kernel.module, kernel.name, kernel.layout)
        self.load(copy)
        return copy

    def close(self):
        with self.lock:
            if self.copies:
                from ptx import runtime
                for address in self.copies:
                    runtime.unregister_kernel(address)
                self.copies = []
            for fb in self.fallbacks:
                fb.close()
            for code in self.codes:
                code.close()
            self.codes, self.fallbacks, self.ast = [], [], None
