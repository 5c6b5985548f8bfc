"""ptx: a PTX compiler (PTX text -> LLVM IR -> machine code via llvmlite) and a CPU grid executor.

Importable on its own; it knows nothing of the CUDA driver. The API:

    mod = ptx.compile(text, target="host")        # -> ptx.host.HostModule
    k = mod.kernel("vecAdd")                      # -> ptx.host.HostKernel
    k.params                                      # [(offset, size, align)] of the packed param buffer
    k.launch(grid, block, [a, b, c, n], shared_bytes=0)   # numpy arrays (their data address), ints,
                                                          # floats, or raw addresses; blocks until done
    k.launch_raw(grid, block, params_address, shared_bytes)  # the driver's path; raises KernelFault
    mod.globals["sym"]                            # (address, size) of a .global/.const variable

    ptx.parse(text) -> ptx.ast.Module              # raises ptx.errors.PTXError subclasses only
"""

from ptx.errors import PTXError, PTXSyntaxError, PTXSemanticError, PTXUnsupportedError, KernelFault  # noqa: F401


def parse(text: str):
    from ptx.parser import parse as _parse
    return _parse(text)


def compile(text: str, target: str = "host", **options):  # noqa: A001 - the name the API promises
    if target == "host":
        from ptx.host import compile_host
        return compile_host(text, **options)
    raise PTXUnsupportedError(f"unknown target {target!r}")
