/* What a GPU answers for mipmapped arrays and textures: cuMipmappedArray* error codes and level shapes,
 * txq on mipmapped textures, and tex / tex.level / tex.grad / tld4 samples (LOD sweeps over textures whose
 * levels are constants, which show the LOD and blend weight the hardware computes, and random texels),
 * printed as JSON with raw 32-bit values. Run once on NVIDIA hardware (tests/data/nvidia_mipmap_answers.json, an
 * H100); tests/ptx/test_texture_mipmap_hw.py replays it through the runtime and tests/apps/test_mipmap_probe.py
 * runs the same program through the shim. Build: nvcc -O1 -arch=sm_90 -o probe nvidia_mipmap_probe.cu -ldl */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static uint32_t seed = 20250;
static uint32_t lcg(void) { seed = seed * 1664525u + 1013904223u; return seed >> 8; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)(lcg() & 0xFFFF) / 65536.0f; }
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* ---- the driver API, through dlsym (no -lcuda needed to build) ---------------------------------------- */
typedef int (*fn_t)(...);
static void *drv;
static fn_t sym(const char *n) {
    fn_t f = (fn_t)dlsym(drv, n);
    if (!f) { fprintf(stderr, "no %s\n", n); exit(2); }
    return f;
}
typedef struct { size_t w, h, d; unsigned fmt, nch, flags; } AD3;   /* CUDA_ARRAY3D_DESCRIPTOR */
typedef struct { size_t w, h; unsigned fmt, nch; } AD;              /* CUDA_ARRAY_DESCRIPTOR */
static AD3 ad3(size_t w, size_t h, size_t d, unsigned fmt, unsigned nch, unsigned flags) {
    AD3 a = {w, h, d, fmt, nch, flags};
    return a;
}
typedef struct { unsigned type; unsigned pad; uint64_t h; unsigned char rest[128]; } RES;   /* 144 bytes */
typedef struct { unsigned addr[3], filter, flags, aniso, mipfilter; float bias, minc, maxc, border[4];
                 int reserved[12]; } TEXD;                                                      /* 104 bytes */
static sigjmp_buf jb;
static void segv(int s) { (void)s; siglongjmp(jb, 1); }
static int nerr = 0;
/* one answer: the call's CUresult, or "crash" where NVIDIA's driver faults */
#define ANS(name, expr) do { printf("%s\n  \"%s\": ", nerr++ ? "," : "", name); fflush(stdout); \
    if (sigsetjmp(jb, 1)) printf("\"crash\""); else { int r_ = (expr); printf("%d", r_); } } while (0)
#define VAL(name, v) do { printf("%s\n  \"%s\": %lld", nerr++ ? "," : "", name, (long long)(v)); } while (0)

/* ---- kernels ------------------------------------------------------------------------------------------ */
enum { K_1D, K_2D, K_3D, K_A1D, K_A2D, K_CUBE, K_GATHER };
enum { M_PLAIN, M_LEVEL, M_GRAD, M_ILEVEL };
static const char *KN[] = {"1d", "2d", "3d", "a1d", "a2d", "cube", "gather0"};
static const char *MN[] = {"plain", "level", "grad", "ilevel"};

/* c: x, y, z, layer; g: lod in g[0].x, or dPdx = g[0], dPdy = g[1] */
__global__ void sample(cudaTextureObject_t t, int kind, int mode, const float4 *c, const float4 *g, int n,
                       uint4 *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 p = c[i], a = g[2 * i], b = g[2 * i + 1];
    int layer = (int)p.w;
    float lod = a.x;
    float4 v = make_float4(0, 0, 0, 0);
    switch (kind * 4 + mode) {
    case K_1D * 4 + M_PLAIN: v = tex1D<float4>(t, p.x); break;
    case K_1D * 4 + M_LEVEL: v = tex1DLod<float4>(t, p.x, lod); break;
    case K_1D * 4 + M_GRAD: v = tex1DGrad<float4>(t, p.x, a.x, b.x); break;
    case K_2D * 4 + M_PLAIN: v = tex2D<float4>(t, p.x, p.y); break;
    case K_2D * 4 + M_LEVEL: v = tex2DLod<float4>(t, p.x, p.y, lod); break;
    case K_2D * 4 + M_GRAD: v = tex2DGrad<float4>(t, p.x, p.y, make_float2(a.x, a.y), make_float2(b.x, b.y)); break;
    case K_3D * 4 + M_PLAIN: v = tex3D<float4>(t, p.x, p.y, p.z); break;
    case K_3D * 4 + M_LEVEL: v = tex3DLod<float4>(t, p.x, p.y, p.z, lod); break;
    case K_3D * 4 + M_GRAD: v = tex3DGrad<float4>(t, p.x, p.y, p.z, a, b); break;
    case K_A1D * 4 + M_PLAIN: v = tex1DLayered<float4>(t, p.x, layer); break;
    case K_A1D * 4 + M_LEVEL: v = tex1DLayeredLod<float4>(t, p.x, layer, lod); break;
    case K_A1D * 4 + M_GRAD: v = tex1DLayeredGrad<float4>(t, p.x, layer, a.x, b.x); break;
    case K_A2D * 4 + M_PLAIN: v = tex2DLayered<float4>(t, p.x, p.y, layer); break;
    case K_A2D * 4 + M_LEVEL: v = tex2DLayeredLod<float4>(t, p.x, p.y, layer, lod); break;
    case K_A2D * 4 + M_GRAD:
        v = tex2DLayeredGrad<float4>(t, p.x, p.y, layer, make_float2(a.x, a.y), make_float2(b.x, b.y)); break;
    case K_CUBE * 4 + M_PLAIN: v = texCubemap<float4>(t, p.x, p.y, p.z); break;
    case K_CUBE * 4 + M_LEVEL: v = texCubemapLod<float4>(t, p.x, p.y, p.z, lod); break;
    case K_CUBE * 4 + M_GRAD: v = texCubemapGrad<float4>(t, p.x, p.y, p.z, a, b); break;
    case K_GATHER * 4 + M_PLAIN: v = tex2Dgather<float4>(t, p.x, p.y, 0); break;
    default: v = make_float4(-1, -1, -1, -1); break;
    }
    uint4 u;
    memcpy(&u, &v, 16);
    out[i] = u;
}

