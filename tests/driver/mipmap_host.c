/* A mipmapped array through the Driver API, as a C program linked -lcuda: levels made, described, copied to
 * and from (cuMemcpy3D, cuMemcpy2D), written by a kernel through a surface object over a level, and sampled
 * by PTX kernels through a texture object over the whole chain (tex.level, tex.grad, tex, txq.level,
 * txq.num_mipmap_levels); every answer checked against the host's copy of the texels. argv[1]: a seed.
 * Prints one line per failed check and "ok <failures>" last. */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    printf("%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)r_); exit(1); } } while (0)
#define EXPECT(c, ...) do { if (!(c)) { failures++; if (failures < 20) { printf(__VA_ARGS__); printf("\n"); } } } \
    while (0)

static uint32_t seed;
static uint32_t rnd(void) { seed = seed * 1664525u + 1013904223u; return seed >> 8; }

enum { W = 16, H = 12, LEVELS = 5, N = 256 };

static const char *PTX =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    /* out[i] = tex.level (mode 0) / tex.grad with dPdx = (g, 0), dPdy = (0, g) (1) / tex (2) at (u[i], v[i]) */
    ".visible .entry sample(.param .u64 t, .param .u64 u, .param .u64 v, .param .u64 a, .param .u64 o,\n"
    "    .param .u32 n, .param .u32 mode)\n{\n"
    "  .reg .u64 %rd<12>;\n  .reg .b32 %r<8>;\n  .reg .f32 %f<12>;\n  .reg .pred %p<4>;\n"
    "  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n  mad.lo.u32 %r1, %r2, %r3, %r1;\n"
    "  ld.param.u32 %r4, [n];\n  setp.ge.u32 %p1, %r1, %r4;\n  @%p1 bra done;\n"
    "  ld.param.u64 %rd1, [t];\n  mul.wide.u32 %rd2, %r1, 4;\n"
    "  ld.param.u64 %rd3, [u];\n  add.u64 %rd3, %rd3, %rd2;\n  ld.global.f32 %f1, [%rd3];\n"
    "  ld.param.u64 %rd4, [v];\n  add.u64 %rd4, %rd4, %rd2;\n  ld.global.f32 %f2, [%rd4];\n"
    "  ld.param.u64 %rd5, [a];\n  add.u64 %rd5, %rd5, %rd2;\n  ld.global.f32 %f3, [%rd5];\n"
    "  ld.param.u64 %rd6, [o];\n  add.u64 %rd6, %rd6, %rd2;\n  ld.param.u32 %r5, [mode];\n"
    "  mov.f32 %f9, 0f00000000;\n"
    "  setp.eq.u32 %p2, %r5, 0;\n  setp.eq.u32 %p3, %r5, 1;\n"
    "  @%p2 tex.level.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}], %f3;\n"
    "  @%p3 tex.grad.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}], {%f3, %f9}, {%f9, %f3};\n"
    "  setp.eq.u32 %p2, %r5, 2;\n"
    "  @%p2 tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];\n"
    "  st.global.f32 [%rd6], %f4;\n"
    "done:\n  ret;\n}\n"
    /* out: width, height of levels 0..6 (txq.level) */
    ".visible .entry query(.param .u64 t, .param .u64 o)\n{\n"
    "  .reg .u64 %rd<4>;\n  .reg .b32 %r<8>;\n  .reg .pred %p;\n"
    "  ld.param.u64 %rd1, [t];\n  ld.param.u64 %rd2, [o];\n  mov.u32 %r1, 0;\n"
    "loop:\n  txq.level.width.b32 %r2, [%rd1], %r1;\n  txq.level.height.b32 %r3, [%rd1], %r1;\n"
    "  st.global.v2.b32 [%rd2], {%r2, %r3};\n  add.u64 %rd2, %rd2, 8;\n  add.u32 %r1, %r1, 1;\n"
    "  setp.lt.u32 %p, %r1, 7;\n  @%p bra loop;\n  ret;\n}\n"
    /* a surface over one level: texel (x, y) = 1000 * y + x */
    ".visible .entry fill(.param .u64 s, .param .u32 w, .param .u32 h)\n{\n"
    "  .reg .b32 %r<8>;\n  .reg .u64 %rd<2>;\n  .reg .f32 %f1;\n  .reg .pred %p;\n"
    "  ld.param.u64 %rd1, [s];\n  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %tid.y;\n"
    "  ld.param.u32 %r3, [w];\n  ld.param.u32 %r4, [h];\n"
    "  setp.ge.u32 %p, %r1, %r3;\n  @%p bra out;\n  setp.ge.u32 %p, %r2, %r4;\n  @%p bra out;\n"
    "  mad.lo.u32 %r5, %r2, 1000, %r1;\n  cvt.rn.f32.u32 %f1, %r5;\n  shl.b32 %r6, %r1, 2;\n"
    "  sust.b.2d.b32.trap [%rd1, {%r6, %r2}], {%f1};\nout:\n  ret;\n}\n";

/* a module of its own: NVIDIA's driver loads it but finds no kernel in it (CUDA_ERROR_NOT_FOUND on an H100,
   CUDA 13), so only a driver that runs txq.num_mipmap_levels is held to its answer */
static const char *PTX_LEVELS =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry levels(.param .u64 t, .param .u64 o)\n{\n  .reg .u64 %rd<4>;\n  .reg .b32 %r<2>;\n"
    "  ld.param.u64 %rd1, [t];\n  ld.param.u64 %rd2, [o];\n  txq.num_mipmap_levels.b32 %r1, [%rd1];\n"
    "  st.global.b32 [%rd2], %r1;\n  ret;\n}\n";

static float texels[LEVELS][W * H];
static int lw[LEVELS], lh[LEVELS];

static float at(int l, float u, float v) {     /* a level's texel under normalised (u, v), clamped */
    int x = (int)floorf(u * lw[l]), y = (int)floorf(v * lh[l]);
    x = x < 0 ? 0 : x >= lw[l] ? lw[l] - 1 : x;
    y = y < 0 ? 0 : y >= lh[l] ? lh[l] - 1 : y;
    return texels[l][y * lw[l] + x];
}

static CUtexObject texture(CUmipmappedArray mm, int mip_linear, float bias, float lo, float hi) {
    CUDA_RESOURCE_DESC rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    rd.res.mipmap.hMipmappedArray = mm;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
    td.filterMode = CU_TR_FILTER_MODE_POINT;
    td.mipmapFilterMode = mip_linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
    td.flags = CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
    td.mipmapLevelBias = bias;
    td.minMipmapLevelClamp = lo;
    td.maxMipmapLevelClamp = hi;
    CUtexObject t;
    CHECK(cuTexObjectCreate(&t, &rd, &td, NULL));
    CUDA_RESOURCE_DESC back;
    CHECK(cuTexObjectGetResourceDesc(&back, t));
    EXPECT(back.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY && back.res.mipmap.hMipmappedArray == mm,
           "cuTexObjectGetResourceDesc gives the mipmapped array back");
    return t;
}

int main(int argc, char **argv) {
    seed = argc > 1 ? (uint32_t)atoi(argv[1]) : 1;
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CUDA_ARRAY3D_DESCRIPTOR ad;
    memset(&ad, 0, sizeof ad);
    ad.Width = W; ad.Height = H; ad.Format = CU_AD_FORMAT_FLOAT; ad.NumChannels = 1;
    ad.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    CUmipmappedArray mm;
    CHECK(cuMipmappedArrayCreate(&mm, &ad, LEVELS));
    CUarray level[LEVELS];
    for (int l = 0; l < LEVELS; l++) {
        lw[l] = W >> l > 0 ? W >> l : 1;
        lh[l] = H >> l > 0 ? H >> l : 1;
        CHECK(cuMipmappedArrayGetLevel(&level[l], mm, l));
        CUDA_ARRAY3D_DESCRIPTOR got;
        CHECK(cuArray3DGetDescriptor(&got, level[l]));
        EXPECT(got.Width == (size_t)lw[l] && got.Height == (size_t)lh[l] && got.Depth == 0 &&
               got.Format == CU_AD_FORMAT_FLOAT && got.NumChannels == 1 && got.Flags == CUDA_ARRAY3D_SURFACE_LDST,
               "level %d: %zux%zux%zu flags %u", l, got.Width, got.Height, got.Depth, got.Flags);
        CUarray again;
        CHECK(cuMipmappedArrayGetLevel(&again, mm, l));
        EXPECT(again == level[l], "a level is the same array each time");
        /* fresh integers (exact in every blend of two) in, by cuMemcpy3D; back by cuMemcpy2D */
        for (int i = 0; i < lw[l] * lh[l]; i++) texels[l][i] = (float)(rnd() % 4096);
        CUDA_MEMCPY3D c;
        memset(&c, 0, sizeof c);
        c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = texels[l]; c.srcPitch = lw[l] * 4; c.srcHeight = lh[l];
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY; c.dstArray = level[l];
        c.WidthInBytes = lw[l] * 4; c.Height = lh[l]; c.Depth = 1;
        CHECK(cuMemcpy3D(&c));
        float back[W * H];
        memset(back, 0xFF, sizeof back);
        CUDA_MEMCPY2D c2;
        memset(&c2, 0, sizeof c2);
        c2.srcMemoryType = CU_MEMORYTYPE_ARRAY; c2.srcArray = level[l];
        c2.dstMemoryType = CU_MEMORYTYPE_HOST; c2.dstHost = back; c2.dstPitch = lw[l] * 4;
        c2.WidthInBytes = lw[l] * 4; c2.Height = lh[l];
        CHECK(cuMemcpy2D(&c2));
        EXPECT(!memcmp(back, texels[l], lw[l] * lh[l] * 4), "level %d round trip", l);
        c.WidthInBytes = (lw[l] + 1) * 4;
        EXPECT(cuMemcpy3D(&c) == CUDA_ERROR_INVALID_VALUE, "a copy wider than level %d", l);
    }
    CUarray none;
    EXPECT(cuMipmappedArrayGetLevel(&none, mm, LEVELS) == CUDA_ERROR_INVALID_VALUE, "level past the last");
    EXPECT(cuMipmappedArrayGetLevel(&none, (CUmipmappedArray)level[0], 0) == CUDA_ERROR_INVALID_VALUE,
           "an array where a mipmapped array belongs");
    /* numMipmapLevels is clamped to [1, the full chain], as NVIDIA's driver does */
    {
        CUmipmappedArray m2;
        CUarray top;
        CHECK(cuMipmappedArrayCreate(&m2, &ad, 0));
        EXPECT(cuMipmappedArrayGetLevel(&top, m2, 0) == CUDA_SUCCESS && cuMipmappedArrayGetLevel(&top, m2, 1)
               == CUDA_ERROR_INVALID_VALUE, "numMipmapLevels 0 makes one level");
        CHECK(cuMipmappedArrayDestroy(m2));
        CHECK(cuMipmappedArrayCreate(&m2, &ad, 40));
        EXPECT(cuMipmappedArrayGetLevel(&top, m2, LEVELS - 1) == CUDA_SUCCESS &&
               cuMipmappedArrayGetLevel(&top, m2, LEVELS) == CUDA_ERROR_INVALID_VALUE, "40 levels make the chain");
        CUDA_ARRAY3D_DESCRIPTOR got;
        CHECK(cuArray3DGetDescriptor(&got, top));
        EXPECT(got.Width == 1 && got.Height == 1, "the last level is 1x1");
        CHECK(cuMipmappedArrayDestroy(m2));
    }

    CUmodule mod, mod_levels;
    CUfunction fsample, fquery, ffill, flevels = NULL;
    CHECK(cuModuleLoadData(&mod, PTX));
    CHECK(cuModuleLoadData(&mod_levels, PTX_LEVELS));
    CUresult fr = cuModuleGetFunction(&flevels, mod_levels, "levels");
    EXPECT(fr == CUDA_SUCCESS || fr == CUDA_ERROR_NOT_FOUND, "the txq.num_mipmap_levels kernel: %d", (int)fr);
    CHECK(cuModuleGetFunction(&fsample, mod, "sample"));
    CHECK(cuModuleGetFunction(&fquery, mod, "query"));
    CHECK(cuModuleGetFunction(&ffill, mod, "fill"));

    /* a surface over level 2 */
    {
        CUDA_RESOURCE_DESC rd;
        memset(&rd, 0, sizeof rd);
        rd.resType = CU_RESOURCE_TYPE_ARRAY;
        rd.res.array.hArray = level[2];
        CUsurfObject s;
        CHECK(cuSurfObjectCreate(&s, &rd));
        unsigned w = lw[2], h = lh[2];
        void *args[] = {&s, &w, &h};
        CHECK(cuLaunchKernel(ffill, 1, 1, 1, 8, 8, 1, 0, NULL, args, NULL));
        CHECK(cuCtxSynchronize());
        float back[W * H];
        CHECK(cuMemcpyAtoH(back, level[2], 0, w * h * 4));
        for (unsigned y = 0; y < h; y++)
            for (unsigned x = 0; x < w; x++) {
                EXPECT(back[y * w + x] == (float)(1000 * y + x), "surface on level 2 at (%u, %u): %g", x, y,
                       back[y * w + x]);
                texels[2][y * w + x] = back[y * w + x];
            }
        CHECK(cuSurfObjectDestroy(s));
    }

    CUdeviceptr du, dv, da, dout, dq;
    CHECK(cuMemAlloc(&du, N * 4)); CHECK(cuMemAlloc(&dv, N * 4)); CHECK(cuMemAlloc(&da, N * 4));
    CHECK(cuMemAlloc(&dout, N * 4)); CHECK(cuMemAlloc(&dq, 64));
    float u[N], v[N], a[N], out[N], want[N];
    for (int mip_linear = 0; mip_linear < 2; mip_linear++) {
        CUtexObject t = texture(mm, mip_linear, 0.0f, 0.0f, LEVELS - 1);
        for (int mode = 0; mode < 3; mode++) {
            for (int i = 0; i < N; i++) {
                int l = (int)(rnd() % LEVELS);
                /* a texel centre of the coarser level in play: every level reads one whole texel */
                int c = mode == 2 ? 0 : (mip_linear && mode == 0 && l + 1 < LEVELS ? l + 1 : l);
                u[i] = ((float)(rnd() % lw[c]) + 0.5f) / lw[c];
                v[i] = ((float)(rnd() % lh[c]) + 0.5f) / lh[c];
                if (mode == 0) a[i] = mip_linear ? l + 0.5f : l + ((rnd() & 1) ? 0.25f : -0.25f);
                else a[i] = (float)(1 << l) / W;      /* a gradient of 2^l texels */
                int lv = mode == 2 ? 0 : l;
                want[i] = at(lv, u[i], v[i]);
                if (mip_linear && mode == 0 && l + 1 < LEVELS) want[i] = (want[i] + at(l + 1, u[i], v[i])) * 0.5f;
            }
            /* tex.grad's dPdy uses the same value: with H < W the longer gradient is dPdx */
            CHECK(cuMemcpyHtoD(du, u, N * 4)); CHECK(cuMemcpyHtoD(dv, v, N * 4)); CHECK(cuMemcpyHtoD(da, a, N * 4));
            CHECK(cuMemsetD32(dout, 0xFFFFFFFF, N));
            unsigned n = N, m = mode;
            void *args[] = {&t, &du, &dv, &da, &dout, &n, &m};
            CHECK(cuLaunchKernel(fsample, N / 64, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
            CHECK(cuMemcpyDtoH(out, dout, N * 4));
            for (int i = 0; i < N; i++)
                EXPECT(out[i] == want[i], "mode %d mip %d sample %d at (%g, %g) arg %g: %g, want %g", mode,
                       mip_linear, i, u[i], v[i], a[i], out[i], want[i]);
        }
        int q[14];
        memset(q, 0xA5, sizeof q);
        void *qa[] = {&t, &dq};
        CHECK(cuLaunchKernel(fquery, 1, 1, 1, 1, 1, 1, 0, NULL, qa, NULL));
        CHECK(cuMemcpyDtoH(q, dq, sizeof q));
        for (int l = 0; l < 7; l++) {      /* a level the chain does not have is 0 x 0 */
            int ew = l < LEVELS ? (W >> l > 0 ? W >> l : 1) : 0, eh = l < LEVELS ? (H >> l > 0 ? H >> l : 1) : 0;
            EXPECT(q[2 * l] == ew && q[2 * l + 1] == eh, "txq.level %d: %dx%d", l, q[2 * l], q[2 * l + 1]);
        }
        if (flevels) {
            int levels = -1;
            CHECK(cuLaunchKernel(flevels, 1, 1, 1, 1, 1, 1, 0, NULL, qa, NULL));
            CHECK(cuMemcpyDtoH(&levels, dq, 4));
            EXPECT(levels == LEVELS, "txq.num_mipmap_levels %d", levels);
        }
        CHECK(cuTexObjectDestroy(t));
    }
    /* NVIDIA answers success for a level given to cuArrayDestroy; the level goes with its mipmapped array */
    EXPECT(cuArrayDestroy(level[1]) == CUDA_SUCCESS, "cuArrayDestroy of a level");
    CHECK(cuMipmappedArrayDestroy(mm));
    CHECK(cuModuleUnload(mod_levels));
    CHECK(cuModuleUnload(mod));
    printf("ok %d\n", failures);
    return failures != 0;
}
