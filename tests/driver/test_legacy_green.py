"""tests/driver/legacy_green.c through the real libcuda.so.1: PyCUDA's legacy launch calls, cuCtxAttach/
cuCtxDetach usage counts and green contexts (an SM resource equal to the device, real partitions of it)."""

import random
import subprocess

import pytest

from chost import C_HOST, build_c_host, user_env

pytestmark = C_HOST


@pytest.fixture(scope="module")
def program(shim_libdir, tmp_path_factory):
    return build_c_host(shim_libdir, "legacy_green.c", tmp_path_factory.mktemp("legacy") / "legacy_green")


@pytest.mark.parametrize("cc", [None, "12.0"])
def test_legacy_launch_attach_detach_and_green_contexts(program, cc):
    env = {"ZLUDA_CC": cc} if cc else {}
    args = [str(random.randint(1, 10**6)), str(random.randint(1, 5)), str(random.randint(1, 4))]
    r = subprocess.run([program, *args], capture_output=True, text=True, timeout=600, env=user_env(**env))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok 0"), r.stdout + r.stderr
