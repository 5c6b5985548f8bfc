/* The C fast path of cuMemAlloc / cuMemFree / the synchronous cuMemcpy forms (src/fastpath.c), through the
 * real libcuda.so.1: values, errors that must still come from the Python handlers, how allocations made in
 * C look to the rest of the driver, ordering behind busy streams, sticky errors, threads, leaks, contexts;
 * "getters" prints the getters' answers for the Python test to compare with the fast path off.
 * argv[1] selects one part ("all" runs each); prints "FAIL ..." per failed check and "PASSED <part>". */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The per-thread-default-stream exports, which cuda.h names only when compiling for them. */
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);

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
    ".visible .entry add_one(.param .u64 p, .param .u32 n)\n{\n"
    "  .reg .u32 %r<6>;\n  .reg .u64 %rd<4>;\n  .reg .pred %p1;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %tid.x;\n  mov.u32 %r3, %ctaid.x;\n  mov.u32 %r4, %ntid.x;\n"
    "  mad.lo.u32 %r2, %r3, %r4, %r2;\n  setp.ge.u32 %p1, %r2, %r1;\n  @%p1 bra DONE;\n"
    "  mul.wide.u32 %rd2, %r2, 4;\n  add.u64 %rd3, %rd1, %rd2;\n"
    "  ld.global.u32 %r5, [%rd3];\n  add.u32 %r5, %r5, 1;\n  st.global.u32 [%rd3], %r5;\n"
    "DONE:\n  ret;\n}\n"
    ".visible .entry spin_then_write(.param .u64 p, .param .u32 iters, .param .u32 value)\n{\n"
    "  .reg .u32 %r<6>;\n  .reg .u64 %rd<2>;\n  .reg .pred %p1;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [iters];\n  ld.param.u32 %r2, [value];\n"
    "  mov.u32 %r3, 0;\n  mov.u32 %r4, 1;\n"
    "LOOP:\n  setp.eq.u32 %p1, %r3, %r1;\n  @%p1 bra END;\n"
    "  mad.lo.u32 %r4, %r4, 1664525, 1013904223;\n  add.u32 %r3, %r3, 1;\n  bra LOOP;\n"
    "END:\n  st.global.u32 [%rd1+4], %r4;\n  st.global.u32 [%rd1], %r2;\n  ret;\n}\n"
    ".visible .entry trapper()\n{\n  trap;\n}\n";

static CUdevice dev;
static CUcontext primary;
static CUmodule module;
static CUfunction add_one, spin_then_write, trapper;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void load_module(void);

static void setup(void)
{
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&primary, dev));
    OK(cuCtxSetCurrent(primary));
    load_module();
}

/* Modules belong to the primary context: a reset unloads them. */
static void load_module(void)
{
    OK(cuModuleLoadData(&module, PTX));
    OK(cuModuleGetFunction(&add_one, module, "add_one"));
    OK(cuModuleGetFunction(&spin_then_write, module, "spin_then_write"));
    OK(cuModuleGetFunction(&trapper, module, "trapper"));
}

