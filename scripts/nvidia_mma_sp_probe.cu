// What an NVIDIA GPU answers for sparse mma (mma.sp.sync.aligned, 2:4 structured sparsity of A): for each form
// sm_90 runs, each sparsity selector, and a few warps of random fragments (small integers, exact in every type),
// the registers every thread gave (A's compressed fragment, B, C, the metadata word) and the D it got back. The
// ISA gives the compressed A's and the metadata's layouts in figures only: these answers are the test data a
// sparse mma must reproduce bit for bit (not yet implemented: ptx refuses mma.sp). Prints JSON.
// Build and run: nvcc -O1 -arch=sm_90 -o probe scripts/nvidia_mma_sp_probe.cu && ./probe > answers.json
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

enum { TRIALS = 4, MAXR = 4 };

struct Frag {
    uint32_t a[32][MAXR], b[32][MAXR], c[32][MAXR], e[32], d[32][MAXR];
};

// one form: its PTX, register counts and selector range
#define SP(NAME, PTX, NA, NB, NC, SELS)                                                                        \
    template <int SEL> __global__ void NAME(Frag *f) {                                                         \
        Frag &g = f[blockIdx.x];                                                                               \
        int t = threadIdx.x;                                                                                   \
        uint32_t a[MAXR], b[MAXR], c[MAXR], d[MAXR] = {0x5a5a5a5a, 0x5a5a5a5a, 0x5a5a5a5a, 0x5a5a5a5a};        \
        for (int i = 0; i < MAXR; i++) a[i] = g.a[t][i], b[i] = g.b[t][i], c[i] = g.c[t][i];                   \
        uint32_t e = g.e[t];                                                                                   \
        BODY_##NA##_##NB##_##NC(PTX)                                                                           \
        for (int i = 0; i < MAXR; i++) g.d[t][i] = d[i];                                                       \
    }

#define BODY_2_2_4(PTX)                                                                                        \
    asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5}, {%6,%7}, {%8,%9,%10,%11}, %12, %13;"                            \
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                              \
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]),     \
                   "r"(e), "n"(SEL));
#define BODY_4_4_4(PTX)                                                                                        \
    asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%12,%13,%14,%15}, %16, %17;"            \
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]),     \
                   "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(e), "n"(SEL));
#define BODY_2_2_2(PTX)                                                                                        \
    asm volatile(PTX " {%0,%1}, {%2,%3}, {%4,%5}, {%6,%7}, %8, %9;"                                            \
                 : "=r"(d[0]), "=r"(d[1])                                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(e), "n"(SEL));

