/* What NVIDIA's driver answers for legacy texture/surface references (cuModuleGetTexRef, cuTexRef*, cuSurfRef*,
 * cuParamSetTexRef) and PTX modules with .texref/.surfref/.samplerref in unified and independent texturing mode:
 * which modules load, fetches through references (the texels and coordinates are in the output, so the answers
 * can be replayed), and the CUresult of bad calls. One JSON object on stdout. Where cuModuleGetTexRef gives no
 * reference (CUDA 12 and later drivers refuse such modules), a cuTexRefCreate'd one stands in, so the cuTexRef*
 * answers are still the driver's. tests/data/nvidia_texref_answers.json holds NVIDIA's; tests/driver/test_texref.py
 * runs the probe against the shim and compares.
 *
 * Build: gcc -std=gnu11 -O1 -o texref_probe nvidia_texref_probe.c -ldl
 * Run:   ./texref_probe [main|unbound|unloaded|created|inits] [path of libcuda.so.1]
 *        (TEXREF_CUBIN_DIR=DIR: load DIR/NAME.cubin, ptxas' build of module NAME, instead of the PTX)
 *        ./texref_probe load FILE.ptx...   (the JIT's answer to each file)
 *        ./texref_probe ptx DIR            (this probe's modules as files, for ptxas)
 * (each phase in a process of its own: `unbound` may leave the context dead, `unloaded`/`created` may crash).
 * No cuda.h: libcuda is opened with dlopen so that a symbol a driver no longer exports is an answer too. */
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fn_t)();
typedef void *H;
static void *lib;

static fn_t sym(const char *n) {
    fn_t f = (fn_t)dlsym(lib, n);
    if (!f) { printf("{\"missing\": \"%s\"}\n", n); exit(3); }
    return f;
}
#define F(name) sym(#name)

/* ---- JSON: a flat object of named answers (arrays and small objects as values) ---- */
static int level, first[16] = {1};
static void key(const char *k) {
    printf("%s\n%*s", first[level] ? "" : ",", 2 * level, "");
    first[level] = 0;
    if (k) printf("\"%s\": ", k);
}
static void open_(const char *k, char c) { key(k); putchar(c); first[++level] = 1; }
static void close_(char c) { level--; printf("%c", c); }
static void jstr(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}
static void kint(const char *k, long long v) { key(k); printf("%lld", v); }
static void kstr(const char *k, const char *s) { key(k); jstr(s); }
static void khex(const char *k, uint32_t v) { key(k); printf("\"%08x\"", v); }
static void khexs(const char *k, const uint32_t *v, int n) {
    open_(k, '[');
    for (int i = 0; i < n; i++) khex(NULL, v[i]);
    close_(']');
}
static void kbytes(const char *k, const void *p, size_t n) {
    key(k); putchar('"');
    for (size_t i = 0; i < n; i++) printf("%02x", ((const unsigned char *)p)[i]);
    putchar('"');
}

/* A call whose answer is its CUresult; one that crashes the driver answers "crash". */
static sigjmp_buf jb;
static volatile int guarded;
static void on_segv(int s) {
    if (guarded) siglongjmp(jb, 1);
    signal(s, SIG_DFL);
    raise(s);
}
#define RC(name, expr) do { key(name); guarded = 1; \
    if (sigsetjmp(jb, 1)) printf("\"crash\""); else { int r_ = (expr); printf("%d", r_); } guarded = 0; } while (0)

