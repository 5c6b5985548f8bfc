"""Builds ptxrt.c and libcalls.c (and, through build_library, the other native helpers) into shared
libraries with the system C compiler, once per source hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = ("ptxrt.c", "libcalls.c", "memcheck.c", "texture.c", "texture_mip.c", "surface.c", "devlaunch.c",
           "ptxrt.h", "texture.h", "devlaunch.h")
LIBS = ["-lm"]          # libcalls.c's table holds libm's functions
CFLAGS = ["-O2", "-shared", "-fPIC", "-pthread", "-std=gnu11", "-fvisibility=default"]


class RuntimeBuildError(RuntimeError):
    """The C compiler is missing or rejected ptxrt.c (the message carries its output)."""


def cflags() -> list[str]:
    """CFLAGS plus PTXRT_CFLAGS from the environment (e.g. -DPTXRT_UCONTEXT to test the portable path)."""
    return CFLAGS + os.environ.get("PTXRT_CFLAGS", "").split()


def source_hash() -> str:
    return _digest([HERE / name for name in SOURCES], cflags() + LIBS)


def _digest(inputs, flags) -> str:
    h = hashlib.sha256()
    for path in inputs:
        h.update(Path(path).read_bytes())
    h.update(" ".join(flags).encode())
    return h.hexdigest()[:16]


def _candidate_dirs(local: Path | None = HERE / "_build") -> list[Path]:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    shared = [Path(cache) / "zluda-py", Path(tempfile.gettempdir()) / f"zluda-py-{os.getuid()}"]
    return ([local] if local is not None else []) + shared


def _writable_dir(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(d, os.W_OK | os.X_OK)


def run_compiler(cmd):
    """Run the C compiler (its output captured as text) in the process's environment, given a PATH where it has
    none (a program started with an empty environment), since gcc finds its linker `ld` on PATH."""
    env = None if os.environ.get("PATH") else dict(os.environ, PATH="/usr/local/bin:/usr/bin:/bin")
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def _compiler() -> str:
    cc = os.environ.get("CC")
    if cc:
        return cc
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return name
    raise RuntimeBuildError("no C compiler found (set CC): the CPU runtime's C sources must be compiled")


def ensure_built() -> Path:
    """The path of libptxrt-<hash>.so, compiling it first if no up-to-date copy exists."""
    return build_library("ptxrt", [HERE / "ptxrt.c", HERE / "libcalls.c", HERE / "memcheck.c", HERE / "texture.c",
                                   HERE / "devlaunch.c"], [HERE / name for name in SOURCES],
                         cflags(), _candidate_dirs(), libs=LIBS)


def build_library(stem: str, main_source, inputs, flags, dirs=None, libs=()) -> Path:
    """lib<stem>-<hash of inputs, flags and libs>.so built from main_source (one path or a list) with the
    system C compiler, in the first of `dirs` holding it already or else the first writable one (default:
    the shared caches); a package-local build directory (ending in _build) keeps only its current copy.
    Raises RuntimeBuildError with the compiler's output on failure."""
    sources = [main_source] if isinstance(main_source, (str, os.PathLike)) else list(main_source)
    name = f"lib{stem}-{_digest(inputs, list(flags) + list(libs))}.so"
    dirs = _candidate_dirs(None) if dirs is None else dirs
    for d in dirs:
        if (d / name).is_file():
            return d / name
    target_dir = next((d for d in dirs if _writable_dir(d)), None)
    if target_dir is None:
        raise RuntimeBuildError(f"no writable directory to build {Path(sources[0]).name} in: "
                                + ", ".join(map(str, dirs)))
    target = target_dir / name
    # Two processes may build at once: each writes its own temp file and renames it into place.
    fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".tmp", dir=target_dir)
    os.close(fd)
    try:
        # libraries after the sources: with --as-needed (the default on Debian/Ubuntu) a library named
        # before them is dropped
        cmd = [_compiler(), *flags, *map(str, sources), "-o", tmp, *libs]
        proc = run_compiler(cmd)
        if proc.returncode != 0:
            raise RuntimeBuildError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
        if target_dir.name == "_build":     # a package's own build dir keeps only the current one
            for old in target_dir.glob(f"lib{stem}-*.so"):
                if old.name != name:
                    try:
                        old.unlink()
                    except OSError:
                        pass
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
