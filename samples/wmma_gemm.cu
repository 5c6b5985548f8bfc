// Tensor cores through the CUDA C++ API and inline PTX: nvcuda::wmma GEMMs in f16 (16x16x16), bf16
// (32x8x16), tf32 (16x16x8), f64 (8x8x4) and u8/s8 (16x16x16) with f32/f64/s32 accumulators, k loops
// that load tiles with strides from global and shared memory, a uniform element-wise pass over an
// accumulator fragment (fragment.x[i]), and mma.sync m16n8k16 fed by ldmatrix .x4 / .x2.trans from
// shared memory. Small integer inputs keep every sum exact, so results equal the host's bit for bit.
// Built for a device below sm_80 (nvcc's default flavour: compute_75), the bf16/tf32/f64 and m16n8k16
// parts do not exist there and are reported as skipped.
#include "sample_common.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define SM80 1
#else
#define SM80 0
#endif

// The architecture the kernels were compiled for (the PTX the driver chose).
__global__ void kernel_arch(int *arch) {
#ifdef __CUDA_ARCH__
    *arch = __CUDA_ARCH__;
#endif
}

// C[M x N] (row-major, f32) = A[M x K] (row-major) * B[K x N] (column-major): one warp per 16x16 tile.
template <typename T> struct sm80_only { static const bool value = false; };
template <> struct sm80_only<__nv_bfloat16> { static const bool value = true; };
template <> struct sm80_only<double> { static const bool value = true; };