/* PTX loaded at run time through the driver, so an instruction the driver cannot load (an H100 running
 * CUDA 13 answered "named symbol not found" for a kernel with txq.num_mipmap_levels) costs that answer only:
 * one txq (or txq.level) per module, and tex.level with integer coordinates and LOD. */
static const char *PTX_HEAD = ".version 7.0\n.target sm_50\n.address_size 64\n";
static const char *PTX_TXQ =
    ".visible .entry q(.param .u64 t, .param .u64 o, .param .u32 l)\n{\n"
    "  .reg .u64 %%rd<4>;\n  .reg .b32 %%r<4>;\n"
    "  ld.param.u64 %%rd1, [t];\n  ld.param.u64 %%rd2, [o];\n  ld.param.u32 %%r1, [l];\n"
    "  %s\n  st.global.b32 [%%rd2], %%r2;\n  ret;\n}\n";
static const char *PTX_ILEVEL =
    ".visible .entry q(.param .u64 t, .param .u64 o, .param .u32 x, .param .u32 y, .param .u32 l)\n{\n"
    "  .reg .u64 %rd<4>;\n  .reg .b32 %r<8>;\n  .reg .f32 %f<4>;\n"
    "  ld.param.u64 %rd1, [t];\n  ld.param.u64 %rd2, [o];\n  ld.param.u32 %r1, [x];\n"
    "  ld.param.u32 %r2, [y];\n  ld.param.u32 %r3, [l];\n"
    "  tex.level.2d.v4.f32.s32 {%f0, %f1, %f2, %f3}, [%rd1, {%r1, %r2}], %r3;\n"
    "  st.global.v4.f32 [%rd2], {%f0, %f1, %f2, %f3};\n  ret;\n}\n";
typedef int (*load_t)(void **, const void *);
typedef int (*getf_t)(void **, void *, const char *);
typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                        void **, void **);
typedef int (*sync_t)(void);
typedef int (*unload_t)(void *);

