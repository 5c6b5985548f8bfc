/* Graph memory nodes through the real libcuda.so.1 from a C host: allocation and free nodes around kernels,
 * the address a later allocation reuses, allocations that outlive their launch, the footprint the graph
 * pool reports and how launches share its physical memory, and stream-captured cuMemAllocAsync/FreeAsync.
 * Prints one "name value" line per check; tests/driver/test_graph_mem.py holds them to CUDA's rules.
 * argv[1]: a seed for the data. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d\n", #call, r_); \
    exit(1); } } while (0)
#define MIB (1ull << 20)

static const char *PTX =
    ".version 8.0\n.target sm_86\n.address_size 64\n"
    ".visible .entry fill(.param .u64 p, .param .u32 n, .param .u32 seed)\n{\n"
    ".reg .u32 %i, %n, %s, %v; .reg .u64 %a; .reg .pred %q;\n"
    "mov.u32 %i, %ctaid.x; mov.u32 %v, %ntid.x; mad.lo.u32 %i, %i, %v, %tid.x;\n"
    "ld.param.u32 %n, [n]; setp.ge.u32 %q, %i, %n; @%q bra $E;\n"
    "ld.param.u32 %s, [seed]; mad.lo.u32 %v, %i, -1640531535, %s;\n"
    "ld.param.u64 %a, [p]; mad.wide.u32 %a, %i, 4, %a; st.global.u32 [%a], %v;\n$E:\nret;\n}\n"
    ".visible .entry xform(.param .u64 src, .param .u64 dst, .param .u32 n)\n{\n"
    ".reg .u32 %i, %n, %v; .reg .u64 %a, %b; .reg .pred %q;\n"
    "mov.u32 %i, %ctaid.x; mov.u32 %v, %ntid.x; mad.lo.u32 %i, %i, %v, %tid.x;\n"
    "ld.param.u32 %n, [n]; setp.ge.u32 %q, %i, %n; @%q bra $E;\n"
    "ld.param.u64 %a, [src]; mad.wide.u32 %a, %i, 4, %a; ld.global.u32 %v, [%a];\n"
    "xor.b32 %v, %v, 1515870810;\n"
    "ld.param.u64 %b, [dst]; mad.wide.u32 %b, %i, 4, %b; st.global.u32 [%b], %v;\n$E:\nret;\n}\n";

static CUfunction fill_fn, xform_fn;
static CUdevice dev;
static unsigned seed;

static uint32_t expect_fill(unsigned s, unsigned i) { return s + i * 2654435761u; }

static void alloc_params(CUDA_MEM_ALLOC_NODE_PARAMS *p, size_t bytes)
{
    memset(p, 0, sizeof *p);
    p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->poolProps.location.id = dev;
    p->bytesize = bytes;
}

static CUgraphNode add_alloc(CUgraph g, const CUgraphNode *deps, size_t nd, size_t bytes, CUdeviceptr *dptr)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    CUgraphNode n;
    alloc_params(&p, bytes);
    OK(cuGraphAddMemAllocNode(&n, g, deps, nd, &p));
    *dptr = p.dptr;
    return n;
}

static CUgraphNode add_kernel(CUgraph g, const CUgraphNode *deps, size_t nd, CUfunction f, void **args,
                              unsigned n)
{
    CUDA_KERNEL_NODE_PARAMS k;
    CUgraphNode node;
    memset(&k, 0, sizeof k);
    k.func = f;
    k.gridDimX = (n + 127) / 128; k.gridDimY = k.gridDimZ = 1;
    k.blockDimX = 128; k.blockDimY = k.blockDimZ = 1;
    k.kernelParams = args;
    OK(cuGraphAddKernelNode(&node, g, deps, nd, &k));
    return node;
}

static int check_fill(const uint32_t *h, unsigned n, unsigned s, uint32_t x)
{
    for (unsigned i = 0; i < n; i++)
        if (h[i] != (expect_fill(s, i) ^ x)) return 0;
    return 1;
}

static uint64_t attr(CUgraphMem_attribute a)
{
    cuuint64_t v = 0;
    OK(cuDeviceGetGraphMemAttribute(dev, a, &v));
    return v;
}

/* a host function that holds its stream until released: the launches behind it stay queued */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;
static void CUDA_CB gate(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate_lock);
    while (!gate_open) pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
}