/* Every synchronous copy form, each value checked, outputs poisoned first. */
static void part_values(void)
{
    enum { N = 3000 };
    static uint32_t in[N], out[N];
    CUdeviceptr a, b;
    for (int i = 0; i < N; i++) in[i] = 0x9E3779B9u * (uint32_t)(i + 1);
    OK(cuMemAlloc(&a, sizeof in));
    OK(cuMemAlloc(&b, sizeof in));
    CHECK(a % 256 == 0 && b % 256 == 0 && a != b);
    OK(cuMemcpyHtoD(a, in, sizeof in));
    memset(out, 0xA5, sizeof out);
    OK(cuMemcpyDtoH(out, a, sizeof out));
    CHECK(memcmp(in, out, sizeof in) == 0);
    OK(cuMemcpyDtoD(b, a + 4, sizeof in - 4));              /* offsets inside both allocations */
    memset(out, 0xA5, sizeof out);
    OK(cuMemcpyDtoH(out, b, sizeof in - 4));
    CHECK(memcmp(in + 1, out, sizeof in - 4) == 0 && out[N - 1] == 0xA5A5A5A5u);
    OK(cuMemcpy(b, (CUdeviceptr)(uintptr_t)in, sizeof in)); /* unified addressing, host -> device */
    memset(out, 0xA5, sizeof out);
    OK(cuMemcpy((CUdeviceptr)(uintptr_t)out, b, sizeof in));
    CHECK(memcmp(in, out, sizeof in) == 0);
    memset(out, 0xA5, sizeof out);
    OK(cuMemcpy_ptds((CUdeviceptr)(uintptr_t)out, a, 12));
    CHECK(memcmp(in, out, 12) == 0 && out[3] == 0xA5A5A5A5u);
    OK(cuMemcpyHtoD_v2_ptds(a, in + 10, 8));
    OK(cuMemcpyDtoH_v2_ptds(out, a, 8));
    CHECK(out[0] == in[10] && out[1] == in[11]);
    OK(cuMemcpyDtoD_v2_ptds(b, a, 0));                       /* zero bytes: nothing, success */
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= in[i] == 0x9E3779B9u * (uint32_t)(i + 1);
    CHECK(ok);                                               /* sources untouched */
    OK(cuMemFree(a));
    OK(cuMemFree(b));
    OK(cuMemFree(0));                                        /* freeing NULL is a no-op, as in CUDA */
}

