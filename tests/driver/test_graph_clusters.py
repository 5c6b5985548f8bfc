"""Thread-block clusters and cooperative launches in CUDA graphs, through the real libcuda.so.1 (a ctypes scenario
in a fresh process on a device reporting 9.0): kernel nodes of a __cluster_dims__ (.reqnctapercluster) kernel,
of a plain kernel given CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION with cuGraphKernelNodeSetAttribute, and captured
cluster launches each write every CTA's %cluster_* registers and a value read from the next CTA of its cluster
through distributed shared memory; every element is checked. Also the node attributes' round trips
(cuGraphKernelNodeGet/SetAttribute, cuGraphKernelNodeCopyAttributes), their errors, the attributes kept across
cuGraphKernelNodeSetParams and cuGraphExecKernelNodeSetParams, and the bad shapes NVIDIA's launch answers
CUDA_ERROR_INVALID_CLUSTER_SIZE for, each where an H100 answers it."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

from chost import run_py

SUCCESS, INVALID_VALUE, NOT_SUPPORTED, COOPERATIVE_TOO_LARGE, INVALID_CLUSTER_SIZE = 0, 1, 801, 720, 912
WORDS = 20          # u32 written per thread (see _probe)
BLOCK = 32
SREGS = ["%ctaid.x", "%ctaid.y", "%ctaid.z", "%clusterid.x", "%clusterid.y", "%clusterid.z", "%nclusterid.x",
         "%nclusterid.y", "%nclusterid.z", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z",
         "%cluster_nctaid.x", "%cluster_nctaid.y", "%cluster_nctaid.z", "%cluster_ctarank", "%cluster_nctarank"]


def _probe(name, directive=""):
    """Each thread: its CTA's registers (17 words), the value the next CTA of the cluster (rank + 1) stored in
    its shared memory for this thread (CTA index * 1000 + tid + salt), %is_explicit_cluster."""
    stores = "\n".join(f"  mov.u32 %v, {r};\n  st.global.u32 [%rd3+{4 * i}], %v;" for i, r in enumerate(SREGS))
    return f"""
.visible .entry {name}(.param .u64 out, .param .u32 salt) {directive}
{{
  .shared .align 4 .b32 sm[{BLOCK}];
  .reg .pred %p<2>;
  .reg .b32 %v, %r<32>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r30, [salt];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.z;
  mov.u32 %r3, %nctaid.y;
  mov.u32 %r4, %ctaid.y;
  mad.lo.u32 %r2, %r2, %r3, %r4;
  mov.u32 %r3, %nctaid.x;
  mov.u32 %r4, %ctaid.x;
  mad.lo.u32 %r2, %r2, %r3, %r4;
  mov.u32 %r5, %ntid.x;
  mad.lo.u32 %r6, %r2, %r5, %r1;
  mul.wide.u32 %rd2, %r6, {4 * WORDS};
  add.s64 %rd3, %rd1, %rd2;
  mul.lo.u32 %r7, %r2, 1000;
  add.u32 %r7, %r7, %r1;
  add.u32 %r7, %r7, %r30;
  mov.u32 %r8, sm;
  shl.b32 %r9, %r1, 2;
  add.u32 %r10, %r8, %r9;
  st.shared.u32 [%r10], %r7;
  barrier.cluster.arrive.aligned;
  barrier.cluster.wait.aligned;
  mov.u32 %r11, %cluster_ctarank;
  mov.u32 %r12, %cluster_nctarank;
  add.u32 %r13, %r11, 1;
  rem.u32 %r13, %r13, %r12;
  mapa.shared::cluster.u32 %r14, %r10, %r13;
  ld.shared::cluster.u32 %r15, [%r14];
{stores}
  st.global.u32 [%rd3+68], %r15;
  mov.pred %p1, %is_explicit_cluster;
  selp.u32 %v, 1, 0, %p1;
  st.global.u32 [%rd3+72], %v;
  st.global.u32 [%rd3+76], %r30;
  barrier.cluster.arrive.aligned;
  barrier.cluster.wait.aligned;
  ret;
}}
"""


PTX = (".version 8.0\n.target sm_90\n.address_size 64\n" + _probe("kdir", ".reqnctapercluster 2, 2, 1")
       + _probe("kplain") + "\n.visible .entry knop()\n{\n  ret;\n}\n"
       + "\n.visible .entry knopdir() .reqnctapercluster 2, 2, 1\n{\n  ret;\n}\n")


def expected(grid, cluster, salt, explicit=True):
    """What every thread of a launch of `grid` in clusters of `cluster` writes (n_threads x WORDS)."""
    gx, gy, gz = grid
    cx, cy, cz = cluster
    rows = []
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                cid = (x % cx, y % cy, z % cz)
                rank = cid[0] + cx * (cid[1] + cy * cid[2])
                size = cx * cy * cz
                nxt = (rank + 1) % size
                nx, ny, nz = nxt % cx, nxt // cx % cy, nxt // (cx * cy)
                base = (x - cid[0], y - cid[1], z - cid[2])
                neighbour = ((base[2] + nz) * gy + base[1] + ny) * gx + base[0] + nx
                regs = [x, y, z, x // cx, y // cy, z // cz, gx // cx, gy // cy, gz // cz, *cid, cx, cy, cz, rank, size]
                for t in range(BLOCK):
                    rows.append(regs + [(neighbour * 1000 + t + salt) & 0xFFFFFFFF, int(explicit), salt])
    return np.array(rows, dtype=np.uint32)


SCENARIO = r"""
import json, struct
PTX = %(ptx)r
SALTS = %(salts)r
BLOCK, WORDS = %(block)d, %(words)d
primary()
R = {}
c_u64 = ctypes.c_uint64

