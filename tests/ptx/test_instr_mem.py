"""Loads and stores in every state space: global (all widths, v2/v4 vectors, offsets, cache hints, .nc,
ldu), shared (static and dynamic), local, const and module .global variables with initialisers, kernel
params of each scalar type, generic addressing through cvta.
References checked on an NVIDIA H200 (driver 580, PTX JIT for sm_86), 2026-11-29: every test here passed
with PTXKIT_BACKEND=cuda (see ptxkit.py); the corrections that hardware forced are noted where they apply.
Written after the hardware runs, so not run there: the .nc/ldu/.ca vector loads and
test_static_and_dynamic_shared_do_not_overlap, test_narrow_loads_extend_into_wide_registers,
test_struct_param_by_value, test_cp_async_with_zero_fill, test_nanosleep_pmevent, test_kernel_param_address,
test_initialisers, test_shared_cta_spelling, test_addresses_through_every_route, test_aliasing_params.
"""

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

# the numpy references divide by zero and overflow on purpose (inf/NaN inputs)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

N = 256
KS = K.KernelSet()
# kernel name -> the exact compiler gap it runs into (strict xfail; see ptxkit.cases)
XFAIL = {}

# ---------------------------------------------------------------- global scalar and vector copies

COPY = {}
for tn in ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "f32", "f64", "b16", "b32", "b64"):
    for hint in ("", ".ca", ".cg", ".cs", ".lu", ".cv", ".nc", ".nc.L1::no_allocate"):
        if hint and tn not in ("u32", "f64", "u8"):
            continue
        name = K.kname("copy", hint, tn)
        KS.add(name, K.elementwise(name, f"ld.global{hint}.{K.TYPES[tn].mem} %t, [%addr];\n"
                                   f"mov.{K.TYPES[tn].reg} %d, %t;",
                                   [("a", tn)], [("d", tn)], temps=[("t", K.TYPES[tn].reg)]))
        COPY[name] = tn
# memory-consistency qualified loads and cache-eviction hints: same values, just ordering/caching
for q in (".volatile", ".relaxed.gpu", ".acquire.gpu", ".relaxed.sys", ".acquire.cta", ".L2::64B",
          ".L1::evict_last", ".L2::256B"):
    name = K.kname("copy_ord", q, "u32")
    ld = f"ld{q}.global.u32" if not q.startswith(".L") else f"ld.global{q}.u32"
    KS.add(name, K.elementwise(name, f"{ld} %d, [%addr];", [("a", "u32")], [("d", "u32")]))
    COPY[name] = "u32"
name = "copy_ldu_u32"
KS.add(name, K.elementwise(name, "ldu.global.u32 %d, [%addr];", [("a", "u32")], [("d", "u32")]))
COPY[name] = "u32"
for hint in (".wb", ".cg", ".cs", ".wt", ".release.gpu", ".relaxed.sys", ".volatile", ".L1::no_allocate"):
    name = K.kname("copy_st", hint, "u32")
    st = f"st{hint}.global.u32" if hint in (".release.gpu", ".relaxed.sys", ".volatile") else f"st.global{hint}.u32"
    # store with the hint, then read it back with a plain load of the same address
    KS.add(name, K.elementwise(name, f"add.u32 %t, %a, 1;\n{st} [%addr], %t;\n"
                               "ld.global.u32 %d, [%addr];", [("a", "u32")], [("d", "u32")],
                               temps=[("t", "u32")]))
    COPY[name] = "u32+1"


@pytest.mark.parametrize("name", K.cases(sorted(COPY), XFAIL))
def test_global_copy(name, rng):
    """The elementwise kernel leaves %addr at the input's element; loading it again must give it back."""
    tn = COPY[name].split("+")[0]
    a = K.rand_ints(rng, tn, N) if tn[0] in "usb" else K.rand_floats(rng, tn, N)
    a_before = a.copy()
    (got,) = K.run_elementwise(KS, name, [a], [tn], rng)
    if COPY[name].endswith("+1"):
        want = (a_before + np.uint32(1)).astype(np.uint32)
        K.check_equal(a, want, [a_before], name + " (stored input)")
        K.check_equal(got, want, [a_before], name)
    else:
        K.check_equal(got.view(np.uint8), a.view(np.uint8), [], name)


