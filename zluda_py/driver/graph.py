"""CUDA graphs: nodes with dependencies built by hand (cuGraphAdd*Node) or by stream capture, instantiated into
executables that cuGraphLaunch replays on a stream, in a topological order of the nodes (one legal schedule).

A node replays by issuing its work on a driver Stream (stream.begin() and the driver's own memcpy/memset
paths), so a graph launched into a capturing stream is itself recorded, as CUDA does."""

from __future__ import annotations

import struct
import threading

from zluda_py import cmem, handles
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, init
from zluda_py.driver.stream import resolve_stream
from zluda_py.errors import (CudaError, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, CUDA_ERROR_INVALID_VALUE,
                             CUDA_ERROR_NOT_SUPPORTED)

# CUgraphNodeType
KERNEL, MEMCPY, MEMSET, HOST, GRAPH, EMPTY, WAIT_EVENT, EVENT_RECORD = range(8)
MEM_ALLOC, MEM_FREE, BATCH_MEM_OP = 10, 11, 12

_KERNEL_PARAMS = struct.Struct("<Q7I4xQQQQ")     # CUDA_KERNEL_NODE_PARAMS(_v2): func, grid, block, shared, ...
_KERNEL_PARAMS_V1 = 56                          # the v1 struct ends after `extra`
_MEMSET_PARAMS = struct.Struct("<QQIIQQ")       # dst, pitch, value, elementSize, width, height
_HOST_PARAMS = struct.Struct("<QQ")             # fn, userData
MEMCPY3D_SIZE = 200

_lock = threading.RLock()


class Node:
    """One unit of work in a graph. `replay(stream)` issues it on a driver Stream."""

    def __init__(self, kind: int, replay=None, **params):
        self.kind = kind
        self._replay = replay
        self.params = params
        self.deps: list = []          # nodes this one waits for
        self.graph = None
        handles.new(self)

    def replay(self, stream) -> None:
        if self._replay is not None:
            self._replay(stream, self.params)

    def clone(self) -> "Node":
        n = Node(self.kind, self._replay, **self.params)
        return n


class Graph:
    def __init__(self, flags: int = 0):
        self.flags = flags
        self.nodes: list = []
        self.user_objects: dict = {}   # UserObject -> references held by this graph
        self.capturing = None          # the Capture writing into this graph, if any
        handles.new(self)

    def add(self, node: Node, deps=()) -> Node:
        for d in deps:
            if d.graph is not self:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, "a dependency belongs to another graph")
        node.deps = list(dict.fromkeys(deps))
        node.graph = self
        self.nodes.append(node)
        return node

    def order(self) -> list:
        """The nodes in a topological order (dependencies first); INVALID_VALUE on a cycle."""
        done, seen, out = set(), set(), []
        for root in self.nodes:
            if root in done:
                continue
            stack = [(root, iter(root.deps))]
            seen.add(root)
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    done.add(node)
                    out.append(node)
                elif nxt not in done:
                    if nxt in seen:
                        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the graph has a cycle")
                    seen.add(nxt)
                    stack.append((nxt, iter(nxt.deps)))
        return out

    def clone(self) -> tuple:
        """(copy, {original node: copied node})."""
        g = Graph(self.flags)
        mapping = {}
        for n in self.nodes:
            c = n.clone()
            if n.kind == GRAPH:
                c.params = dict(n.params, graph=n.params["graph"].clone()[0])
            mapping[n] = c
        for n in self.nodes:
            g.add(mapping[n], [mapping[d] for d in n.deps])
        for obj, count in self.user_objects.items():
            obj.retain(count)
            g.user_objects[obj] = count
        return g, mapping

    def destroy(self) -> None:
        for n in self.nodes:
            handles.remove(n.handle)
        self.nodes = []
        handles.remove(self.handle)
        objs, self.user_objects = self.user_objects, {}
        for obj, count in objs.items():
            obj.release(count)