/* Runs PTX `body` (entry q) once with params; returns the first failing CUresult, 0 when it ran. */
static int run_ptx(const char *body, void **params) {
    static char src[4096];
    snprintf(src, sizeof src, "%s%s", PTX_HEAD, body);
    void *mod = 0, *f = 0;
    int r = ((load_t)dlsym(drv, "cuModuleLoadData"))(&mod, src);
    if (r) return r;
    r = ((getf_t)dlsym(drv, "cuModuleGetFunction"))(&f, mod, "q");
    if (!r) r = ((launch_t)dlsym(drv, "cuLaunchKernel"))(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
    if (!r) r = ((sync_t)dlsym(drv, "cuCtxSynchronize"))();
    ((unload_t)dlsym(drv, "cuModuleUnload"))(mod);
    return r;
}

/* one txq form: [CUresult of loading and running it, the value it answered] printed */
static void txq_answer(const char *insn, cudaTextureObject_t t, int lod, int *dq) {
    char body[1024];
    snprintf(body, sizeof body, PTX_TXQ, insn);
    int hq = (int)0xA5A5A5A5;
    CK(cudaMemcpy(dq, &hq, 4, cudaMemcpyHostToDevice));
    unsigned long long tv = t, ov = (unsigned long long)(uintptr_t)dq;
    void *params[] = {&tv, &ov, &lod};
    int r = run_ptx(body, params);
    if (!r) CK(cudaMemcpy(&hq, dq, 4, cudaMemcpyDeviceToHost));
    printf("[%d, %d]", r, hq);
}

__global__ void surf_write(cudaSurfaceObject_t s, int w, int h) {
    int x = threadIdx.x, y = threadIdx.y;
    if (x < w && y < h) surf2Dwrite((float)(y * 100 + x + 1), s, x * 4, y);
}

/* ---- textures ----------------------------------------------------------------------------------------- */
typedef struct {
    int id, kind, u8, w, h, d, layers, levels;   /* u8: uchar4 read normalised; else float, one channel */
    int flags;
    cudaMipmappedArray_t mm;
    uint8_t *data[16];
    size_t bytes[16];
    int lw[16], lh[16], ld[16];
} Tex;

static const int ELEM = 4;     /* uchar4 or float */
static Tex mk(int id, int kind, int u8, int w, int h, int d, int layers, int levels, int flags) {
    Tex t;
    memset(&t, 0, sizeof t);
    t.id = id; t.kind = kind; t.u8 = u8; t.w = w; t.h = h; t.d = d; t.layers = layers; t.levels = levels;
    t.flags = flags;
    return t;
}

/* how each level is filled: 0 random, 1 the constant 1024 * level */
static void make_tex(Tex *t, int fill) {
    cudaChannelFormatDesc cd = t->u8 ? cudaCreateChannelDesc<uchar4>() : cudaCreateChannelDesc<float>();
    int depth = t->kind == K_3D ? t->d : t->layers;
    CK(cudaMallocMipmappedArray(&t->mm, &cd, make_cudaExtent(t->w, t->h, depth), t->levels, t->flags));
    for (int l = 0; l < t->levels; l++) {
        int w = t->w >> l, h = t->h >> l, d = t->d >> l;
        t->lw[l] = w < 1 ? 1 : w;
        t->lh[l] = t->h == 0 ? 0 : (h < 1 ? 1 : h);
        t->ld[l] = t->kind == K_3D ? (d < 1 ? 1 : d) : 0;
        size_t slices = t->kind == K_3D ? t->ld[l] : (t->layers ? t->layers : 1);
        size_t n = (size_t)t->lw[l] * (t->lh[l] ? t->lh[l] : 1) * slices;
        t->bytes[l] = n * ELEM;
        t->data[l] = (uint8_t *)malloc(t->bytes[l]);
        for (size_t i = 0; i < n; i++) {
            if (t->u8) {
                uint32_t r = lcg() ^ (lcg() << 12);
                memcpy(t->data[l] + 4 * i, &r, 4);
            } else {
                float f = fill ? 1024.0f * l : ((int)(lcg() % 20001) - 10000) / 37.0f;
                memcpy(t->data[l] + 4 * i, &f, 4);
            }
        }
        cudaArray_t a;
        CK(cudaGetMipmappedArrayLevel(&a, t->mm, l));
        cudaMemcpy3DParms p;
        memset(&p, 0, sizeof p);
        p.srcPtr = make_cudaPitchedPtr(t->data[l], (size_t)t->lw[l] * ELEM, t->lw[l], t->lh[l] ? t->lh[l] : 1);
        p.dstArray = a;
        p.extent = make_cudaExtent(t->lw[l], t->lh[l] ? t->lh[l] : 1, slices);
        p.kind = cudaMemcpyHostToDevice;
        CK(cudaMemcpy3D(&p));
    }
}

static void free_tex(Tex *t) {
    CK(cudaFreeMipmappedArray(t->mm));
    for (int l = 0; l < t->levels; l++) free(t->data[l]);
}

typedef struct {
    int filter, mipfilter, address, normalized, aniso, no_trilinear_opt;
    float bias, minc, maxc;
} Desc;

static const char *AN[] = {"wrap", "clamp", "mirror", "border"};
static int ncase = 0;

static void print_hex_list(const float *v, int n) {
    printf("[");
    for (int i = 0; i < n; i++) printf("%s\"%08x\"", i ? ", " : "", bits(v[i]));
    printf("]");
}

/* One case: a texture object over t with the modes of ds; n samples at coordinates c (shared: one for all)
 * with per-sample arguments g (2 float4 each); prints the hardware's answers. */
static void run_case(const char *label, const Tex *t, const Desc *ds, int kind, int mode, const float4 *c,
                     int shared, const float4 *g, int n) {
    cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeMipmappedArray;
    res.res.mipmap.mipmap = t->mm;
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    for (int i = 0; i < 3; i++) td.addressMode[i] = (cudaTextureAddressMode)ds->address;
    td.filterMode = ds->filter ? cudaFilterModeLinear : cudaFilterModePoint;
    td.mipmapFilterMode = ds->mipfilter ? cudaFilterModeLinear : cudaFilterModePoint;
    td.readMode = t->u8 ? cudaReadModeNormalizedFloat : cudaReadModeElementType;
    td.normalizedCoords = ds->normalized;
    td.maxAnisotropy = ds->aniso;
    td.mipmapLevelBias = ds->bias;
    td.minMipmapLevelClamp = ds->minc;
    td.maxMipmapLevelClamp = ds->maxc;
    td.disableTrilinearOptimization = ds->no_trilinear_opt;
    td.borderColor[0] = 0.25f; td.borderColor[1] = 0.5f; td.borderColor[2] = 0.75f; td.borderColor[3] = 1.0f;
    cudaTextureObject_t to;
    cudaError_t e = cudaCreateTextureObject(&to, &res, &td, NULL);
    printf("%s\n  {\"label\": \"%s\", \"texture\": %d, \"kind\": \"%s\", \"mode\": \"%s\", \"filter\": \"%s\", "
           "\"mipfilter\": \"%s\", \"address\": \"%s\", \"normalized\": %d, \"aniso\": %d, "
           "\"trilinear_opt\": %d, \"bias\": \"%08x\", \"min_clamp\": \"%08x\", \"max_clamp\": \"%08x\", "
           "\"border\": [0.25, 0.5, 0.75, 1.0], \"create\": %d",
           ncase++ ? "," : "", label, t->id, KN[kind], MN[mode],
           ds->filter ? "linear" : "point", ds->mipfilter ? "linear" : "point", AN[ds->address], ds->normalized,
           ds->aniso, !ds->no_trilinear_opt, bits(ds->bias), bits(ds->minc), bits(ds->maxc), (int)e);
    if (e != cudaSuccess) { cudaGetLastError(); printf("}"); return; }
    float4 *hc = (float4 *)malloc(sizeof(float4) * n);
    for (int i = 0; i < n; i++) hc[i] = c[shared ? 0 : i];
    float4 *dc, *dg;
    uint4 *dout;
    CK(cudaMalloc(&dc, sizeof(float4) * n));
    CK(cudaMalloc(&dg, 2 * sizeof(float4) * n));
    CK(cudaMalloc(&dout, 16 * n));
    CK(cudaMemcpy(dc, hc, sizeof(float4) * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dg, g, 2 * sizeof(float4) * n, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xA5, 16 * n));
    uint4 *ho = (uint4 *)malloc(16 * n);
    if (mode == M_ILEVEL) {     /* integer coordinates and LOD: one run of PTX_ILEVEL per sample */
        int rc = 0;
        for (int i = 0; i < n; i++) {
            unsigned long long tv = to, ov = (unsigned long long)(uintptr_t)dout;
            int x = (int)hc[i].x, y = (int)hc[i].y, l = (int)g[2 * i].x;
            void *params[] = {&tv, &ov, &x, &y, &l};
            int r = run_ptx(PTX_ILEVEL, params);
            if (r) rc = r;
            CK(cudaMemcpy(&ho[i], dout, 16, cudaMemcpyDeviceToHost));
        }
        printf(", \"ptx\": %d", rc);
    } else {
        sample<<<(n + 127) / 128, 128>>>(to, kind, mode, dc, dg, n, dout);
        cudaError_t le = cudaGetLastError();
        if (le == cudaSuccess) le = cudaDeviceSynchronize();
        if (le != cudaSuccess) {    /* answered as the case's "launch" (a kernel the driver cannot load) */
            printf(", \"launch\": %d}", (int)le);
            CK(cudaDestroyTextureObject(to));
            CK(cudaFree(dc)); CK(cudaFree(dg)); CK(cudaFree(dout));
            free(hc); free(ho);
            return;
        }
        CK(cudaMemcpy(ho, dout, 16 * n, cudaMemcpyDeviceToHost));
    }
    /* only the words a sample uses: coordinates of the geometry, the LOD or the gradients, the channels */
    int nc = kind == K_1D ? 1 : kind == K_2D || kind == K_GATHER || kind == K_A1D ? 2 : kind == K_A2D ? 3
           : 3;
    int layered = kind == K_A1D || kind == K_A2D;
    int gd = kind == K_1D || kind == K_A1D ? 1 : kind == K_2D || kind == K_A2D ? 2 : 3;
    int nres = t->u8 || kind == K_GATHER ? 4 : 1;
    printf(",\n   \"coords\": [");
    for (int i = 0; i < (shared ? 1 : n); i++) {
        float v[4] = {hc[i].x, hc[i].y, hc[i].z, hc[i].w};
        float w[4];
        int k = 0;
        for (int j = 0; j < nc - layered; j++) w[k++] = v[j];
        if (layered) w[k++] = v[3];
        printf("%s", i ? ", " : "");
        print_hex_list(w, k);
    }
    printf("],\n   \"args\": [");
    for (int i = 0; mode != M_PLAIN && i < n; i++) {
        float4 a = g[2 * i], b = g[2 * i + 1];
        float w[8] = {a.x, a.y, a.z, b.x, b.y, b.z};
        printf("%s", i ? ", " : "");
        if (mode == M_GRAD) {
            float x[6];
            for (int j = 0; j < gd; j++) { x[j] = w[j]; x[gd + j] = w[3 + j]; }
            print_hex_list(x, 2 * gd);
        } else {
            print_hex_list(&a.x, 1);
        }
    }
    printf("],\n   \"results\": [");
    for (int i = 0; i < n; i++) {
        uint32_t r[4] = {ho[i].x, ho[i].y, ho[i].z, ho[i].w};
        printf("%s[", i ? ", " : "");
        for (int j = 0; j < nres; j++) printf("%s\"%08x\"", j ? ", " : "", r[j]);
        printf("]");
    }
    printf("]}");
    CK(cudaDestroyTextureObject(to));
    CK(cudaFree(dc)); CK(cudaFree(dg)); CK(cudaFree(dout));
    free(hc); free(ho);
}

static void print_tex(const Tex *t) {
    printf("%s\n  \"%d\": {\"kind\": \"%s\", \"format\": \"%s\", \"channels\": %d, \"width\": %d, \"height\": %d, "
           "\"depth\": %d, \"layers\": %d, \"levels\": %d, \"data\": [",
           ncase++ ? "," : "", t->id, KN[t->kind],
           t->u8 ? "u8" : "f32", t->u8 ? 4 : 1, t->w, t->h, t->d, t->layers, t->levels);
    for (int l = 0; l < t->levels; l++) {
        printf("%s\"", l ? ", " : "");
        for (size_t i = 0; i < t->bytes[l]; i++) printf("%02x", t->data[l][i]);
        printf("\"");
    }
    printf("]}");
}

/* ---- the sweeps over a texture whose level k holds 1024 * k ---------------------------------------------- */
static float4 *args_level(float lo, float step, int n) {
    float4 *g = (float4 *)calloc(2 * n, sizeof(float4));
    for (int i = 0; i < n; i++) g[2 * i].x = lo + step * i;
    return g;
}
/* gradients along x (axis 0) or y (axis 1) of 2^e / extent, e from lo in steps */
static float4 *args_grad(int axis, int dy, float lo, float step, int n, float extent) {
    float4 *g = (float4 *)calloc(2 * n, sizeof(float4));
    for (int i = 0; i < n; i++) {
        float v = exp2f(lo + step * i) / extent;
        float *p = dy ? &g[2 * i + 1].x : &g[2 * i].x;
        p[axis] = v;
    }
    return g;
}
static float4 *args_grad_random(int n, float w, float h, float lo, float hi) {
    float4 *g = (float4 *)calloc(2 * n, sizeof(float4));
    for (int i = 0; i < n; i++) {
        float *p = &g[2 * i].x;
        for (int k = 0; k < 2; k++) {
            float m = exp2f(unif(lo, hi)), ang = unif(0, 6.2831853f);
            p[4 * k] = roundf(m * cosf(ang) * 4096) / 4096 / w;
            p[4 * k + 1] = roundf(m * sinf(ang) * 4096) / 4096 / h;
        }
    }
    return g;
}

static void sweeps(Tex *s) {
    const float4 centre = make_float4(0.5f, 0.5f, 0, 0);
    Desc base = {0, 1, 1, 1, 0, 1, 0.0f, 0.0f, 100.0f};
    Desc d;
    float4 *g;
    int W = s->w, H = s->h;
    /* explicit LOD */
    d = base; d.mipfilter = 0;
    g = args_level(-1, 1.0f / 64, 513); run_case("level", s, &d, K_2D, M_LEVEL, &centre, 1, g, 513); free(g);
    d = base;
    g = args_level(-1, 1.0f / 64, 513); run_case("level", s, &d, K_2D, M_LEVEL, &centre, 1, g, 513); free(g);
    d = base; d.no_trilinear_opt = 0;
    g = args_level(-1, 1.0f / 64, 513); run_case("level", s, &d, K_2D, M_LEVEL, &centre, 1, g, 513); free(g);
    d = base;
    g = args_level(1, 1.0f / 2048, 2048); run_case("level_fine", s, &d, K_2D, M_LEVEL, &centre, 1, g, 2048); free(g);
    d = base; d.no_trilinear_opt = 0;
    g = args_level(1, 1.0f / 2048, 2048); run_case("level_fine", s, &d, K_2D, M_LEVEL, &centre, 1, g, 2048); free(g);
    d = base; d.mipfilter = 0;
    g = args_level(1.46875f, 1.0f / 4096, 256); run_case("level_half", s, &d, K_2D, M_LEVEL, &centre, 1, g, 256);
    free(g);
    /* gradients */
    d = base;
    g = args_grad(0, 0, -3, 1.0f / 32, 353, W); run_case("grad_x", s, &d, K_2D, M_GRAD, &centre, 1, g, 353); free(g);
    g = args_grad(0, 0, 1, 1.0f / 1024, 1024, W); run_case("grad_x_fine", s, &d, K_2D, M_GRAD, &centre, 1, g, 1024);
    free(g);
    g = args_grad(1, 1, -3, 1.0f / 32, 353, H); run_case("grad_y", s, &d, K_2D, M_GRAD, &centre, 1, g, 353); free(g);
    d.no_trilinear_opt = 0;
    g = args_grad(0, 0, 1, 1.0f / 1024, 1024, W);
    run_case("grad_x_fine", s, &d, K_2D, M_GRAD, &centre, 1, g, 1024); free(g);
    d = base;
    g = args_grad_random(512, W, H, -2, 7);
    run_case("grad_random", s, &d, K_2D, M_GRAD, &centre, 1, g, 512);
    d.aniso = 4; run_case("grad_random", s, &d, K_2D, M_GRAD, &centre, 1, g, 512);
    d.aniso = 16; run_case("grad_random", s, &d, K_2D, M_GRAD, &centre, 1, g, 512);
    free(g);
    /* bias and clamps: explicit LOD, gradients, and plain tex (and tld4) */
    static const float COMBOS[][3] = {{0, 0, 0}, {0, 0, 100}, {0.5f, 0, 100}, {-0.75f, 0, 100}, {0, 1.25f, 100},
        {0, 0, 2.5f}, {0, 1.5f, 1.5f}, {0, 3, 1}, {0, -1, 100}, {2.25f, 0.5f, 4.75f}, {-3, 2, 100},
        {0.375f, 0, 3.625f}};
    for (size_t k = 0; k < sizeof COMBOS / sizeof COMBOS[0]; k++) {
        d = base; d.bias = COMBOS[k][0]; d.minc = COMBOS[k][1]; d.maxc = COMBOS[k][2];
        g = args_level(-2, 1.0f / 16, 161); run_case("clamp_level", s, &d, K_2D, M_LEVEL, &centre, 1, g, 161); free(g);
        g = args_grad(0, 0, -3, 1.0f / 8, 97, W); run_case("clamp_grad", s, &d, K_2D, M_GRAD, &centre, 1, g, 97); free(g);
        g = args_level(0, 0, 1);
        run_case("clamp_plain", s, &d, K_2D, M_PLAIN, &centre, 1, g, 1);
        run_case("clamp_gather", s, &d, K_GATHER, M_PLAIN, &centre, 1, g, 1);
        free(g);
        d.mipfilter = 0;
        g = args_level(-2, 1.0f / 16, 161); run_case("clamp_level", s, &d, K_2D, M_LEVEL, &centre, 1, g, 161); free(g);
        g = args_level(0, 0, 1); run_case("clamp_plain", s, &d, K_2D, M_PLAIN, &centre, 1, g, 1); free(g);
    }
    /* integer coordinates and LOD (tex.level.2d.v4.f32.s32) */
    {
        const float4 ic = make_float4(5, 3, 0, 0);
        static const float COMB2[][3] = {{0, 0, 100}, {0.5f, 0, 100}, {0, 1.5f, 100}, {0, 0, 2.5f}};
        for (int k = 0; k < 4; k++)
            for (int mf = 0; mf < 2; mf++) {
                d = base; d.mipfilter = mf; d.bias = COMB2[k][0]; d.minc = COMB2[k][1]; d.maxc = COMB2[k][2];
                g = args_level(-2, 1, 12); run_case("ilevel", s, &d, K_2D, M_ILEVEL, &ic, 1, g, 12); free(g);
            }
    }
    /* special LODs and gradients: NaN, infinities, signed zero, huge and tiny */
    {
        static const float SP[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e30f, -1e30f, 0.5f, 6.0f, 6.5f, 100.0f,
                                   1e-30f, -1e-30f};
        const int ns = sizeof SP / sizeof SP[0];
        g = (float4 *)calloc(2 * ns, sizeof(float4));
        for (int i = 0; i < ns; i++) g[2 * i].x = SP[i];
        d = base;
        run_case("level_special", s, &d, K_2D, M_LEVEL, &centre, 1, g, ns);
        for (int i = 0; i < ns; i++) { g[2 * i].x = SP[i]; g[2 * i + 1].y = i & 1 ? SP[i] : 0.0f; }
        run_case("grad_special", s, &d, K_2D, M_GRAD, &centre, 1, g, ns);
        free(g);
    }
    /* unnormalised coordinates over a mipmapped array */
    d = base; d.normalized = 0;
    const float4 tc = make_float4(W / 2.0f, H / 2.0f, 0, 0);
    g = args_grad(0, 0, -3, 1.0f / 8, 97, 1); run_case("unnorm_grad", s, &d, K_2D, M_GRAD, &tc, 1, g, 97); free(g);
    g = args_level(-1, 1.0f / 16, 129); run_case("unnorm_level", s, &d, K_2D, M_LEVEL, &tc, 1, g, 129); free(g);
}

/* ---- random texels, coordinates, LODs and gradients ---------------------------------------------------- */
static void random_cases(Tex *t, int many) {
    const int n = 64;
    float4 *c = (float4 *)calloc(n, sizeof(float4));
    float4 *gl = (float4 *)calloc(2 * n, sizeof(float4));
    float4 *gg = (float4 *)calloc(2 * n, sizeof(float4));
    int kind = t->kind;
    int dims = kind == K_1D || kind == K_A1D ? 1 : kind == K_3D || kind == K_CUBE ? 3 : 2;
    float ext[3] = {(float)t->w, (float)(t->h ? t->h : 1), (float)(t->d ? t->d : 1)};
    for (int i = 0; i < n; i++) {
        float *p = &c[i].x;
        for (int k = 0; k < 3; k++)
            p[k] = kind == K_CUBE ? (float)((int)(lcg() % 2049) - 1024) / 1024.0f
                                  : (float)((int)(lcg() % 1331) - 150) / 1024.0f;
        if (kind == K_CUBE && fabsf(p[0]) + fabsf(p[1]) + fabsf(p[2]) < 0.1f) p[2] = 0.75f;
        p[3] = t->layers && kind != K_CUBE ? (float)(lcg() % t->layers) : 0;
        gl[2 * i].x = unif(-0.75f, t->levels + 0.5f);
        float *a = &gg[2 * i].x;
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < dims; j++) {
                float m = exp2f(unif(-1.5f, log2f(ext[j]) + 1.5f)) * (lcg() & 1 ? 1 : -1);
                a[4 * k + j] = roundf(m * 1024) / 1024 / (kind == K_CUBE ? ext[0] / 2 : ext[j]);
            }
    }
    Desc base = {1, 1, 1, 1, 0, 1, 0.0f, 0.0f, 100.0f};
    for (int f = 0; f < 2; f++)
        for (int mf = 0; mf < 2; mf++) {
            if (!many && f != mf) continue;
            Desc d = base;
            d.filter = f; d.mipfilter = mf;
            run_case("random", t, &d, kind, M_LEVEL, c, 0, gl, n);
            run_case("random", t, &d, kind, M_GRAD, c, 0, gg, n);
            if (many || f) run_case("random", t, &d, kind, M_PLAIN, c, 0, gl, n);
        }
    if (many) {
        Desc d = base;
        d.no_trilinear_opt = 0;
        run_case("random", t, &d, kind, M_LEVEL, c, 0, gl, n);
        run_case("random", t, &d, kind, M_GRAD, c, 0, gg, n);
        d = base; d.address = 0;
        run_case("random", t, &d, kind, M_LEVEL, c, 0, gl, n);
        d = base; d.address = 3;
        run_case("random", t, &d, kind, M_GRAD, c, 0, gg, n);
        d = base; d.bias = 0.625f; d.minc = 0.5f; d.maxc = 2.75f;
        run_case("random", t, &d, kind, M_GRAD, c, 0, gg, n);
    }
    free(c); free(gl); free(gg);
}

