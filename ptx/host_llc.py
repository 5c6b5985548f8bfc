"""The host compiler's LLVM step (verify, optimise, emit a PIC object) in a long-lived child process, where an
LLVM abort ("LLVM ERROR: ...", an assertion) kills the child and becomes a PTXError in the application.
  python host_llc.py --serve    requests "CPU|- OPT[s] LEN\\n" + IR on stdin (s: scalar, no vectorizers);
                                answers "OK LEN\\n" + object,
                                "BAD LEN\\n" + verifier message or "ERR LEN\\n" + message on stdout;
                                "- PING 0\\n" answers "OK 0\\n" once the child is up
The parent starts the child as soon as it knows it will compile (start()), so that the child's start-up (an
interpreter, llvmlite, the target machine: about 0.2 s) overlaps the front end's parse."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

from ptx.child_process import python_executable, read_exactly
from ptx.errors import PTXUnsupportedError

# ------------------------------------------------------------------ the child


def _optimised(llvm, tm, ir: str, opt: int, vectorize: bool):
    try:
        mod = llvm.parse_assembly(ir)
        mod.verify()            # before any pass: LLVM's passes abort on a broken function
    except RuntimeError as e:
        raise SyntaxError(str(e)) from None
    pto = llvm.create_pipeline_tuning_options(speed_level=opt)
    pto.loop_vectorization = pto.slp_vectorization = vectorize and opt >= 2
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def _compile(ir: str, cpu: str, opt: int, vectorize: bool = True) -> bytes:
    import llvmlite.binding as llvm
    from ptx import host_target
    tm = host_target.machine(cpu)[0]
    mod = _optimised(llvm, tm, ir, opt, vectorize)
    try:
        # and after: LLVM 22's SLP vectorizer can leave a shufflevector before the instruction it reads
        # (ggml's mmvq for AVX2 CPUs), which instruction selection then asserts on
        mod.verify()
    except RuntimeError as e:
        if not (vectorize and opt >= 2):
            raise RuntimeError(f"LLVM's optimiser produced invalid IR: {str(e)[:300]}") from None
        mod = _optimised(llvm, tm, ir, opt, False)
        mod.verify()
    return tm.emit_object(mod)


def serve():
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    from ptx import host_target
    try:
        host_target.machine(None)     # the usual target's machine, made while the parent parses
    except Exception:  # noqa: BLE001 - reported when a request needs it
        pass
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = inp.readline()
        if not header:
            return 0
        cpu, opt, n = header.decode().split()
        ir = inp.read(int(n)).decode()
        try:
            if opt == "PING":
                out.write(b"OK 0\n")
                out.flush()
                continue
            obj = _compile(ir, cpu_arg(cpu), int(opt.rstrip("s")), not opt.endswith("s"))
            out.write(b"OK %d\n" % len(obj) + obj)
        except SyntaxError as e:
            msg = str(e).encode()
            out.write(b"BAD %d\n" % len(msg) + msg)
        except Exception as e:  # noqa: BLE001 - any failure is an answer, not a dead child
            msg = f"{type(e).__name__}: {e}".encode()
            out.write(b"ERR %d\n" % len(msg) + msg)
        out.flush()


def cpu_arg(cpu: str) -> str:
    return "" if cpu == "-" else cpu


# ------------------------------------------------------------------ the parent

class _Child:
    """One child per process (a forked process starts its own), restarted after it dies."""

    def __init__(self):
        self.proc = None
        self.err = None
        self.owner = None
        self.lock = threading.Lock()

    def _start(self):
        self.owner = os.getpid()
        self.err = tempfile.TemporaryFile()
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        # -S: no site module, whose .pth hooks (editable installs, numba's redirector) cost the child's start
        # about 30 ms; the parent's own path finds the same llvmlite (a host program's embedded interpreter's
        # path included)
        import sysconfig
        stdlib = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
        path = [root] + [p for p in sys.path if p and os.path.isdir(p) and p not in stdlib
                         and os.path.basename(p) != "lib-dynload"]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
        # the child is a plain interpreter: an inherited LD_PRELOAD (the shim) must not load into it
        env.pop("LD_PRELOAD", None)
        self.proc = subprocess.Popen([python_executable(), "-S", "-m", "ptx.host_llc", "--serve"], cwd=root,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=env)

    def _read(self, n, deadline):
        return read_exactly(self.proc.stdout, n, deadline)

    def _died(self):
        code = self.proc.wait()
        self.err.seek(0)
        lines = self.err.read().decode(errors="replace").strip().splitlines()
        self.proc = None
        why = next((ln for ln in lines if "LLVM ERROR" in ln), lines[-1] if lines else "")
        return f"{'signal %d' % -code if code < 0 else 'exit %d' % code}: {why[:400]}"

    def start(self, what="kernel code"):
        """The child, started if it is not running (the caller holds the lock)."""
        from ptx.errors import PTXError
        if self.proc is None or self.owner != os.getpid() or self.proc.poll() is not None:
            try:
                self._start()
            except OSError as e:
                raise PTXError(f"compiling {what}: cannot start the LLVM child: {e}") from None

    def compile(self, ir: str, cpu: str, opt: int, timeout: float, what: str, vectorize=True) -> bytes:
        return self.request(cpu, b"%d%s" % (opt, b"" if vectorize else b"s"), ir, timeout, what)

    def request(self, cpu: str, kind: bytes, ir: str, timeout: float, what: str) -> bytes:
        """The child's answer to one request (`kind`: an optimisation level, or PING) for the IR text."""
        from ptx.errors import PTXError
        data = ir.encode()
        with self.lock:
            self.start(what)
            deadline = time.monotonic() + timeout
            try:
                self.proc.stdin.write(b"%s %s %d\n" % ((cpu or "-").encode(), kind, len(data)) + data)
                self.proc.stdin.flush()
                line = b""
                while not line.endswith(b"\n"):
                    line += self._read(1, deadline)
                status, n = line.split()
                payload = self._read(int(n), deadline)
            except TimeoutError:
                self.proc.kill()
                self._died()
                raise PTXUnsupportedError(f"LLVM took longer than {timeout:.0f} s compiling {what}") from None
            except (EOFError, BrokenPipeError, OSError, ValueError):
                raise PTXUnsupportedError(f"LLVM aborted compiling {what} ({self._died()})") from None
        if status == b"OK":
            return payload
        msg = payload.decode(errors="replace")
        if status == b"BAD":
            raise PTXError(f"internal code generation error in {what}: {msg[:2000]}")
        raise PTXUnsupportedError(f"LLVM failed compiling {what}: {msg[:400]}")


