"""Every module of the PTX corpus and of the instruction tests, compiled for this CPU, x86-64-v3 and
x86-64-v2, needs only symbols the CPU runtime registers: the libcalls LLVM emits for a CPU without
F16C, FMA or AVX-512 (which this machine may well have) are checked on any machine, objects only."""

import importlib
from pathlib import Path

import pytest

import ptxkit as K
from test_corpus import BUILDS, _build_id, built_ptx  # noqa: F401  (fixture)

HERE = Path(__file__).resolve().parent
TARGETS = ("", "x86-64-v3", "x86-64-v2")
INSTR_MODULES = sorted(p.stem for p in HERE.glob("test_instr_*.py"))


def _lower(text):
    from ptx import pipeline
    from ptx.codegen.cpu.module import build_host_ir
    return pipeline.lower(text, build_host_ir)


def _instruction_texts():
    """(name, PTX) of each instruction test's shared module; a module the compiler rejects as a whole
    goes kernel by kernel (as ptxkit.KernelSet does), leaving out the kernels it rejects."""
    out = []
    for name in INSTR_MODULES:
        mod = importlib.import_module(name)
        for k, ks in enumerate(v for v in vars(mod).values() if isinstance(v, K.KernelSet)):
            out.append((f"{name}#{k}", [K.module(*ks.kernels.values(), target=ks.target)] +
                        [K.module(t, target=ks.target) for t in ks.kernels.values()]))
    return out


@pytest.fixture(scope="module")
def modules(built_ptx):  # noqa: F811
    """{LLVM IR text: where it comes from} for the corpus and the instruction tests, main and
    fallback modules, each distinct text once (the sm_75/86/90 builds often lower alike)."""
    from ptx.errors import PTXError
    found = {}

    def add(origin, text):
        try:
            hir = _lower(text)
        except PTXError:
            return False
        found.setdefault(hir.text, origin)
        if hir.fallback:
            found.setdefault(hir.fallback, origin + " (fallback)")
        return True
    for build in BUILDS:
        path, _ = built_ptx[_build_id(build)]
        if path is not None:
            add(_build_id(build), Path(path).read_text())
    for origin, (whole, *single) in _instruction_texts():
        if not add(origin, whole):
            for k, text in enumerate(single):
                add(f"{origin} kernel {k}", text)
    assert len(found) > 50, "the corpus and instruction tests gave too few modules to mean anything"
    return found


@pytest.mark.parametrize("cpu", TARGETS, ids=lambda c: c or "host")
def test_every_object_needs_only_registered_symbols(modules, cpu):
    import llvmlite.binding as llvm
    from ptx import host, host_target, runtime
    from ptx.codegen.cpu.module import FALLBACK_GLOBAL
    with host._llvm_lock:
        host._init_llvm()
        tm = host_target.machine(cpu)[0]
        allowed = host_target.registered()
        needed, unknown = {}, {}
        for ir, origin in modules.items():
            obj = host.emit_object(llvm.parse_assembly(ir), 3, tm)
            for name in host_target.undefined_symbols(obj):
                needed.setdefault(name, origin)
                # a fallback refers to its main module's globals, registered when it is compiled
                if name not in allowed and not name.startswith(FALLBACK_GLOBAL):
                    unknown.setdefault(name, origin)
    assert not unknown, f"objects for {cpu or 'the host'} need unregistered symbols: {unknown}"
    libcalls = sorted(set(needed) & set(runtime.libcalls()))
    print(f"\nlibcalls for {cpu or 'host'}: {', '.join(libcalls)}")
    # the check saw LLVM's libcalls at all (the math tests call exp2, sin, tanh on every CPU)
    assert libcalls, "no object needed a libcall: the scan reads nothing"
