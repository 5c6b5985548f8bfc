"""CUDA 13.1-13.5 through the real libcuda.so.1 (ctypes, a fresh process each): the driver version, the new
entry points cudart 13.5 resolves through cuGetProcAddress, and the attributes ZLUDA_CC selects."""

import random

import pytest

from chost import run_py
from zluda_py.backends.arch_traits import TRAITS
from zluda_py.decls import DATA


def check(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_driver_version_is_the_declarations_release(shim_libdir):
    out = check(run_py(shim_libdir, """
        v = ctypes.c_int()
        print(lib.cuDriverGetVersion(P(v)), v.value)
    """))
    assert out.split() == ["0", str(DATA["cuda_version"])] and DATA["cuda_version"] == 13050


def test_proc_address_hands_out_the_13_x_abi_versions(shim_libdir):
    # cudart 13.5 asks with its own version: the four-argument cuLaunchHostFunc and cuGraphAddNode_v3
    out = check(run_py(shim_libdir, """
        ok(lib.cuInit(0))
        for name, version in ((b"cuLaunchHostFunc", 13050), (b"cuLaunchHostFunc", 13000),
                              (b"cuGraphAddNode", 13050), (b"cuGraphAddNode", 12030), (b"cuFuncGetParamCount", 13050),
                              (b"cuFuncGetParamCount", 13010)):
            pfn, status = ctypes.c_void_p(), ctypes.c_int()
            r = lib.cuGetProcAddress_v2(name, P(pfn), version, ctypes.c_uint64(0), P(status))
            same = {}
            for sym in (b"cuLaunchHostFunc", b"cuLaunchHostFunc_v2", b"cuGraphAddNode_v2", b"cuGraphAddNode_v3",
                        b"cuFuncGetParamCount"):
                if pfn.value and ctypes.cast(getattr(lib, sym.decode()), ctypes.c_void_p).value == pfn.value:
                    same = sym.decode()
            print(name.decode(), version, r, status.value, same or "-")
    """))
    rows = [line.split() for line in out.splitlines()]
    assert rows == [["cuLaunchHostFunc", "13050", "0", "0", "cuLaunchHostFunc_v2"],
                    ["cuLaunchHostFunc", "13000", "0", "0", "cuLaunchHostFunc"],
                    ["cuGraphAddNode", "13050", "0", "0", "cuGraphAddNode_v3"],
                    ["cuGraphAddNode", "12030", "0", "0", "cuGraphAddNode_v2"],
                    ["cuFuncGetParamCount", "13050", "0", "0", "cuFuncGetParamCount"],
                    # 500: CUDA_ERROR_NOT_FOUND, 2: CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                    ["cuFuncGetParamCount", "13010", "500", "2", "-"]]


PTX = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry five(.param .u64 a, .param .u32 b, .param .align 16 .b8 c[24], .param .u8 d, .param .f64 e)
{
  ret;
}
"""


def test_host_func_v2_param_counts_ids_resources_and_copies(shim_libdir):
    n = random.randint(1, 4096)
    out = check(run_py(shim_libdir, f"""
        primary()
        PTX = {PTX!r}.encode()
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        ok(lib.cuModuleLoadData(P(mod), PTX)); ok(lib.cuModuleGetFunction(P(fn), mod, b"five"))
        count = ctypes.c_size_t(99)
        ok(lib.cuFuncGetParamCount(fn, P(count)), "cuFuncGetParamCount"); print("params", count.value)
        lib_, kern = ctypes.c_void_p(), ctypes.c_void_p()
        ok(lib.cuLibraryLoadData(P(lib_), PTX, None, None, 0, None, None, 0))
        ok(lib.cuLibraryGetKernel(P(kern), lib_, b"five"))
        count.value = 99
        ok(lib.cuKernelGetParamCount(kern, P(count)), "cuKernelGetParamCount"); print("kparams", count.value)
        print("nullcount", lib.cuFuncGetParamCount(fn, None))

        # host functions in stream order, both sync modes; an unknown mode is refused
        stream = ctypes.c_void_p()
        ok(lib.cuStreamCreate(P(stream), 0))
        seen = []
        CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        cb = CB(lambda u: seen.append(u))
        ok(lib.cuLaunchHostFunc_v2(stream, cb, ctypes.c_void_p(7), 0))
        ok(lib.cuLaunchHostFunc_v2(stream, cb, ctypes.c_void_p(8), 1))
        print("badmode", lib.cuLaunchHostFunc_v2(stream, cb, ctypes.c_void_p(9), 2))
        ok(lib.cuStreamSynchronize(stream)); print("host", seen)

        # copy with attributes: every byte lands, a NULL attribute is refused
        src, dst = ctypes.c_uint64(), ctypes.c_uint64()
        ok(lib.cuMemAlloc_v2(P(src), {n})); ok(lib.cuMemAlloc_v2(P(dst), {n}))
        import os; data = os.urandom({n})
        ok(lib.cuMemcpyHtoD_v2(src, data, {n})); ok(lib.cuMemsetD8_v2(dst, 0xA5, {n}))
        attr = (ctypes.c_uint8 * 24)()
        ok(lib.cuMemcpyWithAttributesAsync(dst, src, ctypes.c_size_t({n}), attr, stream))
        print("nullattr", lib.cuMemcpyWithAttributesAsync(dst, src, ctypes.c_size_t({n}), None, stream))
        ok(lib.cuStreamSynchronize(stream))
        back = ctypes.create_string_buffer({n})
        ok(lib.cuMemcpyDtoH_v2(back, dst, {n})); print("copy", back.raw == data)

        # the stream's SM resource is the device's
        res = (ctypes.c_uint8 * 144)()
        ok(lib.cuStreamGetDevResource(stream, res, 1)); sms = ctypes.c_int()
        ok(lib.cuDeviceGetAttribute(P(sms), 16, 0))
        print("sms", int.from_bytes(bytes(res[96:100]), "little") == sms.value, lib.cuStreamGetDevResource(stream, res, 7))

        # graph identities: distinct graph ids, local node ids in the graph, tools ids unique, the containing graph
        g1, g2 = ctypes.c_void_p(), ctypes.c_void_p()
        ok(lib.cuGraphCreate(P(g1), 0)); ok(lib.cuGraphCreate(P(g2), 0))
        nodes = []
        for g in (g1, g1, g2):
            node = ctypes.c_void_p()
            params = (ctypes.c_uint8 * 256)()
            params[0] = 5                                   # CU_GRAPH_NODE_TYPE_EMPTY
            ok(lib.cuGraphAddNode_v3(P(node), g, None, None, 0, params), "cuGraphAddNode_v3")
            nodes.append(node)
        ids = []
        for g in (g1, g2):
            i = ctypes.c_uint(); ok(lib.cuGraphGetId(g, P(i))); ids.append(i.value)
        locs, tools = [], []
        for node in nodes:
            i, t, owner = ctypes.c_uint(), ctypes.c_ulonglong(), ctypes.c_void_p()
            ok(lib.cuGraphNodeGetLocalId(node, P(i))); ok(lib.cuGraphNodeGetToolsId(node, P(t)))
            ok(lib.cuGraphNodeGetContainingGraph(node, P(owner)))
            locs.append(i.value); tools.append(t.value)
            print("owner", owner.value == (g1.value if node is not nodes[2] else g2.value))
        ex = ctypes.c_void_p(); ok(lib.cuGraphInstantiateWithFlags(P(ex), g1, 0))
        e = ctypes.c_uint(); ok(lib.cuGraphExecGetId(ex, P(e)))
        again = ctypes.c_uint(); ok(lib.cuGraphGetId(g1, P(again)))
        print("ids", ids[0] != ids[1], again.value == ids[0], e.value not in ids, locs[0] != locs[1],
              len(set(tools)) == 3, lib.cuGraphGetId(g1, None))
    """))
    lines = out.splitlines()
    assert "params 5" in lines and "kparams 5" in lines and "nullcount 1" in lines
    assert "badmode 1" in lines and "host [7, 8]" in lines
    assert "nullattr 1" in lines and "copy True" in lines
    assert "sms True 914" in lines             # 914: CUDA_ERROR_INVALID_RESOURCE_TYPE
    assert lines.count("owner True") == 3
    assert "ids True True True True True 1" in lines


@pytest.mark.parametrize("cc", ["12.0", "12.1", "9.0", "8.9", "7.5", "13.0"])
def test_attributes_follow_the_architecture(shim_libdir, cc):
    """ZLUDA_CC selects NVIDIA's per-architecture limits (CCCL's arch_traits.h); 13.0, beyond every known
    architecture, has the newest one's (12.x)."""
    major, minor = map(int, cc.split("."))
    out = check(run_py(shim_libdir, """
        ok(lib.cuInit(0))
        for a in (75, 76, 81, 97, 106, 39, 111, 120, 127, 12, 10, 8, 150, 149, 157, 16):
            v = ctypes.c_int(-1)
            ok(lib.cuDeviceGetAttribute(P(v), a, 0))
            print(a, v.value)
    """, ZLUDA_CC=cc))
    got = {int(a): int(v) for a, v in (line.split() for line in out.splitlines())}
    t = TRAITS.get((major, minor)) or TRAITS[(12, 1)]
    assert (got[75], got[76]) == (major, minor)
    assert got[81] == t.shared_per_sm and got[97] == t.shared_per_sm - t.reserved_shared
    assert got[106] == t.blocks_per_sm and got[39] == t.threads_per_sm and got[111] == t.reserved_shared
    assert got[120] == got[127] == int(major >= 9)            # clusters, tensor maps from Hopper on
    assert got[12] == 65536 and got[10] == 32 and got[8] == 48 * 1024
    assert got[150] == got[97] and got[149] == 1 and got[157] == got[16]
    if (major, minor) == (12, 0):
        # an sm_120 part (RTX 50 series, RTX PRO Blackwell): 100 KiB per SM, 99 KiB per block, 24 blocks
        assert (got[81], got[97], got[106], got[39]) == (102400, 101376, 24, 1536)
