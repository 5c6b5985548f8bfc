/* What a GPU does for formatted surface stores (sust.p) and surface reductions (sured): PTX kernels JIT-loaded
 * by the driver (so each form's acceptance is an answer too) over surface objects of every array format,
 * printed as JSON of the bytes that land in the array. Run once on NVIDIA hardware
 * (tests/data/nvidia_surface_answers.json); tests/ptx/test_instr_surf.py replays the cases on our compiler.
 *
 * An out-of-range .trap access, or a form the hardware faults on, leaves the context unusable, so each case
 * runs in a child process that goes on until its first fault; the parent starts a new child from the case
 * after the one that faulted (or crashed) and gathers every child's lines into one JSON document.
 * Host code uses the driver API only: no device code is built by nvcc.
 * Build: nvcc -O1 -o surface_probe nvidia_surface_probe.cu -lcuda */
#include <cuda.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint32_t seed = 2024;
static uint32_t lcg(void) { seed = seed * 1664525u + 1013904223u; return seed; }

/* ------------------------------------------------------------------ formats */
typedef struct { const char *name; unsigned code; int bytes; int nch; } fmt_t;   /* nch 0: any of 1/2/4 */
static const fmt_t FMTS[] = {
    {"u8", 0x01, 1, 0}, {"u16", 0x02, 2, 0}, {"u32", 0x03, 4, 0}, {"s8", 0x08, 1, 0}, {"s16", 0x09, 2, 0},
    {"s32", 0x0a, 4, 0}, {"f16", 0x10, 2, 0}, {"f32", 0x20, 4, 0},
    {"unorm8x1", 0xc0, 1, 1}, {"unorm8x2", 0xc1, 1, 2}, {"unorm8x4", 0xc2, 1, 4},
    {"unorm16x1", 0xc3, 2, 1}, {"unorm16x2", 0xc4, 2, 2}, {"unorm16x4", 0xc5, 2, 4},
    {"snorm8x1", 0xc6, 1, 1}, {"snorm8x2", 0xc7, 1, 2}, {"snorm8x4", 0xc8, 1, 4},
    {"snorm16x1", 0xc9, 2, 1}, {"snorm16x2", 0xca, 2, 2}, {"snorm16x4", 0xcb, 2, 4},
};
enum { NFMT = sizeof FMTS / sizeof FMTS[0] };
static const fmt_t *fmt_named(const char *n) {
    for (int i = 0; i < NFMT; i++) if (!strcmp(FMTS[i].name, n)) return &FMTS[i];
    fprintf(stderr, "no format %s\n", n); exit(2);
}

/* ------------------------------------------------------------------ the values sust.p stores */
static uint32_t VALS[512];
static int NV;
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static void add(uint32_t v) { VALS[NV++] = v; }
static void addf(float f) { add(fbits(f)); }
static void add3(float f) { uint32_t u = fbits(f); add(u - 1); add(u); add(u + 1); }  /* f and its neighbours */
static void make_values(void) {
    static const uint32_t special[] = {
        0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x3f000000, 0xbf000000, 0x40000000, 0xc0000000,
        0x7149f2ca, 0xf149f2ca, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00000, 0x7fffffff,
        0x00000001, 0x80000001, 0x00400000, 0x3e800000, 0xbe800000, 0x3f7fffff, 0x3f800001, 0xbf800001,
        /* integers */
        1, 2, 127, 128, 255, 256, 300, 32767, 32768, 65535, 65536, 70000, 0xffffffff, 0xffffff80, 0xffffff7f,
        0xffff8000, 0xffff7fff, 0xfffffffe, 0x12345678, 0xdeadbeef, 0x00ff00ff, 0x7fff0000,
        /* half: 1 + 2^-11 and 1 + 3*2^-11 (ties), above a tie, 65504, 65519.996, 65520 (tie at the top),
           1e6, 2^-24, 2^-25 and 3*2^-25 (subnormal ties), 2^-26, the smallest normal, NaN payloads */
        0x3f801000, 0x3f803000, 0x3f801001, 0x477fe000, 0x477fefff, 0x477ff000, 0x49742400, 0x33800000,
        0x33000000, 0x33c00000, 0x32800000, 0x38800000, 0x7fc01234, 0x7f801000, 0xc77fe000, 0xc77ff000,
    };
    for (unsigned i = 0; i < sizeof special / sizeof special[0]; i++) add(special[i]);
    /* unorm8 / snorm8 / unorm16 / snorm16 near-ties: (k + 1/2) / scale and one unit either side */
    for (int k = 0; k < 255; k += 23) add3((2.0f * k + 1.0f) / 510.0f);
    for (int k = 0; k < 127; k += 19) { add3((2.0f * k + 1.0f) / 254.0f); add3(-(2.0f * k + 1.0f) / 254.0f); }
    for (int k = 1; k < 65535; k += 9973) add3((2.0f * k + 1.0f) / 131070.0f);
    for (int k = 1; k < 32767; k += 7919) { add3((2.0f * k + 1.0f) / 65534.0f); add3(-(2.0f * k + 1.0f) / 65534.0f); }
    for (int i = 0; i < 24; i++) addf(((int)(lcg() % 4001) - 2000) / 1000.0f);   /* in and out of [-1, 1] */
    for (int i = 0; i < 16; i++) add(lcg());
    if (NV % 2 == 0) add(0x3dcccccd);        /* an odd count: every value reaches every channel of a v2/v4 */
}