static uint32_t seed = 12345;
static uint32_t lcg(void) { seed = seed * 1664525u + 1013904223u; return seed >> 8; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* ---- the PTX ---- */
#define HDR(t) ".version 8.0\n.target sm_80" t "\n.address_size 64\n"
#define TID "  .reg .u32 %r<16>;\n  .reg .u64 %rd<16>;\n  .reg .f32 %f<16>;\n  .reg .pred %p<4>;\n" \
    "  mov.u32 %r1, %tid.x;\n  ld.param.u32 %r2, [n];\n  setp.ge.u32 %p1, %r1, %r2;\n  @%p1 bra DONE;\n"
/* coords[i] (two floats) into %f1, %f2 from param `c`; out address for 16 bytes per thread in %rd6 */
#define XY(c) "  ld.param.u64 %rd1, [" c "];\n  cvta.to.global.u64 %rd1, %rd1;\n  mul.wide.u32 %rd2, %r1, 8;\n" \
    "  add.u64 %rd3, %rd1, %rd2;\n  ld.global.v2.f32 {%f1, %f2}, [%rd3];\n"
#define OUT16 "  ld.param.u64 %rd4, [out];\n  cvta.to.global.u64 %rd4, %rd4;\n  mul.wide.u32 %rd5, %r1, 16;\n" \
    "  add.u64 %rd6, %rd4, %rd5;\n"
#define STF "  st.global.v4.f32 [%rd6], {%f3, %f4, %f5, %f6};\nDONE:\n  ret;\n}\n"
#define STU "  st.global.v4.u32 [%rd6], {%r3, %r4, %r5, %r6};\nDONE:\n  ret;\n}\n"
#define IO "(.param .u64 out, .param .u64 coords, .param .u32 n"

static const char *PTX_U = HDR("")
    ".global .texref tref2d;\n.global .texref tref1d;\n.global .surfref sref;\n.global .u32 plain;\n"
    ".entry k_tex2d" IO ")\n{\n" TID XY("coords") OUT16
    "  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [tref2d, {%f1, %f2}];\n" STF
    ".entry k_tex2d_u" IO ")\n{\n" TID XY("coords") OUT16
    "  tex.2d.v4.u32.f32 {%r3, %r4, %r5, %r6}, [tref2d, {%f1, %f2}];\n" STU
    ".entry k_tex2d_ind" IO ")\n{\n" TID XY("coords") OUT16
    "  mov.u64 %rd7, tref2d;\n  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [%rd7, {%f1, %f2}];\n" STF
    ".entry k_tld4" IO ")\n{\n" TID XY("coords") OUT16
    "  tld4.g.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [tref2d, {%f1, %f2}];\n" STF
    ".entry k_fetch1d" IO ")\n{\n" TID
    "  ld.param.u64 %rd1, [coords];\n  cvta.to.global.u64 %rd1, %rd1;\n  mul.wide.u32 %rd2, %r1, 4;\n"
    "  add.u64 %rd3, %rd1, %rd2;\n  ld.global.s32 %r7, [%rd3];\n" OUT16
    "  tex.1d.v4.u32.s32 {%r3, %r4, %r5, %r6}, [tref1d, {%r7}];\n" STU
    ".entry k_query(.param .u64 out)\n{\n  .reg .u32 %r<4>;\n  .reg .u64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd1, %rd1;\n"
#define Q(op, what, ref, off) "  " op "." what ".b32 %r1, [" ref "];\n  st.global.u32 [%rd1+" off "], %r1;\n"
    Q("txq", "width", "tref2d", "0") Q("txq", "height", "tref2d", "4") Q("txq", "depth", "tref2d", "8")
    Q("txq", "channel_data_type", "tref2d", "12") Q("txq", "channel_order", "tref2d", "16")
    Q("txq", "normalized_coords", "tref2d", "20") Q("txq", "filter_mode", "tref2d", "24")
    Q("txq", "addr_mode_0", "tref2d", "28") Q("txq", "addr_mode_1", "tref2d", "32")
    Q("txq", "addr_mode_2", "tref2d", "36") Q("txq", "array_size", "tref2d", "40")
    Q("txq", "num_mipmap_levels", "tref2d", "44") Q("txq", "num_samples", "tref2d", "48")
    Q("suq", "width", "sref", "52") Q("suq", "height", "sref", "56") Q("suq", "depth", "sref", "60")
    Q("suq", "channel_data_type", "sref", "64") Q("suq", "channel_order", "sref", "68")
    Q("suq", "array_size", "sref", "72")
    "  mov.u64 %rd2, tref2d;\n" Q("txq", "width", "%rd2", "76")
    "  mov.u64 %rd3, sref;\n" Q("suq", "width", "%rd3", "80")
    Q("txq", "width", "tref1d", "84") Q("txq", "channel_data_type", "tref1d", "88")
    "  ret;\n}\n"
    /* istypep of: a (texture object), b (surface object), the references, a global's address, 0, 1234567 */
    ".entry k_istypep(.param .u64 out, .param .u64 a, .param .u64 b)\n{\n  .reg .u32 %r<4>;\n  .reg .u64 %rd<16>;\n"
    "  .reg .pred %p<4>;\n  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd1, %rd1;\n"
    "  ld.param.u64 %rd2, [a];\n  ld.param.u64 %rd3, [b];\n  mov.u64 %rd4, tref2d;\n  mov.u64 %rd5, sref;\n"
    "  mov.u64 %rd6, plain;\n  mov.u64 %rd7, 0;\n  mov.u64 %rd8, 1234567;\n"
#define IS(reg, off) "  istypep.texref %p1, " reg ";\n  selp.u32 %r1, 1, 0, %p1;\n  st.global.u32 [%rd1+" off "], %r1;\n" \
    "  istypep.surfref %p1, " reg ";\n  selp.u32 %r1, 1, 0, %p1;\n  st.global.u32 [%rd1+" off "+4], %r1;\n" \
    "  istypep.samplerref %p1, " reg ";\n  selp.u32 %r1, 1, 0, %p1;\n  st.global.u32 [%rd1+" off "+8], %r1;\n"
    IS("%rd2", "0") IS("%rd3", "12") IS("%rd4", "24") IS("%rd5", "36") IS("%rd6", "48") IS("%rd7", "60")
    IS("%rd8", "72")
    "  st.global.u64 [%rd1+88], %rd4;\n  st.global.u64 [%rd1+96], %rd5;\n  ret;\n}\n"
    /* each thread (x, y) stores y * 1000 + x at its u32 texel; k_suld reads 2 texels to the right, .clamp */
    ".entry k_sust()\n{\n  .reg .u32 %r<8>;\n  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %tid.y;\n"
    "  mad.lo.u32 %r3, %r2, 1000, %r1;\n  shl.b32 %r4, %r1, 2;\n"
    "  sust.b.2d.b32.trap [sref, {%r4, %r2}], {%r3};\n  ret;\n}\n"
    ".entry k_suld(.param .u64 out)\n{\n  .reg .u32 %r<8>;\n  .reg .u64 %rd<8>;\n  mov.u32 %r1, %tid.x;\n"
    "  mov.u32 %r2, %tid.y;\n  mov.u32 %r5, %ntid.x;\n  mad.lo.u32 %r6, %r2, %r5, %r1;\n"
    "  shl.b32 %r4, %r1, 2;\n  add.u32 %r4, %r4, 8;\n  suld.b.2d.b32.clamp {%r3}, [sref, {%r4, %r2}];\n"
    "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd1, %rd1;\n  mul.wide.u32 %rd2, %r6, 4;\n"
    "  add.u64 %rd3, %rd1, %rd2;\n  st.global.u32 [%rd3], %r3;\n  ret;\n}\n";

/* independent mode: samplers of every addressing mode, one left uninitialised */
#define SAMPLERS \
    ".global .samplerref s0 = { addr_mode_0 = clamp_to_edge, addr_mode_1 = clamp_to_edge, filter_mode = nearest };\n" \
    ".global .samplerref s1 = { addr_mode_0 = wrap, addr_mode_1 = mirror, filter_mode = linear };\n" \
    ".global .samplerref s2 = { addr_mode_0 = clamp_to_border, addr_mode_1 = clamp_to_border, filter_mode = nearest, " \
    "force_unnormalized_coords = 1 };\n" \
    ".global .samplerref s3 = { addr_mode_0 = clamp_ogl, addr_mode_1 = clamp_ogl, filter_mode = linear, " \
    "force_unnormalized_coords = 1 };\n" \
    ".global .samplerref s4;\n"
#define ITEX(s, c, k) XY(c) "  mul.wide.u32 %rd5, %r1, 16;\n  add.u64 %rd5, %rd5, " k ";\n  add.u64 %rd6, %rd4, %rd5;\n" \
    "  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [itex, " s ", {%f1, %f2}];\n" \
    "  st.global.v4.f32 [%rd6], {%f3, %f4, %f5, %f6};\n"
static const char *PTX_I = HDR(", texmode_independent") ".global .texref itex;\n" SAMPLERS
    /* sampler k of thread i -> out[(k * 64 + i) * 16]; s2 and s3 read the unnormalised coordinates `cu` */
    ".entry ik_tex(.param .u64 out, .param .u64 cn, .param .u64 cu, .param .u32 n)\n{\n" TID
    "  ld.param.u64 %rd4, [out];\n  cvta.to.global.u64 %rd4, %rd4;\n"
    ITEX("s0", "cn", "0") ITEX("s1", "cn", "1024") ITEX("s2", "cu", "2048") ITEX("s3", "cu", "3072")
    ITEX("s4", "cn", "4096") "DONE:\n  ret;\n}\n"
    ".entry ik_tld4(.param .u64 out, .param .u64 coords, .param .u32 n)\n{\n" TID XY("coords") OUT16
    "  tld4.r.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [itex, s0, {%f1, %f2}];\n" STF
    /* the references through registers: tex, txq of both, istypep of both and of a texture object (h) */
    ".entry ik_reg" IO ", .param .u64 h)\n{\n" TID XY("coords") OUT16
    "  mov.u64 %rd7, itex;\n  mov.u64 %rd8, s2;\n"
    "  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [%rd7, %rd8, {%f1, %f2}];\n"
    "  st.global.v4.f32 [%rd6], {%f3, %f4, %f5, %f6};\n  setp.ne.u32 %p1, %r1, 0;\n  @%p1 bra DONE;\n"
    "  ld.param.u64 %rd9, [h];\n  txq.width.b32 %r3, [%rd7];\n  txq.addr_mode_0.b32 %r4, [%rd8];\n"
    "  istypep.texref %p2, %rd7;\n  selp.u32 %r5, 1, 0, %p2;\n  istypep.samplerref %p2, %rd7;\n"
    "  selp.u32 %r6, 1, 0, %p2;\n  st.global.v4.u32 [%rd4+512], {%r3, %r4, %r5, %r6};\n"
    "  istypep.texref %p2, %rd8;\n  selp.u32 %r3, 1, 0, %p2;\n  istypep.samplerref %p2, %rd8;\n"
    "  selp.u32 %r4, 1, 0, %p2;\n  istypep.texref %p2, %rd9;\n  selp.u32 %r5, 1, 0, %p2;\n"
    "  istypep.samplerref %p2, %rd9;\n  selp.u32 %r6, 1, 0, %p2;\n  st.global.v4.u32 [%rd4+528], {%r3, %r4, %r5, %r6};\n"
    "DONE:\n  ret;\n}\n";

static const char *PTX_IQ = HDR(", texmode_independent") SAMPLERS
    ".entry iq(.param .u64 out)\n{\n  .reg .u32 %r<4>;\n  .reg .u64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd1, %rd1;\n"
#define SQ(s, b) Q("txq", "filter_mode", s, b "+0") Q("txq", "addr_mode_0", s, b "+4") \
    Q("txq", "addr_mode_1", s, b "+8") Q("txq", "addr_mode_2", s, b "+12") \
    Q("txq", "force_unnormalized_coords", s, b "+16")
    SQ("s0", "0") SQ("s1", "20") SQ("s2", "40") SQ("s3", "60") SQ("s4", "80") "  ret;\n}\n";

static const char *PTX_IQT = HDR(", texmode_independent") ".global .texref itex;\n"
    ".entry iqt(.param .u64 out)\n{\n  .reg .u32 %r<4>;\n  .reg .u64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd1, %rd1;\n"
    Q("txq", "width", "itex", "0") Q("txq", "height", "itex", "4") Q("txq", "normalized_coords", "itex", "8")
    Q("txq", "channel_data_type", "itex", "12") Q("txq", "channel_order", "itex", "16") "  ret;\n}\n";

/* kernel parameters of the opaque types, given texture/surface objects */
static const char *PTX_PU = HDR("")
    ".entry kp" IO ", .param .texref t)\n{\n" TID XY("coords") OUT16
    "  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [t, {%f1, %f2}];\n" STF;
static const char *PTX_PI = HDR(", texmode_independent")
    ".entry kp" IO ", .param .texref t, .param .samplerref s)\n{\n" TID XY("coords") OUT16
    "  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [t, s, {%f1, %f2}];\n" STF;
static const char *PTX_PP = HDR("")
    ".entry kp" IO ", .param .u64 .ptr .texref t)\n{\n" TID XY("coords") OUT16
    "  ld.param.u64 %rd8, [t];\n  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [%rd8, {%f1, %f2}];\n" STF;
static const char *PTX_PS = HDR("")
    ".entry ks(.param .surfref s)\n{\n  .reg .u32 %r<8>;\n  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %tid.y;\n"
    "  mad.lo.u32 %r3, %r2, 1000, %r1;\n  add.u32 %r3, %r3, 500000;\n  shl.b32 %r4, %r1, 2;\n"
    "  sust.b.2d.b32.trap [s, {%r4, %r2}], {%r3};\n  ret;\n}\n";

/* forms whose acceptance is the answer */
static const char *PTX_IND_REG = HDR(", texmode_independent") ".global .texref t;\n.global .samplerref s;\n"
    ".entry k(.param .u64 out)\n{\n  .reg .u64 %rd<4>;\n  .reg .f32 %f<8>;\n  mov.f32 %f1, 0f3F000000;\n"
    "  mov.u64 %rd1, t;\n  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [%rd1, s, {%f1, %f1}];\n"
    "  ld.param.u64 %rd2, [out];\n  st.global.f32 [%rd2], %f3;\n  ret;\n}\n";
static const char *PTX_IND_OBJ = HDR(", texmode_independent")
    ".entry k(.param .u64 out, .param .u64 h)\n{\n  .reg .u64 %rd<4>;\n  .reg .f32 %f<8>;\n"
    "  mov.f32 %f1, 0f3F000000;\n  ld.param.u64 %rd1, [h];\n"
    "  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [%rd1, {%f1, %f1}];\n"
    "  ld.param.u64 %rd2, [out];\n  st.global.f32 [%rd2], %f3;\n  ret;\n}\n";
static const char *PTX_IND_SURFOBJ = HDR(", texmode_independent")
    ".entry k(.param .u64 h)\n{\n  .reg .u64 %rd<4>;\n  .reg .u32 %r<4>;\n  mov.u32 %r1, 0;\n"
    "  ld.param.u64 %rd1, [h];\n  sust.b.2d.b32.trap [%rd1, {%r1, %r1}], {%r1};\n  ret;\n}\n";
static const char *PTX_UNI_SAMPLER = HDR("") ".global .texref t;\n.global .samplerref s;\n"
    ".entry k(.param .u64 out)\n{\n  .reg .u64 %rd<4>;\n  .reg .f32 %f<8>;\n  mov.f32 %f1, 0f3F000000;\n"
    "  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [t, s, {%f1, %f1}];\n"
    "  ld.param.u64 %rd2, [out];\n  st.global.f32 [%rd2], %f3;\n  ret;\n}\n";
static const char *PTX_S = HDR("") ".global .surfref sref;\n"
    ".entry k_sust()\n{\n  .reg .u32 %r<8>;\n  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %tid.y;\n"
    "  mad.lo.u32 %r3, %r2, 1000, %r1;\n  shl.b32 %r4, %r1, 2;\n"
    "  sust.b.2d.b32.trap [sref, {%r4, %r2}], {%r3};\n  ret;\n}\n";
/* texref initialisers */
#define TQ(t) ".entry q(.param .u64 out)\n{\n  .reg .u32 %r<4>;\n  .reg .u64 %rd<4>;\n" \
    "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd1, %rd1;\n" \
    Q("txq", "normalized_coords", "t", "0") Q("txq", "width", "t", "4") t "  ret;\n}\n"
#define TQS Q("txq", "filter_mode", "t", "8") Q("txq", "addr_mode_0", "t", "12") Q("txq", "addr_mode_1", "t", "16")
static const char *INITS[][2] = {
    {"init_u_filter", HDR("") ".global .texref t = { filter_mode = linear };\n" TQ(TQS)},
    {"init_u_full", HDR("") ".global .texref t = { normalized_coords = 1, filter_mode = linear, addr_mode_0 = wrap, "
                    "addr_mode_1 = clamp_to_border, addr_mode_2 = mirror };\n" TQ(TQS)},
    {"init_i_norm", HDR(", texmode_independent") ".global .texref t = { normalized_coords = 1 };\n" TQ("")},
    {"init_i_filter", HDR(", texmode_independent") ".global .texref t = { filter_mode = linear };\n" TQ("")},
    {"init_u_width", HDR("") ".global .texref t = { width = 4 };\n" TQ("")},
};

/* ---- helpers ---- */
static fn_t cuModuleLoadDataEx, cuModuleGetFunction, cuModuleGetTexRef, cuModuleGetSurfRef, cuLaunchKernel,
    cuCtxSynchronize, cuMemAlloc, cuMemFree, cuMemcpyHtoD, cuMemcpyDtoH;

static H load(const char *name, const char *ptx) {
    H m = 0;
    char log[2048] = {0};
    int opts[2] = {5, 6};   /* CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    char k[96];
    const char *dir = getenv("TEXREF_CUBIN_DIR");
    static char cubin[1 << 20];
    if (dir) {      /* the module as ptxas built it for the device: the driver's loader without its JIT */
        char path[512];
        snprintf(path, sizeof path, "%s/%s.cubin", dir, name);
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(cubin, 1, sizeof cubin, f);
            fclose(f);
            ptx = got ? cubin : ptx;
        }
    }
    int r = cuModuleLoadDataEx(&m, ptx, 2, opts, vals);
    snprintf(k, sizeof k, "load.%s", name);
    kint(k, r);
    if (r) { snprintf(k, sizeof k, "load.%s.log", name); kstr(k, log); }
    return r ? NULL : m;
}

