"""Kernel launches: cuLaunchKernel (kernelParams or `extra`), cuLaunchKernelEx (CUlaunchConfig + attributes),
cuLaunchCooperativeKernel and their per-thread-stream forms, with CUDA's launch-configuration checks."""

from __future__ import annotations

import struct
import weakref
from typing import NamedTuple

from zluda_py import cmem, fastpath
from zluda_py.backends.cpu import launchq
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod
from zluda_py.driver import init
from zluda_py.driver import stream as streammod
from zluda_py.driver.device import device_props
from zluda_py.driver.module import Function, get_function
from zluda_py.errors import (CudaError, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, CUDA_ERROR_INVALID_VALUE,
                             CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                             CUDA_ERROR_INVALID_CLUSTER_SIZE)

CU_LAUNCH_PARAM_END = 0x0
CU_LAUNCH_PARAM_BUFFER_POINTER = 0x1
CU_LAUNCH_PARAM_BUFFER_SIZE = 0x2

# CUdevice_attribute
_MULTIPROCESSOR_COUNT = 16

# CUlaunchAttributeID
ATTR_IGNORE = 0
ATTR_COOPERATIVE = 2
ATTR_CLUSTER_DIMENSION = 4
ATTR_PRIORITY = 8
ATTR_PORTABLE_CLUSTER_SIZE_MODE = 17     # CUlaunchAttributePortableClusterMode: 0 default, 1 portable, 2 not
ATTR_MAX = 19                            # CU_LAUNCH_ATTRIBUTE_MAX of the CUDA 13 headers the decls come from
ATTRIBUTE_VALUE_SIZE = 64       # the CUlaunchAttributeValue union
_ATTRIBUTE_SIZE = 72            # id (4) + pad (4) + 64-byte value union
_LAUNCH_CONFIG = struct.Struct("<7I4xQQI")


# id(FunctionInfo) -> uint32_t[2n] of (offset, size) for launchq's zq_pack. A plan lives exactly as long as
# its function (a finalizer drops it), so modules unloaded by the thousand leave nothing behind.
_pack_plans: dict = {}


def pack_kernel_params(f: Function, kernel_params: int) -> bytes:
    """The packed parameter buffer from an array of pointers, one per parameter."""
    info = f.info
    buf = bytearray(info.param_size)
    if not info.params:
        return bytes(buf)
    if not kernel_params:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{f.name} takes {len(info.params)} parameters, "
                                                  "kernelParams and extra are NULL")
    q = launchq._lib or launchq.get()
    if q is not None:   # one C call instead of two Python reads per parameter
        plan = _pack_plans.get(id(info))
        if plan is None:
            plan = _pack_plans[id(info)] = launchq.ffi.new("uint32_t[]", [x for p in info.params
                                                                           for x in (p.offset, p.size)])
            weakref.finalize(info, _pack_plans.pop, id(info), None)
        missing = q.zq_pack(launchq.ffi.from_buffer(buf), kernel_params, plan, len(info.params))
        if missing:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{f.name}: kernelParams[{missing - 1}] is NULL")
        return bytes(buf)
    for i, p in enumerate(info.params):
        ptr = cmem.read_ptr(kernel_params + 8 * i, "kernelParams")
        if not ptr:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{f.name}: kernelParams[{i}] is NULL")
        buf[p.offset:p.offset + p.size] = cmem.read_bytes(ptr, p.size)
    return bytes(buf)


def pack_extra(f: Function, extra: int) -> bytes:
    """The parameter buffer from CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END pairs."""
    pointer = size = None
    for i in range(0, 64, 2):
        key = cmem.read_u64(extra + 8 * i, "extra")
        if key == CU_LAUNCH_PARAM_END:
            break
        value = cmem.read_u64(extra + 8 * (i + 1), "extra")
        if key == CU_LAUNCH_PARAM_BUFFER_POINTER:
            pointer = value
        elif key == CU_LAUNCH_PARAM_BUFFER_SIZE:
            if not value:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, "CU_LAUNCH_PARAM_BUFFER_SIZE points to NULL")
            size = cmem.read_u64(value, "buffer size")
        else:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown key {key:#x} in extra")
    else:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "extra is not terminated by CU_LAUNCH_PARAM_END")
    need = f.info.param_size
    if pointer is None or size is None:
        if need == 0 and pointer is None and size is None:
            return b""
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "extra needs both BUFFER_POINTER and BUFFER_SIZE")
    align = max((p.align for p in f.info.params), default=1)
    padded = (need + align - 1) // align * align
    if size > padded:
        # NVIDIA's answer (tests/data/nvidia_error_answers.json), not INVALID_VALUE
        raise CudaError(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                        f"{f.name}: extra's parameter buffer is {size} bytes, the kernel takes {need}")
    if need and not pointer:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "CU_LAUNCH_PARAM_BUFFER_POINTER is NULL")
    if size < need:     # NVIDIA launches with what it was given; the parameters past it read as zero
        return cmem.read_bytes(pointer, size) + bytes(need - size) if size else bytes(need)
    return cmem.read_bytes(pointer, need) if need else b""


