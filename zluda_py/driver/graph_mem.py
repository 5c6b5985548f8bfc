"""Graph memory nodes: cuGraphAddMemAllocNode/MemFreeNode, stream-captured cuMemAllocAsync/FreeAsync, the
device's graph memory attributes and cuDeviceGraphMemTrim, with the rules NVIDIA's driver enforces (an H200's
answers: tests/data/nvidia_tma_answers.json, "graph").

An allocation node reserves an address range at creation, kept for the graph's life; a later allocation
of the same graph that depends on an earlier one's free reuses its range. Physical memory comes in blocks
owned by the device's graph pool: a launch maps a block into each range it allocates, taking a block whose
last allocation was freed earlier on the same stream or whose freeing has run, else a new one. Blocks
stay with the pool (the footprint) until cuDeviceGraphMemTrim gives the idle ones back."""

from __future__ import annotations

import struct
import threading

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver import context as ctxmod, graph as graphmod, init
from zluda_py.driver.allocations import INDEX, Allocation
from zluda_py.driver.device import device_props
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED

# CUDA_MEM_ALLOC_NODE_PARAMS: CUmemPoolProps (88 bytes), accessDescs, accessDescCount, bytesize, dptr
_POOL_PROPS = struct.Struct("<IIIiQQH54x")
_NODE_TAIL = struct.Struct("<QQQQ")
_ALLOC_PARAMS = _POOL_PROPS.size + _NODE_TAIL.size
_ACCESS_DESC = struct.Struct("<IiI")          # CUmemAccessDesc: location (type, id), flags
PINNED, LOCATION_DEVICE, PROT_READWRITE = 1, 1, 3
AUTO_FREE_ON_LAUNCH = 1
USED_CURRENT, USED_HIGH, RESERVED_CURRENT, RESERVED_HIGH = range(4)
# Physical memory is counted in these: NVIDIA's H200 reports 32 MiB for a 1000-byte graph allocation and
# 64 MiB for a 64 MiB one.
GRAIN = 32 << 20

_lock = threading.RLock()
_pools: dict = {}           # device -> DevicePool
_regions: dict = {}         # base address -> Region


