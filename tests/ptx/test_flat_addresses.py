"""Generic and global addresses as offsets from one opaque base (ptx_rt_membase): the thread loop of an
elementwise kernel is vectorised, overlapping arrays (a race between the block's threads) give each thread a
value the race allows, generic accesses alias shared, local and
.global variables (locals also when a called function writes them), and a kernel loaded from the object
cache in a fresh process resolves the base."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ptx
from ptxkit import rng  # noqa: F401  (fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# nvcc -ptx -arch=sm_86 of: c[i] = a[i] + b[i] if i < n  (scripts/bench_kernels/vec_add.cu)
VEC_ADD = r"""
.version 9.0
.target sm_86
.address_size 64

.visible .entry vec_add(.param .u64 vec_add_param_0, .param .u64 vec_add_param_1,
                        .param .u64 vec_add_param_2, .param .u32 vec_add_param_3)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<11>;

	ld.param.u64 	%rd1, [vec_add_param_0];
	ld.param.u64 	%rd2, [vec_add_param_1];
	ld.param.u64 	%rd3, [vec_add_param_2];
	ld.param.u32 	%r2, [vec_add_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;

	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.f32 	%f1, [%rd8];
	ld.global.f32 	%f2, [%rd6];
	add.f32 	%f3, %f2, %f1;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.f32 	[%rd10], %f3;

$L__BB0_2:
	ret;
}
"""


def _optimized_ir(text):
    """The module's LLVM IR after the same O3 pipeline compile_host runs."""
    import llvmlite.binding as llvm
    from ptx import host, pipeline
    from ptx.codegen.cpu.module import build_host_ir
    hir = pipeline.lower(text, build_host_ir)
    with host._llvm_lock:
        host._init_llvm()
        mod = llvm.parse_assembly(hir.text)
        mod.verify()
        host._optimize(mod, 3)
        return str(mod)


def test_vector_add_thread_loop_is_vectorised():
    ir = _optimized_ir(VEC_ADD)
    body = ir[ir.index('define'):]
    assert "inttoptr" not in body, "a global access still goes through inttoptr"
    # masked (the i < n guard) or plain vector loads and stores of floats: SIMD across threads
    assert "x float>" in body and ("masked.store" in body or "store <" in body), \
        "the thread loop of vector add was not vectorised"


