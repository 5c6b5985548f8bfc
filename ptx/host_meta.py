"""A module's first compile (front end, LLVM, the system linker) and the metadata stored beside its shared
object, from which a cache hit rebuilds everything the driver reads without parsing the PTX."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace


def build(text, fma_contract, opt_level, dump_dir, cpu, memcheck, module=None):
    """(metadata, shared object, LLVM IR text) for PTX text (`module`: its AST, already parsed)."""
    from ptx import host_llc, host_loader, host_target, pipeline
    from ptx.codegen.cpu.module import FALLBACK_GLOBAL, build_host_ir

    found = {}

    def lower(module):
        hir = build_host_ir(module, fma_contract=fma_contract, memcheck=memcheck)
        found["resources"] = _estimate(module)
        return hir
    hir = pipeline.lower(text, lower) if module is None else pipeline.lower_module(module, lower)
    if dump_dir:
        pipeline.dump(dump_dir, text, hir.text)
        if hir.fallback:
            pipeline.dump(dump_dir, text, hir.fallback, ir_suffix="fallback.ll")
    # verified, optimised and emitted in a child process: LLVM aborts on what it cannot handle
    obj = host_llc.compile_object(hir.text, host_target.cpu_name(cpu), opt_level, "the module")
    host_target.check_object(obj)
    so = host_loader.link(obj)
    meta = {
        "kernels": {name: dataclasses.asdict(info) for name, info in hir.kernels.items()},
        "globals": hir.globals,
        "relocations": hir.relocations,
        "functions": hir.functions,
        # the main module's globals by their own names: the loader binds them to the module's copy
        "fallback": hir.fallback.replace('@"' + FALLBACK_GLOBAL, '@"g.'),
        "resources": found["resources"],
        "undefined": sorted(host_target.undefined_symbols(obj)),
    }
    return meta, so, hir.text


def _estimate(module) -> dict:
    """ptx.resources' figures per kernel as plain values; {} where it cannot tell (the driver then falls
    back to the backend's own numbers, as for a module without PTX)."""
    from ptx.resources import module_resources
    try:
        return {name: dataclasses.asdict(r) for name, r in module_resources(module).items()}
    except Exception:  # noqa: BLE001 - an estimate never fails a compile
        return {}


def kernel_info(d: dict) -> SimpleNamespace:
    """KernelInfo's fields from the metadata (JSON has lists where the code generator had tuples)."""
    info = SimpleNamespace(**d)
    info.params = [tuple(p) for p in info.params]
    info.maxntid = tuple(info.maxntid) if info.maxntid else info.maxntid
    info.reqntid = tuple(info.reqntid) if info.reqntid else info.reqntid
    return info


def resources(meta) -> dict:
    return {name: SimpleNamespace(**r) for name, r in meta.get("resources", {}).items()}