def check_configuration(f: Function, grid: tuple, block: tuple, shared: int, shape_error=CUDA_ERROR_INVALID_VALUE):
    """Raise CUDA's error for an impossible launch; `shape_error` is the code for a bad grid/block shape."""
    gmax, bmax, max_threads, max_shared = f.launch_limits()
    gx, gy, gz = grid
    bx, by, bz = block
    if (0 < gx <= gmax[0] and 0 < gy <= gmax[1] and 0 < gz <= gmax[2] and 0 < bx <= bmax[0] and 0 < by <= bmax[1]
            and 0 < bz <= bmax[2] and bx * by * bz <= max_threads and 0 <= shared <= max_shared):
        return
    if min(grid) <= 0 or min(block) <= 0:
        raise CudaError(shape_error, f"{f.name}: zero grid {grid} or block {block} dimension")
    for axis in range(3):
        if grid[axis] > gmax[axis]:
            raise CudaError(shape_error, f"{f.name}: grid dimension {'xyz'[axis]}={grid[axis]} > {gmax[axis]}")
        if block[axis] > bmax[axis]:
            raise CudaError(shape_error, f"{f.name}: block dimension {'xyz'[axis]}={block[axis]} > {bmax[axis]}")
    if bx * by * bz > max_threads:
        raise CudaError(shape_error, f"{f.name}: {bx * by * bz} threads per block > {max_threads}")
    exact = f.dynamic_shared_limit()
    if 0 <= shared <= exact:
        return
    raise CudaError(CUDA_ERROR_INVALID_VALUE,
                    f"{f.name}: {shared} bytes of dynamic shared memory > {exact} "
                    f"(static {f.static_shared()})")


# Thread-block clusters (sm_90): what NVIDIA's driver answers (an H100, tests/data/nvidia_cluster_answers.json)
PORTABLE_CLUSTER_SIZE = 8
MAX_CLUSTER_SIZE = 16


def cluster_limit(f, portable=0) -> int:
    """The most CTAs a cluster of `f` may have under CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE `portable`:
    the default follows CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1 requires a portable size, 2 allows
    a non-portable one."""
    if portable == 1:
        return PORTABLE_CLUSTER_SIZE
    return MAX_CLUSTER_SIZE if portable == 2 or f.settable.get(14) else PORTABLE_CLUSTER_SIZE


def cluster_shape(f, grid, cluster, portable=0):
    """(dims, explicit) of a launch of `f` with the launch attribute's cluster dims (None: no attribute), or
    CUDA_ERROR_INVALID_CLUSTER_SIZE as NVIDIA's driver answers: a zero dimension, a grid that is no multiple
    of the cluster, more than 8 CTAs (16 with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED or the
    launch's portable-cluster-size mode allowing it: cluster_limit), or dims other than the kernel's
    .reqnctapercluster (__cluster_dims__), which a launch without the attribute gets."""
    required, explicit_directive = f.cluster_requirement()
    if cluster is None:
        if required is None:
            return (1, 1, 1), explicit_directive
        cluster = required
    elif required is not None and tuple(cluster) != required:
        raise CudaError(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                        f"{f.name}: cluster {tuple(cluster)} differs from its .reqnctapercluster {required}")
    cluster = tuple(int(c) for c in cluster)
    if any(c == 0 for c in cluster):
        raise CudaError(CUDA_ERROR_INVALID_CLUSTER_SIZE, f"cluster dimension {cluster} has a zero")
    if any(g % c for g, c in zip(grid, cluster)):
        raise CudaError(CUDA_ERROR_INVALID_CLUSTER_SIZE, f"grid {tuple(grid)} is not a multiple of cluster {cluster}")
    size = cluster[0] * cluster[1] * cluster[2]
    most = cluster_limit(f, portable)
    if size > most:
        raise CudaError(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                        f"{f.name}: cluster {cluster} of {size} CTAs > {most}"
                        + ("" if most == MAX_CLUSTER_SIZE else " (more needs CU_FUNC_ATTRIBUTE_NON_PORTABLE_"
                                                               "CLUSTER_SIZE_ALLOWED)"))
    return cluster, True