/* ------------------------------------------------------------------ output */
static void hex(const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    putchar('"');
    for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
    putchar('"');
}
static void jstr(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
        else putchar(*s);
    }
    putchar('"');
}

/* ------------------------------------------------------------------ the driver */
static CUcontext ctx;
static char jitlog[8192];
static int faulted;            /* the context is gone: the child stops after this case */

static CUresult load(const char *ptx, CUmodule *m) {
    CUjit_option o[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *v[2] = {jitlog, (void *)(uintptr_t)sizeof jitlog};
    jitlog[0] = 0;
    return cuModuleLoadDataEx(m, ptx, 2, o, v);
}

#define HDR ".version 8.5\n.target sm_80\n.address_size 64\n"

typedef struct { CUarray a; CUsurfObject s; size_t w, h, d, elem; int layered; } surf_t;

static CUresult make_surface(surf_t *sf, const fmt_t *f, int nch, size_t w, size_t h, size_t d, int layered) {
    CUDA_ARRAY3D_DESCRIPTOR ad;
    memset(&ad, 0, sizeof ad);
    ad.Width = w; ad.Height = h; ad.Depth = d;
    ad.Format = (CUarray_format)f->code; ad.NumChannels = nch;
    ad.Flags = CUDA_ARRAY3D_SURFACE_LDST | (layered ? CUDA_ARRAY3D_LAYERED : 0);
    memset(sf, 0, sizeof *sf);
    sf->w = w; sf->h = h; sf->d = d; sf->elem = (size_t)f->bytes * nch; sf->layered = layered;
    CUresult r = cuArray3DCreate(&sf->a, &ad);
    if (r) return r;
    CUDA_RESOURCE_DESC rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_ARRAY;
    rd.res.array.hArray = sf->a;
    return cuSurfObjectCreate(&sf->s, &rd);
}
static size_t surf_bytes(const surf_t *sf) { return sf->w * sf->elem * (sf->h ? sf->h : 1) * (sf->d ? sf->d : 1); }
static CUresult copy(surf_t *sf, void *host, int to_array) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    if (to_array) {
        c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = host; c.srcPitch = sf->w * sf->elem;
        c.srcHeight = sf->h ? sf->h : 1;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY; c.dstArray = sf->a;
    } else {
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY; c.srcArray = sf->a;
        c.dstMemoryType = CU_MEMORYTYPE_HOST; c.dstHost = host; c.dstPitch = sf->w * sf->elem;
        c.dstHeight = sf->h ? sf->h : 1;
    }
    c.WidthInBytes = sf->w * sf->elem; c.Height = sf->h ? sf->h : 1; c.Depth = sf->d ? sf->d : 1;
    return cuMemcpy3D(&c);
}
static void free_surface(surf_t *sf) {
    if (sf->s) cuSurfObjectDestroy(sf->s);
    if (sf->a) cuArrayDestroy(sf->a);
}

/* Launch k(params...) over `threads` threads in blocks of `block`; the launch and synchronize results. */
static void launch(CUfunction fn, int threads, int block, void **params, CUresult *lr, CUresult *sr) {
    *lr = cuLaunchKernel(fn, (threads + block - 1) / block, 1, 1, block, 1, 1, 0, 0, params, 0);
    *sr = *lr ? *lr : cuCtxSynchronize();
    if (*lr || *sr) faulted = 1;
}

/* ------------------------------------------------------------------ cases */
typedef enum { K_JIT, K_STORE, K_GEOM, K_OOR, K_TRAP, K_RED, K_NORM } kind_t;
typedef struct {
    kind_t kind;
    const char *version;       /* K_JIT */
    char form[160];            /* K_JIT: the instruction; others: the PTX instruction's opcode and modifiers */
    const char *fmt;
    int nch, vec;              /* K_STORE */
    const char *geom;          /* K_GEOM */
    const char *mode;          /* K_OOR/K_TRAP: clamp, zero, trap */
    int x, y;                  /* K_OOR/K_TRAP */
    int width, bytes;          /* K_RED: texels; operand bytes */
    int scale;                 /* K_RED: x multiplier (bytes for .b, 1 for .p) */
    int one;                   /* K_RED: one thread per slot over every slot of the surface, in .zero mode */
} case_t;
static case_t CASES[1024];
static int NCASES;
static case_t *new_case(kind_t k) { case_t *c = &CASES[NCASES++]; memset(c, 0, sizeof *c); c->kind = k; return c; }

static void jit_case(const char *ver, const char *form) {
    case_t *c = new_case(K_JIT);
    c->version = ver;
    snprintf(c->form, sizeof c->form, "%s", form);
}

static void red_case(const char *instr, const char *fmt, int nch, int bytes, int scale) {
    case_t *c = new_case(K_RED);
    snprintf(c->form, sizeof c->form, "%s", instr);
    c->fmt = fmt; c->nch = nch; c->bytes = bytes; c->scale = scale; c->width = 16;
}

static void red_one(const char *instr, const char *fmt, int nch, int bytes) {
    red_case(instr, fmt, nch, bytes, 1);
    CASES[NCASES - 1].one = 1;
}