class _OwnMemory:
    """For a backend without shareable physical memory: every range has memory of its own, and blocks
    are only counted."""

    page = 256

    def round(self, size):
        return -(-size // self.page) * self.page

    def reserve(self, size):
        return init.BACKEND.mem_alloc(0, size, "device")

    def release(self, base, size):
        init.BACKEND.mem_free(base)

    def block(self, size):
        return None

    def map(self, base, size, block):
        pass

    def unmap(self, base, size):
        pass


def _memory():
    m = init.BACKEND.graph_memory()
    return m if m is not None else _OwnMemory()


class Block:
    """Physical memory of the pool, mapped into the ranges in `mapped`; `holder` is the range whose live
    allocation uses it. A freed block may serve a later allocation ordered after the free: one on the
    stream that freed it, or any once the free has run (`done`)."""

    def __init__(self, pool, size):
        self.pool = pool
        self.size = size
        self.backing = _memory().block(size)
        self.holder = None
        self.freed_on = None
        self.done = True
        self.mapped: set = set()

    def available(self, stream) -> bool:
        return self.holder is None and (self.done or self.freed_on is stream)


class DevicePool:
    def __init__(self, device):
        self.device = device
        self.blocks: list = []
        self.high = 0

    @property
    def footprint(self) -> int:
        return sum(b.size for b in self.blocks)

    def take(self, region, stream) -> Block:
        """A block for `region`'s allocation at this point of `stream`: the one it has mapped if free,
        else the smallest free one large enough, else a new one."""
        b = region.block
        if b is None or b.pool is not self or not b.available(stream) or b.size < region.size:
            fits = [x for x in self.blocks if x.available(stream) and x.size >= region.size]
            b = min(fits, key=lambda x: x.size) if fits else None
        if b is None:
            b = Block(self, -(-region.size // GRAIN) * GRAIN)
            self.blocks.append(b)
            self.high = max(self.high, self.footprint)
        b.holder, b.done, b.freed_on = region, False, None
        return b

    def trim(self) -> None:
        """Give back every block no allocation holds and no queued launch will use."""
        mem = _memory()
        for b in [x for x in self.blocks if x.holder is None and x.done]:
            for r in list(b.mapped):
                if not r.released:
                    mem.unmap(r.base, r.size)
                r.block = None
            b.mapped.clear()
            if b.backing is not None:
                b.backing.close()
            self.blocks.remove(b)


def device_pool(dev) -> DevicePool:
    with _lock:
        p = _pools.get(dev)
        if p is None:
            p = _pools[dev] = DevicePool(dev)
        return p


class Region:
    """One reserved address range and the allocations (AllocInfo) made in it, in graph order. It lives
    while its graph, an executable of it or a live allocation in it does (`refs`)."""

    handle = 0              # what CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE answers: no pool of the program's

    def __init__(self, device, size, ctx):
        mem = _memory()
        self.device = device
        self.size = mem.round(size)
        self.base = mem.reserve(self.size)
        self.block = None
        self.allocs: list = []
        self.tail_free = None       # the free node (in the owning graph) of the latest allocation
        self.refs = 1
        self.released = False
        self.live = False
        self.alloc = Allocation(self.base, self.size, "pool", ctx, device, pool=self)
        self.alloc.freeing = True   # no allocation until a launch reaches the node
        INDEX.add(self.alloc)
        _regions[self.base] = self

    # the Allocation's pool interface: cuMemFree / cuMemFreeAsync of a live graph allocation
    def give_back(self, a) -> None:
        with _lock:
            self.end_allocation(None)

    def discard(self, a) -> None:
        """Its context went away."""
        self.give_back(a)

    def begin_allocation(self, stream) -> None:
        b = device_pool(self.device).take(self, stream)
        if self.block is not b:
            if self.block is not None:
                self.block.mapped.discard(self)
            self.block = b
            b.mapped.add(self)
            if b.backing is not None:
                backing, base, size = b.backing, self.base, self.size
                stream.begin().host_func(lambda: _memory().map(base, size, backing))
        self.live = True
        self.alloc.freeing = False

    def end_allocation(self, stream) -> None:
        """The allocation ends at this point of `stream` (None: now); nothing when none is live (a context
        torn down discards every range it made)."""
        if not self.live:
            return
        self.live = False
        self.alloc.freeing = True
        b = self.block
        if b is not None and b.holder is self:
            b.holder, b.freed_on = None, stream
            if stream is not None:
                stream.begin().host_func(lambda: setattr(b, "done", True))
            else:
                b.done = True
        self.unref()

    def unref(self, n=1) -> None:
        self.refs -= n
        if self.refs <= 0 and not self.live and not self.released:
            self.released = True
            INDEX.remove(self.alloc)
            _regions.pop(self.base, None)
            if self.block is not None:
                self.block.mapped.discard(self)
                self.block = None
            _memory().release(self.base, self.size)


class AllocInfo:
    """One allocation node's request (shared by the copies of the node in executables)."""

    def __init__(self, device, bytesize, access, region, graph):
        self.device = device
        self.bytesize = bytesize
        self.access = access            # raw CUmemAccessDesc bytes, as given
        self.region = region
        self.graph = graph
        self.freed_in = None            # the graph holding a free node for it
        self.params_buffer = None       # what cuGraphMemAllocNodeGetParams hands out


# --- graphs holding memory nodes ------------------------------------------------------------------------
def has_mem_nodes(g) -> bool:
    return any(n.kind in (graphmod.MEM_ALLOC, graphmod.MEM_FREE) for n in g.nodes)


def forbid(g, what) -> None:
    """What NVIDIA's driver refuses for a graph with memory nodes: CUDA_ERROR_NOT_SUPPORTED."""
    if has_mem_nodes(g):
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"a graph with memory nodes cannot be {what}")


def on_instantiate(g, ex) -> None:
    """At most one executable of a graph with memory nodes exists; it holds the graph's ranges."""
    ex.mem_regions = ()
    if not has_mem_nodes(g):
        return
    prev = getattr(g, "mem_exec", None)
    if prev is not None and not prev.mem_destroyed:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "a graph with memory nodes has an executable already")
    g.mem_exec, ex.mem_destroyed = ex, False
    ex.mem_regions = {n.params["info"].region for n in ex.steps if n.kind == graphmod.MEM_ALLOC}
    with _lock:
        for r in ex.mem_regions:
            r.refs += 1


def on_exec_destroy(ex) -> None:
    ex.mem_destroyed = True
    with _lock:
        for r in getattr(ex, "mem_regions", ()):
            r.unref()
    ex.mem_regions = ()


def on_graph_destroy(g) -> None:
    with _lock:
        for r in {n.params["info"].region for n in g.nodes if n.kind == graphmod.MEM_ALLOC}:
            r.unref()


def before_launch(ex, stream) -> None:
    """An allocation of the previous launch still live: CUDA_ERROR_INVALID_VALUE, or freed now with
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH."""
    regions = getattr(ex, "mem_regions", ())
    if not regions:
        return
    live = [r for r in regions if r.live]
    if live and not ex.flags & AUTO_FREE_ON_LAUNCH:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"the graph's allocation at {live[0].base:#x} from its last "
                                                  "launch is not freed")
    with _lock:
        for r in live:
            r.end_allocation(stream)


