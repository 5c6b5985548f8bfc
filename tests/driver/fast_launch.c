/* The shim's launch fast path (src/fastlaunch.c over the CPU backend's launchq_streams.c), through the real
 * libcuda.so.1: stream order on the legacy, blocking, non-blocking and per-thread streams mixed with
 * asynchronous copies, fills, events and synchronous copies; parameter packing; asynchrony; launch errors
 * (printed, for the Python test to compare with the fast path off); faults and traps; lazy first launches;
 * threads; capture; unloads, attribute changes and other contexts. argv[1] selects one part; prints
 * "FAIL ..." per failed check, "served L S Q" (launches, synchronizes, queries the fast path answered) and
 * "PASSED <part>". */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The per-thread-default-stream exports, which cuda.h names only when compiling for them. */
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, CUstream s, void **params, void **extra);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra);
CUresult cuStreamSynchronize_ptsz(CUstream s);
CUresult cuStreamQuery_ptsz(CUstream s);

static int failures, checks;

#define EXPECT(call, want)                                                                  \
    do {                                                                                    \
        CUresult r_ = (call);                                                               \
        checks++;                                                                           \
        if (r_ != (want)) {                                                                 \
            printf("FAIL %s:%d: %s -> %d, want %d\n", __FILE__, __LINE__, #call, (int)r_,    \
                   (int)(want));                                                            \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)
#define OK(call) EXPECT(call, CUDA_SUCCESS)
#define CHECK(cond)                                                                         \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                          \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

static const char PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    /* p[i] = p[i] * 3 + k for the global thread id i < n: later work sees the order it ran in */
    ".visible .entry step(.param .u64 p, .param .u32 k, .param .u32 n)\n{\n"
    "  .reg .b32 %r<8>;\n  .reg .b64 %rd<4>;\n  .reg .pred %p;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [k];\n  ld.param.u32 %r7, [n];\n"
    "  mov.u32 %r2, %tid.x;\n  mov.u32 %r3, %ctaid.x;\n  mov.u32 %r4, %ntid.x;\n"
    "  mad.lo.u32 %r2, %r3, %r4, %r2;\n  setp.ge.u32 %p, %r2, %r7;\n  @%p bra DONE;\n"
    "  mul.wide.u32 %rd2, %r2, 4;\n  add.u64 %rd3, %rd1, %rd2;\n  ld.global.u32 %r5, [%rd3];\n"
    "  mad.lo.u32 %r6, %r5, 3, %r1;\n  st.global.u32 [%rd3], %r6;\n"
    "DONE:\n  ret;\n}\n"
    /* dst[i] = dst[i] * 7 + src[i] */
    ".visible .entry mix(.param .u64 dst, .param .u64 src, .param .u32 n)\n{\n"
    "  .reg .b32 %r<8>;\n  .reg .b64 %rd<6>;\n  .reg .pred %p;\n"
    "  ld.param.u64 %rd1, [dst];\n  ld.param.u64 %rd2, [src];\n  ld.param.u32 %r7, [n];\n"
    "  mov.u32 %r2, %tid.x;\n  mov.u32 %r3, %ctaid.x;\n  mov.u32 %r4, %ntid.x;\n"
    "  mad.lo.u32 %r2, %r3, %r4, %r2;\n  setp.ge.u32 %p, %r2, %r7;\n  @%p bra DONE;\n"
    "  mul.wide.u32 %rd3, %r2, 4;\n  add.u64 %rd4, %rd1, %rd3;\n  add.u64 %rd5, %rd2, %rd3;\n"
    "  ld.global.u32 %r5, [%rd4];\n  ld.global.u32 %r6, [%rd5];\n  mad.lo.u32 %r5, %r5, 7, %r6;\n"
    "  st.global.u32 [%rd4], %r5;\n"
    "DONE:\n  ret;\n}\n"
    /* every parameter written out as it arrived: offsets 0, 8, 10, 16, 24 (24 bytes), 48 */
    ".visible .entry params(.param .u64 out, .param .u8 a, .param .u16 b, .param .u64 c,\n"
    "                       .param .align 8 .b8 d[24], .param .f32 e)\n{\n"
    "  .reg .b16 %h<3>;\n  .reg .b32 %r1;\n  .reg .b64 %rd<8>;\n  .reg .f32 %f1;\n"
    "  ld.param.u64 %rd1, [out];\n"
    "  ld.param.u8 %h1, [a];\n  cvt.u64.u16 %rd2, %h1;\n  st.global.u64 [%rd1], %rd2;\n"
    "  ld.param.u16 %h2, [b];\n  cvt.u64.u16 %rd3, %h2;\n  st.global.u64 [%rd1+8], %rd3;\n"
    "  ld.param.u64 %rd4, [c];\n  st.global.u64 [%rd1+16], %rd4;\n"
    "  ld.param.u64 %rd5, [d];\n  st.global.u64 [%rd1+24], %rd5;\n"
    "  ld.param.u64 %rd6, [d+8];\n  st.global.u64 [%rd1+32], %rd6;\n"
    "  ld.param.u64 %rd7, [d+16];\n  st.global.u64 [%rd1+40], %rd7;\n"
    "  ld.param.f32 %f1, [e];\n  mov.b32 %r1, %f1;\n  st.global.u32 [%rd1+48], %r1;\n  ret;\n}\n"
    /* w[1] = 1 at the start, then waits (10 s at most) for w[0] != 0 and writes what it saw to w[2] */
    ".visible .entry wait_flag(.param .u64 w)\n{\n"
    "  .reg .b32 %r<3>;\n  .reg .b64 %rd<6>;\n  .reg .pred %p;\n"
    "  ld.param.u64 %rd1, [w];\n  mov.u32 %r2, 1;\n  st.volatile.global.u32 [%rd1+4], %r2;\n"
    "  mov.u64 %rd3, %globaltimer;\n"
    "LOOP:\n  ld.volatile.global.u32 %r1, [%rd1];\n  setp.ne.u32 %p, %r1, 0;\n  @%p bra DONE;\n"
    "  mov.u64 %rd4, %globaltimer;\n  sub.u64 %rd5, %rd4, %rd3;\n  setp.lt.u64 %p, %rd5, 10000000000;\n"
    "  @%p bra LOOP;\n"
    "DONE:\n  st.global.u32 [%rd1+8], %r1;\n  ret;\n}\n"
    /* *p = 1 (a bad p faults) */
    ".visible .entry poke(.param .u64 p)\n{\n  .reg .b64 %rd1;\n  .reg .b32 %r1;\n"
    "  ld.param.u64 %rd1, [p];\n  mov.u32 %r1, 1;\n  st.global.u32 [%rd1], %r1;\n  ret;\n}\n"
    /* traps when t != 0 */
    ".visible .entry trap_if(.param .u32 t)\n{\n  .reg .b32 %r1;\n  .reg .pred %p;\n"
    "  ld.param.u32 %r1, [t];\n  setp.eq.u32 %p, %r1, 0;\n  @%p bra DONE;\n  trap;\n"
    "DONE:\n  ret;\n}\n"
    /* p[tid] = its dynamic shared memory's size in bytes, after touching its last byte */
    ".extern .shared .align 4 .b8 dyn[];\n"
    ".visible .entry dynamic(.param .u64 p)\n{\n  .reg .b32 %r<3>;\n  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p];\n  mov.u32 %r1, %dynamic_smem_size;\n  mov.u32 %r2, dyn;\n"
    "  add.u32 %r2, %r2, %r1;\n  sub.u32 %r2, %r2, 1;\n  st.shared.u8 [%r2], %r1;\n"
    "  st.global.u32 [%rd1], %r1;\n  ret;\n}\n"
    ".visible .entry empty()\n{\n  ret;\n}\n";

#define N 64            /* threads per launch: 2 blocks of 32 */
#define NB 5            /* buffers: legacy, blocking A, blocking B, non-blocking C, per-thread */

static CUdevice dev;
static CUcontext primary;
static CUmodule module;
static CUfunction step, mix, params_fn, wait_flag, poke, trap_if, dynamic, empty;

static void load(CUmodule *m)
{
    OK(cuModuleLoadData(m, PTX));
    OK(cuModuleGetFunction(&step, *m, "step"));
    OK(cuModuleGetFunction(&mix, *m, "mix"));
    OK(cuModuleGetFunction(&params_fn, *m, "params"));
    OK(cuModuleGetFunction(&wait_flag, *m, "wait_flag"));
    OK(cuModuleGetFunction(&poke, *m, "poke"));
    OK(cuModuleGetFunction(&trap_if, *m, "trap_if"));
    OK(cuModuleGetFunction(&dynamic, *m, "dynamic"));
    OK(cuModuleGetFunction(&empty, *m, "empty"));
}

static void setup(void)
{
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&primary, dev));
    OK(cuCtxSetCurrent(primary));
    load(&module);
}

