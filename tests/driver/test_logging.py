"""What the shim writes through the real libcuda.so.1: nothing under ZLUDA_LOG=1 for a healthy program, one
line per failing call, one line per fatal configuration problem even without ZLUDA_LOG, and ZLUDA_TRACE's
decimal launch dimensions and out-parameter values."""

import re
import shutil
import subprocess

import pytest

from chost import run_py, user_env

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")

FILL_PTX = r"""
.version 7.0
.target sm_50
.address_size 64
.visible .entry fill(.param .u64 out, .param .u32 v)
{
    .reg .u32 %r<4>;
    .reg .u64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [v];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mad.lo.u32 %r2, %r3, %ntid.x, %r2;
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""

KERNEL_CU = r"""
#include <cstdio>
__global__ void k(int *p) { p[threadIdx.x] = threadIdx.x; }
int main() {
    int *d;
    cudaError_t e = cudaMalloc(&d, 256);
    printf("malloc %d\n", (int)e);
    for (int i = 0; i < 3; i++) {
        k<<<1, 32>>>(d);
        printf("launch %d\n", (int)cudaGetLastError());
    }
    return 0;
}
"""


def zluda_lines(text):
    return [ln for ln in text.splitlines() if ln.startswith("[zluda]")]


def checked(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r


# --- ZLUDA_LOG=1: quiet when healthy, one line per real error ------------------------------------------

@pytest.mark.parametrize("sample", ["vector_add", "occupancy"])
def test_healthy_sample_logs_nothing(built_samples, shim_libdir, sample):
    """nvcc's default build (SASS + PTX): cudart probes an export table we lack, the backend falls back
    to the CPU, occupancy asks cuCtxGetDevice before any context exists: none of it is an error."""
    r = subprocess.run([str(built_samples / "default" / sample)], capture_output=True, text=True, timeout=300,
                       env=user_env(ZLUDA_LOG="1", LD_LIBRARY_PATH=shim_libdir))
    assert r.returncode == 0 and r.stdout.rstrip().endswith("PASS"), r.stdout + r.stderr
    assert zluda_lines(r.stderr) == []


def test_sample_with_one_bad_call_logs_one_line(built_samples, shim_libdir):
    """streams_events polls streams and events (NOT_READY answers) and makes one deliberate error."""
    r = subprocess.run([str(built_samples / "default" / "streams_events")], capture_output=True, text=True,
                       timeout=300, env=user_env(ZLUDA_LOG="1", LD_LIBRARY_PATH=shim_libdir))
    assert r.returncode == 0 and r.stdout.rstrip().endswith("PASS"), r.stdout + r.stderr
    lines = zluda_lines(r.stderr)
    assert len(lines) == 1 and "cuEventElapsedTime" in lines[0] and "DISABLE_TIMING" in lines[0], lines


def test_probes_are_quiet_errors_are_one_line_each(shim_libdir):
    r = checked(run_py(shim_libdir, """
        dev = ctypes.c_int(-1)
        ok(lib.cuInit(0))
        print(lib.cuCtxGetDevice(P(dev)), lib.cuCtxGetDevice_v2(P(dev), None))   # no context yet
        table, uuid = ctypes.c_void_p(), (ctypes.c_ubyte * 16)(*range(16))
        print(lib.cuGetExportTable(P(table), uuid))
        pfn, status = ctypes.c_void_p(), ctypes.c_int()
        print(lib.cuGetProcAddress_v2(b"", P(pfn), 13000, 0, P(status)))    # cudart's probe
        primary()
        print(lib.cuMemAlloc_v2(None, 16))
        mod = ctypes.c_void_p()
        print(lib.cuModuleLoadData(P(mod), b".version 7.0\\n.target sm_50\\nnot ptx at all"))
    """, ZLUDA_LOG="1"))
    assert r.stdout.split() == ["201", "201", "1", "500", "1", "218"]
    lines = zluda_lines(r.stderr)
    assert len(lines) == 2, lines
    assert lines[0].startswith("[zluda] cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE: "), lines
    assert lines[1].startswith("[zluda] cuModuleLoadData: CUDA_ERROR_INVALID_PTX: "), lines


def test_probes_still_traced(shim_libdir, tmp_path):
    log = tmp_path / "trace"
    checked(run_py(shim_libdir, """
        ok(lib.cuInit(0))
        dev = ctypes.c_int()
        print(lib.cuCtxGetDevice(P(dev)))
    """, ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(log)))
    assert "cuCtxGetDevice(device=0x" in log.read_text()
    assert "-> CUDA_ERROR_INVALID_CONTEXT: no current context on this thread" in log.read_text()


def test_without_zluda_log_errors_are_silent(shim_libdir):
    r = checked(run_py(shim_libdir, """
        primary()
        print(lib.cuMemAlloc_v2(None, 16))
    """))
    assert r.stdout.split() == ["1"] and zluda_lines(r.stderr) == []


# --- fatal configuration problems: one line each, whatever ZLUDA_LOG says ---------------------------------

BAD_BACKEND = """
    n = ctypes.c_int()
    print(lib.cuInit(0), lib.cuInit(0), lib.cuDeviceGetCount(P(n)))
