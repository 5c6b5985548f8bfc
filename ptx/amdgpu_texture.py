"""The texture runtime on AMD GPUs: the CPU's ptx/runtime/texture.c, built freestanding by clang as LLVM
bitcode for no gfx target in particular (its functions take the module's) and linked into each module whose
kernels call it (ops_tex's tex, tld4, txq, suld, sust and suq), so a texture object's handle means the same
descriptor (texture.h) on both targets."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ptx.errors import PTXUnsupportedError
from ptx.runtime.texture import ENTRY_POINTS

RUNTIME = Path(__file__).resolve().parent / "runtime"
SOURCES = (RUNTIME / "texture.c", RUNTIME / "texture.h", RUNTIME / "texture_mip.c", RUNTIME / "surface.c")
# the declarations ops_tex emits for runtime/texture.py's ENTRY_POINTS
_DECL = re.compile(r"^declare [^@\n]*@(" + "|".join(ENTRY_POINTS) + r")\(", re.M)


def needed(ir: str) -> bool:
    """Whether a module's IR calls into the texture runtime."""
    return _DECL.search(ir) is not None


def source_hash() -> str:
    h = hashlib.sha256()
    for p in SOURCES:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def find_clang():
    """A clang that targets amdgcn: $ZLUDA_CLANG, ROCm's, clang on PATH, the newest /usr/lib/llvm-N."""
    cands = [os.environ.get("ZLUDA_CLANG"), "/opt/rocm/llvm/bin/clang", shutil.which("clang")]
    cands += sorted(glob.glob("/usr/lib/llvm-*/bin/clang"), key=lambda p: int(re.search(r"llvm-(\d+)", p)[1]),
                    reverse=True)
    return next((c for c in cands if c and os.access(c, os.X_OK)), None)


def bitcode(cache_dir=None) -> str:
    """Path of texture.c's bitcode, built once (atomically) into the cache directory: without -mcpu its
    functions carry no target-cpu, so one build serves every gfx target, even those the clang at hand
    does not know."""
    where = Path(cache_dir or os.environ.get("ZLUDA_CACHE_DIR") or tempfile.gettempdir()) / "amdgpu-runtime"
    out = where / f"texture-{source_hash()}.bc"
    if out.exists():
        return str(out)
    clang = find_clang()
    if clang is None:
        raise PTXUnsupportedError("textures and surfaces on AMD GPUs need clang to build the texture runtime "
                                  "(Debian/Ubuntu: apt-get install clang-19; ROCm's /opt/rocm/llvm/bin/clang "
                                  "works too; or set ZLUDA_CLANG)")
    where.mkdir(parents=True, exist_ok=True)
    tmp = where / f".{out.name}.{os.getpid()}"
    # -ffp-contract=off: the filter's sums multiply and add apart, as the CPU build does
    cmd = [clang, "--target=amdgcn-amd-amdhsa", "-nogpulib", "-ffreestanding",
           "-ffp-contract=off", "-O2", "-emit-llvm", "-c", str(SOURCES[0]), "-o", str(tmp)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PTXUnsupportedError(f"building the AMDGPU texture runtime failed: {e}") from None
    if r.returncode != 0:
        raise PTXUnsupportedError(f"building the AMDGPU texture runtime with {clang} failed: "
                                  f"{r.stderr.strip()[:400]}")
    os.replace(tmp, out)
    return str(out)

