"""Green contexts: one SM resource equal to the device, splits that partition its SM count, and green contexts
that are ordinary (non-primary) contexts underneath, so every API that takes a CUcontext takes them."""

from __future__ import annotations

import itertools
import struct

from zluda_py import cmem, handles
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, init
from zluda_py.driver.device import device_props
from zluda_py.driver.event import event_from_handle
from zluda_py.driver.stream import CU_STREAM_NON_BLOCKING, Stream, legacy_stream, resolve_stream
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE

CUDA_ERROR_INVALID_RESOURCE_TYPE = 914
CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915
CU_DEV_RESOURCE_TYPE_SM = 1
CU_GREEN_CTX_DEFAULT_STREAM = 0x1
_SPLIT_FLAGS = 0x3                   # IGNORE_SM_COSCHEDULING | MAX_POTENTIAL_CLUSTER_SIZE
MULTIPROCESSOR_COUNT = 16            # CUdevice_attribute

# CUdevResource (cuda.h, ABI version 1): u32 type, 92 bytes the driver keeps for itself, then the 48-byte
# union whose SM member is {smCount, minSmPartitionSize, smCoscheduledAlignment}. We keep in the private
# bytes a tag, the device and the split that made the resource: cuDevResourceGenerateDesc checks them.
RESOURCE_SIZE = 144
_TAG = 0x5a4c5347                     # 'GSLZ'
_PRIVATE = struct.Struct("<IiI")      # tag, device, split id (0 = the whole device)
_SM = struct.Struct("<III")
_splits = itertools.count(1)


def _write_resource(addr, dev, split, sm_count):
    raw = bytearray(RESOURCE_SIZE)
    struct.pack_into("<I", raw, 0, CU_DEV_RESOURCE_TYPE_SM)
    _PRIVATE.pack_into(raw, 4, _TAG, dev, split)
    _SM.pack_into(raw, 96, sm_count, 1, 1)   # a CPU or HIP "SM" has no clusters to keep together
    cmem.write_bytes(addr, bytes(raw), "resource")


def _read_resource(addr):
    """(device, split, sm_count) of a resource we wrote; INVALID_RESOURCE_TYPE for anything else."""
    raw = cmem.read_bytes(addr, RESOURCE_SIZE, "resource")
    (kind,) = struct.unpack_from("<I", raw, 0)
    tag, dev, split = _PRIVATE.unpack_from(raw, 4)
    if kind != CU_DEV_RESOURCE_TYPE_SM or tag != _TAG:
        raise CudaError(CUDA_ERROR_INVALID_RESOURCE_TYPE, f"resource type {kind} is not an SM resource")
    return dev, split, _SM.unpack_from(raw, 96)[0]


def _device_sms(dev):
    return int(device_props(dev).attributes.get(MULTIPROCESSOR_COUNT, 1))


def _resource_of(addr, kind, dev, sm_count):
    if not addr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "resource is NULL")
    if kind != CU_DEV_RESOURCE_TYPE_SM:
        raise CudaError(CUDA_ERROR_INVALID_RESOURCE_TYPE, f"resource type {kind} is not supported")
    _write_resource(addr, dev, 0, sm_count)


class ResourceDesc:
    def __init__(self, dev, sm_count):
        self.device, self.sm_count = dev, sm_count
        handles.new(self)


class GreenCtx:
    def __init__(self, dev, sm_count):
        self.device, self.sm_count = dev, sm_count
        self.ctx = ctxmod.Context(dev, 0, primary=False)
        self.ctx.green = self
        handles.new(self)


def _green(h) -> GreenCtx:
    """A bad green context is INVALID_CONTEXT: the only answer cuda.h lists for one."""
    init.require_init()
    if not h:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "green context is NULL")
    return handles.get(h, GreenCtx, CUDA_ERROR_INVALID_CONTEXT, "green context")


def green_of(ctx):
    """The GreenCtx a context stands for, or None (streams use it for cuStreamGetCtx_v2)."""
    return getattr(ctx, "green", None)


@export("cuDeviceGetDevResource")
def device_get_dev_resource(dev, resource, kind):
    _resource_of(resource, kind, dev, _device_sms(dev))


@export("cuCtxGetDevResource")
def ctx_get_dev_resource(h, resource, kind):
    ctx = ctxmod.context_from_handle(h)
    g = green_of(ctx)
    _resource_of(resource, kind, ctx.device, g.sm_count if g else _device_sms(ctx.device))


@export("cuGreenCtxGetDevResource")
def green_ctx_get_dev_resource(h, resource, kind):
    g = _green(h)
    _resource_of(resource, kind, g.device, g.sm_count)