VEC = {}
for vec, tn, ld in [("v2", "u32", "ld.global"), ("v4", "u32", "ld.global"), ("v2", "f64", "ld.global"),
                    ("v2", "u64", "ld.global"), ("v4", "f32", "ld.global"), ("v4", "b16", "ld.global"),
                    ("v2", "s16", "ld.global"), ("v4", "u8", "ld.global"), ("v2", "f32", "ld.global"),
                    ("v4", "f32", "ld.global.nc"), ("v2", "u64", "ldu.global"), ("v4", "u32", "ld.global.ca")]:
    k = int(vec[1])
    ty = K.TYPES[tn]
    regs = ", ".join(f"%x{j}" for j in range(k))
    rev = ", ".join(f"%x{j}" for j in reversed(range(k)))
    body = f"""
ld.param.u64 %p, [src];
cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %i, {k * ty.size};
add.u64 %p, %p, %off;
{ld}.{vec}.{ty.mem} {{{regs}}}, [%p];
ld.param.u64 %q, [dst];
cvta.to.global.u64 %q, %q;
add.u64 %q, %q, %off;
st.global.{vec}.{ty.mem} [%q], {{{rev}}};
"""
    name = K.kname("vec", ld.replace("ld.global", ""), vec, tn)
    decl = "\n".join(f".reg .{ty.reg} %x{j};" for j in range(k))
    KS.add(name, f"""
.visible .entry {name}(.param .u64 src, .param .u64 dst, .param .u32 n)
{{
.reg .u32 %i, %n, %tx, %cx, %nx;
.reg .u64 %p, %q, %off;
.reg .pred %oob;
{decl}
mov.u32 %tx, %tid.x; mov.u32 %cx, %ctaid.x; mov.u32 %nx, %ntid.x;
mad.lo.u32 %i, %cx, %nx, %tx;
ld.param.u32 %n, [n];
setp.ge.u32 %oob, %i, %n;
@%oob bra $END;
{body}
$END:
ret;
}}
""")
    VEC[name] = (k, tn)