static void build_cases(void) {
    /* which forms the driver's JIT takes (the operands are registers of the right sizes) */
    static const char *forms[] = {
        "sust.p.1d.b32.trap [%rd0, {%r1}], {%r1};",
        "sust.p.2d.v4.b32.zero [%rd0, {%r1, %r2}], {%r1, %r2, %r3, %r4};",
        "sust.p.3d.v2.b32.clamp [%rd0, {%r1, %r2, %r3, %r4}], {%r1, %r2};",
        "sust.p.a1d.v4.b32.trap [%rd0, {%r1, %r2}], {%r1, %r2, %r3, %r4};",
        "sust.p.a2d.b32.trap [%rd0, {%r1, %r2, %r3, %r4}], {%r1};",
        "sust.p.1d.b32 [%rd0, {%r1}], {%r1};",
        "sust.p.1d.b16.trap [%rd0, {%r1}], {%h1};",
        "sust.p.1d.b64.trap [%rd0, {%r1}], {%rd1};",
        "sust.p.1d.f32.trap [%rd0, {%r1}], {%f1};",
        "sust.p.cube.b32.trap [%rd0, {%r1, %r2, %r3, %r4}], {%r1};",
        "sured.b.add.1d.u32.trap [%rd0, {%r1}], %r3;",
        "sured.b.add.2d.s32.zero [%rd0, {%r1, %r2}], %r3;",
        "sured.b.add.3d.u64.clamp [%rd0, {%r1, %r2, %r3, %r4}], %rd1;",
        "sured.b.min.1d.u64.trap [%rd0, {%r1}], %rd1;",
        "sured.b.max.1d.s64.trap [%rd0, {%r1}], %rd1;",
        "sured.b.and.1d.b32.trap [%rd0, {%r1}], %r3;",
        "sured.b.add.1d.b32.trap [%rd0, {%r1}], %r3;",
        "sured.b.and.1d.u32.trap [%rd0, {%r1}], %r3;",
        "sured.b.add.1d.s64.trap [%rd0, {%r1}], %rd1;",
        "sured.b.add.1d.u32 [%rd0, {%r1}], %r3;",
        "sured.b.add.a1d.u32.trap [%rd0, {%r1, %r2}], %r3;",
        "sured.b.xor.1d.b32.trap [%rd0, {%r1}], %r3;",
        "sured.b.xor.1d.b32.clamp [%rd0, {%r1}], %r3;",
        "sured.b.inc.1d.u32.trap [%rd0, {%r1}], %r3;",
        "sured.b.exch.1d.b32.trap [%rd0, {%r1}], %r3;",
        "sured.p.add.1d.b32.trap [%rd0, {%r1}], %r3;",
        "sured.p.or.2d.b32.clamp [%rd0, {%r1, %r2}], %r3;",
        "sured.p.min.1d.b64.trap [%rd0, {%r1}], %rd1;",
        "sured.p.add.1d.b64.trap [%rd0, {%r1}], %rd1;",
        "sured.p.add.1d.u32.trap [%rd0, {%r1}], %r3;",
    };
    for (unsigned i = 0; i < sizeof forms / sizeof forms[0]; i++) jit_case("8.5", forms[i]);
    jit_case("8.0", "sured.b.min.1d.u64.trap [%rd0, {%r1}], %rd1;");
    jit_case("8.0", "sured.p.min.1d.b64.trap [%rd0, {%r1}], %rd1;");
    jit_case("7.0", "sust.p.2d.v4.b32.trap [%rd0, {%r1, %r2}], {%r1, %r2, %r3, %r4};");

    /* sust.p.1d over every format, channel count and vector width */
    for (int f = 0; f < NFMT; f++)
        for (int nch = 1; nch <= 4; nch *= 2) {
            if (FMTS[f].nch && FMTS[f].nch != nch) continue;
            for (int vec = 1; vec <= 4; vec *= 2) {
                case_t *c = new_case(K_STORE);
                c->fmt = FMTS[f].name; c->nch = nch; c->vec = vec;
                snprintf(c->form, sizeof c->form, "sust.p.1d%s.b32.trap", vec == 4 ? ".v4" : vec == 2 ? ".v2" : "");
            }
        }
    /* how sust.p counts coordinates in each geometry */
    static const char *geoms[] = {"2d", "3d", "a1d", "a2d"};
    for (int g = 0; g < 4; g++) { case_t *c = new_case(K_GEOM); c->geom = geoms[g]; c->fmt = "u32"; c->nch = 1; }

    /* out of range: one thread, one instruction, on an 8x4 u32 surface of sentinels */
    static const char *oor_instr[] = {"sust.b.2d.b32", "sust.p.2d.b32", "sured.b.add.2d.u32", "sured.p.add.2d.b32",
                                      "sust.b.2d.v2.b32"};
    static const int xy[][2] = {{-1, 0}, {8, 0}, {100, 2}, {0, -1}, {3, 4}, {-5, -5}, {7, 3}, {2, 1}};
    static const int bxy[][2] = {{-4, 0}, {32, 0}, {30, 1}, {28, 1}, {0, -1}, {12, 4}, {-400, 9}, {8, 2}};
    for (int i = 0; i < 5; i++)
        for (int m = 0; m < 2; m++)
            for (int k = 0; k < 8; k++) {
                case_t *c = new_case(K_OOR);
                snprintf(c->form, sizeof c->form, "%s", oor_instr[i]);
                c->mode = m ? "zero" : "clamp";
                int bytes = strstr(oor_instr[i], ".b.") != NULL;
                c->x = bytes ? bxy[k][0] : xy[k][0];
                c->y = bytes ? bxy[k][1] : xy[k][1];
            }
    /* reductions, many threads of several blocks on 16 texels */
    red_case("sured.b.add.1d.u32", "u32", 1, 4, 4);
    red_case("sured.b.add.1d.s32", "s32", 1, 4, 4);
    red_case("sured.b.add.1d.u64", "u32", 2, 8, 8);
    red_case("sured.b.min.1d.u32", "u32", 1, 4, 4);
    red_case("sured.b.max.1d.u32", "u32", 1, 4, 4);
    red_case("sured.b.min.1d.s32", "s32", 1, 4, 4);
    red_case("sured.b.max.1d.s32", "s32", 1, 4, 4);
    red_case("sured.b.min.1d.u64", "u32", 2, 8, 8);
    red_case("sured.b.max.1d.u64", "u32", 2, 8, 8);
    red_case("sured.b.min.1d.s64", "s32", 2, 8, 8);
    red_case("sured.b.max.1d.s64", "s32", 2, 8, 8);
    red_case("sured.b.and.1d.b32", "u32", 1, 4, 4);
    red_case("sured.b.or.1d.b32", "u32", 1, 4, 4);
    red_case("sured.b.add.1d.u32", "u8", 4, 4, 4);      /* .b on other formats: bytes are bytes? */
    red_case("sured.b.min.1d.s32", "f32", 1, 4, 4);
    red_case("sured.b.add.1d.u32", "u32", 2, 4, 4);     /* both channels of 8 texels */
    red_case("sured.b.min.1d.s32", "u32", 1, 4, 4);     /* the type, not the format, decides signedness */
    static const char *pops[] = {"add", "min", "max", "and", "or"};
    for (int o = 0; o < 5; o++) {
        char b[64];
        snprintf(b, sizeof b, "sured.p.%s.1d.b32", pops[o]);
        red_case(b, "u32", 1, 4, 1);
        red_case(b, "s32", 1, 4, 1);
    }
    red_case("sured.p.min.1d.b64", "u32", 2, 8, 1);
    red_case("sured.p.max.1d.b64", "s32", 2, 8, 1);
    /* .p on formats the ISA gives no type for: the hardware's answer (or fault) */
    red_case("sured.p.add.1d.b32", "f32", 1, 4, 1);
    red_case("sured.p.add.1d.b32", "u16", 1, 4, 1);
    red_case("sured.p.add.1d.b32", "s8", 1, 4, 1);
    red_case("sured.p.add.1d.b32", "u32", 2, 4, 1);
    red_case("sured.p.add.1d.b32", "u32", 4, 4, 1);
    red_case("sured.p.min.1d.b64", "u32", 1, 8, 1);
    red_case("sured.p.max.1d.b32", "f16", 1, 4, 1);
    /* .p on narrow and float formats, one thread a slot, .zero so that what lies out of range is dropped:
       how x is counted there and what each op does to the texel */
    static const char *narrow[][2] = {{"u8", "1"}, {"s8", "1"}, {"u16", "1"}, {"s16", "1"}, {"f16", "1"},
                                      {"u8", "4"}, {"s16", "2"}, {"f32", "1"}, {"u32", "2"}, {"s32", "4"}};
    for (int i = 0; i < 10; i++)
        for (int o = 0; o < 3; o++) {
            char b[64];
            snprintf(b, sizeof b, "sured.p.%s.1d.b32", pops[o]);
            red_one(b, narrow[i][0], atoi(narrow[i][1]), 4);
        }
    red_one("sured.p.min.1d.b64", "u32", 1, 8);
    red_one("sured.p.max.1d.b64", "s16", 4, 8);
    red_one("sured.p.min.1d.b64", "s32", 4, 8);
    red_one("sured.b.add.1d.u32", "u16", 1, 4);   /* byte addressing, x = slot: misaligned slots too */
    /* float -> unorm/snorm/half conversions of sust.p, densely near the rounding boundaries */
    static const char *dense[] = {"unorm8x1", "unorm16x1", "snorm8x1", "snorm16x1", "f16"};
    for (int i = 0; i < 5; i++) { case_t *c = new_case(K_NORM); c->fmt = dense[i]; c->nch = 1; }
    /* .trap out of range: the error codes */
    static const char *traps[] = {"sust.b.2d.b32", "sust.p.2d.b32", "sured.b.add.2d.u32", "sured.p.add.2d.b32"};
    for (int i = 0; i < 4; i++) {
        case_t *c = new_case(K_TRAP);
        snprintf(c->form, sizeof c->form, "%s", traps[i]);
        c->mode = "trap";
        c->x = strstr(traps[i], ".b.") ? 32 : 8;
        c->y = 0;
    }
}

