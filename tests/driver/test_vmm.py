"""The virtual memory API (reserve, create, map, access, retain, unmap, release, POSIX descriptors to a
forked child) through the built libcuda.so.1, from C (tests/driver/vmm.c)."""

import subprocess

import pytest

from chost import C_HOST, user_env, build_c_host

pytestmark = C_HOST


@pytest.fixture(scope="module")
def exe(shim_libdir, tmp_path_factory):
    return build_c_host(shim_libdir, "vmm.c", str(tmp_path_factory.mktemp("vmm") / "vmm"))


def test_virtual_memory(exe):
    r = subprocess.run([exe], env=user_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ALL PASSED" in r.stdout, r.stdout + r.stderr
