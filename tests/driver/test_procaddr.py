"""cuGetProcAddress(_v2) through the real library: empty and unknown names, ABI version selection,
per-thread-stream variants, symbol status, NULL for unimplemented entry points; the version table."""

import ctypes
import os

import pytest

from zluda_py import dispatch
from zluda_py.decls import DATA
from zluda_py.driver import procaddr

NOT_FOUND, INVALID_VALUE = 500, 1
SUCCESS, SYMBOL_NOT_FOUND, VERSION_NOT_SUFFICIENT = 0, 1, 2


@pytest.fixture(scope="module")
def lib(shim_libdir):
    return ctypes.CDLL(os.path.join(shim_libdir, "libcuda.so.1"))


def exported_address(lib, symbol):
    return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value


def get_v2(lib, name, version, flags=0):
    pfn = ctypes.c_void_p(0xDEAD)
    status = ctypes.c_int(-1)
    r = lib.cuGetProcAddress_v2(name, ctypes.byref(pfn), version, ctypes.c_uint64(flags), ctypes.byref(status))
    return r, pfn.value, status.value


def test_empty_and_unknown_names(lib):
    assert get_v2(lib, b"", 13000) == (NOT_FOUND, None, SYMBOL_NOT_FOUND)
    assert get_v2(lib, b"cuNoSuchFunction", 13000) == (NOT_FOUND, None, SYMBOL_NOT_FOUND)
    # only base names are looked up, never exported ABI names
    assert get_v2(lib, b"cuGetProcAddress_v2", 13000) == (NOT_FOUND, None, SYMBOL_NOT_FOUND)


def test_get_proc_address_resolves_itself(lib):
    assert get_v2(lib, b"cuGetProcAddress", 11030) == (0, exported_address(lib, "cuGetProcAddress"), SUCCESS)
    for v in (12000, 13000, 99999):
        assert get_v2(lib, b"cuGetProcAddress", v) == (0, exported_address(lib, "cuGetProcAddress_v2"), SUCCESS)
    assert get_v2(lib, b"cuGetProcAddress", 11020) == (NOT_FOUND, None, VERSION_NOT_SUFFICIENT)
    # per-thread flag on a function without a per-thread variant: the ordinary one
    assert get_v2(lib, b"cuGetProcAddress", 12000, 2)[1] == exported_address(lib, "cuGetProcAddress_v2")


def test_v1_entry_point(lib):
    pfn = ctypes.c_void_p(0xDEAD)
    assert lib.cuGetProcAddress(b"cuDriverGetVersion", ctypes.byref(pfn), 13000, ctypes.c_uint64(0)) == 0
    assert pfn.value == exported_address(lib, "cuDriverGetVersion")
    assert lib.cuGetProcAddress(b"", ctypes.byref(pfn), 13000, ctypes.c_uint64(0)) == NOT_FOUND
    assert pfn.value is None


def test_returned_pointer_is_callable(lib):
    r, pfn, _ = get_v2(lib, b"cuDriverGetVersion", 2020)
    assert r == 0
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))(pfn)
    v = ctypes.c_int(0)
    assert fn(ctypes.byref(v)) == 0 and v.value == 13050


def test_bad_arguments(lib):
    status = ctypes.c_int(-1)
    assert lib.cuGetProcAddress_v2(b"cuInit", None, 13000, ctypes.c_uint64(0), ctypes.byref(status)) == INVALID_VALUE
    pfn = ctypes.c_void_p(0xDEAD)
    assert lib.cuGetProcAddress_v2(None, ctypes.byref(pfn), 13000, ctypes.c_uint64(0), None) == INVALID_VALUE
    assert get_v2(lib, b"cuDriverGetVersion", 13000, flags=4)[:2] == (INVALID_VALUE, None)
    # symbolStatus is optional
    assert lib.cuGetProcAddress_v2(b"cuDriverGetVersion", ctypes.byref(pfn), 13000, ctypes.c_uint64(0), None) == 0


def test_every_table_entry_through_the_library(lib):
    """Each (name, version, flags) of NVIDIA's table: the exported function when it is implemented,
    else NOT_FOUND with a NULL pointer (cudart takes NULL as 'optional')."""
    checked = 0
    for e in DATA["procaddr"]:
        flags = 2 if e["ptds"] else 0
        status, symbol = procaddr.resolve(e["name"], e["version"], e["ptds"])
        assert status == SUCCESS
        r, pfn, st = get_v2(lib, e["name"].encode(), e["version"], flags)
        if dispatch.implemented(symbol):
            assert (r, pfn, st) == (0, exported_address(lib, symbol), SUCCESS), e
        else:
            assert (r, pfn, st) == (NOT_FOUND, None, SYMBOL_NOT_FOUND), e
        checked += 1
    assert checked == len(DATA["procaddr"]) > 600


