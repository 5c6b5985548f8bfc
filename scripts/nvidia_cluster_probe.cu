// What NVIDIA's driver and an sm_90 GPU answer for thread-block clusters: the special registers per CTA for
// a few cluster shapes, mapa/getctarank/isspacep values, a distributed-shared-memory ring exchange, and the
// error codes of bad cluster launches (driver API, through cudaGetDriverEntryPoint: no -lcuda needed).
// Prints one JSON object (kept as tests/data/nvidia_cluster_answers.json).
// Build: nvcc -gencode arch=compute_90,code=[sm_90,compute_90] -o cluster_probe scripts/nvidia_cluster_probe.cu
#include <cuda.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace cg = cooperative_groups;

#define N_REGS 24
__device__ unsigned sreg(int i) {
    unsigned v = 0;
    switch (i) {
    case 0: asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(v)); break;
    case 1: asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(v)); break;
    case 2: asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(v)); break;
    case 3: asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(v)); break;
    case 4: asm volatile("mov.u32 %0, %%clusterid.y;" : "=r"(v)); break;
    case 5: asm volatile("mov.u32 %0, %%clusterid.z;" : "=r"(v)); break;
    case 6: asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(v)); break;
    case 7: asm volatile("mov.u32 %0, %%nclusterid.y;" : "=r"(v)); break;
    case 8: asm volatile("mov.u32 %0, %%nclusterid.z;" : "=r"(v)); break;
    case 9: asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(v)); break;
    case 10: asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(v)); break;
    case 11: asm volatile("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(v)); break;
    case 12: asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(v)); break;
    case 13: asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(v)); break;
    case 14: asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(v)); break;
    case 15: asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(v)); break;
    case 16: asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(v)); break;
    case 17: asm volatile("{ .reg .pred p; mov.pred p, %%is_explicit_cluster; selp.u32 %0, 1, 0, p; }" : "=r"(v)); break;
    }
    return v;
}

__shared__ unsigned probe_smem[64];