/* What the fast path answered so far: launches, synchronizes, queries (0s from a driver without it). */
static void served(uint64_t out[3])
{
    void (*fn)(uint64_t *) = (void (*)(uint64_t *))dlsym(RTLD_DEFAULT, "zl_fast_served");
    out[0] = out[1] = out[2] = 0;
    if (fn)
        fn(out);
}

static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

static CUresult launch_step(CUstream s, CUdeviceptr p, uint32_t k, int ptsz)
{
    uint32_t n = N;
    void *args[] = {&p, &k, &n};
    return ptsz ? cuLaunchKernel_ptsz(step, 2, 1, 1, 32, 1, 1, 0, s, args, NULL)
                : cuLaunchKernel(step, 2, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

static CUresult launch_mix(CUstream s, CUdeviceptr dst, CUdeviceptr src)
{
    uint32_t n = N;
    void *args[] = {&dst, &src, &n};
    return cuLaunchKernel(mix, 2, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

/* --- order --------------------------------------------------------------------------------------------- */
static uint32_t model[NB][N];

static void model_step(int b, uint32_t k)
{
    for (int i = 0; i < N; i++) model[b][i] = model[b][i] * 3 + k;
}

static void model_mix(int d, int s)
{
    for (int i = 0; i < N; i++) model[d][i] = model[d][i] * 7 + model[s][i];
}

static int same(const uint32_t *got, const uint32_t *want)
{
    return memcmp(got, want, N * sizeof *got) == 0;
}

/* A random program over the five streams, each buffer written only by its own stream's work (a mix on the
 * legacy stream reads a blocking stream's buffer, a mix on a blocking stream the legacy one's: CUDA's
 * implicit waits order them; the non-blocking stream only through an event), checked against a model on
 * the host as it goes (synchronous copies, stream synchronizes and queries) and at the end. */
static void part_order(void)
{
    enum { ROUNDS = 600 };
    static uint32_t sources[ROUNDS][N], snaps[ROUNDS][N], snap_want[ROUNDS][N];
    static int snapped[ROUNDS];
    CUstream a, b, c, streams[NB];
    CUdeviceptr buf[NB];
    CUevent ev;
    uint32_t host[N];
    OK(cuStreamCreate(&a, 0));
    OK(cuStreamCreate(&b, 0));
    OK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CUstream set[NB] = {0, a, b, c, CU_STREAM_PER_THREAD};
    memcpy(streams, set, sizeof set);
    for (int i = 0; i < NB; i++) {
        OK(cuMemAlloc(&buf[i], N * 4));
        for (int t = 0; t < N; t++) model[i][t] = host[t] = 0x1000u * (uint32_t)i + (uint32_t)t;
        OK(cuMemcpyHtoD(buf[i], host, sizeof host));
    }
    for (int r = 0; r < ROUNDS; r++) {
        int s = (int)(rnd() % NB);
        uint32_t k = rnd();
        CUstream h = streams[s];
        if (s == 0 && (r & 1))
            h = CU_STREAM_LEGACY;
        switch (rnd() % 12) {
        case 0: case 1: case 2: case 3:
            /* the per-thread stream also as handle 0 of the _ptsz entry point */
            OK(s == NB - 1 && (r & 1) ? launch_step(0, buf[s], k, 1) : launch_step(h, buf[s], k, 0));
            model_step(s, k);
            break;
        case 4: {       /* the legacy stream after a blocking stream's work */
            int src = (int)(rnd() % 3);
            src = src == 0 ? 1 : src == 1 ? 2 : NB - 1;
            OK(launch_mix(r & 1 ? 0 : CU_STREAM_LEGACY, buf[0], buf[src]));
            model_mix(0, src);
            break;
        }
        case 5: {       /* a blocking stream after the legacy stream's work */
            int dst = (int)(rnd() % 3);
            dst = dst == 0 ? 1 : dst == 1 ? 2 : NB - 1;
            OK(launch_mix(streams[dst], buf[dst], buf[0]));
            model_mix(dst, 0);
            break;
        }
        case 6:         /* an asynchronous copy (Python's work) between launches */
            for (int t = 0; t < N; t++) model[s][t] = sources[r][t] = rnd();
            OK(cuMemcpyHtoDAsync(buf[s], sources[r], N * 4, streams[s]));
            break;
        case 7:
            memset(snaps[r], 0xA5, sizeof snaps[r]);
            memcpy(snap_want[r], model[s], sizeof snap_want[r]);
            snapped[r] = 1;
            OK(cuMemcpyDtoHAsync(snaps[r], buf[s], N * 4, streams[s]));
            break;
        case 8:         /* the non-blocking stream's work, through events both ways */
            OK(cuEventRecord(ev, c));
            OK(cuStreamWaitEvent(a, ev, 0));
            OK(launch_mix(a, buf[1], buf[3]));
            model_mix(1, 3);
            OK(cuEventRecord(ev, a));
            OK(cuStreamWaitEvent(c, ev, 0));        /* c's later work must not overwrite what a reads */
            break;
        case 9:
            OK(cuMemsetD32Async(buf[s], k, N, streams[s]));
            for (int t = 0; t < N; t++) model[s][t] = k;
            break;
        case 10:        /* a synchronous copy waits for the legacy stream and the blocking ones */
            memset(host, 0xA5, sizeof host);
            OK(cuMemcpyDtoH(host, buf[0], sizeof host));
            CHECK(same(host, model[0]));
            break;
        default:        /* a stream synchronize or a query loop, then its buffer */
            if (r & 1) {
                OK(s == NB - 1 ? cuStreamSynchronize_ptsz(0) : cuStreamSynchronize(h));
            } else {
                CUresult q;
                while ((q = s == NB - 1 ? cuStreamQuery_ptsz(0) : cuStreamQuery(h)) == CUDA_ERROR_NOT_READY)
                    ;
                OK(q);
            }
            memset(host, 0xA5, sizeof host);
            OK(cuMemcpyDtoHAsync(host, buf[s], sizeof host, streams[s]));
            OK(s == NB - 1 ? cuStreamSynchronize_ptsz(0) : cuStreamSynchronize(h));
            CHECK(same(host, model[s]));
            break;
        }
    }
    OK(cuCtxSynchronize());
    for (int i = 0; i < NB; i++) {
        memset(host, 0xA5, sizeof host);
        OK(cuMemcpyDtoH(host, buf[i], sizeof host));
        CHECK(same(host, model[i]));
    }
    int snaps_ok = 1;
    for (int r = 0; r < ROUNDS; r++)
        if (snapped[r])
            snaps_ok &= same(snaps[r], snap_want[r]);
    CHECK(snaps_ok);
    for (int i = 0; i < NB; i++)
        OK(cuMemFree(buf[i]));
    OK(cuEventDestroy(ev));
    OK(cuStreamDestroy(a));
    OK(cuStreamDestroy(b));
    OK(cuStreamDestroy(c));
}

/* --- parameters, cuLaunchKernelEx ------------------------------------------------------------------------ */
static void check_params(CUdeviceptr out, uint8_t pa, uint16_t pb, uint64_t pc, const uint64_t *pd, float pe)
{
    uint64_t got[7];
    memset(got, 0xA5, sizeof got);
    OK(cuMemcpyDtoH(got, out, 52));
    uint32_t e_bits;
    memcpy(&e_bits, &got[6], 4);
    uint32_t want_e;
    memcpy(&want_e, &pe, 4);
    CHECK(got[0] == pa && got[1] == pb && got[2] == pc && got[3] == pd[0] && got[4] == pd[1] && got[5] == pd[2]);
    CHECK(e_bits == want_e);
}

static void part_params(void)
{
    CUdeviceptr out;
    CUstream s;
    OK(cuMemAlloc(&out, 64));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 200; i++) {
        uint8_t pa = (uint8_t)rnd();
        uint16_t pb = (uint16_t)rnd();
        uint64_t pc = ((uint64_t)rnd() << 40) ^ rnd(), pd[3] = {rnd(), (uint64_t)rnd() << 33, ~(uint64_t)rnd()};
        float pe = (float)(int32_t)rnd() / 7.0f;
        void *args[] = {&out, &pa, &pb, &pc, pd, &pe};
        CUlaunchAttribute attr[2];
        memset(attr, 0, sizeof attr);
        attr[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;          /* hints change nothing here */
        attr[0].value.priority = 1;
        attr[1].id = CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
        CUlaunchConfig cfg = {1, 1, 1, 1, 1, 1, 0, i & 1 ? s : 0, attr, (unsigned)(i % 3)};
        switch (i % 4) {
        case 0: OK(cuLaunchKernel(params_fn, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)); break;
        case 1: OK(cuLaunchKernelEx(&cfg, params_fn, args, NULL)); break;
        case 2: OK(cuLaunchKernelEx_ptsz(&cfg, params_fn, args, NULL)); break;
        default: OK(cuLaunchKernel_ptsz(params_fn, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, args, NULL));
        }
        OK(cuCtxSynchronize());
        check_params(out, pa, pb, pc, pd, pe);
    }
    OK(cuStreamDestroy(s));
    OK(cuMemFree(out));
}

/* --- asynchrony: the kernel runs while the launching thread goes on --------------------------------------- */
static void part_async(void)
{
    CUdeviceptr w;
    OK(cuMemAlloc(&w, 16));
    volatile uint32_t *host = (volatile uint32_t *)(uintptr_t)w;    /* device memory is host memory here */
    void *args[] = {&w};
    for (int round = 0; round < 20; round++) {
        OK(cuMemsetD32(w, round == 0 ? 1 : 0, 4));      /* the first launch (Python's) ends at once */
        OK(cuLaunchKernel(wait_flag, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
        if (round) {
            double t0 = (double)clock() / CLOCKS_PER_SEC;
            while (!host[1] && (double)clock() / CLOCKS_PER_SEC - t0 < 10)
                ;
            CHECK(host[1] == 1);                        /* it started without a synchronize */
            EXPECT(cuStreamQuery(0), CUDA_ERROR_NOT_READY);
            host[0] = 7 + round;
        }
        OK(cuCtxSynchronize());
        CHECK(host[2] == (round ? 7u + round : 1u));
        OK(cuStreamQuery(0));
    }
    OK(cuMemFree(w));
}

/* --- errors: printed one line each, for the Python test to compare with the fast path off ----------------- */
static void show(const char *what, CUresult r)
{
    printf("%s %d\n", what, (int)r);
}

static void part_errors(void)
{
    CUdeviceptr p;
    CUstream s, dead;
    CUmodule other;
    CUfunction other_step;
    uint32_t k = 1, n = N;
    OK(cuMemAlloc(&p, N * 4));
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamCreate(&dead, 0));
    OK(cuStreamDestroy(dead));
    void *args[] = {&p, &k, &n};
    void *holes[] = {&p, NULL, &n};
    /* every function launched once first: the fast path knows each */
    show("good", cuLaunchKernel(step, 2, 1, 1, 32, 1, 1, 0, s, args, NULL));
    show("good", cuLaunchKernel(step, 2, 1, 1, 32, 1, 1, 0, 0, args, NULL));
    show("good-dyn", cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 16, 0, (void *[]){&p}, NULL));
    show("sync", cuCtxSynchronize());
    for (int rep = 0; rep < 2; rep++) {
        show("grid-x-0", cuLaunchKernel(step, 0, 1, 1, 32, 1, 1, 0, 0, args, NULL));
        show("grid-y-0", cuLaunchKernel(step, 1, 0, 1, 32, 1, 1, 0, 0, args, NULL));
        show("block-0", cuLaunchKernel(step, 1, 1, 1, 0, 1, 1, 0, 0, args, NULL));
        show("block-1025", cuLaunchKernel(step, 1, 1, 1, 1025, 1, 1, 0, 0, args, NULL));
        show("block-32x33", cuLaunchKernel(step, 1, 1, 1, 32, 33, 1, 0, 0, args, NULL));
        show("block-z-65", cuLaunchKernel(step, 1, 1, 1, 1, 1, 65, 0, 0, args, NULL));
        show("grid-y-65536", cuLaunchKernel(step, 1, 65536, 1, 1, 1, 1, 0, 0, args, NULL));
        show("grid-x-2^31", cuLaunchKernel(step, 0x80000000u, 1, 1, 1, 1, 1, 0, 0, args, NULL));
        show("shared-49153", cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 49153, 0, (void *[]){&p}, NULL));
        show("shared-huge", cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 0xFFFFFFF0u, 0, (void *[]){&p}, NULL));
        show("params-null", cuLaunchKernel(step, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
        show("param-1-null", cuLaunchKernel(step, 1, 1, 1, 1, 1, 1, 0, 0, holes, NULL));
        void *extra[] = {CU_LAUNCH_PARAM_END};
        show("params-and-extra", cuLaunchKernel(step, 1, 1, 1, 1, 1, 1, 0, 0, args, extra));
        show("function-null", cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
        show("function-bad", cuLaunchKernel((CUfunction)(uintptr_t)0x5A1D00000008ull, 1, 1, 1, 1, 1, 1, 0, 0,
                                            args, NULL));
        show("stream-bad", cuLaunchKernel(step, 1, 1, 1, 1, 1, 1, 0, (CUstream)(uintptr_t)0x5A1D0000000Cull,
                                          args, NULL));
        show("stream-destroyed", cuLaunchKernel(step, 1, 1, 1, 1, 1, 1, 0, dead, args, NULL));
        show("sync-destroyed", cuStreamSynchronize(dead));
        show("query-destroyed", cuStreamQuery(dead));
        show("ctx-sync-bad", cuCtxSynchronize_v2((CUcontext)(uintptr_t)0x5A1D00000004ull));
        show("ex-null", cuLaunchKernelEx(NULL, step, args, NULL));
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        CUlaunchConfig cfg = {1, 1, 1, 1, 1, 1, 0, 0, &attr, 1};
        attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attr.value.cooperative = 1;
        show("ex-cooperative", cuLaunchKernelEx(&cfg, step, args, NULL));
        attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = 2;
        attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
        cfg.gridDimX = 2;
        show("ex-cluster", cuLaunchKernelEx(&cfg, step, args, NULL));
        attr.id = (CUlaunchAttributeID)99;
        show("ex-unknown-attr", cuLaunchKernelEx(&cfg, step, args, NULL));
        cfg.attrs = NULL;
        show("ex-attrs-null", cuLaunchKernelEx(&cfg, step, args, NULL));
        cfg.numAttrs = 0;
        cfg.blockDimX = 2000;
        show("ex-block-2000", cuLaunchKernelEx(&cfg, step, args, NULL));
        /* no current context */
        OK(cuCtxSetCurrent(NULL));
        show("no-ctx-launch", cuLaunchKernel(step, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
        show("no-ctx-sync", cuCtxSynchronize());
        show("no-ctx-stream-sync", cuStreamSynchronize(0));
        OK(cuCtxSetCurrent(primary));
        show("good-again", cuLaunchKernel(step, 2, 1, 1, 32, 1, 1, 0, s, args, NULL));
        show("sync-again", cuStreamSynchronize(s));
    }
    /* an unloaded module's function */
    OK(cuModuleLoadData(&other, PTX));
    OK(cuModuleGetFunction(&other_step, other, "step"));
    show("other", cuLaunchKernel(other_step, 2, 1, 1, 32, 1, 1, 0, 0, args, NULL));
    show("other", cuLaunchKernel(other_step, 2, 1, 1, 32, 1, 1, 0, 0, args, NULL));
    show("unload", cuModuleUnload(other));
    show("unloaded-function", cuLaunchKernel(other_step, 2, 1, 1, 32, 1, 1, 0, 0, args, NULL));
    show("sync", cuCtxSynchronize());
    OK(cuStreamDestroy(s));
    OK(cuMemFree(p));
}

/* --- a fault and a trap: the synchronize reports them, the context stays broken ----------------------------- */
static void part_fault(void)
{
    CUdeviceptr p, bad = 0x10;
    CUstream s;
    CUcontext cur = NULL;
    OK(cuMemAlloc(&p, 64));
    OK(cuStreamCreate(&s, 0));
    OK(cuLaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, s, (void *[]){&p}, NULL));
    OK(cuStreamSynchronize(s));
    OK(cuLaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, s, (void *[]){&bad}, NULL));
    CUresult q;
    while ((q = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
        ;
    EXPECT(q, CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(cuLaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, s, (void *[]){&p}, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(cuLaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, 0, (void *[]){&p}, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(cuStreamSynchronize(0), CUDA_ERROR_ILLEGAL_ADDRESS);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
}

static void part_trap(void)
{
    uint32_t no = 0, yes = 1;
    OK(cuLaunchKernel(trap_if, 1, 1, 1, 1, 1, 1, 0, 0, (void *[]){&no}, NULL));
    OK(cuCtxSynchronize());
    OK(cuLaunchKernel(trap_if, 1, 1, 1, 1, 1, 1, 0, 0, (void *[]){&yes}, NULL));
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
    EXPECT(cuLaunchKernel(trap_if, 1, 1, 1, 1, 1, 1, 0, 0, (void *[]){&no}, NULL), CUDA_ERROR_LAUNCH_FAILED);
    EXPECT(cuStreamQuery(0), CUDA_ERROR_LAUNCH_FAILED);
}

/* --- lazy modules: a kernel's first launch compiles it in Python, the next ones are the fast path's --------- */
static void part_lazy(void)
{
    CUdeviceptr p;
    uint32_t host[N], want[N];
    uint64_t before[3], after[3];
    OK(cuMemAlloc(&p, N * 4));
    OK(cuMemsetD32(p, 5, N));
    for (int t = 0; t < N; t++) want[t] = 5;
    served(before);
    for (int i = 0; i < 10; i++) {
        uint32_t k = (uint32_t)i * 11;
        OK(launch_step(0, p, k, 0));
        for (int t = 0; t < N; t++) want[t] = want[t] * 3 + k;
    }
    OK(cuCtxSynchronize());
    served(after);
    OK(cuMemcpyDtoH(host, p, sizeof host));
    CHECK(memcmp(host, want, sizeof host) == 0);
    /* the first launch compiled the kernel (Python); with the fast path on, C made the nine others */
    printf("lazy served %llu\n", (unsigned long long)(after[0] - before[0]));
    OK(cuMemFree(p));
}

/* --- threads: each with its own stream and per-thread stream, the main thread on the legacy stream --------- */
struct worker { CUdeviceptr p[2]; uint32_t want[2][N]; int failures; };
/* The workers check their results (synchronous copies: legacy-stream work, which a blocking stream's launch
   must then wait for, in Python) only once every worker has made its launches. */
static pthread_barrier_t launched;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    CUstream s;
    if (cuCtxSetCurrent(primary) || cuStreamCreate(&s, 0)) {
        w->failures++;
        pthread_barrier_wait(&launched);
        return NULL;
    }
    for (int i = 0; i < 300; i++) {
        int which = i % 2;
        uint32_t k = (uint32_t)(i * 7 + which);
        CUresult r = which ? launch_step(0, w->p[1], k, 1) : launch_step(s, w->p[0], k, 0);
        w->failures += r != CUDA_SUCCESS;
        for (int t = 0; t < N; t++) w->want[which][t] = w->want[which][t] * 3 + k;
        /* i = 0 and 1 are each stream's first launch (Python's): waiting for them leaves no Python work on the
           stream, which would send the next launch to Python too, and that one the next, as long as Python lags */
        if (i % 37 == 0 || i == 1)
            w->failures += (which ? cuStreamSynchronize_ptsz(0) : cuStreamSynchronize(s)) != CUDA_SUCCESS;
    }
    w->failures += cuStreamSynchronize(s) != CUDA_SUCCESS;
    w->failures += cuStreamSynchronize_ptsz(0) != CUDA_SUCCESS;
    pthread_barrier_wait(&launched);
    uint32_t host[N];
    for (int b = 0; b < 2; b++) {
        w->failures += cuMemcpyDtoH(host, w->p[b], sizeof host) != CUDA_SUCCESS;
        w->failures += memcmp(host, w->want[b], sizeof host) != 0;
    }
    w->failures += cuStreamDestroy(s) != CUDA_SUCCESS;
    return NULL;
}

static void run_threads(int main_launches)
{
    enum { T = 4 };
    static struct worker w[T];
    pthread_t th[T];
    CUdeviceptr mine;
    uint32_t want[N], host[N];
    OK(cuMemAlloc(&mine, N * 4));
    OK(cuMemsetD32(mine, 1, N));
    for (int t = 0; t < N; t++) want[t] = 1;
    CHECK(pthread_barrier_init(&launched, NULL, T) == 0);
    for (int i = 0; i < T; i++) {
        for (int b = 0; b < 2; b++) {
            OK(cuMemAlloc(&w[i].p[b], N * 4));
            OK(cuMemsetD32(w[i].p[b], (uint32_t)(i * 2 + b), N));
            for (int t = 0; t < N; t++) w[i].want[b][t] = (uint32_t)(i * 2 + b);
        }
    }
    /* the fills are legacy-stream work (asynchronous, as on a GPU): until it has run, a blocking stream's
       launch has a legacy wait to make and is Python's, and so are the launches queued behind that one */
    OK(cuCtxSynchronize());
    for (int i = 0; i < T; i++) {
        CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
    }
    for (int i = 0; i < 300 * main_launches; i++) {
        OK(launch_step(0, mine, (uint32_t)i, 0));
        for (int t = 0; t < N; t++) want[t] = want[t] * 3 + (uint32_t)i;
        if (i % 50 == 0)
            OK(cuCtxSynchronize());
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].failures == 0);
    }
    pthread_barrier_destroy(&launched);
    OK(cuMemcpyDtoH(host, mine, sizeof host));
    CHECK(memcmp(host, want, sizeof host) == 0);
    for (int i = 0; i < T; i++)
        for (int b = 0; b < 2; b++) OK(cuMemFree(w[i].p[b]));
    OK(cuMemFree(mine));
}

static void part_threads(void) { run_threads(1); }

/* The workers alone: with the legacy stream idle (their copies wait for all their launches) no launch has a
   legacy wait to make, so C serves every one but those made before the kernel was published (the first, and
   any racing it) and each thread's first on its per-thread stream. */
static void part_threads_quiet(void) { run_threads(0); }

/* --- capture: a captured launch runs when the graph does, not before --------------------------------------- */
static void part_capture(void)
{
    CUstream s;
    CUdeviceptr p;
    CUgraph graph;
    CUgraphExec exec;
    uint32_t host[N];
    OK(cuStreamCreate(&s, 0));
    OK(cuMemAlloc(&p, N * 4));
    OK(cuMemsetD32(p, 2, N));
    OK(launch_step(s, p, 1, 0));        /* 7: known to the fast path from here */
    OK(launch_step(s, p, 1, 0));        /* 22 */
    OK(cuStreamSynchronize(s));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(launch_step(s, p, 2, 0));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH(host, p, sizeof host));
    CHECK(host[0] == 22 && host[N - 1] == 22);
    OK(cuGraphInstantiate(&exec, graph, 0));
    OK(cuGraphLaunch(exec, s));
    OK(cuGraphLaunch(exec, s));
    OK(launch_step(s, p, 0, 0));        /* behind the graph's launches */
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH(host, p, sizeof host));
    CHECK(host[0] == ((22 * 3 + 2) * 3 + 2) * 3 && host[N - 1] == host[0]);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(graph));
    OK(cuStreamDestroy(s));
    OK(cuMemFree(p));
}

/* --- what the fast path must forget: attribute changes, unloaded libraries, destroyed contexts ------------- */
static void part_forget(void)
{
    CUdeviceptr p;
    uint32_t got = 0;
    OK(cuMemAlloc(&p, 64));
    void *args[] = {&p};
    OK(cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 1024, 0, args, NULL));
    OK(cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 2048, 0, args, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(&got, p, 4));
    CHECK(got == 2048);
    EXPECT(cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 60000, 0, args, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncSetAttribute(dynamic, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    OK(cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 60000, 0, args, NULL));
    OK(cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 65536, 0, args, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(&got, p, 4));
    CHECK(got == 65536);
    OK(cuFuncSetAttribute(dynamic, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0));
    EXPECT(cuLaunchKernel(dynamic, 1, 1, 1, 1, 1, 1, 60000, 0, args, NULL), CUDA_ERROR_INVALID_VALUE);

    /* a library's kernel (CUkernel, as cudart launches), then its library unloaded */
    CUlibrary lib;
    CUkernel kern;
    OK(cuLibraryLoadData(&lib, PTX, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&kern, lib, "poke"));
    for (int i = 0; i < 3; i++)
        OK(cuLaunchKernel((CUfunction)kern, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
    OK(cuCtxSynchronize());
    OK(cuLibraryUnload(lib));
    EXPECT(cuLaunchKernel((CUfunction)kern, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL), CUDA_ERROR_INVALID_HANDLE);

    /* another context: its own streams, its functions usable from the primary context until it goes */
    CUcontext other;
    CUmodule m;
    CUfunction other_step;
    CUdeviceptr q;
    OK(cuCtxCreate(&other, NULL, 0, dev));
    OK(cuModuleLoadData(&m, PTX));
    OK(cuModuleGetFunction(&other_step, m, "step"));
    OK(cuMemAlloc(&q, N * 4));
    OK(cuMemsetD32(q, 0, N));
    for (int i = 0; i < 5; i++) {
        uint32_t k = 1, n = N;
        OK(cuLaunchKernel(other_step, 2, 1, 1, 32, 1, 1, 0, 0, (void *[]){&q, &k, &n}, NULL));
    }
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(&got, q, 4));
    CHECK(got == 121);              /* ((((0*3+1)*3+1)*3+1)*3+1)*3+1 */
    OK(cuCtxPopCurrent(NULL));
    OK(cuCtxSetCurrent(primary));
    {
        uint32_t k = 0, n = N;
        OK(cuLaunchKernel(other_step, 2, 1, 1, 32, 1, 1, 0, 0, (void *[]){&q, &k, &n}, NULL));
        OK(cuLaunchKernel(other_step, 2, 1, 1, 32, 1, 1, 0, 0, (void *[]){&q, &k, &n}, NULL));
    }
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(&got, q, 4));
    CHECK(got == 121 * 9);
    OK(cuCtxDestroy(other));
    {
        uint32_t k = 0, n = N;
        EXPECT(cuLaunchKernel(other_step, 2, 1, 1, 32, 1, 1, 0, 0, (void *[]){&q, &k, &n}, NULL),
               CUDA_ERROR_INVALID_HANDLE);
    }
    OK(launch_step(0, p, 1, 0));
    OK(cuCtxSynchronize());
    OK(cuMemFree(p));
}

/* --- the cost of an empty launch + synchronize, printed (scripts/bench_api holds the figures) -------------- */
static void part_empty(void)
{
    for (int i = 0; i < 2000; i++) {
        OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
        OK(cuCtxSynchronize());
    }
}

int main(int argc, char **argv)
{
    static const struct { const char *name; void (*fn)(void); } parts[] = {
        {"order", part_order}, {"params", part_params}, {"async", part_async}, {"errors", part_errors},
        {"fault", part_fault}, {"trap", part_trap}, {"lazy", part_lazy}, {"threads", part_threads},
        {"threads_quiet", part_threads_quiet},
        {"capture", part_capture}, {"forget", part_forget}, {"empty", part_empty}};
    const char *part = argc > 1 ? argv[1] : "order";
    setup();
    int found = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!strcmp(part, parts[i].name)) {
            parts[i].fn();
            found = 1;
        }
    }
    CHECK(found);
    uint64_t s[3];
    served(s);
    printf("served %llu %llu %llu\n", (unsigned long long)s[0], (unsigned long long)s[1],
           (unsigned long long)s[2]);
    printf("%d checks, %d failed\n", checks, failures);
    if (!failures)
        printf("PASSED %s\n", part);
    return failures != 0;
}