static H func(H mod, const char *name) {
    H f = 0;
    if (!mod || cuModuleGetFunction(&f, mod, name)) return NULL;
    return f;
}

static uint64_t dalloc(size_t n) { uint64_t p = 0; cuMemAlloc(&p, n); return p; }

static int tail_words;    /* words of out[128...] a kernel writes besides its threads' results */

/* Launch `f` (one block of `n` threads) with params (out, coords, n, extra...) and record the 4 words each
   thread wrote. */
static void fetchx(const char *name, H f, const void *coords, size_t csize, int n, void **extra, int nextra) {
    uint32_t out[5 * 64 * 4];
    memset(out, 0xA5, sizeof out);
    uint64_t dout = dalloc(sizeof out), dc = dalloc(csize);
    cuMemcpyHtoD(dout, out, sizeof out);
    cuMemcpyHtoD(dc, coords, csize);
    void *args[8] = {&dout, &dc, &n};
    for (int i = 0; i < nextra; i++) args[3 + i] = extra[i];
    open_(name, '{');
    kint("launch", f ? cuLaunchKernel(f, 1, 1, 1, n, 1, 1, 0, NULL, args, NULL) : -1);
    kint("sync", cuCtxSynchronize());
    cuMemcpyDtoH(out, dout, sizeof out);
    khexs("coords", coords, (int)(csize / 4));
    khexs("results", out, 4 * n);
    if (tail_words) khexs("tail", out + 128, tail_words);
    close_('}');
    cuMemFree(dout);
    cuMemFree(dc);
}
static void fetch(const char *name, H f, const void *coords, size_t csize, int n) {
    fetchx(name, f, coords, csize, n, NULL, 0);
}

