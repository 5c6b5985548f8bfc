"""CUDA 13.1's graph identities: a graph's or executable's id, a node's id local to its graph, the 64-bit id
tools see, and the graph that holds a node. Ids are handed out at the first question and kept."""

from __future__ import annotations

import itertools
import threading

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver.graph import exec_from_handle, graph_from_handle, node_from_handle
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

_graph_ids = itertools.count(1)      # graphs and executables share one sequence, as ids of "a graph"
_lock = threading.Lock()


def _graph_id(obj) -> int:
    with _lock:
        gid = getattr(obj, "zl_graph_id", None)
        if gid is None:
            gid = obj.zl_graph_id = next(_graph_ids)
        return gid


def _local_id(node) -> int:
    graph = node.graph
    with _lock:
        lid = getattr(node, "zl_local_id", None)
        if lid is None:
            counter = getattr(graph, "zl_node_ids", None)
            if counter is None:
                counter = graph.zl_node_ids = itertools.count(0)
            lid = node.zl_local_id = next(counter)
        return lid


def _out(ptr, what):
    if not ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} is NULL")
    return ptr


def _node_in_graph(h):
    node = node_from_handle(h)
    if node.graph is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the node belongs to no graph")
    return node


@export("cuGraphGetId")
def graph_get_id(hgraph, out):
    g = graph_from_handle(hgraph)
    cmem.write_u32(_out(out, "graphId"), _graph_id(g))


@export("cuGraphExecGetId")
def graph_exec_get_id(hexec, out):
    ex = exec_from_handle(hexec)
    cmem.write_u32(_out(out, "graphId"), _graph_id(ex))


@export("cuGraphNodeGetLocalId")
def graph_node_get_local_id(hnode, out):
    node = _node_in_graph(hnode)
    cmem.write_u32(_out(out, "nodeId"), _local_id(node))


@export("cuGraphNodeGetToolsId")
def graph_node_get_tools_id(hnode, out):
    node = _node_in_graph(hnode)
    # unique in the process: the graph's id above the node's local one
    cmem.write_u64(_out(out, "toolsNodeId"), (_graph_id(node.graph) << 32) | _local_id(node))


@export("cuGraphNodeGetContainingGraph")
def graph_node_get_containing_graph(hnode, out):
    node = _node_in_graph(hnode)
    cmem.write_ptr(_out(out, "phGraph"), node.graph.handle)
