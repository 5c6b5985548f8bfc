"""End-to-end tests of the host code generator: nvcc's PTX for whole kernels (vector add, tiled matmul,
barrier and shuffle reductions, atomics, device functions, printf, trap/assert, division by zero),
compiled with ptx.compile and launched on the CPU runtime, checked against numpy."""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import ptx  # noqa: E402

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda", "codegen_e2e.cu")


def _nvcc():
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc")
                                    else None)


@pytest.fixture(scope="module")
def ptx_text(tmp_path_factory):
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc not installed")
    out = tmp_path_factory.mktemp("e2e") / "codegen_e2e.ptx"
    subprocess.run([nvcc, "-ptx", "-arch=compute_86", SOURCE, "-o", str(out)], check=True)
    return out.read_text()


@pytest.fixture(scope="module")
def mod(ptx_text):
    return ptx.compile(ptx_text, target="host")


@pytest.fixture
def rng():
    return np.random.default_rng()


def test_vector_add(mod, rng):
    n = 100_003
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    c = np.full(n, np.nan, np.float32)
    mod.kernel("vecAdd").launch(((n + 255) // 256,), (256,), [a, b, c, n])
    np.testing.assert_array_equal(c, a + b)


def test_tiled_matmul_with_barriers(mod, rng):
    n = 96
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.full((n, n), np.nan, np.float32)
    k = mod.kernel("matmul")
    assert k.static_shared_bytes >= 2048
    k.launch((n // 16, n // 16), (16, 16), [a, b, c, n])
    # each element is a chain of fma.rn in k order: compare with a float64 product loosely, exactly
    # with a float32 fma chain for a few elements
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    for i, j in [(0, 0), (n - 1, n - 1), (17, 63)]:
        acc = np.float32(0)
        for kk in range(n):
            acc = np.float32(np.float64(a[i, kk]) * np.float64(b[kk, j]) + np.float64(acc))
        assert c[i, j] == acc


def test_block_reduction_barriers_in_loop(mod, rng):
    n, bs = 10_000, 256
    nb = (n + bs - 1) // bs
    x = rng.random(n, dtype=np.float32)
    out = np.full(nb, np.nan, np.float32)
    mod.kernel("reduce").launch(nb, bs, [x, out, n], shared_bytes=bs * 4)
    want = [np.sum(x[i * bs:(i + 1) * bs], dtype=np.float64) for i in range(nb)]
    np.testing.assert_allclose(out, want, rtol=1e-5)


def _warp_reference(xs):
    """shfl.down (clamp 31) then shfl.bfly reductions of one warp, float32 as the GPU rounds."""
    v = xs.astype(np.float32).copy()
    for o in (16, 8, 4, 2, 1):
        src = np.array([v[lane + o] if lane + o <= 31 else v[lane] for lane in range(32)], np.float32)
        v = (v + src).astype(np.float32)
    w = v.copy()
    for o in (16, 8, 4, 2, 1):
        w = (w + w[np.arange(32) ^ o]).astype(np.float32)
    return v[0], w[1]


def test_warp_shuffle_reduction(mod, rng):
    n, bs = 1000, 128
    nb = (n + bs - 1) // bs
    x = rng.random(n, dtype=np.float32)
    out = np.zeros(2, np.float32)
    mod.kernel("shflreduce").launch(nb, bs, [x, out, n])
    padded = np.zeros(nb * bs, np.float32)
    padded[:n] = x
    parts = [_warp_reference(padded[i:i + 32]) for i in range(0, nb * bs, 32)]
    np.testing.assert_allclose(out, [sum(p[0] for p in parts), sum(p[1] for p in parts)], rtol=1e-5)


def test_atomics_histogram_shared_and_global(mod, rng):
    n = 20_000
    vals = rng.integers(0, 1 << 31, n, dtype=np.uint32)
    h = np.zeros(64, np.uint32)
    mod.kernel("hist").launch((n + 127) // 128, 128, [vals, h, n])
    np.testing.assert_array_equal(h, np.bincount(vals & 63, minlength=64))


def test_device_functions_and_recursion(mod):
    o = np.full(24, -1, np.int32)
    fo = np.full(24, np.nan, np.float32)
    mod.kernel("devfn").launch(1, 24, [o, fo])
    fib = [0, 1]
    while len(fib) < 24:
        fib.append(fib[-1] + fib[-2])
    np.testing.assert_array_equal(o, fib)
    np.testing.assert_array_equal(fo, np.arange(24, dtype=np.float32) ** 2)


def test_integer_division_by_zero_does_not_trap(mod, rng):
    a = rng.integers(-1000, 1000, 64).astype(np.int32)
    b = rng.integers(1, 7, 64).astype(np.int32) * rng.choice([-1, 1], 64).astype(np.int32)
    a[0], b[0] = -2**31, -1          # INT_MIN / -1 overflows: x86 would raise SIGFPE
    b[1] = 0
    c = np.zeros(64, np.int32)
    d = np.zeros(64, np.uint32)
    mod.kernel("divk").launch(1, 64, [a, b, c, d])
    ok = slice(2, None)
    np.testing.assert_array_equal(c[ok], np.trunc(a[ok] / b[ok]).astype(np.int32))
    np.testing.assert_array_equal(d[ok], a[ok].view(np.uint32) % b[ok].view(np.uint32))
    assert c[0] == -2**31


def test_trap_raises_kernel_fault(mod):
    with pytest.raises(ptx.KernelFault) as e:
        mod.kernel("trapk").launch(1, 8, [np.zeros(8, np.int32)])
    assert e.value.kind == "trap"


def test_assert_raises_kernel_fault(mod):
    with pytest.raises(ptx.KernelFault) as e:
        mod.kernel("assk").launch(1, 4, [np.array([0, 0, 1, 0], np.int32)])
    assert e.value.kind == "assert"


def test_printf_output(ptx_text, tmp_path):
    (tmp_path / "k.ptx").write_text(ptx_text)
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {ROOT!r})
        import ptx
        m = ptx.compile(open({str(tmp_path / 'k.ptx')!r}).read())
        m.kernel("pr").launch(1, 3, [42])
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines())
    assert lines == [f"hello 42 from {t} 1.500000" for t in range(3)]


def test_object_cache_hit_gives_same_code(ptx_text, tmp_path, rng):
    m1 = ptx.compile(ptx_text, cache_dir=str(tmp_path))
    assert not m1.cache_hit
    m2 = ptx.compile(ptx_text, cache_dir=str(tmp_path))
    assert m2.cache_hit
    n = 1000
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    c = np.full(n, np.nan, np.float32)
    m2.kernel("vecAdd").launch(4, 256, [a, b, c, n])
    np.testing.assert_array_equal(c, a + b)
    # a corrupt entry is detected and rebuilt
    entries = list(tmp_path.glob("*.zk"))
    assert len(entries) == 1
    for p in entries:
        p.write_bytes(p.read_bytes()[:100])
    m3 = ptx.compile(ptx_text, cache_dir=str(tmp_path))
    assert not m3.cache_hit
    c[:] = np.nan
    m3.kernel("vecAdd").launch(4, 256, [a, b, c, n])
    np.testing.assert_array_equal(c, a + b)


def test_unsupported_instruction_names_it():
    src = textwrap.dedent("""
        .version 8.0
        .target sm_86
        .address_size 64
        .visible .entry k(.param .u64 p)
        {
          .reg .b32 %r<4>;
          .reg .b64 %rd<4>;
          stacksave.u64 %rd1;
          ret;
        }
    """)
    with pytest.raises(ptx.PTXUnsupportedError) as e:
        ptx.compile(src)
    assert "stacksave" in str(e.value) and e.value.line == 9


def test_device_function_with_shuffles_and_barriers_is_inlined(mod, rng):
    x = rng.random(4 * 256, dtype=np.float32)
    out = np.full(4, np.nan, np.float32)
    mod.kernel("bsum").launch(4, 256, [x, out])
    np.testing.assert_allclose(out, x.reshape(4, 256).sum(1, dtype=np.float64), rtol=1e-5)


def test_votes_and_activemask(mod, rng):
    xi = rng.integers(-5, 5, 64).astype(np.int32)
    ballot = np.zeros(64, np.uint32)
    all_ = np.full(64, -1, np.int32)
    any_ = np.full(64, -1, np.int32)
    act = np.full(64, 7, np.uint32)
    mod.kernel("votes").launch(1, 64, [xi, ballot, all_, any_, act])
    for w in range(2):
        p = xi[w * 32:(w + 1) * 32] > 0
        assert (ballot[w * 32:(w + 1) * 32] == sum(1 << i for i in range(32) if p[i])).all()
        assert (all_[w * 32:(w + 1) * 32] == int(p.all())).all()
        assert (any_[w * 32:(w + 1) * 32] == int(p.any())).all()
    lanes = np.arange(64)
    # lanes 0,3,6,.. of each warp take the branch together; warp 1 starts at lane 32 (32 % 3 == 2)
    w0 = sum(1 << i for i in range(32) if i % 3 == 0)
    w1 = sum(1 << i for i in range(32) if (i + 32) % 3 == 0)
    want = np.where(lanes % 3 == 0, np.where(lanes < 32, w0, w1), 0)
    np.testing.assert_array_equal(act, want.astype(np.uint32))


def test_cp_async_and_module_globals(mod, rng):
    import ctypes
    g = rng.random(4 * 256, dtype=np.float32)
    o = np.full_like(g, np.nan)
    mod.kernel("async_copy").launch(4, 256, [g, o])
    np.testing.assert_array_equal(o.reshape(4, 256), g.reshape(4, 256)[:, ::-1])
    addr, size = mod.globals["coef"]
    assert size == 16
    coef = rng.random(4, dtype=np.float32)
    ctypes.memmove(addr, coef.ctypes.data, 16)
    caddr, _ = mod.globals["counter"]
    before = ctypes.c_int32.from_address(caddr).value
    o = np.full(64, np.nan, np.float32)
    mod.kernel("globs").launch(1, 64, [o])
    np.testing.assert_array_equal(o, np.tile(coef, 16) * np.arange(64, dtype=np.float32))
    assert ctypes.c_int32.from_address(caddr).value == before + 64


def test_exited_threads_release_barriers(mod):
    o = np.full(64, -1, np.int32)
    mod.kernel("earlyexit").launch(1, 64, [o, 40])
    assert o[:40].tolist() == [40] * 40 and (o[40:] == -1).all()


HANDWRITTEN = """.version 8.0
.target sm_86
.address_size 64

.func (.reg .b32 %ret) add3 (.reg .b32 %x)
{
  add.s32 %ret, %x, 3;
  ret;
}
.func (.param .b32 rv) twice (.param .b32 a)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [a];
  shl.b32 %r2, %r1, 1;
  st.param.b32 [rv], %r2;
  ret;
}
.func (.param .b32 rv) thrice (.param .b32 a)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [a];
  mul.lo.s32 %r2, %r1, 3;
  st.param.b32 [rv], %r2;
  ret;
}
.global .u64 fptrs[2] = {twice, thrice};

.visible .entry odd(.param .u64 out, .param .u64 inp)
{
  .reg .b32 %r<20>;
  .reg .b64 %rd<10>;
  .reg .pred %p<4>;
  .reg .f32 %f<5>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [inp];
  mov.u32 %r1, %tid.x;
  call (%r2), add3, (%r1);
  mul.wide.u32 %rd3, %r1, 32;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r2;
  // indirect call through a table in global memory
  and.b32 %r3, %r1, 1;
  mul.wide.u32 %rd5, %r3, 8;
  mov.u64 %rd6, fptrs;
  add.s64 %rd6, %rd6, %rd5;
  ld.global.u64 %rd7, [%rd6];
  {
  .param .b32 pa;
  .param .b32 pr;
  st.param.b32 [pa], %r1;
  proto: .callprototype (.param .b32 _) _ (.param .b32 _);
  call (pr), %rd7, (pa), proto;
  ld.param.b32 %r4, [pr];
  }
  st.global.u32 [%rd4+4], %r4;
  // brx.idx
  and.b32 %r5, %r1, 3;
  ts: .branchtargets L0, L1, L2, L3;
  brx.idx %r5, ts;
L0: mov.u32 %r6, 100; bra.uni LE;
L1: mov.u32 %r6, 101; bra.uni LE;
L2: mov.u32 %r6, 102; bra.uni LE;
L3: mov.u32 %r6, 103;
LE:
  st.global.u32 [%rd4+8], %r6;
  // vector load, pack/unpack
  mul.wide.u32 %rd8, %r1, 16;
  add.s64 %rd9, %rd2, %rd8;
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd9];
  add.f32 %f1, %f1, %f4;
  mov.b32 %r7, %f1;
  st.global.u32 [%rd4+12], %r7;
  mov.b64 %rd5, {%r1, %r3};
  mov.b64 {%r8, %r9}, %rd5;
  add.s32 %r8, %r8, %r9;
  st.global.u32 [%rd4+16], %r8;
  // bar.red.popc and vote/match/redux
  setp.lt.u32 %p1, %r1, 10;
  bar.red.popc.u32 %r10, 0, %p1;
  st.global.u32 [%rd4+20], %r10;
  shr.u32 %r11, %r1, 2;
  match.any.sync.b32 %r12, %r11, -1;
  st.global.u32 [%rd4+24], %r12;
  redux.sync.add.u32 %r13, %r1, -1;
  st.global.u32 [%rd4+28], %r13;
  ret;
}
"""


def test_handwritten_calls_branch_tables_vectors_and_collectives(rng):
    m = ptx.compile(HANDWRITTEN)
    n = 64
    out = np.zeros((n, 8), np.uint32)
    inp = rng.random((n, 4), dtype=np.float32)
    m.kernel("odd").launch(1, n, [out, inp])
    t = np.arange(n)
    np.testing.assert_array_equal(out[:, 0], t + 3)                                # .reg params
    np.testing.assert_array_equal(out[:, 1], np.where(t & 1, 3 * t, 2 * t))       # indirect call
    np.testing.assert_array_equal(out[:, 2], 100 + (t & 3))                        # brx.idx
    np.testing.assert_array_equal(out[:, 3].view(np.float32), inp[:, 0] + inp[:, 3])
    np.testing.assert_array_equal(out[:, 4], t + (t & 1))                          # mov pack/unpack
    np.testing.assert_array_equal(out[:, 5], 10)                                   # bar.red.popc
    np.testing.assert_array_equal(out[:, 6], [0xF << (4 * ((i % 32) // 4)) for i in t])   # match.any
    np.testing.assert_array_equal(out[:, 7], np.where(t < 32, sum(range(32)), sum(range(32, 64))))


def test_dump_dir_and_no_contraction_by_default(tmp_path):
    src = textwrap.dedent("""
        .version 8.0
        .target sm_86
        .address_size 64
        .visible .entry muladd(.param .u64 p)
        {
          .reg .f32 %f<4>;
          .reg .b64 %rd<2>;
          ld.param.u64 %rd1, [p];
          ld.global.v2.f32 {%f1, %f2}, [%rd1];
          mul.f32 %f3, %f1, %f2;
          add.f32 %f3, %f3, %f1;
          st.global.f32 [%rd1+8], %f3;
          ret;
        }
    """)
    m = ptx.compile(src, dump_dir=str(tmp_path))
    assert len(list(tmp_path.glob("*.ptx"))) == 1 and len(list(tmp_path.glob("*.ll"))) == 1
    assert " contract " not in m.ir
    # 1 + 2^-23 squared needs the rounding of the product before the add: fused would differ
    x = np.array([1 + 2.0 ** -12, 1 + 2.0 ** -12, 0], np.float32)
    m.kernel("muladd").launch(1, 1, [x])
    prod = np.float32(x[0]) * np.float32(x[1])
    assert x[2] == np.float32(prod + np.float32(x[0]))
    assert " contract " in ptx.compile(src, fma_contract=True).ir


def test_device_malloc_and_free(mod):
    o = np.full(64, -1, np.int32)
    mod.kernel("mall").launch(1, 64, [o])
    np.testing.assert_array_equal(o, np.arange(64, dtype=np.int32) * 120)