/* Errors: each falls to the Python handler, which returns the CUDA error and logs one line. */
static void part_errors(void)
{
    uint32_t word = 7;
    CUdeviceptr a, freed;
    OK(cuMemAlloc(&a, 64));
    OK(cuMemAlloc(&freed, 64));
    OK(cuMemFree(freed));
    EXPECT(cuMemcpyHtoD(freed, &word, 4), CUDA_ERROR_INVALID_VALUE);          /* freed */
    EXPECT(cuMemcpyDtoH(&word, freed, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)&word, &word, 4), CUDA_ERROR_INVALID_VALUE); /* foreign */
    EXPECT(cuMemcpyHtoD(a + 62, &word, 4), CUDA_ERROR_INVALID_VALUE);         /* short range */
    EXPECT(cuMemcpyDtoD(a, a + 32, 64), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyDtoH(NULL, a, 4), CUDA_ERROR_INVALID_VALUE);               /* NULL host pointer */
    void *hole = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(hole, 8192);
    EXPECT(cuMemcpyDtoH(hole, a, 4), CUDA_ERROR_INVALID_VALUE);               /* unmapped host memory */
    EXPECT(cuMemcpyHtoD(a, hole, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFree(freed), CUDA_ERROR_INVALID_VALUE);                       /* double free */
    EXPECT(cuMemFree(a + 16), CUDA_ERROR_INVALID_VALUE);                      /* not the start */
    EXPECT(cuMemFree((CUdeviceptr)(uintptr_t)&word), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc(&freed, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc(&freed, (size_t)1 << 62), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemFree(a));
    EXPECT(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
}

/* An allocation made in C, as the rest of the driver sees it; cuCtxDestroy frees what C allocated. */
static void part_visibility(void)
{
    size_t free0, total, free1, free2;
    CUdeviceptr a, base, m;
    size_t size;
    CUcontext owner = NULL;
    unsigned int mem_type = 0;
    CUdeviceptr start = 0;
    size_t range_size = 0;
    OK(cuMemAlloc(&a, 1 << 20));
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, a + 100));
    CHECK(owner == primary);
    OK(cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
    CHECK(mem_type == CU_MEMORYTYPE_DEVICE);
    OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 5));
    OK(cuPointerGetAttribute(&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 5));
    CHECK(start == a && range_size == 1 << 20);
    OK(cuMemGetAddressRange(&base, &size, a + 12345));
    CHECK(base == a && size == 1 << 20);
    OK(cuMemFree(a));                                         /* after Python took it over */
    EXPECT(cuMemGetAddressRange(&base, &size, a), CUDA_ERROR_NOT_FOUND);
    EXPECT(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, a), CUDA_ERROR_INVALID_VALUE);

    /* One allocator, one budget: 60% of the device taken by either path leaves no room for 60% more by
     * the other, and cuMemGetInfo shows it (the block is never touched, so the host has the memory). */
    OK(cuMemGetInfo(&free0, &total));
    size_t big = total / 10 * 6;
    CUresult r = cuMemAlloc(&a, big);
    if (r == CUDA_SUCCESS) {
        OK(cuMemGetInfo(&free1, &total));
        CHECK(free1 <= total - big);
        EXPECT(cuMemAllocManaged(&m, big, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
        OK(cuMemFree(a));
        OK(cuMemGetInfo(&free2, &total));
        CHECK(free2 > total - big);
        OK(cuMemAllocManaged(&m, big, CU_MEM_ATTACH_GLOBAL));
        EXPECT(cuMemAlloc(&a, big), CUDA_ERROR_OUT_OF_MEMORY);
        OK(cuMemFree(m));
    } else {
        printf("note: %zu bytes refused by the host (%d): budget checks skipped\n", big, (int)r);
    }

    /* a kernel over C-allocated memory */
    enum { N = 1000 };
    static uint32_t host[N];
    for (int i = 0; i < N; i++) host[i] = (uint32_t)i * 3u;
    OK(cuMemAlloc(&a, sizeof host));
    OK(cuMemcpyHtoD(a, host, sizeof host));
    unsigned n = N;
    void *params[] = {&a, &n};
    OK(cuLaunchKernel(add_one, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    memset(host, 0xA5, sizeof host);
    OK(cuMemcpyDtoH(host, a, sizeof host));
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= host[i] == (uint32_t)i * 3u + 1;
    CHECK(ok);
    OK(cuMemFree(a));

    /* cuCtxDestroy frees the memory the fast path allocated in it (the budget comes back) */
    CUcontext ctx;
    CUdeviceptr in_ctx[8];
    OK(cuCtxCreate(&ctx, NULL, 0, dev));
    for (int i = 0; i < 8; i++) OK(cuMemAlloc(&in_ctx[i], 1 << 20));
    OK(cuMemcpyHtoD(in_ctx[7], host, 16));
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, in_ctx[3]));
    CHECK(owner == ctx);
    OK(cuMemAlloc(&in_ctx[0], 256));                          /* C-only again after that lookup */
    r = cuMemAlloc(&in_ctx[1], big);
    OK(cuCtxDestroy(ctx));
    OK(cuCtxSetCurrent(primary));
    if (r == CUDA_SUCCESS) {
        OK(cuMemAlloc(&a, big));
        OK(cuMemFree(a));
    }
    EXPECT(cuMemFree(in_ctx[0]), CUDA_ERROR_INVALID_VALUE);   /* freed with its context */
    EXPECT(cuMemFree(in_ctx[5]), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD(in_ctx[7], host, 4), CUDA_ERROR_INVALID_VALUE);
}

/* Synchronous copies wait for work queued on blocking streams, as on the legacy stream of a GPU. */
static void slow_write(void *p)
{
    usleep(100 * 1000);
    *(volatile uint32_t *)p = 0xC0FFEEu;
}

static void part_ordering(void)
{
    CUstream s;
    CUdeviceptr a;
    uint32_t word = 0, zero = 0;
    OK(cuStreamCreate(&s, 0));
    OK(cuMemAlloc(&a, 64));
    OK(cuMemcpyHtoD(a, &zero, 4));
    OK(cuLaunchHostFunc(s, slow_write, (void *)(uintptr_t)a));
    double t0 = now_s();
    OK(cuMemcpyDtoH(&word, a, 4));
    CHECK(word == 0xC0FFEEu);
    CHECK(now_s() - t0 > 0.05);

    /* a long kernel on another blocking stream, then a synchronous copy of what it writes */
    unsigned iters = 20 * 1000 * 1000, value = 0xBEEF;
    uint32_t pair[2] = {0, 0};
    OK(cuMemcpyHtoD(a, pair, 8));
    void *params[] = {&a, &iters, &value};
    OK(cuLaunchKernel(spin_then_write, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    OK(cuMemcpyDtoH(pair, a, 8));
    CHECK(pair[0] == 0xBEEF);
    /* and a host function that frees nothing but holds the stream: cuMemFree waits too */
    OK(cuLaunchHostFunc(s, slow_write, (void *)(uintptr_t)a));
    OK(cuMemFree(a));
    OK(cuStreamSynchronize(s));
    OK(cuStreamDestroy(s));
}

/* After a kernel traps, a synchronous copy (and everything else) returns the sticky error. */
static void part_sticky(void)
{
    CUstream s;
    CUdeviceptr a, b;
    uint32_t word = 1;
    OK(cuMemAlloc(&a, 64));
    OK(cuStreamCreate(&s, 0));
    OK(cuLaunchKernel(trapper, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    EXPECT(cuMemcpyHtoD(a, &word, 4), CUDA_ERROR_LAUNCH_FAILED);
    EXPECT(cuMemcpyDtoH(&word, a, 4), CUDA_ERROR_LAUNCH_FAILED);
    EXPECT(cuMemAlloc(&b, 64), CUDA_ERROR_LAUNCH_FAILED);
    EXPECT(cuMemFree(a), CUDA_ERROR_LAUNCH_FAILED);
    /* a reset does not clear it: as on NVIDIA's driver, the process can make no context any more */
    OK(cuDevicePrimaryCtxReset(dev));
    EXPECT(cuDevicePrimaryCtxRetain(&primary, dev), CUDA_ERROR_LAUNCH_FAILED);
    CHECK(cuMemAlloc(&b, 64) != CUDA_SUCCESS);     /* the reset context is not usable either */
}

/* The same, when the trap is seen only by the copy (nothing queued in between). */
static void part_sticky_idle(void)
{
    CUstream s;
    CUdeviceptr a;
    uint32_t word = 1;
    OK(cuStreamCreate(&s, 0));
    OK(cuMemAlloc(&a, 64));
    OK(cuLaunchKernel(trapper, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    usleep(200 * 1000);                                       /* the stream is idle again by now */
    EXPECT(cuMemcpyDtoH(&word, a, 4), CUDA_ERROR_LAUNCH_FAILED);
    EXPECT(cuMemcpyHtoD(a, &word, 4), CUDA_ERROR_LAUNCH_FAILED);
}

/* Eight threads allocating, copying and freeing at once, each checking its own values. */
static void *thread_body(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint32_t in[64], out[64];
    if (cuCtxSetCurrent(primary) != CUDA_SUCCESS) return (void *)1;
    for (int round = 0; round < 2000; round++) {
        CUdeviceptr p[3];
        for (int k = 0; k < 3; k++)
            if (cuMemAlloc(&p[k], 256 * (k + 1)) != CUDA_SUCCESS) return (void *)2;
        for (int i = 0; i < 64; i++) in[i] = (uint32_t)(id * 1000003 + round * 64 + i);
        memset(out, 0xA5, sizeof out);
        if (cuMemcpyHtoD(p[1], in, sizeof in) || cuMemcpyDtoD(p[2], p[1], sizeof in) ||
            cuMemcpyDtoH(out, p[2], sizeof out))
            return (void *)3;
        if (memcmp(in, out, sizeof in) != 0) return (void *)4;
        if (round % 500 == 0) {                               /* some Python lookups in between */
            CUdeviceptr base;
            size_t size;
            if (cuMemGetAddressRange(&base, &size, p[0] + 10) || base != p[0] || size != 256) return (void *)5;
        }
        for (int k = 0; k < 3; k++)
            if (cuMemFree(p[k]) != CUDA_SUCCESS) return (void *)6;
    }
    return NULL;
}

static void part_threads(void)
{
    pthread_t t[8];
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, thread_body, (void *)(intptr_t)i);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r) printf("thread %d failed at step %d\n", i, (int)(intptr_t)r);
        CHECK(r == NULL);
    }
}

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void part_leaks(void)
{
    size_t free0, free1, total;
    uint32_t word = 5;
    for (int i = 0; i < 1000; i++) {
        CUdeviceptr p;
        OK(cuMemAlloc(&p, 1 + (i % 8192)));
        OK(cuMemFree(p));
    }
    long rss0 = rss_kb();
    OK(cuMemGetInfo(&free0, &total));
    for (int i = 0; i < 10000; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 4 + (i % 8192)) || cuMemcpyHtoD(p, &word, 4) || cuMemFree(p)) {
            printf("FAIL alloc/copy/free round %d\n", i);
            failures++;
            break;
        }
    }
    long rss1 = rss_kb();
    OK(cuMemGetInfo(&free1, &total));
    printf("leak check: RSS %ld -> %ld KiB\n", rss0, rss1);
    CHECK(rss1 - rss0 < 4 * 1024);
    CHECK(free1 + ((size_t)16 << 20) >= free0);
}

/* No context, a destroyed context, another thread's context: the errors CUDA gives. */
static CUcontext shared_ctx;
static volatile int step;

static void *no_context_thread(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    uint32_t word = 0;
    CUresult r1 = cuMemAlloc(&p, 64), r2 = cuMemcpyDtoH(&word, 4096, 4), r3 = cuMemFree(4096);
    return (void *)(intptr_t)(r1 == CUDA_ERROR_INVALID_CONTEXT && r2 == CUDA_ERROR_INVALID_CONTEXT &&
                              r3 == CUDA_ERROR_INVALID_CONTEXT);
}

static void *destroyed_context_thread(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    uint32_t word = 0;
    if (cuCtxSetCurrent(shared_ctx) != CUDA_SUCCESS || cuMemAlloc(&p, 64) != CUDA_SUCCESS ||
        cuMemcpyHtoD(p, &word, 4) != CUDA_SUCCESS)
        return (void *)0;
    step = 1;
    while (step != 2) usleep(1000);
    CUresult r1 = cuMemAlloc(&p, 64), r2 = cuMemcpyHtoD(p, &word, 4), r3 = cuMemFree(p);
    return (void *)(intptr_t)(r1 == CUDA_ERROR_CONTEXT_IS_DESTROYED && r2 == CUDA_ERROR_CONTEXT_IS_DESTROYED &&
                              r3 == CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

static void part_contexts(void)
{
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, no_context_thread, NULL);
    pthread_join(t, &r);
    CHECK(r == (void *)1);

    OK(cuCtxCreate(&shared_ctx, NULL, 0, dev));
    OK(cuCtxPopCurrent(NULL));
    pthread_create(&t, NULL, destroyed_context_thread, NULL);
    while (step != 1) usleep(1000);
    OK(cuCtxDestroy(shared_ctx));
    step = 2;
    pthread_join(t, &r);
    CHECK(r == (void *)1);

    /* push / pop: allocations land in the context on top */
    CUcontext other, owner;
    CUdeviceptr a, b;
    OK(cuCtxSetCurrent(primary));
    OK(cuMemAlloc(&a, 64));
    OK(cuCtxCreate(&other, NULL, 0, dev));                          /* pushed */
    OK(cuMemAlloc(&b, 64));
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, b));
    CHECK(owner == other);
    OK(cuCtxPopCurrent(NULL));
    OK(cuMemAlloc(&b, 64));
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, b));
    CHECK(owner == primary);
    OK(cuCtxPushCurrent(other));
    OK(cuCtxDestroy(other));
    OK(cuMemFree(a));
    OK(cuMemFree(b));
    OK(cuCtxSetCurrent(NULL));
    EXPECT(cuMemAlloc(&a, 64), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuMemcpyHtoD(4096, &a, 4), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxSetCurrent(primary));
}

