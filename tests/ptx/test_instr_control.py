"""Control flow and calls: .func calls with params and return values, recursion, indirect calls through a
.callprototype, brx.idx jump tables, exit of some threads, trap -> KernelFault, and the runtime functions
nvcc calls (vprintf, malloc/free).
Not run on the H200 (written after the device-time budget was spent); the semantics here are plain."""

import re

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

N = 256
KS = K.KernelSet()

KS.add("call_direct", """
.func (.param .b32 ret) madd_self(.param .b32 x, .param .b32 y)
{
.reg .b32 %x, %y, %r;
ld.param.b32 %x, [x];
ld.param.b32 %y, [y];
mad.lo.s32 %r, %x, %y, %x;
st.param.b32 [ret], %r;
ret;
}
""" + K.elementwise("call_direct", """
{
.param .b32 p0;
.param .b32 p1;
.param .b32 r0;
st.param.b32 [p0], %a;
st.param.b32 [p1], %b;
call.uni (r0), madd_self, (p0, p1);
ld.param.b32 %d, [r0];
}
""", [("a", "s32"), ("b", "s32")], [("d", "s32")]))


def test_call_with_params_and_return(rng):
    a, b = K.rand_ints(rng, "s32", N), K.rand_ints(rng, "s32", N)
    (got,) = K.run_elementwise(KS, "call_direct", [a, b], ["s32"], rng)
    K.check_equal(got, K.wrap([x * y + x for x, y in zip(a.tolist(), b.tolist())], "s32"), [a, b], "call")


KS.add("call_recursive", """
.func (.param .b32 ret) fib(.param .b32 n)
{
.reg .b32 %n, %a, %b, %r;
.reg .pred %small;
ld.param.b32 %n, [n];
setp.lt.u32 %small, %n, 2;
@%small bra $BASE;
sub.u32 %a, %n, 1;
{
.param .b32 q;
.param .b32 r;
st.param.b32 [q], %a;
call (r), fib, (q);
ld.param.b32 %a, [r];
}
sub.u32 %b, %n, 2;
{
.param .b32 q;
.param .b32 r;
st.param.b32 [q], %b;
call (r), fib, (q);
ld.param.b32 %b, [r];
}
add.u32 %r, %a, %b;
st.param.b32 [ret], %r;
ret;
$BASE:
st.param.b32 [ret], %n;
ret;
}
""" + K.elementwise("call_recursive", """
{
.param .b32 q;
.param .b32 r;
st.param.b32 [q], %a;
call (r), fib, (q);
ld.param.b32 %d, [r];
}
""", [("a", "u32")], [("d", "u32")]))


def test_recursive_call(rng):
    a = rng.integers(0, 16, 64).astype(np.uint32)
    (got,) = K.run_elementwise(KS, "call_recursive", [a], ["u32"], rng, block=32)
    fib = [0, 1]
    for _ in range(20):
        fib.append(fib[-1] + fib[-2])
    K.check_equal(got, np.array([fib[x] for x in a.tolist()], np.uint32), [a], "fib")


KS.add("call_indirect", """
.func (.param .b32 r) op_add(.param .b32 x, .param .b32 y)
{
.reg .b32 %x, %y;
ld.param.b32 %x, [x];
ld.param.b32 %y, [y];
add.u32 %x, %x, %y;
st.param.b32 [r], %x;
ret;
}
.func (.param .b32 r) op_xor(.param .b32 x, .param .b32 y)
{
.reg .b32 %x, %y;
ld.param.b32 %x, [x];
ld.param.b32 %y, [y];
xor.b32 %x, %x, %y;
st.param.b32 [r], %x;
ret;
}
""" + K.elementwise("call_indirect", """
mov.u64 %fp, op_add;
@%c mov.u64 %fp, op_xor;
{
.param .b32 p0;
.param .b32 p1;
.param .b32 r0;
st.param.b32 [p0], %a;
st.param.b32 [p1], %b;
Fproto: .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _);
call (r0), %fp, (p0, p1), Fproto;
ld.param.b32 %d, [r0];
}
""", [("a", "u32"), ("b", "u32"), ("c", "pred")], [("d", "u32")], temps=[("fp", "u64")]))


def test_indirect_call(rng):
    a, b = K.rand_ints(rng, "u32", N), K.rand_ints(rng, "u32", N)
    c = rng.integers(0, 2, N).astype(np.uint8)
    (got,) = K.run_elementwise(KS, "call_indirect", [a, b, c], ["u32"], rng)
    want = np.where(c == 1, a ^ b, a + b).astype(np.uint32)
    K.check_equal(got, want, [a, b, c], "indirect call")


