// Probe of what NVIDIA's driver answers for thread-block clusters in CUDA graphs, and where: kernel nodes of a
// __cluster_dims__ kernel and nodes given a cluster-dimension attribute (the codes of cudaGraphAddKernelNode,
// cudaGraphKernelNodeSetAttribute/GetAttribute, cudaGraphInstantiate, cudaGraphLaunch and the sync, and the
// rank | size << 8 each CTA wrote), attributes of a fresh node, unknown ids, a captured cluster launch, and a
// cooperative launch of clusters. Prints JSON. Build: nvcc -arch=sm_90 -o probe scripts/nvidia_graph_cluster_probe.cu
// Not yet run on NVIDIA hardware (no device could be had the session it was written): its answers are to become
// test data for zluda_py/driver/graph_kernel.py, which reports a bad shape at instantiation by choice.
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__global__ void __cluster_dims__(2, 1, 1) fixed2(unsigned *out) {
    cg::cluster_group c = cg::this_cluster();
    if (threadIdx.x == 0) out[blockIdx.x] = c.block_rank() | c.num_blocks() << 8;
}
__global__ void plain(unsigned *out) {
    cg::cluster_group c = cg::this_cluster();
    if (threadIdx.x == 0) out[blockIdx.x] = c.block_rank() | c.num_blocks() << 8;
}

static unsigned *d_out;
static void show(const char *what) {
    unsigned h[8];
    cudaMemcpy(h, d_out, sizeof h, cudaMemcpyDeviceToHost);
    printf("\"%s_out\": [", what);
    for (int i = 0; i < 8; i++) printf("%u%s", h[i], i < 7 ? ", " : "");
    printf("],\n");
    cudaMemset(d_out, 0xff, 32);
}

static void run(const char *name, void *fn, int grid, int setattr, unsigned cx, unsigned cy, int coop) {
    cudaGraph_t g; cudaGraphExec_t ge; cudaGraphNode_t n;
    cudaStreamSynchronize(0);
    cudaGetLastError();
    cudaGraphCreate(&g, 0);
    cudaKernelNodeParams p = {};
    void *args[] = {&d_out};
    p.func = fn; p.gridDim = dim3(grid); p.blockDim = dim3(32); p.kernelParams = args;
    int e_add = cudaGraphAddKernelNode(&n, g, nullptr, 0, &p);
    int e_set = -1, e_get = -1, e_coop = -1;
    cudaLaunchAttributeValue v = {}, r = {};
    if (setattr) {
        v.clusterDim.x = cx; v.clusterDim.y = cy; v.clusterDim.z = 1;
        e_set = cudaGraphKernelNodeSetAttribute(n, cudaLaunchAttributeClusterDimension, &v);
        memset(&r, 0x5a, sizeof r);
        e_get = cudaGraphKernelNodeGetAttribute(n, cudaLaunchAttributeClusterDimension, &r);
    }
    if (coop) {
        cudaLaunchAttributeValue c = {}; c.cooperative = 1;
        e_coop = cudaGraphKernelNodeSetAttribute(n, cudaLaunchAttributeCooperative, &c);
    }
    int e_inst = cudaGraphInstantiate(&ge, g, 0);
    int e_launch = -1, e_sync = -1;
    if (!e_inst) { e_launch = cudaGraphLaunch(ge, 0); e_sync = cudaStreamSynchronize(0); }
    printf("\"%s\": {\"add\": %d, \"set\": %d, \"get\": %d, \"get_val\": [%u, %u, %u], \"coop\": %d, \"inst\": %d, \"launch\": %d, \"sync\": %d},\n",
           name, e_add, e_set, e_get, r.clusterDim.x, r.clusterDim.y, r.clusterDim.z, e_coop, e_inst, e_launch, e_sync);
    show(name);
    if (!e_inst) cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
}

