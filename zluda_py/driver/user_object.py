"""User objects: reference-counted host resources (a pointer and its destructor) that graphs keep alive;
the destructor runs when the last reference is released."""

from __future__ import annotations

import threading

from zluda_py import cmem, handles, log
from zluda_py.cmem import ffi
from zluda_py.dispatch import export
from zluda_py.driver import init
from zluda_py.driver.graph import graph_from_handle
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

CU_USER_OBJECT_NO_DESTRUCTOR_SYNC = 0x1
CU_GRAPH_USER_OBJECT_MOVE = 0x1

_lock = threading.Lock()


class UserObject:
    def __init__(self, ptr: int, destroy: int, refs: int):
        self.ptr = ptr
        self.destroy_fn = destroy
        self.refs = refs
        handles.new(self)

    def retain(self, count: int) -> None:
        with _lock:
            self.refs += count

    def release(self, count: int) -> None:
        with _lock:
            if count > self.refs:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"releasing {count} references of {self.refs}")
            self.refs -= count
            last = self.refs == 0
        if last:
            handles.remove(self.handle)
            self._destroy()

    def _destroy(self) -> None:
        try:
            ffi.cast("void(*)(void *)", self.destroy_fn)(ffi.cast("void *", self.ptr))
        except Exception as e:  # noqa: BLE001 - a foreign destructor must not take the driver down
            log.error(f"user object destructor failed: {e}")


def _object(h) -> UserObject:
    init.require_init()
    return handles.get(h, UserObject, CUDA_ERROR_INVALID_VALUE, "user object")


def _count(count) -> int:
    if count == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "count is 0")
    return count


@export("cuUserObjectCreate")
def user_object_create(out, ptr, destroy, initial_refs, flags):
    init.require_init()
    if not out or not destroy:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "object_out or destroy is NULL")
    if flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "flags must be CU_USER_OBJECT_NO_DESTRUCTOR_SYNC")
    cmem.write_ptr(out, UserObject(ptr, destroy, _count(initial_refs)).handle)


@export("cuUserObjectRetain")
def user_object_retain(h, count):
    _object(h).retain(_count(count))


@export("cuUserObjectRelease")
def user_object_release(h, count):
    _object(h).release(_count(count))


@export("cuGraphRetainUserObject")
def graph_retain_user_object(hgraph, h, count, flags):
    g, obj = graph_from_handle(hgraph), _object(h)
    if flags & ~CU_GRAPH_USER_OBJECT_MOVE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid flags {flags:#x}")
    if not flags & CU_GRAPH_USER_OBJECT_MOVE:
        obj.retain(_count(count))
    g.user_objects[obj] = g.user_objects.get(obj, 0) + _count(count)


@export("cuGraphReleaseUserObject")
def graph_release_user_object(hgraph, h, count):
    g, obj = graph_from_handle(hgraph), _object(h)
    held = g.user_objects.get(obj, 0)
    if _count(count) > held:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"the graph holds {held} references, not {count}")
    if held == count:
        del g.user_objects[obj]
    else:
        g.user_objects[obj] = held - count
    obj.release(count)