def launch_flags(f, grid, block, shared, cooperative, shape) -> int:
    """The backend's flags for a launch of `f` in clusters of `shape` (cluster_shape's answer), after a cooperative
    launch's checks: more blocks than can be co-resident (COOPERATIVE_LAUNCH_TOO_LARGE). Stream launches and graph
    kernel nodes both answer these."""
    dims, explicit = shape
    if cooperative:
        attrs = device_props(f.device).attributes
        from zluda_py.driver.occupancy import max_active_blocks
        most = max_active_blocks(f, block[0] * block[1] * block[2], shared) * attrs.get(_MULTIPROCESSOR_COUNT, 1)
        blocks = grid[0] * grid[1] * grid[2]
        if blocks > most:
            raise CudaError(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                            f"{f.name}: cooperative grid of {blocks} blocks > {most} co-resident blocks")
    flags = int(bool(cooperative))
    if explicit:
        from ptx.runtime import cluster_flags
        flags |= cluster_flags(dims)
    return flags


def launch_attributes(cluster, cooperative, portable=0) -> dict:
    """The CUlaunchAttributeValue (64 bytes) of each launch attribute that changes a launch, by
    CUlaunchAttributeID: what a captured launch's kernel node holds."""
    attrs = {}
    if cooperative:
        attrs[ATTR_COOPERATIVE] = struct.pack("<i", 1).ljust(ATTRIBUTE_VALUE_SIZE, b"\0")
    if cluster is not None:
        attrs[ATTR_CLUSTER_DIMENSION] = struct.pack("<3I", *cluster).ljust(ATTRIBUTE_VALUE_SIZE, b"\0")
    if portable:
        attrs[ATTR_PORTABLE_CLUSTER_SIZE_MODE] = struct.pack("<i", portable).ljust(ATTRIBUTE_VALUE_SIZE, b"\0")
    return attrs


def launch(hfunc, grid, block, shared, hstream, kernel_params, extra, per_thread=False, cooperative=False,
           packed=None, cluster=None, portable=0, attrs=None):
    """Every launch's checks and enqueue; `packed` is a parameter buffer the caller built (the legacy API);
    `cluster` the CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION of cuLaunchKernelEx (None: none given), `attrs` all its
    attributes (LaunchConfig.attrs), the hints among them kept only by a captured launch's node."""
    init.require_init()
    ctx = ctxmod.current_context()      # first: a released or poisoned context answers before the handle
    f = get_function(hfunc)
    if f.module.ctx is not ctx and f.module.library is None:
        if f.module.ctx.destroyed or f.module.ctx.device != ctx.device:
            raise CudaError(CUDA_ERROR_INVALID_CONTEXT, f"{f.name} was loaded in another context")
    grid, block = tuple(grid), tuple(block)
    expect = getattr(f.backend_fn, "expect_block", None)
    if expect is not None:
        expect(block)       # a lazy kernel's first launch compiles it for its block (ptx.host_lazy.SPECIALIZE)
    # A bad shape is CUDA_ERROR_INVALID_VALUE for every caller: on an H200 with CUDA 13.0, cudart programs
    # see cudaErrorInvalidValue for oversized, zero and out-of-range blocks and grids (samples/error_paths).
    check_configuration(f, grid, block, shared, CUDA_ERROR_INVALID_VALUE)
    dims, explicit = cluster_shape(f, grid, cluster, portable)
    if kernel_params and extra:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "both kernelParams and extra are given")
    if packed is not None:
        params = packed
    else:
        params = pack_extra(f, extra) if extra else pack_kernel_params(f, kernel_params)
    flags = launch_flags(f, grid, block, shared, cooperative, (dims, explicit))
    s = streammod.resolve_stream(hstream, per_thread)
    if s.capture is not None:
        # A captured launch becomes a kernel node as cuGraphAddKernelNode makes one, its cluster dimension and
        # cooperative launch as the node's attributes: cuGraphKernelNode{Get,Set}{Params,Attribute} see it.
        s.capture.kernel(dict(function=f, grid=grid, block=block, shared=shared, args=params,
                              attrs={**(attrs or {}), **launch_attributes(cluster, cooperative, portable)}))
    else:
        s.launch(f.backend_fn, grid, block, shared, params, flags)
    if fastpath.ON and not (cooperative or explicit or extra or packed is not None):
        fastpath.launched(hfunc, ctx, f)        # the C fast path may make the next such launch


@export("cuLaunchKernel")
def launch_kernel(f, gx, gy, gz, bx, by, bz, shared, hstream, kernel_params, extra):
    launch(f, (gx, gy, gz), (bx, by, bz), shared, hstream, kernel_params, extra)


@export("cuLaunchKernel_ptsz")
def launch_kernel_ptsz(f, gx, gy, gz, bx, by, bz, shared, hstream, kernel_params, extra):
    launch(f, (gx, gy, gz), (bx, by, bz), shared, hstream, kernel_params, extra, per_thread=True)


