/* ZLUDA_STREAMS through the real libcuda.so.1 from a C host. "order": six streams (blocking, non-blocking,
 * the legacy default stream, the per-thread one) run chains of non-commuting kernels, host functions that
 * snapshot a buffer, timed events and cross-stream waits (ping-pong, so no kernel races another); every
 * element of every buffer and snapshot is checked against the same chain computed here. "overlap": two
 * non-blocking streams each launch one-block kernels that stamp %globaltimer at start and end; prints for how
 * long both streams ran a kernel at once, and the wall time. Prints ALL PASSED. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 120
#define LANES 64
#define NBUF 6          /* 0..3: user streams, 4: the legacy stream's, 5: the per-thread stream's */

static int failures;
#define CHECK(c) do { if (!(c)) { failures++; if (failures < 20) printf("FAIL line %d: %s\n", __LINE__, #c); } } while (0)
#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d\n", #call, r_); exit(1); } } while (0)

static const char PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    /* p[tid] = p[tid] * 3 + k, after spinning `ns` ns (so later work would see the old value if it ran early) */
    ".visible .entry step(.param .u64 p, .param .u32 k, .param .u64 ns)\n{\n"
    "  .reg .b32 %r<5>;\n  .reg .b64 %rd<8>;\n  .reg .pred %p;\n"
    "  ld.param.u64 %rd4, [ns];\n  mov.u64 %rd5, %globaltimer;\n"
    "SPIN:\n  mov.u64 %rd6, %globaltimer;\n  sub.u64 %rd7, %rd6, %rd5;\n  setp.lt.u64 %p, %rd7, %rd4;\n"
    "  @%p bra SPIN;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [k];\n  mov.u32 %r2, %tid.x;\n"
    "  mul.wide.u32 %rd2, %r2, 4;\n  add.u64 %rd3, %rd1, %rd2;\n  ld.global.u32 %r3, [%rd3];\n"
    "  mad.lo.u32 %r4, %r3, 3, %r1;\n  st.global.u32 [%rd3], %r4;\n  ret;\n}\n"
    /* dst[tid] = dst[tid] * 7 + src[tid] */
    ".visible .entry mix(.param .u64 dst, .param .u64 src)\n{\n"
    "  .reg .b32 %r<5>;\n  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [dst];\n  ld.param.u64 %rd2, [src];\n  mov.u32 %r1, %tid.x;\n"
    "  mul.wide.u32 %rd3, %r1, 4;\n  add.u64 %rd4, %rd1, %rd3;\n  add.u64 %rd5, %rd2, %rd3;\n"
    "  ld.global.u32 %r2, [%rd4];\n  ld.global.u32 %r3, [%rd5];\n  mad.lo.u32 %r4, %r2, 7, %r3;\n"
    "  st.global.u32 [%rd4], %r4;\n  ret;\n}\n"
    /* out[0] = start, out[1] = end: spins `ns` ns of %globaltimer */
    ".visible .entry stamp(.param .u64 out, .param .u64 ns)\n{\n"
    "  .reg .b64 %rd<8>;\n  .reg .pred %p;\n"
    "  ld.param.u64 %rd4, [ns];\n  mov.u64 %rd5, %globaltimer;\n"
    "SPIN:\n  mov.u64 %rd6, %globaltimer;\n  sub.u64 %rd7, %rd6, %rd5;\n  setp.lt.u64 %p, %rd7, %rd4;\n"
    "  @%p bra SPIN;\n"
    "  ld.param.u64 %rd1, [out];\n  st.global.u64 [%rd1], %rd5;\n  st.global.u64 [%rd1+8], %rd6;\n  ret;\n}\n";

static uint32_t expect[NBUF][LANES];
static uint32_t *dev_host[NBUF];                 /* the device buffers, readable from the host (CPU backend) */
struct snap { int buf; uint32_t want[LANES], got[LANES]; int ran; };
static struct snap snaps[ROUNDS];

static void take_snap(void *arg)
{
    struct snap *s = arg;
    memcpy(s->got, dev_host[s->buf], sizeof s->got);
    s->ran++;
}

static void step_model(int b, uint32_t k)
{
    for (int t = 0; t < LANES; t++) expect[b][t] = expect[b][t] * 3 + k;
}

