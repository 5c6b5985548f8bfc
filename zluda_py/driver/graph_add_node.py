"""cuGraphAddNode: a node of any kind from one CUgraphNodeParams (a type and a union of each kind's
parameters), built as the kind's own cuGraphAdd*Node would build it."""

from __future__ import annotations

from zluda_py import cmem, handles
from zluda_py.dispatch import export
from zluda_py.driver import graph as graphmod
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED

_UNION = 16                  # CUgraphNodeParams: type, reserved0[3], then the union
_MEMCPY3D = 16               # CUDA_MEMCPY_NODE_PARAMS: flags, reserved, copyCtx, then the CUDA_MEMCPY3D
_CHILD_MOVE = 1              # CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE
_NAMES = {8: "external semaphore signal", 9: "external semaphore wait", 12: "batch memory operation"}


def _node(g, deps, params: int):
    from zluda_py.driver import graph_cond
    G = graphmod
    kind = cmem.read_u32(params, "nodeParams.type")
    u = params + _UNION
    if kind == G.KERNEL:
        p = G._read_kernel_params(u)
        G._kernels().check_kernel_node(p)
        return G.Node(G.KERNEL, G._replay_kernel, **p)
    if kind == G.MEMCPY:
        return G.Node(G.MEMCPY, G._replay_memcpy, **G._read_memcpy(u + _MEMCPY3D))
    if kind == G.MEMSET:
        return G.Node(G.MEMSET, G._replay_memset, **G._read_memset(u))
    if kind == G.HOST:
        return G.Node(G.HOST, G._replay_host, **G._read_host(u))
    if kind == G.GRAPH:
        child = G.graph_from_handle(cmem.read_u64(u, "graph.graph"))
        moved = cmem.read_u32(u + 8, "graph.ownership") == _CHILD_MOVE
        return G.Node(G.GRAPH, G._replay_child, graph=child if moved else child.clone()[0])
    if kind == G.EMPTY:
        return G.Node(G.EMPTY)
    if kind == G.WAIT_EVENT:
        return G.Node(G.WAIT_EVENT, G._replay_event_wait, event=G._event(cmem.read_u64(u, "eventWait.event")))
    if kind == G.EVENT_RECORD:
        return G.Node(G.EVENT_RECORD, G._replay_event_record, event=G._event(cmem.read_u64(u, "eventRecord.event")))
    if kind in (G.MEM_ALLOC, G.MEM_FREE):
        from zluda_py.driver import graph_mem       # added here, like a conditional node
        return graph_mem.add_node(g, deps, kind, u)
    if kind == graph_cond.CONDITIONAL:
        return graph_cond.add_conditional_node(g, deps, u)      # added here: it writes the body graphs out
    if kind in _NAMES:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"cuGraphAddNode of a {_NAMES[kind]} node")
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown graph node type {kind}")


def _add_node(ph, hgraph, deps_ptr, ndeps, params):
    g = graphmod.graph_from_handle(hgraph)
    if not ph:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phGraphNode is NULL")
    if not params:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "nodeParams is NULL")
    deps = graphmod.read_nodes(deps_ptr, ndeps)
    node = _node(g, deps, params)
    if node.graph is None:
        try:
            g.add(node, deps)
        except CudaError:
            handles.remove(node.handle)
            raise
    cmem.write_ptr(ph, node.handle)


export("cuGraphAddNode")(_add_node)
export("cuGraphAddNode_v2")(lambda ph, g, deps, data, n, params: _add_node(ph, g, deps, n, params))
# CUDA 13.4's version: the same arguments, and a kernel node's context checked against its function's, which
# _node does for every version
export("cuGraphAddNode_v3")(lambda ph, g, deps, data, n, params: _add_node(ph, g, deps, n, params))
