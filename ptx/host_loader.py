"""Kernel code as shared objects: an object linked with the system linker, loaded with dlopen and freed
with dlclose (MCJIT's engines are never freed by llvmlite), each load a copy of its own."""

from __future__ import annotations

import _ctypes
import ctypes
import itertools
import os
import tempfile
import threading

from ptx.errors import PTXError

# Every .so is linked under this name; a load writes its own copy under a name unique in the process,
# patched into the copy's DT_SONAME (and into a fallback's DT_NEEDED), so two loads of one module never
# share their globals and a fallback binds to the copy it was built for.
_PLACEHOLDER = b"zluda-kernels-" + b"0" * 16 + b".so"
_ids = itertools.count(1)
_ready_lock = threading.Lock()
_ready = False
_RTLD_FLAGS = os.RTLD_NOW | os.RTLD_LOCAL


def _runtime_loaded():
    """The runtime and the warp scheduler loaded RTLD_GLOBAL: what a kernel .so's undefined names bind to."""
    global _ready
    if _ready:
        return
    with _ready_lock:
        if not _ready:
            from ptx import runtime
            from ptx.codegen.native_helpers import helper_symbols
            runtime.library()
            helper_symbols()
            _ready = True


def renames() -> dict:
    """The libcalls LLVM names `__x` (compiler builtins) -> the runtime's exported `ptx_lc_x`: exported
    under their own names they would interpose on every library's builtins."""
    from ptx import runtime
    return {n: "ptx_lc_" + n[2:] for n in runtime.libcalls() if n.startswith("__")}


def _compiler():
    from ptx.runtime.build import _compiler as cc
    return cc()


def link(obj: bytes, what: str = "kernel code", needs_main: bool = False) -> bytes:
    """The shared object for a relocatable object (`obj`, position independent). needs_main: it refers
    to a loaded module's globals (a barrier fallback), so it needs that module's copy by its soname."""
    from ptx import host_target
    obj = host_target.rename_undefined(obj, renames())
    with tempfile.TemporaryDirectory(prefix="zluda-link-") as d:
        src, out = os.path.join(d, "k.o"), os.path.join(d, "k.so")
        with open(src, "wb") as f:
            f.write(obj)
        cmd = [_compiler(), "-shared", "-o", out, src, "-Wl,-Bsymbolic", "-Wl,-z,noexecstack"]
        if needs_main:
            stub = os.path.join(d, _PLACEHOLDER.decode())
            with open(stub, "wb") as f:
                f.write(_placeholder_stub(what))
            cmd += ["-Wl,--no-as-needed", stub]
        else:
            cmd.append(f"-Wl,-soname,{_PLACEHOLDER.decode()}")
        _run(cmd + ["-lm"], what)
        with open(out, "rb") as f:
            return f.read()


_stub = None


def empty_shared_object(what) -> bytes:
    """A shared object that defines nothing, named by the placeholder: a module's globals when it has none."""
    return _placeholder_stub(what)


def _placeholder_stub(what) -> bytes:
    """An empty shared object whose soname is the placeholder, built once per process: every lazy kernel
    and barrier fallback links against it (a compiler run each cost ~45 ms)."""
    global _stub
    if _stub is None:
        with tempfile.TemporaryDirectory(prefix="zluda-link-") as d:
            path = os.path.join(d, _PLACEHOLDER.decode())
            _run([_compiler(), "-shared", "-nostdlib", "-x", "c", os.devnull, "-o", path,
                  f"-Wl,-soname,{_PLACEHOLDER.decode()}"], what)
            with open(path, "rb") as f:
                _stub = f.read()
    return _stub


def _run(cmd, what):
    from ptx.runtime.build import run_compiler
    try:
        proc = run_compiler(cmd)
    except OSError as e:
        raise PTXError(f"linking {what}: {cmd[0]}: {e}") from None
    if proc.returncode != 0:
        raise PTXError(f"linking {what} failed: {' '.join(cmd)}\n{proc.stderr.strip()}")


def _write(data: bytes, name: str, directory) -> str:
    """A new file holding `data`, in `directory` (the cache's, where code is known to be executable)
    or else the temporary directory."""
    err = None
    for d in ([directory] if directory else []) + [tempfile.gettempdir()]:
        path = os.path.join(d, name)
        try:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
            except FileExistsError:     # left by a crashed process that had this pid: no live one has
                os.unlink(path)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        except OSError as e:
            err = e
            continue
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return path
    raise PTXError(f"no directory to load kernel code from: {err}")


class LoadedCode:
    """One dlopened copy of a shared object; `close()` unmaps it (the caller knows nothing runs it)."""

    def __init__(self, so: bytes, directory=None, main: "LoadedCode" = None):
        _runtime_loaded()
        if so.count(_PLACEHOLDER) != 1:
            raise PTXError("internal error: a kernel shared object without its placeholder name")
        self.soname = b"zluda-kernels-%08x%08x.so" % (os.getpid() & 0xFFFFFFFF, next(_ids))
        # a fallback names its module's copy in DT_NEEDED; a module its own copy in DT_SONAME
        data = so.replace(_PLACEHOLDER, main.soname if main is not None else self.soname)
        path = _write(data, self.soname.decode() if main is None else "fb-" + self.soname.decode(),
                      directory)
        try:
            self.handle = _ctypes.dlopen(path, _RTLD_FLAGS)
        except OSError as e:
            raise PTXError(f"loading kernel code failed: {e}") from None
        finally:
            os.unlink(path)         # the mapping keeps it; nothing is left behind on disk
        self.main = main            # a fallback keeps its module's copy mapped (it refers to its globals)

    def address(self, name: str) -> int:
        try:
            return _ctypes.dlsym(self.handle, name)
        except OSError:
            return 0

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h:
            _ctypes.dlclose(h)
