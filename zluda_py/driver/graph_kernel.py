"""Kernel nodes' launch attributes and launch checks: cuGraphKernelNodeGetAttribute, cuGraphKernelNodeSetAttribute,
cuGraphKernelNodeCopyAttributes.

A CUkernelNodeAttrID is a CUlaunchAttributeID and its value the 64-byte CUlaunchAttributeValue union. A node keeps
each value as it was set (zero when never set). Two change the launch, as they change cuLaunchKernelEx's:
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (all zero: none, the kernel's .reqnctapercluster or clusters of one CTA)
and CU_LAUNCH_ATTRIBUTE_COOPERATIVE. The others (access policy window, priority, synchronisation policy, memory
sync domains, ...) are scheduling hints, with no effect on a launch's result here, only read back.

Where a bad launch shape answers, as an H100 answers it (tests/data/nvidia_graph_cluster_answers.json, from
scripts/nvidia_graph_cluster_probe.cu): a kernel whose own cluster dimension does not divide the grid at
cuGraphAddKernelNode (and, by the same check, cuGraphKernelNodeSetParams and cuGraphAddNode); a cluster dimension
attribute the grid, the kernel's own dimension or the size limit refuses at cuGraphKernelNodeSetAttribute, the node
keeping what it had. What is left (a grid set after the attribute, a cooperative grid too large) answers when the
node's launch is checked whole, by launch.py's own checks, where the driver turns a graph into launches: when it is
instantiated (cuGraphInstantiate*, the graph given to cuGraphExecUpdate), and at once by
cuGraphExecKernelNodeSetParams. Each answers the stream launch's code (CUDA_ERROR_INVALID_CLUSTER_SIZE,
COOPERATIVE_LAUNCH_TOO_LARGE); cuGraphLaunch never does, so no graph is left half-launched. A priority is kept
clamped to the device's range, as an H100 keeps it."""

from __future__ import annotations

from zluda_py import cmem
from zluda_py.decls import ENUMS
from zluda_py.dispatch import export
from zluda_py.driver import graph as graphmod
from zluda_py.driver import launch as launchmod
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED

VALUE_SIZE = launchmod.ATTRIBUTE_VALUE_SIZE
_ZERO = bytes(VALUE_SIZE)
# The bytes of the union's member each attribute reads and writes (cuda.h), not all 64: a caller may pass a
# pointer to the member alone (an int for the priority), and must not find the bytes past it overwritten.
_MEMBER_BYTES = {
    "CU_LAUNCH_ATTRIBUTE_IGNORE": 0,                                    # pad: nothing to keep
    "CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW": 32,                     # CUaccessPolicyWindow
    "CU_LAUNCH_ATTRIBUTE_COOPERATIVE": 4,                               # int
    "CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY": 4,                    # CUsynchronizationPolicy
    "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION": 12,                        # unsigned x, y, z
    "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE": 4,
    "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION": 4,         # int
    "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT": 16,                       # CUevent, int flags, int trigger
    "CU_LAUNCH_ATTRIBUTE_PRIORITY": 4,                                  # int
    "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP": 2,                       # unsigned char default_, remote
    "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN": 4,
    "CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION": 12,              # unsigned x, y, z
    "CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT": 16,                  # CUevent, int flags
    "CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE": 16,             # int, CUgraphDeviceNode
    "CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT": 4,          # unsigned
    "CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING": 4,            # unsigned
    "CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE": 4,
    "CU_LAUNCH_ATTRIBUTE_SHARED_MEMORY_MODE": 4,
}
_IDS = ENUMS["CUlaunchAttributeID"]
_SIZE = {_IDS[name]: size for name, size in _MEMBER_BYTES.items() if name in _IDS}     # id -> member bytes
_LAUNCH_CHANGING = (launchmod.ATTR_COOPERATIVE, launchmod.ATTR_CLUSTER_DIMENSION)
_CONDITIONAL = 13           # CU_GRAPH_NODE_TYPE_CONDITIONAL: its body graphs hold nodes too


def _decoded(attrs: dict) -> tuple:
    """launch.decode_attributes of a node's attributes, where an all-zero cluster dimension is none (the kernel's
    own, or clusters of one): a fresh node reads back zeros."""
    cooperative, cluster, portable = launchmod.decode_attributes(attrs)
    return cooperative, None if cluster == (0, 0, 0) else cluster, portable


