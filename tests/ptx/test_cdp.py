"""Device-side launches (CUDA dynamic parallelism, the cudadevrt calls nvcc emits) on the CPU runtime:
children with parameters over fresh random inputs (outputs poisoned, every element checked against numpy),
lazily and eagerly compiled modules; the order nested and tail launches run in; the nesting limit; and the
device runtime's errors (unknown kernel, bad configuration, bad stream, bad flags) through
cudaGetLastError/cudaPeekAtLastError."""

import ctypes
import itertools

import numpy as np
import pytest

import ptx

HEAD = r"""
.version 8.0
.target sm_86
.address_size 64
.extern .func (.param .b64 func_retval0) __cudaCDP2GetParameterBufferV2(.param .b64 f, .param .align 4 .b8 g[12],
    .param .align 4 .b8 b[12], .param .b32 s);
.extern .func (.param .b32 func_retval0) __cudaCDP2LaunchDeviceV2(.param .b64 buf, .param .b64 stream);
.extern .func (.param .b32 func_retval0) __cudaCDP2GetLastError();
.extern .func (.param .b32 func_retval0) __cudaCDP2PeekAtLastError();
.extern .func (.param .b32 func_retval0) __cudaCDP2StreamCreateWithFlags(.param .b64 ps, .param .b32 flags);
"""
TAIL, FIRE_AND_FORGET = 3, 4
_labels = itertools.count()


def launch(func, grid, block, stores, stream="0", err="%err"):
    """PTX that launches `func` (a kernel name or a register holding an address) as nvcc's <<<>>> does;
    stores: (offset, type, value) written into the parameter buffer; `err` gets the launch's result."""
    body = "\n".join(f"    st.{t} [%buf+{off}], {v};" for off, t, v in stores)
    skip = f"SKIP_{next(_labels)}"
    return f"""
    mov.u64 %fn, {func};
    {{
    .param .b64 p0;
    st.param.b64 [p0], %fn;
    .param .align 4 .b8 p1[12];
    st.param.b32 [p1+0], {grid};
    st.param.b32 [p1+4], 1;
    st.param.b32 [p1+8], 1;
    .param .align 4 .b8 p2[12];
    st.param.b32 [p2+0], {block};
    st.param.b32 [p2+4], 1;
    st.param.b32 [p2+8], 1;
    .param .b32 p3;
    st.param.b32 [p3], 0;
    .param .b64 rv;
    call.uni (rv), __cudaCDP2GetParameterBufferV2, (p0, p1, p2, p3);
    ld.param.b64 %buf, [rv];
    }}
    setp.eq.u64 %nobuf, %buf, 0;
    mov.u32 {err}, -1;
    @%nobuf bra {skip};
{body}
    {{
    .param .b64 q0;
    st.param.b64 [q0], %buf;
    .param .b64 q1;
    st.param.b64 [q1], {stream};
    .param .b32 rv2;
    call.uni (rv2), __cudaCDP2LaunchDeviceV2, (q0, q1);
    ld.param.b32 {err}, [rv2];
    }}
{skip}:
"""


def last_error(dst, peek=False):
    name = "__cudaCDP2PeekAtLastError" if peek else "__cudaCDP2GetLastError"
    return f"{{\n    .param .b32 rv;\n    call.uni (rv), {name}, ();\n    ld.param.b32 {dst}, [rv];\n    }}"