static void queries(const char *label, const Tex *t, cudaArray_t plain) {
    cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    if (t) {
        res.resType = cudaResourceTypeMipmappedArray;
        res.res.mipmap.mipmap = t->mm;
    } else {
        res.resType = cudaResourceTypeArray;
        res.res.array.array = plain;
    }
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    td.normalizedCoords = 1;
    td.maxMipmapLevelClamp = 1;    /* the clamp does not limit what txq.level answers (if it did, it shows) */
    cudaTextureObject_t to;
    CK(cudaCreateTextureObject(&to, &res, &td, NULL));
    int *dq;
    CK(cudaMalloc(&dq, 16));
    printf("%s\n  \"%s\": {\"texture\": %d, ", ncase++ ? "," : "", label, t ? t->id : -1);
    static const char *NAMES[] = {"width", "height", "depth", "num_mipmap_levels", "array_size"};
    for (int k = 0; k < 5; k++) {
        char insn[128];
        snprintf(insn, sizeof insn, "txq.%s.b32 %%r2, [%%rd1];", NAMES[k]);
        printf("\"%s\": ", NAMES[k]);
        txq_answer(insn, to, 0, dq);
        printf(", ");
    }
    for (int k = 0; k < 3; k++) {
        printf("\"level_%s_from_-1\": [", NAMES[k]);
        for (int l = -1; l <= 8; l++) {
            char insn[128];
            snprintf(insn, sizeof insn, "txq.level.%s.b32 %%r2, [%%rd1], %%r1;", NAMES[k]);
            txq_answer(insn, to, l, dq);
            printf("%s", l < 8 ? ", " : "");
        }
        printf("]%s", k < 2 ? ", " : "}");
    }
    CK(cudaDestroyTextureObject(to));
    CK(cudaFree(dq));
}

