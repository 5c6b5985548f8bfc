// Global atomics of every common kind: add (int, unsigned, float, u64), sub, min/max, and/or/xor,
// exch, inc/dec with wrap, CAS loops (double add), and contended counters whose results are order-free.
#include "sample_common.h"

__device__ double atomic_add_double_cas(double *addr, double val) {
    unsigned long long *p = (unsigned long long *)addr, old = *p, assumed;
    do {
        assumed = old;
        old = atomicCAS(p, assumed, __double_as_longlong(val + __longlong_as_double(assumed)));
    } while (assumed != old);
    return __longlong_as_double(old);
}

struct Counters {
    int add_i; unsigned add_u; unsigned long long add_u64; float add_f; double add_d_cas;
    int sub_i; int min_i; int max_i; unsigned min_u; unsigned max_u;
    unsigned and_u; unsigned or_u; unsigned xor_u; unsigned inc_u; unsigned dec_u;
    int cas_claims;
};

__global__ void atomics_kernel(const int *in, int n, Counters *c, int *slot_owner, int *exch_seen) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    atomicAdd(&c->add_i, v);
    atomicAdd(&c->add_u, (unsigned)(v & 0xff));
    atomicAdd(&c->add_u64, (unsigned long long)(v & 0xffff) << 20);
    atomicAdd(&c->add_f, (float)(v & 7));  // small integers: exact in any order
    atomic_add_double_cas(&c->add_d_cas, (double)(v & 3) * 0.5);
    atomicSub(&c->sub_i, v & 0xf);
    atomicMin(&c->min_i, v);
    atomicMax(&c->max_i, v);
    atomicMin(&c->min_u, (unsigned)v ^ 0x80000000u);
    atomicMax(&c->max_u, (unsigned)v ^ 0x80000000u);
    atomicAnd(&c->and_u, ~(1u << (i & 31)) | (unsigned)(i & ~31));
    atomicOr(&c->or_u, 1u << (v & 31));
    atomicXor(&c->xor_u, (unsigned)v);
    atomicInc(&c->inc_u, 1000u);  // wraps to 0 after reaching 1000
    atomicDec(&c->dec_u, 999u);
    // Exactly one thread per slot wins the CAS from -1.
    if (atomicCAS(&slot_owner[i % 97], -1, i) == -1) atomicAdd(&c->cas_claims, 1);
    // Exch returns the previous value: every value written exactly once is returned exactly once.
    int prev = atomicExch(&exch_seen[n], i);
    if (prev >= 0) atomicAdd(&exch_seen[prev], 1);
}

int main() {
    const int n = 1 << 16;
    int *h = new int[n];
    Rng rng(6);
    for (int i = 0; i < n; i++) h[i] = (int)rng.u32();
    Counters init = {};
    init.min_i = INT_MAX; init.max_i = INT_MIN; init.min_u = 0xffffffffu; init.max_u = 0;
    init.and_u = 0xffffffffu; init.dec_u = 0;

    Counters ref = init;
    for (int i = 0; i < n; i++) {
        int v = h[i];
        ref.add_i = (int)((unsigned)ref.add_i + (unsigned)v);
        ref.add_u += (unsigned)(v & 0xff);
        ref.add_u64 += (unsigned long long)(v & 0xffff) << 20;
        ref.add_f += (float)(v & 7);
        ref.add_d_cas += (double)(v & 3) * 0.5;
        ref.sub_i -= v & 0xf;
        ref.min_i = v < ref.min_i ? v : ref.min_i;
        ref.max_i = v > ref.max_i ? v : ref.max_i;
        unsigned uv = (unsigned)v ^ 0x80000000u;
        ref.min_u = uv < ref.min_u ? uv : ref.min_u;
        ref.max_u = uv > ref.max_u ? uv : ref.max_u;
        ref.and_u &= ~(1u << (i & 31)) | (unsigned)(i & ~31);
        ref.or_u |= 1u << (v & 31);
        ref.xor_u ^= (unsigned)v;
        ref.inc_u = ref.inc_u >= 1000u ? 0 : ref.inc_u + 1;
        ref.dec_u = (ref.dec_u == 0 || ref.dec_u > 999u) ? 999u : ref.dec_u - 1;
    }
    ref.cas_claims = 97;

    Counters *dc; int *din, *dslots, *dexch;
    CHECK(cudaMalloc(&dc, sizeof(Counters)));
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dslots, 97 * sizeof(int)));
    CHECK(cudaMalloc(&dexch, (n + 1) * sizeof(int)));
    CHECK(cudaMemcpy(dc, &init, sizeof(init), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dslots, 0xFF, 97 * sizeof(int)));
    CHECK(cudaMemset(dexch, 0, n * sizeof(int)));
    CHECK(cudaMemset(dexch + n, 0xFF, sizeof(int)));
    atomics_kernel<<<n / 256, 256>>>(din, n, dc, dslots, dexch);
    CHECK_LAUNCH();
    Counters got;
    CHECK(cudaMemcpy(&got, dc, sizeof(got), cudaMemcpyDeviceToHost));

#define FIELD(f) compare_exact(#f, &got.f, &ref.f, 1)
    FIELD(add_i); FIELD(add_u); FIELD(add_u64); FIELD(add_f); FIELD(add_d_cas); FIELD(sub_i);
    FIELD(min_i); FIELD(max_i); FIELD(min_u); FIELD(max_u); FIELD(and_u); FIELD(or_u); FIELD(xor_u);
    FIELD(cas_claims);
    // inc/dec wrap: the final value depends only on the count of operations, not their order.
    FIELD(inc_u); FIELD(dec_u);

    int *slots = new int[97];
    CHECK(cudaMemcpy(slots, dslots, 97 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int s = 0; s < 97; s++) {
        if (slots[s] < 0 || slots[s] >= n || slots[s] % 97 != s) { printf("slot %d owner %d\n", s, slots[s]); g_failures++; }
    }
    int *exch = new int[n + 1];
    CHECK(cudaMemcpy(exch, dexch, (n + 1) * sizeof(int), cudaMemcpyDeviceToHost));
    // Every index except the last one written was returned by exactly one exch.
    int last = exch[n], ones = 0;
    for (int i = 0; i < n; i++) {
        int want = i == last ? 0 : 1;
        if (exch[i] != want) { if (g_failures < 10) printf("exch[%d] = %d want %d\n", i, exch[i], want); g_failures++; }
        ones += exch[i];
    }
    expect(last >= 0 && last < n && ones == n - 1, "exch chain is a permutation");

    CHECK(cudaFree(dc)); CHECK(cudaFree(din)); CHECK(cudaFree(dslots)); CHECK(cudaFree(dexch));
    return finish();
}