def call(name, *args):
    return getattr(lib, name)(*args)

mod = c_u64()
ok(lib.cuModuleLoadData(P(mod), PTX.encode()), "cuModuleLoadData")
fn = {}
for name in ("kdir", "kplain", "knop", "knopdir"):
    h = c_u64()
    ok(lib.cuModuleGetFunction(P(h), mod, name.encode()), name)
    fn[name] = h.value
stream = c_u64()
ok(lib.cuStreamCreate(P(stream), 1))
keep = []

def buffer(grid):
    n = grid[0] * grid[1] * grid[2] * BLOCK * WORDS
    d = c_u64()
    ok(lib.cuMemAlloc_v2(P(d), ctypes.c_size_t(4 * n)))
    ok(lib.cuMemsetD32_v2(d, 0xDEADBEEF, ctypes.c_size_t(n)))
    return d.value, n

def read(d, n):
    ok(lib.cuCtxSynchronize(), "sync")
    out = (ctypes.c_uint32 * n)()
    ok(lib.cuMemcpyDtoH_v2(out, c_u64(d), ctypes.c_size_t(4 * n)))
    return list(out)

def args(d, salt):
    vals = [c_u64(d), ctypes.c_uint32(salt)]
    arr = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) for v in vals])
    keep.append((vals, arr))
    return arr