class GraphExec:
    """An instantiated graph: a frozen copy of the graph's nodes in launch order."""

    def __init__(self, graph: Graph, flags: int = 0):
        self.flags = flags
        self.ctx = ctxmod.current_context()
        self.graph, self.mapping = graph.clone()     # original node -> the executable's copy
        try:
            self.steps = self.graph.order()
            _kernels().prepare(self.graph)           # each kernel node's launch, checked as a stream launch's
        except CudaError as e:
            if getattr(e, "node", None) is not None:     # the copy that failed -> the caller's node
                e.node = next((orig for orig, copy in self.mapping.items() if copy is e.node), None)
            self.graph.destroy()
            raise
        self.disabled: set = set()
        handles.new(self)

    def launch(self, stream) -> None:
        if any(n.kind == 13 for n in self.steps):      # CU_GRAPH_NODE_TYPE_CONDITIONAL
            from zluda_py.driver import graph_cond
            graph_cond.assign_defaults(self.steps, stream)
        for node in self.steps:
            if node not in self.disabled:
                node.replay(stream)

    def node(self, original_handle: int) -> Node:
        original = node_from_handle(original_handle)
        copy = self.mapping.get(original)
        if copy is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "the node is not part of the graph this was instantiated from")
        return copy

    def destroy(self) -> None:
        handles.remove(self.handle)
        self.graph.destroy()


def graph_from_handle(h: int) -> Graph:
    init.require_init()
    return handles.get(h, Graph, CUDA_ERROR_INVALID_VALUE, "graph")


def node_from_handle(h: int) -> Node:
    init.require_init()
    return handles.get(h, Node, CUDA_ERROR_INVALID_VALUE, "graph node")


def exec_from_handle(h: int) -> GraphExec:
    init.require_init()
    return handles.get(h, GraphExec, CUDA_ERROR_INVALID_VALUE, "graph exec")


def read_nodes(ptr: int, count: int, what: str = "dependencies") -> list:
    if count and not ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} is NULL with a count of {count}")
    return [node_from_handle(cmem.read_u64(ptr + 8 * i, what)) for i in range(count)]


def _write_nodes(nodes, out, count_ptr, what):
    if not count_ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} count pointer is NULL")
    if out:
        room = cmem.read_u64(count_ptr)
        for i, n in enumerate(nodes[:room]):
            cmem.write_u64(out + 8 * i, n.handle)
        cmem.write_u64(count_ptr, min(room, len(nodes)))
    else:
        cmem.write_u64(count_ptr, len(nodes))


# --- node kinds: how each one replays -------------------------------------------------------------------
def _replay_kernel(stream, p):
    if stream.capture is not None:
        # a graph launched into a capturing stream: its kernel nodes are recorded as kernel nodes, with their
        # attributes (the launch flags are fixed when that graph is instantiated)
        stream.capture.kernel({k: v for k, v in p.items() if k != "flags"})
        return
    flags = p.get("flags")
    if flags is None:       # every executable's kernel node has its flags (graph_kernel.prepare): a safety net
        flags = _kernels().launch_flags(p)
    stream.launch(p["function"].backend_fn, p["grid"], p["block"], p["shared"], p["args"], flags)


def _replay_backend_op(stream, p):
    """Work recorded from a capturing stream: one BackendStream method call."""
    getattr(stream.begin(), p["op"])(*p["args"])


def _replay_memcpy(stream, p):
    from zluda_py.driver import memcpy
    memcpy._copy_3d(stream.kind == "per_thread", p["buffer_addr"], stream.handle, False)


def _replay_memset(stream, p):
    from zluda_py.driver import memcpy
    memcpy._memset(stream.kind == "per_thread", p["dst"], p["value"], p["elem_size"], p["width"], p["pitch"],
                   p["height"], stream.handle, False)


def _replay_host(stream, p):
    from zluda_py.driver.stream import _launch_host_func
    _launch_host_func(stream, p["fn"], p["user_data"])


def _replay_child(stream, p):
    for node in p["graph"].order():
        node.replay(stream)


def _replay_event_record(stream, p):
    stream.begin().record(p["event"].backend)
    p["event"].recorded = True


def _replay_event_wait(stream, p):
    stream.begin().wait(p["event"].backend)