# --- children with parameters -----------------------------------------------------------------------------
AXPB = HEAD + r"""
// out[i] = in[i] * a + c for i < n
.visible .entry axpb(.param .u64 out, .param .u64 in, .param .u32 a, .param .u32 c, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<10>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    ld.param.u32 %r1, [a];
    ld.param.u32 %r2, [c];
    ld.param.u32 %r3, [n];
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.u32 %r7, %r4, %r5, %r6;
    setp.ge.u32 %p, %r7, %r3;
    @%p bra DONE;
    mul.wide.u32 %rd3, %r7, 4;
    add.u64 %rd4, %rd2, %rd3;
    ld.global.u32 %r8, [%rd4];
    mad.lo.u32 %r9, %r8, %r1, %r2;
    add.u64 %rd5, %rd1, %rd3;
    st.global.u32 [%rd5], %r9;
DONE:
    ret;
}

// block b launches axpb over its segment [b * seg, b * seg + len[b]) with a = ab[2b], c = ab[2b + 1]
.visible .entry parent(.param .u64 out, .param .u64 in, .param .u64 ab, .param .u64 lens, .param .u32 seg,
                       .param .u64 errs)
{
    .reg .pred %p, %nobuf;
    .reg .b32 %r<12>, %err;
    .reg .b64 %rd<16>, %fn, %buf;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p, %r1, 0;
    @%p bra DONE;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    ld.param.u64 %rd3, [ab];
    ld.param.u64 %rd4, [lens];
    ld.param.u32 %r2, [seg];
    mov.u32 %r3, %ctaid.x;
    mul.lo.u32 %r4, %r3, %r2;
    mul.wide.u32 %rd5, %r4, 4;
    add.u64 %rd6, %rd1, %rd5;
    add.u64 %rd7, %rd2, %rd5;
    mul.wide.u32 %rd8, %r3, 8;
    add.u64 %rd9, %rd3, %rd8;
    ld.global.u32 %r5, [%rd9];
    ld.global.u32 %r6, [%rd9+4];
    mul.wide.u32 %rd10, %r3, 4;
    add.u64 %rd11, %rd4, %rd10;
    ld.global.u32 %r7, [%rd11];
    add.u32 %r8, %r7, 31;
    shr.u32 %r8, %r8, 5;
""" + launch("axpb", "%r8", "32", [(0, "u64", "%rd6"), (8, "u64", "%rd7"), (16, "u32", "%r5"), (20, "u32", "%r6"),
                                  (24, "u32", "%r7")]) + r"""
    ld.param.u64 %rd12, [errs];
    add.u64 %rd13, %rd12, %rd10;
    st.global.u32 [%rd13], %err;
DONE:
    ret;
}
"""


