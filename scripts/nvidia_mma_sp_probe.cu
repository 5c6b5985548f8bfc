// What an NVIDIA GPU answers for sparse mma (mma.sp.sync.aligned, 2:4 structured sparsity of A): for each form
// sm_90 runs, each sparsity selector, and a few warps of random fragments (small integers, exact in every type),
// the registers every thread gave (A's compressed fragment, B, C, the metadata word) and the D it got back. The
// ISA gives the compressed A's and the metadata's layouts in figures only: these answers are the test data a
// sparse mma must reproduce bit for bit. The .e4m3/.e5m2 forms also run warps of random finite values (key
// "random"), whose sums round, to show the order in which the hardware adds. Prints JSON.
// Build and run: nvcc -O1 -arch=sm_90 -o probe scripts/nvidia_mma_sp_probe.cu && ./probe > answers.json
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

enum { TRIALS = 4, RANDOM_TRIALS = 16, MAXR = 4 };

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
SP(e5m2_k64, "mma.sp.sync.aligned.m16n8k64.row.col.f32.e5m2.e5m2.f32", 4, 4, 4, 1)
SP(e5m2e4m3_k64, "mma.sp.sync.aligned.m16n8k64.row.col.f32.e5m2.e4m3.f32", 4, 4, 4, 1)
SP(u8_k32, "mma.sp.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32", 2, 2, 4, 2)
SP(s8u8_k64, "mma.sp.sync.aligned.m16n8k64.row.col.s32.s8.u8.s32", 4, 4, 4, 1)
SP(s4_k64, "mma.sp.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", 2, 2, 4, 2)
SP(u4_k64, "mma.sp.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32", 2, 2, 4, 2)
SP(u4s4_k64, "mma.sp.sync.aligned.m16n8k64.row.col.s32.u4.s4.s32", 2, 2, 4, 2)
SP(s4_k128, "mma.sp.sync.aligned.m16n8k128.row.col.s32.s4.s4.s32", 4, 4, 4, 1)
SP(u4_k128, "mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.u4.s32", 4, 4, 4, 1)
SP(s4u4_k128_sat, "mma.sp.sync.aligned.m16n8k128.row.col.satfinite.s32.s4.u4.s32", 4, 4, 4, 1)
SP(s4_k128_ord, "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.s32.s4.s4.s32", 4, 4, 4, 1)