def kernel_node(function, grid, block, shared, args: bytes, attrs=None) -> Node:
    """A kernel node; `attrs` its launch attributes (graph_kernel.py: CUlaunchAttributeID -> 64-byte value)."""
    return Node(KERNEL, _replay_kernel, function=function, grid=tuple(grid), block=tuple(block), shared=shared,
                args=bytes(args), attrs=dict(attrs or {}))


def backend_op_node(kind: int, op: str, args: tuple) -> Node:
    return Node(kind, _replay_backend_op, op=op, args=args)


def _read_kernel_params(ptr: int, v2: bool = True) -> dict:
    from zluda_py.driver import launch as launchmod
    from zluda_py.driver.module import get_function
    if not ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "nodeParams is NULL")
    raw = cmem.read_bytes(ptr, _KERNEL_PARAMS.size if v2 else _KERNEL_PARAMS_V1, "nodeParams")
    raw = raw + b"\0" * (_KERNEL_PARAMS.size - len(raw))
    func, gx, gy, gz, bx, by, bz, shared, kparams, extra, kern, _ctx = _KERNEL_PARAMS.unpack(raw)
    f = get_function(func or kern)
    grid, block = (gx, gy, gz), (bx, by, bz)
    launchmod.check_configuration(f, grid, block, shared)
    if kparams and extra:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "both kernelParams and extra are given")
    args = launchmod.pack_extra(f, extra) if extra else launchmod.pack_kernel_params(f, kparams)
    return dict(function=f, grid=grid, block=block, shared=shared, args=args, attrs={})


def _write_kernel_params(node: Node, ptr: int) -> None:
    p = node.params
    f = p["function"]
    # kernelParams pointers would have to outlive this call: hand out the packed buffer through `extra`'s
    # storage instead is not possible either, so both are NULL, as CUDA does for captured launches.
    cmem.write_bytes(ptr, _KERNEL_PARAMS.pack(getattr(f, "handle", 0), *p["grid"], *p["block"], p["shared"], 0, 0,
                                              0, 0), "nodeParams")


def _read_memset(ptr: int) -> dict:
    if not ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "memsetParams is NULL")
    dst, pitch, value, elem, width, height = _MEMSET_PARAMS.unpack(cmem.read_bytes(ptr, _MEMSET_PARAMS.size))
    if elem not in (1, 2, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memset element size {elem}")
    if height == 0 or width == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "memset of zero width or height")
    return dict(dst=dst, pitch=pitch, value=value, elem_size=elem, width=width, height=height)


def _read_memcpy(ptr: int) -> dict:
    if not ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "copyParams is NULL")
    from zluda_py.cmem import ffi
    buf = ffi.new("char[]", MEMCPY3D_SIZE)
    ffi.memmove(buf, cmem.read_bytes(ptr, MEMCPY3D_SIZE, "copyParams"), MEMCPY3D_SIZE)
    return dict(buffer=buf, buffer_addr=int(ffi.cast("uintptr_t", buf)))


def _read_host(ptr: int) -> dict:
    if not ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "nodeParams is NULL")
    fn, user_data = _HOST_PARAMS.unpack(cmem.read_bytes(ptr, _HOST_PARAMS.size))
    if not fn:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "host node fn is NULL")
    return dict(fn=fn, user_data=user_data)


def _event(h):
    from zluda_py.driver.event import event_from_handle
    return event_from_handle(h)


def _mem():
    """Graph memory nodes (graph_mem.py imports this module): their rules at the points they apply."""
    from zluda_py.driver import graph_mem
    return graph_mem


def _kernels():
    """Kernel nodes' launch attributes and launch checks (graph_kernel.py imports this module)."""
    from zluda_py.driver import graph_kernel
    return graph_kernel