/* Launch a one-thread kernel(out) and record `nwords` of what it wrote. */
static void query(const char *name, H f, int nwords) {
    uint32_t q[64];
    memset(q, 0xA5, sizeof q);
    uint64_t d = dalloc(sizeof q);
    cuMemcpyHtoD(d, q, sizeof q);
    void *args[] = {&d};
    char k[96];
    snprintf(k, sizeof k, "%s.launch", name);
    kint(k, f ? cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) : -1);
    snprintf(k, sizeof k, "%s.sync", name);
    kint(k, cuCtxSynchronize());
    cuMemcpyDtoH(q, d, sizeof q);
    khexs(name, q, nwords);
    cuMemFree(d);
}

typedef struct { size_t w, h; int fmt; unsigned nch; } AD;
typedef struct { size_t w, h, d; int fmt; unsigned nch, flags; } AD3;

#define W 8
#define HH 4
#define NC 24
static float cn[NC][2], cu[NC][2];   /* normalised and texel-space coordinates */

static void make_coords(void) {
    /* on a 1/64 texel grid, some outside the texture, some on texel centres and edges */
    for (int i = 0; i < NC; i++) {
        float x = (float)((int)(lcg() % (64 * (W + 4))) - 64 * 2) / 64.0f;
        float y = (float)((int)(lcg() % (64 * (HH + 4))) - 64 * 2) / 64.0f;
        if (i < 4) { x = i + 0.5f; y = (i % HH) + 0.5f; }
        cu[i][0] = x; cu[i][1] = y;
        cn[i][0] = x / W; cn[i][1] = y / HH;
    }
}