/* ---- the driver's answers -------------------------------------------------------------------------------- */
static void driver_answers(void) {
    fn_t mc = sym("cuMipmappedArrayCreate"), mg = sym("cuMipmappedArrayGetLevel"),
         md = sym("cuMipmappedArrayDestroy"), mr = sym("cuMipmappedArrayGetMemoryRequirements"),
         a3gd = sym("cuArray3DGetDescriptor_v2"), agd = sym("cuArrayGetDescriptor_v2"), ad = sym("cuArrayDestroy"),
         tc = sym("cuTexObjectCreate"), tdst = sym("cuTexObjectDestroy"), sc = sym("cuSurfObjectCreate"),
         sd = sym("cuSurfObjectDestroy"), m3 = sym("cuMemcpy3D_v2");
    void *mm = 0, *arr = 0;
    int r;
    AD3 a3;
    #define MC(name, w, h, d, fmt, nch, flags, lv) do { mm = 0; r = -1; a3 = ad3(w, h, d, fmt, nch, flags); \
        ANS(name, r = mc(&mm, &a3, lv)); if (!r) md(mm); } while (0)
    MC("create_2d_16x12_L5", 16, 12, 0, 0x20, 1, 0, 5);
    MC("create_2d_16x12_L6", 16, 12, 0, 0x20, 1, 0, 6);
    MC("create_2d_16x12_L0", 16, 12, 0, 0x20, 1, 0, 0);
    MC("create_2d_64x16_L7", 64, 16, 0, 0x20, 1, 0, 7);
    MC("create_2d_64x16_L8", 64, 16, 0, 0x20, 1, 0, 8);
    MC("create_2d_5x3_L3", 5, 3, 0, 0x20, 1, 0, 3);
    MC("create_2d_5x3_L4", 5, 3, 0, 0x20, 1, 0, 4);
    MC("create_1d_32_L6", 32, 0, 0, 0x20, 1, 0, 6);
    MC("create_1d_32_L7", 32, 0, 0, 0x20, 1, 0, 7);
    MC("create_3d_8x8x4_L4", 8, 8, 4, 0x20, 1, 0, 4);
    MC("create_3d_4x4x32_L6", 4, 4, 32, 0x20, 1, 0, 6);
    MC("create_3d_4x4x32_L7", 4, 4, 32, 0x20, 1, 0, 7);
    MC("create_layered_8x8x3_L4", 8, 8, 3, 0x20, 1, 0x1, 4);
    MC("create_layered_8x8x3_L5", 8, 8, 3, 0x20, 1, 0x1, 5);
    MC("create_layered_8x8x64_L5", 8, 8, 64, 0x20, 1, 0x1, 5);
    MC("create_layered_1d_16x0x3_L5", 16, 0, 3, 0x20, 1, 0x1, 5);
    MC("create_cube_8_L4", 8, 8, 6, 0x20, 1, 0x4, 4);
    MC("create_cube_8_L5", 8, 8, 6, 0x20, 1, 0x4, 5);
    MC("create_cube_8x4", 8, 4, 6, 0x20, 1, 0x4, 2);
    MC("create_cube_layered_8x12_L4", 8, 8, 12, 0x20, 1, 0x5, 4);
    MC("create_bad_format", 16, 16, 0, 0x77, 1, 0, 2);
    MC("create_3_channels", 16, 16, 0, 0x20, 3, 0, 2);
    MC("create_bad_flags", 16, 16, 0, 0x20, 1, 0x80000, 2);
    MC("create_flags_surface_gather", 16, 16, 0, 0x20, 1, 0xA, 2);
    MC("create_flags_sparse", 64, 64, 0, 0x20, 1, 0x40, 2);
    MC("create_flags_deferred", 64, 64, 0, 0x20, 1, 0x80, 2);
    MC("create_width0", 0, 16, 0, 0x20, 1, 0, 1);
    MC("create_h0_d8", 16, 0, 8, 0x20, 1, 0, 2);
    MC("create_2d_32768x16_L1", 32768, 16, 0, 0x01, 1, 0, 1);
    MC("create_2d_32769x16_L1", 32769, 16, 0, 0x01, 1, 0, 1);
    MC("create_2d_65536x16_L1", 65536, 16, 0, 0x01, 1, 0, 1);
    MC("create_1d_32769_L1", 32769, 0, 0, 0x01, 1, 0, 1);
    MC("create_1d_65536_L1", 65536, 0, 0, 0x01, 1, 0, 1);
    MC("create_3d_2049_L1", 2049, 4, 4, 0x01, 1, 0, 1);
    a3 = ad3(16, 16, 0, 0x20, 1, 0);
    ANS("create_null_handle", mc(NULL, &a3, 2));
    ANS("create_null_desc", mc(&mm, NULL, 2));
    /* deferred mapping: the memory requirements */
    {
        struct { size_t size, align; unsigned reserved[4]; } req;
        memset(&req, 0, sizeof req);
        mm = 0; r = -1;
        a3 = ad3(64, 64, 0, 0x20, 1, 0x80);
        ANS("deferred_create", r = mc(&mm, &a3, 3));
        if (!r) {
            ANS("deferred_memory_requirements", mr(&req, mm, 0));
            VAL("deferred_memory_requirements_size", req.size);
            VAL("deferred_memory_requirements_alignment", req.align);
            ANS("deferred_get_level", mg(&arr, mm, 0));
            md(mm);
        }
    }
    /* a 2D mipmapped array: its levels */
    a3 = ad3(16, 12, 0, 0x20, 1, 0x2);
    ANS("create_for_levels", mc(&mm, &a3, 5));
    {
        struct { size_t size, align; unsigned reserved[4]; } req;
        ANS("memory_requirements", mr(&req, mm, 0));
        ANS("memory_requirements_null", mr(NULL, mm, 0));
    }
    void *lv[8] = {0};
    for (int l = 0; l < 5; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, "get_level_%d", l);
        ANS(nm, mg(&lv[l], mm, l));
    }
    void *again = 0;
    ANS("get_level_1_again", mg(&again, mm, 1));
    VAL("get_level_1_again_same_handle", again == lv[1]);
    VAL("level_handles_distinct", lv[0] != lv[1] && lv[1] != lv[2]);
    ANS("get_level_5", mg(&arr, mm, 5));
    ANS("get_level_minus1", mg(&arr, mm, 0xFFFFFFFFu));
    ANS("get_level_null_out", mg(NULL, mm, 0));
    ANS("get_level_null_mipmap", mg(&arr, NULL, 0));
    AD got;
    memset(&got, 0, sizeof got);
    ANS("array_get_descriptor_level2", agd(&got, lv[2]));
    VAL("array_get_descriptor_level2_w", got.w);
    VAL("array_get_descriptor_level2_h", got.h);
    /* copies into a level: its own extent, one more column */
    {
        float buf[64 * 64];
        for (int i = 0; i < 64 * 64; i++) buf[i] = (float)i;
        struct { size_t sx, sy, sz, slod; unsigned stype; void *shost; uint64_t sdev; void *sarr, *r0;
                 size_t spitch, sheight; size_t dx, dy, dz, dlod; unsigned dtype; void *dhost; uint64_t ddev;
                 void *darr, *r1; size_t dpitch, dheight; size_t w, h, d; } c3;
        memset(&c3, 0, sizeof c3);
        c3.stype = 1; c3.shost = buf; c3.spitch = 64 * 4; c3.sheight = 64;
        c3.dtype = 3; c3.darr = lv[1]; c3.w = 8 * 4; c3.h = 6; c3.d = 1;
        ANS("memcpy3d_to_level1", m3(&c3));
        c3.w = 9 * 4;
        ANS("memcpy3d_to_level1_too_wide", m3(&c3));
        c3.w = 8 * 4; c3.h = 7;
        ANS("memcpy3d_to_level1_too_tall", m3(&c3));
    }
    /* texture objects over it */
    RES res;
    memset(&res, 0, sizeof res);
    res.type = 1; res.h = (uint64_t)(uintptr_t)mm;
    TEXD td;
    uint64_t to = 0;
    #define TD(nm, ...) do { memset(&td, 0, sizeof td); td.addr[0] = td.addr[1] = td.addr[2] = 1; \
        td.flags = 0x2; td.maxc = 4; __VA_ARGS__; to = 0; r = -1; ANS(nm, r = tc(&to, &res, &td, NULL)); \
        if (!r) tdst(to); } while (0)
    TD("tex_ok");
    TD("tex_unnormalized", td.flags = 0);
    TD("tex_mipfilter_2", td.mipfilter = 2);
    TD("tex_filter_2", td.filter = 2);
    TD("tex_aniso_17", td.aniso = 17);
    TD("tex_aniso_16", td.aniso = 16);
    TD("tex_min_gt_max", td.minc = 3; td.maxc = 1);
    TD("tex_negative_clamps", td.minc = -5; td.maxc = -1);
    TD("tex_bias_100", td.bias = 100);
    TD("tex_nan_bias", td.bias = NAN);
    TD("tex_seamless_cube_on_2d", td.flags = 0x42);
    TD("tex_wrap_border", td.addr[0] = 0; td.addr[1] = 3);
    {
        void *m8 = 0;
        a3 = ad3(16, 16, 0, 0x01, 1, 0);
        ANS("create_u8", mc(&m8, &a3, 3));
        res.h = (uint64_t)(uintptr_t)m8;
        TD("tex_int_read_mip_linear", td.flags = 0x3; td.mipfilter = 1);
        TD("tex_int_read_linear_both", td.flags = 0x3; td.mipfilter = 1; td.filter = 1);
        md(m8);
    }
    res.h = 0;
    TD("tex_null_mipmap");
    res.type = 0; res.h = (uint64_t)(uintptr_t)lv[1];
    TD("tex_array_over_level1");
    /* surfaces over a level (the mipmapped array made with SURFACE_LDST), or over the mipmapped array */
    res.type = 0; res.h = (uint64_t)(uintptr_t)lv[1];
    ANS("surf_over_level1", r = sc(&to, &res)); if (!r) sd(to);
    res.type = 1; res.h = (uint64_t)(uintptr_t)mm;
    ANS("surf_over_mipmap", r = sc(&to, &res)); if (!r) sd(to);
    {
        void *m2 = 0, *l2 = 0;
        a3 = ad3(16, 12, 0, 0x20, 1, 0);
        ANS("create_no_ldst", mc(&m2, &a3, 5));
        mg(&l2, m2, 1);
        res.type = 0; res.h = (uint64_t)(uintptr_t)l2;
        ANS("surf_over_level_without_ldst", r = sc(&to, &res)); if (!r) sd(to);
        md(m2);
    }
    /* level descriptors of several shapes */
    printf(",\n  \"level_shapes\": {");
    static const struct { const char *nm; size_t w, h, d; unsigned flags, lv; } SH[] = {
        {"2d_16x12_L5", 16, 12, 0, 0x2, 5}, {"2d_5x3_L3", 5, 3, 0, 0, 3}, {"1d_32_L6", 32, 0, 0, 0, 6},
        {"3d_8x4x2_L4", 8, 4, 2, 0, 4}, {"layered_10x6x3_L4", 10, 6, 3, 0x1, 4},
        {"cube_8_L4", 8, 8, 6, 0x4, 4}, {"layered_1d_16x3_L5", 16, 0, 3, 0x1, 5},
        {"cube_layered_4x12_L3", 4, 4, 12, 0x5, 3}};
    for (size_t k = 0; k < sizeof SH / sizeof SH[0]; k++) {
        void *m = 0;
        a3 = ad3(SH[k].w, SH[k].h, SH[k].d, 0x20, 1, SH[k].flags);
        int rc = mc(&m, &a3, SH[k].lv);
        printf("%s\n   \"%s\": {\"create\": %d, \"levels\": [", k ? "," : "", SH[k].nm, rc);
        for (unsigned l = 0; !rc && l < SH[k].lv; l++) {
            void *a = 0;
            AD3 g3;
            memset(&g3, 0, sizeof g3);
            int r1 = mg(&a, m, l), r2 = a3gd(&g3, a);
            printf("%s[%d, %d, %zu, %zu, %zu, %u, %u, %u]", l ? ", " : "", r1, r2, g3.w, g3.h, g3.d, g3.fmt, g3.nch,
                   g3.flags);
        }
        printf("]}");
        if (!rc) md(m);
    }
    printf("}");
    /* last, the calls that may fault: handles of the wrong kind, a level destroyed as an array, the mipmapped
       array destroyed twice */
    ANS("get_level_of_array", mg(&arr, lv[0], 0));
    res.type = 1; res.h = (uint64_t)(uintptr_t)lv[0];
    TD("tex_mipmap_type_with_array_handle");
    res.type = 0; res.h = (uint64_t)(uintptr_t)mm;
    TD("tex_array_type_with_mipmap_handle");
    ANS("array_destroy_level", ad(lv[3]));
    ANS("destroy_ok", md(mm));
    ANS("get_level_after_destroy", mg(&arr, mm, 0));
    ANS("destroy_twice", md(mm));
    ANS("destroy_null", md(NULL));
}

