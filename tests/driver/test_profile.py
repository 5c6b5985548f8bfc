"""ZLUDA_PROFILE=1: the table printed at exit, from a C host (an nvcc-built sample, through `zluda_py.cli run`)
and from a Python host (ctypes), on the native launch queue and on the Python launch path; nothing without it."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTOR_ADD = os.path.join(ROOT, "samples", "build", "ptx", "vector_add")

PTX = r"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry _Z7add_onePji(.param .u64 p, .param .u32 n)
{
  .reg .pred %p1;
  .reg .b32 %r<8>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r6, [%rd4];
  add.u32 %r7, %r6, 1;
  st.global.u32 [%rd4], %r7;
DONE:
  ret;
}
"""

# A Python host: launches add_one LAUNCHES times over a poisoned buffer and checks every element.
HOST = textwrap.dedent("""
    import ctypes, sys
    LAUNCHES, N = 3, 1000
    cu = ctypes.CDLL("libcuda.so.1")
    def ok(r):
        assert r == 0, r
    ok(cu.cuInit(0))
    dev, ctx, mod, fn, d = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_uint64()
    ok(cu.cuDeviceGet(ctypes.byref(dev), 0))
    ok(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev))
    ok(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(sys.argv[1].encode())))
    ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"_Z7add_onePji"))
    ok(cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(4 * N)))
    host = (ctypes.c_uint32 * N)(*[0xDEAD0000 + i for i in range(N)])
    ok(cu.cuMemcpyHtoD_v2(d, host, ctypes.c_size_t(4 * N)))
    n = ctypes.c_uint32(N)
    params = (ctypes.c_void_p * 2)(ctypes.addressof(d), ctypes.addressof(n))
    for _ in range(LAUNCHES):
        ok(cu.cuLaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, None, params, None))
    ok(cu.cuCtxSynchronize())
    out = (ctypes.c_uint32 * N)(*([0x5A5A5A5A] * N))
    ok(cu.cuMemcpyDtoH_v2(out, d, ctypes.c_size_t(4 * N)))
    bad = [i for i in range(N) if out[i] != 0xDEAD0000 + i + LAUNCHES]
    assert not bad, bad[:5]
    print("HOST OK")
""")


def user_env(shim_libdir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZLUDA_")}
    env["LD_LIBRARY_PATH"] = shim_libdir
    env["PYTHONPATH"] = ROOT
    env.update(extra)
    return env


def table(text):
    """The [zluda] lines of the report, from its header on (exactly one header)."""
    lines = [l[len("[zluda] "):] for l in text.splitlines() if l.startswith("[zluda] ")]
    heads = [i for i, l in enumerate(lines) if l.startswith("ZLUDA_PROFILE pid")]
    assert len(heads) == 1, text
    return lines[heads[0]:]


def calls(rows, name):
    """The call count of driver function `name` in the report."""
    for r in rows:
        f = r.split()
        if f and f[0] == name:
            return int(f[1])
    raise AssertionError(f"{name} not in the report:\n" + "\n".join(rows))


def launches(rows, short):
    """The launch count of the kernel shown as `short` (its kernel rows end: launches total mean max)."""
    start = next(i for i, r in enumerate(rows) if r.startswith("kernel (device time)"))
    for r in rows[start + 1:]:
        f = r.split()
        if f and f[0] == short:
            assert float(f[-3]) > 0 and float(f[-1]) > 0, r     # some device time was measured
            return int(f[-4])
    raise AssertionError(f"kernel {short} not in the report:\n" + "\n".join(rows))


def test_c_host_sample_through_cli(shim_libdir, built_samples):
    env = user_env(shim_libdir, ZLUDA_PROFILE="1")
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", VECTOR_ADD], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    rows = table(r.stderr)
    assert len(rows) <= 40, rows
    assert "C fast path off" in rows[0]
    assert calls(rows, "cuLaunchKernel") == 2       # vector_add.cu launches twice
    assert launches(rows, "vector_add") == 2
    assert any(r.lstrip().startswith("vector_add") and "_Z10vector" in r for r in rows), rows
    assert any(r.startswith("module loads: ") for r in rows), rows


def test_c_host_without_the_variable_prints_nothing(shim_libdir, built_samples):
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", VECTOR_ADD],
                       env=user_env(shim_libdir), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
    assert r.stderr == "", r.stderr


def run_host(shim_libdir, tmp_path, **env):
    script = tmp_path / "host.py"
    script.write_text(HOST)
    return subprocess.run([sys.executable, str(script), PTX], env=user_env(shim_libdir, **env),
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("native_queue", ["1", "0"])
def test_python_host(shim_libdir, tmp_path, native_queue):
    """ctypes host, on the native launch queue and on the Python path; the second run of the same PTX
    with the same cache directory is a cache hit; the report goes to ZLUDA_LOG_FILE when it is set."""
    cache = str(tmp_path / "cache")
    for attempt, how in enumerate(("compiled", "cache hit")):
        logfile = tmp_path / f"profile{attempt}.log"
        r = run_host(shim_libdir, tmp_path, ZLUDA_PROFILE="1", ZLUDA_CACHE_DIR=cache,
                     ZLUDA_CPU_NATIVE_QUEUE=native_queue, ZLUDA_LOG_FILE=str(logfile))
        assert r.returncode == 0 and "HOST OK" in r.stdout, r.stdout + r.stderr
        assert r.stderr == "", r.stderr
        rows = table(logfile.read_text())
        assert calls(rows, "cuLaunchKernel") == 3
        assert calls(rows, "cuMemAlloc_v2") == 1 and calls(rows, "cuModuleLoadData") == 1
        assert launches(rows, "add_one") == 3
        mods = [r for r in rows if r.rstrip().endswith(" ms") and r.startswith("  ")]
        assert len(mods) == 1 and how in mods[0], rows


def test_python_host_without_the_variable_prints_nothing(shim_libdir, tmp_path):
    r = run_host(shim_libdir, tmp_path)
    assert r.returncode == 0 and "HOST OK" in r.stdout, r.stdout + r.stderr
    assert r.stderr == "", r.stderr