__device__ void probe_body(unsigned *out) {
    unsigned lin = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned *o = out + lin * N_REGS;
    if (threadIdx.x == 0) {
        for (int i = 0; i < 18; i++) o[i] = sreg(i);
        unsigned a = (unsigned)__cvta_generic_to_shared(&probe_smem[3]);
        unsigned rank = sreg(15), n = sreg(16);
        unsigned self, other, rk_self, rk_other;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(self) : "r"(a), "r"(rank));
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(other) : "r"(a), "r"((rank + 1) % n));
        asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(rk_self) : "r"(self));
        asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(rk_other) : "r"(other));
        o[18] = self == a;                 // mapa to one's own rank gives the .shared::cta address back
        o[19] = rk_self;
        o[20] = rk_other;
        unsigned long long g = (unsigned long long)(&probe_smem[3]), gm, gother;
        asm volatile("mapa.u64 %0, %1, %2;" : "=l"(gm) : "l"(g), "r"(rank));
        asm volatile("mapa.u64 %0, %1, %2;" : "=l"(gother) : "l"(g), "r"((rank + 1) % n));
        unsigned sp_cta, sp_cl, sp_cl_other, sp_cta_other;
        asm volatile("{ .reg .pred p; isspacep.shared::cta p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(sp_cta) : "l"(g));
        asm volatile("{ .reg .pred p; isspacep.shared::cluster p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(sp_cl) : "l"(g));
        asm volatile("{ .reg .pred p; isspacep.shared::cluster p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(sp_cl_other) : "l"(gother));
        asm volatile("{ .reg .pred p; isspacep.shared::cta p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(sp_cta_other) : "l"(gother));
        o[21] = (gm == g) | (sp_cta << 1) | (sp_cl << 2) | (sp_cl_other << 3) | (sp_cta_other << 4) | ((n == 1 || gother != g) << 5);
        unsigned long long back;   // cvta.to.shared::cluster of the remote generic address, and getctarank of it
        unsigned rk_gen;
        asm volatile("cvta.to.shared::cluster.u64 %0, %1;" : "=l"(back) : "l"(gother));
        asm volatile("getctarank.u64 %0, %1;" : "=r"(rk_gen) : "l"(gother));
        o[22] = ((unsigned)back == other);
        o[23] = rk_gen;
    }
    cg::this_cluster().sync();     // no CTA exits while another may still map its shared memory
}

__global__ void probe(unsigned *out) { probe_body(out); }
__global__ void __cluster_dims__(2, 1, 1) probe_fixed(unsigned *out) { probe_body(out); }
__global__ void plain(int *out) { if (out) out[0] = 1; }

// ring exchange: CTA r writes r*1000+t into its shared array, the cluster syncs, each thread reads the
// next CTA's element t and adds its own; a second sync keeps every CTA alive until all have read
__global__ void ring(unsigned *out) {
    __shared__ unsigned buf[128];
    cg::cluster_group cl = cg::this_cluster();
    unsigned r = cl.block_rank(), n = cl.num_blocks();
    buf[threadIdx.x] = r * 1000 + threadIdx.x;
    cl.sync();
    unsigned *next = cl.map_shared_rank(buf, (r + 1) % n);
    unsigned v = next[threadIdx.x] + buf[threadIdx.x];
    atomicAdd(cl.map_shared_rank(&buf[0], 0), 0u);   // DSMEM atomics reach rank 0
    cl.sync();
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

typedef CUresult (*launch_ex_t)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*func_attr_get_t)(int *, CUfunction_attribute, CUfunction);
typedef CUresult (*func_attr_set_t)(CUfunction, CUfunction_attribute, int);
typedef CUresult (*occ_cluster_t)(int *, CUfunction, const CUlaunchConfig *);
typedef CUresult (*ctx_sync_t)(void);
static launch_ex_t cuLaunchKernelEx_;
static func_attr_get_t cuFuncGetAttribute_;
static func_attr_set_t cuFuncSetAttribute_;
static occ_cluster_t cuOccupancyMaxPotentialClusterSize_, cuOccupancyMaxActiveClusters_;
static ctx_sync_t cuCtxSynchronize_;

static void *entry(const char *name) {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess || !p) {
        fprintf(stderr, "no %s\n", name);
        exit(2);
    }
    return p;
}

static CUfunction fn_of(const void *sym) {
    cudaFunction_t f;
    if (cudaGetFuncBySymbol(&f, sym) != cudaSuccess) { fprintf(stderr, "no function\n"); exit(2); }
    return (CUfunction)f;
}

// one launch: its cuLaunchKernelEx answer and the synchronize after it
static int launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, int cx, int cy, int cz,
                  void *arg, int *sync_rc, int coop = 0) {
    CUlaunchAttribute at[2];
    int na = 0;
    if (cx >= 0) {
        at[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        at[na].value.clusterDim.x = cx; at[na].value.clusterDim.y = cy; at[na].value.clusterDim.z = cz;
        na++;
    }
    if (coop) { at[na].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE; at[na].value.cooperative = 1; na++; }
    CUlaunchConfig c = {};
    c.gridDimX = gx; c.gridDimY = gy; c.gridDimZ = gz;
    c.blockDimX = bx; c.blockDimY = 1; c.blockDimZ = 1;
    c.attrs = at; c.numAttrs = na;
    void *params[] = {&arg};
    int rc = cuLaunchKernelEx_(&c, f, params, nullptr);
    *sync_rc = cuCtxSynchronize_();
    return rc;
}

static void dump_regs(const char *name, CUfunction f, unsigned gx, unsigned gy, unsigned gz, int cx, int cy, int cz,
                      unsigned *d, int last) {
    unsigned n = gx * gy * gz;
    cudaMemset(d, 0xff, n * N_REGS * 4);
    int src;
    int rc = launch(f, gx, gy, gz, 32, cx, cy, cz, d, &src);
    std::vector<unsigned> h(n * N_REGS);
    cudaMemcpy(h.data(), d, n * N_REGS * 4, cudaMemcpyDeviceToHost);
    printf("  \"%s\": {\"grid\": [%u, %u, %u], \"cluster\": [%d, %d, %d], \"launch\": %d, \"sync\": %d, \"ctas\": [\n",
           name, gx, gy, gz, cx, cy, cz, rc, src);
    for (unsigned b = 0; b < n && rc == 0; b++) {
        printf("    [");
        for (int i = 0; i < N_REGS; i++) printf("%u%s", h[b * N_REGS + i], i + 1 < N_REGS ? ", " : "");
        printf("]%s\n", b + 1 < n ? "," : "");
    }
    printf("  ]}%s\n", last ? "" : ",");
}

int main() {
    cuLaunchKernelEx_ = (launch_ex_t)entry("cuLaunchKernelEx");
    cuFuncGetAttribute_ = (func_attr_get_t)entry("cuFuncGetAttribute");
    cuFuncSetAttribute_ = (func_attr_set_t)entry("cuFuncSetAttribute");
    cuOccupancyMaxPotentialClusterSize_ = (occ_cluster_t)entry("cuOccupancyMaxPotentialClusterSize");
    cuOccupancyMaxActiveClusters_ = (occ_cluster_t)entry("cuOccupancyMaxActiveClusters");
    cuCtxSynchronize_ = (ctx_sync_t)entry("cuCtxSynchronize");
    cudaFree(0);
    unsigned *d;
    cudaMalloc(&d, 1 << 20);
    CUfunction fp = fn_of((const void *)probe), ff = fn_of((const void *)probe_fixed),
               fl = fn_of((const void *)plain), fr = fn_of((const void *)ring);
    printf("{\n\"regs_columns\": [\"ctaid.x\", \"ctaid.y\", \"ctaid.z\", \"clusterid.x\", \"clusterid.y\", \"clusterid.z\", "
           "\"nclusterid.x\", \"nclusterid.y\", \"nclusterid.z\", \"cluster_ctaid.x\", \"cluster_ctaid.y\", "
           "\"cluster_ctaid.z\", \"cluster_nctaid.x\", \"cluster_nctaid.y\", \"cluster_nctaid.z\", \"cluster_ctarank\", "
           "\"cluster_nctarank\", \"is_explicit_cluster\", \"mapa_self_is_identity\", \"getctarank_self\", "
           "\"getctarank_next\", \"generic_bits\", \"cvta_to_cluster_matches_mapa\", \"getctarank_generic_next\"],\n");
    printf("\"regs\": {\n");
    dump_regs("x2", fp, 4, 2, 1, 2, 1, 1, d, 0);
    dump_regs("2x2x2", fp, 4, 4, 2, 2, 2, 2, d, 0);
    dump_regs("x3", fp, 6, 1, 1, 3, 1, 1, d, 0);
    dump_regs("y2", fp, 2, 4, 1, 1, 2, 1, d, 0);
    dump_regs("explicit1", fp, 2, 2, 1, 1, 1, 1, d, 0);
    dump_regs("no_attribute", fp, 2, 2, 1, -1, 0, 0, d, 0);
    dump_regs("fixed2_no_attribute", ff, 4, 1, 1, -1, 0, 0, d, 0);
    dump_regs("fixed2_attribute2", ff, 4, 1, 1, 2, 1, 1, d, 1);
    printf("},\n");

    // DSMEM ring over clusters of 4, 128 threads
    {
        int src;
        cudaMemset(d, 0xff, 8 * 128 * 4);
        int rc = launch(fr, 8, 1, 1, 128, 4, 1, 1, d, &src);
        std::vector<unsigned> h(8 * 128);
        cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost);
        int ok = rc == 0 && src == 0;
        for (unsigned b = 0; b < 8; b++)
            for (unsigned t = 0; t < 128; t++) {
                unsigned r = b % 4, want = ((r + 1) % 4) * 1000 + t + r * 1000 + t;
                if (h[b * 128 + t] != want) ok = 0;
            }
        printf("\"ring\": {\"launch\": %d, \"sync\": %d, \"ok\": %d, \"sample\": [%u, %u, %u]},\n", rc, src, ok, h[0],
               h[128 + 5], h[3 * 128 + 127]);
    }

    // launch errors
    printf("\"errors\": {\n");
    struct { const char *name; CUfunction f; unsigned gx, gy, gz, bx; int cx, cy, cz, coop; } cases[] = {
        {"ok_x2", fl, 4, 1, 1, 32, 2, 1, 1, 0},
        {"not_dividing_x", fl, 4, 1, 1, 32, 3, 1, 1, 0},
        {"not_dividing_y", fl, 2, 3, 1, 32, 1, 2, 1, 0},
        {"zero_dim", fl, 4, 1, 1, 32, 0, 1, 1, 0},
        {"size8", fl, 8, 1, 1, 32, 8, 1, 1, 0},
        {"size2x2x2", fl, 4, 4, 4, 32, 2, 2, 2, 0},
        {"size9", fl, 9, 1, 1, 32, 9, 1, 1, 0},
        {"size12_4x3", fl, 8, 3, 1, 32, 4, 3, 1, 0},
        {"size16_portable_attr", fl, 16, 1, 1, 32, 16, 1, 1, 0},
        {"coop_and_cluster", fl, 4, 1, 1, 32, 2, 1, 1, 1},
        {"fixed_attr_disagrees", ff, 4, 1, 1, 32, 4, 1, 1, 0},
        {"fixed_attr_agrees", ff, 4, 1, 1, 32, 2, 1, 1, 0},
        {"fixed_attr_1", ff, 4, 1, 1, 32, 1, 1, 1, 0},
        {"fixed_grid_not_dividing", ff, 3, 1, 1, 32, -1, 0, 0, 0},
        {"block_1024_x2", fl, 4, 1, 1, 1024, 2, 1, 1, 0},
        {"size16_4x4_portable", fl, 4, 4, 1, 32, 4, 4, 1, 0},
        {"x2_grid_y_odd", fl, 4, 3, 1, 32, 2, 1, 1, 0},
    };
    for (auto &c : cases) {
        int src;
        int rc = launch(c.f, c.gx, c.gy, c.gz, c.bx, c.cx, c.cy, c.cz, d, &src, c.coop);
        printf("  \"%s\": [%d, %d],\n", c.name, rc, src);
    }
    int set_np = cuFuncSetAttribute_(fl, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    int src;
    int rc16 = launch(fl, 16, 1, 1, 32, 16, 1, 1, d, &src);
    int rc9 = launch(fl, 9, 1, 1, 32, 9, 1, 1, d, &src);
    int rc17 = launch(fl, 17, 1, 1, 32, 17, 1, 1, d, &src);
    int rc32 = launch(fl, 32, 1, 1, 32, 32, 1, 1, d, &src);
    int rc16b = launch(fl, 4, 4, 1, 32, 4, 4, 1, d, &src);
    int src17 = src;
    printf("  \"set_non_portable\": %d, \"size16_non_portable\": %d, \"size9_non_portable\": %d, "
           "\"size17_non_portable\": %d, \"size32_non_portable\": %d, \"set_non_portable_2\": %d, "
           "\"set_required_width\": %d, \"set_must_be_set\": %d, \"size16_4x4_non_portable\": %d, \"last_sync\": %d\n},\n",
           set_np, rc16, rc9, rc17, rc32, cuFuncSetAttribute_(fl, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 2),
           cuFuncSetAttribute_(fl, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 2),
           cuFuncSetAttribute_(fl, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, 1), rc16b, src17);

    // attributes
    printf("\"attributes\": {\n");
    CUfunction fns[] = {fp, ff, fl};
    const char *names[] = {"probe", "probe_fixed", "plain"};
    CUfunction_attribute at[] = {CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                                 CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
                                 CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                                 CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE};
    for (int k = 0; k < 3; k++) {
        printf("  \"%s\": [", names[k]);
        for (int i = 0; i < 6; i++) {
            int v = -1;
            int r = cuFuncGetAttribute_(&v, at[i], fns[k]);
            printf("[%d, %d]%s", r, v, i < 5 ? ", " : "");
        }
        printf("]%s\n", k < 2 ? "," : "");
    }
    printf("},\n");

    // occupancy
    {
        CUlaunchAttribute a;
        a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        a.value.clusterDim.x = 2; a.value.clusterDim.y = 1; a.value.clusterDim.z = 1;
        CUlaunchConfig c = {};
        c.gridDimX = 8; c.gridDimY = 1; c.gridDimZ = 1; c.blockDimX = 128; c.blockDimY = 1; c.blockDimZ = 1;
        int size = -1, active = -1, size_noattr = -1, active_noattr = -1;
        int r1 = cuOccupancyMaxPotentialClusterSize_(&size, fl, &c);
        c.attrs = &a; c.numAttrs = 1;
        int r2 = cuOccupancyMaxActiveClusters_(&active, fl, &c);
        c.attrs = nullptr; c.numAttrs = 0;
        int r3 = cuOccupancyMaxActiveClusters_(&active_noattr, fl, &c);
        int r4 = cuOccupancyMaxPotentialClusterSize_(&size_noattr, ff, &c);
        cudaDeviceProp p;
        cudaGetDeviceProperties(&p, 0);
        printf("\"occupancy\": {\"max_potential_cluster_size_plain\": [%d, %d], \"max_active_clusters_x2\": [%d, %d], "
               "\"max_active_clusters_no_attr\": [%d, %d], \"max_potential_cluster_size_fixed2\": [%d, %d], "
               "\"sm_count\": %d, \"cluster_launch\": %d, \"device\": \"%s\"}\n}\n",
               r1, size, r2, active, r3, active_noattr, r4, size_noattr, p.multiProcessorCount, p.clusterLaunch, p.name);
    }
    return 0;
}