/* ------------------------------------------------------------------ running one case */
static char ptx[16384];
static void ptxf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ptx, sizeof ptx, fmt, ap);
    va_end(ap);
}

static void run_jit(const case_t *c) {
    char hdr[128];
    snprintf(hdr, sizeof hdr, ".version %s\n.target sm_80\n.address_size 64\n", c->version);
    ptxf("%s.visible .entry k(.param .u64 p)\n{\n  .reg .u64 %%rd<4>;\n  .reg .u32 %%r<8>;\n  .reg .f32 %%f<4>;\n"
         "  .reg .b16 %%h<4>;\n  ld.param.u64 %%rd0, [p];\n  ld.param.u32 %%r1, [p];\n  ld.param.u32 %%r2, [p+4];\n"
         "  ld.param.u32 %%r3, [p];\n  ld.param.u32 %%r4, [p+4];\n  ld.param.u64 %%rd1, [p];\n"
         "  mov.b32 %%f1, %%r1;\n  cvt.u16.u32 %%h1, %%r1;\n  %s\n  ret;\n}\n", hdr, c->form);
    CUmodule m;
    CUresult r = load(ptx, &m);
    printf("\"version\": \"%s\", \"form\": ", c->version);
    jstr(c->form);
    printf(", \"load\": %d, \"log\": ", (int)r);
    jstr(jitlog);
    if (!r) cuModuleUnload(m);
}

