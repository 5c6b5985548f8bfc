"""Install-time build of the shim: a non-editable install ships zluda_py/_lib/libcuda.so.1 ready to load
(an editable install builds it on first use instead). Everything else is in pyproject.toml."""

import importlib.util
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithShim(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        pkg = os.path.join(self.build_lib, "zluda_py")
        src = os.path.join(pkg, "src")
        shutil.rmtree(src, ignore_errors=True)  # a build/ left from an older tree may hold removed sources
        os.makedirs(src)
        for name in os.listdir(os.path.join(HERE, "src")):
            if name.endswith((".c", ".h", ".cdef")):
                shutil.copy2(os.path.join(HERE, "src", name), src)
        # Loaded by path, from the build tree: its paths (declarations, sources) must be the installed ones.
        spec = importlib.util.spec_from_file_location("_zluda_shim_build", os.path.join(pkg, "_shim_build.py"))
        shim_build = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(shim_build)
        shim_build.build_for_install(pkg)


class BinaryDistribution(Distribution):
    """The wheel holds a compiled libcuda.so.1, so it is platform-specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithShim}, distclass=BinaryDistribution)