static int phase_main(void) {
    fn_t init = F(cuInit), devget = F(cuDeviceGet), retain = F(cuDevicePrimaryCtxRetain), setc = F(cuCtxSetCurrent),
         drv = F(cuDriverGetVersion), name = F(cuDeviceGetName), attr = F(cuDeviceGetAttribute),
         ac = F(cuArrayCreate_v2), a3 = F(cuArray3DCreate_v2), htoa = F(cuMemcpyHtoA_v2), atoh = F(cuMemcpyAtoH_v2),
         unload = F(cuModuleUnload), toc = F(cuTexObjectCreate), soc = F(cuSurfObjectCreate),
         setarr = F(cuTexRefSetArray), setaddr = F(cuTexRefSetAddress_v2), setaddr2 = F(cuTexRefSetAddress2D_v3),
         setfmt = F(cuTexRefSetFormat), setam = F(cuTexRefSetAddressMode), setfm = F(cuTexRefSetFilterMode),
         setfl = F(cuTexRefSetFlags), setbc = F(cuTexRefSetBorderColor), setan = F(cuTexRefSetMaxAnisotropy),
         setmfm = F(cuTexRefSetMipmapFilterMode), setmma = F(cuTexRefSetMipmappedArray),
         getaddr = F(cuTexRefGetAddress_v2), getarr = F(cuTexRefGetArray), getam = F(cuTexRefGetAddressMode),
         getfm = F(cuTexRefGetFilterMode), getfmt = F(cuTexRefGetFormat), getfl = F(cuTexRefGetFlags),
         getbc = F(cuTexRefGetBorderColor), getan = F(cuTexRefGetMaxAnisotropy),
         getmfm = F(cuTexRefGetMipmapFilterMode), getmb = F(cuTexRefGetMipmapLevelBias),
         getmc = F(cuTexRefGetMipmapLevelClamp), getmma = F(cuTexRefGetMipmappedArray),
         ssetarr = F(cuSurfRefSetArray), sgetarr = F(cuSurfRefGetArray), pst = F(cuParamSetTexRef),
         getglob = F(cuModuleGetGlobal_v2);
    int (*setmb)(H, float) = (int (*)(H, float))dlsym(lib, "cuTexRefSetMipmapLevelBias");
    int (*setmc)(H, float, float) = (int (*)(H, float, float))dlsym(lib, "cuTexRefSetMipmapLevelClamp");
    int dev, v;
    H ctx;
    char nm[128] = {0};
    open_(NULL, '{');
    kstr("about", "scripts/nvidia_texref_probe.c main");
    kint("cuInit", init(0));
    devget(&dev, 0); retain(&ctx, dev); setc(ctx);
    drv(&v); kint("driver_version", v);
    name(nm, sizeof nm, dev); kstr("device", nm);
    attr(&v, 75, dev); { int mi; attr(&mi, 76, dev); char cc[16]; snprintf(cc, sizeof cc, "%d.%d", v, mi); kstr("cc", cc); }
    attr(&v, 14, dev); kint("texture_alignment", v);
    attr(&v, 51, dev); kint("texture_pitch_alignment", v);

    H mu = load("unified", PTX_U), mi = load("independent", PTX_I), miq = load("independent_sampler_queries", PTX_IQ),
      miqt = load("independent_texref_queries", PTX_IQT), mpu = load("param_texref_unified", PTX_PU),
      mpi = load("param_texref_samplerref_independent", PTX_PI), mpp = load("param_u64_ptr_texref", PTX_PP),
      mps = load("param_surfref", PTX_PS);
    load("independent_register_texref", PTX_IND_REG);
    load("independent_texture_object", PTX_IND_OBJ);
    load("independent_surface_object", PTX_IND_SURFOBJ);
    load("unified_with_sampler", PTX_UNI_SAMPLER);

    /* the textures: an 8x4 float array, an 8x4 u8x4 array, 64 u32 of linear memory, 8x4 floats pitched */
    make_coords();
    float fdata[HH][W];
    uint8_t bdata[HH][W][4];
    uint32_t ldata[64];
    for (int y = 0; y < HH; y++)
        for (int x = 0; x < W; x++) {
            fdata[y][x] = (float)((int)(lcg() % 2001) - 1000) / 8.0f;
            for (int c = 0; c < 4; c++) bdata[y][x][c] = (uint8_t)lcg();
        }
    for (int i = 0; i < 64; i++) ldata[i] = lcg() * 2654435761u;
    kbytes("data.f32", fdata, sizeof fdata);
    kbytes("data.u8x4", bdata, sizeof bdata);
    kbytes("data.linear_u32", ldata, sizeof ldata);
    H af = 0, ab = 0, as = 0;
    ac(&af, &(AD){W, HH, 0x20, 1}); htoa(af, (size_t)0, fdata, sizeof fdata);
    ac(&ab, &(AD){W, HH, 0x01, 4}); htoa(ab, (size_t)0, bdata, sizeof bdata);
    a3(&as, &(AD3){W, HH, 0, 0x03, 1, 0x02});
    uint64_t lin = dalloc(4096);
    cuMemcpyHtoD(lin, ldata, sizeof ldata);
    uint64_t pitched = dalloc(4096);
    for (int y = 0; y < HH; y++) cuMemcpyHtoD(pitched + 64 * y, fdata[y], sizeof fdata[y]);

    /* ---- cuModuleGetTexRef / GetSurfRef ---- */
    H t2 = 0, t1 = 0, sr = 0, tmp = 0, tmp2 = 0;
    RC("GetTexRef_ok", cuModuleGetTexRef(&t2, mu, "tref2d"));
    cuModuleGetTexRef(&t1, mu, "tref1d");
    if (!t2) { F(cuTexRefCreate)(&t2); kint("t2_created", t2 != NULL); }
    if (!t1) { F(cuTexRefCreate)(&t1); kint("t1_created", t1 != NULL); }
    RC("GetTexRef_again", cuModuleGetTexRef(&tmp, mu, "tref2d"));
    kint("GetTexRef_same_handle", tmp == t2);
    RC("GetTexRef_unknown", cuModuleGetTexRef(&tmp, mu, "nope"));
    RC("GetTexRef_of_surfref", cuModuleGetTexRef(&tmp, mu, "sref"));
    RC("GetTexRef_of_global", cuModuleGetTexRef(&tmp, mu, "plain"));
    RC("GetTexRef_of_kernel", cuModuleGetTexRef(&tmp, mu, "k_tex2d"));
    RC("GetTexRef_null_out", cuModuleGetTexRef(NULL, mu, "tref2d"));
    RC("GetTexRef_null_name", cuModuleGetTexRef(&tmp, mu, NULL));
    RC("GetTexRef_null_module", cuModuleGetTexRef(&tmp, NULL, "tref2d"));
    RC("GetTexRef_of_samplerref", cuModuleGetTexRef(&tmp, mi, "s0"));
    RC("GetSurfRef_ok", cuModuleGetSurfRef(&sr, mu, "sref"));
    if (!sr) { H ms = load("surfref_only", PTX_S); RC("GetSurfRef_surfref_only", cuModuleGetSurfRef(&sr, ms, "sref")); }
    RC("GetSurfRef_again", cuModuleGetSurfRef(&tmp2, mu, "sref"));
    kint("GetSurfRef_same_handle", tmp2 == sr);
    RC("GetSurfRef_unknown", cuModuleGetSurfRef(&tmp, mu, "nope"));
    RC("GetSurfRef_of_texref", cuModuleGetSurfRef(&tmp, mu, "tref2d"));
    RC("GetSurfRef_null_out", cuModuleGetSurfRef(NULL, mu, "sref"));
    { uint64_t gp = 0; size_t gs = 0;
      RC("GetGlobal_of_texref", getglob(&gp, &gs, mu, "tref2d")); kint("GetGlobal_of_texref_size", (long long)gs); }

    /* ---- the state of a reference nobody has bound ---- */
    {
        uint64_t dp = 7; H a = (H)7; int am = 77, fm = 77, fmt = 77, nch = 77, an = 77; unsigned fl = 77;
        float bc[4] = {9, 9, 9, 9}, mb = 9, mn = 9, mx = 9;
        RC("GetAddress_unbound", getaddr(&dp, t2)); kint("GetAddress_unbound_value", (long long)dp);
        RC("GetArray_unbound", getarr(&a, t2)); kint("GetArray_unbound_value", (long long)(uintptr_t)a);
        RC("GetAddressMode_unbound", getam(&am, t2, 0)); kint("GetAddressMode_unbound_value", am);
        RC("GetAddressMode_dim2", getam(&am, t2, 2)); kint("GetAddressMode_dim2_value", am);
        RC("GetAddressMode_dim3", getam(&am, t2, 3));
        RC("GetAddressMode_dim_neg", getam(&am, t2, -1));
        RC("GetFilterMode_unbound", getfm(&fm, t2)); kint("GetFilterMode_unbound_value", fm);
        RC("GetFormat_unbound", getfmt(&fmt, &nch, t2)); kint("GetFormat_unbound_format", fmt);
        kint("GetFormat_unbound_channels", nch);
        RC("GetFormat_null_both", getfmt(NULL, NULL, t2));
        RC("GetFlags_unbound", getfl(&fl, t2)); kint("GetFlags_unbound_value", fl);
        RC("GetBorderColor_unbound", getbc(bc, t2)); khexs("GetBorderColor_unbound_value", (uint32_t *)bc, 4);
        RC("GetMaxAnisotropy_unbound", getan(&an, t2)); kint("GetMaxAnisotropy_unbound_value", an);
        RC("GetMipmapFilterMode_unbound", getmfm(&fm, t2)); kint("GetMipmapFilterMode_unbound_value", fm);
        RC("GetMipmapLevelBias_unbound", getmb(&mb, t2)); khex("GetMipmapLevelBias_unbound_value", fbits(mb));
        RC("GetMipmapLevelClamp_unbound", getmc(&mn, &mx, t2));
        khex("GetMipmapLevelClamp_unbound_min", fbits(mn)); khex("GetMipmapLevelClamp_unbound_max", fbits(mx));
        RC("GetMipmappedArray_unbound", getmma(&a, t2));
        RC("GetFilterMode_null", getfm(NULL, t2));
        RC("GetFlags_null", getfl(NULL, t2));
        RC("GetAddressMode_null", getam(NULL, t2, 0));
        RC("GetBorderColor_null", getbc(NULL, t2));
        RC("GetFilterMode_null_ref", getfm(&fm, NULL));
        RC("SurfGetArray_unbound", sgetarr(&a, sr));
    }
    /* ---- bad Set* calls ---- */
    {
        size_t off = 777;
        RC("SetArray_flags0", setarr(t2, af, 0));
        RC("SetArray_flags2", setarr(t2, af, 2));
        RC("SetArray_null_array", setarr(t2, NULL, 1));
        RC("SetArray_null_ref", setarr(NULL, af, 1));
        RC("SetFormat_bad_format", setfmt(t2, 0x77, 1));
        RC("SetFormat_3_channels", setfmt(t2, 0x20, 3));
        RC("SetFormat_0_channels", setfmt(t2, 0x20, 0));
        RC("SetFormat_ok", setfmt(t2, 0x03, 1));
        RC("SetAddressMode_dim3", setam(t2, 3, 1));
        RC("SetAddressMode_dim_neg", setam(t2, -1, 1));
        RC("SetAddressMode_mode4", setam(t2, 0, 4));
        RC("SetFilterMode_2", setfm(t2, 2));
        RC("SetFlags_unknown_bit", setfl(t2, 0x100));
        RC("SetFlags_all_known", setfl(t2, 0x73));
        { unsigned fl = 0; getfl(&fl, t2); kint("GetFlags_after_all_known", fl); }
        setfl(t2, 0);
        RC("SetBorderColor_null", setbc(t2, NULL));
        RC("SetBorderColor_ok_not_border", setbc(t2, (float[4]){1, 2, 3, 4}));
        { float bc[4] = {0}; getbc(bc, t2); khexs("GetBorderColor_after_set", (uint32_t *)bc, 4); }
        RC("SetMaxAnisotropy_0", setan(t2, 0));
        RC("SetMaxAnisotropy_17", setan(t2, 17));
        { int an = 0; getan(&an, t2); kint("GetMaxAnisotropy_after_17", an); }
        setan(t2, 1);
        RC("SetMipmapFilterMode_2", setmfm(t2, 2));
        RC("SetMipmapFilterMode_1", setmfm(t2, 1));
        RC("SetMipmapLevelBias", setmb ? setmb(t2, 1.5f) : -1);
        RC("SetMipmapLevelClamp", setmc ? setmc(t2, 0.25f, 3.5f) : -1);
        RC("SetMipmapLevelClamp_inverted", setmc ? setmc(t2, 4.0f, 1.0f) : -1);
        { float mb = 0, mn = 0, mx = 0; int fm = 9; getmb(&mb, t2); getmc(&mn, &mx, t2); getmfm(&fm, t2);
          khex("GetMipmapLevelBias_after", fbits(mb)); khex("GetMipmapLevelClamp_after_min", fbits(mn));
          khex("GetMipmapLevelClamp_after_max", fbits(mx)); kint("GetMipmapFilterMode_after", fm); }
        RC("SetMipmappedArray_null", setmma(t2, NULL, 1));
        RC("SetAddress_null_offset_ok", setaddr(NULL, t1, lin, (size_t)256));
        RC("SetAddress_misaligned", setaddr(&off, t1, lin + 8, (size_t)200)); kint("SetAddress_misaligned_offset", (long long)off);
        { uint64_t dp = 0; RC("GetAddress_after_misaligned", getaddr(&dp, t1));
          kint("GetAddress_after_misaligned_delta", (long long)(dp - lin)); }
        off = 777;
        RC("SetAddress_misaligned_null_offset", setaddr(NULL, t1, lin + 8, (size_t)200));
        RC("SetAddress_dptr0", setaddr(&off, t1, (uint64_t)0, (size_t)256));
        RC("SetAddress_bytes0", setaddr(&off, t1, lin, (size_t)0));
        RC("SetAddress_unallocated", setaddr(&off, t1, (uint64_t)0x1000, (size_t)256));
        RC("SetAddress_huge", setaddr(&off, t1, lin, (size_t)1 << 40));
        { H a = (H)7; RC("GetArray_after_SetAddress", getarr(&a, t1)); }
        RC("SetAddress2D_misaligned_dptr", setaddr2(t2, &(AD){W, HH, 0x20, 1}, pitched + 16, (size_t)64));
        RC("SetAddress2D_bad_pitch", setaddr2(t2, &(AD){W, HH, 0x20, 1}, pitched, (size_t)40));
        RC("SetAddress2D_pitch_too_small", setaddr2(t2, &(AD){W, HH, 0x20, 1}, pitched, (size_t)0));
        RC("SetAddress2D_null_desc", setaddr2(t2, NULL, pitched, (size_t)64));
        RC("SetAddress2D_bad_format", setaddr2(t2, &(AD){W, HH, 0x77, 1}, pitched, (size_t)64));
        RC("SetAddress2D_ok", setaddr2(t2, &(AD){W, HH, 0x20, 1}, pitched, (size_t)64));
        RC("SetFormat_after_SetAddress2D", setfmt(t2, 0x01, 4));
        { int fmt = 0, nch = 0; getfmt(&fmt, &nch, t2); kint("GetFormat_after_2D_then_SetFormat", fmt * 100 + nch); }
        { uint64_t dp = 0; RC("GetAddress_after_2D", getaddr(&dp, t2)); kint("GetAddress_after_2D_is_dptr", dp == pitched); }
        RC("SurfSetArray_flags1", ssetarr(sr, as, 1));
        RC("SurfSetArray_no_ldst_flag", ssetarr(sr, af, 0));
        RC("SurfSetArray_null_array", ssetarr(sr, NULL, 0));
        RC("SurfSetArray_ok", ssetarr(sr, as, 0));
        { H a = 0; RC("SurfGetArray_ok", sgetarr(&a, sr)); kint("SurfGetArray_is_array", a == as); }
        H kt = func(mu, "k_tex2d");
        RC("ParamSetTexRef_default", pst(kt, -1, t2));
        RC("ParamSetTexRef_unit0", pst(kt, 0, t2));
        RC("ParamSetTexRef_null_ref", pst(kt, -1, NULL));
        RC("ParamSetTexRef_null_func", pst(NULL, -1, t2));
        RC("ParamSetTexRef_other_module", pst(func(mpu, "kp"), -1, t2));
    }
    /* ---- fetches through tref2d (unified) ---- */
    H kt = func(mu, "k_tex2d"), ku = func(mu, "k_tex2d_u"), kind = func(mu, "k_tex2d_ind"), k4 = func(mu, "k_tld4"),
      kf = func(mu, "k_fetch1d"), kq = func(mu, "k_query");
    int rc;
    /* U1: only SetArray: the defaults */
    rc = setarr(t2, af, 1); kint("U1.SetArray", rc);
    { int am0 = 9, am1 = 9, fm = 9, fmt = 0, nch = 0; unsigned fl = 9;
      getam(&am0, t2, 0); getam(&am1, t2, 1); getfm(&fm, t2); getfl(&fl, t2); getfmt(&fmt, &nch, t2);
      kint("U1.address0", am0); kint("U1.address1", am1); kint("U1.filter", fm); kint("U1.flags", fl);
      kint("U1.format", fmt); kint("U1.channels", nch);
      H a = 0; RC("U1.GetArray", getarr(&a, t2)); kint("U1.GetArray_is_array", a == af);
      uint64_t dp = 0; RC("U1.GetAddress", getaddr(&dp, t2)); }
    fetch("U1", kt, cu, sizeof cu, NC);
    query("Q1", kq, 23);
    /* U2: linear filtering, clamp, texel coordinates */
    setfm(t2, 1); setam(t2, 0, 1); setam(t2, 1, 1);
    fetch("U2", kt, cu, sizeof cu, NC);
    /* U3: point, wrap, normalised */
    setfm(t2, 0); setam(t2, 0, 0); setam(t2, 1, 0); setfl(t2, 2);
    fetch("U3", kt, cn, sizeof cn, NC);
    /* U4: linear, mirror, normalised; the same through a register (mov.u64 %rd, tref2d) */
    setfm(t2, 1); setam(t2, 0, 2); setam(t2, 1, 2);
    fetch("U4", kt, cn, sizeof cn, NC);
    fetch("U4_indirect", kind, cn, sizeof cn, NC);
    query("Q4", kq, 23);
    /* U5: point, border, normalised, a border colour */
    setfm(t2, 0); setam(t2, 0, 3); setam(t2, 1, 3); setbc(t2, (float[4]){1.5f, -2.0f, 0.25f, 7.0f});
    fetch("U5", kt, cn, sizeof cn, NC);
    /* U6..U8: u8x4 read as normalised floats (point, linear) and as integers */
    setarr(t2, ab, 1); setfl(t2, 0); setam(t2, 0, 1); setam(t2, 1, 1); setfm(t2, 0);
    fetch("U6", kt, cu, sizeof cu, NC);
    setfm(t2, 1);
    fetch("U7", kt, cu, sizeof cu, NC);
    fetch("U7_tld4", k4, cu, sizeof cu, NC);
    setfm(t2, 0); setfl(t2, 1);
    fetch("U8", ku, cu, sizeof cu, NC);
    /* U9, U10: linear memory, aligned and 8 bytes past an aligned address */
    {
        int32_t idx[NC];
        for (int i = 0; i < NC; i++) idx[i] = i * 3 - 4;
        setfmt(t1, 0x03, 1);
        size_t off = 777;
        kint("U9.SetAddress", setaddr(&off, t1, lin, (size_t)(4 * 40))); kint("U9.offset", (long long)off);
        fetch("U9", kf, idx, sizeof idx, NC);
        kint("U10.SetAddress", setaddr(&off, t1, lin + 8, (size_t)(4 * 40))); kint("U10.offset", (long long)off);
        fetch("U10", kf, idx, sizeof idx, NC);
        kint("U10b.SetAddress", setaddr(&off, t1, lin + 520, (size_t)(4 * 20))); kint("U10b.offset", (long long)off);
        fetch("U10b", kf, idx, sizeof idx, NC);
    }
    /* U11: pitched 2D memory */
    setfl(t2, 0); setfm(t2, 0); setam(t2, 0, 1); setam(t2, 1, 1);
    kint("U11.SetAddress2D", setaddr2(t2, &(AD){W, HH, 0x20, 1}, pitched, (size_t)64));
    fetch("U11", kt, cu, sizeof cu, NC);

    /* ---- surfaces through sref ---- */
    {
        H ks = func(mu, "k_sust"), kl = func(mu, "k_suld");
        uint32_t img[HH][W];
        memset(img, 0, sizeof img);
        htoa(as, (size_t)0, img, sizeof img);
        kint("S1.launch", ks ? cuLaunchKernel(ks, 1, 1, 1, W, HH, 1, 0, NULL, NULL, NULL) : -1);
        kint("S1.sync", cuCtxSynchronize());
        atoh(img, as, (size_t)0, sizeof img);
        khexs("S1.array", &img[0][0], W * HH);
        uint32_t out[HH][W];
        memset(out, 0xA5, sizeof out);
        uint64_t d = dalloc(sizeof out);
        void *args[] = {&d};
        kint("S2.launch", kl ? cuLaunchKernel(kl, 1, 1, 1, W, HH, 1, 0, NULL, args, NULL) : -1);
        kint("S2.sync", cuCtxSynchronize());
        cuMemcpyDtoH(out, d, sizeof out);
        khexs("S2.loaded", &out[0][0], W * HH);
    }
    /* ---- istypep ---- */
    uint64_t tobj = 0, sobj = 0;
    {
        unsigned char res[144], td[104];
        memset(res, 0, sizeof res); memset(td, 0, sizeof td);
        *(void **)(res + 8) = af;
        *(int *)td = 1; *(int *)(td + 4) = 1;         /* clamp, point, texel coordinates */
        kint("TexObjectCreate", toc(&tobj, res, td, NULL));
        *(void **)(res + 8) = as;
        kint("SurfObjectCreate", soc(&sobj, res));
        H ki = func(mu, "k_istypep");
        uint32_t q[26]; memset(q, 0xA5, sizeof q);
        uint64_t d = dalloc(sizeof q); cuMemcpyHtoD(d, q, sizeof q);
        void *args[] = {&d, &tobj, &sobj};
        kint("istypep.launch", ki ? cuLaunchKernel(ki, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) : -1);
        kint("istypep.sync", cuCtxSynchronize());
        cuMemcpyDtoH(q, d, sizeof q);
        khexs("istypep", q, 21);
        khexs("istypep.handles", q + 22, 4);
    }
    /* ---- independent mode: itex bound with normalised coordinates, linear filtering and border addressing,
       which the samplers override ---- */
    H it = 0;
    {
        RC("I.GetTexRef", cuModuleGetTexRef(&it, mi, "itex"));
        kint("I.SetArray", setarr(it, af, 1));
        setfl(it, 2); setfm(it, 1); setam(it, 0, 3); setam(it, 1, 3);
        setbc(it, (float[4]){9.0f, 9.0f, 9.0f, 9.0f});
        uint64_t dcu = dalloc(sizeof cu);
        cuMemcpyHtoD(dcu, cu, sizeof cu);
        /* ik_tex(out, cn, cu, n): the extra argument sits between coords and n, so it is launched by hand */
        H k = func(mi, "ik_tex");
        for (int pass = 0; pass < 2; pass++) {
            uint32_t out[5 * 64 * 4];
            memset(out, 0xA5, sizeof out);
            uint64_t dout = dalloc(sizeof out), dcn = dalloc(sizeof cn);
            cuMemcpyHtoD(dout, out, sizeof out);
            cuMemcpyHtoD(dcn, cn, sizeof cn);
            int n = NC;
            void *args[] = {&dout, &dcn, &dcu, &n};
            open_(pass ? "I2" : "I1", '{');
            kint("launch", k ? cuLaunchKernel(k, 1, 1, 1, n, 1, 1, 0, NULL, args, NULL) : -1);
            kint("sync", cuCtxSynchronize());
            cuMemcpyDtoH(out, dout, sizeof out);
            khexs("coords_normalized", (uint32_t *)cn, 2 * NC);
            khexs("coords_texels", (uint32_t *)cu, 2 * NC);
            for (int s = 0; s < 5; s++) {
                char nm2[8];
                snprintf(nm2, sizeof nm2, "s%d", s);
                khexs(nm2, out + s * 256, 4 * NC);
            }
            close_('}');
            cuMemFree(dout); cuMemFree(dcn);
            setfl(it, 0);      /* I2: the texture's own coordinates unnormalised */
        }
        setfl(it, 2);
        fetch("I_tld4", func(mi, "ik_tld4"), cn, sizeof cn, NC);
        { int fm = 9, am = 9; unsigned fl = 9; getfm(&fm, it); getam(&am, it, 0); getfl(&fl, it);
          kint("I.GetFilterMode", fm); kint("I.GetAddressMode0", am); kint("I.GetFlags", fl); }
        cuMemFree(dcu);
        query("IQ", func(miq, "iq"), 25);
        H qt = 0;
        RC("IQT.GetTexRef", cuModuleGetTexRef(&qt, miqt, "itex"));
        setarr(qt, ab, 1); setfl(qt, 2);
        query("IQT", func(miqt, "iqt"), 5);
    }
    /* ---- texref initialisers: load, what Get* says before any Set*, what txq says once bound ---- */
    for (unsigned i = 0; i < sizeof INITS / sizeof INITS[0]; i++) {
        H m = load(INITS[i][0], INITS[i][1]);
        if (!m) continue;
        H t = 0;
        char k[96];
        cuModuleGetTexRef(&t, m, "t");
        int fm = 9, am0 = 9, am1 = 9; unsigned fl = 9;
        getfm(&fm, t); getam(&am0, t, 0); getam(&am1, t, 1); getfl(&fl, t);
        snprintf(k, sizeof k, "%s.get", INITS[i][0]);
        open_(k, '[');
        kint(NULL, fm); kint(NULL, am0); kint(NULL, am1); kint(NULL, fl);
        close_(']');
        setarr(t, af, 1);
        H q = 0;
        snprintf(k, sizeof k, "%s.GetFunction", INITS[i][0]);
        kint(k, cuModuleGetFunction(&q, m, "q"));
        snprintf(k, sizeof k, "%s.GetTexRef", INITS[i][0]);
        kint(k, t != NULL);
        snprintf(k, sizeof k, "%s.txq", INITS[i][0]);
        query(k, q, 5);
        unload(m);
    }
    /* ---- last, what may fault and end the context: the kernel parameters of the opaque types given texture and
       surface objects, the independent-mode references through registers, SetFormat after SetArray ---- */
    {
        void *ex1[] = {&tobj}, *ex2[] = {&tobj, &tobj};
        fetchx("P_unified_texref", func(mpu, "kp"), cu, sizeof cu, NC, ex1, 1);
        fetchx("P_independent_texref_samplerref", func(mpi, "kp"), cu, sizeof cu, NC, ex2, 2);
        fetchx("P_u64_ptr_texref", func(mpp, "kp"), cu, sizeof cu, NC, ex1, 1);
        H ks = func(mps, "ks");
        void *args[] = {&sobj};
        kint("P_surfref.launch", ks ? cuLaunchKernel(ks, 1, 1, 1, W, HH, 1, 0, NULL, args, NULL) : -1);
        kint("P_surfref.sync", cuCtxSynchronize());
        uint32_t img[HH][W];
        atoh(img, as, (size_t)0, sizeof img);
        khexs("P_surfref.array", &img[0][0], W * HH);
    }
    setarr(it, af, 1); setfl(it, 0);
    { void *ex[] = {&tobj};
      tail_words = 8;
      fetchx("I_reg", func(mi, "ik_reg"), cu, sizeof cu, NC, ex, 1);
      tail_words = 0; }
    /* U12: SetFormat after SetArray (does the array's format still hold?) */
    setarr(t2, af, 1);
    kint("U12.SetFormat", setfmt(t2, 0x10, 2));
    { int fmt = 0, nch = 0; getfmt(&fmt, &nch, t2); kint("U12.format", fmt); kint("U12.channels", nch); }
    fetch("U12", kt, cu, sizeof cu, NC);
    close_('}');
    printf("\n");
    return 0;
}