_child = _Child()
# a module's parts compile in a second child at the same time (ir_split.py), where a second core is free: its
# start-up overlaps the first's and the front end's (a cold helper would cost a first compile more than it saves)
_helper = _Child()
SPLITS = {"modules": 0, "parts": 0}     # modules compiled in parts, and their parts (tests read it)
TIMEOUT_ENV = "ZLUDA_COMPILE_TIMEOUT"


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start():
    """Starts the children now, if they are not running, without waiting for them: a compile is coming."""
    for child in (_child, _helper) if _cores() > 1 else (_child,):
        try:
            with child.lock:
                child.start()
        except Exception:  # noqa: BLE001 - the compile that follows starts it again and reports why it cannot
            pass


def compile_object(ir: str, cpu: str, opt: int, what: str = "kernel code") -> bytes:
    """The PIC object for LLVM IR text, built in the child; PTXError when the IR does not verify (a code
    generator bug), PTXUnsupportedError when LLVM fails, aborts or runs past ZLUDA_COMPILE_TIMEOUT (s)."""
    try:
        timeout = float(os.environ.get(TIMEOUT_ENV, "") or 3600)
    except ValueError:
        timeout = 3600.0
    if opt >= 2 and _cores() > 1:
        obj = _compile_split(ir, cpu, opt, timeout, what)
        if obj is not None:
            return obj
    try:
        return _child.compile(ir, cpu, opt, timeout, what)
    except PTXUnsupportedError as e:
        if opt < 2 or "LLVM aborted" not in str(e):
            raise
        # an abort inside LLVM's vectorizers, or in selecting what they emitted, that the verifier after
        # the passes did not catch: once more without them, at the same level
        try:
            return _child.compile(ir, cpu, opt, timeout, what, vectorize=False)
        except PTXUnsupportedError:
            raise e from None


def _compile_split(ir, cpu, opt, timeout, what):
    """The object of a large module compiled as ir_split's parts by both children, each taking the next part
    (largest first) as it finishes one, merged into one relocatable object; None when the module is not split
    or a part fails (the whole module is then compiled as one, which reports the failure as it would)."""
    from ptx import ir_split
    parts = ir_split.split(ir)
    if parts is None:
        return None
    objs, lock, failed = [None] * len(parts), threading.Lock(), []
    todo = sorted(range(len(parts)), key=lambda i: -len(parts[i]))

    def work(child):
        if child is _helper:
            try:    # a part is taken once the helper is up: the first child goes on meanwhile
                child.request(cpu, b"PING", "", timeout, "the compiler child's start")
            except Exception:  # noqa: BLE001 - the first child compiles every part
                return
        while not failed:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            try:
                objs[i] = child.compile(parts[i], cpu, opt, timeout, what)
            except Exception:  # noqa: BLE001 - the whole module's compile reports it
                failed.append(i)

    helper = threading.Thread(target=work, args=(_helper,), daemon=True)
    helper.start()
    work(_child)
    helper.join()
    if failed:
        return None
    obj = _merge(objs)
    if obj is not None:
        SPLITS["modules"] += 1
        SPLITS["parts"] += len(parts)
    return obj


def _merge(objs):
    """One relocatable object of several (the system linker's -r)."""
    from ptx.runtime.build import _compiler, run_compiler
    with tempfile.TemporaryDirectory(prefix="zluda-merge-") as d:
        names = []
        for i, obj in enumerate(objs):
            names.append(os.path.join(d, f"p{i}.o"))
            with open(names[-1], "wb") as f:
                f.write(obj)
        out = os.path.join(d, "all.o")
        proc = run_compiler([_compiler(), "-r", "-nostdlib", "-o", out] + names)
        if proc.returncode != 0:
            return None
        with open(out, "rb") as f:
            return f.read()


if __name__ == "__main__":
    if sys.argv[1:2] != ["--serve"]:
        sys.exit("usage: host_llc.py --serve")
    sys.exit(serve())
