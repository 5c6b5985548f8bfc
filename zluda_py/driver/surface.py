"""Surface objects: cuSurfObjectCreate/Destroy/GetResourceDesc over CUDA arrays; the handle is the address
of the same runtime descriptor a texture object uses (suld/sust address x in bytes)."""

from __future__ import annotations

import struct

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod
from zluda_py.driver.texture import RES_ARRAY, RES_DESC_BYTES, _keep, _object, drop, resource
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE


@export("cuSurfObjectCreate")
def surf_object_create(pobj, pres):
    ctxmod.current_context()
    if not pobj or not pres:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pSurfObject or pResDesc is NULL")
    kind, = struct.unpack("<I", cmem.read_bytes(pres, 4))
    if kind != RES_ARRAY:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"surface resource type {kind}: only arrays")
    # NVIDIA's H200 accepts an array made without CUDA_ARRAY3D_SURFACE_LDST (nvidia_array_errors.json)
    d = resource(pres)
    cmem.write_u64(pobj, _keep(d, cmem.read_bytes(pres, RES_DESC_BYTES)))


@export("cuSurfObjectDestroy")
def surf_object_destroy(handle):
    if handle:
        drop(handle, "surface object")


@export("cuSurfObjectGetResourceDesc")
def surf_object_get_resource_desc(pres, handle):
    if not pres:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pResDesc is NULL")
    cmem.write_bytes(pres, _object(handle, "surface object")[1])
