"""The `zluda-py` command: run a program on the shim, print the shim's directory, list devices, diagnose.

    zluda-py --version
    zluda-py run [--backend cpu|hip|auto] -- PROGRAM ARGS...
    zluda-py libdir
    zluda-py info
    zluda-py doctor
    zluda-py compile --target gfx1100 FILE.ptx|CUDA-BINARY -o FILE.hsaco
    zluda-py inspect [--target gfx1100] [--ptx FILE.ptx] FILE.hsaco
"""

import argparse
import contextlib
import os
import sys

BACKENDS = ("auto", "cpu", "hip")


@contextlib.contextmanager
def _stdout_to_stderr():
    """Compiler chatter during a build must not pollute stdout (`libdir` prints only the directory)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def libdir() -> str:
    from zluda_py import _shim_build
    with _stdout_to_stderr():
        return _shim_build.ensure_built()


def version() -> str:
    """This installation's version (package metadata, else a checkout's pyproject.toml) and its LLVM's."""
    import importlib.metadata
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ours = None
    try:
        dist = importlib.metadata.distribution("zluda-py")
        # Metadata of some other zluda-py (a checkout run beside an installed copy) is not this one's.
        if os.path.realpath(str(dist.locate_file("zluda_py"))) == os.path.join(os.path.realpath(root), "zluda_py"):
            ours = dist.version
    except importlib.metadata.PackageNotFoundError:
        pass
    if ours is None:
        import re
        try:
            with open(os.path.join(root, "pyproject.toml")) as f:
                m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
            ours = m.group(1) if m else "unknown"
        except OSError:
            ours = "unknown"
    try:
        import llvmlite
        import llvmlite.binding as llvm
        tools = f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"
    except Exception as e:  # noqa: BLE001 - --version must answer even where the compiler cannot load
        tools = f"llvmlite unavailable: {e}"
    return f"zluda-py {ours} ({tools}; Python {sys.version.split()[0]})"


class _VersionAction(argparse.Action):
    """--version, computed only when asked (importing llvmlite costs every other command time)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(version())
        parser.exit()


def cmd_libdir(args) -> int:
    print(libdir())
    return 0


def cmd_run(args) -> int:
    prog = list(args.program)
    if prog and prog[0] == "--":
        prog = prog[1:]
    if not prog:
        print("zluda-py run: give a program to run, e.g. zluda-py run -- ./vectorAdd", file=sys.stderr)
        return 2
    d = libdir()
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = d + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    # The fronts of NVIDIA's NVRTC, nvJitLink and cuBLAS, loaded from the start (they bind NVIDIA's libraries at
    # their first call): frameworks that load those libraries through cuda-pathfinder (CuPy, cuda.core, numba)
    # take an already loaded one before the wheel's, which they would load by path, bypassing LD_LIBRARY_PATH.
    fronts = [os.path.join(d, f) for f in ("libnvrtc.so.13", "libnvJitLink.so.13", "libcublas.so.13")
              if os.path.isfile(os.path.join(d, f))]
    if env.get("ZLUDA_BLAS_FRONT") == "0":
        fronts = [f for f in fronts if "cublas" not in f]
    if fronts:
        env["LD_PRELOAD"] = " ".join(fronts + ([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else []))
    if args.backend:
        env["ZLUDA_BACKEND"] = args.backend
    try:
        os.execvpe(prog[0], prog, env)
    except OSError as e:
        print(f"zluda-py run: cannot run {prog[0]}: {e.strerror}", file=sys.stderr)
        return 127


def cmd_info(args) -> int:
    from zluda_py import devinfo
    if args.backend:
        os.environ["ZLUDA_BACKEND"] = args.backend
    return devinfo.print_info(libdir())


def cmd_doctor(args) -> int:
    from zluda_py import doctor
    return doctor.run()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="zluda-py", description="A drop-in libcuda.so.1 written in Python.")
    ap.add_argument("--version", action=_VersionAction)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run PROGRAM with the shim as its libcuda.so.1")
    p.add_argument("--backend", choices=BACKENDS, help="sets ZLUDA_BACKEND (default: auto)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("libdir", help="build the shim if needed and print the directory holding libcuda.so.1")
    p.set_defaults(fn=cmd_libdir)
    p = sub.add_parser("info", help="list backends and devices with their properties")
    p.add_argument("--backend", choices=BACKENDS)
    p.set_defaults(fn=cmd_info)
    p = sub.add_parser("doctor", help="check the installation and print the fix for each problem")
    p.set_defaults(fn=cmd_doctor)
    from zluda_py.amdgpu_cli import add_subcommands
    add_subcommands(sub)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