@export("cuLaunchCooperativeKernel")
def launch_cooperative_kernel(f, gx, gy, gz, bx, by, bz, shared, hstream, kernel_params):
    launch(f, (gx, gy, gz), (bx, by, bz), shared, hstream, kernel_params, 0, cooperative=True)


@export("cuLaunchCooperativeKernel_ptsz")
def launch_cooperative_kernel_ptsz(f, gx, gy, gz, bx, by, bz, shared, hstream, kernel_params):
    launch(f, (gx, gy, gz), (bx, by, bz), shared, hstream, kernel_params, 0, per_thread=True, cooperative=True)


class LaunchConfig(NamedTuple):
    """A CUlaunchConfig read: attrs every attribute's 64-byte value by id (the last of an id wins), which a
    captured launch's kernel node keeps; cooperative, cluster and portable the ones that change the launch."""
    grid: tuple
    block: tuple
    shared: int
    stream: int
    attrs: dict

    @property
    def cooperative(self) -> bool:
        return decode_attributes(self.attrs)[0]

    @property
    def cluster(self):
        """None without a CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (the kernel's own applies, if any); all zeros stays
        one (a launch refuses it)."""
        return decode_attributes(self.attrs)[1]

    @property
    def portable(self) -> int:
        """CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE, 0 without one."""
        return decode_attributes(self.attrs)[2]


def read_launch_config(config: int) -> LaunchConfig:
    if not config:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "config is NULL")
    gx, gy, gz, bx, by, bz, shared, hstream, attrs, nattrs = _LAUNCH_CONFIG.unpack(
        cmem.read_bytes(config, _LAUNCH_CONFIG.size, "config"))
    values = {}
    if nattrs and not attrs:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"config has {nattrs} attributes and attrs is NULL")
    for i in range(nattrs):
        raw = cmem.read_bytes(attrs + _ATTRIBUTE_SIZE * i, _ATTRIBUTE_SIZE, "attrs")
        attr_id = struct.unpack_from("<I", raw)[0]
        if attr_id >= ATTR_MAX:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown launch attribute {attr_id}")
        if attr_id == ATTR_PORTABLE_CLUSTER_SIZE_MODE:
            mode = struct.unpack_from("<i", raw, 8)[0]
            if mode not in (0, 1, 2):
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"portable cluster size mode {mode}")
        if attr_id:         # CU_LAUNCH_ATTRIBUTE_IGNORE: nothing
            values[attr_id] = normalised_attribute(attr_id, raw[8:8 + ATTRIBUTE_VALUE_SIZE])
    return LaunchConfig((gx, gy, gz), (bx, by, bz), shared, hstream, values)


def normalised_attribute(attr_id: int, value: bytes) -> bytes:
    """A launch attribute's value as a kernel node keeps it: a priority clamped to the device's range (an H100
    reads back 0 for a node given 3)."""
    if attr_id == ATTR_PRIORITY:
        p = min(max(struct.unpack_from("<i", value)[0], ctxmod.STREAM_PRIORITY_GREATEST), ctxmod.STREAM_PRIORITY_LEAST)
        return struct.pack("<i", p) + value[4:]
    return value


def decode_attributes(values: dict) -> tuple:
    """(cooperative, cluster dimension or None, portable cluster size mode) of launch attributes by id (their
    64-byte values): the ones that change a launch. The others (priority, access policy, sync domains,
    programmatic serialisation, ...) are scheduling hints with no effect on a launch's result here."""
    coop = values.get(ATTR_COOPERATIVE)
    cluster = values.get(ATTR_CLUSTER_DIMENSION)
    portable = values.get(ATTR_PORTABLE_CLUSTER_SIZE_MODE)
    return (coop is not None and struct.unpack_from("<i", coop)[0] != 0,
            None if cluster is None else struct.unpack_from("<3I", cluster),
            0 if portable is None else struct.unpack_from("<i", portable)[0])


def _launch_ex(config, f, kernel_params, extra, per_thread):
    c = read_launch_config(config)
    launch(f, c.grid, c.block, c.shared, c.stream, kernel_params, extra, per_thread=per_thread,
           cooperative=c.cooperative, cluster=c.cluster, portable=c.portable, attrs=c.attrs)


@export("cuLaunchKernelEx")
def launch_kernel_ex(config, f, kernel_params, extra):
    _launch_ex(config, f, kernel_params, extra, False)


@export("cuLaunchKernelEx_ptsz")
def launch_kernel_ex_ptsz(config, f, kernel_params, extra):
    _launch_ex(config, f, kernel_params, extra, True)
