/* PyCUDA's legacy launch calls (cuFuncSetBlockShape, cuParamSet*, cuLaunch/cuLaunchGrid/Async), context usage
 * counts (cuCtxAttach/cuCtxDetach) and green contexts, through the real shared object. argv: seed, width,
 * height. Every element is checked; a failure prints "FAIL line: what" and the exit code is the count. */
#include <cuda.h>
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   /* the legacy calls are what this tests */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#undef cuCtxCreate
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
#define cuCtxCreate cuCtxCreate_v2

static int failures;
#define EXPECT(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %d: ", __LINE__); printf(__VA_ARGS__); \
                                              printf("\n"); } } while (0)
#define IS(code, call) do { int r_ = (int)(call); EXPECT(r_ == (code), "%s -> %d, want %d", #call, r_, code); } while (0)
#define OK(call) IS(0, call)

/* y[row * width + col] = col * f + v + row, with width = gridDim.x * blockDim.x */
static const char *PTX =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry k(.param .u64 p, .param .u32 v, .param .f32 f) {\n"
    ".reg .u64 %rd<4>; .reg .u32 %r<10>; .reg .f32 %f<4>;\n"
    "ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [v]; ld.param.f32 %f1, [f];\n"
    "mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mad.lo.u32 %r5, %r3, %r4, %r2;\n"
    "mov.u32 %r6, %nctaid.x; mul.lo.u32 %r7, %r6, %r4; mov.u32 %r8, %ctaid.y; mad.lo.u32 %r9, %r8, %r7, %r5;\n"
    "cvt.rn.f32.u32 %f2, %r5; mul.rn.f32 %f2, %f2, %f1; add.u32 %r8, %r8, %r1; cvt.rn.f32.u32 %f3, %r8;\n"
    "add.rn.f32 %f2, %f2, %f3;\n"
    "cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r9, 4; add.u64 %rd2, %rd2, %rd3; st.global.f32 [%rd2], %f2;\n"
    "ret; }\n";

static void check(CUdeviceptr d, int width, int height, unsigned v, float f, const char *what) {
    int n = width * height;
    float *h = malloc(n * sizeof *h);
    OK(cuMemcpyDtoH(h, d, n * sizeof *h));
    int bad = 0;
    for (int row = 0; row < height; row++)
        for (int col = 0; col < width; col++) {
            volatile float a = (float)col * f;
            if (h[row * width + col] != a + (float)(v + row))
                bad++;
        }
    EXPECT(bad == 0, "%s: %d of %d elements wrong", what, bad, n);
    free(h);
}

static void poison(CUdeviceptr d, int n) { OK(cuMemsetD32(d, 0x7fc00001u, n)); }

int main(int argc, char **argv) {
    srand(argc > 1 ? atoi(argv[1]) : 1);
    int gw = argc > 2 ? atoi(argv[2]) : 3, gh = argc > 3 ? atoi(argv[3]) : 2, bx = 32;
    unsigned v = (unsigned)(rand() % 1000);
    float f = (float)rand() / RAND_MAX * 4.0f - 2.0f;
    CUcontext ctx, cur, att;
    CUmodule mod;
    CUfunction k;
    OK(cuInit(0));
    OK(cuCtxCreate(&ctx, 0, 0));
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&k, mod, "k"));
    int n = gw * bx * gh;
    CUdeviceptr d;
    OK(cuMemAlloc(&d, n * 4));

    /* --- legacy launch --- */
    poison(d, n);
    OK(cuParamSetSize(k, 16));
    OK(cuParamSetv(k, 0, &d, sizeof d));
    OK(cuParamSeti(k, 8, v));
    OK(cuParamSetf(k, 12, f));
    OK(cuFuncSetBlockShape(k, bx, 1, 1));
    OK(cuFuncSetSharedSize(k, 0));
    OK(cuLaunchGrid(k, gw, gh));
    OK(cuCtxSynchronize());
    check(d, gw * bx, gh, v, f, "cuLaunchGrid");
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    poison(d, n);
    unsigned v2 = v + 7;
    OK(cuParamSeti(k, 8, v2));
    OK(cuLaunchGridAsync(k, gw, gh, s));
    OK(cuStreamSynchronize(s));
    check(d, gw * bx, gh, v2, f, "cuLaunchGridAsync");
    poison(d, n);
    OK(cuLaunch(k));                       /* one block */
    OK(cuCtxSynchronize());
    check(d, bx, 1, v2, f, "cuLaunch");
    IS(CUDA_ERROR_INVALID_VALUE, cuFuncSetBlockShape(k, 0, 1, 1));
    IS(CUDA_ERROR_INVALID_VALUE, cuParamSetv(k, 12, &d, 8));     /* past the 16 bytes set */
    IS(CUDA_ERROR_INVALID_VALUE, cuParamSeti(k, -4, 1));
    IS(CUDA_ERROR_INVALID_HANDLE, cuFuncSetBlockShape(NULL, 1, 1, 1));
    IS(CUDA_ERROR_INVALID_HANDLE, cuLaunchGrid(NULL, 1, 1));
    IS(CUDA_ERROR_INVALID_VALUE, cuLaunchGrid(k, 0, 1));
    OK(cuFuncSetBlockShape(k, 4096, 1, 1));
    IS(CUDA_ERROR_INVALID_VALUE, cuLaunchGrid(k, 1, 1));          /* more threads than a block holds */
    OK(cuFuncSetBlockShape(k, bx, 1, 1));

    /* --- green contexts --- */
    int sms = 0;
    OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    CUgreenCtx g = (CUgreenCtx)1;
    OK(cuStreamGetGreenCtx(s, &g));
    EXPECT(g == NULL, "an ordinary stream has no green context");
    g = (CUgreenCtx)1;
    OK(cuStreamGetGreenCtx(NULL, &g));
    EXPECT(g == NULL, "the NULL stream of an ordinary context has no green context");
    CUcontext c2 = NULL;
    OK(cuStreamGetCtx_v2(s, &c2, &g));
    EXPECT(c2 == ctx && g == NULL, "cuStreamGetCtx_v2 of an ordinary stream");
    CUdevResource all, groups[64], rest;
    memset(&all, 0xee, sizeof all);
    OK(cuDeviceGetDevResource(0, &all, CU_DEV_RESOURCE_TYPE_SM));
    EXPECT(all.type == CU_DEV_RESOURCE_TYPE_SM && (int)all.sm.smCount == sms, "device resource %u SMs, want %d",
           all.sm.smCount, sms);
    IS(CUDA_ERROR_INVALID_RESOURCE_TYPE, cuDeviceGetDevResource(0, &rest, CU_DEV_RESOURCE_TYPE_INVALID));
    IS(CUDA_ERROR_INVALID_VALUE, cuDeviceGetDevResource(0, NULL, CU_DEV_RESOURCE_TYPE_SM));
    IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetDevResource(99, &rest, CU_DEV_RESOURCE_TYPE_SM));
    unsigned min = 1 + (unsigned)rand() % (unsigned)sms, nb = 0;
    OK(cuDevSmResourceSplitByCount(NULL, &nb, &all, NULL, 0, min));
    EXPECT(nb == (unsigned)sms / min, "simulated split into %u groups of %u SMs of %d", nb, min, sms);
    unsigned made = nb;
    OK(cuDevSmResourceSplitByCount(groups, &made, &all, &rest, 0, min));
    unsigned total = rest.sm.smCount;
    for (unsigned i = 0; i < made; i++) {
        EXPECT(groups[i].sm.smCount >= min, "group %u has %u SMs < %u", i, groups[i].sm.smCount, min);
        total += groups[i].sm.smCount;
    }
    EXPECT(made == nb && total == (unsigned)sms, "split: %u groups, %u SMs in all of %d", made, total, sms);
    IS(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, cuDevSmResourceSplitByCount(NULL, &nb, &all, NULL, 0, sms + 1));
    IS(CUDA_ERROR_INVALID_VALUE, cuDevSmResourceSplitByCount(groups, NULL, &all, NULL, 0, 1));
    CUdevResourceDesc desc;
    IS(CUDA_ERROR_INVALID_VALUE, cuDevResourceGenerateDesc(&desc, groups, 0));
    OK(cuDevResourceGenerateDesc(&desc, groups, 1));
    CUgreenCtx gc;
    IS(CUDA_ERROR_INVALID_VALUE, cuGreenCtxCreate(&gc, desc, 0, 0));   /* CU_GREEN_CTX_DEFAULT_STREAM is required */
    OK(cuGreenCtxCreate(&gc, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
    CUdevResource gres;
    OK(cuGreenCtxGetDevResource(gc, &gres, CU_DEV_RESOURCE_TYPE_SM));
    EXPECT(gres.sm.smCount == groups[0].sm.smCount, "green context has %u SMs, want %u", gres.sm.smCount,
           groups[0].sm.smCount);
    CUcontext gctx = NULL;
    OK(cuCtxFromGreenCtx(&gctx, gc));
    EXPECT(gctx != NULL && gctx != ctx, "cuCtxFromGreenCtx gives a context of its own");
    OK(cuCtxGetDevResource(gctx, &gres, CU_DEV_RESOURCE_TYPE_SM));
    EXPECT(gres.sm.smCount == groups[0].sm.smCount, "cuCtxGetDevResource of the green context");
    CUstream gs;
    IS(CUDA_ERROR_INVALID_VALUE, cuGreenCtxStreamCreate(&gs, gc, 0, 0));
    OK(cuGreenCtxStreamCreate(&gs, gc, CU_STREAM_NON_BLOCKING, 0));
    g = NULL;
    OK(cuStreamGetGreenCtx(gs, &g));
    EXPECT(g == gc, "a green stream's green context");
    CUcontext primary;
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    c2 = NULL;
    g = NULL;
    OK(cuStreamGetCtx_v2(gs, &c2, &g));
    EXPECT(c2 == primary && g == gc, "cuStreamGetCtx_v2 of a green stream: the primary context and the green one");
    OK(cuCtxPushCurrent(gctx));             /* the green context works as a context */
    g = NULL;
    OK(cuStreamGetGreenCtx(NULL, &g));
    EXPECT(g == gc, "the NULL stream under a current green context");
    CUmodule gmod;
    CUfunction gk;
    CUdeviceptr gd;
    OK(cuModuleLoadData(&gmod, PTX));
    OK(cuModuleGetFunction(&gk, gmod, "k"));
    OK(cuMemAlloc(&gd, n * 4));
    poison(gd, n);
    void *args[] = {&gd, &v, &f};
    OK(cuLaunchKernel(gk, gw, gh, 1, bx, 1, 1, 0, gs, args, NULL));
    CUevent ev;
    OK(cuEventCreate(&ev, 0));
    OK(cuGreenCtxRecordEvent(gc, ev));
    OK(cuEventSynchronize(ev));
    check(gd, gw * bx, gh, v, f, "kernel on a green stream");
    OK(cuGreenCtxWaitEvent(gc, ev));
    IS(CUDA_ERROR_INVALID_CONTEXT, cuGreenCtxRecordEvent(NULL, ev));
    OK(cuMemFree(gd));
    OK(cuStreamDestroy(gs));
    OK(cuCtxPopCurrent(&cur));
    EXPECT(cur == gctx, "popped the green context");
    OK(cuGreenCtxDestroy(gc));
    IS(CUDA_ERROR_INVALID_CONTEXT, cuGreenCtxDestroy(NULL));
    IS(CUDA_ERROR_INVALID_CONTEXT, cuGreenCtxDestroy(gc));               /* already destroyed */
    IS(CUDA_ERROR_INVALID_CONTEXT, cuCtxFromGreenCtx(&gctx, NULL));
    OK(cuDevicePrimaryCtxRelease(0));

    /* --- usage counts: attach twice, detach three times (the third destroys the context) --- */
    IS(CUDA_ERROR_INVALID_VALUE, cuCtxAttach(&att, 1));
    IS(CUDA_ERROR_INVALID_VALUE, cuCtxAttach(NULL, 0));
    OK(cuCtxAttach(&att, 0));
    EXPECT(att == ctx, "cuCtxAttach gives the current context");
    OK(cuCtxAttach(&att, 0));
    OK(cuCtxDetach(ctx));
    OK(cuCtxDetach(ctx));
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == ctx, "the context survives detaches that match attaches");
    OK(cuMemFree(d));
    OK(cuCtxDetach(ctx));
    EXPECT(cuCtxDetach(ctx) != CUDA_SUCCESS, "a destroyed context cannot be detached");
    IS(CUDA_ERROR_INVALID_VALUE, cuCtxDetach(NULL));
    printf("%s %d\n", failures ? "failed" : "ok", failures);
    return failures;
}