/* While a stream captures, copies go through Python: a _ptds copy on the capturing per-thread stream is
 * recorded into the graph (it runs when the graph is launched), not done at once. */
static void part_capture(void)
{
    CUdeviceptr a;
    CUgraph graph;
    CUgraphExec exec;
    uint32_t word = 0x1234, out = 0;
    OK(cuMemAlloc(&a, 64));
    OK(cuMemsetD32(a, 0, 16));
    OK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuMemcpyHtoD_v2_ptds(a, &word, 4));
    OK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &graph));
    OK(cuMemcpyDtoH(&out, a, 4));
    CHECK(out == 0);
    OK(cuGraphInstantiate(&exec, graph, 0));
    OK(cuGraphLaunch(exec, CU_STREAM_PER_THREAD));
    OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    OK(cuMemcpyDtoH(&out, a, 4));
    CHECK(out == 0x1234);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(graph));
    OK(cuMemFree(a));
}

/* The getters, printed one line per call ("<call> <code> <value>", the output poisoned first) for
 * tests/driver/test_fastpath.py to compare with the same program run with the fast path off: before
 * cuInit, every attribute number of every device (and bad ones), NULL outputs, with and without a context.
 * Each table is printed twice: the first calls publish the table to C, the second are answered there. */
#define POISON 0x5a5a5a5a
#define SHOW(name, call, out)                                                               \
    do {                                                                                    \
        out = POISON;                                                                       \
        CUresult r_ = (call);                                                               \
        printf("%s %d %d\n", name, (int)r_, (int)out);                                      \
    } while (0)

