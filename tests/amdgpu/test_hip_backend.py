"""The HIP backend against the real HIP runtime where one is installable here (Debian's libamdhip64-5,
ROCm 5.2.3, no GPU: hipInit -> 101, hipGetDeviceCount -> 100) -- no mock of HIP -- and without ROCm at
all: cuInit under ZLUDA_BACKEND=hip returns CUDA_ERROR_NO_DEVICE and the log says what is missing."""

import os
import subprocess
import sys
import textwrap

import pytest

from zluda_py.backends.hip import errors as hip_errors
from zluda_py.backends.hip.runtime import find_library
from zluda_py import errors as E

CUINIT = textwrap.dedent("""
    import ctypes, sys
    lib = ctypes.CDLL(sys.argv[1] + "/libcuda.so.1")
    print("cuInit", lib.cuInit(0))
    n = ctypes.c_int(-1)
    print("cuDeviceGetCount", lib.cuDeviceGetCount(ctypes.byref(n)), n.value)
""")


def _cuinit(shim_libdir, tmp_path, **env):
    log = tmp_path / "zluda.log"
    e = dict(os.environ, ZLUDA_LOG="1", ZLUDA_LOG_FILE=str(log), **env)
    r = subprocess.run([sys.executable, "-c", CUINIT, shim_libdir], env=e, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = dict(ln.split(" ", 1) for ln in r.stdout.splitlines())
    return lines, (log.read_text() if log.exists() else "") + r.stderr


def _rocm_without_gpu():
    if find_library() is None:
        pytest.skip("no libamdhip64 installed (Debian: apt-get install libamdhip64-5)")
    pytest.importorskip("hip", reason="hip-python not installed (pip install hip-python)")
    if os.path.exists("/dev/kfd"):
        pytest.skip("this machine has an AMD GPU driver: the no-GPU path cannot be shown here")


def test_probe_with_rocm_and_no_gpu_says_so():
    _rocm_without_gpu()
    from zluda_py.backends.hip import HipBackend
    usable, why = HipBackend.probe()
    assert not usable
    assert "ROCm is present" in why and "hipInit -> 101" in why and "hipGetDeviceCount -> 100" in why, why


def test_backend_choice_with_rocm_and_no_gpu():
    _rocm_without_gpu()
    from zluda_py.backends.select import choose
    from zluda_py.backends.cpu import CpuBackend
    with pytest.raises(E.CudaError) as ei:
        choose("hip")
    assert ei.value.code == E.CUDA_ERROR_NO_DEVICE and "no AMD GPU" in ei.value.message
    assert isinstance(choose("auto"), CpuBackend)


def test_cuinit_hip_with_rocm_and_no_gpu(shim_libdir, tmp_path):
    _rocm_without_gpu()
    out, log = _cuinit(shim_libdir, tmp_path, ZLUDA_BACKEND="hip")
    assert out["cuInit"] == str(E.CUDA_ERROR_NO_DEVICE)
    assert "no AMD GPU" in log and "libamdhip64" in log, log


def test_cuinit_hip_without_rocm(shim_libdir, tmp_path):
    out, log = _cuinit(shim_libdir, tmp_path, ZLUDA_BACKEND="hip", ZLUDA_HIP_LIB="/nonexistent/libamdhip64.so")
    assert out["cuInit"] == str(E.CUDA_ERROR_NO_DEVICE)
    assert ("ROCm is not installed" in log or "hip-python is not installed" in log), log
    # auto falls back to the CPU: the program still has a device
    out, _ = _cuinit(shim_libdir, tmp_path, ZLUDA_BACKEND="auto", ZLUDA_HIP_LIB="/nonexistent/libamdhip64.so")
    assert out["cuInit"] == "0" and out["cuDeviceGetCount"] == "0 1"


def test_doctor_reports_the_hip_state():
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "doctor"], capture_output=True, text=True, timeout=300)
    text = r.stdout + r.stderr
    line = next((ln for ln in text.splitlines() if "hip backend" in ln), "")
    assert line, text
    if find_library() is None:
        assert "not usable" in line and ("ROCm is not installed" in line or "hip-python" in line), line
    elif not os.path.exists("/dev/kfd"):
        assert "not usable" in line and ("no AMD GPU" in line or "hip-python" in line), line


def test_attribute_table_names_exist():
    from zluda_py.backends.cpu.device_attributes import ATTRIBUTE
    from zluda_py.backends.hip.attributes import CUDA_TO_HIP
    assert set(CUDA_TO_HIP) <= set(ATTRIBUTE)
    hip = pytest.importorskip("hip.hip", reason="hip-python not installed")
    missing = [h for h in CUDA_TO_HIP.values() if not hasattr(hip.hipDeviceAttribute_t, "hipDeviceAttribute" + h)]
    assert not missing


def test_hip_errors_map_to_driver_results():
    assert hip_errors.cu_result(0) == E.CUDA_SUCCESS
    assert hip_errors.cu_result(100) == E.CUDA_ERROR_NO_DEVICE
    assert hip_errors.cu_result(700) == E.CUDA_ERROR_ILLEGAL_ADDRESS
    assert hip_errors.cu_result(719) == E.CUDA_ERROR_LAUNCH_FAILED
    assert hip_errors.cu_result(98) == E.CUDA_ERROR_INVALID_HANDLE
    assert hip_errors.cu_result(12345) == E.CUDA_ERROR_UNKNOWN


def test_compute_capability_default_and_override(monkeypatch):
    from zluda_py.backends.hip.attributes import compute_capability
    monkeypatch.delenv("ZLUDA_CC", raising=False)
    assert compute_capability("RDNA3") == (8, 8) and compute_capability("RDNA2") == (8, 6)
    monkeypatch.setenv("ZLUDA_CC", "8.5")
    assert compute_capability("RDNA3") == (8, 5)