/* The initialiser modules alone: load, cuModuleGetTexRef, cuModuleGetFunction. */
static int phase_inits(void) {
    fn_t init = F(cuInit), devget = F(cuDeviceGet), retain = F(cuDevicePrimaryCtxRetain), setc = F(cuCtxSetCurrent);
    int dev;
    H ctx;
    init(0); devget(&dev, 0); retain(&ctx, dev); setc(ctx);
    open_(NULL, '{');
    kstr("loading", getenv("CUDA_MODULE_LOADING") ? getenv("CUDA_MODULE_LOADING") : "default");
    for (unsigned i = 0; i < sizeof INITS / sizeof INITS[0]; i++) {
        H m = load(INITS[i][0], INITS[i][1]), t = 0, q = 0;
        char k[96];
        snprintf(k, sizeof k, "%s.GetTexRef", INITS[i][0]);
        kint(k, m ? cuModuleGetTexRef(&t, m, "t") : -1);
        snprintf(k, sizeof k, "%s.GetFunction", INITS[i][0]);
        kint(k, m ? cuModuleGetFunction(&q, m, "q") : -1);
    }
    H ms = load("surfref_only", PTX_S), s = 0, q = 0;
    kint("surfref_only.GetSurfRef", ms ? cuModuleGetSurfRef(&s, ms, "sref") : -1);
    kint("surfref_only.GetFunction", ms ? cuModuleGetFunction(&q, ms, "k_sust") : -1);
    close_('}');
    printf("\n");
    return 0;
}

