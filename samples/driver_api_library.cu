// nvcc-flags: -lcuda
// Driver API, the newer way: cuLibraryLoadData on PTX text, cuLibraryGetKernel/GetGlobal,
// cuKernelGetFunction/GetAttribute, cuLaunchKernelEx with a launch configuration, cuLinkCreate/
// AddData/Complete turning PTX into an image that cuModuleLoadData accepts, events on a stream,
// async copies from cuMemAllocHost memory, cuLaunchHostFunc, cuOccupancy and cuMemGetInfo.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>

static int g_failures = 0;

#define CU(call)                                                                             \
    do {                                                                                     \
        CUresult r_ = (call);                                                                \
        if (r_ != CUDA_SUCCESS) {                                                            \
            const char *name_ = nullptr;                                                     \
            cuGetErrorName(r_, &name_);                                                      \
            printf("error: %s returned %s (%d)\n", #call, name_ ? name_ : "?", (int)r_);    \
            printf("FAIL\n");                                                                \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static void expect(bool ok, const char *msg) {
    if (!ok) { printf("check failed: %s\n", msg); g_failures++; }
}

static const char *kPtx = R"PTX(
.version 6.0
.target sm_50
.address_size 64

.visible .global .align 4 .f32 bias = 0f3F000000;

// out[i] = in[i] * in[i] + bias  (bias = 0.5 initially)
.visible .entry square_bias(
    .param .u64 sb_out,
    .param .u64 sb_in,
    .param .u32 sb_n
)
{
    .reg .pred %p<2>;
    .reg .f32 %f<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [sb_out];
    ld.param.u64 %rd2, [sb_in];
    ld.param.u32 %r1, [sb_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra SB_DONE;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    add.s64 %rd5, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    ld.global.f32 %f2, [bias];
    fma.rn.f32 %f3, %f1, %f1, %f2;
    st.global.f32 [%rd5], %f3;
SB_DONE:
    ret;
}

// a[i] = a[i] + b[i] for 32-bit ints
.visible .entry add_int(
    .param .u64 ai_a,
    .param .u64 ai_b,
    .param .u32 ai_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<9>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [ai_a];
    ld.param.u64 %rd2, [ai_b];
    ld.param.u32 %r1, [ai_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra AI_DONE;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.u32 %r6, [%rd4];
    ld.global.u32 %r7, [%rd5];
    add.s32 %r8, %r6, %r7;
    st.global.u32 [%rd4], %r8;
AI_DONE:
    ret;
}
)PTX";

static void CUDA_CB host_mark(void *arg) { *(volatile int *)arg = 1; }

int main() {
    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));

    // --- library API ---
    CUlibrary lib;
    CU(cuLibraryLoadData(&lib, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    unsigned kcount = 0;
    CU(cuLibraryGetKernelCount(&kcount, lib));
    expect(kcount == 2, "library holds two kernels");
    CUkernel ksq;
    CU(cuLibraryGetKernel(&ksq, lib, "square_bias"));
    CUfunction fsq;
    CU(cuKernelGetFunction(&fsq, ksq));
    int maxt = 0;
    CU(cuKernelGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ksq, dev));
    expect(maxt > 0 && maxt <= 1024, "kernel max threads attribute");
    const char *kname = nullptr;
    CU(cuFuncGetName(&kname, fsq));
    expect(kname && strcmp(kname, "square_bias") == 0, "cuFuncGetName");
    CUdeviceptr dbias;
    size_t bias_size = 0;
    CU(cuLibraryGetGlobal(&dbias, &bias_size, lib, "bias"));
    expect(bias_size == 4, "bias global size");
    float bias = 0;
    CU(cuMemcpyDtoH(&bias, dbias, 4));
    expect(bias == 0.5f, "bias initial value");
    bias = 2.0f;
    CU(cuMemcpyHtoD(dbias, &bias, 4));

    const unsigned n = 1 << 16;
    float *h_in, *h_out;
    CU(cuMemAllocHost((void **)&h_in, n * sizeof(float)));
    CU(cuMemAllocHost((void **)&h_out, n * sizeof(float)));
    for (unsigned i = 0; i < n; i++) { h_in[i] = (float)((int)(i * 7919u % 2001u) - 1000) / 8.0f; h_out[i] = -1.0f; }
    CUdeviceptr din, dout;
    CU(cuMemAlloc(&din, n * sizeof(float)));
    CU(cuMemAlloc(&dout, n * sizeof(float)));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUevent e0, e1;
    CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CU(cuEventRecord(e0, st));
    CU(cuMemcpyHtoDAsync(din, h_in, n * sizeof(float), st));
    CUlaunchConfig cfg = {};
    cfg.gridDimX = n / 256; cfg.gridDimY = 1; cfg.gridDimZ = 1;
    cfg.blockDimX = 256; cfg.blockDimY = 1; cfg.blockDimZ = 1;
    cfg.sharedMemBytes = 0;
    cfg.hStream = st;
    CUlaunchAttribute la[1];
    la[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    la[0].value.priority = 0;
    cfg.attrs = la;
    cfg.numAttrs = 1;
    unsigned nn = n;
    void *params[] = {&dout, &din, &nn};
    CU(cuLaunchKernelEx(&cfg, fsq, params, nullptr));
    CU(cuMemcpyDtoHAsync(h_out, dout, n * sizeof(float), st));
    volatile int marked = 0;
    CU(cuLaunchHostFunc(st, host_mark, (void *)&marked));
    CU(cuEventRecord(e1, st));
    CU(cuEventSynchronize(e1));
    CU(cuStreamSynchronize(st));
    float ms = -1;
    CU(cuEventElapsedTime(&ms, e0, e1));
    expect(ms >= 0, "elapsed time");
    expect(marked == 1, "host function ran");
    for (unsigned i = 0; i < n; i++) {
        float want = h_in[i] * h_in[i] + 2.0f;  // exact: eighths squared stay within float precision
        if (h_out[i] != want) { if (g_failures < 10) printf("square_bias[%u] = %g want %g\n", i, h_out[i], want); g_failures++; }
    }

    // --- linker: PTX in, loadable image out ---
    CUlinkState link;
    char err_log[2048] = {0};
    CUjit_option lopts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *lvals[] = {err_log, (void *)(uintptr_t)sizeof(err_log)};
    CU(cuLinkCreate(2, lopts, lvals, &link));
    CU(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)kPtx, strlen(kPtx) + 1, "kernels.ptx", 0, nullptr, nullptr));
    void *image = nullptr;
    size_t image_size = 0;
    CU(cuLinkComplete(link, &image, &image_size));
    expect(image != nullptr && image_size > 0, "linker produced an image");
    CUmodule mod;
    CU(cuModuleLoadData(&mod, image));  // must happen before cuLinkDestroy frees the image
    CU(cuLinkDestroy(link));
    CUfunction fadd;
    CU(cuModuleGetFunction(&fadd, mod, "add_int"));
    int num_blocks = 0;
    CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&num_blocks, fadd, 256, 0));
    expect(num_blocks >= 1, "occupancy of add_int");
    int *a = new int[n], *b = new int[n], *got = new int[n];
    for (unsigned i = 0; i < n; i++) { a[i] = (int)(i * 2654435761u); b[i] = (int)(i ^ 0xABCDEF); }
    CUdeviceptr da, db;
    CU(cuMemAlloc(&da, n * 4));
    CU(cuMemAlloc(&db, n * 4));
    CU(cuMemcpyHtoD(da, a, n * 4));
    CU(cuMemcpyHtoD(db, b, n * 4));
    void *aparams[] = {&da, &db, &nn};
    CU(cuLaunchKernel(fadd, n / 256, 1, 1, 256, 1, 1, 0, nullptr, aparams, nullptr));
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(got, da, n * 4));
    for (unsigned i = 0; i < n; i++) {
        int want = (int)((unsigned)a[i] + (unsigned)b[i]);
        if (got[i] != want) { if (g_failures < 10) printf("add_int[%u] = %d want %d\n", i, got[i], want); g_failures++; }
    }

    size_t free_b = 0, total_b = 0;
    CU(cuMemGetInfo(&free_b, &total_b));
    expect(free_b > 0 && free_b <= total_b, "cuMemGetInfo");

    CU(cuEventDestroy(e0)); CU(cuEventDestroy(e1)); CU(cuStreamDestroy(st));
    CU(cuMemFree(din)); CU(cuMemFree(dout)); CU(cuMemFree(da)); CU(cuMemFree(db));
    CU(cuMemFreeHost(h_in)); CU(cuMemFreeHost(h_out));
    CU(cuModuleUnload(mod));
    CU(cuLibraryUnload(lib));
    CU(cuDevicePrimaryCtxRelease(dev));
    if (g_failures == 0) { printf("PASS\n"); return 0; }
    printf("%d check(s) failed\nFAIL\n", g_failures);
    return 1;
}
