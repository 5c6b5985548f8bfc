"""A kernel dereferencing a wild pointer, through the real libcuda.so.1 (tests/driver/kernel_fault.c): the
sync returns CUDA_ERROR_ILLEGAL_ADDRESS, the error is sticky, a reset context works, the process exits 0."""

import re
import subprocess

import pytest

from chost import C_HOST, user_env, build_c_host


pytestmark = C_HOST


@pytest.fixture(scope="module")
def fault_exe(shim_libdir, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("fault") / "kernel_fault")
    build_c_host(shim_libdir, "kernel_fault.c", exe)
    return exe


@pytest.mark.parametrize("mode", ["store", "hole", "block", "stream"])
def test_illegal_address_is_reported_and_sticky(fault_exe, mode):
    r = subprocess.run([fault_exe, mode], env=user_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL PASSED"), r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "Fatal" not in r.stderr, r.stderr


@pytest.mark.parametrize("threads", ["1", "4"])
def test_fault_is_logged_with_kernel_and_address(fault_exe, threads):
    r = subprocess.run([fault_exe, "store"], env=user_env(ZLUDA_LOG="1", PTXRT_THREADS=threads),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ALL PASSED" in r.stdout, r.stdout + r.stderr
    lines = [l for l in r.stderr.splitlines() if "kernel fill" in l and "address 0x10 " in l]
    assert lines and all(l.startswith("[zluda]") for l in lines), r.stderr
    assert "Traceback" not in r.stderr


def test_faulting_block_among_many_is_named(fault_exe):
    r = subprocess.run([fault_exe, "block"], env=user_env(ZLUDA_LOG="1"), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # block 201 of 256 faults; blocks run in chunks, so the line names the block or the chunk holding it
    found = [re.search(r"kernel fill: illegal memory (?:read|write|access) at address 0x[0-9a-f]+ \(SIGSEGV\) in "
                       r"(?:block \((\d+),0,0\)|one of blocks \((\d+),0,0\)\.\.\((\d+),0,0\))", l)
             for l in r.stderr.splitlines()]
    found = [m for m in found if m]
    assert found, r.stderr
    m = found[0]
    lo, hi = (int(m.group(1)),) * 2 if m.group(1) else (int(m.group(2)), int(m.group(3)))
    assert lo <= 201 <= hi, m.group(0)
