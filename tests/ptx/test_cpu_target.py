"""What host kernel code may call and which CPU it is built for: the registered symbols are the runtime's
closed set, a module needing anything else fails to load (PTXUnsupportedError, CUDA_ERROR_NOT_SUPPORTED)
and never runs, from the object cache or a lazily built fallback too; ZLUDA_CPU_TARGET picks the CPU,
keys the cache, rejects unknown names, and the float instruction tests pass for x86-64-v3 and -v2."""

import ctypes
import ctypes.util
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptx
from ptx import host_target, runtime

ROOT = Path(__file__).resolve().parents[2]

# Thread `gap` of each block leaves before the barrier (gap < ntid: the block needs the barrier
# fallback); the others store tid / 100, through a device malloc'd word (the runtime's ptx_rt_malloc).
NARROW = r"""
.version 7.0
.target sm_80
.address_size 64

.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);
.extern .func free(.param .b64 free_param_0);

.visible .entry narrowk(.param .u64 out, .param .u32 gap)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<6>;
    .shared .align 4 .b8 s[1024];

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r6, [gap];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.eq.u32 %p1, %r1, %r6;
    @%p1 bra DONE;
    cvt.rn.f32.u32 %f1, %r1;
    div.rn.f32 %f1, %f1, 0f42C80000;
    {
    .param .b64 p0;
    st.param.b64 [p0], 16;
    .param .b64 r0;
    call.uni (r0), malloc, (p0);
    ld.param.b64 %rd5, [r0];
    }
    st.f32 [%rd5], %f1;
    ld.f32 %f2, [%rd5];
    {
    .param .b64 p1;
    st.param.b64 [p1], %rd5;
    call.uni free, (p1);
    }
    shl.b32 %r5, %r1, 2;
    mov.u32 %r7, s;
    add.s32 %r7, %r7, %r5;
    st.shared.f32 [%r7], %f2;
    bar.sync 0;
    ld.shared.f32 %f2, [%r7];
    st.global.f32 [%rd3], %f2;
DONE:
    ret;
}
"""


# the same without the malloc: region loops, whose barrier fallback is built at the first launch that needs it
REGIONS = NARROW[:NARROW.index("    {\n    .param .b64 p0;")] + "    mov.f32 %f2, %f1;\n" + \
    NARROW[NARROW.index("    shl.b32 %r5"):]


def run_narrow(kernel, blocks=4, n=64, gap=64):
    out = np.full(blocks * n, -5.0, np.float32)
    kernel.launch(blocks, n, [out, gap])
    t = np.tile(np.arange(n), blocks)
    want = t.astype(np.float32) / np.float32(100)
    live = t != gap
    assert np.array_equal(out[live], want[live])
    assert np.all(out[~live] == -5.0)


@pytest.fixture
def without_helper(monkeypatch):
    """The registered set less ptx_rt_malloc: what a runtime lacking a helper looks like to the check."""
    ptx.compile(NARROW + "// register\n")      # registration happens on first use: before narrowing
    monkeypatch.setattr(host_target, "_registered", set(host_target.registered()) - {"ptx_rt_malloc"})


def test_registered_symbols_are_the_runtimes_own():
    ptx.compile(NARROW + "// registered\n")
    reg = host_target.registered()
    table = runtime.libcalls()
    for name in ("__truncsfbf2", "__truncdfbf2", "__truncdfhf2", "__truncsfhf2", "__extendhfsf2",
                 "__gnu_h2f_ieee", "__gnu_f2h_ieee", "exp2", "exp2f", "fminf", "fmaxf", "fmin", "fmax", "tanh",
                 "tanhf", "sin", "cos", "log2", "roundeven", "nearbyint", "memcpy", "memset", "memmove",
                 "__divti3", "__udivti3", "__modti3", "__umodti3", "__muloti4", "__popcountdi2", "__powisf2",
                 "__powidf2", "fma", "fmaf", "sincos", "sincosf"):
        assert name in table and name in reg, name
    assert set(runtime.symbols()) <= reg and {"ptx_rt_membase", "ptx_rt_locals_base"} <= reg
    lib = runtime.library()
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    process = ctypes.CDLL(None)      # copysign & co. are in libc too: the dynamic linker took the first
    for name, address in table.items():
        if name.startswith("__"):        # our own helpers, not libgcc's or compiler-rt's
            own = ctypes.cast(getattr(lib, "ptx_lc_" + name[2:]), ctypes.c_void_p).value
            assert address == own, name
        else:
            assert hasattr(libm, name) or name.startswith("mem"), name
            assert address == ctypes.cast(getattr(process, name), ctypes.c_void_p).value, name


def test_check_names_what_an_object_needs():
    import llvmlite.binding as llvm
    from ptx import host
    ir = ("declare void @__foo()\ndeclare double @__bar(double)\ndeclare double @llvm.exp2.f64(double)\n"
          "define double @f(double %x) {\n  call void @__foo()\n  %y = call double @__bar(double %x)\n"
          "  %z = call double @llvm.exp2.f64(double %y)\n  ret double %z\n}\n")
    with host._llvm_lock:
        host._init_llvm()
        tm = host_target.machine("")[0]
        obj = tm.emit_object(llvm.parse_assembly(ir))
    assert host_target.undefined_symbols(obj) == {"__foo", "__bar", "exp2"}
    with pytest.raises(ptx.PTXUnsupportedError) as e:
        host_target.check_object(obj)
    assert str(e.value) == "kernel code needs __bar and __foo, which the CPU runtime does not provide"
    with pytest.raises(ptx.PTXError):
        host_target.undefined_symbols(b"\xcaMACH-O" + bytes(80))