int main() {
    cudaMalloc(&d_out, 32);
    cudaMemset(d_out, 0xff, 32);
    printf("{\n");
    run("fixed2_grid8", (void *)fixed2, 8, 0, 0, 0, 0);
    run("fixed2_grid7", (void *)fixed2, 7, 0, 0, 0, 0);
    run("plain_attr2", (void *)plain, 8, 1, 2, 1, 0);
    run("plain_attr4", (void *)plain, 8, 1, 4, 1, 0);
    run("plain_attr3_grid8", (void *)plain, 8, 1, 3, 1, 0);
    run("plain_attr0", (void *)plain, 8, 1, 0, 1, 0);
    run("plain_attr9", (void *)plain, 18, 1, 9, 1, 0);
    run("plain_attr1", (void *)plain, 8, 1, 1, 1, 0);
    run("fixed2_attr4", (void *)fixed2, 8, 1, 4, 1, 0);
    run("fixed2_attr2", (void *)fixed2, 8, 1, 2, 1, 0);
    run("plain_attr2_coop", (void *)plain, 8, 1, 2, 1, 1);
    run("plain_coop", (void *)plain, 8, 0, 0, 0, 1);
    run("plain_attr_y2_grid8", (void *)plain, 8, 1, 1, 2, 0);
    // attribute ids: unknown, and get of an untouched node
    {
        cudaGraph_t g; cudaGraphNode_t n, m;
        cudaGraphCreate(&g, 0);
        cudaKernelNodeParams p = {}; void *args[] = {&d_out};
        p.func = (void *)plain; p.gridDim = dim3(8); p.blockDim = dim3(32); p.kernelParams = args;
        cudaGraphAddKernelNode(&n, g, nullptr, 0, &p);
        cudaGraphAddEmptyNode(&m, g, nullptr, 0);
        cudaLaunchAttributeValue r; memset(&r, 0x5a, sizeof r);
        int e0 = cudaGraphKernelNodeGetAttribute(n, cudaLaunchAttributeClusterDimension, &r);
        printf("\"fresh_cluster\": [%d, %u, %u, %u],\n", e0, r.clusterDim.x, r.clusterDim.y, r.clusterDim.z);
        memset(&r, 0x5a, sizeof r);
        int e1 = cudaGraphKernelNodeGetAttribute(n, cudaLaunchAttributeCooperative, &r);
        printf("\"fresh_coop\": [%d, %d],\n", e1, r.cooperative);
        memset(&r, 0x5a, sizeof r);
        int e1b = cudaGraphKernelNodeGetAttribute(n, cudaLaunchAttributePriority, &r);
        printf("\"fresh_priority\": [%d, %d],\n", e1b, r.priority);
        memset(&r, 0x5a, sizeof r);
        int e1c = cudaGraphKernelNodeGetAttribute(n, (cudaLaunchAttributeID)0, &r);
        printf("\"get_id0\": %d,\n", e1c);
        int e2 = cudaGraphKernelNodeGetAttribute(n, (cudaLaunchAttributeID)99, &r);
        int e3 = cudaGraphKernelNodeSetAttribute(n, (cudaLaunchAttributeID)99, &r);
        printf("\"unknown_id\": [%d, %d],\n", e2, e3);
        int e4 = cudaGraphKernelNodeGetAttribute(m, cudaLaunchAttributeClusterDimension, &r);
        printf("\"empty_node\": %d,\n", e4);
        cudaLaunchAttributeValue pr = {}; pr.priority = 3;
        int e5 = cudaGraphKernelNodeSetAttribute(n, cudaLaunchAttributePriority, &pr);
        memset(&r, 0x5a, sizeof r);
        int e6 = cudaGraphKernelNodeGetAttribute(n, cudaLaunchAttributePriority, &r);
        printf("\"priority\": [%d, %d, %d],\n", e5, e6, r.priority);
        cudaGraphDestroy(g);
    }
    // stream capture of a cluster launch
    {
        cudaStream_t s; cudaStreamCreate(&s);
        cudaGraph_t g; cudaGraphExec_t ge;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(8); cfg.blockDim = dim3(32); cfg.stream = s;
        cudaLaunchAttribute a; a.id = cudaLaunchAttributeClusterDimension;
        a.val.clusterDim.x = 4; a.val.clusterDim.y = 1; a.val.clusterDim.z = 1;
        cfg.attrs = &a; cfg.numAttrs = 1;
        int e0 = cudaLaunchKernelEx(&cfg, plain, d_out);
        int e1 = cudaStreamEndCapture(s, &g);
        size_t nn = 0; cudaGraphGetNodes(g, nullptr, &nn);
        cudaGraphNode_t n; size_t one = 1; cudaGraphGetNodes(g, &n, &one);
        cudaLaunchAttributeValue r; memset(&r, 0x5a, sizeof r);
        int e2 = cudaGraphKernelNodeGetAttribute(n, cudaLaunchAttributeClusterDimension, &r);
        int e3 = cudaGraphInstantiate(&ge, g, 0);
        int e4 = cudaGraphLaunch(ge, s);
        int e5 = cudaStreamSynchronize(s);
        printf("\"capture\": [%d, %d, %zu, %d, %u, %u, %u, %d, %d, %d],\n", e0, e1, nn, e2, r.clusterDim.x, r.clusterDim.y, r.clusterDim.z, e3, e4, e5);
        show("capture");
    }
    // cooperative + cluster launch directly
    {
        cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(8); cfg.blockDim = dim3(32);
        cudaLaunchAttribute a[2]; a[0].id = cudaLaunchAttributeClusterDimension;
        a[0].val.clusterDim.x = 2; a[0].val.clusterDim.y = 1; a[0].val.clusterDim.z = 1;
        a[1].id = cudaLaunchAttributeCooperative; a[1].val.cooperative = 1;
        cfg.attrs = a; cfg.numAttrs = 2;
        int e0 = cudaLaunchKernelEx(&cfg, plain, d_out);
        int e1 = cudaDeviceSynchronize();
        printf("\"coop_cluster_launch\": [%d, %d],\n", e0, e1);
        show("coop_cluster_launch");
    }
    printf("\"end\": 0}\n");
    return 0;
}
