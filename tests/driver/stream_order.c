/* Stream order through the real libcuda.so.1 from a C host: kernels (the CPU backend's native launch
 * queue), host functions (its pool threads, or the synchronizing thread that takes their queue over) and
 * events across two streams, with synchronizes in between to exercise every hand-over. Every element is
 * checked; output poisoned first. Then a trapping kernel: its stream's later host function must not run
 * and every stream reports CUDA_ERROR_LAUNCH_FAILED. Prints ALL PASSED. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 300
#define LANES 64

static int failures;
#define CHECK(c) do { if (!(c)) { failures++; if (failures < 20) printf("FAIL line %d: %s\n", __LINE__, #c); } } while (0)
#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d\n", #call, r_); exit(1); } } while (0)

static const char PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    /* p[k * 64 + tid] = k, after spinning for `ns` nanoseconds (so that what comes after it in stream
       order would see the old value if it did not wait) */
    ".visible .entry setval(.param .u64 p, .param .u32 k, .param .u64 ns)\n{\n"
    "  .reg .b32 %r<4>;\n  .reg .b64 %rd<8>;\n  .reg .pred %p;\n"
    "  ld.param.u64 %rd4, [ns];\n  mov.u64 %rd5, %globaltimer;\n"
    "SPIN:\n  mov.u64 %rd6, %globaltimer;\n  sub.u64 %rd7, %rd6, %rd5;\n  setp.lt.u64 %p, %rd7, %rd4;\n"
    "  @%p bra SPIN;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [k];\n  mov.u32 %r2, %tid.x;\n"
    "  mad.lo.u32 %r3, %r1, 64, %r2;\n  mul.wide.u32 %rd2, %r3, 4;\n  add.u64 %rd3, %rd1, %rd2;\n"
    "  st.global.u32 [%rd3], %r1;\n  ret;\n}\n"
    ".visible .entry addone(.param .u64 dst, .param .u64 src, .param .u32 k)\n{\n"
    "  .reg .b32 %r<6>;\n  .reg .b64 %rd<7>;\n"
    "  ld.param.u64 %rd1, [dst];\n  ld.param.u64 %rd2, [src];\n  ld.param.u32 %r1, [k];\n"
    "  mov.u32 %r2, %tid.x;\n  mad.lo.u32 %r3, %r1, 64, %r2;\n  mul.wide.u32 %rd3, %r3, 4;\n"
    "  add.u64 %rd4, %rd2, %rd3;\n  ld.global.u32 %r4, [%rd4];\n  add.u32 %r5, %r4, 1;\n"
    "  add.u64 %rd5, %rd1, %rd3;\n  st.global.u32 [%rd5], %r5;\n  ret;\n}\n"
    ".visible .entry boom()\n{\n  trap;\n}\n";

static int32_t *host_a;            /* the device buffer A, readable from the host (CPU backend) */
static int seen[ROUNDS];           /* what stream A's host function saw in its slot */
static int seen_b[ROUNDS];         /* what stream B's host function saw in A's slot (after waiting) */
static volatile int late_ran;

static void check_a(void *arg)
{
    int k = (int)(intptr_t)arg, same = 1;
    for (int t = 0; t < LANES; t++) same &= host_a[k * LANES + t] == k;
    seen[k] = same ? k + 1 : -1;
}

static void check_b(void *arg)
{
    int k = (int)(intptr_t)arg, same = 1;
    for (int t = 0; t < LANES; t++) same &= host_a[k * LANES + t] == k;
    seen_b[k] = same ? k + 1 : -1;
}