def _replay_alloc(stream, p):
    region = p["info"].region
    with _lock:
        if region.live:             # a second allocation node of a range still in use cannot happen in a
            return                  # well-formed graph; keep the first
        region.refs += 1            # a live allocation keeps its range
        region.begin_allocation(stream)


def _replay_free(stream, p):
    region = p["info"].region
    with _lock:
        if region.live:
            region.end_allocation(stream)


# --- the node API -----------------------------------------------------------------------------------------
def _ancestors(deps) -> set:
    seen, todo = set(), list(deps)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(n.deps)
    return seen


def _read_alloc_params(ptr):
    if not ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "nodeParams is NULL")
    raw = cmem.read_bytes(ptr, _ALLOC_PARAMS, "nodeParams")
    alloc_type, handle_types, loc_type, loc_id, _win32, _max, _usage = _POOL_PROPS.unpack_from(raw)
    access_ptr, access_count, bytesize, _dptr = _NODE_TAIL.unpack_from(raw, _POOL_PROPS.size)
    if alloc_type != PINNED:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"poolProps.allocType {alloc_type} (must be PINNED)")
    if loc_type != LOCATION_DEVICE:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"graph allocations at location type {loc_type}")
    try:
        device_props(loc_id)
    except CudaError:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"poolProps.location.id {loc_id} is no device") from None
    if handle_types:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"shareable graph allocations (handleTypes {handle_types:#x})")
    if bytesize == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "bytesize is 0")
    if access_count > len(init.DEVICES):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{access_count} access descriptors for {len(init.DEVICES)} devices")
    if access_count and not access_ptr:
        # NVIDIA's driver reads through the NULL and crashes
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "accessDescs is NULL")
    access = cmem.read_bytes(access_ptr, _ACCESS_DESC.size * access_count, "accessDescs") if access_count else b""
    for i in range(access_count):
        t, dev, flags = _ACCESS_DESC.unpack_from(access, _ACCESS_DESC.size * i)
        if t != LOCATION_DEVICE or flags not in (0, 1, 3):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"accessDescs[{i}]: location type {t}, flags {flags}")
        device_props(dev)
        if dev == loc_id and flags != PROT_READWRITE:
            raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "the allocation's own device must have read-write access")
    return loc_id, bytesize, access


def _check_graph(g):
    if getattr(g, "embedded", False):
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "memory nodes cannot be added to a child graph")


def add_alloc_node(g, deps, device, bytesize, access) -> graphmod.Node:
    """A new allocation node in `g` after `deps`, reusing the range of an allocation freed before it."""
    _check_graph(g)
    if any(d.graph is not g for d in deps):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a dependency belongs to another graph")
    with _lock:
        ancestors = _ancestors(deps)
        size = _memory().round(bytesize)
        region = next((r for r in {n.params["info"].region for n in g.nodes if n.kind == graphmod.MEM_ALLOC}
                       if r.tail_free is not None and r.tail_free in ancestors and r.size >= size
                       and r.device == device), None)
        if region is None:
            region = Region(device, bytesize, ctxmod.current_context_or_none())
        region.tail_free = None
        info = AllocInfo(device, bytesize, access, region, g)
        region.allocs.append(info)
        node = graphmod.Node(graphmod.MEM_ALLOC, _replay_alloc, info=info)
        g.add(node, deps)
        return node


def add_free_node(g, deps, dptr) -> graphmod.Node:
    """A free node for the latest allocation at `dptr` that no graph frees yet: in its own graph, or in
    another one, which then owns the freeing (the allocating graph can no longer free it)."""
    _check_graph(g)
    if any(d.graph is not g for d in deps):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a dependency belongs to another graph")
    with _lock:
        region = _regions.get(dptr)
        info = region.allocs[-1] if region is not None and region.allocs else None
        if info is None or info.freed_in is not None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is no allocation of an allocation node that "
                                                      "is still to be freed")
        node = graphmod.Node(graphmod.MEM_FREE, _replay_free, info=info)
        g.add(node, deps)
        info.freed_in = g
        if info.graph is g:
            region.tail_free = node
        return node


def add_node(g, deps, kind, params):
    """cuGraphAddNode's CUDA_MEM_ALLOC_NODE_PARAMS_v2 (its dptr written back) or CUDA_MEM_FREE_NODE_PARAMS."""
    if kind == graphmod.MEM_FREE:
        return add_free_node(g, deps, cmem.read_u64(params, "free.dptr"))
    device, bytesize, access = _read_alloc_params(params)
    node = add_alloc_node(g, deps, device, bytesize, access)
    cmem.write_u64(params + _ALLOC_PARAMS - 8, node.params["info"].region.base)
    return node