def launch_flags(p: dict) -> int:
    """The backend's launch flags of a kernel node's parameters, or the CudaError a stream launch of the same
    kernel, grid, block and attributes answers (its grid and block were checked when they were set)."""
    f, grid = p["function"], p["grid"]
    cooperative, cluster, portable = _decoded(p.get("attrs", {}))
    shape = launchmod.cluster_shape(f, grid, cluster, portable)
    return launchmod.launch_flags(f, grid, p["block"], p["shared"], cooperative, shape)


def _subgraphs(node) -> list:
    if node.kind == graphmod.GRAPH:
        return [node.params["graph"]]
    if node.kind == _CONDITIONAL:
        return list(node.params["bodies"])
    return []


def _prepare(node) -> None:
    if node.kind == graphmod.KERNEL and node._replay is graphmod._replay_kernel:
        node.params["flags"] = launch_flags(node.params)
    for sub in _subgraphs(node):
        for n in sub.nodes:
            _prepare(n)


def prepare(graph) -> None:
    """Check the launch of every kernel node of an executable's own copy of a graph (child graphs and conditional
    bodies included) and keep its flags for each replay. The CudaError names the node of `graph` that holds the
    failing launch (`node`), for the caller's phErrorNode."""
    for node in graph.nodes:
        try:
            _prepare(node)
        except CudaError as e:
            e.node = node
            raise


def _kernel_node(h):
    n = graphmod.node_from_handle(h)
    if n.kind != graphmod.KERNEL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"node type {n.kind} is not a kernel node")
    return n


def _member_size(attr: int) -> int:
    size = _SIZE.get(attr)
    if size is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown kernel node attribute {attr}")
    return size


def _give(n, attrs: dict) -> None:
    """Give node `n` these attributes: a new dict, never a change to the old one, which the node's copies (in a
    clone or an executable) may share."""
    if n._replay is not graphmod._replay_kernel:
        # a backend function's launch the driver itself issued into a capturing stream: its launch flags were
        # recorded as they were, without the kernel whose checks a new cluster shape would need
        old = n.params.get("attrs", {})
        for a in _LAUNCH_CHANGING:
            if attrs.get(a, _ZERO) != old.get(a, _ZERO):
                raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"attribute {a} of a kernel node recorded from an "
                                                          "internal launch cannot change")
    n.params["attrs"] = attrs


def check_kernel_node(p: dict) -> None:
    """What an H100 checks when a kernel node is added or given parameters: the kernel's own cluster dimension
    (.reqnctapercluster) against its grid (CUDA_ERROR_INVALID_CLUSTER_SIZE); a cluster attribute is checked when
    it is set (_checked_cluster) and the whole launch when the graph is instantiated."""
    launchmod.cluster_shape(p["function"], p["grid"], None, 0)


def _checked_cluster(n, attrs: dict) -> None:
    """A cluster dimension given to a node, checked as an H100 checks it there: against the node's grid, the
    kernel's own dimension and the size limit (CUDA_ERROR_INVALID_CLUSTER_SIZE, the node unchanged); all zeros
    is none."""
    _cooperative, cluster, portable = _decoded(attrs)
    if cluster is not None and n._replay is graphmod._replay_kernel:
        launchmod.cluster_shape(n.params["function"], n.params["grid"], cluster, portable)


@export("cuGraphKernelNodeGetAttribute")
def graph_kernel_node_get_attribute(hnode, attr, value_out):
    n = _kernel_node(hnode)
    if attr == launchmod.ATTR_IGNORE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "attribute 0 (CU_LAUNCH_ATTRIBUTE_IGNORE) has no value")
    size = _member_size(attr)
    if not value_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "value_out is NULL")
    if size:
        cmem.write_bytes(value_out, n.params.get("attrs", {}).get(attr, _ZERO)[:size], "value_out")


@export("cuGraphKernelNodeSetAttribute")
def graph_kernel_node_set_attribute(hnode, attr, value):
    n = _kernel_node(hnode)
    size = _member_size(attr)
    if not value:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "value is NULL")
    if size:
        raw = launchmod.normalised_attribute(attr, cmem.read_bytes(value, size, "value").ljust(VALUE_SIZE, b"\0"))
        attrs = {**n.params.get("attrs", {}), attr: raw}
        if attr == launchmod.ATTR_CLUSTER_DIMENSION:
            _checked_cluster(n, attrs)
        _give(n, attrs)


@export("cuGraphKernelNodeCopyAttributes")
def graph_kernel_node_copy_attributes(dst, src):
    d, s = _kernel_node(dst), _kernel_node(src)
    _give(d, dict(s.params.get("attrs", {})))