int main(void) {
    setvbuf(stdout, NULL, _IOFBF, 1 << 20);
    drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaFree(0));
    int drv_version = 0;
    cudaDriverGetVersion(&drv_version);
    printf("{\"about\": \"scripts/nvidia_mipmap_probe.cu on real hardware\", \"device\": \"%s\", \"cc\": \"%d.%d\", "
           "\"driver_version\": %d, \"max_texture_1d_mipmap\": %d, \"max_texture_2d_mipmap\": [%d, %d],",
           prop.name, prop.major, prop.minor, drv_version, prop.maxTexture1DMipmap, prop.maxTexture2DMipmap[0],
           prop.maxTexture2DMipmap[1]);
    /* textures: a sweep texture with constant levels, then random ones */
    Tex tex[8];
    memset(tex, 0, sizeof tex);
    tex[0] = mk(0, K_2D, 0, 64, 16, 0, 0, 7, 0);
    tex[1] = mk(1, K_2D, 0, 16, 12, 0, 0, 5, 0);
    tex[2] = mk(2, K_2D, 1, 16, 12, 0, 0, 5, 0);
    tex[3] = mk(3, K_1D, 0, 32, 0, 0, 0, 6, 0);
    tex[4] = mk(4, K_3D, 0, 8, 8, 4, 0, 4, 0);
    tex[5] = mk(5, K_A2D, 0, 8, 8, 0, 3, 4, cudaArrayLayered);
    tex[6] = mk(6, K_CUBE, 1, 8, 8, 0, 6, 4, cudaArrayCubemap);
    tex[7] = mk(7, K_A1D, 0, 16, 0, 0, 3, 5, cudaArrayLayered);
    for (int i = 0; i < 8; i++) make_tex(&tex[i], i == 0);
    printf("\n \"textures\": {");
    ncase = 0;
    for (int i = 0; i < 8; i++) print_tex(&tex[i]);
    printf("},\n \"queries\": {");
    ncase = 0;
    static const char *QN[] = {"sweep_2d", "2d_f32", "2d_u8", "1d", "3d", "a2d", "cube", "a1d"};
    for (int i = 0; i < 8; i++) queries(QN[i], &tex[i], NULL);
    {
        cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
        cudaArray_t a;
        CK(cudaMallocArray(&a, &cd, 16, 12));
        queries("plain_array", NULL, a);
        CK(cudaFreeArray(a));
    }
    printf("},\n \"cases\": [");
    ncase = 0;
    sweeps(&tex[0]);
    random_cases(&tex[1], 1);
    random_cases(&tex[2], 1);
    for (int i = 3; i < 8; i++) random_cases(&tex[i], 0);
    printf("\n ],");
    /* a surface writes level 2; tex.level reads it back */
    {
        Tex t = mk(8, K_2D, 0, 16, 12, 0, 0, 5, cudaArraySurfaceLoadStore);
        make_tex(&t, 0);
        cudaArray_t a;
        CK(cudaGetMipmappedArrayLevel(&a, t.mm, 2));
        cudaResourceDesc res;
        memset(&res, 0, sizeof res);
        res.resType = cudaResourceTypeArray;
        res.res.array.array = a;
        cudaSurfaceObject_t so;
        CK(cudaCreateSurfaceObject(&so, &res));
        surf_write<<<1, dim3(4, 3)>>>(so, 4, 3);
        cudaError_t le = cudaGetLastError();
        if (le == cudaSuccess) le = cudaDeviceSynchronize();
        float back[12];
        memset(back, 0, sizeof back);
        CK(cudaMemcpy2DFromArray(back, 16, a, 0, 0, 16, 3, cudaMemcpyDeviceToHost));
        int ok = le == cudaSuccess ? 1 : -(int)le;
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 4; x++) ok &= back[y * 4 + x] == (float)(y * 100 + x + 1);
        printf("\n \"surface_level2_roundtrip\": %d,", ok);
        CK(cudaDestroySurfaceObject(so));
        free_tex(&t);
    }
    for (int i = 0; i < 8; i++) free_tex(&tex[i]);
    fflush(stdout);
    signal(SIGSEGV, segv);
    printf("\n \"driver\": {");
    driver_answers();
    printf("\n }\n}\n");
    return 0;
}