static void run_store(const case_t *c) {
    const fmt_t *f = fmt_named(c->fmt);
    surf_t sf;
    CUresult r = make_surface(&sf, f, c->nch, NV, 0, 0, 0);
    printf("\"form\": \"%s\", \"format\": \"%s\", \"code\": %u, \"nch\": %d, \"vec\": %d, \"width\": %d, \"create\": %d",
           c->form, f->name, f->code, c->nch, c->vec, NV, (int)r);
    if (r) { free_surface(&sf); return; }
    size_t nb = surf_bytes(&sf);
    uint8_t *host = (uint8_t *)malloc(nb);
    memset(host, 0xa5, nb);       /* what a component the store leaves alone still holds */
    copy(&sf, host, 1);
    const char *regs = c->vec == 4 ? "{%r10, %r11, %r12, %r13}" : c->vec == 2 ? "{%r10, %r11}" : "{%r10}";
    char loads[1024] = "";
    for (int k = 0; k < c->vec; k++) {
        char l[200];
        snprintf(l, sizeof l, "  mad.lo.u32 %%r5, %%r0, %d, %d;\n  rem.u32 %%r5, %%r5, %%r2;\n"
                 "  mul.wide.u32 %%rd2, %%r5, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  ld.global.u32 %%r%d, [%%rd2];\n",
                 c->vec, k, 10 + k);
        strcat(loads, l);
    }
    ptxf(HDR ".visible .entry k(.param .u64 s, .param .u64 v, .param .u32 n)\n{\n  .reg .u64 %%rd<4>;\n"
         "  .reg .u32 %%r<16>;\n  .reg .pred %%p;\n  mov.u32 %%r0, %%tid.x;\n  mov.u32 %%r1, %%ctaid.x;\n"
         "  mov.u32 %%r3, %%ntid.x;\n  mad.lo.u32 %%r0, %%r1, %%r3, %%r0;\n  ld.param.u32 %%r2, [n];\n"
         "  setp.ge.u32 %%p, %%r0, %%r2;\n  @%%p bra done;\n  ld.param.u64 %%rd0, [s];\n  ld.param.u64 %%rd1, [v];\n"
         "%s  %s [%%rd0, {%%r0}], %s;\ndone:\n  ret;\n}\n", loads, c->form, regs);
    CUmodule m;
    CUfunction fn;
    r = load(ptx, &m);
    printf(", \"load\": %d", (int)r);
    if (!r) {
        CUdeviceptr dv;
        cuMemAlloc(&dv, NV * 4);
        cuMemcpyHtoD(dv, VALS, NV * 4);
        cuModuleGetFunction(&fn, m, "k");
        unsigned n = NV;
        void *params[] = {&sf.s, &dv, &n};
        CUresult lr, sr;
        launch(fn, NV, 64, params, &lr, &sr);
        printf(", \"launch\": %d, \"sync\": %d", (int)lr, (int)sr);
        if (!faulted && !copy(&sf, host, 0)) { printf(", \"result\": "); hex(host, nb); }
        cuMemFree(dv);
        cuModuleUnload(m);
    }
    free(host);
    free_surface(&sf);
}

static void run_geom(const case_t *c) {
    /* 2d 8x4; 3d 4x3x2; a1d 8 x 3 layers; a2d 4x3 x 2 layers: thread t stores t + 1 at its texel */
    int is2 = !strcmp(c->geom, "2d"), is3 = !strcmp(c->geom, "3d"), a1 = !strcmp(c->geom, "a1d");
    size_t w = is2 ? 8 : a1 ? 8 : 4, h = is2 ? 4 : a1 ? 0 : 3, d = is2 ? 0 : is3 ? 2 : a1 ? 3 : 2;
    surf_t sf;
    CUresult r = make_surface(&sf, fmt_named(c->fmt), 1, w, h, d, !is2 && !is3);
    int n = (int)(w * (h ? h : 1) * (d ? d : 1));
    printf("\"geom\": \"%s\", \"width\": %zu, \"height\": %zu, \"depth\": %zu, \"create\": %d", c->geom, w, h, d, (int)r);
    if (r) { free_surface(&sf); return; }
    uint32_t *host = (uint32_t *)calloc(n, 4);
    copy(&sf, host, 1);
    const char *coords = is2 ? "{%r5, %r6}" : is3 ? "{%r5, %r6, %r7, %r7}" : a1 ? "{%r7, %r5}" : "{%r7, %r5, %r6, %r6}";
    /* x = t % w, y = t / w % h, z or layer = t / (w * h) */
    ptxf(HDR ".visible .entry k(.param .u64 s)\n{\n  .reg .u64 %%rd<4>;\n  .reg .u32 %%r<16>;\n"
         "  mov.u32 %%r0, %%tid.x;\n  ld.param.u64 %%rd0, [s];\n  rem.u32 %%r5, %%r0, %zu;\n  div.u32 %%r6, %%r0, %zu;\n"
         "  rem.u32 %%r6, %%r6, %zu;\n  div.u32 %%r7, %%r0, %zu;\n  add.u32 %%r8, %%r0, 1;\n"
         "  sust.p.%s.b32.trap [%%rd0, %s], {%%r8};\n  ret;\n}\n",
         w, w, h ? h : 1, w * (h ? h : 1), c->geom, coords);
    CUmodule m;
    CUfunction fn;
    r = load(ptx, &m);
    printf(", \"load\": %d", (int)r);
    if (!r) {
        cuModuleGetFunction(&fn, m, "k");
        void *params[] = {&sf.s};
        CUresult lr, sr;
        launch(fn, n, n, params, &lr, &sr);
        printf(", \"launch\": %d, \"sync\": %d", (int)lr, (int)sr);
        if (!faulted && !copy(&sf, host, 0)) { printf(", \"result\": "); hex(host, n * 4); }
        cuModuleUnload(m);
    } else {
        printf(", \"log\": "); jstr(jitlog);
    }
    free(host);
    free_surface(&sf);
}