# --- graphs ---------------------------------------------------------------------------------------------
@export("cuGraphCreate")
def graph_create(ph, flags):
    init.require_init()
    if not ph:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phGraph is NULL")
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags must be 0, got {flags:#x}")
    cmem.write_ptr(ph, Graph().handle)


@export("cuGraphDestroy")
def graph_destroy(h):
    g = graph_from_handle(h)
    _mem().on_graph_destroy(g)
    g.destroy()


@export("cuGraphClone")
def graph_clone(ph, h):
    g = graph_from_handle(h)
    if not ph:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phGraphClone is NULL")
    _mem().forbid(g, "cloned")
    copy, mapping = g.clone()
    copy.origin = mapping
    cmem.write_ptr(ph, copy.handle)


@export("cuGraphNodeFindInClone")
def graph_node_find_in_clone(ph, hnode, hclone):
    original, clone = node_from_handle(hnode), graph_from_handle(hclone)
    found = getattr(clone, "origin", {}).get(original)
    if found is None or found.graph is not clone:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the node has no copy in that graph")
    cmem.write_ptr(ph, found.handle, "phNode")


def _add(ph, hgraph, deps_ptr, ndeps, node: Node):
    g = graph_from_handle(hgraph)
    if not ph:
        handles.remove(node.handle)
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phGraphNode is NULL")
    try:
        deps = read_nodes(deps_ptr, ndeps)
        g.add(node, deps)
    except CudaError:
        handles.remove(node.handle)
        raise
    cmem.write_ptr(ph, node.handle)


@export("cuGraphAddKernelNode", "cuGraphAddKernelNode_v2")
def graph_add_kernel_node(ph, hgraph, deps, ndeps, params):
    graph_from_handle(hgraph)
    p = _read_kernel_params(params)
    _kernels().check_kernel_node(p)
    _add(ph, hgraph, deps, ndeps, Node(KERNEL, _replay_kernel, **p))


@export("cuGraphAddMemcpyNode")
def graph_add_memcpy_node(ph, hgraph, deps, ndeps, copy_params, ctx):
    graph_from_handle(hgraph)
    _add(ph, hgraph, deps, ndeps, Node(MEMCPY, _replay_memcpy, **_read_memcpy(copy_params)))


@export("cuGraphAddMemsetNode")
def graph_add_memset_node(ph, hgraph, deps, ndeps, memset_params, ctx):
    graph_from_handle(hgraph)
    _add(ph, hgraph, deps, ndeps, Node(MEMSET, _replay_memset, **_read_memset(memset_params)))


@export("cuGraphAddHostNode")
def graph_add_host_node(ph, hgraph, deps, ndeps, params):
    graph_from_handle(hgraph)
    _add(ph, hgraph, deps, ndeps, Node(HOST, _replay_host, **_read_host(params)))


@export("cuGraphAddEmptyNode")
def graph_add_empty_node(ph, hgraph, deps, ndeps):
    graph_from_handle(hgraph)
    _add(ph, hgraph, deps, ndeps, Node(EMPTY))


@export("cuGraphAddChildGraphNode")
def graph_add_child_graph_node(ph, hgraph, deps, ndeps, child):
    graph_from_handle(hgraph)
    _mem().forbid(graph_from_handle(child), "a child graph")
    copy = graph_from_handle(child).clone()[0]
    copy.embedded = True        # no memory nodes may be added to it
    _add(ph, hgraph, deps, ndeps, Node(GRAPH, _replay_child, graph=copy))


@export("cuGraphAddEventRecordNode")
def graph_add_event_record_node(ph, hgraph, deps, ndeps, hevent):
    graph_from_handle(hgraph)
    _add(ph, hgraph, deps, ndeps, Node(EVENT_RECORD, _replay_event_record, event=_event(hevent)))


@export("cuGraphAddEventWaitNode")
def graph_add_event_wait_node(ph, hgraph, deps, ndeps, hevent):
    graph_from_handle(hgraph)
    _add(ph, hgraph, deps, ndeps, Node(WAIT_EVENT, _replay_event_wait, event=_event(hevent)))


@export("cuGraphChildGraphNodeGetGraph")
def graph_child_graph_node_get_graph(hnode, ph):
    n = node_from_handle(hnode)
    if n.kind != GRAPH:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a child graph node")
    cmem.write_ptr(ph, n.params["graph"].handle, "phGraph")


@export("cuGraphEventRecordNodeGetEvent", "cuGraphEventWaitNodeGetEvent")
def graph_event_node_get_event(hnode, out):
    n = node_from_handle(hnode)
    if n.kind not in (EVENT_RECORD, WAIT_EVENT):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not an event node")
    cmem.write_ptr(out, n.params["event"].handle, "event_out")


@export("cuGraphEventRecordNodeSetEvent", "cuGraphEventWaitNodeSetEvent")
def graph_event_node_set_event(hnode, hevent):
    n = node_from_handle(hnode)
    if n.kind not in (EVENT_RECORD, WAIT_EVENT):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not an event node")
    n.params["event"] = _event(hevent)


@export("cuGraphKernelNodeGetParams", "cuGraphKernelNodeGetParams_v2")
def graph_kernel_node_get_params(hnode, out):
    n = node_from_handle(hnode)
    if n.kind != KERNEL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a kernel node")
    if n._replay is not _replay_kernel:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "parameters of a captured kernel launch are not kept")
    _write_kernel_params(n, out)