@pytest.mark.parametrize("name", K.cases(sorted(VEC), XFAIL))
def test_vector_load_store(name, rng):
    """ld.v{2,4} then st.v{2,4} with the elements reversed."""
    k, tn = VEC[name]
    src = K.rand_ints(rng, tn, N * k) if tn[0] in "usb" else K.rand_floats(rng, tn, N * k)
    dst = K.poison((N * k,), src.dtype, rng)
    K.launch(KS.kernel(name), ((N + 63) // 64, 1, 1), (64, 1, 1), [src, dst, N])
    want = src.reshape(N, k)[:, ::-1].reshape(-1)
    K.check_equal(dst.view(np.uint8), want.view(np.uint8), [], name)


# ---------------------------------------------------------------- offsets and byte-granular stores

KS.add("offsets", K.elementwise("offsets", """
add.u64 %q, %addr, 8;
ld.global.u32 %t0, [%q+-4];
ld.global.u32 %t1, [%addr+8];
ld.global.u8 %h, [%addr+2];
cvt.u32.u16 %t2, %h;
add.u32 %d, %t0, %t1;
add.u32 %d, %d, %t2;
""", [("a", "u32")], [("d", "u32")], temps=[("t0", "u32"), ("t1", "u32"), ("t2", "u32"), ("h", "u16"),
                                             ("q", "u64")]))


def test_address_offsets(rng):
    """[reg+imm] with positive and negative offsets and a byte load inside a word: element i reads
    a[i+1], a[i+2] and byte 2 of a[i]."""
    n = N
    a = K.rand_ints(rng, "u32", n + 2)
    out = K.poison((n,), np.uint32, rng)
    K.launch(KS.kernel("offsets"), (n // 64, 1, 1), (64, 1, 1), [a, out, n])
    want = (a[1:n + 1].astype(np.uint64) + a[2:n + 2].astype(np.uint64)
            + ((a[:n] >> np.uint32(16)) & np.uint32(0xFF)).astype(np.uint64)) & 0xFFFFFFFF
    K.check_equal(out, want.astype(np.uint32), [a], "offsets")


# ---------------------------------------------------------------- shared memory

KS.add("shared_reverse", """
.visible .entry shared_reverse(.param .u64 src, .param .u64 dst)
{
.reg .u32 %t, %nt, %c, %g, %r, %v;
.reg .u64 %p, %off, %s;
.shared .align 8 .b32 sbuf[256];
mov.u32 %t, %tid.x; mov.u32 %nt, %ntid.x; mov.u32 %c, %ctaid.x;
mad.lo.u32 %g, %c, %nt, %t;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %g, 4; add.u64 %p, %p, %off;
ld.global.u32 %v, [%p];
mov.u64 %s, sbuf;
mul.wide.u32 %off, %t, 4; add.u64 %s, %s, %off;
st.shared.u32 [%s], %v;
bar.sync 0;
sub.u32 %r, %nt, 1; sub.u32 %r, %r, %t;
mov.u64 %s, sbuf;
mul.wide.u32 %off, %r, 4; add.u64 %s, %s, %off;
ld.shared.u32 %v, [%s];
ld.param.u64 %p, [dst]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %g, 4; add.u64 %p, %p, %off;
st.global.u32 [%p], %v;
ret;
}
""")

KS.add("dyn_shared_reverse", """
.extern .shared .align 16 .b8 dsmem[];
.visible .entry dyn_shared_reverse(.param .u64 src, .param .u64 dst)
{
.reg .u32 %t, %nt, %c, %g, %r, %sz, %v;
.reg .f64 %x;
.reg .u64 %p, %off, %s;
mov.u32 %t, %tid.x; mov.u32 %nt, %ntid.x; mov.u32 %c, %ctaid.x;
mad.lo.u32 %g, %c, %nt, %t;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %g, 8; add.u64 %p, %p, %off;
ld.global.f64 %x, [%p];
mov.u64 %s, dsmem;
mul.wide.u32 %off, %t, 8; add.u64 %s, %s, %off;
st.shared.f64 [%s], %x;
bar.sync 0;
sub.u32 %r, %nt, 1; sub.u32 %r, %r, %t;
mov.u64 %s, dsmem;
mul.wide.u32 %off, %r, 8; add.u64 %s, %s, %off;
ld.shared.f64 %x, [%s];
ld.param.u64 %p, [dst]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %g, 8; add.u64 %p, %p, %off;
st.global.f64 [%p], %x;
ret;
}
""")


def test_static_shared(rng):
    src = K.rand_ints(rng, "u32", 4 * 256)
    dst = K.poison((4 * 256,), np.uint32, rng)
    K.launch(KS.kernel("shared_reverse"), 4, 256, [src, dst])
    K.check_equal(dst, src.reshape(4, 256)[:, ::-1].reshape(-1), [src], "shared reverse")


def test_dynamic_shared(rng):
    src = K.rand_floats(rng, "f64", 3 * 96)
    dst = K.poison((3 * 96,), np.float64, rng)
    K.launch(KS.kernel("dyn_shared_reverse"), 3, 96, [src, dst], shared_bytes=96 * 8)
    K.check_equal(dst.view(np.uint64), src.reshape(3, 96)[:, ::-1].reshape(-1).view(np.uint64), [], "dyn shared")


# ---------------------------------------------------------------- local, const, module globals, generic

KS.add("local_array", K.elementwise("local_array", """
mov.u64 %lp, larr;
mov.u32 %k, 0;
$FILL:
mul.lo.u32 %t, %k, %a;
add.u32 %t, %t, %k;
mul.wide.u32 %off, %k, 4;
add.u64 %q, %lp, %off;
st.local.u32 [%q], %t;
add.u32 %k, %k, 1;
setp.lt.u32 %more, %k, 16;
@%more bra $FILL;
and.b32 %k, %b, 15;
mul.wide.u32 %off, %k, 4;
add.u64 %q, %lp, %off;
ld.local.u32 %d, [%q];
""", [("a", "u32"), ("b", "u32")], [("d", "u32")],
    temps=[("lp", "u64"), ("q", "u64"), ("off", "u64"), ("k", "u32"), ("t", "u32"), ("more", "pred")])
    .replace(".reg .pred %p_oob;", ".reg .pred %p_oob;\n.local .align 4 .b32 larr[16];"))


def test_local_array(rng):
    a, b = K.rand_ints(rng, "u32", N), K.rand_ints(rng, "u32", N)
    (got,) = K.run_elementwise(KS, "local_array", [a, b], ["u32"], rng)
    k = (b & np.uint32(15)).astype(np.uint64)
    K.check_equal(got, ((k * a.astype(np.uint64) + k) & 0xFFFFFFFF).astype(np.uint32), [a, b], "local")


CONST_TAB = [(i * 2654435761) & 0xFFFFFFFF for i in range(32)]
GLOBAL_TAB = [(i * 40503 + 7) & 0xFFFF for i in range(8)]
KS.add("const_lookup", (
    f".const .align 4 .u32 ctab[32] = {{{', '.join(str(v) for v in CONST_TAB)}}};\n"
    f".global .align 2 .u16 gtab[8] = {{{', '.join(str(v) for v in GLOBAL_TAB)}}};\n"
    + K.elementwise("const_lookup", """
and.b32 %k, %a, 31;
mul.wide.u32 %off, %k, 4;
mov.u64 %q, ctab;
add.u64 %q, %q, %off;
ld.const.u32 %d, [%q];
ld.const.u32 %t, [ctab+8];
add.u32 %d, %d, %t;
and.b32 %k, %a, 7;
mul.wide.u32 %off, %k, 2;
mov.u64 %q, gtab;
add.u64 %q, %q, %off;
ld.global.u16 %h, [%q];
cvt.u32.u16 %t, %h;
add.u32 %d, %d, %t;
""", [("a", "u32")], [("d", "u32")], temps=[("k", "u32"), ("off", "u64"), ("q", "u64"), ("t", "u32"),
                                             ("h", "u16")])))


def test_const_and_global_variables(rng):
    a = K.rand_ints(rng, "u32", N)
    (got,) = K.run_elementwise(KS, "const_lookup", [a], ["u32"], rng)
    want = [(CONST_TAB[x & 31] + CONST_TAB[2] + GLOBAL_TAB[x & 7]) & 0xFFFFFFFF for x in a.tolist()]
    K.check_equal(got, np.array(want, np.uint32), [a], "const/global tables")


KS.add("generic_addressing", K.elementwise("generic_addressing", """
mov.u64 %g, larr2;
cvta.local.u64 %g, %g;
st.u32 [%g], %a;
mov.u64 %s, sarr;
cvta.shared.u64 %s, %s;
cvt.u64.u32 %off, %tx;
shl.b64 %off, %off, 2;
add.u64 %s, %s, %off;
st.u32 [%s], %b;
ld.u32 %t, [%g];
ld.u32 %d, [%s];
add.u32 %d, %d, %t;
cvta.to.shared.u64 %s2, %s;
ld.shared.u32 %t, [%s2];
add.u32 %d, %d, %t;
ld.param.u64 %gp, [in0];
cvta.to.global.u64 %gp, %gp;
cvta.global.u64 %gp, %gp;
mad.wide.u32 %gp, %i, 4, %gp;
ld.u32 %t, [%gp];
add.u32 %d, %d, %t;
""", [("a", "u32"), ("b", "u32")], [("d", "u32")],
    temps=[("g", "u64"), ("s", "u64"), ("s2", "u64"), ("gp", "u64"), ("off", "u64"), ("t", "u32")])
    .replace(".reg .pred %p_oob;", ".reg .pred %p_oob;\n.local .align 4 .b32 larr2[1];\n"
                                   ".shared .align 4 .b32 sarr[128];"))


def test_generic_addressing_via_cvta(rng):
    a, b = K.rand_ints(rng, "u32", N), K.rand_ints(rng, "u32", N)
    (got,) = K.run_elementwise(KS, "generic_addressing", [a, b], ["u32"], rng)
    want = (a.astype(np.uint64) * 2 + b.astype(np.uint64) * 2) & 0xFFFFFFFF
    K.check_equal(got, want.astype(np.uint32), [a, b], "generic ld/st")


# ---------------------------------------------------------------- params of each scalar type

KS.add("scalar_params", """
.visible .entry scalar_params(.param .u64 out, .param .u32 pu32, .param .s32 ps32, .param .u64 pu64,
                              .param .f32 pf32, .param .f64 pf64, .param .u16 pu16, .param .s64 ps64)
{
.reg .u64 %o, %x64;
.reg .u32 %x;
.reg .f32 %f;
.reg .f64 %g;
.reg .u16 %h;
ld.param.u64 %o, [out];
cvta.to.global.u64 %o, %o;
ld.param.u32 %x, [pu32];
st.global.u32 [%o], %x;
ld.param.s32 %x, [ps32];
st.global.u32 [%o+4], %x;
ld.param.u64 %x64, [pu64];
st.global.u64 [%o+8], %x64;
ld.param.f32 %f, [pf32];
st.global.f32 [%o+16], %f;
ld.param.f64 %g, [pf64];
st.global.f64 [%o+24], %g;
ld.param.u16 %h, [pu16];
st.global.u16 [%o+32], %h;
ld.param.s64 %x64, [ps64];
st.global.u64 [%o+40], %x64;
ret;
}
""")


def test_scalar_params(rng):
    out = K.poison((48,), np.uint8, rng)
    vals = dict(u32=int(rng.integers(0, 1 << 32)), s32=-int(rng.integers(1, 1 << 31)),
                u64=int(rng.integers(0, 1 << 63)) * 2 + 1, f32=float(np.float32(rng.uniform(-1e6, 1e6))),
                f64=float(rng.uniform(-1e300, 1e300)), u16=int(rng.integers(0, 1 << 16)),
                s64=-int(rng.integers(1, 1 << 62)))
    K.launch(KS.kernel("scalar_params"), 1, 1, [out, vals["u32"], vals["s32"], vals["u64"], vals["f32"],
                                                vals["f64"], vals["u16"], vals["s64"]])
    assert int(out[0:4].view(np.uint32)[0]) == vals["u32"]
    assert int(out[4:8].view(np.int32)[0]) == vals["s32"]
    assert int(out[8:16].view(np.uint64)[0]) == vals["u64"]
    assert float(out[16:20].view(np.float32)[0]) == vals["f32"]
    assert float(out[24:32].view(np.float64)[0]) == vals["f64"]
    assert int(out[32:34].view(np.uint16)[0]) == vals["u16"]
    assert int(out[40:48].view(np.int64)[0]) == vals["s64"]


# ---------------------------------------------------------------- isspacep, prefetch, fences

KS.add("spaces", K.elementwise("spaces", """
ld.param.u64 %gp, [in0];
cvta.to.global.u64 %gp, %gp;
cvta.global.u64 %gp, %gp;
mov.u64 %s, sarr3;
cvta.shared.u64 %s, %s;
mov.u64 %l, larr3;
cvta.local.u64 %l, %l;
prefetch.global.L2 [%addr];
prefetch.global.L1 [%addr];
prefetchu.L1 [%gp];
membar.cta;
membar.gl;
membar.sys;
fence.sc.gpu;
fence.acq_rel.cta;
fence.acq_rel.sys;
mov.u32 %d, 0;
isspacep.global %p0, %gp;   selp.u32 %t, 1, 0, %p0;   or.b32 %d, %d, %t;
isspacep.shared %p0, %gp;   selp.u32 %t, 2, 0, %p0;   or.b32 %d, %d, %t;
isspacep.local %p0, %gp;    selp.u32 %t, 4, 0, %p0;   or.b32 %d, %d, %t;
isspacep.global %p0, %s;    selp.u32 %t, 8, 0, %p0;   or.b32 %d, %d, %t;
isspacep.shared %p0, %s;    selp.u32 %t, 16, 0, %p0;  or.b32 %d, %d, %t;
isspacep.local %p0, %s;     selp.u32 %t, 32, 0, %p0;  or.b32 %d, %d, %t;
isspacep.global %p0, %l;    selp.u32 %t, 64, 0, %p0;  or.b32 %d, %d, %t;
isspacep.shared %p0, %l;    selp.u32 %t, 128, 0, %p0; or.b32 %d, %d, %t;
isspacep.local %p0, %l;     selp.u32 %t, 256, 0, %p0; or.b32 %d, %d, %t;
""", [("a", "u32")], [("d", "u32")], temps=[("gp", "u64"), ("s", "u64"), ("l", "u64"), ("t", "u32"),
                                             ("p0", "pred")])
    .replace(".reg .pred %p_oob;", ".reg .pred %p_oob;\n.local .align 4 .b32 larr3[2];\n"
                                   ".shared .align 4 .b32 sarr3[2];"))


def test_isspacep_prefetch_fences(rng):
    """A global, a shared and a local generic pointer each answer isspacep for their own space only;
    prefetches and fences are accepted and change nothing."""
    a = K.rand_ints(rng, "u32", N)
    (got,) = K.run_elementwise(KS, "spaces", [a], ["u32"], rng)
    K.check_equal(got, np.full(N, 1 | 16 | 256, np.uint32), [a], "isspacep matrix")


KS.add("static_and_dynamic_shared", """
.extern .shared .align 8 .b8 dyn2[];
.visible .entry static_and_dynamic_shared(.param .u64 out)
{
.reg .u32 %t, %nt, %r, %a, %b;
.reg .u64 %s, %d, %off, %p;
.shared .align 4 .u32 stat2[64];
mov.u32 %t, %tid.x; mov.u32 %nt, %ntid.x;
mul.wide.u32 %off, %t, 4;
mov.u64 %s, stat2; add.u64 %s, %s, %off;
mov.u64 %d, dyn2; add.u64 %d, %d, %off;
add.u32 %a, %t, 1000;
add.u32 %b, %t, 2000;
st.shared.u32 [%s], %a;
st.shared.u32 [%d], %b;
bar.sync 0;
sub.u32 %r, %nt, 1; sub.u32 %r, %r, %t;
mul.wide.u32 %off, %r, 4;
mov.u64 %s, stat2; add.u64 %s, %s, %off;
mov.u64 %d, dyn2; add.u64 %d, %d, %off;
ld.shared.u32 %a, [%s];
ld.shared.u32 %b, [%d];
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 8; add.u64 %p, %p, %off;
st.global.v2.u32 [%p], {%a, %b};
ret;
}
""")


def test_static_and_dynamic_shared_do_not_overlap(rng):
    out = K.poison((64, 2), np.uint32, rng)
    K.launch(KS.kernel("static_and_dynamic_shared"), 2, 64, [out], shared_bytes=64 * 4)
    rev = 63 - np.arange(64)
    K.check_equal(out[:, 0], rev + 1000, [], "static shared")
    K.check_equal(out[:, 1], rev + 2000, [], "dynamic shared")


# ---------------------------------------------------------------- widths: narrow loads into wide registers

KS.add("widen_loads", """
.visible .entry widen_loads(.param .u64 .ptr.global.align 1 src, .param .u64 .ptr.global.align 16 dst)
{
.reg .u32 %t, %r0, %r1, %r3;
.reg .u64 %p, %q, %off, %x2, %x4;
mov.u32 %t, %tid.x;
ld.param.u64 %p, [src]; cvta.to.global.u64 %p, %p;
mul.wide.u32 %off, %t, 2; add.u64 %p, %p, %off;
ld.global.s8 %r0, [%p];
ld.global.u8 %r1, [%p+1];
ld.global.s8 %x2, [%p];
ld.global.s16 %x4, [%p];
ld.global.u16 %r3, [%p];
ld.param.u64 %q, [dst]; cvta.to.global.u64 %q, %q;
mul.wide.u32 %off, %t, 32; add.u64 %q, %q, %off;
st.global.u32 [%q], %r0;
st.global.u32 [%q+4], %r1;
st.global.u64 [%q+8], %x2;
st.global.u64 [%q+16], %x4;
st.global.u8 [%q+24], %r3;
st.global.u16 [%q+26], %r1;
st.global.u8 [%q+28], %x4;
ret;
}
""")


def test_narrow_loads_extend_into_wide_registers(rng):
    """ld.s8/.s16 into 32/64-bit registers sign-extend, ld.u8/.u16 zero-extend; st.u8/.u16 from wide
    registers keep the low bytes (and the .ptr.global.align param attribute parses)."""
    n = 64
    src = rng.integers(0, 1 << 16, n).astype(np.uint16)
    dst = K.poison((n, 32), np.uint8, rng)
    before = dst.copy()
    K.launch(KS.kernel("widen_loads"), 1, n, [src, dst])
    lo = (src & 0xFF).astype(np.uint8)
    hi = (src >> 8).astype(np.uint8)
    w = dst.view(np.uint32)
    d = dst.view(np.uint64)
    K.check_equal(w[:, 0], lo.view(np.int8).astype(np.int32).view(np.uint32), [src], "ld.s8 -> 32")
    K.check_equal(w[:, 1], hi.astype(np.uint32), [src], "ld.u8 -> 32")
    K.check_equal(d[:, 1], lo.view(np.int8).astype(np.int64).view(np.uint64), [src], "ld.s8 -> 64")
    K.check_equal(d[:, 2], src.view(np.int16).astype(np.int64).view(np.uint64), [src], "ld.s16 -> 64")
    K.check_equal(dst[:, 24], lo, [src], "st.u8 of a 32-bit register")
    K.check_equal(dst[:, 26:28].copy().view(np.uint16)[:, 0], hi.astype(np.uint16), [src], "st.u16 of 32-bit")
    K.check_equal(dst[:, 28], lo, [src], "st.u8 of a 64-bit register")
    K.check_equal(dst[:, 25], before[:, 25], [], "byte 25 untouched")
    K.check_equal(dst[:, 29:32], before[:, 29:32], [], "bytes 29-31 untouched")


KS.add("struct_param", """
.visible .entry struct_param(.param .align 8 .b8 s[24], .param .u64 out)
{
.reg .u32 %a, %b;
.reg .u64 %c, %p;
.reg .f64 %f;
ld.param.u32 %a, [s];
ld.param.u32 %b, [s+4];
ld.param.u64 %c, [s+8];
ld.param.f64 %f, [s+16];
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
st.global.u32 [%p], %b;
st.global.u32 [%p+4], %a;
st.global.u64 [%p+8], %c;
st.global.f64 [%p+16], %f;
ret;
}
""")


def test_struct_param_by_value(rng):
    """A by-value struct param (.align 8 .b8 s[24]) as nvcc emits for struct arguments."""
    blob = np.zeros(3, np.uint64)
    blob[0] = np.uint64(int(rng.integers(0, 1 << 63)))
    blob[1] = np.uint64(int(rng.integers(0, 1 << 63)))
    blob[2:3] = np.array([rng.uniform(-1e9, 1e9)]).view(np.uint64)
    out = K.poison((3,), np.uint64, rng)
    K.launch(KS.kernel("struct_param"), 1, 1, [blob.tobytes(), out])
    w = blob.view(np.uint32)
    K.check_equal(out.view(np.uint32)[:2], np.array([w[1], w[0]], np.uint32), [], "u32 fields")
    K.check_equal(out[1:], blob[1:], [], "u64 and f64 fields")


# ---------------------------------------------------------------- cp.async (sm_80): global -> shared copies

KS.add("cp_async", """
.visible .entry cp_async(.param .u64 src, .param .u64 dst)
{
.reg .u32 %t, %r, %v0, %v1, %v2, %v3;
.reg .u64 %g, %s, %off, %o;
.shared .align 16 .b8 stage[4096];
mov.u32 %t, %tid.x;
ld.param.u64 %g, [src]; cvta.to.global.u64 %g, %g;
mul.wide.u32 %off, %t, 64;
add.u64 %g, %g, %off;
mov.u64 %s, stage;
add.u64 %s, %s, %off;
cp.async.ca.shared.global [%s], [%g], 4;
cp.async.ca.shared.global [%s+4], [%g+4], 4;
cp.async.ca.shared.global [%s+8], [%g+8], 8;
cp.async.cg.shared.global [%s+16], [%g+16], 16;
cp.async.commit_group;
cp.async.ca.shared.global [%s+32], [%g+32], 16, 8;
cp.async.cg.shared.global [%s+48], [%g+48], 16, 0;
cp.async.commit_group;
cp.async.wait_group 1;
cp.async.wait_all;
bar.sync 0;
mov.u32 %r, %ntid.x;
sub.u32 %r, %r, 1;
sub.u32 %r, %r, %t;
mul.wide.u32 %o, %r, 64;
mov.u64 %s, stage;
add.u64 %s, %s, %o;
ld.param.u64 %g, [dst]; cvta.to.global.u64 %g, %g;
add.u64 %g, %g, %off;
ld.shared.v4.u32 {%v0, %v1, %v2, %v3}, [%s];
st.global.v4.u32 [%g], {%v0, %v1, %v2, %v3};
ld.shared.v4.u32 {%v0, %v1, %v2, %v3}, [%s+16];
st.global.v4.u32 [%g+16], {%v0, %v1, %v2, %v3};
ld.shared.v4.u32 {%v0, %v1, %v2, %v3}, [%s+32];
st.global.v4.u32 [%g+32], {%v0, %v1, %v2, %v3};
ld.shared.v4.u32 {%v0, %v1, %v2, %v3}, [%s+48];
st.global.v4.u32 [%g+48], {%v0, %v1, %v2, %v3};
ret;
}
""")


def test_cp_async_with_zero_fill(rng):
    """4/8/16-byte cp.async copies land in shared memory once waited for; with a src-size operand the
    bytes past it are zero-filled (16, 8 copies 8 bytes; 16, 0 copies none)."""
    threads = 64
    src = K.rand_ints(rng, "u8", threads * 64)
    dst = K.poison((threads * 64,), np.uint8, rng)
    K.launch(KS.kernel("cp_async"), 1, threads, [src, dst])
    want = src.reshape(threads, 64)[::-1].copy()
    want[:, 40:64] = 0
    K.check_equal(dst.reshape(threads, 64)[:, :40].reshape(-1), want[:, :40].reshape(-1), [], "copied bytes")
    K.check_equal(dst.reshape(threads, 64)[:, 40:].reshape(-1), want[:, 40:].reshape(-1), [], "zero-filled bytes")


KS.add("hints_and_sleep", K.elementwise("hints_and_sleep", """
nanosleep.u32 100;
nanosleep.u32 %a;
pmevent 3;
add.u32 %d, %a, 9;
""", [("a", "u32")], [("d", "u32")]))


def test_nanosleep_pmevent(rng):
    """Instructions with no architectural result must not disturb the ones that have one."""
    a = rng.integers(0, 2000, N).astype(np.uint32)
    (got,) = K.run_elementwise(KS, "hints_and_sleep", [a], ["u32"], rng)
    K.check_equal(got, a + np.uint32(9), [a], "after nanosleep/pmevent")


KS.add("param_address", """
.visible .entry param_address(.param .align 8 .b8 s[16], .param .u64 out)
{
.reg .u32 %a, %b;
.reg .u64 %q, %g, %p, %c;
mov.b64 %q, s;
ld.param.u32 %a, [%q+4];
cvta.param.u64 %g, %q;
ld.u32 %b, [%g];
ld.u64 %c, [%g+8];
ld.param.u64 %p, [out]; cvta.to.global.u64 %p, %p;
st.global.u32 [%p], %a;
st.global.u32 [%p+4], %b;
st.global.u64 [%p+8], %c;
ret;
}
""")


def test_kernel_param_address(rng):
    """The address of a kernel param (mov of its name), read through ld.param and, after cvta.param,
    through a generic load: what nvcc 12+ emits when a by-value struct's address is taken."""
    blob = K.rand_ints(rng, "u64", 2)
    out = K.poison((2,), np.uint64, rng)
    K.launch(KS.kernel("param_address"), 1, 1, [blob.tobytes(), out])
    w = blob.view(np.uint32)
    K.check_equal(out.view(np.uint32)[:2], np.array([w[1], w[0]], np.uint32), [], "param words")
    K.check_equal(out[1:], blob[1:], [], "param u64 via generic")


KS.add("initialisers", """
.global .align 8 .f64 dtab[2] = {0d4000000000000000, 0dBFF8000000000000};
.const .align 4 .f32 ftab[2] = {0f3FC00000, 0fC0200000};
.const .align 1 .b8 btab[4] = {1, 2, 254, 255};
.global .align 4 .u32 target[2] = {11, 22};
.global .align 8 .u64 ptr_to_target = target;
.global .align 8 .u64 ptr_to_second = generic(target)+4;
""" + K.elementwise("initialisers", """
and.b32 %k, %a, 1;
mul.wide.u32 %off, %k, 8;
mov.u64 %q, dtab; add.u64 %q, %q, %off;
ld.global.f64 %x, [%q];
mul.wide.u32 %off, %k, 4;
mov.u64 %q, ftab; add.u64 %q, %q, %off;
ld.const.f32 %f, [%q];
cvt.f64.f32 %y, %f;
add.rn.f64 %x, %x, %y;
cvt.rzi.s32.f64 %t, %x;
mov.u64 %q, btab;
cvt.u64.u32 %off, %k;
add.u64 %q, %q, %off;
add.u64 %q, %q, 2;
ld.const.u8 %h, [%q];
cvt.u32.u16 %u, %h;
add.u32 %d, %t, %u;
ld.global.u64 %q, [ptr_to_target];
ld.u32 %u, [%q];
add.u32 %d, %d, %u;
ld.global.u64 %q, [ptr_to_second];
ld.u32 %u, [%q];
add.u32 %d, %d, %u;
""", [("a", "u32")], [("d", "u32")], temps=[("k", "u32"), ("off", "u64"), ("q", "u64"), ("x", "f64"),
                                             ("y", "f64"), ("f", "f32"), ("t", "s32"), ("h", "u16"),
                                             ("u", "u32")]))


def test_initialisers(rng):
    """Module variables initialised with f64/f32 hex literals, bytes, and addresses of other variables
    (plain and generic(var)+offset), read from the kernel."""
    a = K.rand_ints(rng, "u32", N)
    (got,) = K.run_elementwise(KS, "initialisers", [a], ["u32"], rng)
    k = (a & np.uint32(1)).astype(int)
    t = np.where(k == 0, 2.0 + 1.5, -1.5 - 2.5).astype(int)
    u = np.where(k == 0, 254, 255)
    want = (t + u + 11 + 22) & 0xFFFFFFFF
    K.check_equal(got, want.astype(np.uint32), [a], "initialised tables")


KS.add("shared_cta_spelling", K.elementwise("shared_cta_spelling", """
mov.u64 %s, sbuf4;
cvt.u64.u32 %off, %tx;
shl.b64 %off, %off, 2;
add.u64 %s, %s, %off;
st.shared::cta.u32 [%s], %a;
atom.shared::cta.add.u32 %t, [%s], 5;
ld.shared::cta.u32 %d, [%s];
add.u32 %d, %d, %t;
""", [("a", "u32")], [("d", "u32")], temps=[("s", "u64"), ("off", "u64"), ("t", "u32")])
    .replace(".reg .pred %p_oob;", ".reg .pred %p_oob;\n.shared .align 4 .b32 sbuf4[128];"))


def test_shared_cta_spelling(rng):
    """.shared::cta (PTX 7.8+) is the same space as .shared."""
    a = K.rand_ints(rng, "u32", N)
    (got,) = K.run_elementwise(KS, "shared_cta_spelling", [a], ["u32"], rng)
    K.check_equal(got, (a.astype(np.uint64) * 2 + 5).astype(np.uint32), [a], ".shared::cta")


# ---------------------------------------------------------------- addresses computed every legal way

KS.add("pointer_routes", """
.visible .entry pointer_routes(.param .u64 out)
{
.reg .u32 %i, %t, %c, %n, %v, %lo, %hi, %lo2, %hi2;
.reg .u64 %base, %a, %b, %x, %off, %slot;
.reg .pred %p;
.local .align 8 .u64 spill;
mov.u32 %t, %tid.x; mov.u32 %c, %ctaid.x; mov.u32 %n, %ntid.x;
mad.lo.u32 %i, %c, %n, %t;
ld.param.u64 %base, [out];
cvta.to.global.u64 %base, %base;
mul.wide.u32 %off, %i, 32;
add.u64 %a, %base, %off;
shl.b32 %v, %i, 4;
st.global.u32 [%a], %v;
mov.b64 {%lo, %hi}, %a;
mov.b64 %b, {%lo, %hi};
or.b32 %v, %v, 1;
st.global.u32 [%b+4], %v;
add.u64 %b, %a, 11;
and.b64 %b, %b, -4;
shl.b32 %v, %i, 4; or.b32 %v, %v, 2;
st.global.u32 [%b], %v;
xor.b64 %b, %a, 0x5a5a5a5a00000000;
xor.b64 %b, %b, 0x5a5a5a5a00000000;
shl.b32 %v, %i, 4; or.b32 %v, %v, 3;
st.global.u32 [%b+12], %v;
sub.u64 %x, %a, %base;
add.u64 %b, %base, %x;
shl.b32 %v, %i, 4; or.b32 %v, %v, 4;
st.global.u32 [%b+16], %v;
and.b32 %lo, %i, 1;
setp.eq.u32 %p, %lo, 1;
add.u64 %x, %a, 20;
add.u64 %b, %base, 0;
selp.b64 %b, %x, %b, %p;
@!%p add.u64 %b, %a, 20;
shl.b32 %v, %i, 4; or.b32 %v, %v, 5;
st.global.u32 [%b], %v;
st.local.u64 [spill], %a;
ld.local.u64 %b, [spill];
shl.b32 %v, %i, 4; or.b32 %v, %v, 6;
st.global.u32 [%b+24], %v;
add.u64 %slot, %a, 28;
mov.b64 {%lo, %hi}, %slot;
shfl.sync.bfly.b32 %lo2, %lo, 1, 0x1f, 0xffffffff;
shfl.sync.bfly.b32 %hi2, %hi, 1, 0x1f, 0xffffffff;
mov.b64 %b, {%lo2, %hi2};
shl.b32 %v, %i, 4; or.b32 %v, %v, 7;
st.global.u32 [%b], %v;
ret;
}
""")


def test_addresses_through_every_route(rng):
    """A pointer split and rejoined, masked, xored twice, rebuilt from a difference, selected, spilled to
    local memory, and exchanged between lanes with shfl must still address the same memory."""
    n = 256
    out = K.poison((n, 8), np.uint32, rng)
    K.launch(KS.kernel("pointer_routes"), n // 64, 64, [out])
    i = np.arange(n)[:, None]
    want = (i << 4) | np.arange(8)[None, :]
    want[:, 7] = ((np.arange(n) ^ 1) << 4) | 7
    K.check_equal(out.reshape(-1), want.astype(np.uint32).reshape(-1), [], "stores through rebuilt pointers")


KS.add("aliasing_params", """
.visible .entry aliasing_params(.param .u64 a, .param .u64 b, .param .u64 c)
{
.reg .u32 %i, %v, %w;
.reg .u64 %pa, %pb, %pc, %off;
mov.u32 %i, %tid.x;
mul.wide.u32 %off, %i, 4;
ld.param.u64 %pa, [a]; cvta.to.global.u64 %pa, %pa; add.u64 %pa, %pa, %off;
ld.param.u64 %pb, [b]; cvta.to.global.u64 %pb, %pb; add.u64 %pb, %pb, %off;
ld.param.u64 %pc, [c]; cvta.to.global.u64 %pc, %pc; add.u64 %pc, %pc, %off;
ld.global.u32 %v, [%pa];
add.u32 %v, %v, 1;
st.global.u32 [%pb], %v;
ld.global.u32 %w, [%pa];
mul.lo.u32 %w, %w, 3;
st.global.u32 [%pc], %w;
ret;
}
""")


def test_aliasing_params(rng):
    """Kernel pointer params may alias (no __restrict__): a store through b must be seen by a load through a."""
    x = rng.integers(0, 1 << 20, 128).astype(np.uint32)
    y = K.poison((128,), np.uint32, rng)
    x0 = x.copy()
    K.launch(KS.kernel("aliasing_params"), 1, 128, [x, x, y])
    K.check_equal(x, x0 + np.uint32(1), [x0], "stored through the alias")
    K.check_equal(y, (x0 + np.uint32(1)) * np.uint32(3), [x0], "reloaded after the aliasing store")
