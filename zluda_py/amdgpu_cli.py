"""`zluda-py compile` (PTX or a CUDA binary's fatbins -> AMDGPU code objects, ahead of time, warming the
kernel cache) and `zluda-py inspect` (what a code object holds, and the offline verifier's verdict)."""

from __future__ import annotations

import os
import sys


def _ptx_texts(path: str) -> list:
    """[(label, ptx text)]: the file itself when it is PTX, else every PTX entry of its fatbins."""
    from zluda_py.fatbin import KIND_PTX, parse_image
    with open(path, "rb") as fh:
        data = fh.read()
    image = parse_image(data)
    if image.fmt == "ptx":
        return [(os.path.basename(path), image.ptx)]
    seen, out = set(), []
    for e in image.entries or []:
        if e.kind != KIND_PTX:
            continue
        text = e.ptx_text()
        if text in seen:
            continue
        seen.add(text)
        out.append((f"{os.path.basename(path)}:ptx-sm_{e.sm}#{len(out)}", text))
    return out


def cmd_compile(args) -> int:
    import ptx
    from ptx.amdgpu_verify import verify
    from zluda_py.backends.cpu.module import compile_options
    from zluda_py.errors import CudaError
    try:
        texts = _ptx_texts(args.file)
    except (OSError, CudaError) as e:
        print(f"zluda-py compile: {args.file}: {e}", file=sys.stderr)
        return 2
    if not texts:
        print(f"zluda-py compile: {args.file} holds no PTX (SASS only cannot be translated)", file=sys.stderr)
        return 1
    out = args.output or os.path.splitext(os.path.basename(args.file))[0] + f".{args.target.split(':')[0]}.hsaco"
    status = 0
    for i, (label, text) in enumerate(texts):
        dest = out if len(texts) == 1 else f"{os.path.splitext(out)[0]}.{i}.hsaco"
        try:
            mod = ptx.compile(text, target=args.target, **compile_options())
        except ptx.PTXError as e:
            print(f"{label}: not compiled: {e}", file=sys.stderr)
            status = 1
            continue
        v = verify(mod.code_object, mod.target, text)
        with open(dest, "wb") as fh:
            fh.write(mod.code_object)
        print(f"{label}: {len(mod.kernels)} kernels -> {dest} ({len(mod.code_object)} bytes, "
              f"{'cached' if mod.cache_hit else 'compiled'}, verifier: {'OK' if v.ok else 'FAILED'})")
        for p in v.problems:
            print(f"  problem: {p}")
        if not v.ok:
            status = 1
    return status


def cmd_inspect(args) -> int:
    from ptx.amdgpu_verify import verify
    try:
        with open(args.file, "rb") as fh:
            data = fh.read()
        ptx_text = open(args.ptx).read() if args.ptx else None
    except OSError as e:
        print(f"zluda-py inspect: {e}", file=sys.stderr)
        return 2
    v = verify(data, args.target, ptx_text, launch_block=args.block)
    for line in v.facts:
        print(line)
    for p in v.problems:
        print(f"problem: {p}")
    print(f"verdict: {'OK' if v.ok else 'FAILED'}")
    return 0 if v.ok else 1


def add_subcommands(sub) -> None:
    p = sub.add_parser("compile", help="compile PTX (or every PTX in a CUDA binary) to AMDGPU code objects")
    p.add_argument("--target", default="gfx1100", help="gfx1100, gfx1030, gfx1201, gfx90a, gfx942, ...")
    p.add_argument("-o", "--output", help="output .hsaco (several PTX modules: numbered files)")
    p.add_argument("file")
    p.set_defaults(fn=cmd_compile)
    p = sub.add_parser("inspect", help="print what an AMDGPU code object holds and verify it offline")
    p.add_argument("--target", help="check the GPU byte and wave size against this target")
    p.add_argument("--ptx", help="check the kernels' metadata against this PTX")
    p.add_argument("--block", type=int, help="check max_flat_workgroup_size against this block size")
    p.add_argument("file")
    p.set_defaults(fn=cmd_inspect)
