"""Which Python a C host gets: the one this installation belongs to, whatever PATH says or is activated, in
a clean environment (env -i) and with the library copied next to an app; where that interpreter is gone,
cuInit answers CUDA_ERROR_NO_DEVICE and one line says why (no traceback, never a silent CUDA_SUCCESS)."""

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

import zluda_py

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

# After cuInit, asks the interpreter the shim started which one it is; a second call checks that
# the driver really works (a device is there) rather than answering 0 from a dead interpreter.
HOST = r"""
#include <dlfcn.h>
#include <stdio.h>
int cuInit(unsigned);
int cuDeviceGetCount(int *);
int main(void) {
    int n = -1, rc = cuInit(0);
    int rc2 = cuDeviceGetCount(&n);
    printf("cuInit %d count %d n %d\n", rc, rc2, n);
    fflush(stdout);
    if (rc)
        return 0;
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    int (*run)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) {
        printf("no Python in the process\n");
        return 1;
    }
    int g = ensure();
    run("import sys, _cffi_backend\n"
        "print('executable', sys.executable)\n"
        "print('prefix', sys.prefix)\n"
        "print('base_prefix', sys.base_prefix)\n"
        "import zluda_py; print('package', zluda_py.__file__)\n"
        "sys.stdout.flush()\n");
    release(g);
    return 0;
}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory, shim_libdir):
    """The C host, linked -lcuda against the shim without an rpath (the loader's search path decides)."""
    d = tmp_path_factory.mktemp("host")
    (d / "host.c").write_text(HOST)
    exe = d / "host"
    subprocess.run(["gcc", str(d / "host.c"), "-o", str(exe), f"-L{shim_libdir}", "-lcuda", "-ldl"], check=True)
    return exe


def _run(exe, libdir, cwd, **env):
    base = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LD_LIBRARY_PATH": str(libdir)}
    base.update(env)
    return subprocess.run([str(exe)], capture_output=True, text=True, env=base, cwd=str(cwd), timeout=120)


def _facts(stdout):
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)


def _zluda_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("[zluda]")]


@needs_gcc
def test_clean_environment_gets_this_python(host, shim_libdir, tmp_path):
    """env -i with only /usr/bin:/bin on PATH (whose python3 is another installation here, if any): the
    embedded interpreter is the one the shim was built with, with its own prefix and site-packages."""
    r = _run(host, shim_libdir, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    facts = _facts(r.stdout)
    assert r.stdout.startswith("cuInit 0 count 0 n 1"), r.stdout + r.stderr
    assert facts["executable"] == sys.executable
    assert facts["prefix"] == sys.prefix and facts["base_prefix"] == sys.base_prefix
    assert os.path.samefile(facts["package"], zluda_py.__file__)
    assert not _zluda_lines(r.stderr) and "Traceback" not in r.stderr, r.stderr


@needs_gcc
def test_library_copied_next_to_an_app(host, shim_libdir, tmp_path):
    """Only libcuda.so.1 copied beside the program (a common way to ship a driver stand-in): it still
    reaches its installation."""
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(host, app / "host")
    shutil.copy(os.path.join(shim_libdir, "libcuda.so.1"), app / "libcuda.so.1")
    r = _run(app / "host", app, app)
    assert r.stdout.startswith("cuInit 0 count 0 n 1"), r.stdout + r.stderr
    assert _facts(r.stdout)["executable"] == sys.executable
    assert "Traceback" not in r.stderr and not _zluda_lines(r.stderr), r.stderr


@needs_gcc
def test_explicit_interpreter_that_is_not_there(host, shim_libdir, tmp_path):
    r = _run(host, shim_libdir, tmp_path, ZLUDA_PYTHON=str(tmp_path / "no-such-python"))
    assert r.returncode == 0 and r.stdout.startswith("cuInit 100 count 303 n -1"), r.stdout + r.stderr
    lines = _zluda_lines(r.stderr)
    assert len(lines) == 1 and "no-such-python is not an executable Python interpreter" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def _fake_site_packages(root, shim_libdir):
    """The shim laid out as a wheel install lays it out: <prefix>/lib/pythonX.Y/site-packages/zluda_py/_lib."""
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    lib = root / "lib" / f"python{ver}" / "site-packages" / "zluda_py" / "_lib"
    lib.mkdir(parents=True)
    for name in ("libcuda.so.1", "_zluda_shim.so"):
        shutil.copy(os.path.join(shim_libdir, name), lib / name)
    return lib


@needs_gcc
def test_installation_whose_interpreter_is_gone(host, shim_libdir, tmp_path):
    """A venv that was deleted under an installed shim (or a broken copy): cuInit answers NO_DEVICE, every
    other call fails too, and one line, printed without ZLUDA_LOG, names the missing interpreter."""
    lib = _fake_site_packages(tmp_path / "venv", shim_libdir)
    r = _run(host, lib, tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("cuInit 100 count 303 n -1"), r.stdout + r.stderr
    lines = _zluda_lines(r.stderr)
    assert len(lines) == 1 and "is gone" in lines[0] and str(tmp_path / "venv" / "bin") in lines[0], r.stderr
    assert "Traceback" not in r.stderr


@needs_gcc
def test_installation_in_a_venv_starts_that_venv(host, shim_libdir, tmp_path):
    """A shim inside a venv's site-packages starts that venv's interpreter (its pyvenv.cfg names the base
    installation, whose libpython is loaded), not the one that built the shim."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python has no shared libpython")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True)
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    site = venv / "lib" / f"python{ver}" / "site-packages"
    # The package itself, as a wheel install would place it (a link: the test needs no copy of the tree).
    pkg_src = os.path.dirname(os.path.abspath(zluda_py.__file__))
    pkg = site / "zluda_py"
    pkg.mkdir()
    for name in os.listdir(pkg_src):
        if name != "_lib":
            os.symlink(os.path.join(pkg_src, name), pkg / name)
    lib = pkg / "_lib"
    lib.mkdir()
    for name in ("libcuda.so.1", "_zluda_shim.so"):
        shutil.copy(os.path.join(shim_libdir, name), lib / name)
    (site / "ptx").symlink_to(os.path.join(os.path.dirname(pkg_src), "ptx"))
    r = _run(host, lib, tmp_path)
    assert r.stdout.startswith("cuInit 0 count 0 n 1"), r.stdout + r.stderr
    facts = _facts(r.stdout)
    assert facts["executable"] in (str(venv / "bin" / f"python{ver}"), str(venv / "bin" / "python3"))
    assert facts["prefix"] == str(venv) and facts["base_prefix"] == sys.base_prefix
    assert facts["package"] == str(pkg / "__init__.py")
    assert "Traceback" not in r.stderr and not _zluda_lines(r.stderr), r.stderr


def test_front_library_links_no_python(shim_libdir):
    """libcuda.so.1 needs no libpython and carries no RUNPATH: it works wherever it is copied, and the
    interpreter is chosen at run time."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf not installed")
    for name in ("libcuda.so.1", "_zluda_shim.so"):
        out = subprocess.run(["readelf", "-d", os.path.join(shim_libdir, name)], capture_output=True, text=True,
                             check=True).stdout
        assert "libpython" not in out and "RUNPATH" not in out and "RPATH" not in out, (name, out)