def test_a_module_needing_an_unknown_symbol_fails_to_load(without_helper):
    with pytest.raises(ptx.PTXUnsupportedError, match="kernel code needs ptx_rt_malloc, which the CPU runtime "
                                                      "does not provide"):
        ptx.compile(NARROW)
    from zluda_py.backends.cpu.module import load_module
    from zluda_py.errors import CUDA_ERROR_NOT_SUPPORTED, CudaError
    m = load_module(NARROW, "m.ptx")      # the driver's load: the kernel alone is refused, at its first use
    with pytest.raises(CudaError) as e:
        m.functions()["narrowk"].info
    assert e.value.code == CUDA_ERROR_NOT_SUPPORTED and "ptx_rt_malloc" in e.value.message


def test_a_cached_object_is_checked_too(tmp_path, monkeypatch):
    text = NARROW + "// cached\n"
    first = ptx.compile(text, cache_dir=str(tmp_path))
    assert not first.cache_hit and len(list(tmp_path.glob("*.zk"))) == 1
    monkeypatch.setattr(host_target, "_registered", set(host_target.registered()) - {"ptx_rt_malloc"})
    with pytest.raises(ptx.PTXUnsupportedError, match="needs ptx_rt_malloc"):
        ptx.compile(text, cache_dir=str(tmp_path))
    monkeypatch.undo()
    again = ptx.compile(text, cache_dir=str(tmp_path))
    assert again.cache_hit
    run_narrow(again.kernel("narrowk"))


def test_a_fallback_needing_an_unknown_symbol_stops_the_launch_naming_it(monkeypatch):
    k = ptx.compile(REGIONS + "// fallback\n").kernel("narrowk")
    run_narrow(k)                                   # no thread leaves: no fallback
    assert k.module._fallback.entries is None
    need = "ptx_rt_membase"         # global memory's base: the main module's code is loaded already
    monkeypatch.setattr(host_target, "_registered", set(host_target.registered()) - {need})
    run_narrow(k)                                   # the region loops' code is loaded already
    out = np.zeros(4 * 64, np.float32)
    with pytest.raises(ptx.KernelFault, match=f"the barrier fallback's code needs {need}, which the CPU "
                                              "runtime does not provide"):
        k.launch(4, 64, [out, 7])
    assert k.module._fallback.entries is None


# ------------------------------------------------------------------ ZLUDA_CPU_TARGET

def test_an_unknown_cpu_name_is_one_clear_error(monkeypatch, capfd):
    with pytest.raises(ptx.PTXUnsupportedError) as e:
        ptx.compile(NARROW, cpu="no-such-cpu")
    assert "ZLUDA_CPU_TARGET='no-such-cpu'" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.setenv("ZLUDA_CPU_TARGET", "no-such-cpu")
    with pytest.raises(ptx.PTXUnsupportedError, match="knows no such CPU"):
        ptx.compile(NARROW)
    assert "not a recognized processor" not in capfd.readouterr().err     # LLVM's own line kept off
    monkeypatch.setenv("ZLUDA_CPU_TARGET", "")
    run_narrow(ptx.compile(NARROW + "// host again\n").kernel("narrowk"))


def test_a_32_bit_cpu_name_still_gives_64_bit_code():
    """LLVM aborts the process emitting x86-64 code for i686 or pentium4 as they are."""
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86 CPU names")
    run_narrow(ptx.compile(NARROW + "// pentium4\n", cpu="pentium4").kernel("narrowk"), gap=9)


def test_each_cpu_has_its_own_cached_objects(tmp_path, monkeypatch):
    monkeypatch.delenv("ZLUDA_CPU_TARGET", raising=False)     # the suite may run under another target
    text = REGIONS + "// keys\n"
    d = str(tmp_path)
    assert not ptx.compile(text, cache_dir=d, cpu="x86-64-v2").cache_hit
    assert ptx.compile(text, cache_dir=d, cpu="x86-64-v2").cache_hit
    assert not ptx.compile(text, cache_dir=d, cpu="x86-64-v3").cache_hit
    assert not ptx.compile(text, cache_dir=d).cache_hit                  # this machine's CPU
    monkeypatch.setenv("ZLUDA_CPU_TARGET", "x86-64-v2")
    v2 = ptx.compile(text, cache_dir=d)
    assert v2.cache_hit
    run_narrow(v2.kernel("narrowk"), gap=3)                 # a thread leaves: its fallback is cached too
    assert len([p for p in tmp_path.glob("*.zk") if not p.stem.endswith("-fallback")]) == 3
    assert len(list(tmp_path.glob("*-fallback.zk"))) == 1
    keys = {host_target.machine(c)[1] for c in ("", "x86-64-v2", "x86-64-v3")}
    assert len(keys) == 3 and any(k.startswith("x86-64-v2|") for k in keys)


INSTRUCTION_TESTS = ["tests/ptx/test_instr_cvt.py", "tests/ptx/test_instr_half.py",
                     "tests/ptx/test_instr_transcendental.py", "tests/ptx/test_instr_float.py"]


@pytest.mark.parametrize("cpu", ["x86-64-v3", "x86-64-v2"])
def test_float_instruction_tests_pass_for_an_older_cpu(cpu):
    """Where LLVM calls the half/bfloat helpers and libm's fma instead of F16C/FMA instructions."""
    env = dict(os.environ, ZLUDA_CPU_TARGET=cpu)
    probe = subprocess.run([sys.executable, "-c", "from ptx import host_target; print(host_target.machine()[1])"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert probe.stdout.startswith(cpu + "|"), probe.stdout + probe.stderr
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           *INSTRUCTION_TESTS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
