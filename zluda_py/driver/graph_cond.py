"""Conditional graph nodes (if/else, while, switch) and their handles.

A conditional handle is the address of the 32-bit value its graph's kernels set with the device-side
cudaGraphSetConditional (the CPU runtime stores to that address, ptx/runtime/devlaunch.c). A conditional node
replays as a host task on its stream: when the stream reaches it (everything before it done, the value
final), the task reads the value and runs the chosen body graph on a stream of its own to completion, again
and again for a while node, so the launching stream's later work waits for it as for any other node."""

from __future__ import annotations

import weakref

from zluda_py import cmem, handles
from zluda_py.cmem import ffi
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, graph as graphmod
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

CONDITIONAL = 13                      # CU_GRAPH_NODE_TYPE_CONDITIONAL
COND_IF, COND_WHILE, COND_SWITCH = 0, 1, 2
CU_GRAPH_COND_ASSIGN_DEFAULT = 0x1
CU_STREAM_NON_BLOCKING = 0x1
_MAX_SWITCH = 1 << 16

_handles: "weakref.WeakValueDictionary[int, CondHandle]" = weakref.WeakValueDictionary()


class CondHandle:
    """The value behind a CUgraphConditionalHandle; kept alive by its graph and the nodes using it."""

    def __init__(self, ctx, default: int, flags: int):
        self.ctx = ctx
        self.default = default
        self.flags = flags
        self.cell = ffi.new("uint32_t[2]", [default, 0])
        self.address = int(ffi.cast("uintptr_t", self.cell))
        _handles[self.address] = self

    def value(self) -> int:
        return self.cell[0]


def handle_from_value(value: int) -> CondHandle:
    h = _handles.get(value)
    if h is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{value:#x} is not a conditional handle")
    return h


@export("cuGraphConditionalHandleCreate")
def graph_conditional_handle_create(out, hgraph, hctx, default, flags):
    g = graphmod.graph_from_handle(hgraph)
    if not out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pHandle_out is NULL")
    if flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"invalid conditional handle flags {flags:#x}")
    ctx = ctxmod.context_from_handle(hctx) if hctx else ctxmod.current_context()
    h = CondHandle(ctx, default, flags)
    g.__dict__.setdefault("conditional_handles", []).append(h)
    cmem.write_u64(out, h.address, "pHandle_out")


class ConditionalNode(graphmod.Node):
    """params: handle (CondHandle), type, bodies (Graphs), out (the CUgraph array handed to the caller)."""

    def __init__(self, handle: CondHandle, cond_type: int, bodies: list, out=None):
        super().__init__(CONDITIONAL, _replay, handle=handle, type=cond_type, bodies=bodies, out=out)

    def clone(self) -> "ConditionalNode":
        # an executable owns copies of the bodies (later changes to the graph do not reach it), which no
        # caller can name: they hold no handles
        p = self.params
        bodies = [b.clone()[0] for b in p["bodies"]]
        for b in bodies:
            handles.remove(b.handle)
            for n in b.nodes:
                handles.remove(n.handle)
        return ConditionalNode(p["handle"], p["type"], bodies)


def add_conditional_node(g, deps, raw_params_addr: int) -> ConditionalNode:
    """cuGraphAddNode's CUDA_CONDITIONAL_NODE_PARAMS at `raw_params_addr`: the node, whose empty body graphs
    are written to the caller's phGraph_out field."""
    value = cmem.read_u64(raw_params_addr, "conditional.handle")
    cond_type = cmem.read_u32(raw_params_addr + 8, "conditional.type")
    size = cmem.read_u32(raw_params_addr + 12, "conditional.size")
    handle = handle_from_value(value)
    if cond_type == COND_IF:
        ok = size in (1, 2)
    elif cond_type == COND_WHILE:
        ok = size == 1
    elif cond_type == COND_SWITCH:
        ok = 0 < size <= _MAX_SWITCH
    else:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown conditional node type {cond_type}")
    if not ok:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"size {size} for a conditional node of type {cond_type}")
    bodies = [graphmod.Graph() for _ in range(size)]
    out = ffi.new("uint64_t[]", [b.handle for b in bodies])     # CUDA-owned: lives as long as the node
    node = ConditionalNode(handle, cond_type, bodies, out)
    try:
        g.add(node, deps)
    except CudaError:
        handles.remove(node.handle)
        for b in bodies:
            b.destroy()
        raise
    cmem.write_u64(raw_params_addr + 16, int(ffi.cast("uintptr_t", out)), "conditional.phGraph_out")
    return node


def _body(p, value: int):
    bodies, t = p["bodies"], p["type"]
    if t == COND_SWITCH:
        return bodies[value] if value < len(bodies) else None
    if value:
        return bodies[0]
    return bodies[1] if t == COND_IF and len(bodies) > 1 else None


def _run(p, ctx) -> None:
    """The node's work, on a pool thread once its stream got there (see the module's docstring)."""
    from zluda_py.driver.stream import Stream
    if ctx.sticky_error or ctx.destroyed:
        return
    stack = ctxmod._stack()
    stack.append(ctx)       # body memcpy/memset nodes resolve their stream through the current context
    side = None
    try:
        while True:
            body = _body(p, p["handle"].value())
            if body is None:
                return
            if side is None:
                side = Stream(ctx, CU_STREAM_NON_BLOCKING)
            for node in body.order():
                node.replay(side)
            side.synchronize()
            if p["type"] != COND_WHILE:
                return
    finally:
        if side is not None:
            side.destroy()
        stack.pop()


def _replay(stream, p) -> None:
    ctx = stream.ctx
    stream.begin().host_func(lambda: _run(p, ctx))


def assign_defaults(steps, stream) -> None:
    """At the start of each launch of an executable: CU_GRAPH_COND_ASSIGN_DEFAULT handles of its
    conditional nodes (at any depth) take their default value, in stream order."""
    seen = set()
    todo = [n for n in steps if n.kind == CONDITIONAL]
    while todo:
        n = todo.pop()
        h = n.params["handle"]
        if h.flags & CU_GRAPH_COND_ASSIGN_DEFAULT and h not in seen:
            seen.add(h)
            stream.begin().write_value(h.address, h.default, 4)
        for b in n.params["bodies"]:
            todo.extend(m for m in b.nodes if m.kind == CONDITIONAL)