"""


@pytest.mark.parametrize("log", ["", "1"])
def test_unknown_backend_is_one_line(shim_libdir, log):
    r = checked(run_py(shim_libdir, BAD_BACKEND, ZLUDA_BACKEND="bogus", ZLUDA_LOG=log))
    assert r.stdout.split() == ["100", "100", "3"]      # NO_DEVICE twice, then NOT_INITIALIZED
    lines = zluda_lines(r.stderr)
    expected = ["[zluda] cuInit: CUDA_ERROR_NO_DEVICE: ZLUDA_BACKEND='bogus' is not a backend: "
                "choose one of auto, cpu, hip"]
    if log:     # the later call's failure is an error of its own
        expected.append("[zluda] cuDeviceGetCount: CUDA_ERROR_NOT_INITIALIZED: cuInit has not been called "
                        "(or failed)")
    assert lines == expected, r.stderr


def test_hip_without_gpu_is_one_line_saying_what_is_missing(shim_libdir):
    from zluda_py.backends.select import _hip_backend_class
    if _hip_backend_class()[0] is not None:
        pytest.skip("an AMD GPU is usable here")
    r = checked(run_py(shim_libdir, BAD_BACKEND, ZLUDA_BACKEND="hip"))
    assert r.stdout.split() == ["100", "100", "3"]
    lines = zluda_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith("[zluda] cuInit: CUDA_ERROR_NO_DEVICE: ZLUDA_BACKEND=hip: "), \
        r.stderr
    assert re.search(r"ROCm is not installed|no AMD GPU is usable|hip-python is not installed", lines[0]), lines


def test_fatal_line_goes_to_zluda_log_file(shim_libdir, tmp_path):
    log = tmp_path / "log"
    r = checked(run_py(shim_libdir, BAD_BACKEND, ZLUDA_BACKEND="bogus", ZLUDA_LOG_FILE=str(log)))
    assert zluda_lines(r.stderr) == []
    assert zluda_lines(log.read_text()) == ["[zluda] cuInit: CUDA_ERROR_NO_DEVICE: ZLUDA_BACKEND='bogus' is not "
                                            "a backend: choose one of auto, cpu, hip"]


@pytest.fixture(scope="module")
def sass_only(tmp_path_factory):
    """A cudart program and a bare fatbin with SASS for sm_80 and sm_86 and no PTX."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    d = tmp_path_factory.mktemp("sass")
    (d / "k.cu").write_text(KERNEL_CU)
    arch = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_86,code=sm_86"]
    subprocess.run(["nvcc", *arch, str(d / "k.cu"), "-o", str(d / "k")], check=True, timeout=600)
    subprocess.run(["nvcc", "-fatbin", *arch, str(d / "k.cu"), "-o", str(d / "k.fatbin")], check=True, timeout=600)
    return d


SASS_LINE = re.compile(r"\[zluda\] (cuLibraryLoadData|cuModuleLoadData): CUDA_ERROR_NO_BINARY_FOR_GPU: \S+: the "
                       r"program has no PTX, only SASS sm_80, SASS sm_86 \(machine code for NVIDIA GPUs\); zluda-py "
                       r"compiles PTX: rebuild with -gencode arch=compute_80,code=compute_80$")


@needs_nvcc
@pytest.mark.parametrize("log", ["", "1"])
def test_sass_only_program_is_one_line(shim_libdir, sass_only, log):
    r = subprocess.run([str(sass_only / "k")], capture_output=True, text=True, timeout=300,
                       env=user_env(LD_LIBRARY_PATH=shim_libdir, ZLUDA_LOG=log))
    assert r.stdout.split("\n")[:4] == ["malloc 0", "launch 209", "launch 209", "launch 209"], r.stdout
    lines = zluda_lines(r.stderr)
    assert len(lines) == 1 and SASS_LINE.match(lines[0]), r.stderr


@needs_nvcc
def test_sass_only_fatbin_loads_are_one_line_per_process(shim_libdir, sass_only):
    code = f"""
        primary()
        image = open({str(sass_only / "k.fatbin")!r}, "rb").read()
        mod = ctypes.c_void_p()
        print(lib.cuModuleLoadData(P(mod), image), lib.cuModuleLoadData(P(mod), image))
    """
    r = checked(run_py(shim_libdir, code))
    assert r.stdout.split() == ["209", "209"]
    lines = zluda_lines(r.stderr)
    assert len(lines) == 1 and SASS_LINE.match(lines[0]), r.stderr
    r = checked(run_py(shim_libdir, code, ZLUDA_LOG="1"))    # the second failure is logged as a call's
    lines = zluda_lines(r.stderr)
    assert len(lines) == 2 and SASS_LINE.match(lines[0]) and SASS_LINE.match(lines[1]), r.stderr


# --- ZLUDA_TRACE ----------------------------------------------------------------------------------------