static void getters_table(const char *round)
{
    int v, n = 0;
    CUdevice d;
    printf("round %s\n", round);
    SHOW("version", cuDriverGetVersion(&v), v);
    printf("version-null %d\n", (int)cuDriverGetVersion(NULL));
    SHOW("count", cuDeviceGetCount(&n), n);
    printf("count-null %d\n", (int)cuDeviceGetCount(NULL));
    if (n < 0 || n > 64)
        n = 0;          /* the poison: no cuInit yet */
    for (int o = -2; o <= n + 1; o++) {
        char name[64];
        snprintf(name, sizeof name, "get %d", o);
        SHOW(name, cuDeviceGet(&d, o), d);
        printf("get-null %d %d\n", o, (int)cuDeviceGet(NULL, o));
    }
    static const int odd[] = {-1, 0, 148, 200, 1000, 4095, 4096, 0x7fffffff, (int)0x80000000};
    for (int dv = -1; dv <= n; dv++) {
        for (int a = 1; a <= 160; a++) {
            char name[64];
            snprintf(name, sizeof name, "attr %d %d", dv, a);
            SHOW(name, cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dv), v);
        }
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "attr %d %d", dv, odd[i]);
            SHOW(name, cuDeviceGetAttribute(&v, (CUdevice_attribute)odd[i], dv), v);
        }
        printf("attr-null %d %d\n", dv, (int)cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dv));
    }
    SHOW("ctxdev", cuCtxGetDevice(&d), d);
    printf("ctxdev-null %d\n", (int)cuCtxGetDevice(NULL));
}

