"""ptx: a PTX compiler (PTX text -> LLVM IR -> machine code via llvmlite) and a CPU grid executor.

Importable on its own; it knows nothing of the CUDA driver. The API:

    mod = ptx.compile(text, target="host")        # -> ptx.host.HostModule
    k = mod.kernel("vecAdd")                      # -> ptx.host.HostKernel
    k.params                                      # [(offset, size, align)] of the packed param buffer
    k.launch(grid, block, [a, b, c, n], shared_bytes=0)   # numpy arrays (their data address), ints,
                                                          # floats, or raw addresses; blocks until done
    k.launch_raw(grid, block, params_address, shared_bytes)  # the driver's path; raises KernelFault
    mod.globals["sym"]                            # (address, size) of a .global/.const variable

    amd = ptx.compile(text, target="gfx1100")      # -> ptx.amdgpu.AmdgpuModule: .code_object (linked
                                                   # ELF, code object v5), .kernels[name] metadata;
                                                   # "gfx1100:cumode" / ZLUDA_AMDGPU_FEATURES add features
    amd.kernel("vecAdd").launch(grid, block, args)  # on tinygrad's emulator (ZLUDA_AMDGPU_EMULATOR), not
                                                   # hardware; launch_raw takes the packed parameters

    ptx.parse(text) -> ptx.ast.Module              # raises ptx.errors.PTXError subclasses only;
                                                   # runs ptx.check(module) unless check=False
"""

from ptx.errors import (PTXError, PTXSyntaxError, PTXSemanticError, PTXUnsupportedError, PTXVersionError,  # noqa: F401
                        KernelFault)
# Imported eagerly: the submodule ptx.check would otherwise replace the function `ptx.check` on first import.
from ptx.check import check  # noqa: F401,E402  (the semantic checks `parse` runs by default)


def parse(text: str, check: bool = True):
    """Parse (and by default semantically check) PTX text -> ptx.ast.Module."""
    from ptx.parser import parse as _parse
    return _parse(text, check=check)


def external_functions() -> frozenset:
    """Functions a module may call without any module defining them: every target serves them itself
    (printf, device malloc/free, assert, and the device runtime's launches, streams and copies)."""
    from ptx.codegen.function_emitter import BUILTIN_FUNCS
    from ptx.codegen.ops_cdp import CALLS
    return BUILTIN_FUNCS | frozenset(CALLS)


def compile(text: str, target: str = "host", **options):  # noqa: A001 - the name the API promises
    if target == "host":
        from ptx.host import compile_host
        return compile_host(text, **options)
    from ptx.amdgpu_targets import is_amdgpu_target
    if is_amdgpu_target(target):          # "gfx1100", "amdgcn:gfx1100", "gfx90a:sramecc+:xnack-"
        from ptx.amdgpu import compile_amdgpu
        return compile_amdgpu(text, target=target, **options)
    raise PTXUnsupportedError(f"unknown target {target!r}")