TRACED = f"""
    PTX = {FILL_PTX.encode()!r}
    ctx = primary()
    n = ctypes.c_int(); ok(lib.cuDeviceGetCount(P(n)))
    name = ctypes.create_string_buffer(100); ok(lib.cuDeviceGetName(name, 100, 0))
    mod = ctypes.c_void_p(); ok(lib.cuModuleLoadData(P(mod), PTX))
    f = ctypes.c_void_p(); ok(lib.cuModuleGetFunction(P(f), mod, b"fill"))
    d = ctypes.c_uint64(); ok(lib.cuMemAlloc_v2(P(d), 4096))
    v = ctypes.c_uint32(7)
    params = (ctypes.c_void_p * 2)(ctypes.cast(P(d), ctypes.c_void_p), ctypes.cast(P(v), ctypes.c_void_p))
    ok(lib.cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, None, params, None))
    out = (ctypes.c_uint32 * 1024)()
    ok(lib.cuMemcpyDtoH_v2(out, d, 4096))
    assert set(out) == {{7}}
    free, total = ctypes.c_size_t(), ctypes.c_size_t(); ok(lib.cuMemGetInfo_v2(P(free), P(total)))
    cc = ctypes.c_int(); ok(lib.cuDeviceGetAttribute(P(cc), 75, 0))
    s = ctypes.c_char_p(); ok(lib.cuGetErrorName(1, P(s)))
    print(lib.cuDeviceGetCount(None))
    print(n.value, ctx.value, mod.value, f.value, d.value, free.value, total.value, cc.value)
    print(name.value.decode())
    from zluda_py import dispatch
    print("trace module loaded:", "zluda_py.trace" in sys.modules,
          "cuInit wrapped:", dispatch.HANDLERS[dispatch.FUNCTION_IDS["cuInit"]].__name__ == "traced")
"""


def test_trace_shows_decimal_dimensions_and_out_values(shim_libdir, tmp_path):
    log = tmp_path / "trace"
    r = checked(run_py(shim_libdir, TRACED, ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(log)))
    out = r.stdout.splitlines()
    n, ctx, mod, f, d, free, total, cc = map(int, out[1].split())
    assert out[0] == "1" and out[3] == "trace module loaded: True cuInit wrapped: True"
    lines = [ln[len("[zluda] "):] for ln in log.read_text().splitlines() if ln.startswith("[zluda] ")]

    def one(pattern):
        assert sum(1 for ln in lines if re.fullmatch(pattern, ln)) == 1, (pattern, lines)

    p = r"0x[0-9a-f]+"
    one(r"cuInit\(Flags=0x0\) -> CUDA_SUCCESS")
    one(rf"cuDeviceGetCount\(count={p}\) -> CUDA_SUCCESS \[count={n}\]")
    one(r"cuDeviceGetCount\(count=0x0\) -> CUDA_ERROR_INVALID_VALUE: count is NULL")
    one(rf"cuDevicePrimaryCtxRetain\(pctx={p}, dev=0\) -> CUDA_SUCCESS \[pctx={ctx:#x}\]")
    one(rf"cuDeviceGetName\(name={p}, len=100, dev=0\) -> CUDA_SUCCESS \[name={re.escape(repr(out[2]))}\]")
    one(rf"cuModuleLoadData\(module={p}, image={p}\) -> CUDA_SUCCESS \[module={mod:#x}\]")
    one(rf"cuModuleGetFunction\(hfunc={p}, hmod={mod:#x}, name='fill'\) -> CUDA_SUCCESS \[hfunc={f:#x}\]")
    one(rf"cuMemAlloc_v2\(dptr={p}, bytesize=4096\) -> CUDA_SUCCESS \[dptr={d:#x}\]")
    one(rf"cuLaunchKernel\(f={f:#x}, gridDim=\(4,1,1\), blockDim=\(256,1,1\), sharedMemBytes=0, hStream=0x0, "
        rf"kernelParams={p}, extra=0x0\) -> CUDA_SUCCESS")
    one(rf"cuMemcpyDtoH_v2\(dstHost={p}, srcDevice={d:#x}, ByteCount=4096\) -> CUDA_SUCCESS")
    one(rf"cuMemGetInfo_v2\(free={p}, total={p}\) -> CUDA_SUCCESS \[free={free}, total={total}\]")
    one(rf"cuDeviceGetAttribute\(pi={p}, attrib=CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev=0\) -> "
        rf"CUDA_SUCCESS \[pi={cc}\]")
    one(rf"cuGetErrorName\(error=CUDA_ERROR_INVALID_VALUE, pStr={p}\) -> CUDA_SUCCESS "
        r"\[pStr='CUDA_ERROR_INVALID_VALUE'\]")


def test_trace_costs_nothing_when_off(shim_libdir):
    """Without ZLUDA_TRACE the formatter is never imported and no handler is wrapped."""
    r = checked(run_py(shim_libdir, TRACED))
    assert r.stdout.splitlines()[3] == "trace module loaded: False cuInit wrapped: False"
    assert zluda_lines(r.stderr) == []