/* one thread runs `form.mode [s, {x, y}], v` on an 8x4 u32 surface whose texel i holds 0xee000000 + i */
static void run_oor(const case_t *c) {
    surf_t sf;
    CUresult r = make_surface(&sf, fmt_named("u32"), 1, 8, 4, 0, 0);
    printf("\"form\": \"%s\", \"mode\": \"%s\", \"x\": %d, \"y\": %d, \"create\": %d", c->form, c->mode, c->x, c->y, (int)r);
    if (r) { free_surface(&sf); return; }
    uint32_t host[32];
    for (int i = 0; i < 32; i++) host[i] = 0xee000000u + i;
    copy(&sf, host, 1);
    int v2 = strstr(c->form, ".v2") != NULL;
    ptxf(HDR ".visible .entry k(.param .u64 s, .param .u32 x, .param .u32 y)\n{\n  .reg .u64 %%rd<4>;\n"
         "  .reg .u32 %%r<16>;\n  ld.param.u64 %%rd0, [s];\n  ld.param.u32 %%r1, [x];\n  ld.param.u32 %%r2, [y];\n"
         "  mov.u32 %%r3, 0x11110001;\n  mov.u32 %%r4, 0x22220002;\n"
         "  %s.%s [%%rd0, {%%r1, %%r2}], %s;\n  ret;\n}\n",
         c->form, c->mode, strncmp(c->form, "sured", 5) ? (v2 ? "{%r3, %r4}" : "{%r3}") : "%r3");
    CUmodule m;
    CUfunction fn;
    r = load(ptx, &m);
    printf(", \"load\": %d", (int)r);
    if (!r) {
        cuModuleGetFunction(&fn, m, "k");
        int x = c->x, y = c->y;
        void *params[] = {&sf.s, &x, &y};
        CUresult lr, sr;
        launch(fn, 1, 1, params, &lr, &sr);
        printf(", \"launch\": %d, \"sync\": %d", (int)lr, (int)sr);
        if (!faulted && !copy(&sf, host, 0)) { printf(", \"result\": "); hex(host, sizeof host); }
        cuModuleUnload(m);
    } else {
        printf(", \"log\": "); jstr(jitlog);
    }
    free_surface(&sf);
}