@export("cuGraphKernelNodeSetParams", "cuGraphKernelNodeSetParams_v2")
def graph_kernel_node_set_params(hnode, params):
    n = node_from_handle(hnode)
    if n.kind != KERNEL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a kernel node")
    p = _read_kernel_params(params)
    _kernels().check_kernel_node(p)
    p["attrs"] = n.params.get("attrs", {})      # the node's attributes are not its parameters: kept
    n.params, n._replay = p, _replay_kernel


@export("cuGraphMemsetNodeGetParams")
def graph_memset_node_get_params(hnode, out):
    n = node_from_handle(hnode)
    if n.kind != MEMSET or n._replay is not _replay_memset:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memset node made by cuGraphAddMemsetNode")
    p = n.params
    cmem.write_bytes(out, _MEMSET_PARAMS.pack(p["dst"], p["pitch"], p["value"], p["elem_size"], p["width"],
                                              p["height"]), "nodeParams")


@export("cuGraphMemsetNodeSetParams")
def graph_memset_node_set_params(hnode, params):
    n = node_from_handle(hnode)
    if n.kind != MEMSET:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memset node")
    n.params, n._replay = _read_memset(params), _replay_memset


@export("cuGraphMemcpyNodeGetParams")
def graph_memcpy_node_get_params(hnode, out):
    n = node_from_handle(hnode)
    if n.kind != MEMCPY or n._replay is not _replay_memcpy:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memcpy node made by cuGraphAddMemcpyNode")
    cmem.write_bytes(out, cmem.read_bytes(n.params["buffer_addr"], MEMCPY3D_SIZE), "nodeParams")


@export("cuGraphMemcpyNodeSetParams")
def graph_memcpy_node_set_params(hnode, params):
    n = node_from_handle(hnode)
    if n.kind != MEMCPY:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memcpy node")
    n.params, n._replay = _read_memcpy(params), _replay_memcpy


@export("cuGraphHostNodeGetParams")
def graph_host_node_get_params(hnode, out):
    n = node_from_handle(hnode)
    if n.kind != HOST or n._replay is not _replay_host:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a host node made by cuGraphAddHostNode")
    cmem.write_bytes(out, _HOST_PARAMS.pack(n.params["fn"], n.params["user_data"]), "nodeParams")


@export("cuGraphHostNodeSetParams")
def graph_host_node_set_params(hnode, params):
    n = node_from_handle(hnode)
    if n.kind != HOST:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a host node")
    n.params, n._replay = _read_host(params), _replay_host


@export("cuGraphNodeGetType")
def graph_node_get_type(hnode, out):
    cmem.write_u32(out, node_from_handle(hnode).kind, "type")


@export("cuGraphGetNodes")
def graph_get_nodes(hgraph, out, count_ptr):
    _write_nodes(graph_from_handle(hgraph).nodes, out, count_ptr, "nodes")