KS.add("jump_table", K.elementwise("jump_table", """
and.b32 %k, %a, 3;
$TAB: .branchtargets $L0, $L1, $L2, $L3;
brx.idx %k, $TAB;
$L0:
mov.u32 %d, 100;
bra.uni $JOIN;
$L1:
add.u32 %d, %a, 1;
bra.uni $JOIN;
$L2:
mul.lo.u32 %d, %a, 3;
bra.uni $JOIN;
$L3:
not.b32 %d, %a;
$JOIN:
""", [("a", "u32")], [("d", "u32")], temps=[("k", "u32")]))


def test_brx_idx_jump_table(rng):
    a = K.rand_ints(rng, "u32", N)
    (got,) = K.run_elementwise(KS, "jump_table", [a], ["u32"], rng)
    k = a & np.uint32(3)
    want = np.select([k == 0, k == 1, k == 2], [np.full(N, 100, np.uint32), a + np.uint32(1), a * np.uint32(3)],
                     ~a).astype(np.uint32)
    K.check_equal(got, want, [a], "brx.idx")


KS.add("exit_some", K.elementwise("exit_some", """
and.b32 %k, %a, 1;
setp.eq.u32 %odd, %k, 1;
@%odd exit;
add.u32 %d, %a, 5;
""", [("a", "u32")], [("d", "u32")], temps=[("k", "u32"), ("odd", "pred")]))