@export("cuDevSmResourceSplitByCount")
def dev_sm_resource_split_by_count(result, nb_groups, resource, remaining, flags, min_count):
    init.require_init()
    if not nb_groups or not resource:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "nbGroups or input is NULL")
    if flags & ~_SPLIT_FLAGS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid split flags {flags:#x}")
    dev, split, sms = _read_resource(resource)
    if split:
        raise CudaError(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                        "a split's output cannot be split again before a green context is made of it")
    if min_count > sms:
        raise CudaError(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, f"minCount {min_count} > {sms} SMs")
    size = max(min_count, 1)
    possible = sms // size
    wanted = cmem.read_u32(nb_groups, "nbGroups")
    groups = possible if not result else min(wanted, possible)
    if result:
        sid = next(_splits)
        for i in range(groups):
            _write_resource(result + i * RESOURCE_SIZE, dev, sid, size)
        if remaining:
            _write_resource(remaining, dev, sid, sms - groups * size)
    elif remaining:
        _write_resource(remaining, dev, next(_splits), sms - groups * size)
    cmem.write_u32(nb_groups, groups, "nbGroups")


@export("cuDevResourceGenerateDesc")
def dev_resource_generate_desc(desc_out, resources, count):
    init.require_init()
    if not desc_out or not resources or count == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phDesc or resources is NULL, or nbResources is 0")
    parts = [_read_resource(resources + i * RESOURCE_SIZE) for i in range(count)]
    if len({(d, s) for d, s, _ in parts}) != 1:
        raise CudaError(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                        "the resources come from different devices or different splits")
    cmem.write_ptr(desc_out, ResourceDesc(parts[0][0], sum(n for _, _, n in parts)).handle)


@export("cuGreenCtxCreate")
def green_ctx_create(ph, desc, dev, flags):
    init.require_init()
    if not ph or not desc:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phCtx or desc is NULL")
    if flags != CU_GREEN_CTX_DEFAULT_STREAM:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "flags must be CU_GREEN_CTX_DEFAULT_STREAM")
    d = handles.get(desc, ResourceDesc, CUDA_ERROR_INVALID_VALUE, "resource descriptor")
    device_props(dev)
    if d.device != dev:
        raise CudaError(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, f"the descriptor is for device {d.device}")
    # NVIDIA's green context holds the device's primary context until it is destroyed.
    primary = ctxmod.primary_context(dev)
    with ctxmod._lock:
        primary.refcount += 1
        primary.active, primary.released = True, False
    cmem.write_ptr(ph, GreenCtx(dev, d.sm_count).handle)


@export("cuGreenCtxDestroy")
def green_ctx_destroy(h):
    g = _green(h)
    ctx = g.ctx
    ctx.teardown()
    ctx.destroyed = True
    handles.remove(ctx.handle)
    handles.remove(g.handle)
    ctxmod.primary_ctx_release(g.device)


@export("cuCtxFromGreenCtx")
def ctx_from_green_ctx(pctx, h):
    if not pctx:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pContext is NULL")
    cmem.write_ptr(pctx, _green(h).ctx.handle)


@export("cuGreenCtxStreamCreate")
def green_ctx_stream_create(ph, h, flags, priority):
    g = _green(h)
    if not ph:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phStream is NULL")
    if flags != CU_STREAM_NON_BLOCKING:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "flags must be CU_STREAM_NON_BLOCKING")
    priority = min(max(priority, ctxmod.STREAM_PRIORITY_GREATEST), ctxmod.STREAM_PRIORITY_LEAST)
    cmem.write_ptr(ph, Stream(g.ctx, flags, priority).handle)


@export("cuStreamGetGreenCtx")
def stream_get_green_ctx(hstream, ph):
    if not ph:
        init.require_init()
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phCtx is NULL")
    g = green_of(resolve_stream(hstream, check_sticky=False).ctx)
    cmem.write_ptr(ph, g.handle if g else 0)


@export("cuGreenCtxRecordEvent")
def green_ctx_record_event(h, hevent):
    g = _green(h)
    ev = event_from_handle(hevent)
    # All of the green context's work so far: waiting for it here is later than needed, never early.
    g.ctx.synchronize()
    legacy_stream(g.ctx).begin().record(ev.backend)
    ev.recorded = True


@export("cuGreenCtxWaitEvent")
def green_ctx_wait_event(h, hevent):
    _green(h)
    ev = event_from_handle(hevent)
    # Later work of the green context may start only after the event: wait before anything more is queued.
    ev.backend.synchronize()


def _stream_dev_resource(per_thread, hstream, resource, kind):
    # CUDA 13.1: the resources of the context the stream belongs to (a green context's SMs, else the device's)
    ctx = resolve_stream(hstream, per_thread, check_sticky=False).ctx
    g = green_of(ctx)
    _resource_of(resource, kind, ctx.device, g.sm_count if g else _device_sms(ctx.device))


export("cuStreamGetDevResource")(lambda *a: _stream_dev_resource(False, *a))
export("cuStreamGetDevResource_ptsz")(lambda *a: _stream_dev_resource(True, *a))