def node_params(f, grid, d, salt, block=BLOCK):
    arr = args(d, salt) if d is not None else None
    raw = struct.pack("<Q7I4xQQQQ", fn[f], *grid, block, 1, 1, 0, ctypes.addressof(arr) if arr else 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(raw, len(raw))
    keep.append(buf)
    return buf

def value(raw):
    return ctypes.create_string_buffer(raw.ljust(64, b"\0"), 64)

def new_graph():
    g = c_u64()
    ok(lib.cuGraphCreate(P(g), 0))
    return g

def add_kernel(g, f, grid, d=None, salt=0, block=BLOCK):
    n = c_u64()
    r = lib.cuGraphAddKernelNode_v2(P(n), g, None, ctypes.c_size_t(0), node_params(f, grid, d, salt, block))
    ok(r, "cuGraphAddKernelNode_v2")
    return n

def set_attr(node, attr, raw):
    return lib.cuGraphKernelNodeSetAttribute(node, attr, value(raw))

def get_attr(node, attr):
    v = ctypes.create_string_buffer(b"\x5a" * 64, 64)
    r = lib.cuGraphKernelNodeGetAttribute(node, attr, v)
    return r, v.raw

def instantiate(g):
    ex = c_u64()
    r = lib.cuGraphInstantiateWithFlags(P(ex), g, c_u64(0))
    return r, ex

def run_graph(g):
    r, ex = instantiate(g)
    ok(r, "instantiate")
    ok(lib.cuGraphLaunch(ex, stream), "cuGraphLaunch")
    return ex

def guarded(name, body):
    try:
        body()
    except AssertionError as e:
        R[name + "_error"] = str(e)

# --- a __cluster_dims__ kernel in a hand-built kernel node ---------------------------------------------
def dir_node():
    grid = (4, 2, 2)
    d, n = buffer(grid)
    g = new_graph()
    add_kernel(g, "kdir", grid, d, SALTS[0])
    run_graph(g)
    R["dir_node"] = read(d, n)
guarded("dir_node", dir_node)

# --- a plain kernel given a cluster dimension on its node ----------------------------------------------
def attr_node():
    grid = (6, 2, 2)
    d, n = buffer(grid)
    g = new_graph()
    node = add_kernel(g, "kplain", grid, d, SALTS[1])
    R["attr_set"] = set_attr(node, 4, struct.pack("<3I", 3, 1, 2))
    ex = run_graph(g)
    R["attr_node"] = read(d, n)
    # the executable's kernel node takes new parameters and keeps its cluster attribute
    ok(lib.cuGraphExecKernelNodeSetParams_v2(ex, node, node_params("kplain", grid, d, SALTS[2])), "exec set")
    ok(lib.cuMemsetD32_v2(c_u64(d), 0xDEADBEEF, ctypes.c_size_t(n)))
    ok(lib.cuGraphLaunch(ex, stream))
    R["exec_set_params"] = read(d, n)
    # a grid (5, 2, 2) the cluster (3, 1, 2) does not divide: refused, the executable unchanged
    R["exec_set_bad"] = lib.cuGraphExecKernelNodeSetParams_v2(ex, node, node_params("kplain", (5, 2, 2), d, 7))
    ok(lib.cuMemsetD32_v2(c_u64(d), 0xDEADBEEF, ctypes.c_size_t(n)))
    ok(lib.cuGraphLaunch(ex, stream))
    R["exec_after_bad"] = read(d, n)
    # the graph's node takes new parameters (a new salt) and keeps its attribute too
    ok(lib.cuGraphKernelNodeSetParams_v2(node, node_params("kplain", grid, d, SALTS[3])), "set params")
    R["set_params_attr"] = get_attr(node, 4)[1][:12].hex()
    ok(lib.cuMemsetD32_v2(c_u64(d), 0xDEADBEEF, ctypes.c_size_t(n)))
    run_graph(g)
    R["set_params"] = read(d, n)
guarded("attr_node", attr_node)

# --- no cluster anywhere: one CTA per cluster, not an explicit cluster ---------------------------------
def plain_node():
    grid = (3, 2, 1)
    d, n = buffer(grid)
    g = new_graph()
    add_kernel(g, "kplain", grid, d, SALTS[4])
    run_graph(g)
    R["plain_node"] = read(d, n)
guarded("plain_node", plain_node)

# --- captured launches: the kernel's own clusters and cuLaunchKernelEx's attribute ----------------------
def captured():
    g1, g2 = (4, 2, 2), (6, 2, 2)
    d1, n1 = buffer(g1)
    d2, n2 = buffer(g2)
    ok(lib.cuStreamBeginCapture_v2(stream, 0), "begin capture")
    ok(lib.cuLaunchKernel(c_u64(fn["kdir"]), *g1, BLOCK, 1, 1, 0, stream, args(d1, SALTS[5]), None), "launch")
    # the cluster dimension and a priority (a hint: the node keeps it too)
    attrs = ctypes.create_string_buffer(struct.pack("<I4x", 4) + struct.pack("<3I", 3, 1, 2).ljust(64, b"\0") +
                                        struct.pack("<I4x", 8) + struct.pack("<i", -3).ljust(64, b"\0"), 144)
    cfg = ctypes.create_string_buffer(struct.pack("<7I4xQQI4x", *g2, BLOCK, 1, 1, 0, stream.value,
                                                  ctypes.addressof(attrs), 2))
    ok(lib.cuLaunchKernelEx(cfg, c_u64(fn["kplain"]), args(d2, SALTS[6]), None), "launch ex")
    g = c_u64()
    ok(lib.cuStreamEndCapture(stream, P(g)), "end capture")
    nodes, count = (c_u64 * 4)(), ctypes.c_size_t(4)
    ok(lib.cuGraphGetNodes(g, nodes, P(count)))
    R["captured_attrs"] = [get_attr(c_u64(nodes[i]), 4)[1][:12].hex() for i in range(count.value)]
    R["captured_priority"] = sorted(struct.unpack_from("<i", get_attr(c_u64(nodes[i]), 8)[1])[0]
                                    for i in range(count.value))
    run_graph(g)
    R["captured_dir"] = read(d1, n1)
    R["captured_attr"] = read(d2, n2)
guarded("captured", captured)

# --- a graph launched into a capturing stream: its kernel node is recorded with its cluster attribute ---
def graph_in_capture():
    grid = (6, 2, 2)
    d, n = buffer(grid)
    inner = new_graph()
    node = add_kernel(inner, "kplain", grid, d, SALTS[7])
    ok(set_attr(node, 4, struct.pack("<3I", 3, 1, 2)), "set")
    r, iex = instantiate(inner)
    ok(r, "instantiate inner")
    ok(lib.cuStreamBeginCapture_v2(stream, 0), "begin capture")
    ok(lib.cuGraphLaunch(iex, stream), "launch inner")
    outer = c_u64()
    ok(lib.cuStreamEndCapture(stream, P(outer)), "end capture")
    run_graph(outer)
    R["graph_in_capture"] = read(d, n)
guarded("graph_in_capture", graph_in_capture)

# --- attribute round trips and errors -----------------------------------------------------------------
def attributes():
    g = new_graph()
    a, b = add_kernel(g, "knop", (2, 1, 1)), add_kernel(g, "knop", (4, 1, 1))     # grids its (2, 1, 1) divides
    # each attribute's member of the CUlaunchAttributeValue union (cuda.h), by id
    size = {1: 32, 2: 4, 3: 4, 4: 12, 5: 4, 6: 4, 7: 16, 8: 4, 9: 2, 10: 4, 11: 12, 12: 16, 13: 16, 14: 4, 16: 4}
    R["defaults"] = {i: [r, v[:n].hex()] for i, n in size.items() for r, v in [get_attr(a, i)]}
    window = struct.pack("<QQfII", 0x7000_0000_1000, 4096, 0.5, 1, 2)          # CUaccessPolicyWindow
    domain_map = struct.pack("<BB", 0, 1)
    sets = {1: window, 2: struct.pack("<i", 1), 4: struct.pack("<3I", 2, 1, 1), 5: struct.pack("<I", 1),
            8: struct.pack("<i", -3), 9: domain_map, 10: struct.pack("<I", 1)}
    R["set"] = {i: set_attr(a, i, raw) for i, raw in sets.items()}
    R["read_back"] = {i: get_attr(a, i)[1][:len(raw)].hex() for i, raw in sets.items()}
    R["want_back"] = {i: raw.hex() for i, raw in sets.items()}
    R["copy"] = lib.cuGraphKernelNodeCopyAttributes(b, a)
    R["copied"] = {i: get_attr(b, i)[1][:len(raw)].hex() for i, raw in sets.items()}
    # the copy is a copy: changing the source later leaves the destination as it was
    set_attr(a, 8, struct.pack("<i", 5))
    R["copy_independent"] = get_attr(b, 8)[1][:4].hex()
    R["unknown_get"] = get_attr(a, 99)[0]
    R["unknown_set"] = set_attr(a, 99, b"")
    R["null_value_get"] = lib.cuGraphKernelNodeGetAttribute(a, 4, None)
    R["null_value_set"] = lib.cuGraphKernelNodeSetAttribute(a, 4, None)
    empty = c_u64()
    ok(lib.cuGraphAddEmptyNode(P(empty), g, None, ctypes.c_size_t(0)))
    R["empty_get"] = get_attr(empty, 4)[0]
    R["empty_set"] = set_attr(empty, 4, struct.pack("<3I", 1, 1, 1))
    R["empty_copy"] = [lib.cuGraphKernelNodeCopyAttributes(empty, a), lib.cuGraphKernelNodeCopyAttributes(a, empty)]
    pfn, status = ctypes.c_void_p(), ctypes.c_int(-1)
    R["procaddr"] = [lib.cuGetProcAddress_v2(name, P(pfn), 12000, c_u64(0), P(status)) == 0 and bool(pfn.value)
                     and status.value == 0 for name in (b"cuGraphKernelNodeSetAttribute",
                                                        b"cuGraphKernelNodeGetAttribute",
                                                        b"cuGraphKernelNodeCopyAttributes")]
guarded("attributes", attributes)

# --- bad shapes: where an H100 answers CUDA_ERROR_INVALID_CLUSTER_SIZE (tests/data/nvidia_graph_cluster_answers.json)
def bad_shapes():
    out = {}
    def try_graph(tag, f, grid, attr=None, coop=False):
        # [the attribute's code, what the node then holds, the instantiation's code]
        g = new_graph()
        node = add_kernel(g, f, grid)
        r_set = None
        if attr is not None:
            r_set = set_attr(node, 4, struct.pack("<3I", *attr))
        if coop:
            ok(set_attr(node, 2, struct.pack("<i", 1)), tag)
        out[tag] = [r_set, list(struct.unpack_from("<3I", get_attr(node, 4)[1])), instantiate(g)[0]]
    try_graph("not_dividing", "knop", (6, 2, 2), (4, 1, 1))
    try_graph("zero_dim", "knop", (6, 2, 2), (0, 1, 1))
    try_graph("size9", "knop", (6, 6, 1), (3, 3, 1))
    try_graph("size8", "knop", (8, 2, 1), (4, 2, 1))
    try_graph("fixed_attr_disagrees", "knopdir", (4, 2, 2), (2, 1, 1))
    try_graph("fixed_attr_agrees", "knopdir", (4, 2, 2), (2, 2, 1))
    try_graph("zero_is_no_attribute", "knop", (5, 1, 1), (0, 0, 0))
    try_graph("coop_small", "knop", (2, 1, 1), coop=True)
    # a __cluster_dims__ kernel whose grid its clusters do not divide: refused when the node is added, or given
    # those parameters (the node keeps its old ones)
    g, n = new_graph(), c_u64()
    out["fixed_grid_not_dividing"] = lib.cuGraphAddKernelNode_v2(P(n), g, None, ctypes.c_size_t(0),
                                                                 node_params("knopdir", (3, 2, 2), None, 0))
    node = add_kernel(g, "knopdir", (4, 2, 2))
    out["fixed_set_params"] = lib.cuGraphKernelNodeSetParams_v2(node, node_params("knopdir", (3, 2, 2), None, 0))
    out["fixed_set_params_then"] = instantiate(g)[0]
    # a grid the node's cluster attribute does not divide, given after it: the instantiation's error
    g = new_graph()
    node = add_kernel(g, "knop", (6, 2, 2))
    ok(set_attr(node, 4, struct.pack("<3I", 3, 1, 1)))
    ok(lib.cuGraphKernelNodeSetParams_v2(node, node_params("knop", (5, 2, 2), None, 0)))
    out["grid_after_attribute"] = instantiate(g)[0]
    # a priority out of the device's range is kept clamped
    ok(set_attr(node, 8, struct.pack("<i", 3)))
    out["priority_3"] = struct.unpack_from("<i", get_attr(node, 8)[1])[0]
    ok(set_attr(node, 8, struct.pack("<i", -9)))
    out["priority_-9"] = struct.unpack_from("<i", get_attr(node, 8)[1])[0]
    out["get_id0"] = get_attr(node, 0)[0]
    sms, per_sm = ctypes.c_int(), ctypes.c_int()
    ok(lib.cuDeviceGetAttribute(P(sms), 16, 0))
    ok(lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(P(per_sm), c_u64(fn["knop"]), BLOCK, ctypes.c_size_t(0)))
    try_graph("coop_too_large", "knop", (sms.value * per_sm.value + 1, 1, 1), coop=True)
    # a bad shape in a child graph is the parent's instantiation's error
    too_large = (sms.value * per_sm.value + 1, 1, 1)
    child = new_graph()
    node = add_kernel(child, "knop", too_large)
    ok(set_attr(node, 2, struct.pack("<i", 1)))
    parent, cn = new_graph(), c_u64()
    ok(lib.cuGraphAddChildGraphNode(P(cn), parent, None, ctypes.c_size_t(0), child))
    out["in_child_graph"] = instantiate(parent)[0]
    # cuGraphInstantiate names the node
    g = new_graph()
    node = add_kernel(g, "knop", too_large)
    ok(set_attr(node, 2, struct.pack("<i", 1)))
    ex, err = c_u64(), c_u64(1)
    log = ctypes.create_string_buffer(64)
    out["instantiate_v1"] = [lib.cuGraphInstantiate_v2(P(ex), g, P(err), log, ctypes.c_size_t(64)),
                             err.value == node.value, len(log.value) > 0]
    # and cuGraphInstantiateWithParams: CUDA_GRAPH_INSTANTIATE_PARAMS {flags, hUploadStream, hErrNode_out,
    # result_out}: the node, and CUDA_GRAPH_INSTANTIATE_ERROR (1); a good graph gets SUCCESS (0) and no node
    prm = ctypes.create_string_buffer(struct.pack("<QQQi4x", 0, 0, 7, 9), 32)
    rc = lib.cuGraphInstantiateWithParams(P(ex), g, prm)
    _, _, bad_node, result = struct.unpack("<QQQi4x", prm.raw)
    good = new_graph()
    add_kernel(good, "knop", (6, 1, 1))
    prm2 = ctypes.create_string_buffer(struct.pack("<QQQi4x", 0, 0, 7, 9), 32)
    rc2 = lib.cuGraphInstantiateWithParams(P(ex), good, prm2)
    _, _, none_node, result2 = struct.unpack("<QQQi4x", prm2.raw)
    out["instantiate_with_params"] = [rc, bad_node == node.value, result, rc2, none_node, result2]
    R["bad"] = out
guarded("bad_shapes", bad_shapes)
print("RESULT " + json.dumps(R))
"""


@pytest.fixture(scope="module")
def results(shim_libdir):
    salts = [random.randrange(1, 1 << 31) for _ in range(8)]
    code = SCENARIO % dict(ptx=PTX, salts=salts, block=BLOCK, words=WORDS)
    r = run_py(shim_libdir, code, timeout=600, ZLUDA_CC="9.0")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT "):])
    out["salts"] = salts
    return out


def _check(results, key, grid, cluster, salt, explicit=True):
    assert key + "_error" not in results, results.get(key + "_error")
    got = np.array(results[key], dtype=np.uint32).reshape(-1, WORDS)
    want = expected(grid, cluster, salt, explicit)
    bad = np.argwhere(got != want)
    assert not len(bad), f"{len(bad)} wrong words, first (thread, word): {bad[:4].tolist()}, " \
                         f"got {got[bad[0][0]].tolist()} want {want[bad[0][0]].tolist()}"


def test_cluster_dims_kernel_in_a_kernel_node(results):
    _check(results, "dir_node", (4, 2, 2), (2, 2, 1), results["salts"][0])


def test_cluster_dimension_attribute_on_a_kernel_node(results):
    assert results.get("attr_set") == SUCCESS
    _check(results, "attr_node", (6, 2, 2), (3, 1, 2), results["salts"][1])


def test_exec_set_params_keeps_the_cluster_attribute(results):
    _check(results, "exec_set_params", (6, 2, 2), (3, 1, 2), results["salts"][2])
    assert results["exec_set_bad"] == INVALID_CLUSTER_SIZE
    _check(results, "exec_after_bad", (6, 2, 2), (3, 1, 2), results["salts"][2])


def test_set_params_keeps_the_cluster_attribute(results):
    assert results["set_params_attr"] == np.array([3, 1, 2], "<u4").tobytes().hex()
    _check(results, "set_params", (6, 2, 2), (3, 1, 2), results["salts"][3])


def test_node_without_clusters(results):
    _check(results, "plain_node", (3, 2, 1), (1, 1, 1), results["salts"][4], explicit=False)


def test_captured_cluster_launches(results):
    _check(results, "captured_dir", (4, 2, 2), (2, 2, 1), results["salts"][5])
    _check(results, "captured_attr", (6, 2, 2), (3, 1, 2), results["salts"][6])
    # the captured launches' attributes: none given to cuLaunchKernel, cuLaunchKernelEx's cluster dimension
    assert sorted(results["captured_attrs"]) == sorted([bytes(12).hex(),
                                                        np.array([3, 1, 2], "<u4").tobytes().hex()])
    assert results["captured_priority"] == [-3, 0]      # cuLaunchKernelEx's priority hint kept, none for the other


def test_graph_launched_into_a_capture(results):
    _check(results, "graph_in_capture", (6, 2, 2), (3, 1, 2), results["salts"][7])


def test_attribute_round_trip(results):
    assert "attributes_error" not in results, results.get("attributes_error")
    assert all(r == SUCCESS and not int(v, 16) for r, v in results["defaults"].values()), results["defaults"]
    assert all(r == SUCCESS for r in results["set"].values()), results["set"]
    assert results["read_back"] == results["want_back"]
    assert results["copy"] == SUCCESS
    assert results["copied"] == results["want_back"]
    assert results["copy_independent"] == np.array([-3], "<i4").tobytes().hex()


def test_attribute_errors(results):
    assert "attributes_error" not in results, results.get("attributes_error")
    assert results["unknown_get"] == results["unknown_set"] == INVALID_VALUE
    assert results["null_value_get"] == results["null_value_set"] == INVALID_VALUE
    assert results["empty_get"] == results["empty_set"] == INVALID_VALUE
    assert results["empty_copy"] == [INVALID_VALUE, INVALID_VALUE]
    assert results["procaddr"] == [True, True, True]


def test_bad_cluster_shapes(results):
    """Each answered where an H100 answers it (tests/data/nvidia_graph_cluster_answers.json: a refused cluster
    attribute leaves the node without one, and its graph instantiates and runs clusters of one CTA)."""
    assert "bad_shapes_error" not in results, results.get("bad_shapes_error")
    refused = [INVALID_CLUSTER_SIZE, [0, 0, 0], SUCCESS]
    assert results["bad"] == {
        "not_dividing": refused, "zero_dim": refused, "size9": refused, "size8": [SUCCESS, [4, 2, 1], SUCCESS],
        "fixed_attr_disagrees": refused, "fixed_attr_agrees": [SUCCESS, [2, 2, 1], SUCCESS],
        "zero_is_no_attribute": [SUCCESS, [0, 0, 0], SUCCESS], "coop_small": [None, [0, 0, 0], SUCCESS],
        "fixed_grid_not_dividing": INVALID_CLUSTER_SIZE, "fixed_set_params": INVALID_CLUSTER_SIZE,
        "fixed_set_params_then": SUCCESS, "grid_after_attribute": INVALID_CLUSTER_SIZE,
        "priority_3": 0, "priority_-9": -5, "get_id0": INVALID_VALUE,
        "coop_too_large": [None, [0, 0, 0], COOPERATIVE_TOO_LARGE], "in_child_graph": COOPERATIVE_TOO_LARGE,
        "instantiate_v1": [COOPERATIVE_TOO_LARGE, True, True],
        "instantiate_with_params": [COOPERATIVE_TOO_LARGE, True, 1, SUCCESS, 0, 0]}


def test_the_recorded_h100_answers():
    """The probe's own answers that the rules above come from."""
    a = json.loads((Path(__file__).resolve().parents[1] / "data" / "nvidia_graph_cluster_answers.json").read_text())
    assert a["fixed2_grid7"]["add"] == INVALID_CLUSTER_SIZE
    for case in ("plain_attr3_grid8", "plain_attr0", "plain_attr9", "fixed2_attr4", "plain_attr_y2_grid8"):
        assert (a[case]["set"], a[case]["get_val"], a[case]["inst"]) == (INVALID_CLUSTER_SIZE, [0, 0, 0], SUCCESS)
    assert (a["get_id0"], a["unknown_id"], a["empty_node"], a["priority"]) == (1, [1, 1], 1, [0, 0, 0])
    assert a["capture"] == [0, 0, 1, 0, 4, 1, 1, 0, 0, 0] and a["coop_cluster_launch"] == [0, 0]