def test_exit_skips_the_rest(rng):
    a = K.rand_ints(rng, "u32", N)
    out = K.poison((N,), np.uint32, rng)
    before = out.copy()
    K.launch(KS.kernel("exit_some"), N // 64, 64, [a, out, N])
    odd = (a & np.uint32(1)) == 1
    K.check_equal(out[~odd], (a[~odd] + np.uint32(5)).astype(np.uint32), [a[~odd]], "stayed")
    K.check_equal(out[odd], before[odd], [a[odd]], "exited threads stored nothing")


KS.add("trap_one", K.elementwise("trap_one", """
setp.eq.u32 %hit, %a, 12345;
@%hit trap;
mov.u32 %d, %a;
""", [("a", "u32")], [("d", "u32")], temps=[("hit", "pred")]))


@pytest.mark.skipif(K.ON_GPU, reason="a trap would kill the CUDA context for the rest of the run")
def test_trap_raises_kernel_fault(rng):
    import ptx
    a = rng.integers(0, 1000, N).astype(np.uint32)
    a[int(rng.integers(0, N))] = 12345
    out = K.poison((N,), np.uint32, rng)
    with pytest.raises(ptx.KernelFault) as info:
        K.launch(KS.kernel("trap_one"), N // 64, 64, [a, out, N])
    assert info.value.kind == "trap"
    # and the module stays usable
    a[a == 12345] = 7
    K.launch(KS.kernel("trap_one"), N // 64, 64, [a, out, N])
    K.check_equal(out, a, [a], "after a trap")


PRINTF = """
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.global .align 1 .b8 fmt_str[22] = {116, 104, 114, 101, 97, 100, 32, 37, 100, 32, 118, 97, 108, 117, 101, 32,
                                    37, 108, 108, 120, 10, 0};
"""  # "thread %d value %llx\n"
KS.add("printf_kernel", PRINTF + K.elementwise("printf_kernel", """
mov.u64 %spl, depot;
cvta.local.u64 %sp, %spl;
st.local.u32 [%spl], %i;
st.local.u64 [%spl+8], %a;
mov.u64 %fmt, fmt_str;
cvta.global.u64 %fmt, %fmt;
{
.param .b64 param0;
.param .b64 param1;
.param .b32 retval0;
st.param.b64 [param0], %fmt;
st.param.b64 [param1], %sp;
call.uni (retval0), vprintf, (param0, param1);
ld.param.b32 %d, [retval0];
}
""", [("a", "u64")], [("d", "s32")], temps=[("spl", "u64"), ("sp", "u64"), ("fmt", "u64")])
    .replace(".reg .pred %p_oob;", ".reg .pred %p_oob;\n.local .align 8 .b8 depot[16];"))


def test_vprintf(rng, capfd):
    n = 16
    a = K.rand_ints(rng, "u64", n)
    (ret,) = K.run_elementwise(KS, "printf_kernel", [a], ["s32"], rng, block=16)
    out = capfd.readouterr().out
    lines = re.findall(r"thread \d+ value [0-9a-f]+", out)
    assert sorted(lines) == sorted(f"thread {i} value {int(v):x}" for i, v in enumerate(a.tolist())), out[-2000:]
    assert (ret >= 0).all()


KS.add("malloc_free", """
.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);
.extern .func free(.param .b64 free_param_0);
""" + K.elementwise("malloc_free", """
{
.param .b64 sz;
.param .b64 rv;
st.param.b64 [sz], 64;
call.uni (rv), malloc, (sz);
ld.param.b64 %m, [rv];
}
mov.u32 %k, 0;
$FILL:
mul.wide.u32 %off, %k, 4;
add.u64 %q, %m, %off;
add.u32 %t, %a, %k;
st.u32 [%q], %t;
add.u32 %k, %k, 1;
setp.lt.u32 %more, %k, 16;
@%more bra $FILL;
ld.u32 %d, [%m+60];
ld.u32 %t, [%m];
add.u32 %d, %d, %t;
{
.param .b64 fp;
st.param.b64 [fp], %m;
call.uni free, (fp);
}
""", [("a", "u32")], [("d", "u32")], temps=[("m", "u64"), ("q", "u64"), ("off", "u64"), ("k", "u32"),
                                             ("t", "u32"), ("more", "pred")]))


def test_malloc_free(rng):
    a = rng.integers(0, 1 << 30, N).astype(np.uint32)
    (got,) = K.run_elementwise(KS, "malloc_free", [a], ["u32"], rng)
    K.check_equal(got, (a * np.uint32(2) + np.uint32(15)).astype(np.uint32), [a], "malloc'd scratch")


# inline-asm style scopes: nested blocks declare registers without '%' and shadow outer names
KS.add("nested_scopes", K.elementwise("nested_scopes", """
mov.u32 %t, 5;
{
.reg .b16 lo, hi;
.reg .u32 %t;
mov.b32 {lo, hi}, %a;
mov.b32 %t, {hi, lo};
{
.reg .pred p;
setp.eq.u32 p, %t, 0;
@p mov.u32 %t, 77;
}
mov.u32 %d, %t;
}
add.u32 %d, %d, %t;
""", [("a", "u32")], [("d", "u32")], temps=[("t", "u32")]))


def test_nested_scopes_and_shadowing(rng):
    """The inner %t shadows the outer one only inside its block: d = swap_halves(a) (77 if zero) + 5."""
    a = K.rand_ints(rng, "u32", N)
    a[:3] = 0
    (got,) = K.run_elementwise(KS, "nested_scopes", [a], ["u32"], rng)
    sw = ((a << np.uint32(16)) | (a >> np.uint32(16))).astype(np.uint32)
    sw[sw == 0] = 77
    K.check_equal(got, (sw + np.uint32(5)).astype(np.uint32), [a], "scoped registers")


KS.add("directives", """
.visible .entry directives(.param .u64 out)
.maxntid 128, 1, 1
.minnctapersm 2
.maxnreg 64
{
.reg .u32 %t, %k, %acc;
.reg .u64 %p, %off;
.reg .pred %more;
mov.u32 %t, %tid.x;
mov.u32 %k, 0;
mov.u32 %acc, 0;
$L:
.pragma "nounroll";
add.u32 %acc, %acc, %k;
add.u32 %k, %k, 1;
setp.le.u32 %more, %k, %t;
@%more bra $L;
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 4; add.u64 %p, %p, %off;
st.global.u32 [%p], %acc;
ret;
}
""")


def test_entry_directives_and_pragma(rng):
    """.maxntid/.minnctapersm/.maxnreg on the entry and .pragma "nounroll" in a loop change nothing."""
    out = K.poison((128,), np.uint32, rng)
    K.launch(KS.kernel("directives"), 1, 128, [out])
    t = np.arange(128)
    K.check_equal(out, (t * (t + 1) // 2).astype(np.uint32), [], "triangular numbers")


KS.add("struct_return", """
.func (.param .align 8 .b8 func_retval0[8]) swap_pair(.param .align 8 .b8 p[8], .param .b32 k)
{
.reg .u32 %x, %y, %k;
ld.param.v2.u32 {%x, %y}, [p];
ld.param.b32 %k, [k];
add.u32 %x, %x, %k;
st.param.v2.u32 [func_retval0], {%y, %x};
ret;
}
""" + K.elementwise("struct_return", """
{
.param .align 8 .b8 param0[8];
.param .b32 param1;
.param .align 8 .b8 retval0[8];
st.param.v2.u32 [param0], {%a, %b};
st.param.b32 [param1], 1000;
call.uni (retval0), swap_pair, (param0, param1);
ld.param.v2.u32 {%d, %q}, [retval0];
}
""", [("a", "u32"), ("b", "u32")], [("d", "u32"), ("q", "u32")]))


def test_struct_args_and_return_by_value(rng):
    """An 8-byte struct passed and returned through .b8 array params with v2 param loads/stores."""
    a, b = K.rand_ints(rng, "u32", N), K.rand_ints(rng, "u32", N)
    d, q = K.run_elementwise(KS, "struct_return", [a, b], ["u32", "u32"], rng)
    K.check_equal(d, b, [a, b], "first field")
    K.check_equal(q, (a.astype(np.uint64) + 1000).astype(np.uint32), [a, b], "second field")
