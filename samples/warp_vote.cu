// Warp-level primitives: __ballot_sync, __any_sync, __all_sync, __activemask under divergence,
// __popc/__clz/__ffs/__brev bit intrinsics, __match_any_sync, __syncwarp, and a warp-aggregated
// atomic (one atomicAdd per warp, ranks from the ballot).
#include "sample_common.h"

__global__ void votes(const int *in, unsigned *ballot, int *any, int *all, int *rank_in_group, unsigned *match) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31, w = i >> 5;
    int v = in[i];
    unsigned b = __ballot_sync(0xffffffffu, v > 0);
    int a = __any_sync(0xffffffffu, v > 90);
    int l = __all_sync(0xffffffffu, v > -95);
    if (lane == 0) { ballot[w] = b; any[w] = a; all[w] = l; }
    // Rank among the lanes with the same predicate value: popcount of the lower lanes' bits.
    unsigned mine = v > 0 ? b : ~b;
    rank_in_group[i] = __popc(mine & ((1u << lane) - 1));
    match[i] = __match_any_sync(0xffffffffu, v & 3);
    __syncwarp();
}

// Only even lanes enter the branch: the active mask seen there has exactly those bits.
__global__ void divergent_mask(unsigned *masks) {
    int lane = threadIdx.x & 31;
    if ((lane & 1) == 0) {
        unsigned m = __activemask();  // a subset of the even lanes, including this one
        unsigned b = __ballot_sync(0x55555555u, lane % 4 == 0);
        if (lane == 0) { masks[2 * (threadIdx.x >> 5)] = b; masks[2 * (threadIdx.x >> 5) + 1] = m; }
    }
}

__global__ void bits(const unsigned *in, int *popc, int *clz, int *ffs, unsigned *brev, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = in[i];
    popc[i] = __popc(x); clz[i] = __clz(x); ffs[i] = __ffs(x); brev[i] = __brev(x);
}

// Compaction of the positive values: one atomicAdd per warp reserves the warp's slots.
__global__ void compact_positive(const int *in, int n, int *out, int *count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    bool keep = v > 0;
    unsigned b = __ballot_sync(0xffffffffu, keep);
    int lane = threadIdx.x & 31;
    int base = 0;
    if (lane == 0 && b) base = atomicAdd(count, __popc(b));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (keep) out[base + __popc(b & ((1u << lane) - 1))] = v;
}

static int host_clz(unsigned x) { int c = 0; for (int k = 31; k >= 0 && !((x >> k) & 1); k--) c++; return c; }
static int host_ffs(unsigned x) { for (int k = 0; k < 32; k++) if ((x >> k) & 1) return k + 1; return 0; }
static unsigned host_brev(unsigned x) { unsigned r = 0; for (int k = 0; k < 32; k++) r |= ((x >> k) & 1u) << (31 - k); return r; }