typedef void (*Kernel)(Frag *);
struct Form {
    const char *name, *elem, *belem;     // A's and B's element types
    int na, nb, nc, sels;
    Kernel k[4];
};
#define K4(N) {N<0>, N<1>, N<2>, N<3>}
#define K2(N) {N<0>, N<1>, nullptr, nullptr}
#define K1(N) {N<0>, nullptr, nullptr, nullptr}
static Form FORMS[] = {
    {"m16n8k16.f32.f16.f16.f32", "f16", "f16", 2, 2, 4, 4, K4(f16_k16)},
    {"m16n8k16.f16.f16.f16.f16", "f16", "f16", 2, 2, 2, 4, K4(f16_k16_h)},
    {"m16n8k32.f32.f16.f16.f32", "f16", "f16", 4, 4, 4, 2, K2(f16_k32)},
    {"m16n8k16.f32.bf16.bf16.f32", "bf16", "bf16", 2, 2, 4, 4, K4(bf16_k16)},
    {"m16n8k32.f32.bf16.bf16.f32", "bf16", "bf16", 4, 4, 4, 2, K2(bf16_k32)},
    {"m16n8k8.f32.tf32.tf32.f32", "tf32", "tf32", 2, 2, 4, 4, K4(tf32_k8)},
    {"m16n8k16.f32.tf32.tf32.f32", "tf32", "tf32", 4, 4, 4, 2, K2(tf32_k16)},
    {"m16n8k32.s32.s8.s8.s32", "s8", "s8", 2, 2, 4, 2, K2(s8_k32)},
    {"m16n8k64.s32.s8.s8.s32", "s8", "s8", 4, 4, 4, 1, K1(s8_k64)},
    {"m16n8k64.f32.e4m3.e4m3.f32", "e4m3", "e4m3", 4, 4, 4, 1, K1(e4m3_k64)},
    {"m16n8k64.f32.e5m2.e5m2.f32", "e5m2", "e5m2", 4, 4, 4, 1, K1(e5m2_k64)},
    {"m16n8k64.f32.e5m2.e4m3.f32", "e5m2", "e4m3", 4, 4, 4, 1, K1(e5m2e4m3_k64)},
    {"m16n8k32.s32.u8.u8.s32", "u8", "u8", 2, 2, 4, 2, K2(u8_k32)},
    {"m16n8k64.s32.s8.u8.s32", "s8", "u8", 4, 4, 4, 1, K1(s8u8_k64)},
    {"m16n8k64.s32.s4.s4.s32", "s4", "s4", 2, 2, 4, 2, K2(s4_k64)},
    {"m16n8k64.s32.u4.u4.s32", "u4", "u4", 2, 2, 4, 2, K2(u4_k64)},
    {"m16n8k64.s32.u4.s4.s32", "u4", "s4", 2, 2, 4, 2, K2(u4s4_k64)},
    {"m16n8k128.s32.s4.s4.s32", "s4", "s4", 4, 4, 4, 1, K1(s4_k128)},
    {"m16n8k128.s32.u4.u4.s32", "u4", "u4", 4, 4, 4, 1, K1(u4_k128)},
    {"m16n8k128.satfinite.s32.s4.u4.s32", "s4", "u4", 4, 4, 4, 1, K1(s4u4_k128_sat)},
    {"m16n8k128.ordered.s32.s4.s4.s32", "s4", "s4", 4, 4, 4, 1, K1(s4_k128_ord)},
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
static uint32_t e5m2_of(int v) {
    static const uint8_t pos[5] = {0x00, 0x3C, 0x40, 0x42, 0x44};
    return v < 0 ? pos[-v] | 0x80 : pos[v];
}
static bool is(const char *a, const char *b) { return strcmp(a, b) == 0; }
// a register of random small values of the element type (exact in every product and sum)
static uint32_t reg(const char *elem) {
    uint32_t r = 0;
    if (is(elem, "f16")) return half_of(small()) | half_of(small()) << 16;
    if (is(elem, "bf16")) return bf16_of(small()) | bf16_of(small()) << 16;
    if (is(elem, "tf32")) return f32bits((float)small());
    if (is(elem, "s4") || is(elem, "u4")) {        // the whole range of each nibble
        for (int i = 0; i < 8; i++) r |= (next32() & 15) << (4 * i);
        return r;
    }
    for (int i = 0; i < 4; i++) {
        uint32_t x = is(elem, "e4m3") ? e4m3_of(small()) : is(elem, "e5m2") ? e5m2_of(small())
                   : is(elem, "u8") ? next32() % 256 : (uint32_t)(uint8_t)small();
        r |= x << (8 * i);
    }
    return r;
}
// a register of random finite fp8 values (each byte any finite one, so sums round)
static uint32_t random_fp8(const char *elem) {
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t x;
        do x = next32() & 0xFF;
        while (is(elem, "e4m3") ? (x & 0x7F) == 0x7F : ((x >> 2) & 31) == 31);
        r |= x << (8 * i);
    }
    return r;
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

// one launch of a form's kernel for `sel` over n warps; prints `"key": {"error": .., "trials": [..]}`
static void run(const Form &F, int sel, int n, bool random, const char *key, Frag *dev, Frag *host) {
    bool accum_int = strstr(F.name, ".s32.") != nullptr;
    for (int tr = 0; tr < n; tr++) {
        Frag &g = host[tr];
        for (int t = 0; t < 32; t++) {
            for (int i = 0; i < MAXR; i++) {
                g.a[t][i] = i >= F.na ? 0 : random ? random_fp8(F.elem) : reg(F.elem);
                g.b[t][i] = i >= F.nb ? 0 : random ? random_fp8(F.belem) : reg(F.belem);
                g.c[t][i] = i >= F.nc ? 0 : random ? f32bits((float)((int)(next32() % 20001) - 10000) / 16.0f)
                          : accum_int ? (uint32_t)small()
                          : F.nc == 2 ? half_of(small()) | half_of(small()) << 16 : f32bits((float)small());
                g.d[t][i] = 0;
            }
            g.e[t] = meta(F.elem);
        }
    }
    cudaMemcpy(dev, host, n * sizeof(Frag), cudaMemcpyHostToDevice);
    F.k[sel]<<<n, 32>>>(dev);
    int err = (int)cudaDeviceSynchronize();
    cudaMemcpy(host, dev, n * sizeof(Frag), cudaMemcpyDeviceToHost);
    printf("\"%s\": {\"error\": %d, \"trials\": [\n", key, err);
    for (int tr = 0; tr < n; tr++) {
        Frag &g = host[tr];
        printf("{");
        print_regs("a", g.a, F.na, true);
        print_regs("b", g.b, F.nb, true);
        print_regs("c", g.c, F.nc, true);
        printf("\"e\": [");
        for (int t = 0; t < 32; t++) printf("%u%s", g.e[t], t < 31 ? "," : "");
        printf("], ");
        print_regs("d", g.d, F.nc, false);
        printf("}%s\n", tr + 1 < n ? "," : "");
    }
    printf("]}");
}

int main() {
    static Frag host[RANDOM_TRIALS];
    Frag *dev;
    cudaMalloc(&dev, sizeof host);
    printf("{\n");
    int nforms = sizeof FORMS / sizeof FORMS[0];
    for (int fi = 0; fi < nforms; fi++) {
        Form &F = FORMS[fi];
        printf("\"%s\": {\n", F.name);
        for (int sel = 0; sel < F.sels; sel++) {
            char key[8];
            snprintf(key, sizeof key, "%d", sel);
            run(F, sel, TRIALS, false, key, dev, host);
            printf("%s\n", sel + 1 < F.sels ? "," : "");
        }
        if (F.elem[0] == 'e') {
            printf(",\n");
            run(F, 0, RANDOM_TRIALS, true, "random", dev, host);
            printf("\n");
        }
        printf("}%s\n", fi + 1 < nforms ? "," : "");
    }
    printf("}\n");
    return 0;
}