static void run_red(const case_t *c) {
    const fmt_t *f = fmt_named(c->fmt);
    surf_t sf;
    CUresult r = make_surface(&sf, f, c->nch, c->width, 0, 0, 0);
    int texels = c->width * (int)sf.elem / c->bytes;        /* operand-sized slots the threads spread over */
    if (c->scale == 1) texels = c->width;
    /* .one: a slot per texel and per operand-sized piece of the row, whichever is more, so any x the
       hardware takes is reached (the rest fall out of range and are dropped) */
    if (c->one) texels = c->width * (int)sf.elem > c->width * c->bytes ? c->width * (int)sf.elem : c->width * c->bytes;
    const int threads = c->one ? texels : 1024, block = c->one ? texels : 128;
    const char *rmode = c->one ? "zero" : "trap";
    printf("\"form\": \"%s\", \"mode\": \"%s\", \"format\": \"%s\", \"nch\": %d, \"width\": %d, \"threads\": %d, "
           "\"block\": %d, \"slots\": %d, \"create\": %d", c->form, rmode, f->name, c->nch, c->width, threads, block,
           texels, (int)r);
    if (r) { free_surface(&sf); return; }
    size_t nb = surf_bytes(&sf);
    uint8_t *init = (uint8_t *)malloc(nb), *host = (uint8_t *)malloc(nb);
    for (size_t i = 0; i < nb; i++) init[i] = (uint8_t)(lcg() >> 13);
    if (c->one && (!strcmp(f->name, "f32") || !strcmp(f->name, "f16")))
        for (size_t i = 0; i + 4 <= nb; i += 4) {       /* floats of both signs, so min/max tell their order */
            float v = ((int)(lcg() % 801) - 400) / 100.0f;
            memcpy(init + i, &v, 4);
        }
    uint8_t *ops = (uint8_t *)malloc((size_t)threads * c->bytes);
    for (int t = 0; t < threads; t++) {
        uint32_t v[2] = {lcg(), lcg()};
        if (strstr(c->form, ".and.")) v[0] = v[1] = ~(1u << (lcg() % 32)) & ~(1u << (lcg() % 32));  /* clear few bits */
        else if (strstr(c->form, ".or.")) v[0] = v[1] = (1u << (lcg() % 32)) | (1u << (lcg() % 32));
        else if (strstr(c->form, ".add.") && t % 3) v[0] = v[0] % 100000, v[1] = 0;   /* some small, some huge */
        if (t % 97 == 5) v[0] = 0, v[1] = 0x80000000u;      /* the extremes of each ordering */
        if (t % 89 == 7) v[0] = 0xffffffffu, v[1] = 0x7fffffffu;
        if (t % 83 == 11) v[0] = 0x7fffffffu, v[1] = 0xffffffffu;
        if (t % 79 == 13) v[0] = 0x80000000u, v[1] = 0;
        if (c->one) {      /* small, negative, large and float-like operands, each slot its own */
            static const uint32_t pick[] = {1, 0xffffffffu, 0x7fffffffu, 0x80000000u, 0x3f800000u, 0xbf800000u,
                                            0xc0000000u, 0x00010001u, 0x0000ff80u, 0x00008000u, 0x12345678u, 300};
            v[0] = pick[t % 12];
            v[1] = pick[(t / 12 + 5) % 12];
        }
        memcpy(ops + (size_t)t * c->bytes, v, c->bytes);
    }
    copy(&sf, init, 1);
    int b64 = c->bytes == 8;
    ptxf(HDR ".visible .entry k(.param .u64 s, .param .u64 v, .param .u32 n)\n{\n  .reg .u64 %%rd<8>;\n"
         "  .reg .u32 %%r<16>;\n  mov.u32 %%r0, %%tid.x;\n  mov.u32 %%r1, %%ctaid.x;\n  mov.u32 %%r3, %%ntid.x;\n"
         "  mad.lo.u32 %%r0, %%r1, %%r3, %%r0;\n  ld.param.u64 %%rd0, [s];\n  ld.param.u64 %%rd1, [v];\n"
         "  ld.param.u32 %%r2, [n];\n  rem.u32 %%r5, %%r0, %%r2;\n  mul.lo.u32 %%r5, %%r5, %d;\n"
         "  mul.wide.u32 %%rd2, %%r0, %d;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  ld.global.%s %s, [%%rd2];\n"
         "  %s.%s [%%rd0, {%%r5}], %s;\n  ret;\n}\n",
         c->scale, c->bytes, b64 ? "u64" : "u32", b64 ? "%rd3" : "%r6", c->form, rmode, b64 ? "%rd3" : "%r6");
    CUmodule m;
    CUfunction fn;
    r = load(ptx, &m);
    printf(", \"load\": %d, \"init\": ", (int)r);
    hex(init, nb);
    printf(", \"operands\": ");
    hex(ops, (size_t)threads * c->bytes);
    if (!r) {
        CUdeviceptr dv;
        cuMemAlloc(&dv, (size_t)threads * c->bytes);
        cuMemcpyHtoD(dv, ops, (size_t)threads * c->bytes);
        cuModuleGetFunction(&fn, m, "k");
        unsigned n = texels;
        void *params[] = {&sf.s, &dv, &n};
        CUresult lr, sr;
        launch(fn, threads, block, params, &lr, &sr);
        printf(", \"launch\": %d, \"sync\": %d", (int)lr, (int)sr);
        if (!faulted && !copy(&sf, host, 0)) { printf(", \"result\": "); hex(host, nb); }
        if (!faulted) cuMemFree(dv);
        cuModuleUnload(m);
    } else {
        printf(", \"log\": "); jstr(jitlog);
    }
    free(init); free(host); free(ops);
    free_surface(&sf);
}

/* A 256 x 64 surface, thread i storing value i at (i % 256, i / 256): random floats in [-1.1, 1.1] and
   floats within 64 units in the last place of (k + 1/2) / scale, the boundaries of the normalised formats */
