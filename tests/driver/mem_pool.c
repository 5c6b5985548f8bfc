/* ZLUDA_MEM_POOL through the real libcuda.so.1 from a C host: prints, one "name value" line each, the
 * resident memory (kB, /proc/self/statm) around 32 allocations of
 * 1 MiB (every page touched) freed with cuMemFree, freed again after cuMemAllocAsync/cuMemFreeAsync, after
 * cuMemPoolTrimTo and after a context's destroy; and how many second-round allocations got a first-round
 * address back. tests/driver/test_streams_pool.py holds the numbers to what each setting promises. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CUDA 13's cuda.h maps cuCtxCreate to _v4 (with create params); the plain form is enough here */
#undef cuCtxCreate
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
#define cuCtxCreate cuCtxCreate_v2

#define N 32
#define SIZE (1u << 20)
#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d\n", #call, r_); exit(1); } } while (0)

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * 4;
}

static void touch(CUdeviceptr *p)
{
    for (int i = 0; i < N; i++) memset((void *)(uintptr_t)p[i], i + 1, SIZE);
}

static void report(const char *name)
{
    printf("%s_rss %ld\n", name, rss_kb());
}

static int reused(const CUdeviceptr *a, const CUdeviceptr *b)
{
    int n = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) n += a[i] == b[j];
    return n;
}

int main(void)
{
    CUdevice dev;
    CUcontext primary, ctx;
    CUmemoryPool pool;
    CUstream s;
    CUdeviceptr p[N], q[N];
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&primary, dev));
    OK(cuCtxSetCurrent(primary));
    OK(cuDeviceGetDefaultMemPool(&pool, dev));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < N; i++) {     /* warm-up: the driver's own first-use memory is not ours to count */
        OK(cuMemAlloc(&p[i], 4096));
        OK(cuMemFree(p[i]));
    }
    report("start");

    for (int i = 0; i < N; i++) OK(cuMemAlloc(&p[i], SIZE));
    touch(p);
    report("allocated");
    for (int i = 0; i < N; i++) OK(cuMemFree(p[i]));
    report("freed");
    for (int i = 0; i < N; i++) OK(cuMemAlloc(&q[i], SIZE));
    printf("reused %d\n", reused(p, q));
    touch(q);
    for (int i = 0; i < N; i++) OK(cuMemFree(q[i]));
    OK(cuMemPoolTrimTo(pool, 0));
    report("trimmed");

    for (int i = 0; i < N; i++) OK(cuMemAllocAsync(&p[i], SIZE, s));
    OK(cuStreamSynchronize(s));
    touch(p);
    for (int i = 0; i < N; i++) OK(cuMemFreeAsync(p[i], s));
    OK(cuStreamSynchronize(s));
    report("async_freed");
    for (int i = 0; i < N; i++) OK(cuMemAllocAsync(&q[i], SIZE, s));
    printf("async_reused %d\n", reused(p, q));
    for (int i = 0; i < N; i++) OK(cuMemFreeAsync(q[i], s));
    OK(cuStreamSynchronize(s));
    OK(cuMemPoolTrimTo(pool, 0));
    report("async_trimmed");

    /* a context of its own: what its frees left pooled goes back when it is destroyed */
    OK(cuCtxCreate(&ctx, 0, dev));
    for (int i = 0; i < N; i++) OK(cuMemAlloc(&p[i], SIZE));
    touch(p);
    for (int i = 0; i < N; i++) OK(cuMemFree(p[i]));
    report("ctx_freed");
    OK(cuCtxDestroy(ctx));
    report("ctx_destroyed");
    printf("ALL DONE\n");
    return 0;
}