/* A kernel reading an unbound reference: the answer may be a fault that ends the context. */
static int phase_unbound(void) {
    fn_t init = F(cuInit), devget = F(cuDeviceGet), retain = F(cuDevicePrimaryCtxRetain), setc = F(cuCtxSetCurrent);
    int dev;
    H ctx;
    open_(NULL, '{');
    kstr("about", "scripts/nvidia_texref_probe.c unbound");
    init(0); devget(&dev, 0); retain(&ctx, dev); setc(ctx);
    H mu = load("unified", PTX_U);
    make_coords();
    fetch("unbound_tex2d", func(mu, "k_tex2d"), cu, sizeof cu, 4);
    query("unbound_query", func(mu, "k_query"), 23);
    close_('}');
    printf("\n");
    return 0;
}

/* References of an unloaded module. */
static int phase_unloaded(void) {
    fn_t init = F(cuInit), devget = F(cuDeviceGet), retain = F(cuDevicePrimaryCtxRetain), setc = F(cuCtxSetCurrent),
         unload = F(cuModuleUnload), getfm = F(cuTexRefGetFilterMode), setfm = F(cuTexRefSetFilterMode),
         ac = F(cuArrayCreate_v2), setarr = F(cuTexRefSetArray), sgetarr = F(cuSurfRefGetArray);
    int dev, fm = 9;
    H ctx, t = 0, s = 0, a = 0;
    open_(NULL, '{');
    kstr("about", "scripts/nvidia_texref_probe.c unloaded");
    init(0); devget(&dev, 0); retain(&ctx, dev); setc(ctx);
    H mu = load("unified", PTX_U);
    cuModuleGetTexRef(&t, mu, "tref2d");
    cuModuleGetSurfRef(&s, mu, "sref");
    ac(&a, &(AD){W, HH, 0x20, 1});
    RC("unload", unload(mu));
    RC("GetFilterMode_after_unload", getfm(&fm, t));
    RC("SetFilterMode_after_unload", setfm(t, 1));
    RC("SetArray_after_unload", setarr(t, a, 1));
    RC("SurfGetArray_after_unload", sgetarr(&a, s));
    RC("GetTexRef_unloaded_module", cuModuleGetTexRef(&t, mu, "tref2d"));
    close_('}');
    printf("\n");
    return 0;
}