static void late(void *arg) { (void)arg; late_ran = 1; }

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction setval, addone, boom;
    CUstream a, b, c;
    CUdeviceptr da, db;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&setval, mod, "setval"));
    OK(cuModuleGetFunction(&addone, mod, "addone"));
    OK(cuModuleGetFunction(&boom, mod, "boom"));
    OK(cuMemAlloc(&da, ROUNDS * LANES * 4));
    OK(cuMemAlloc(&db, ROUNDS * LANES * 4));
    OK(cuMemsetD32(da, 0xDEADBEEF, ROUNDS * LANES));
    OK(cuMemsetD32(db, 0xDEADBEEF, ROUNDS * LANES));
    host_a = (int32_t *)(uintptr_t)da;
    OK(cuStreamCreate(&a, 0));
    OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CUevent start, marks[ROUNDS];
    OK(cuEventCreate(&start, 0));
    OK(cuEventRecord(start, a));
    for (int k = 0; k < ROUNDS; k++) {
        OK(cuEventCreate(&marks[k], k % 2 ? CU_EVENT_DISABLE_TIMING : 0));
        uint64_t ns = k % 2 ? 300000 : 0;
        void *pa[] = {&da, &k, &ns};
        OK(cuLaunchKernel(setval, 1, 1, 1, LANES, 1, 1, 0, a, pa, NULL));
        /* some rounds without host work, so that records and waits follow kernels alone */
        if (k % 2 == 0) OK(cuLaunchHostFunc(a, check_a, (void *)(intptr_t)k));
        OK(cuEventRecord(marks[k], a));
        OK(cuStreamWaitEvent(b, marks[k], 0));
        if (k % 3) OK(cuLaunchHostFunc(b, check_b, (void *)(intptr_t)k));
        void *pb[] = {&db, &da, &k};
        OK(cuLaunchKernel(addone, 1, 1, 1, LANES, 1, 1, 0, b, pb, NULL));
        switch (k % 5) {    /* hand-overs: none, a stream, an event, the other stream, a query loop */
        case 1: OK(cuStreamSynchronize(a)); CHECK(k % 2 || seen[k] == k + 1); break;
        case 2: OK(cuEventSynchronize(marks[k])); CHECK(k % 2 || seen[k] == k + 1); break;
        case 3: OK(cuStreamSynchronize(b)); CHECK(k % 3 == 0 || seen_b[k] == k + 1); break;
        case 4: while (cuStreamQuery(b) == CUDA_ERROR_NOT_READY) {} CHECK(k % 3 == 0 || seen_b[k] == k + 1); break;
        }
    }
    OK(cuStreamSynchronize(b));
    OK(cuStreamSynchronize(a));
    int32_t *out = malloc(ROUNDS * LANES * 4);
    OK(cuMemcpyDtoH(out, db, ROUNDS * LANES * 4));
    for (int k = 0; k < ROUNDS; k++) {
        CHECK(seen[k] == (k % 2 ? 0 : k + 1));
        CHECK(seen_b[k] == (k % 3 ? k + 1 : 0));
        for (int t = 0; t < LANES; t++) CHECK(out[k * LANES + t] == k + 1);
    }
    /* timed events behind kernels: complete, and their times never go backwards */
    float last = 0, ms;
    for (int k = 0; k < ROUNDS; k += 2) {
        CHECK(cuEventQuery(marks[k]) == CUDA_SUCCESS);
        OK(cuEventElapsedTime(&ms, start, marks[k]));
        CHECK(ms >= last);
        last = ms;
    }
    CHECK(cuEventElapsedTime(&ms, start, marks[1]) == CUDA_ERROR_INVALID_HANDLE);   /* untimed */
    for (int k = 0; k < ROUNDS; k++) OK(cuEventDestroy(marks[k]));

    /* a trap in a kernel on an idle stream: the host function behind it does not run, the error is
       reported by the stream and sticks to the context */
    OK(cuStreamCreate(&c, 0));
    OK(cuLaunchKernel(boom, 2, 1, 1, 32, 1, 1, 0, c, NULL, NULL));
    CUresult r = cuLaunchHostFunc(c, late, NULL);   /* the trap may already have been seen: refused */
    CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_LAUNCH_FAILED);
    CHECK(cuStreamSynchronize(c) == CUDA_ERROR_LAUNCH_FAILED);
    CHECK(!late_ran);
    CHECK(cuCtxSynchronize() == CUDA_ERROR_LAUNCH_FAILED);
    CHECK(cuStreamQuery(a) == CUDA_ERROR_LAUNCH_FAILED);
    printf("%d failures\n", failures);
    if (!failures) printf("ALL PASSED\n");
    return failures != 0;
}