def _add(ph, hgraph, deps_ptr, ndeps, make):
    g = graphmod.graph_from_handle(hgraph)
    if not ph:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "phGraphNode is NULL")
    node = make(g, graphmod.read_nodes(deps_ptr, ndeps))
    cmem.write_ptr(ph, node.handle)
    return node


@export("cuGraphAddMemAllocNode")
def graph_add_mem_alloc_node(ph, hgraph, deps_ptr, ndeps, params):
    graphmod.graph_from_handle(hgraph)
    device, bytesize, access = _read_alloc_params(params)
    node = _add(ph, hgraph, deps_ptr, ndeps, lambda g, deps: add_alloc_node(g, deps, device, bytesize, access))
    cmem.write_u64(params + _ALLOC_PARAMS - 8, node.params["info"].region.base)


@export("cuGraphAddMemFreeNode")
def graph_add_mem_free_node(ph, hgraph, deps_ptr, ndeps, dptr):
    _add(ph, hgraph, deps_ptr, ndeps, lambda g, deps: add_free_node(g, deps, dptr))


@export("cuGraphMemAllocNodeGetParams")
def graph_mem_alloc_node_get_params(hnode, out):
    n = graphmod.node_from_handle(hnode)
    if n.kind != graphmod.MEM_ALLOC:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memory allocation node")
    if not out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "params_out is NULL")
    info = n.params["info"]
    access_addr = 0
    if info.access:
        # owned by the node: valid while it exists
        from zluda_py.cmem import ffi
        info.params_buffer = ffi.new("char[]", info.access)
        access_addr = int(ffi.cast("uintptr_t", info.params_buffer))
    raw = _POOL_PROPS.pack(PINNED, 0, LOCATION_DEVICE, info.device, 0, 0, 0) + _NODE_TAIL.pack(
        access_addr, len(info.access) // _ACCESS_DESC.size, info.bytesize, info.region.base)
    cmem.write_bytes(out, raw, "params_out")


@export("cuGraphMemFreeNodeGetParams")
def graph_mem_free_node_get_params(hnode, out):
    n = graphmod.node_from_handle(hnode)
    if n.kind != graphmod.MEM_FREE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memory free node")
    cmem.write_u64(out, n.params["info"].region.base, "dptr_out")


# --- stream capture ---------------------------------------------------------------------------------------
def capture_alloc(stream, dptr_out, size, device) -> None:
    """cuMemAllocAsync on a capturing stream: an allocation node (the pool's device) after the capture's
    current dependencies."""
    if size <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"allocation size {size}")
    rec = stream.capture
    node = add_alloc_node(rec.capture.graph, rec.deps, device, size, b"")
    rec.deps = [node]
    cmem.write_ptr(dptr_out, node.params["info"].region.base)


def capture_free(stream, dptr) -> None:
    """cuMemFreeAsync on a capturing stream: a free node; anything but a graph allocation is
    CUDA_ERROR_INVALID_VALUE, and the capture goes on (NVIDIA's answer)."""
    rec = stream.capture
    rec.deps = [add_free_node(rec.capture.graph, rec.deps, dptr)]


# --- the device's graph memory ----------------------------------------------------------------------------
@export("cuDeviceGraphMemTrim")
def device_graph_mem_trim(dev):
    device_props(dev)
    with _lock:
        device_pool(dev).trim()


@export("cuDeviceGetGraphMemAttribute")
def device_get_graph_mem_attribute(dev, attr, value):
    device_props(dev)
    if attr not in (USED_CURRENT, USED_HIGH, RESERVED_CURRENT, RESERVED_HIGH):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"graph memory attribute {attr}")
    if not value:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "value is NULL")
    pool = device_pool(dev)
    # every block of the pool is associated with the graphs that map it until a trim: in use and reserved
    # are the same
    cmem.write_u64(value, pool.high if attr in (USED_HIGH, RESERVED_HIGH) else pool.footprint)


@export("cuDeviceSetGraphMemAttribute")
def device_set_graph_mem_attribute(dev, attr, value):
    device_props(dev)
    if not value:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "value is NULL")
    if attr not in (USED_HIGH, RESERVED_HIGH):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"graph memory attribute {attr} cannot be set")
    if cmem.read_u64(value) != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a high watermark can only be reset to 0")
    pool = device_pool(dev)
    pool.high = pool.footprint
