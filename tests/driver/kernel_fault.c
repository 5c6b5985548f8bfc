/* A kernel dereferencing wild pointers, through the real libcuda.so.1 from C, as a CUDA user sees it:
 * cuCtxSynchronize returns CUDA_ERROR_ILLEGAL_ADDRESS, the error is sticky for the context, and the process
 * exits normally. (NVIDIA's driver refuses even a reset primary context afterwards: cuDevicePrimaryCtxReset
 * succeeds, the next cuDevicePrimaryCtxRetain returns 700; tests/driver/error_answers.c checks ours.)
 * argv[1]: "store" (st to 0x10), "hole" (a load from an unmapped page), "block" (one block of 256
 * faults, far past its buffer), "stream" (the fault on a created stream, seen by cuStreamSynchronize).
 * Prints one line per failed check and "ALL PASSED"; exits 1 on any failure. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int failures = 0;

#define EXPECT(call, want)                                                                  \
    do {                                                                                    \
        CUresult r_ = (call);                                                               \
        if (r_ != (want)) {                                                                 \
            const char *n_ = "?";                                                           \
            cuGetErrorName(r_, &n_);                                                        \
            printf("FAIL %s:%d: %s -> %s (%d), want %d\n", __FILE__, __LINE__, #call, n_,   \
                   (int)r_, (int)(want));                                                   \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)
#define OK(call) EXPECT(call, CUDA_SUCCESS)
#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                          \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

/* fill(out, n, bad_block, bad): out[i] = 3*i + 1 for i < n; thread 7 of block bad_block increments *bad
   (a load, then a store). */
static const char *PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry fill(.param .u64 out, .param .u32 n, .param .u32 bad_block, .param .u64 bad)\n{\n"
    "  .reg .pred %p<4>;\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [out];\n  ld.param.u32 %r1, [n];\n  ld.param.u32 %r7, [bad_block];\n"
    "  ld.param.u64 %rd2, [bad];\n"
    "  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.u32 %p1, %r5, %r1;\n  @%p1 bra DONE;\n"
    "  mad.lo.s32 %r6, %r5, 3, 1;\n  mul.wide.u32 %rd3, %r5, 4;\n  add.s64 %rd4, %rd1, %rd3;\n"
    "  st.global.u32 [%rd4], %r6;\n"
    "  setp.eq.u32 %p2, %r2, %r7;\n  setp.eq.u32 %p3, %r4, 7;\n  and.pred %p2, %p2, %p3;\n"
    "  @!%p2 bra DONE;\n  ld.global.u32 %r6, [%rd2];\n  add.s32 %r6, %r6, 1;\n  st.global.u32 [%rd2], %r6;\n"
    "DONE:\n  ret;\n}\n";

static CUmodule mod;
static CUfunction fill;

static void load(void) {
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&fill, mod, "fill"));
}

static CUresult launch(CUstream s, unsigned blocks, CUdeviceptr out, unsigned n, unsigned bad_block,
                       uint64_t bad) {
    void *args[] = {&out, &n, &bad_block, &bad};
    return cuLaunchKernel(fill, blocks, 1, 1, 64, 1, 1, 0, s, args, NULL);
}

/* A correct launch: every element checked, the poisoned tail untouched. */
static void good_run(void) {
    enum { N = 1000 };
    static uint32_t h[N + 16];
    CUdeviceptr d;
    OK(cuMemAlloc(&d, sizeof h));
    OK(cuMemsetD32(d, 0xDEADBEEF, N + 16));
    OK(launch(0, (N + 63) / 64, d, N, 0xFFFFFFFFu, 0));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(h, d, sizeof h));
    int bad = 0;
    for (int i = 0; i < N; i++) bad += h[i] != (uint32_t)(3 * i + 1);
    for (int i = N; i < N + 16; i++) bad += h[i] != 0xDEADBEEFu;
    CHECK(bad == 0);
    OK(cuMemFree(d));
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "store";
    CUdevice dev;
    CUcontext ctx;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    load();
    good_run();

    /* a page that is certainly not mapped: the middle one of three, its neighbours kept */
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *three = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(three != MAP_FAILED);
    CHECK(munmap(three + page, page) == 0);

    CUdeviceptr d;
    OK(cuMemAlloc(&d, 256 * 64 * 4));
    CUstream s = 0;
    if (!strcmp(mode, "stream")) OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUresult launched;
    if (!strcmp(mode, "hole"))
        launched = launch(s, 1, d, 64, 0, (uint64_t)(uintptr_t)(three + page + 40));
    else if (!strcmp(mode, "block"))
        launched = launch(s, 256, d, 256 * 64, 201, (uint64_t)d ^ (1ull << 40));   /* canonical, unmapped */
    else
        launched = launch(s, 1, d, 64, 0, 0x10);
    /* the launch itself may succeed or (if it ran at once) already see the fault, as on a GPU */
    CHECK(launched == CUDA_SUCCESS || launched == CUDA_ERROR_ILLEGAL_ADDRESS);
    if (s) EXPECT(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* sticky: the context is unusable from now on */
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    uint32_t h[4];
    EXPECT(cuMemcpyDtoH(h, d, sizeof h), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(launch(0, 1, d, 64, 0xFFFFFFFFu, 0), CUDA_ERROR_ILLEGAL_ADDRESS);

    CUdeviceptr d2;
    EXPECT(cuMemAlloc(&d2, 64), CUDA_ERROR_ILLEGAL_ADDRESS);
    OK(cuDevicePrimaryCtxRelease(dev));
    munmap(three, page);
    munmap(three + 2 * page, page);
    if (failures) {
        printf("%d FAILED\n", failures);
        return 1;
    }
    printf("ALL PASSED\n");
    return 0;
}
