/* Conditional graph nodes through the real libcuda.so.1 and cuGraphAddNode: kernels set the condition with
 * the device runtime's cudaGraphSetConditional (PTX calling it as nvcc emits); IF with an ELSE body, SWITCH,
 * WHILE (a counted loop), a WHILE nested in an IF body, CU_GRAPH_COND_ASSIGN_DEFAULT applied at every
 * launch (and not without it), two launches in flight on one stream, and the errors CUDA documents.
 * Values come from SEED; every result is checked. Prints ALL PASSED. Usage: graph_conditional SEED */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c) do { if (!(c)) { failures++; if (failures < 20) printf("FAIL line %d: %s\n", __LINE__, #c); } } while (0)
#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d\n", #call, r_); exit(1); } } while (0)
#define IS(call, want) do { CUresult r_ = (call); if (r_ != (want)) { failures++; printf("FAIL %s -> %d, want %d\n", #call, r_, want); } } while (0)

static const char PTX[] =
    ".version 8.0\n.target sm_86\n.address_size 64\n"
    ".extern .func cudaGraphSetConditional(.param .b64 h, .param .b32 v);\n"
    /* cond = p[0] (the value the host left there) */
    ".visible .entry set_from(.param .u64 p, .param .u64 h)\n{\n  .reg .b32 %r1;\n  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u64 %rd2, [h];\n  ld.global.u32 %r1, [%rd1];\n"
    "  { .param .b64 a; st.param.b64 [a], %rd2; .param .b32 b; st.param.b32 [b], %r1;\n"
    "    call.uni cudaGraphSetConditional, (a, b); }\n  ret;\n}\n"
    /* p[k] += v: which body ran, how often */
    ".visible .entry bump(.param .u64 p, .param .u32 k, .param .u32 v)\n{\n  .reg .b32 %r<3>;\n  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [k];\n  ld.param.u32 %r2, [v];\n"
    "  mul.wide.u32 %rd2, %r1, 4;\n  add.u64 %rd3, %rd1, %rd2;\n  atom.global.add.u32 %r1, [%rd3], %r2;\n  ret;\n}\n"
    /* a loop body: p[1] += p[0]; p[0] -= 1; cond = p[0] != 0 */
    ".visible .entry count_down(.param .u64 p, .param .u64 h)\n{\n  .reg .pred %q;\n  .reg .b32 %r<5>;\n"
    "  .reg .b64 %rd<3>;\n  ld.param.u64 %rd1, [p];\n  ld.param.u64 %rd2, [h];\n"
    "  ld.global.u32 %r1, [%rd1];\n  ld.global.u32 %r2, [%rd1+4];\n  add.u32 %r2, %r2, %r1;\n"
    "  st.global.u32 [%rd1+4], %r2;\n  sub.u32 %r1, %r1, 1;\n  st.global.u32 [%rd1], %r1;\n"
    "  setp.ne.u32 %q, %r1, 0;\n  selp.u32 %r3, 1, 0, %q;\n"
    "  { .param .b64 a; st.param.b64 [a], %rd2; .param .b32 b; st.param.b32 [b], %r3;\n"
    "    call.uni cudaGraphSetConditional, (a, b); }\n  ret;\n}\n";

static CUfunction set_from, bump, count_down;
static CUcontext ctx;

static CUgraphNode kernel_node(CUgraph g, const CUgraphNode *deps, size_t n, CUfunction f, void **args)
{
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_KERNEL;
    p.kernel.func = f;
    p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
    p.kernel.blockDimX = p.kernel.blockDimY = p.kernel.blockDimZ = 1;
    p.kernel.kernelParams = args;
    CUgraphNode node;
    OK(cuGraphAddNode(&node, g, deps, NULL, n, &p));
    return node;
}

static CUgraph *conditional(CUgraph g, CUgraphNode *out, const CUgraphNode *deps, size_t n,
                            CUgraphConditionalHandle h, CUgraphConditionalNodeType type, unsigned size)
{
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    p.conditional.ctx = ctx;
    OK(cuGraphAddNode(out, g, deps, NULL, n, &p));
    return p.conditional.phGraph_out;
}

static void read_back(CUdeviceptr d, uint32_t *h, int n) { OK(cuMemcpyDtoH(h, d, 4 * (size_t)n)); }

int main(int argc, char **argv)
{
    uint32_t seed = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1;
    srand(seed);
    CUdevice dev;
    CUmodule mod;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&set_from, mod, "set_from"));
    OK(cuModuleGetFunction(&bump, mod, "bump"));
    OK(cuModuleGetFunction(&count_down, mod, "count_down"));
    CUdeviceptr sel, hits, loop;
    OK(cuMemAlloc(&sel, 4));
    OK(cuMemAlloc(&hits, 4 * 8));
    OK(cuMemAlloc(&loop, 8));
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    /* IF/ELSE: set_from -> if [bump(0) | bump(1) -> while(count_down)] */
    {
        CUgraph g;
        OK(cuGraphCreate(&g, 0));
        CUgraphConditionalHandle hif, hwhile;
        OK(cuGraphConditionalHandleCreate(&hif, g, ctx, 0, 0));
        OK(cuGraphConditionalHandleCreate(&hwhile, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
        void *a_set[] = {&sel, &hif};
        CUgraphNode first = kernel_node(g, NULL, 0, set_from, a_set), cond;
        CUgraph *bodies = conditional(g, &cond, &first, 1, hif, CU_GRAPH_COND_TYPE_IF, 2);
        uint32_t k0 = 0, k1 = 1, one = 1;
        void *a0[] = {&hits, &k0, &one}, *a1[] = {&hits, &k1, &one};
        kernel_node(bodies[0], NULL, 0, bump, a0);
        CUgraphNode b1 = kernel_node(bodies[1], NULL, 0, bump, a1), inner;
        CUgraph *loop_body = conditional(bodies[1], &inner, &b1, 1, hwhile, CU_GRAPH_COND_TYPE_WHILE, 1);
        void *a_loop[] = {&loop, &hwhile};
        kernel_node(loop_body[0], NULL, 0, count_down, a_loop);
        CUgraphNodeType type;
        OK(cuGraphNodeGetType(cond, &type));
        CHECK(type == CU_GRAPH_NODE_TYPE_CONDITIONAL);
        CUgraphExec ex;
        OK(cuGraphInstantiate(&ex, g, 0));
        uint32_t want_hits[2] = {0, 0}, want_sum = 0, h[8], n = 0;
        OK(cuMemsetD32(hits, 0, 8));
        for (int round = 0; round < 6; round++) {
            uint32_t v = (uint32_t)(rand() % 3);     /* 0 takes the ELSE body */
            n = 2 + (uint32_t)(rand() % 20);
            uint32_t state[2] = {n, 0};
            OK(cuMemcpyHtoD(sel, &v, 4));
            OK(cuMemcpyHtoD(loop, state, 8));
            OK(cuGraphLaunch(ex, s));
            OK(cuStreamSynchronize(s));
            want_hits[v ? 0 : 1]++;
            read_back(hits, h, 2);
            CHECK(h[0] == want_hits[0] && h[1] == want_hits[1]);
            read_back(loop, h, 2);
            if (v == 0) {       /* the while loop ran from n down to 0: sum n + ... + 1 */
                want_sum = n * (n + 1) / 2;
                CHECK(h[0] == 0 && h[1] == want_sum);
            } else {
                CHECK(h[0] == n && h[1] == 0);
            }
        }
        OK(cuGraphExecDestroy(ex));
        OK(cuGraphDestroy(g));
    }

    /* SWITCH over 4 bodies; two launches queued back to back on one stream each see their own value */
    {
        CUgraph g;
        OK(cuGraphCreate(&g, 0));
        CUgraphConditionalHandle hs;
        OK(cuGraphConditionalHandleCreate(&hs, g, ctx, 0, 0));
        void *a_set[] = {&sel, &hs};
        CUgraphNode first = kernel_node(g, NULL, 0, set_from, a_set), cond;
        CUgraph *bodies = conditional(g, &cond, &first, 1, hs, CU_GRAPH_COND_TYPE_SWITCH, 4);
        uint32_t ks[4] = {0, 1, 2, 3}, w[4] = {1, 10, 100, 1000};
        void *args[4][3];
        for (int i = 0; i < 4; i++) {
            args[i][0] = &hits; args[i][1] = &ks[i]; args[i][2] = &w[i];
            kernel_node(bodies[i], NULL, 0, bump, args[i]);
        }
        CUgraphExec ex;
        OK(cuGraphInstantiate(&ex, g, 0));
        OK(cuMemsetD32(hits, 0, 8));
        uint32_t want[4] = {0, 0, 0, 0}, h[8];
        for (int round = 0; round < 8; round++) {
            uint32_t v = (uint32_t)(rand() % 6), v2 = (uint32_t)(rand() % 6);   /* 4, 5: no body */
            OK(cuMemsetD32Async(sel, v, 1, s));
            OK(cuGraphLaunch(ex, s));
            OK(cuMemsetD32Async(sel, v2, 1, s));
            OK(cuGraphLaunch(ex, s));
            OK(cuStreamSynchronize(s));
            if (v < 4) want[v] += w[v];
            if (v2 < 4) want[v2] += w[v2];
            read_back(hits, h, 4);
            CHECK(!memcmp(h, want, sizeof want));
        }
        /* errors CUDA documents for conditional nodes and their handles */
        CUgraphConditionalHandle bad;
        IS(cuGraphConditionalHandleCreate(&bad, g, ctx, 0, 0x2), CUDA_ERROR_INVALID_VALUE);
        CUgraphNodeParams p;
        memset(&p, 0, sizeof p);
        p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        p.conditional.handle = hs;
        p.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
        p.conditional.size = 2;
        p.conditional.ctx = ctx;
        CUgraphNode node;
        IS(cuGraphAddNode(&node, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
        p.conditional.type = CU_GRAPH_COND_TYPE_IF;
        p.conditional.size = 3;
        IS(cuGraphAddNode(&node, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
        p.conditional.size = 1;
        p.conditional.handle = 0x1234;
        IS(cuGraphAddNode(&node, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
        p.type = (CUgraphNodeType)99;
        IS(cuGraphAddNode(&node, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
        IS(cuGraphAddNode(&node, g, NULL, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
        OK(cuGraphExecDestroy(ex));
        OK(cuGraphDestroy(g));
    }

    /* without CU_GRAPH_COND_ASSIGN_DEFAULT the value carries over from the previous launch */
    {
        CUgraph g;
        OK(cuGraphCreate(&g, 0));
        CUgraphConditionalHandle hw;
        OK(cuGraphConditionalHandleCreate(&hw, g, ctx, 1, 0));
        CUgraphNode cond;
        CUgraph *bodies = conditional(g, &cond, NULL, 0, hw, CU_GRAPH_COND_TYPE_WHILE, 1);
        void *a_loop[] = {&loop, &hw};
        kernel_node(bodies[0], NULL, 0, count_down, a_loop);
        CUgraphExec ex;
        OK(cuGraphInstantiate(&ex, g, 0));
        uint32_t n = 3 + (uint32_t)(rand() % 10), state[2] = {n, 0}, h[2];
        OK(cuMemcpyHtoD(loop, state, 8));
        OK(cuGraphLaunch(ex, s));
        OK(cuStreamSynchronize(s));
        read_back(loop, h, 2);
        CHECK(h[0] == 0 && h[1] == n * (n + 1) / 2);
        OK(cuGraphLaunch(ex, s));       /* the loop left 0 behind: the body does not run */
        OK(cuStreamSynchronize(s));
        read_back(loop, h, 2);
        CHECK(h[0] == 0 && h[1] == n * (n + 1) / 2);
        OK(cuGraphExecDestroy(ex));
        OK(cuGraphDestroy(g));
    }
    printf("%s\n", failures ? "FAILED" : "ALL PASSED");
    return failures ? 1 : 0;
}