@export("cuGraphGetRootNodes")
def graph_get_root_nodes(hgraph, out, count_ptr):
    _write_nodes([n for n in graph_from_handle(hgraph).nodes if not n.deps], out, count_ptr, "rootNodes")


def _edges(g):
    return [(d, n) for n in g.nodes for d in n.deps]


def _get_edges(hgraph, from_ptr, to_ptr, edge_data, count_ptr):
    edges = _edges(graph_from_handle(hgraph))
    if not count_ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "numEdges is NULL")
    if from_ptr or to_ptr:
        if not (from_ptr and to_ptr):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "from and to must both be given")
        room = cmem.read_u64(count_ptr)
        for i, (a, b) in enumerate(edges[:room]):
            cmem.write_u64(from_ptr + 8 * i, a.handle)
            cmem.write_u64(to_ptr + 8 * i, b.handle)
            if edge_data:
                cmem.write_u64(edge_data + 8 * i, 0)
        cmem.write_u64(count_ptr, min(room, len(edges)))
    else:
        cmem.write_u64(count_ptr, len(edges))


export("cuGraphGetEdges")(lambda g, f, t, n: _get_edges(g, f, t, 0, n))
export("cuGraphGetEdges_v2")(_get_edges)


def _dependents(n):
    return [m for m in n.graph.nodes if n in m.deps] if n.graph else []


export("cuGraphNodeGetDependencies")(
    lambda h, out, cnt: _write_nodes(node_from_handle(h).deps, out, cnt, "dependencies"))
export("cuGraphNodeGetDependencies_v2")(
    lambda h, out, data, cnt: _write_nodes(node_from_handle(h).deps, out, cnt, "dependencies"))
export("cuGraphNodeGetDependentNodes")(
    lambda h, out, cnt: _write_nodes(_dependents(node_from_handle(h)), out, cnt, "dependentNodes"))
export("cuGraphNodeGetDependentNodes_v2")(
    lambda h, out, data, cnt: _write_nodes(_dependents(node_from_handle(h)), out, cnt, "dependentNodes"))


def _change_dependencies(hgraph, from_ptr, to_ptr, count, add: bool):
    g = graph_from_handle(hgraph)
    if not add:
        _mem().forbid(g, "given fewer dependencies")
    sources, targets = read_nodes(from_ptr, count, "from"), read_nodes(to_ptr, count, "to")
    for a, b in zip(sources, targets):
        if a.graph is not g or b.graph is not g or a is b:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "edge between nodes not of this graph")
        if add:
            if a in b.deps:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, "the edge already exists")
            b.deps.append(a)
        else:
            if a not in b.deps:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, "no such edge")
            b.deps.remove(a)


export("cuGraphAddDependencies")(lambda g, f, t, n: _change_dependencies(g, f, t, n, True))
export("cuGraphAddDependencies_v2")(lambda g, f, t, d, n: _change_dependencies(g, f, t, n, True))
export("cuGraphRemoveDependencies")(lambda g, f, t, n: _change_dependencies(g, f, t, n, False))
export("cuGraphRemoveDependencies_v2")(lambda g, f, t, d, n: _change_dependencies(g, f, t, n, False))


@export("cuGraphDestroyNode")
def graph_destroy_node(hnode):
    n = node_from_handle(hnode)
    g = n.graph
    if g is not None:
        _mem().forbid(g, "given fewer nodes")
        g.nodes.remove(n)
        for m in g.nodes:
            if n in m.deps:
                m.deps.remove(n)
    handles.remove(n.handle)


@export("cuGraphDebugDotPrint")
def graph_debug_dot_print(hgraph, path, flags):
    g = graph_from_handle(hgraph)
    name = cmem.read_cstring(path, "path")
    names = {n: f"node{i}" for i, n in enumerate(g.nodes)}
    lines = ["digraph cudaGraph {"]
    lines += [f'  {names[n]} [label="type {n.kind}"];' for n in g.nodes]
    lines += [f"  {names[d]} -> {names[n]};" for n in g.nodes for d in n.deps]
    try:
        with open(name, "w") as f:
            f.write("\n".join(lines + ["}"]) + "\n")
    except OSError as e:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cannot write {name}: {e.strerror}") from None