static int part_getters(void)
{
    getters_table("before-init");
    OK(cuInit(0));
    getters_table("no-context-1");
    getters_table("no-context-2");
    int n = 0;
    OK(cuDeviceGetCount(&n));
    for (int o = n - 1; o >= 0; o--) {
        CUcontext c;
        char round[64];
        OK(cuDevicePrimaryCtxRetain(&c, o));
        OK(cuCtxSetCurrent(c));
        snprintf(round, sizeof round, "context-%d", o);
        getters_table(round);
        getters_table(round);
    }
    /* A destroyed current context: Python's answer either way. */
    CUcontext own;
    OK(cuCtxCreate(&own, NULL, 0, 0));
    getters_table("own-context");
    OK(cuCtxDestroy(own));
    getters_table("destroyed-context");
    getters_table("destroyed-context");
    printf("%d checks, %d failed\n", checks, failures);
    if (failures) return 1;
    printf("PASSED getters\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *part = argc > 1 ? argv[1] : "all";
    if (strcmp(part, "getters") == 0)
        return part_getters();      /* it starts before cuInit */
    CUdeviceptr p;
    EXPECT(cuMemAlloc(&p, 64), CUDA_ERROR_NOT_INITIALIZED);
    setup();
    static const struct { const char *name; void (*fn)(void); } parts[] = {
        {"values", part_values}, {"errors", part_errors}, {"visibility", part_visibility},
        {"ordering", part_ordering}, {"sticky", part_sticky}, {"sticky_idle", part_sticky_idle},
        {"threads", part_threads},
        {"leaks", part_leaks}, {"contexts", part_contexts}, {"capture", part_capture}
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (strcmp(part, "all") == 0 || strcmp(part, parts[i].name) == 0) {
            parts[i].fn();
            ran++;
        }
    }
    if (!ran) {
        printf("unknown part %s\n", part);
        return 2;
    }
    printf("%d checks, %d failed\n", checks, failures);
    if (failures) return 1;
    printf("PASSED %s\n", part);
    return 0;
}