/* a graph: an allocation of `bytes` freed at once (its footprint is all it does) */
static CUgraphExec alloc_free_graph(size_t bytes, CUdeviceptr *dptr)
{
    CUgraph g; CUgraphNode a, f; CUgraphExec x;
    OK(cuGraphCreate(&g, 0));
    a = add_alloc(g, NULL, 0, bytes, dptr);
    OK(cuGraphAddMemFreeNode(&f, g, &a, 1, *dptr));
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphDestroy(g));
    return x;
}

int main(int argc, char **argv)
{
    CUcontext ctx;
    CUmodule mod;
    CUstream s, s2;
    seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&fill_fn, mod, "fill"));
    OK(cuModuleGetFunction(&xform_fn, mod, "xform"));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    OK(cuDeviceGraphMemTrim(dev));
    printf("start_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));

    /* 1. alloc -> fill -> xform into plain memory -> free, launched with three seeds */
    unsigned n = 5000 + seed % 3000;
    uint32_t *host = malloc(n * 4);
    CUdeviceptr out, a;
    OK(cuMemAlloc(&out, n * 4));
    {
        CUgraph g; CUgraphNode an, k1, k2, fn; CUgraphExec x;
        OK(cuGraphCreate(&g, 0));
        an = add_alloc(g, NULL, 0, n * 4, &a);
        unsigned s0 = seed;
        void *fa[] = {&a, &n, &s0};
        k1 = add_kernel(g, &an, 1, fill_fn, fa, n);
        void *xa[] = {&a, &out, &n};
        k2 = add_kernel(g, &k1, 1, xform_fn, xa, n);
        OK(cuGraphAddMemFreeNode(&fn, g, &k2, 1, a));
        OK(cuGraphInstantiateWithFlags(&x, g, 0));
        int good = 1;
        for (int round = 0; round < 3; round++) {
            unsigned sr = seed * 7 + round;
            void *fr[] = {&a, &n, &sr};
            CUDA_KERNEL_NODE_PARAMS k;
            memset(&k, 0, sizeof k);
            k.func = fill_fn; k.gridDimX = (n + 127) / 128; k.gridDimY = k.gridDimZ = 1;
            k.blockDimX = 128; k.blockDimY = k.blockDimZ = 1; k.kernelParams = fr;
            OK(cuGraphExecKernelNodeSetParams(x, k1, &k));
            OK(cuMemsetD32(out, 0, n));
            OK(cuGraphLaunch(x, s));
            OK(cuStreamSynchronize(s));
            OK(cuMemcpyDtoH(host, out, n * 4));
            good &= check_fill(host, n, sr, 0x5A5A5A5A);
        }
        printf("kernels_between_alloc_and_free %d\n", good);
        printf("freed_in_graph_cuMemFree %d\n", cuMemFree(a));
        OK(cuGraphExecDestroy(x));
        OK(cuGraphDestroy(g));
    }

    /* 2. a later allocation that depends on an earlier free takes its address; an unordered one does not */
    {
        CUgraph g; CUgraphNode a1, f1, a2, a3; CUdeviceptr d1, d2, d3;
        OK(cuGraphCreate(&g, 0));
        a1 = add_alloc(g, NULL, 0, 3 * MIB, &d1);
        OK(cuGraphAddMemFreeNode(&f1, g, &a1, 1, d1));
        a2 = add_alloc(g, &f1, 1, 2 * MIB, &d2);
        a3 = add_alloc(g, NULL, 0, 2 * MIB, &d3);
        (void)a2; (void)a3;
        printf("va_reused %d\n", d1 == d2);
        printf("va_unordered_distinct %d\n", d3 != d1);
        OK(cuGraphDestroy(g));
    }

    /* 3. an allocation that outlives its launch: readable after it, blocks a relaunch until freed */
    {
        CUgraph g; CUgraphNode un, k; CUgraphExec x; CUdeviceptr u;
        OK(cuGraphCreate(&g, 0));
        un = add_alloc(g, NULL, 0, n * 4, &u);
        unsigned s1 = seed ^ 0x1234;
        void *fa[] = {&u, &n, &s1};
        k = add_kernel(g, &un, 1, fill_fn, fa, n);
        (void)k;
        OK(cuGraphInstantiateWithFlags(&x, g, 0));
        OK(cuGraphLaunch(x, s));
        OK(cuStreamSynchronize(s));
        OK(cuMemcpyDtoH(host, u, n * 4));
        printf("unfreed_data %d\n", check_fill(host, n, s1, 0));
        printf("unfreed_relaunch %d\n", cuGraphLaunch(x, s));
        OK(cuMemFreeAsync(u, s));
        printf("relaunch_after_free_async %d\n", cuGraphLaunch(x, s));
        OK(cuStreamSynchronize(s));
        /* the executable and graph go; the allocation stays until freed */
        OK(cuGraphExecDestroy(x));
        OK(cuGraphDestroy(g));
        memset(host, 0, n * 4);
        OK(cuMemcpyDtoH(host, u, n * 4));
        printf("outlives_graph_data %d\n", check_fill(host, n, s1, 0));
        printf("outlives_graph_free %d\n", cuMemFree(u));
        printf("outlives_graph_free_twice %d\n", cuMemFree(u));
    }
    {
        CUgraph g; CUgraphNode un; CUgraphExec x; CUdeviceptr u;
        OK(cuGraphCreate(&g, 0));
        un = add_alloc(g, NULL, 0, 4096, &u);
        (void)un;
        OK(cuGraphInstantiateWithFlags(&x, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
        OK(cuGraphLaunch(x, s));
        printf("autofree_relaunch %d\n", cuGraphLaunch(x, s));
        OK(cuStreamSynchronize(s));
        printf("autofree_free %d\n", cuMemFree(u));
        OK(cuGraphExecDestroy(x));
        OK(cuGraphDestroy(g));
    }

    /* 4. the footprint: blocks of 32 MiB, kept until trimmed, high watermark resettable to the current */
    OK(cuCtxSynchronize());
    OK(cuDeviceGraphMemTrim(dev));
    printf("trimmed_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
    {
        CUdeviceptr d;
        CUgraphExec big = alloc_free_graph(64 * MIB, &d), small = alloc_free_graph(1000, &d);
        printf("instantiated_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
        OK(cuGraphLaunch(big, s));
        OK(cuStreamSynchronize(s));
        printf("big_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
        printf("big_reserved %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT));
        OK(cuDeviceGraphMemTrim(dev));
        OK(cuGraphLaunch(small, s));
        OK(cuStreamSynchronize(s));
        printf("small_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
        printf("high %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH));
        cuuint64_t zero = 0;
        OK(cuDeviceSetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
        printf("high_reset %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH));
        OK(cuGraphExecDestroy(big));
        OK(cuGraphExecDestroy(small));
        OK(cuDeviceGraphMemTrim(dev));
    }

    /* 5. physical memory shared by launches: in one stream one block serves them all; another stream
     * gets its own while the first stream's frees have not run, and shares once they have */
    {
        CUdeviceptr d[4];
        CUgraphExec x[4];
        int distinct = 1;
        for (int i = 0; i < 4; i++) x[i] = alloc_free_graph(40 * MIB, &d[i]);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < i; j++) distinct &= d[i] != d[j];
        printf("graphs_distinct_va %d\n", distinct);
        OK(cuLaunchHostFunc(s, gate, NULL));
        for (int i = 0; i < 3; i++) OK(cuGraphLaunch(x[i], s));
        printf("one_stream_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
        OK(cuGraphLaunch(x[3], s2));
        printf("second_stream_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
        pthread_mutex_lock(&gate_lock);
        gate_open = 1;
        pthread_cond_broadcast(&gate_cond);
        pthread_mutex_unlock(&gate_lock);
        OK(cuCtxSynchronize());
        OK(cuDeviceGraphMemTrim(dev));
        OK(cuGraphLaunch(x[0], s));
        OK(cuStreamSynchronize(s));
        OK(cuGraphLaunch(x[3], s2));
        OK(cuStreamSynchronize(s2));
        printf("after_completion_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
        for (int i = 0; i < 4; i++) OK(cuGraphExecDestroy(x[i]));
        OK(cuDeviceGraphMemTrim(dev));
        printf("end_used %llu\n", (unsigned long long)attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
    }

    /* 6. the sharing is real memory: a graph that reads its fresh allocation, launched after one that
     * wrote and freed its own on the same stream, reads that data (CUDA leaves it undefined; here it
     * shows that the two addresses map the same pages) */
    {
        CUgraph g1, g2; CUgraphNode w1, k1, f1, r2, k2, f2; CUgraphExec x1, x2; CUdeviceptr p1, p2;
        unsigned s3 = seed + 99;
        OK(cuGraphCreate(&g1, 0));
        w1 = add_alloc(g1, NULL, 0, n * 4, &p1);
        void *fa[] = {&p1, &n, &s3};
        k1 = add_kernel(g1, &w1, 1, fill_fn, fa, n);
        OK(cuGraphAddMemFreeNode(&f1, g1, &k1, 1, p1));
        OK(cuGraphCreate(&g2, 0));
        r2 = add_alloc(g2, NULL, 0, n * 4, &p2);
        void *xa[] = {&p2, &out, &n};
        k2 = add_kernel(g2, &r2, 1, xform_fn, xa, n);
        OK(cuGraphAddMemFreeNode(&f2, g2, &k2, 1, p2));
        OK(cuGraphInstantiateWithFlags(&x1, g1, 0));
        OK(cuGraphInstantiateWithFlags(&x2, g2, 0));
        OK(cuGraphLaunch(x1, s));
        OK(cuGraphLaunch(x2, s));
        OK(cuStreamSynchronize(s));
        OK(cuMemcpyDtoH(host, out, n * 4));
        printf("shared_pages %d\n", p1 != p2 && check_fill(host, n, s3, 0x5A5A5A5A));
        OK(cuGraphExecDestroy(x1)); OK(cuGraphExecDestroy(x2));
        OK(cuGraphDestroy(g1)); OK(cuGraphDestroy(g2));
    }

    /* 7. stream capture: cuMemAllocAsync / cuMemFreeAsync become allocation and free nodes */
    {
        CUgraph g; CUgraphExec x; CUdeviceptr p, plain;
        CUgraphNode nodes[8];
        size_t count = 8;
        unsigned s4 = seed * 3;
        OK(cuMemAlloc(&plain, 64));
        OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        OK(cuMemAllocAsync(&p, n * 4, s));
        void *fa[] = {&p, &n, &s4};
        OK(cuLaunchKernel(fill_fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, s, fa, NULL));
        OK(cuMemcpyDtoDAsync(out, p, n * 4, s));
        OK(cuMemFreeAsync(p, s));
        printf("capture_free_plain %d\n", cuMemFreeAsync(plain, s));
        CUstreamCaptureStatus st;
        OK(cuStreamIsCapturing(s, &st));
        printf("capture_still_active %d\n", st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
        OK(cuStreamEndCapture(s, &g));
        OK(cuGraphGetNodes(g, nodes, &count));
        printf("captured_nodes %zu\n", count);
        for (size_t i = 0; i < count; i++) {
            CUgraphNodeType t;
            OK(cuGraphNodeGetType(nodes[i], &t));
            printf("captured_type%zu %d\n", i, (int)t);
        }
        OK(cuGraphInstantiateWithFlags(&x, g, 0));
        OK(cuMemsetD32(out, 0, n));
        OK(cuGraphLaunch(x, s));
        OK(cuStreamSynchronize(s));
        OK(cuMemcpyDtoH(host, out, n * 4));
        printf("captured_data %d\n", check_fill(host, n, s4, 0));
        OK(cuGraphExecDestroy(x));
        OK(cuGraphDestroy(g));
        OK(cuMemFree(plain));
    }
    OK(cuMemFree(out));
    free(host);
    printf("ok 0\n");
    return 0;
}