static void run_norm(const case_t *c) {
    const fmt_t *f = fmt_named(c->fmt);
    const int w = 256, h = 64, n = w * h;
    /* the values first: a surface this device cannot make leaves the sequence where the device that could
       leaves it, for the cases after */
    int bits = f->bytes * 8, sgn = f->name[0] == 's';
    double scale = !strcmp(f->name, "f16") ? 2048.0 : sgn ? (double)((1 << (bits - 1)) - 1) : (double)((1u << bits) - 1);
    uint32_t *v = (uint32_t *)malloc(n * 4);
    for (int i = 0; i < n; i++) {
        if (i % 2) {
            float x = (float)(((double)(lcg() >> 8) / 16777216.0) * 2.2 - 1.1);
            memcpy(&v[i], &x, 4);
        } else {
            double k = (double)(lcg() % (uint32_t)scale), t = (k + 0.5) / scale;
            if (!strcmp(f->name, "f16")) t = 1.0 + t / 2048.0 * (1 << (lcg() % 8));   /* half ties */
            float x = (float)t;
            uint32_t u;
            memcpy(&u, &x, 4);
            u += (int)(lcg() % 129) - 64;
            if (sgn && (lcg() & 1)) u |= 0x80000000u;
            v[i] = u;
        }
    }
    surf_t sf;
    CUresult r = make_surface(&sf, f, 1, w, h, 0, 0);
    printf("\"form\": \"sust.p.2d.b32.trap\", \"format\": \"%s\", \"width\": %d, \"height\": %d, \"create\": %d",
           f->name, w, h, (int)r);
    if (r) { free(v); free_surface(&sf); return; }
    uint8_t *host = (uint8_t *)calloc(n, f->bytes);
    copy(&sf, host, 1);
    ptxf(HDR ".visible .entry k(.param .u64 s, .param .u64 v)\n{\n  .reg .u64 %%rd<4>;\n  .reg .u32 %%r<16>;\n"
         "  mov.u32 %%r0, %%tid.x;\n  mov.u32 %%r1, %%ctaid.x;\n  mov.u32 %%r3, %%ntid.x;\n  mad.lo.u32 %%r0, %%r1, %%r3, %%r0;\n"
         "  ld.param.u64 %%rd0, [s];\n  ld.param.u64 %%rd1, [v];\n  mul.wide.u32 %%rd2, %%r0, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n"
         "  ld.global.u32 %%r4, [%%rd2];\n  rem.u32 %%r5, %%r0, %d;\n  div.u32 %%r6, %%r0, %d;\n"
         "  sust.p.2d.b32.trap [%%rd0, {%%r5, %%r6}], {%%r4};\n  ret;\n}\n", w, w);
    CUmodule m;
    CUfunction fn;
    r = load(ptx, &m);
    printf(", \"load\": %d, \"values\": ", (int)r);
    hex(v, n * 4);
    if (!r) {
        CUdeviceptr dv;
        cuMemAlloc(&dv, n * 4);
        cuMemcpyHtoD(dv, v, n * 4);
        cuModuleGetFunction(&fn, m, "k");
        void *params[] = {&sf.s, &dv};
        CUresult lr, sr;
        launch(fn, n, 256, params, &lr, &sr);
        printf(", \"launch\": %d, \"sync\": %d", (int)lr, (int)sr);
        if (!faulted && !copy(&sf, host, 0)) { printf(", \"result\": "); hex(host, (size_t)n * f->bytes); }
        if (!faulted) cuMemFree(dv);
        cuModuleUnload(m);
    }
    free(v); free(host);
    free_surface(&sf);
}

static void run_case(int k) {
    const case_t *c = &CASES[k];
    static const char *kinds[] = {"jit", "store", "geom", "oor", "trap", "red", "norm"};
    printf("R {\"case\": %d, \"kind\": \"%s\", ", k, kinds[c->kind]);
    switch (c->kind) {
    case K_JIT: run_jit(c); break;
    case K_STORE: run_store(c); break;
    case K_GEOM: run_geom(c); break;
    case K_OOR: case K_TRAP: run_oor(c); break;
    case K_RED: run_red(c); break;
    case K_NORM: run_norm(c); break;
    }
    printf("}\n");
    fflush(stdout);
}

static int child(int from) {
    CUdevice dev;
    /* one write per case: a case that crashes the process leaves no half line behind */
    setvbuf(stdout, NULL, _IOFBF, 1 << 24);
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    char name[256];
    int drv = 0, major = 0, minor = 0;
    cuDeviceGetName(name, sizeof name, dev);
    cuDriverGetVersion(&drv);
    cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    printf("I {\"device\": ");
    jstr(name);
    printf(", \"driver_version\": %d, \"cc\": \"%d.%d\"}\n", drv, major, minor);
    fflush(stdout);
    for (int k = from; k < NCASES && !faulted; k++) {
        printf("B %d\n", k);
        fflush(stdout);
        run_case(k);
    }
    return 0;
}

int main(int argc, char **argv) {
    make_values();
    build_cases();
    if (argc > 2 && !strcmp(argv[1], "child")) return child(atoi(argv[2]));
    int next = 0, first = 1;
    static char info[1024] = "null";
    printf("{\"about\": \"scripts/nvidia_surface_probe.cu: sust.p, sured and their out-of-range modes; "
           "store cases: thread i stores values[(vec * i + c) %% len(values)] as component c at x = i of a "
           "surface filled with 0xa5 bytes\",\n \"values\": ");
    hex(VALS, NV * 4);
    printf(",\n \"cases\": [\n");
    while (next < NCASES) {
        int fd[2];
        if (pipe(fd)) return 1;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char from[16];
            snprintf(from, sizeof from, "%d", next);
            dup2(fd[1], 1);
            close(fd[0]);
            execl("/proc/self/exe", argv[0], "child", from, (char *)NULL);
            _exit(127);
        }
        close(fd[1]);
        FILE *in = fdopen(fd[0], "r");
        static char line[1 << 22];
        int begun = -1, done = -1;
        while (fgets(line, sizeof line, in)) {
            size_t n = strlen(line);
            if (!n || line[n - 1] != '\n') break;        /* cut off by a crash */
            line[--n] = 0;
            if (line[0] == 'B') begun = atoi(line + 2);
            else if (line[0] == 'R') { printf("%s  %s", first ? "" : ",\n", line + 2); first = 0; done = begun; }
            else if (line[0] == 'I') snprintf(info, sizeof info, "%s", line + 2);
        }
        fclose(in);
        int st = 0;
        waitpid(pid, &st, 0);
        if (begun < 0) { fprintf(stderr, "child from %d started nothing (status %d)\n", next, st); return 1; }
        if (done != begun) {       /* the case crashed the process: say so and go on after it */
            printf("%s  {\"case\": %d, \"crashed\": %d, \"form\": ", first ? "" : ",\n", begun, st);
            jstr(CASES[begun].form);
            printf(", \"version\": \"%s\"}", CASES[begun].version ? CASES[begun].version : "");
            first = 0;
        }
        next = begun + 1;
    }
    printf("\n ],\n \"device\": %s}\n", info);
    return 0;
}