@pytest.mark.parametrize("lazy", [True, False])
def test_children_with_parameters(lazy, tmp_path):
    rng = np.random.default_rng()
    blocks, seg = int(rng.integers(3, 12)), int(rng.integers(40, 300))
    lens = rng.integers(0, seg + 1, blocks).astype(np.uint32)
    full = int(rng.integers(0, blocks))
    lens[full] = seg
    lens[(full + 1 + int(rng.integers(0, blocks - 1))) % blocks] = 0     # one empty segment at least
    src = rng.integers(0, 2**32, blocks * seg, dtype=np.uint32)
    ab = rng.integers(0, 2**32, 2 * blocks, dtype=np.uint32)
    out = np.full(blocks * seg, 0xDEADBEEF, np.uint32)
    errs = np.full(blocks, 0x5A5A5A5A, np.uint32)
    m = ptx.compile(AXPB, lazy=lazy, cache_dir=str(tmp_path))
    m.kernel("parent").launch(blocks, 64, [out, src, ab, lens, seg, errs])
    want = np.full(blocks * seg, 0xDEADBEEF, np.uint32)
    for b in range(blocks):
        s = slice(b * seg, b * seg + int(lens[b]))
        want[s] = (src[s].astype(np.uint64) * int(ab[2 * b]) + int(ab[2 * b + 1])).astype(np.uint32)
    # an empty segment launches a grid of zero blocks: cudaErrorInvalidConfiguration (9), as on a GPU
    np.testing.assert_array_equal(errs, np.where(lens == 0, 9, 0).astype(np.uint32))
    np.testing.assert_array_equal(out, want)
    # the child launched from the host as well, from its own (lazy) object
    out2 = np.full(seg, 0xDEADBEEF, np.uint32)
    m.kernel("axpb").launch((seg + 31) // 32, 32, [out2, src[:seg], 3, 5, seg])
    np.testing.assert_array_equal(out2, (src[:seg] * np.uint32(3) + np.uint32(5)).astype(np.uint32))
    m.close()


# --- order: nested grids complete before their parent's next work; tail launches run last ----------------
ORDER = HEAD + r"""
// log[0]: a ticket counter; rec at depth d stores its ticket at log[1 + 3d], the result of launching its
// child at log[2 + 3d]; mark(d), tail-launched by rec(d), stores its ticket at log[3 + 3d]
.visible .entry mark(.param .u64 log, .param .u32 depth)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [log];
    ld.param.u32 %r1, [depth];
    atom.global.add.u32 %r2, [%rd1], 1;
    mad.lo.u32 %r3, %r1, 3, 3;
    mul.wide.u32 %rd2, %r3, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}

.visible .entry rec(.param .u64 log, .param .u32 depth, .param .u32 max_depth)
{
    .reg .pred %p, %nobuf;
    .reg .b32 %r<8>, %err, %err2;
    .reg .b64 %rd<8>, %fn, %buf;
    ld.param.u64 %rd1, [log];
    ld.param.u32 %r1, [depth];
    ld.param.u32 %r2, [max_depth];
    atom.global.add.u32 %r3, [%rd1], 1;
    mad.lo.u32 %r4, %r1, 3, 1;
    mul.wide.u32 %rd2, %r4, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    setp.ge.u32 %p, %r1, %r2;
    @%p bra DONE;
    add.u32 %r5, %r1, 1;
""" + launch("mark", "1", "1", [(0, "u64", "%rd1"), (8, "u32", "%r1")], stream=str(TAIL), err="%err2") \
    + launch("rec", "1", "1", [(0, "u64", "%rd1"), (8, "u32", "%r5"), (12, "u32", "%r2")]) + r"""
    st.global.u32 [%rd3+4], %err;
DONE:
    ret;
}
"""


def test_nested_and_tail_order_and_depth_limit(tmp_path):
    m = ptx.compile(ORDER, cache_dir=str(tmp_path))
    rng = np.random.default_rng()
    for max_depth in (int(rng.integers(2, 10)), 30):
        log = np.full(1 + 3 * 32, 0xDEADBEEF, np.uint32)
        log[0] = 0
        m.kernel("rec").launch(1, 1, [log, 0, max_depth])
        # grids nest at most 24 deep below the host's: the grid at depth 24 cannot launch (65)
        last = min(max_depth, 24)
        recs = [int(log[1 + 3 * d]) for d in range(last + 1)]
        assert recs == list(range(last + 1)), recs
        launched = [int(log[2 + 3 * d]) for d in range(last)]
        assert launched == [0] * last, launched
        if max_depth > 24:
            assert log[2 + 3 * 24] == 65
        # mark(d) waits for everything rec(d) launched, mark(d + 1) included: innermost first
        marks = [int(log[3 + 3 * d]) for d in range(last)]
        want = [last + 1 + (last - 1 - d) for d in range(last)]
        if max_depth > 24:
            # rec(24) launched no tail either: its mark launch failed too
            assert log[3 + 3 * 24] == 0xDEADBEEF
        assert marks == want, (marks, want)
        assert int(log[0]) == 2 * last + 1
    m.close()


# --- the device runtime's errors ------------------------------------------------------------------------
ERRORS = HEAD + r"""
.visible .entry nop() { ret; }

.visible .entry errs(.param .u64 res)
{
    .reg .pred %nobuf;
    .reg .b32 %r<4>, %err;
    .reg .b64 %rd<4>, %fn, %buf;
    ld.param.u64 %rd1, [res];
    // an address that is no kernel: no parameter buffer, cudaErrorInvalidDeviceFunction
""" + launch("0x1234", "1", "1", []) + r"""
    st.global.u32 [%rd1], %err;
    st.global.u64 [%rd1+48], %buf;
""" + last_error("%r1") + r"""
    st.global.u32 [%rd1+4], %r1;
""" + last_error("%r1") + r"""
    st.global.u32 [%rd1+8], %r1;
    // 2048 threads in a block: cudaErrorInvalidConfiguration from the launch, kept until taken
""" + launch("nop", "1", "2048", []) + r"""
    st.global.u32 [%rd1+12], %err;
""" + last_error("%r1", peek=True) + r"""
    st.global.u32 [%rd1+16], %r1;
""" + last_error("%r1") + r"""
    st.global.u32 [%rd1+20], %r1;
""" + last_error("%r1") + r"""
    st.global.u32 [%rd1+24], %r1;
    // a stream this device runtime never made: cudaErrorInvalidResourceHandle
""" + launch("nop", "1", "1", [], stream="0x777") + r"""
    st.global.u32 [%rd1+28], %err;
    // device streams are non-blocking only: flags 0 is refused
    {
    .param .b64 s0;
    add.u64 %rd2, %rd1, 56;
    st.param.b64 [s0], %rd2;
    .param .b32 s1;
    st.param.b32 [s1], 0;
    .param .b32 rv;
    call.uni (rv), __cudaCDP2StreamCreateWithFlags, (s0, s1);
    ld.param.b32 %r2, [rv];
    }
    st.global.u32 [%rd1+32], %r2;
    {
    .param .b64 s0;
    add.u64 %rd2, %rd1, 56;
    st.param.b64 [s0], %rd2;
    .param .b32 s1;
    st.param.b32 [s1], 1;
    .param .b32 rv;
    call.uni (rv), __cudaCDP2StreamCreateWithFlags, (s0, s1);
    ld.param.b32 %r2, [rv];
    }
    st.global.u32 [%rd1+36], %r2;
    // a launch into that stream works
    ld.global.u64 %rd3, [%rd1+56];
""" + launch("nop", "1", "1", [], stream="%rd3") + r"""
    st.global.u32 [%rd1+40], %err;
    ret;
}
"""


def test_device_runtime_errors(tmp_path):
    m = ptx.compile(ERRORS, cache_dir=str(tmp_path))
    res = np.full(8, 0xDEADBEEFDEADBEEF, np.uint64)
    m.kernel("errs").launch(1, 1, [res])
    words = res.view(np.uint32)
    # -1: no buffer, so no launch; then 98 taken once
    assert [int(w) for w in words[:3]] == [0xFFFFFFFF, 98, 0]
    assert int(res[6]) == 0                      # the NULL parameter buffer
    assert [int(w) for w in words[3:7]] == [9, 9, 9, 0]
    assert int(words[7]) == 400
    assert int(words[8]) == 1 and int(words[9]) == 0
    assert int(res[7]) >> 48 != 0 and int(words[10]) == 0
    m.close()


def test_runtime_symbols_resolve():
    """Every device runtime function the code generator may call is exported by the CPU runtime."""
    from ptx import runtime
    from ptx.codegen.ops_cdp import CALLS
    syms = runtime.symbols()
    for fn, _, _ in CALLS.values():
        assert syms.get(fn), fn
    lib = runtime.library()
    lib.ptx_rt_cdp_error_text.restype = ctypes.c_char_p
    assert lib.ptx_rt_cdp_error_text(65, 1) == b"cudaErrorLaunchMaxDepthExceeded"
    assert lib.ptx_rt_cdp_error_text(12345, 0) == b"unrecognized error code"


# --- device-side copies and fills, in stream order with kernels --------------------------------------------
COPIES = HEAD + r"""
.extern .func (.param .b32 func_retval0) __cudaCDP2MemcpyAsync(.param .b64 d, .param .b64 s, .param .b64 n,
    .param .b32 kind, .param .b64 stream);
.extern .func (.param .b32 func_retval0) __cudaCDP2MemsetAsync(.param .b64 d, .param .b32 v, .param .b64 n,
    .param .b64 stream);

// dst[i] += 1 for i < n: behind the copy in the same stream, it sees the copied bytes
.visible .entry inc(.param .u64 dst, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [dst];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
LOOP:
    setp.ge.u32 %p, %r2, %r1;
    @%p bra DONE;
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd3, %rd1, %rd2;
    ld.global.u32 %r3, [%rd3];
    add.u32 %r3, %r3, 1;
    st.global.u32 [%rd3], %r3;
    add.u32 %r2, %r2, 1;
    bra LOOP;
DONE:
    ret;
}

// copy n words src -> dst, then inc(dst); fill `fill` with byte v; results of the calls at res
.visible .entry copies(.param .u64 dst, .param .u64 src, .param .u32 n, .param .u64 fill, .param .u32 v,
                       .param .u64 fill_n, .param .u64 res)
{
    .reg .pred %nobuf;
    .reg .b32 %r<4>, %err;
    .reg .b64 %rd<10>, %fn, %buf;
    ld.param.u64 %rd1, [dst];
    ld.param.u64 %rd2, [src];
    ld.param.u32 %r1, [n];
    ld.param.u64 %rd3, [fill];
    ld.param.u32 %r2, [v];
    ld.param.u64 %rd4, [fill_n];
    ld.param.u64 %rd5, [res];
    mul.wide.u32 %rd6, %r1, 4;
    {
    .param .b64 a; st.param.b64 [a], %rd1;
    .param .b64 b; st.param.b64 [b], %rd2;
    .param .b64 c; st.param.b64 [c], %rd6;
    .param .b32 d; st.param.b32 [d], 3;
    .param .b64 e; st.param.b64 [e], 0;
    .param .b32 rv;
    call.uni (rv), __cudaCDP2MemcpyAsync, (a, b, c, d, e);
    ld.param.b32 %r3, [rv];
    }
    st.global.u32 [%rd5], %r3;
""" + launch("inc", "1", "1", [(0, "u64", "%rd1"), (8, "u32", "%r1")]) + r"""
    st.global.u32 [%rd5+4], %err;
    {
    .param .b64 a; st.param.b64 [a], %rd3;
    .param .b32 b; st.param.b32 [b], %r2;
    .param .b64 c; st.param.b64 [c], %rd4;
    .param .b64 e; st.param.b64 [e], 0;
    .param .b32 rv;
    call.uni (rv), __cudaCDP2MemsetAsync, (a, b, c, e);
    ld.param.b32 %r3, [rv];
    }
    st.global.u32 [%rd5+8], %r3;
    // a direction that does not exist
    {
    .param .b64 a; st.param.b64 [a], %rd1;
    .param .b64 b; st.param.b64 [b], %rd2;
    .param .b64 c; st.param.b64 [c], 4;
    .param .b32 d; st.param.b32 [d], 9;
    .param .b64 e; st.param.b64 [e], 0;
    .param .b32 rv;
    call.uni (rv), __cudaCDP2MemcpyAsync, (a, b, c, d, e);
    ld.param.b32 %r3, [rv];
    }
    st.global.u32 [%rd5+12], %r3;
    ret;
}
"""


def test_device_copies_and_fills(tmp_path):
    from ptx.errors import KernelFault
    rng = np.random.default_rng()
    m = ptx.compile(COPIES, cache_dir=str(tmp_path))
    n, fill_n = int(rng.integers(1, 3000)), int(rng.integers(1, 5000))
    src = rng.integers(0, 2**32, n, dtype=np.uint32)
    dst = np.full(n + 8, 0xDEADBEEF, np.uint32)
    fill = np.full(fill_n + 16, 0x77, np.uint8)
    v = int(rng.integers(0, 2**32))
    res = np.full(4, 0xDEADBEEF, np.uint32)
    m.kernel("copies").launch(1, 1, [dst, src, n, fill, v, fill_n, res])
    np.testing.assert_array_equal(res, [0, 0, 0, 21])      # 21: cudaErrorInvalidMemcpyDirection
    want = np.full(n + 8, 0xDEADBEEF, np.uint32)
    want[:n] = src + np.uint32(1)
    np.testing.assert_array_equal(dst, want)
    want_fill = np.full(fill_n + 16, 0x77, np.uint8)
    want_fill[:fill_n] = v & 0xFF
    np.testing.assert_array_equal(fill, want_fill)
    # a copy to an address nothing is mapped at ends the launch as an illegal address would
    with pytest.raises(KernelFault) as e:
        m.kernel("copies").launch(1, 1, [0x10, src, n, fill, v, fill_n, res])
    assert e.value.kind == "fault"
    m.close()