static void mix_model(int d, int s)
{
    for (int t = 0; t < LANES; t++) expect[d][t] = expect[d][t] * 7 + expect[s][t];
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void order(CUfunction step, CUfunction mix)
{
    CUstream s[NBUF];
    CUdeviceptr d[NBUF];
    OK(cuStreamCreate(&s[0], 0));
    OK(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s[2], 0));
    OK(cuStreamCreate(&s[3], CU_STREAM_NON_BLOCKING));
    s[4] = CU_STREAM_LEGACY;
    s[5] = CU_STREAM_PER_THREAD;
    for (int b = 0; b < NBUF; b++) {
        OK(cuMemAlloc(&d[b], LANES * 4));
        dev_host[b] = (uint32_t *)(uintptr_t)d[b];
        for (int t = 0; t < LANES; t++) expect[b][t] = dev_host[b][t] = (uint32_t)(t + 100 * b);
    }
    CUevent first, timed[ROUNDS], e1[ROUNDS], e2[ROUNDS];
    OK(cuEventCreate(&first, 0));
    OK(cuEventRecord(first, s[0]));
    for (int r = 0; r < ROUNDS; r++) {
        for (int b = 0; b < NBUF; b++) {
            if (b == 4) continue;
            uint32_t k = (uint32_t)(r * NBUF + b);
            uint64_t ns = (r + b) % 3 == 0 ? 100000 : 0;
            void *p[] = {&d[b], &k, &ns};
            OK(cuLaunchKernel(step, 1, 1, 1, LANES, 1, 1, 0, s[b], p, NULL));
            step_model(b, k);
        }
        /* a snapshot of one user stream's buffer from a host function in its order */
        int sb = r % 4;
        snaps[r].buf = sb;
        memcpy(snaps[r].want, expect[sb], sizeof snaps[r].want);
        OK(cuLaunchHostFunc(s[sb], take_snap, &snaps[r]));
        /* src's state goes into dst's buffer; src waits for the mix before it changes its buffer again */
        int src = r % 4, dst = (r + 1 + r / 4 % 3) % 4;
        OK(cuEventCreate(&e1[r], r % 2 ? CU_EVENT_DISABLE_TIMING : 0));
        OK(cuEventCreate(&e2[r], CU_EVENT_DISABLE_TIMING));
        OK(cuEventRecord(e1[r], s[src]));
        OK(cuStreamWaitEvent(s[dst], e1[r], 0));
        void *pm[] = {&d[dst], &d[src]};
        OK(cuLaunchKernel(mix, 1, 1, 1, LANES, 1, 1, 0, s[dst], pm, NULL));
        mix_model(dst, src);
        OK(cuEventRecord(e2[r], s[dst]));
        OK(cuStreamWaitEvent(s[src], e2[r], 0));
        /* the legacy stream reads the blocking streams' buffers: CUDA orders it after their work so far,
           and their later work after it */
        if (r % 5 == 0) {
            int from = (r / 5) % 3 == 0 ? 0 : (r / 5) % 3 == 1 ? 2 : 5;
            void *pl[] = {&d[4], &d[from]};
            OK(cuLaunchKernel(mix, 1, 1, 1, LANES, 1, 1, 0, CU_STREAM_LEGACY, pl, NULL));
            mix_model(4, from);
        }
        OK(cuEventCreate(&timed[r], 0));
        OK(cuEventRecord(timed[r], s[0]));
        switch (r % 7) {    /* hand-overs: a stream, an event, a query loop, the legacy stream */
        case 1: OK(cuStreamSynchronize(s[r % 4])); break;
        case 3: OK(cuEventSynchronize(e1[r])); break;
        case 5: while (cuStreamQuery(s[(r + 1) % 4]) == CUDA_ERROR_NOT_READY) {} break;
        case 6: OK(cuStreamSynchronize(CU_STREAM_LEGACY)); break;
        }
    }
    OK(cuCtxSynchronize());
    for (int b = 0; b < NBUF; b++) {
        uint32_t out[LANES];
        OK(cuMemcpyDtoH(out, d[b], sizeof out));
        for (int t = 0; t < LANES; t++) CHECK(out[t] == expect[b][t]);
    }
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(snaps[r].ran == 1);
        for (int t = 0; t < LANES; t++) CHECK(snaps[r].got[t] == snaps[r].want[t]);
    }
    float last = 0, ms;
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(cuEventQuery(timed[r]) == CUDA_SUCCESS && cuEventQuery(e1[r]) == CUDA_SUCCESS);
        OK(cuEventElapsedTime(&ms, first, timed[r]));
        CHECK(ms >= last);
        last = ms;
        OK(cuEventDestroy(timed[r]));
        OK(cuEventDestroy(e1[r]));
        OK(cuEventDestroy(e2[r]));
    }
    for (int b = 0; b < 4; b++) OK(cuStreamDestroy(s[b]));
    for (int b = 0; b < NBUF; b++) OK(cuMemFree(d[b]));
}

static void overlap(CUfunction stamp)
{
    enum { REPS = 6 };
    CUstream s[2];
    CUdeviceptr out;
    uint64_t ns = 20000000;
    OK(cuMemAlloc(&out, REPS * 2 * 16));
    for (int i = 0; i < 2; i++) OK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    double t0 = now();
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < 2; i++) {
            CUdeviceptr o = out + 16 * (2 * r + i);
            void *p[] = {&o, &ns};
            OK(cuLaunchKernel(stamp, 1, 1, 1, 1, 1, 1, 0, s[i], p, NULL));
        }
    for (int i = 0; i < 2; i++) OK(cuStreamSynchronize(s[i]));
    double wall = now() - t0;
    /* a stream's own kernels never overlap, so the pairs' overlaps add up to the time both streams ran a
       kernel; the lanes drift apart on a busy machine, so every pair counts, not only the r-th ones */
    uint64_t *h = (uint64_t *)(uintptr_t)out, both = 0;
    for (int r = 0; r < REPS; r++) {
        uint64_t *a = h + 4 * r;
        CHECK(a[1] - a[0] >= ns && a[3] - a[2] >= ns);
        for (int q = 0; q < REPS; q++) {
            uint64_t *b = h + 4 * q + 2;
            uint64_t lo = a[0] > b[0] ? a[0] : b[0], hi = a[1] < b[1] ? a[1] : b[1];
            if (hi > lo) both += hi - lo;
        }
    }
    printf("both ran %.1f ms, wall %.1f ms for %d kernels of %.0f ms\n", both / 1e6, wall * 1e3, 2 * REPS,
           ns / 1e6);
    for (int i = 0; i < 2; i++) OK(cuStreamDestroy(s[i]));
    OK(cuMemFree(out));
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction step, mix, stamp;
    const char *part = argc > 1 ? argv[1] : "order";
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&step, mod, "step"));
    OK(cuModuleGetFunction(&mix, mod, "mix"));
    OK(cuModuleGetFunction(&stamp, mod, "stamp"));
    if (!strcmp(part, "order")) order(step, mix);
    else overlap(stamp);
    printf("%d failures\n", failures);
    if (!failures) printf("ALL PASSED\n");
    return failures != 0;
}