# --- executables ----------------------------------------------------------------------------------------
def _instantiate(ph, hgraph, flags, error_node=0):
    g = graph_from_handle(hgraph)
    if not ph:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phGraphExec is NULL")
    if g.capturing is not None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the graph is being captured into")
    try:
        ex = GraphExec(g, flags)
    except CudaError as e:
        if error_node and getattr(e, "node", None) is not None:
            cmem.write_ptr(error_node, e.node.handle)      # the node whose launch is impossible
        raise
    try:
        _mem().on_instantiate(g, ex)
    except CudaError:
        ex.destroy()
        raise
    cmem.write_ptr(ph, ex.handle)


@export("cuGraphInstantiate", "cuGraphInstantiate_v2")
def graph_instantiate(ph, hgraph, error_node, log_buffer, log_size):
    if error_node:
        cmem.write_ptr(error_node, 0)
    if log_buffer and log_size:
        cmem.write_bytes(log_buffer, b"\0")
    try:
        _instantiate(ph, hgraph, 0, error_node)
    except CudaError as e:
        if log_buffer and log_size:     # the reason, where the caller looks for it
            cmem.write_bytes(log_buffer, e.message.encode(errors="replace")[:log_size - 1] + b"\0")
        raise


@export("cuGraphInstantiateWithFlags")
def graph_instantiate_with_flags(ph, hgraph, flags):
    _instantiate(ph, hgraph, flags)


_INSTANTIATE_PARAMS = struct.Struct("<QQQI4x")    # flags, hUploadStream, hErrNode_out, result_out


@export("cuGraphInstantiateWithParams")
def graph_instantiate_with_params(ph, hgraph, params):
    if not params:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "instantiateParams is NULL")
    flags, upload_stream, _err, _res = _INSTANTIATE_PARAMS.unpack(cmem.read_bytes(params, _INSTANTIATE_PARAMS.size))
    try:
        _instantiate(ph, hgraph, flags, params + 16)
    except CudaError:
        cmem.write_u32(params + 24, 1)      # CUDA_GRAPH_INSTANTIATE_ERROR: the reason is the returned code
        raise
    cmem.write_u64(params + 16, 0)
    cmem.write_u32(params + 24, 0)          # CUDA_GRAPH_INSTANTIATE_SUCCESS
    if upload_stream:
        resolve_stream(upload_stream)


@export("cuGraphExecDestroy")
def graph_exec_destroy(h):
    ex = exec_from_handle(h)
    _mem().on_exec_destroy(ex)
    ex.destroy()


@export("cuGraphExecGetFlags")
def graph_exec_get_flags(h, out):
    cmem.write_u64(out, exec_from_handle(h).flags, "flags")


@export("cuGraphLaunch")
def graph_launch(h, hstream):
    ex = exec_from_handle(h)
    s = resolve_stream(hstream)
    _mem().before_launch(ex, s)
    ex.launch(s)


@export("cuGraphLaunch_ptsz")
def graph_launch_ptsz(h, hstream):
    ex = exec_from_handle(h)
    s = resolve_stream(hstream, True)
    _mem().before_launch(ex, s)
    ex.launch(s)


@export("cuGraphUpload")
def graph_upload(h, hstream):
    exec_from_handle(h)
    resolve_stream(hstream)


@export("cuGraphUpload_ptsz")
def graph_upload_ptsz(h, hstream):
    exec_from_handle(h)
    resolve_stream(hstream, True)


@export("cuGraphExecKernelNodeSetParams", "cuGraphExecKernelNodeSetParams_v2")
def graph_exec_kernel_node_set_params(hexec, hnode, params):
    n = exec_from_handle(hexec).node(hnode)
    if n.kind != KERNEL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a kernel node")
    p = _read_kernel_params(params)
    p["attrs"] = n.params.get("attrs", {})      # new parameters, the node's attributes kept
    # the executable is built: its new launch is checked now (a bad cluster shape answers here), as its
    # instantiation checked the old one, and the executable is left as it was
    p["flags"] = _kernels().launch_flags(p)
    n.params, n._replay = p, _replay_kernel


