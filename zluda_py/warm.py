"""Warm the compiled-kernel cache for a program before it runs: read the fatbins inside its executable (and
shared libraries) offline and compile each module's PTX exactly as the driver would at load time.

    python3 -m zluda_py.warm [--cc 8.6] PROGRAM [LIBRARY ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from zluda_py import fatbin
from zluda_py.errors import CudaError


def modules_of(path: str, sm: int) -> list:
    """[(name, ptx text or CudaError)] for every module cudart would load from the image at `path`: one per
    fatbin of its .nv_fatbin section, plus the linked relocatable-device-code module if any."""
    with open(path, "rb") as f:
        data = f.read()
    sections, _eflags = fatbin._elf_sections(data)
    out = []
    fat = sections.get(".nv_fatbin")
    if fat:
        for i, group in enumerate(fatbin.parse_fatbin_groups(fat)):
            name = f"{os.path.basename(path)}[{i}]"
            try:
                out.append((name, fatbin.select_ptx(fatbin.ModuleImage("fatbin", entries=group), sm, name)))
            except CudaError as e:
                out.append((name, e))
    rel = sections.get("__nv_relfatbin")
    if rel:
        name = f"{os.path.basename(path)}[rdc]"
        groups = fatbin.parse_fatbin_groups(rel)
        try:
            img = fatbin.ModuleImage("wrapper", entries=[e for g in groups for e in g], link_groups=groups)
            out.append((name, fatbin.select_ptx(img, sm, name)))
        except CudaError as e:
            out.append((name, e))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cc", default=os.environ.get("ZLUDA_CC", "8.6"),
                    help="compute capability the device reports (default: ZLUDA_CC or 8.6)")
    ap.add_argument("paths", nargs="+", help="executables or shared libraries built by nvcc")
    args = ap.parse_args(argv)
    major, _, minor = args.cc.partition(".")
    sm = int(major) * 10 + int(minor or 0)
    import ptx
    from zluda_py.backends.cpu.module import compile_options
    opts = compile_options()
    if "cache_dir" not in opts:
        print("the kernel cache is disabled (ZLUDA_JIT_CACHE=0): nothing to warm", file=sys.stderr)
        return 1
    failed = 0
    for path in args.paths:
        try:
            modules = modules_of(path, sm)
        except (OSError, CudaError) as e:
            print(f"{path}: {e}")
            failed += 1
            continue
        for name, text in modules:
            if isinstance(text, CudaError):
                print(f"{name}: skipped ({text.message})")
                continue
            t0 = time.perf_counter()
            try:
                mod = ptx.compile(text, target="host", **opts)
            except ptx.PTXError as e:
                print(f"{name}: does not compile: {e}")
                failed += 1
                continue
            how = "already cached" if getattr(mod, "cache_hit", False) else "compiled"
            print(f"{name}: {len(mod.kernels)} kernels, {how} in {time.perf_counter() - t0:.2f} s")
            mod.close()     # only the cache entry was wanted: a program's thousand modules stay unmapped
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
