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
    for p in tmp_path.glob("*.o"):
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
          fns.b32 %r1, %r2, %r3, 1;
          ret;
        }
    """)
    with pytest.raises(ptx.PTXUnsupportedError) as e:
        ptx.compile(src)
    assert "fns" in str(e.value) and e.value.line == 8