SP(f16_k16, "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 2, 2, 4, 4)
SP(f16_k16_h, "mma.sp.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 2, 2, 2, 4)
SP(f16_k32, "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", 4, 4, 4, 2)
SP(bf16_k16, "mma.sp.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 2, 2, 4, 4)
SP(bf16_k32, "mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", 4, 4, 4, 2)
SP(tf32_k8, "mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 2, 2, 4, 4)
SP(tf32_k16, "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32", 4, 4, 4, 2)
SP(s8_k32, "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", 2, 2, 4, 2)
SP(s8_k64, "mma.sp.sync.aligned.m16n8k64.row.col.s32.s8.s8.s32", 4, 4, 4, 1)
SP(e4m3_k64, "mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32", 4, 4, 4, 1)

typedef void (*Kernel)(Frag *);
struct Form {
    const char *name, *elem;
    int na, nb, nc, sels;
    Kernel k[4];
};
#define K4(N) {N<0>, N<1>, N<2>, N<3>}
#define K2(N) {N<0>, N<1>, nullptr, nullptr}
#define K1(N) {N<0>, nullptr, nullptr, nullptr}
static Form FORMS[] = {
    {"m16n8k16.f32.f16.f16.f32", "f16", 2, 2, 4, 4, K4(f16_k16)},
    {"m16n8k16.f16.f16.f16.f16", "f16", 2, 2, 2, 4, K4(f16_k16_h)},
    {"m16n8k32.f32.f16.f16.f32", "f16", 4, 4, 4, 2, K2(f16_k32)},
    {"m16n8k16.f32.bf16.bf16.f32", "bf16", 2, 2, 4, 4, K4(bf16_k16)},
    {"m16n8k32.f32.bf16.bf16.f32", "bf16", 4, 4, 4, 2, K2(bf16_k32)},
    {"m16n8k8.f32.tf32.tf32.f32", "tf32", 2, 2, 4, 4, K4(tf32_k8)},
    {"m16n8k16.f32.tf32.tf32.f32", "tf32", 4, 4, 4, 2, K2(tf32_k16)},
    {"m16n8k32.s32.s8.s8.s32", "s8", 2, 2, 4, 2, K2(s8_k32)},
    {"m16n8k64.s32.s8.s8.s32", "s8", 4, 4, 4, 1, K1(s8_k64)},
    {"m16n8k64.f32.e4m3.e4m3.f32", "e4m3", 4, 4, 4, 1, K1(e4m3_k64)},
};

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t next32() {         // splitmix64
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}
static int small() { return (int)(next32() % 9) - 4; }     // -4 .. 4
static uint32_t f32bits(float x) { union { float f; uint32_t u; } v; v.f = x; return v.u; }
static uint32_t half_of(int v) {   // small integers, exactly
    static const uint16_t pos[5] = {0x0000, 0x3C00, 0x4000, 0x4200, 0x4400};
    return v < 0 ? pos[-v] | 0x8000 : pos[v];
}
static uint32_t bf16_of(int v) { return f32bits((float)v) >> 16; }
static uint32_t e4m3_of(int v) {
    static const uint8_t pos[5] = {0x00, 0x38, 0x40, 0x44, 0x48};
    return v < 0 ? pos[-v] | 0x80 : pos[v];
}
// a register of random small values of the element type
static uint32_t reg(const char *elem) {
    switch (elem[0] == 'b' ? 'b' : elem[0] == 't' ? 't' : elem[0] == 's' ? 's' : elem[1] == '4' ? '8' : 'h') {
    case 'h': return half_of(small()) | half_of(small()) << 16;
    case 'b': return bf16_of(small()) | bf16_of(small()) << 16;
    case 't': return f32bits((float)small());
    case 's': { uint32_t r = 0; for (int i = 0; i < 4; i++) r |= (uint32_t)(uint8_t)small() << (8 * i); return r; }
    default: { uint32_t r = 0; for (int i = 0; i < 4; i++) r |= e4m3_of(small()) << (8 * i); return r; }
    }
}
// a metadata word of valid 2:4 index pairs (i0 < i1 in each nibble; tf32's 1:2: 0b0100 or 0b1110)
static uint32_t meta(const char *elem) {
    static const uint8_t pairs[6] = {0x4, 0x8, 0xC, 0x9, 0xD, 0xE}, tf[2] = {0x4, 0xE};
    uint32_t r = 0;
    for (int i = 0; i < 8; i++) r |= (uint32_t)(elem[0] == 't' ? tf[next32() % 2] : pairs[next32() % 6]) << (4 * i);
    return r;
}

static void print_regs(const char *key, uint32_t (*x)[MAXR], int n, bool comma) {
    printf("\"%s\": [", key);
    for (int t = 0; t < 32; t++) {
        printf("[");
        for (int i = 0; i < n; i++) printf("%u%s", x[t][i], i + 1 < n ? "," : "");
        printf("]%s", t < 31 ? "," : "");
    }
    printf("]%s", comma ? ", " : "");
}

int main() {
    Frag *dev, host[TRIALS];
    cudaMalloc(&dev, sizeof host);
    printf("{\n");
    int nforms = sizeof FORMS / sizeof FORMS[0];
    for (int fi = 0; fi < nforms; fi++) {
        Form &F = FORMS[fi];
        bool accum_int = F.elem[0] == 's';
        printf("\"%s\": {\n", F.name);
        for (int sel = 0; sel < F.sels; sel++) {
            for (int tr = 0; tr < TRIALS; tr++) {
                Frag &g = host[tr];
                for (int t = 0; t < 32; t++) {
                    for (int i = 0; i < MAXR; i++) {
                        g.a[t][i] = i < F.na ? reg(F.elem) : 0;
                        g.b[t][i] = i < F.nb ? reg(F.elem) : 0;
                        g.c[t][i] = i >= F.nc ? 0 : accum_int ? (uint32_t)small()
                                  : F.nc == 2 ? half_of(small()) | half_of(small()) << 16 : f32bits((float)small());
                        g.d[t][i] = 0;
                    }
                    g.e[t] = meta(F.elem);
                }
            }
            cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice);
            F.k[sel]<<<TRIALS, 32>>>(dev);
            int err = (int)cudaDeviceSynchronize();
            cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost);
            printf("\"%d\": {\"error\": %d, \"trials\": [\n", sel, err);
            for (int tr = 0; tr < TRIALS; tr++) {
                Frag &g = host[tr];
                printf("{");
                print_regs("a", g.a, F.na, true);
                print_regs("b", g.b, F.nb, true);
                print_regs("c", g.c, F.nc, true);
                printf("\"e\": [");
                for (int t = 0; t < 32; t++) printf("%u%s", g.e[t], t < 31 ? "," : "");
                printf("], ");
                print_regs("d", g.d, F.nc, false);
                printf("}%s\n", tr + 1 < TRIALS ? "," : "");
            }
            printf("]}%s\n", sel + 1 < F.sels ? "," : "");
        }
        printf("}%s\n", fi + 1 < nforms ? "," : "");
    }
    printf("}\n");
    return 0;
}