@export("cuGraphExecMemsetNodeSetParams")
def graph_exec_memset_node_set_params(hexec, hnode, params, ctx):
    n = exec_from_handle(hexec).node(hnode)
    if n.kind != MEMSET:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memset node")
    n.params, n._replay = _read_memset(params), _replay_memset


@export("cuGraphExecMemcpyNodeSetParams")
def graph_exec_memcpy_node_set_params(hexec, hnode, params, ctx):
    n = exec_from_handle(hexec).node(hnode)
    if n.kind != MEMCPY:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memcpy node")
    n.params, n._replay = _read_memcpy(params), _replay_memcpy


@export("cuGraphExecHostNodeSetParams")
def graph_exec_host_node_set_params(hexec, hnode, params):
    n = exec_from_handle(hexec).node(hnode)
    if n.kind != HOST:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a host node")
    n.params, n._replay = _read_host(params), _replay_host


@export("cuGraphExecChildGraphNodeSetParams")
def graph_exec_child_graph_node_set_params(hexec, hnode, child):
    n = exec_from_handle(hexec).node(hnode)
    if n.kind != GRAPH:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a child graph node")
    copy = graph_from_handle(child).clone()[0]
    try:
        _kernels().prepare(copy)        # its kernel nodes checked, as the executable's instantiation did
    except CudaError:
        copy.destroy()
        raise
    n.params = dict(graph=copy)


@export("cuGraphExecEventRecordNodeSetEvent", "cuGraphExecEventWaitNodeSetEvent")
def graph_exec_event_node_set_event(hexec, hnode, hevent):
    n = exec_from_handle(hexec).node(hnode)
    if n.kind not in (EVENT_RECORD, WAIT_EVENT):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not an event node")
    n.params = dict(event=_event(hevent))


@export("cuGraphNodeSetEnabled")
def graph_node_set_enabled(hexec, hnode, enabled):
    ex = exec_from_handle(hexec)
    n = ex.node(hnode)
    if enabled:
        ex.disabled.discard(n)
    else:
        ex.disabled.add(n)


@export("cuGraphNodeGetEnabled")
def graph_node_get_enabled(hexec, hnode, out):
    ex = exec_from_handle(hexec)
    cmem.write_u32(out, 0 if ex.node(hnode) in ex.disabled else 1, "isEnabled")


_CU_GRAPH_EXEC_UPDATE_SUCCESS = 0
_CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 2


def _exec_update(hexec, hgraph):
    """Take the new graph's parameters when its topology matches; the result code CUDA reports."""
    ex, g = exec_from_handle(hexec), graph_from_handle(hgraph)
    old = ex.graph.nodes
    if len(old) != len(g.nodes) or any(a.kind != b.kind for a, b in zip(old, g.nodes)):
        return _CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED
    fresh = GraphExec(g, ex.flags)
    handles.remove(fresh.handle)
    retired = ex.graph
    ex.graph, ex.steps = fresh.graph, fresh.steps
    pos = {copy: i for i, copy in enumerate(old)}
    mapping = {orig: fresh.graph.nodes[pos[copy]] for orig, copy in ex.mapping.items()}
    mapping.update(fresh.mapping)
    ex.mapping = mapping
    retired.destroy()
    return _CU_GRAPH_EXEC_UPDATE_SUCCESS


@export("cuGraphExecUpdate")
def graph_exec_update(hexec, hgraph, error_node, result_out):
    result = _exec_update(hexec, hgraph)
    if error_node:
        cmem.write_ptr(error_node, 0)
    if result_out:
        cmem.write_u32(result_out, result)
    if result:
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE


@export("cuGraphExecUpdate_v2")
def graph_exec_update_v2(hexec, hgraph, result_info):
    result = _exec_update(hexec, hgraph)
    if result_info:
        cmem.write_bytes(result_info, struct.pack("<I4xQQ", result, 0, 0))
    if result:
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE

