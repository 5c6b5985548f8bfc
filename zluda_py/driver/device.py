"""cuDevice*: the backend's devices (ordinals 0..n-1), their names, UUIDs, PCI ids, memory and attributes."""

import re
import struct

from zluda_py import cmem, fastpath
from zluda_py.dispatch import export
from zluda_py.driver import init
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_VALUE

ATTR_MAX_TEXTURE1D_LINEAR_WIDTH = 69


def device_props(dev: int):
    """DeviceProperties of ordinal `dev`; NOT_INITIALIZED before cuInit, INVALID_DEVICE when out of range."""
    init.require_init()
    devices = init.DEVICES
    if not fastpath._devices_published:
        fastpath.publish_devices()
    if not 0 <= dev < len(devices):
        raise CudaError(CUDA_ERROR_INVALID_DEVICE, f"device {dev} does not exist ({len(devices)} present)")
    return devices[dev]


def attribute(dev: int, attrib: int) -> int:
    value = device_props(dev).attributes.get(attrib)
    if value is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown device attribute {attrib}")
    return value


@export("cuDeviceGet")
def device_get(device_out, ordinal):
    init.require_init()
    if not device_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "device is NULL")
    device_props(ordinal)
    cmem.write_i32(device_out, ordinal)


@export("cuDeviceGetCount")
def device_get_count(count_out):
    init.require_init()
    if not fastpath._devices_published:
        fastpath.publish_devices()
    cmem.write_i32(count_out, len(init.DEVICES), "count")


@export("cuDeviceGetName")
def device_get_name(name_out, length, dev):
    props = device_props(dev)
    cmem.write_cstring(name_out, props.name, length, "name")


@export("cuDeviceGetUuid", "cuDeviceGetUuid_v2")
def device_get_uuid(uuid_out, dev):
    props = device_props(dev)
    cmem.write_bytes(uuid_out, props.uuid[:16], "uuid")


@export("cuDeviceGetLuid")
def device_get_luid(luid_out, node_mask_out, dev):
    props = device_props(dev)
    cmem.write_bytes(luid_out, props.luid[:8], "luid")
    cmem.write_u32(node_mask_out, 1 << dev, "deviceNodeMask")


@export("cuDeviceTotalMem_v2")
def device_total_mem(bytes_out, dev):
    cmem.write_u64(bytes_out, device_props(dev).total_mem, "bytes")


@export("cuDeviceTotalMem")
def device_total_mem_v1(bytes_out, dev):
    # The pre-3.2 ABI has a 32-bit size: report what fits, as the old driver did.
    cmem.write_u32(bytes_out, min(device_props(dev).total_mem, 0xFFFFFFFF), "bytes")


@export("cuDeviceGetAttribute")
def device_get_attribute(value_out, attrib, dev):
    if not value_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pi is NULL")
    cmem.write_i32(value_out, attribute(dev, attrib))


@export("cuDeviceComputeCapability")
def device_compute_capability(major_out, minor_out, dev):
    props = device_props(dev)
    if not major_out or not minor_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "major/minor is NULL")
    cmem.write_i32(major_out, props.cc_major)
    cmem.write_i32(minor_out, props.cc_minor)


@export("cuDeviceGetProperties")
def device_get_properties(prop_out, dev):
    a = device_props(dev).attributes
    fields = [a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14]]
    cmem.write_bytes(prop_out, struct.pack("<14i", *fields), "prop")


def pci_bus_id(props) -> str:
    return f"{props.pci_domain:04x}:{props.pci_bus:02x}:{props.pci_device:02x}.0"


@export("cuDeviceGetPCIBusId")
def device_get_pci_bus_id(out, length, dev):
    cmem.write_cstring(out, pci_bus_id(device_props(dev)), length, "pciBusId")


_PCI = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)(?:\.([0-9a-fA-F]+))?$")


@export("cuDeviceGetByPCIBusId")
def device_get_by_pci_bus_id(dev_out, text_ptr):
    init.require_init()
    if not dev_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "dev is NULL")
    text = cmem.read_cstring(text_ptr, "pciBusId").strip()
    m = _PCI.match(text)
    if not m:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"malformed PCI bus id {text!r}")
    domain = int(m.group(1) or "0", 16)
    bus, device = int(m.group(2), 16), int(m.group(3), 16)
    for ordinal, p in enumerate(init.DEVICES):
        if (p.pci_domain, p.pci_bus, p.pci_device) == (domain, bus, device):
            cmem.write_i32(dev_out, ordinal)
            return
    raise CudaError(CUDA_ERROR_INVALID_DEVICE, f"no device at PCI bus id {text!r}")


@export("cuDeviceCanAccessPeer")
def device_can_access_peer(out, dev, peer):
    device_props(dev)
    device_props(peer)
    # A device is never its own peer; distinct CPU devices would share host memory, but there is one.
    cmem.write_i32(out, 0 if dev == peer else 1, "canAccessPeer")


@export("cuDeviceGetTexture1DLinearMaxWidth")
def device_get_texture_1d_linear_max_width(out, fmt, channels, dev):
    if channels not in (1, 2, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"numChannels {channels} is not 1, 2 or 4")
    cmem.write_u64(out, attribute(dev, ATTR_MAX_TEXTURE1D_LINEAR_WIDTH), "maxWidthInElements")


@export("cuDeviceGetExecAffinitySupport")
def device_get_exec_affinity_support(out, kind, dev):
    device_props(dev)
    cmem.write_i32(out, 0, "pi")


@export("cuDeviceGetP2PAttribute")
def device_get_p2p_attribute(value_out, attrib, src, dst):
    device_props(src)
    device_props(dst)
    if src == dst:
        raise CudaError(CUDA_ERROR_INVALID_DEVICE, "source and destination are the same device")
    if attrib not in (1, 2, 3, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown P2P attribute {attrib}")
    # Distinct CPU devices would share one memory: every P2P capability holds, at the best rank (0).
    cmem.write_i32(value_out, 0 if attrib == 1 else 1, "value")