@pytest.mark.parametrize("shift", [1, 3, 8, 20, 31, -5])
def test_overlapping_arrays_are_a_race(shift, rng):
    """c is a shifted by `shift` elements, one block: thread i reads the element thread i - shift writes, with no
    barrier between, a race. An H100 gives every thread a's value from before the launch, every time
    (tests/data/nvidia_overlap_race.json); the CPU's thread loops are declared parallel (cpu/parallel_loops.py),
    so a vector's lanes read before any of them writes, and a later vector may read an earlier one's stores. Each
    element must be one of the two values the race allows, nothing torn or stale from elsewhere."""
    n = 256
    k = ptx.compile(VEC_ADD).kernel("vec_add")
    base = 64
    buf = rng.random(n + 2 * base, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    init = buf.copy()
    a_view = buf[base:base + n]
    c_view = buf[base + shift:base + shift + n]
    k.launch(1, n, [a_view, b, c_view, n])
    got = buf[base + shift:base + shift + n]
    old = init[base:base + n] + b
    new = buf[base:base + n] + b        # what is at a[i] now: another thread's write where one lands there
    bad = np.flatnonzero((got != old) & (got != new))
    assert bad.size == 0, f"{bad.size} elements neither before nor after the race, first at {bad[:5]}"
    outside = np.ones(buf.size, bool)
    outside[base + shift:base + shift + n] = False
    assert np.array_equal(buf[outside], init[outside]), "a store outside c"


def test_the_gpu_reads_before_the_race():
    """The H100's answer the test above allows: every thread of every launch read the value from before it."""
    import json
    with open(os.path.join(ROOT, "tests", "data", "nvidia_overlap_race.json")) as f:
        data = json.load(f)
    assert data["launches"] and all(r["old"] == 256 and r["new"] == 0 and r["other"] == 0 for r in data["launches"])


GENERIC_ALIASES = r"""
.version 8.0
.target sm_86
.address_size 64

.global .align 4 .b32 gtab[128];

.visible .entry generic_aliases(.param .u64 in, .param .u64 out)
{
	.reg .u32 %t, %v, %w, %x, %y;
	.reg .u64 %off, %pin, %pout, %sh, %g, %loc, %gl, %gg;
	.shared .align 4 .b32 s[256];
	.local .align 4 .b32 l[4];
	mov.u32 %t, %tid.x;
	mul.wide.u32 %off, %t, 4;
	ld.param.u64 %pin, [in];
	add.u64 %pin, %pin, %off;
	ld.param.u64 %pout, [out];
	mul.wide.u32 %off, %t, 32;
	add.u64 %pout, %pout, %off;
	ld.global.u32 %v, [%pin];
	// shared: stored by name, changed through its generic address, reloaded by name
	mov.u64 %sh, s;
	mul.wide.u32 %off, %t, 4;
	add.u64 %sh, %sh, %off;
	st.shared.u32 [%sh], %v;
	cvta.shared.u64 %g, %sh;
	ld.u32 %w, [%g];
	mul.lo.u32 %w, %w, 3;
	st.u32 [%g], %w;
	ld.shared.u32 %x, [%sh];
	st.global.u32 [%pout], %x;
	// local: the same through the local variable's generic address
	st.local.u32 [l+8], %v;
	mov.u64 %loc, l;
	cvta.local.u64 %gl, %loc;
	ld.u32 %y, [%gl+8];
	add.u32 %y, %y, 7;
	st.u32 [%gl+8], %y;
	ld.local.u32 %y, [l+8];
	st.global.u32 [%pout+4], %y;
	// generic store, then a global load of the same address by its global route
	add.u32 %w, %v, 11;
	st.u32 [%pout+8], %w;
	ld.global.u32 %w, [%pout+8];
	xor.b32 %w, %w, 0x5a5a5a5a;
	st.global.u32 [%pout+12], %w;
	// a module .global variable: stored by name, changed through its generic address, reloaded by name
	mul.wide.u32 %off, %t, 4;
	st.global.u32 [gtab], %v;
	mov.u64 %gg, gtab;
	cvta.global.u64 %gg, %gg;
	ld.u32 %w, [%gg];
	sub.u32 %w, %w, 5;
	st.u32 [%gg], %w;
	ld.global.u32 %w, [gtab];
	st.global.u32 [%pout+16], %w;
	ret;
}
"""


def test_generic_accesses_alias_shared_and_local(rng):
    """A store through a generic address must be seen by a shared/local/global load of the same memory
    (named variables too): the generic pointer is based on ptx_rt_membase, the others on real pointers,
    and LLVM must not call them apart."""
    n = 128
    x = rng.integers(0, 1 << 30, n).astype(np.uint32)
    out = rng.integers(0, 1 << 32, (n, 8), dtype=np.uint64).astype(np.uint32)    # poison
    poison = out.copy()
    ptx.compile(GENERIC_ALIASES).kernel("generic_aliases").launch(1, n, [x, out])
    want = np.concatenate([np.stack([x * np.uint32(3), x + np.uint32(7), x + np.uint32(11),
                                     (x + np.uint32(11)) ^ np.uint32(0x5A5A5A5A), x - np.uint32(5)],
                                    axis=1), poison[:, 5:]], axis=1)
    bad = np.argwhere(out != want)
    assert bad.size == 0, f"{len(bad)} wrong, first (thread, field) {bad[:4].tolist()}"


LOCAL_THROUGH_FUNC = r"""
.version 8.0
.target sm_86
.address_size 64

.func store_through(.param .b64 p, .param .b32 v)
{
	.reg .b64 %a;
	.reg .b32 %x, %y;
	ld.param.b64 %a, [p];
	ld.param.b32 %x, [v];
	ld.u32 %y, [%a];
	add.u32 %x, %x, %y;
	st.u32 [%a+4], %x;
	ret;
}

.visible .entry local_through_func(.param .u64 out)
{
	.local .align 8 .b32 l[4];
	.reg .b64 %g, %po, %off;
	.reg .b32 %t, %y, %z;
	mov.u32 %t, %tid.x;
	st.local.u32 [l], %t;
	st.local.u32 [l+4], 1;
	mov.u64 %g, l;
	cvta.local.u64 %g, %g;
	add.u32 %z, %t, 1000;
	{
	.param .b64 p0;
	.param .b32 p1;
	st.param.b64 [p0], %g;
	st.param.b32 [p1], %z;
	call.uni store_through, (p0, p1);
	}
	ld.local.u32 %y, [l+4];
	ld.param.u64 %po, [out];
	mul.wide.u32 %off, %t, 4;
	add.u64 %po, %po, %off;
	st.global.u32 [%po], %y;
	ret;
}
"""


def test_local_written_by_a_called_function_through_its_generic_address(rng):
    """The kernel hands a .func the generic address of its local array; the function (inlined or not)
    reads and writes it through that integer, and the kernel's ld.local must see the write."""
    n = 96
    out = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)    # poison
    ptx.compile(LOCAL_THROUGH_FUNC).kernel("local_through_func").launch(1, n, [out])
    want = 2 * np.arange(n, dtype=np.uint32) + 1000
    bad = np.flatnonzero(out != want)
    assert bad.size == 0, f"{bad.size} wrong, first at {bad[:4]}: {out[bad[:4]]} != {want[bad[:4]]}"


def test_cached_object_resolves_membase_in_a_fresh_process(tmp_path):
    """The JIT's object file refers to ptx_rt_membase by name: loaded from the cache by another process
    (another address for libptxrt), it must still resolve, and give the right sums."""
    prog = tmp_path / "run.py"
    prog.write_text(
        "import sys\n"
        "import numpy as np\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "import ptx\n"
        "text = open(sys.argv[1]).read()\n"
        "m = ptx.compile(text, cache_dir=sys.argv[2])\n"
        "rng = np.random.default_rng()\n"
        "n = 1000\n"
        "a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)\n"
        "c = np.full(n, np.nan, np.float32)\n"
        "m.kernel('vec_add').launch((n + 127) // 128, 128, [a, b, c, n])\n"
        "assert np.array_equal(c, a + b), c[:4]\n"
        "print('HIT' if m.cache_hit else 'MISS')\n")
    src = tmp_path / "k.ptx"
    src.write_text(VEC_ADD)
    cache = tmp_path / "cache"
    runs = [subprocess.run([sys.executable, str(prog), str(src), str(cache)], capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert [r.stdout.strip() for r in runs] == ["MISS", "HIT"]