@pytest.mark.parametrize("name, version, per_thread, symbol", [
    ("cuCtxCreate", 2000, False, "cuCtxCreate"),
    ("cuCtxCreate", 3020, False, "cuCtxCreate_v2"),
    ("cuCtxCreate", 11040, False, "cuCtxCreate_v3"),
    ("cuCtxCreate", 12050, False, "cuCtxCreate_v4"),
    ("cuCtxCreate", 13000, True, "cuCtxCreate_v4"),
    ("cuMemAlloc", 3010, False, "cuMemAlloc"),
    ("cuMemAlloc", 13000, False, "cuMemAlloc_v2"),
    ("cuMemcpyHtoD", 13000, False, "cuMemcpyHtoD_v2"),
    ("cuMemcpyHtoD", 13000, True, "cuMemcpyHtoD_v2_ptds"),
    ("cuMemcpyHtoD", 6050, True, "cuMemcpyHtoD_v2"),
    ("cuMemcpyHtoDAsync", 12000, True, "cuMemcpyHtoDAsync_v2_ptsz"),
    ("cuLaunchKernel", 12000, True, "cuLaunchKernel_ptsz"),
    ("cuLaunchKernel", 12000, False, "cuLaunchKernel"),
    ("cuStreamGetCaptureInfo", 12030, True, "cuStreamGetCaptureInfo_v3_ptsz"),
    ("cuStreamGetCaptureInfo", 11030, False, "cuStreamGetCaptureInfo_v2"),
    ("cuDeviceGetUuid", 9020, False, "cuDeviceGetUuid"),
    ("cuDeviceGetUuid", 11040, False, "cuDeviceGetUuid_v2"),
    ("cuGraphInstantiate", 12000, False, "cuGraphInstantiateWithFlags"),
    ("cuGetExportTable", 3000, False, "cuGetExportTable"),
    ("cuMemPrefetchAsync", 12020, True, "cuMemPrefetchAsync_v2_ptsz"),
])
def test_version_table(name, version, per_thread, symbol):
    assert procaddr.resolve(name, version, per_thread) == (SUCCESS, symbol)


def test_version_not_sufficient_and_unknown():
    assert procaddr.resolve("cuMemAllocAsync", 11010, False) == (VERSION_NOT_SUFFICIENT, None)
    assert procaddr.resolve("cuMemAllocAsync", 11020, False) == (SUCCESS, "cuMemAllocAsync")
    assert procaddr.resolve("", 13000, False) == (SYMBOL_NOT_FOUND, None)


def test_table_symbols_are_exports():
    exported = {f["name"] for f in DATA["functions"]}
    assert {e["symbol"] for e in DATA["procaddr"]} == exported


def test_unknown_name_logs_once_but_probes_stay_quiet(shim_libdir, tmp_path):
    """A name no CUDA 13.0 driver has gets one ZLUDA_LOG line, however often it is asked for; asking for
    an entry point that exists but is not implemented (cudart's optional probes) stays quiet."""
    import subprocess
    import sys
    # A name all of whose versions are unimplemented (cuArray3DCreate, say, resolves to an implemented _v2).
    unimplemented = next(f["name"] for f in DATA["functions"] if not dispatch.implemented(f["name"])
                         and f["name"] in {s for v in procaddr._TABLE.values() for _, s in v[0]}
                         and f["name"] in procaddr._TABLE
                         and not any(dispatch.implemented(s) for _, s in procaddr._TABLE[f["name"]][0]))
    script = f"""
import ctypes
lib = ctypes.CDLL({os.path.join(shim_libdir, 'libcuda.so.1')!r})
assert lib.cuInit(0) == 0
p, st = ctypes.c_void_p(), ctypes.c_int()
for name in (b"cuNoSuchFunction", b"cuNoSuchFunction", {unimplemented.encode()!r}):
    print(lib.cuGetProcAddress_v2(name, ctypes.byref(p), 13000, 0, ctypes.byref(st)), st.value)
"""
    env = dict(os.environ, ZLUDA_LOG="1")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["500", "1"] * 3
    lines = [line for line in r.stderr.splitlines() if line.startswith("[zluda]")]
    assert lines == ["[zluda] cuGetProcAddress: CUDA_ERROR_NOT_FOUND: no driver function 'cuNoSuchFunction' "
                     "(CUDA 13.5)"], r.stderr
