// sm_120a's block-scaled tensor-core products (OCP microscaling, one ue8m0 power-of-two scale per 32 k), as an
// LLM's quantized matmul issues them: an MXFP4 GEMM (fp4 e2m1 activations and weights, packed two to a byte,
// mma .kind::mxf4 with .scale_vec::2X) and an MXFP8 x MXFP4 one (e4m3 activations, e2m1 weights each in an
// 8-bit container, .kind::mxf8f6f4), each warp a 16x8 tile of C, checked against a host reference in doubles
// within the f32 accumulation's error (the ISA leaves its order and rounding open). The kernels have the
// instructions only in a build for compute_120a; other builds print "nothing to run".
#include "sample_common.h"
#include <vector>

#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
#define HAVE_MX 1
#endif

static const float E2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

// A row-major, B column-major (k consecutive), both fp4 packed low nibble first; SA[m][k/32], SB[n][k/32]
__global__ void mxfp4_gemm(const uint8_t *A, const uint8_t *B, const uint8_t *SA, const uint8_t *SB, float *C,
                           int N, int K) {
#ifdef HAVE_MX
    int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8, ks = K / 32;
    float d[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < K; k0 += 64) {
        uint32_t a[4], b[2];
        for (int i = 0; i < 4; i++)     // rows g, g+8; k 8t..8t+7, then +32
            a[i] = *(const uint32_t *)(A + ((m0 + g + 8 * (i & 1)) * K + k0 + 8 * t + 32 * (i >> 1)) / 2);
        for (int i = 0; i < 2; i++)     // column g; k 8t..8t+7, then +32
            b[i] = *(const uint32_t *)(B + ((n0 + g) * K + k0 + 8 * t + 32 * i) / 2);
        // scale A: lanes 4r and 4r+1 of each quad give rows r and r+8 (thread-id-a 0); scale B: lane 4n gives
        // column n (thread-id-b 0); bytes 2 and 3 (byte-id 2) hold the two k chunks
        int ra = m0 + g + 8 * (t & 1);
        uint32_t sa = (SA[ra * ks + k0 / 32] << 16) | (SA[ra * ks + k0 / 32 + 1] << 24);
        uint32_t sb = (SB[(n0 + g) * ks + k0 / 32] << 16) | (SB[(n0 + g) * ks + k0 / 32 + 1] << 24);
        asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {2, 0}, %11, {2, 0};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sa), "r"(sb));
    }
    for (int i = 0; i < 4; i++) C[(m0 + g + 8 * (i >> 1)) * N + n0 + 2 * t + (i & 1)] = d[i];
#endif
}

// A: e4m3 bytes, row-major; B: e2m1 in bytes (bits 5..2), column-major
__global__ void mxfp8_fp4_gemm(const uint8_t *A, const uint8_t *B, const uint8_t *SA, const uint8_t *SB, float *C,
                               int N, int K) {
#ifdef HAVE_MX
    int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8, ks = K / 32;
    float d[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < K; k0 += 32) {
        uint32_t a[4], b[2];
        for (int i = 0; i < 4; i++)     // rows g, g+8; k 4t..4t+3, then +16
            a[i] = *(const uint32_t *)(A + (m0 + g + 8 * (i & 1)) * K + k0 + 4 * t + 16 * (i >> 1));
        for (int i = 0; i < 2; i++)
            b[i] = *(const uint32_t *)(B + (n0 + g) * K + k0 + 4 * t + 16 * i);
        // one scale per 32 k: row r's from lane 4r+2 (thread-id-a 1), r+8's from lane 4r+3, column n's from
        // lane 4n+1 (thread-id-b 1); byte k0/32 % 4 of a word holding four chunks' factors
        int c = k0 / 32, ra = m0 + g + 8 * (t & 1);
        uint32_t sa = 0, sb = 0;
        for (int j = 0; j < 4 && c - c % 4 + j < ks; j++) {
            sa |= (uint32_t)SA[ra * ks + c - c % 4 + j] << (8 * j);
            sb |= (uint32_t)SB[(n0 + g) * ks + c - c % 4 + j] << (8 * j);
        }
        if (t < 2) sa = 0x01010101u * (lane & 0xFF);    // lanes that give no factor: anything
        if (t != 1) sb = 0xFEFEFEFEu;
        uint16_t bid = c % 4;
        asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {%12, 1}, %11, {%12, 1};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sa), "r"(sb), "h"(bid));
    }
    for (int i = 0; i < 4; i++) C[(m0 + g + 8 * (i >> 1)) * N + n0 + 2 * t + (i & 1)] = d[i];