int main() {
    const int n = 1 << 16, warps = n / 32;
    int *h = new int[n];
    Rng rng(24);
    for (int i = 0; i < n; i++) h[i] = rng.range(-100, 100);
    for (int i = 0; i < 32; i++) h[i] = 5;  // warp 0: all positive (all=1, ballot all ones)
    int *din, *dany, *dall, *drank; unsigned *dballot, *dmatch;
    CHECK(cudaMalloc(&din, n * sizeof(int))); CHECK(cudaMalloc(&drank, n * sizeof(int)));
    CHECK(cudaMalloc(&dmatch, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&dballot, warps * sizeof(unsigned))); CHECK(cudaMalloc(&dany, warps * sizeof(int)));
    CHECK(cudaMalloc(&dall, warps * sizeof(int)));
    CHECK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    votes<<<n / 128, 128>>>(din, dballot, dany, dall, drank, dmatch);
    CHECK_LAUNCH();
    unsigned *gb = new unsigned[warps], *rb = new unsigned[warps], *gm = new unsigned[n], *rm = new unsigned[n];
    int *ga = new int[warps], *ra = new int[warps], *gl = new int[warps], *rl = new int[warps];
    int *gr = new int[n], *rr = new int[n];
    CHECK(cudaMemcpy(gb, dballot, warps * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(ga, dany, warps * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gl, dall, warps * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gr, drank, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gm, dmatch, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int w = 0; w < warps; w++) {
        unsigned b = 0; int a = 0, l = 1;
        for (int k = 0; k < 32; k++) {
            int v = h[w * 32 + k];
            if (v > 0) b |= 1u << k;
            if (v > 90) a = 1;
            if (!(v > -95)) l = 0;
        }
        rb[w] = b; ra[w] = a; rl[w] = l;
        int pos = 0, neg = 0;
        for (int k = 0; k < 32; k++) {
            int v = h[w * 32 + k];
            rr[w * 32 + k] = v > 0 ? pos++ : neg++;
            unsigned m = 0;
            for (int j = 0; j < 32; j++) if ((h[w * 32 + j] & 3) == (v & 3)) m |= 1u << j;
            rm[w * 32 + k] = m;
        }
    }
    compare_exact("ballot", gb, rb, warps);
    compare_exact("any", ga, ra, warps);
    compare_exact("all", gl, rl, warps);
    compare_exact("rank", gr, rr, n);
    compare_exact("match_any", gm, rm, n);

    unsigned *dmask, gmask[16], rmask[8], gballot[8];
    CHECK(cudaMalloc(&dmask, sizeof(gmask)));
    CHECK(cudaMemset(dmask, 0, sizeof(gmask)));
    divergent_mask<<<1, 256>>>(dmask);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(gmask, dmask, sizeof(gmask), cudaMemcpyDeviceToHost));
    for (int k = 0; k < 8; k++) {
        rmask[k] = 0x11111111u;
        gballot[k] = gmask[2 * k];
        unsigned m = gmask[2 * k + 1];
        expect((m & 1u) && !(m & ~0x55555555u), "active mask inside the even-lane branch");
    }
    compare_exact("ballot among even lanes", gballot, rmask, 8);

    unsigned *u = new unsigned[n];
    const unsigned edge[4] = {0u, 1u, 0x80000000u, 0xffffffffu};
    for (int i = 0; i < n; i++) u[i] = i < 4 ? edge[i] : rng.u32() >> (i % 32);
    unsigned *du, *dbrev; int *dpopc, *dclz, *dffs;
    CHECK(cudaMalloc(&du, n * sizeof(unsigned))); CHECK(cudaMalloc(&dbrev, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&dpopc, n * sizeof(int))); CHECK(cudaMalloc(&dclz, n * sizeof(int))); CHECK(cudaMalloc(&dffs, n * sizeof(int)));
    CHECK(cudaMemcpy(du, u, n * sizeof(unsigned), cudaMemcpyHostToDevice));
    bits<<<n / 256, 256>>>(du, dpopc, dclz, dffs, dbrev, n);
    CHECK_LAUNCH();
    int *g1 = new int[n], *g2 = new int[n], *g3 = new int[n], *r1 = new int[n], *r2 = new int[n], *r3 = new int[n];
    unsigned *g4 = new unsigned[n], *r4 = new unsigned[n];
    CHECK(cudaMemcpy(g1, dpopc, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(g2, dclz, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(g3, dffs, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(g4, dbrev, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        r1[i] = __builtin_popcount(u[i]); r2[i] = host_clz(u[i]); r3[i] = host_ffs(u[i]); r4[i] = host_brev(u[i]);
    }
    compare_exact("popc", g1, r1, n); compare_exact("clz", g2, r2, n);
    compare_exact("ffs", g3, r3, n); compare_exact("brev", g4, r4, n);

    int *dcomp, *dcount, count = 0;
    CHECK(cudaMalloc(&dcomp, n * sizeof(int)));
    CHECK(cudaMalloc(&dcount, sizeof(int)));
    CHECK(cudaMemset(dcount, 0, sizeof(int)));
    CHECK(cudaMemset(dcomp, 0, n * sizeof(int)));
    compact_positive<<<n / 256, 256>>>(din, n, dcomp, dcount);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(&count, dcount, sizeof(int), cudaMemcpyDeviceToHost));
    int ref_count = 0, hist_ref[101] = {0}, hist_got[101] = {0};
    for (int i = 0; i < n; i++) if (h[i] > 0) { ref_count++; hist_ref[h[i]]++; }
    expect(count == ref_count, "compacted count");
    // Order across warps is free; the multiset of kept values is not.
    int *comp = new int[n];
    CHECK(cudaMemcpy(comp, dcomp, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < count && i < n; i++) if (comp[i] > 0 && comp[i] <= 100) hist_got[comp[i]]++; else g_failures++;
    compare_exact("compacted values", hist_got, hist_ref, 101);
    return finish();
}