/* cuTexRefCreate/Destroy: a reference of no module. */
static int phase_created(void) {
    fn_t init = F(cuInit), devget = F(cuDeviceGet), retain = F(cuDevicePrimaryCtxRetain), setc = F(cuCtxSetCurrent),
         create = F(cuTexRefCreate), destroy = F(cuTexRefDestroy), getfm = F(cuTexRefGetFilterMode),
         setfm = F(cuTexRefSetFilterMode), ac = F(cuArrayCreate_v2), setarr = F(cuTexRefSetArray),
         getarr = F(cuTexRefGetArray), pst = F(cuParamSetTexRef);
    int dev, fm = 9;
    H ctx, t = 0, a = 0, got = 0;
    open_(NULL, '{');
    kstr("about", "scripts/nvidia_texref_probe.c created");
    RC("Create_before_init", create(&t));
    init(0); devget(&dev, 0); retain(&ctx, dev); setc(ctx);
    RC("Create", create(&t));
    RC("Create_null", create(NULL));
    RC("GetFilterMode_created", getfm(&fm, t)); kint("GetFilterMode_created_value", fm);
    RC("SetFilterMode_created", setfm(t, 1));
    getfm(&fm, t); kint("GetFilterMode_created_after", fm);
    ac(&a, &(AD){W, HH, 0x20, 1});
    RC("SetArray_created", setarr(t, a, 1));
    RC("GetArray_created", getarr(&got, t)); kint("GetArray_created_is_array", got == a);
    H mu = load("unified", PTX_U);
    RC("ParamSetTexRef_created", pst(func(mu, "k_tex2d"), -1, t));
    H mt = 0;
    cuModuleGetTexRef(&mt, mu, "tref2d");
    RC("Destroy_module_ref", destroy(mt));
    RC("Destroy", destroy(t));
    RC("Destroy_null", destroy(NULL));
    RC("Destroy_twice", destroy(t));
    close_('}');
    printf("\n");
    return 0;
}

/* What the driver's JIT says to each PTX file given. */
static int phase_load(int n, char **files) {
    fn_t init = F(cuInit), devget = F(cuDeviceGet), retain = F(cuDevicePrimaryCtxRetain), setc = F(cuCtxSetCurrent);
    int dev;
    H ctx;
    static char text[1 << 16];
    init(0); devget(&dev, 0); retain(&ctx, dev); setc(ctx);
    open_(NULL, '{');
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(files[i], "r");
        if (!f) continue;
        size_t got = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[got] = 0;
        const char *base = strrchr(files[i], '/');
        load(base ? base + 1 : files[i], text);
    }
    close_('}');
    printf("\n");
    return 0;
}

/* Every module's text into DIR (for ptxas). */
static int phase_ptx(const char *dir) {
    const char *mods[][2] = {{"unified", PTX_U}, {"independent", PTX_I}, {"independent_sampler_queries", PTX_IQ},
        {"independent_texref_queries", PTX_IQT}, {"param_texref_unified", PTX_PU},
        {"param_texref_samplerref_independent", PTX_PI}, {"param_u64_ptr_texref", PTX_PP}, {"param_surfref", PTX_PS},
        {"independent_register_texref", PTX_IND_REG}, {"independent_texture_object", PTX_IND_OBJ},
        {"independent_surface_object", PTX_IND_SURFOBJ}, {"unified_with_sampler", PTX_UNI_SAMPLER},
        {INITS[0][0], INITS[0][1]}, {INITS[1][0], INITS[1][1]}, {INITS[2][0], INITS[2][1]},
        {INITS[3][0], INITS[3][1]}, {INITS[4][0], INITS[4][1]}, {"surfref_only", PTX_S}};
    for (unsigned i = 0; i < sizeof mods / sizeof mods[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.ptx", dir, mods[i][0]);
        FILE *f = fopen(path, "w");
        if (!f) return 1;
        fputs(mods[i][1], f);
        fclose(f);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "ptx")) return phase_ptx(argv[2]);
    int loading = argc > 1 && !strcmp(argv[1], "load");
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGSEGV, on_segv);
    signal(SIGBUS, on_segv);
    lib = dlopen(argc > 2 && !loading ? argv[2] : "libcuda.so.1", RTLD_NOW);
    if (!lib) { printf("{\"dlopen\": \"failed\"}\n"); return 2; }
    cuModuleLoadDataEx = F(cuModuleLoadDataEx); cuModuleGetFunction = F(cuModuleGetFunction);
    cuModuleGetTexRef = F(cuModuleGetTexRef); cuModuleGetSurfRef = F(cuModuleGetSurfRef);
    cuLaunchKernel = F(cuLaunchKernel); cuCtxSynchronize = F(cuCtxSynchronize); cuMemAlloc = F(cuMemAlloc_v2);
    cuMemFree = F(cuMemFree_v2); cuMemcpyHtoD = F(cuMemcpyHtoD_v2); cuMemcpyDtoH = F(cuMemcpyDtoH_v2);
    if (loading) return phase_load(argc - 2, argv + 2);
    const char *phase = argc > 1 ? argv[1] : "main";
    if (!strcmp(phase, "main")) return phase_main();
    if (!strcmp(phase, "unbound")) return phase_unbound();
    if (!strcmp(phase, "unloaded")) return phase_unloaded();
    if (!strcmp(phase, "created")) return phase_created();
    if (!strcmp(phase, "inits")) return phase_inits();
    return 2;
}
