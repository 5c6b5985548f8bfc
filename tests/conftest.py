"""Shared pytest fixtures: `shim_libdir` builds the libcuda.so.1 shim once per session and returns its directory."""

import pytest


@pytest.fixture(scope="session")
def shim_libdir() -> str:
    """The directory holding the built libcuda.so.1 / libcuda.so (built on demand, once per session)."""
    from zluda_py import _shim_build
    return str(_shim_build.ensure_built())