template <typename T, int TM, int TN, int TK, typename Acc>
__global__ void wmma_gemm(const T *a, const T *b, Acc *c, int M, int N, int K, float scale) {
  if constexpr (!SM80 && sm80_only<T>::value) {
    return;
  } else {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int tiles_n = N / TN;
    int tm = warp / tiles_n, tn = warp % tiles_n;
    if (tm * TM >= M) return;
    wmma::fragment<wmma::matrix_a, TM, TN, TK, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, TM, TN, TK, T, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, TM, TN, TK, Acc> acc;
    wmma::fill_fragment(acc, (Acc)0);
#pragma unroll 1
    for (int k = 0; k < K; k += TK) {
        wmma::load_matrix_sync(fa, a + (size_t)tm * TM * K + k, K);
        wmma::load_matrix_sync(fb, b + (size_t)tn * TN * K + k, K);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    // every element of the fragment the same way: the order of elements does not matter
    for (int i = 0; i < acc.num_elements; i++) acc.x[i] = acc.x[i] * (Acc)scale;
    wmma::store_matrix_sync(c + (size_t)tm * TM * N + tn * TN, acc, N, wmma::mem_row_major);
  }
}

// tf32: the inputs are f32 in memory, rounded to tf32 in the fragment (exact for small integers).
__global__ void wmma_tf32(const float *a, const float *b, float *c, int M, int N, int K) {
#if SM80
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int tiles_n = N / 16, tm = warp / tiles_n, tn = warp % tiles_n;
    if (tm * 16 >= M) return;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::load_matrix_sync(acc, c + (size_t)tm * 16 * N + tn * 16, N, wmma::mem_row_major);
#pragma unroll 1
    for (int k = 0; k < K; k += 8) {
        wmma::load_matrix_sync(fa, a + (size_t)tm * 16 * K + k, K);
        wmma::load_matrix_sync(fb, b + (size_t)tn * 16 * K + k, K);
        for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
        for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c + (size_t)tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major);
#endif
}

// The same f16 product with both tiles staged in shared memory (a block of 4 warps, one 32x32 C tile).
__global__ void wmma_shared(const half *a, const half *b, float *c, int N, int K) {
    __shared__ __align__(32) half sa[32 * 16], sb[32 * 16];
    int w = threadIdx.x / 32, wr = w / 2, wc = w % 2;
    int row0 = blockIdx.y * 32, col0 = blockIdx.x * 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll 1
    for (int k = 0; k < K; k += 16) {
        for (int i = threadIdx.x; i < 32 * 16; i += blockDim.x) {
            sa[i] = a[(size_t)(row0 + i / 16) * K + k + i % 16];
            sb[i] = b[(size_t)(col0 + i / 16) * K + k + i % 16];
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, sa + wr * 16 * 16, 16);
        wmma::load_matrix_sync(fb, sb + wc * 16 * 16, 16);
        wmma::mma_sync(acc, fa, fb, acc);
        __syncthreads();
    }
    wmma::store_matrix_sync(c + (size_t)(row0 + wr * 16) * N + col0 + wc * 16, acc, N, wmma::mem_row_major);
}

// mma.sync.m16n8k16 (f16 in, f32 out) with A loaded by ldmatrix.x4 and B by ldmatrix.x2.trans from a
// row-major 16x8 tile in shared memory; one warp per 16x8 tile of C.
__global__ void mma_ldmatrix(const half *a, const half *b, float *c, int N, int K) {
#if SM80
    __shared__ __align__(16) half sa[16 * 16], sb[16 * 8];
    int lane = threadIdx.x;
    int tm = blockIdx.y, tn = blockIdx.x;
    float d[4] = {0, 0, 0, 0};
#pragma unroll 1
    for (int k = 0; k < K; k += 16) {
        for (int i = lane; i < 256; i += 32) sa[i] = a[(size_t)(tm * 16 + i / 16) * K + k + i % 16];
        for (int i = lane; i < 128; i += 32) sb[i] = b[(size_t)(k + i / 8) * N + tn * 8 + i % 8];  // B row-major
        __syncwarp();
        unsigned ra[4], rb[2];
        // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
        unsigned pa = (unsigned)__cvta_generic_to_shared(&sa[(lane % 16) * 16 + (lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(ra[0]), "=r"(ra[1]), "=r"(ra[2]), "=r"(ra[3]) : "r"(pa));
        unsigned pb = (unsigned)__cvta_generic_to_shared(&sb[(lane % 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                     : "=r"(rb[0]), "=r"(rb[1]) : "r"(pb));
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
        __syncwarp();
    }
    int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; i++)
        c[(size_t)(tm * 16 + g + 8 * (i / 2)) * N + tn * 8 + 2 * t + (i % 2)] = d[i];
#endif
}

template <typename T> static T from_int(int v) { return (T)v; }
template <> half from_int<half>(int v) { return __float2half((float)v); }
template <> __nv_bfloat16 from_int<__nv_bfloat16>(int v) { return __float2bfloat16((float)v); }

// A row-major, B column-major (b[n * K + k]); C = scale * A * B (+ C0), in doubles (exact here).
static void host_gemm(const int *a, const int *b, const double *c0, double *c, int M, int N, int K, double scale,
                      bool b_row_major = false) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[b_row_major ? k * N + j : j * K + k];
            c[i * N + j] = scale * s + (c0 ? c0[i * N + j] : 0);
        }
}

template <typename T, int TM, int TN, int TK, typename Acc>
static void run_wmma(const char *what, Rng &rng, int M, int N, int K, int lo, int hi, float scale) {
    int *ai = new int[M * K], *bi = new int[K * N];
    T *a = new T[M * K], *b = new T[K * N];
    for (int i = 0; i < M * K; i++) { ai[i] = rng.range(lo, hi); a[i] = from_int<T>(ai[i]); }
    for (int i = 0; i < K * N; i++) { bi[i] = rng.range(lo, hi); b[i] = from_int<T>(bi[i]); }
    T *da, *db;
    Acc *dc;
    CHECK(cudaMalloc(&da, sizeof(T) * M * K));
    CHECK(cudaMalloc(&db, sizeof(T) * K * N));
    CHECK(cudaMalloc(&dc, sizeof(Acc) * M * N));
    CHECK(cudaMemcpy(da, a, sizeof(T) * M * K, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, sizeof(T) * K * N, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dc, 0xFF, sizeof(Acc) * M * N));
    int warps = (M / TM) * (N / TN);
    wmma_gemm<T, TM, TN, TK, Acc><<<(warps + 3) / 4, 128>>>(da, db, dc, M, N, K, scale);
    CHECK_LAUNCH();
    Acc *c = new Acc[M * N];
    double *want = new double[M * N];
    CHECK(cudaMemcpy(c, dc, sizeof(Acc) * M * N, cudaMemcpyDeviceToHost));
    host_gemm(ai, bi, nullptr, want, M, N, K, scale);
    int before = g_failures;
    for (int i = 0; i < M * N; i++)
        if ((double)c[i] != want[i]) {
            char g[64], w[64];
            sprintf(g, "%.17g", (double)c[i]);
            sprintf(w, "%.17g", want[i]);
            report_mismatch(what, i, g, w);
        }
    printf("%-28s %dx%dx%d %s\n", what, M, N, K, g_failures == before ? "ok" : "MISMATCH");
    CHECK(cudaFree(da)); CHECK(cudaFree(db)); CHECK(cudaFree(dc));
    delete[] ai; delete[] bi; delete[] a; delete[] b; delete[] c; delete[] want;
}

static void check_f32(const char *what, const float *got, const double *want, int n) {
    int before = g_failures;
    for (int i = 0; i < n; i++)
        if ((double)got[i] != want[i]) {
            char g[64], w[64];
            sprintf(g, "%.9g", got[i]);
            sprintf(w, "%.9g", want[i]);
            report_mismatch(what, i, g, w);
        }
    printf("%-28s %s\n", what, g_failures == before ? "ok" : "MISMATCH");
}

int main() {
    Rng rng(15);
    int arch = 0, *darch;
    CHECK(cudaMalloc(&darch, sizeof(int)));
    kernel_arch<<<1, 1>>>(darch);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(&arch, darch, sizeof(int), cudaMemcpyDeviceToHost));
    bool sm80 = arch >= 800;
    run_wmma<half, 16, 16, 16, float>("wmma f16 m16n16k16", rng, 64, 48, 96, -4, 4, 1.0f);
    run_wmma<half, 32, 8, 16, float>("wmma f16 m32n8k16 x0.5", rng, 64, 32, 64, -3, 3, 0.5f);
    run_wmma<half, 8, 32, 16, half>("wmma f16 m8n32k16 f16 acc", rng, 32, 64, 48, -2, 2, 1.0f);
    if (sm80) {
        run_wmma<__nv_bfloat16, 32, 8, 16, float>("wmma bf16 m32n8k16", rng, 64, 32, 64, -8, 8, 1.0f);
        run_wmma<double, 8, 8, 4, double>("wmma f64 m8n8k4", rng, 32, 32, 64, -100, 100, 2.0f);
    } else {
        printf("wmma bf16/f64: skipped (kernels built for sm_%d)\n", arch / 10);
    }
    run_wmma<signed char, 16, 16, 16, int>("wmma s8 m16n16k16", rng, 32, 32, 128, -128, 127, 1.0f);
    run_wmma<unsigned char, 16, 16, 16, int>("wmma u8 m16n16k16", rng, 32, 32, 128, 0, 255, 1.0f);

    // tf32 on top of a C matrix, and the f16 shared-memory and mma.sync/ldmatrix GEMMs
    const int M = 64, N = 32, K = 64;
    int *ai = new int[M * K], *bi = new int[K * N];
    float *af = new float[M * K], *bf = new float[K * N], *c = new float[M * N];
    half *ah = new half[M * K], *bh = new half[K * N], *bh_row = new half[K * N];
    double *c0 = new double[M * N], *want = new double[M * N];
    for (int i = 0; i < M * K; i++) { ai[i] = rng.range(-6, 6); af[i] = (float)ai[i]; ah[i] = __float2half(af[i]); }
    for (int i = 0; i < K * N; i++) { bi[i] = rng.range(-6, 6); bf[i] = (float)bi[i]; bh[i] = __float2half(bf[i]); }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) bh_row[k * N + n] = bh[n * K + k];
    for (int i = 0; i < M * N; i++) { c0[i] = rng.range(-1000, 1000); c[i] = (float)c0[i]; }
    float *da, *db, *dc;
    half *dah, *dbh, *dbr;
    CHECK(cudaMalloc(&da, sizeof(float) * M * K));
    CHECK(cudaMalloc(&db, sizeof(float) * K * N));
    CHECK(cudaMalloc(&dc, sizeof(float) * M * N));
    CHECK(cudaMalloc(&dah, sizeof(half) * M * K));
    CHECK(cudaMalloc(&dbh, sizeof(half) * K * N));
    CHECK(cudaMalloc(&dbr, sizeof(half) * K * N));
    CHECK(cudaMemcpy(da, af, sizeof(float) * M * K, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, bf, sizeof(float) * K * N, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, c, sizeof(float) * M * N, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dah, ah, sizeof(half) * M * K, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbh, bh, sizeof(half) * K * N, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbr, bh_row, sizeof(half) * K * N, cudaMemcpyHostToDevice));
    if (sm80) {
        wmma_tf32<<<(M / 16) * (N / 16) / 4, 128>>>(da, db, dc, M, N, K);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(c, dc, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
        host_gemm(ai, bi, c0, want, M, N, K, 1.0);
        check_f32("wmma tf32 m16n16k8 + C", c, want, M * N);
    }

    CHECK(cudaMemset(dc, 0xFF, sizeof(float) * M * N));
    wmma_shared<<<dim3(N / 32, M / 32), 128>>>(dah, dbh, dc, N, K);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(c, dc, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
    host_gemm(ai, bi, nullptr, want, M, N, K, 1.0);
    check_f32("wmma f16 from shared", c, want, M * N);

    if (sm80) {
        CHECK(cudaMemset(dc, 0xFF, sizeof(float) * M * N));
        mma_ldmatrix<<<dim3(N / 8, M / 16), 32>>>(dah, dbr, dc, N, K);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(c, dc, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
        check_f32("mma.sync + ldmatrix", c, want, M * N);
    } else {
        printf("wmma tf32, mma.sync m16n8k16: skipped (kernels built for sm_%d)\n", arch / 10);
    }

    printf("%s\n", g_failures ? "FAIL" : "PASS");
    return g_failures ? 1 : 0;
}