#endif
}

static double e4m3(uint8_t x) {
    int e = (x >> 3) & 15, m = x & 7;
    double v = e ? ldexp(1 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return x & 0x80 ? -v : v;
}

// within 2^-15 of the sum of the products' magnitudes: f32 accumulation of 256 terms
static int check(const char *what, const std::vector<float> &got, const std::vector<double> &want,
                 const std::vector<double> &mag) {
    int bad = 0;
    for (size_t i = 0; i < want.size(); i++)
        if (!(fabs(got[i] - want[i]) <= ldexp(mag[i], -15)) && bad++ < 5)
            printf("%s: C[%zu] = %.9g, want %.9g\n", what, i, got[i], want[i]);
    printf("%s: %zu values, %d wrong\n", what, want.size(), bad);
    return bad;
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaFuncAttributes fa;
    CHECK(cudaFuncGetAttributes(&fa, mxfp4_gemm));
    if (prop.major < 12 || fa.ptxVersion < 120) {
        printf("compute capability %d.%d, kernels built for %d: block-scaled mma needs sm_120a, nothing to run\n",
               prop.major, prop.minor, fa.ptxVersion);
        return finish();
    }
    const int M = 64, N = 48, K = 256, KS = K / 32;
    Rng rng(2026);
    std::vector<uint8_t> A4(M * K / 2), B4(N * K / 2), A8(M * K), B8(N * K), SA(M * KS), SB(N * KS);
    for (auto &x : A4) x = rng.u32() & 0xFF;
    for (auto &x : B4) x = rng.u32() & 0xFF;
    for (auto &x : A8) {                // finite e4m3 of any magnitude
        x = rng.u32() & 0xFF;
        if ((x & 0x7F) == 0x7F) x = 0;
    }
    for (auto &x : B8) x = (rng.u32() & 15) << 2;
    for (auto &x : SA) x = 127 + rng.range(-3, 3);
    for (auto &x : SB) x = 127 + rng.range(-3, 3);
    uint8_t *dA4, *dB4, *dA8, *dB8, *dSA, *dSB;
    float *dC;
    CHECK(cudaMalloc(&dA4, A4.size()));
    CHECK(cudaMalloc(&dB4, B4.size()));
    CHECK(cudaMalloc(&dA8, A8.size()));
    CHECK(cudaMalloc(&dB8, B8.size()));
    CHECK(cudaMalloc(&dSA, SA.size()));
    CHECK(cudaMalloc(&dSB, SB.size()));
    CHECK(cudaMalloc(&dC, M * N * sizeof(float)));
    CHECK(cudaMemcpy(dA4, A4.data(), A4.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB4, B4.data(), B4.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dA8, A8.data(), A8.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB8, B8.data(), B8.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dSA, SA.data(), SA.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dSB, SB.data(), SB.size(), cudaMemcpyHostToDevice));
    std::vector<float> got(M * N);
    std::vector<double> want4(M * N), want8(M * N), mag4(M * N), mag8(M * N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            for (int k = 0; k < K; k++) {
                int ia = m * K + k, ib = n * K + k;
                double sc = ldexp(1.0, SA[m * KS + k / 32] - 127 + SB[n * KS + k / 32] - 127);
                double p4 = E2M1[(A4[ia / 2] >> 4 * (ia & 1)) & 15] * E2M1[(B4[ib / 2] >> 4 * (ib & 1)) & 15] * sc;
                double p8 = e4m3(A8[ia]) * E2M1[B8[ib] >> 2] * sc;
                want4[m * N + n] += p4, mag4[m * N + n] += fabs(p4);
                want8[m * N + n] += p8, mag8[m * N + n] += fabs(p8);
            }
        }
    int bad = 0;
    CHECK(cudaMemset(dC, 0xFF, M * N * sizeof(float)));
    mxfp4_gemm<<<dim3(N / 8, M / 16), 32>>>(dA4, dB4, dSA, dSB, dC, N, K);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got.data(), dC, M * N * sizeof(float), cudaMemcpyDeviceToHost));
    bad += check("mxfp4 x mxfp4", got, want4, mag4);
    CHECK(cudaMemset(dC, 0xFF, M * N * sizeof(float)));
    mxfp8_fp4_gemm<<<dim3(N / 8, M / 16), 32>>>(dA8, dB8, dSA, dSB, dC, N, K);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got.data(), dC, M * N * sizeof(float), cudaMemcpyDeviceToHost));
    bad += check("mxfp8 x mxfp4", got, want8, mag8);
    if (bad) printf("FAIL\n");
    return bad ? 1 : finish();
}
