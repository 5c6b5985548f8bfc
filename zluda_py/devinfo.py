"""`zluda-py info`: the backends and, through the built libcuda.so.1 itself, every device and its
properties, the way a CUDA application would see them."""

import ctypes
import os

from zluda_py.decls import ENUMS

BACKEND_MODULES = {"cpu": ("zluda_py.backends.cpu", "CpuBackend"), "hip": ("zluda_py.backends.hip", "HipBackend")}


def backend_status(name: str):
    """(usable, reason) for one backend, tolerating a backend that is missing or broken."""
    module, cls_name = BACKEND_MODULES[name]
    try:
        import importlib
        cls = getattr(importlib.import_module(module), cls_name)
    except Exception as e:  # noqa: BLE001 - a broken backend is a finding, not a crash
        return False, f"not available in this installation ({type(e).__name__}: {e})"
    try:
        return cls.probe()
    except Exception as e:  # noqa: BLE001
        return False, f"probe failed: {type(e).__name__}: {e}"


class Driver:
    """Thin ctypes calls into the shim; every call returns (CUresult, value)."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)

    def error_name(self, code: int) -> str:
        s = ctypes.c_char_p()
        if self.lib.cuGetErrorName(code, ctypes.byref(s)) == 0 and s.value:
            return s.value.decode()
        return str(code)

    def call_int(self, fn: str, *args):
        v = ctypes.c_int(0)
        return getattr(self.lib, fn)(ctypes.byref(v), *args), v.value

    def name(self, dev: int):
        buf = ctypes.create_string_buffer(256)
        r = self.lib.cuDeviceGetName(buf, 256, dev)
        return r, buf.value.decode(errors="replace")

    def total_mem(self, dev: int):
        v = ctypes.c_size_t(0)
        return self.lib.cuDeviceTotalMem_v2(ctypes.byref(v), dev), v.value

    def uuid(self, dev: int):
        buf = ctypes.create_string_buffer(16)
        r = self.lib.cuDeviceGetUuid_v2(buf, dev)
        return r, buf.raw

    def pci_bus_id(self, dev: int):
        buf = ctypes.create_string_buffer(64)
        r = self.lib.cuDeviceGetPCIBusId(buf, 64, dev)
        return r, buf.value.decode(errors="replace")


def format_uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def print_info(libdir: str) -> int:
    from zluda_py import __version__
    path = os.path.join(libdir, "libcuda.so.1")
    print(f"zluda-py {__version__}")
    print(f"shim: {path}")
    print("backends:")
    for name in BACKEND_MODULES:
        usable, why = backend_status(name)
        print(f"  {name}: {'usable' if usable else 'not usable'} ({why})")
    print(f"ZLUDA_BACKEND={os.environ.get('ZLUDA_BACKEND', 'auto')}")
    try:
        drv = Driver(path)
    except OSError as e:
        print(f"cannot load the shim: {e}")
        return 1
    r, version = drv.call_int("cuDriverGetVersion")
    print(f"driver version: {version} (CUDA {version // 1000}.{version % 1000 // 10})" if r == 0
          else f"cuDriverGetVersion failed: {drv.error_name(r)}")
    r = drv.lib.cuInit(0)
    if r != 0:
        print(f"cuInit failed: {drv.error_name(r)} (run with ZLUDA_LOG=1 for the reason)")
        return 1
    r, count = drv.call_int("cuDeviceGetCount")
    if r != 0:
        print(f"cuDeviceGetCount failed: {drv.error_name(r)}")
        return 1
    print(f"devices: {count}")
    attributes = sorted(((v, k) for k, v in ENUMS.get("CUdevice_attribute", {}).items()
                         if not k.endswith("_MAX")), key=lambda kv: kv[0])
    for dev in range(count):
        _print_device(drv, dev, attributes)
    return 0


def _show(drv, label, result):
    r, value = result
    return f"  {label}: {value}" if r == 0 else f"  {label}: ({drv.error_name(r)})"


def _print_device(drv, dev: int, attributes) -> None:
    r, name = drv.name(dev)
    print(f"device {dev}: {name if r == 0 else '(' + drv.error_name(r) + ')'}")
    r, raw = drv.uuid(dev)
    print(f"  uuid: {format_uuid(raw)}" if r == 0 else f"  uuid: ({drv.error_name(r)})")
    print(_show(drv, "pci bus id", drv.pci_bus_id(dev)))
    r, mem = drv.total_mem(dev)
    print(f"  total memory: {mem} bytes ({mem / 2**30:.1f} GiB)" if r == 0
          else f"  total memory: ({drv.error_name(r)})")
    seen = set()
    for value, key in attributes:
        if value in seen:
            continue  # aliases (e.g. ..._MAX_SHARED_MEMORY_PER_BLOCK / ..._SHARED_MEMORY_PER_BLOCK)
        seen.add(value)
        r, v = drv.call_int("cuDeviceGetAttribute", value, dev)
        label = key.replace("CU_DEVICE_ATTRIBUTE_", "").lower()
        print(f"  {label} = {v}" if r == 0 else f"  {label}: ({drv.error_name(r)})")
