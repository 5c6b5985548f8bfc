// Half and bfloat16: conversions (round-to-nearest-even, checked bit for bit against the host
// conversion), scalar __half/__nv_bfloat16 arithmetic, packed __half2/__nv_bfloat162 math (__hadd2,
// __hmul2, __hfma2, __hneg2), comparisons, and a half-precision dot product accumulated in float.
#include "sample_common.h"
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__global__ void half_ops(const __half *a, const __half *b, const __half *c, __half *sum, __half *prod, __half *fma_out,
                         __half *neg_max, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sum[i] = __hadd(a[i], b[i]);
    prod[i] = __hmul(a[i], b[i]);
    fma_out[i] = __hfma(a[i], b[i], c[i]);
    neg_max[i] = __hgt(a[i], b[i]) ? __hneg(a[i]) : __hneg(b[i]);
}

__global__ void half2_ops(const __half2 *a, const __half2 *b, const __half2 *c, __half2 *sum, __half2 *prod,
                          __half2 *fma_out, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n2) return;
    sum[i] = __hadd2(a[i], b[i]);
    prod[i] = __hmul2(a[i], b[i]);
    fma_out[i] = __hneg2(__hfma2(a[i], b[i], c[i]));
}

__global__ void convert(const float *f, __half *h, __nv_bfloat16 *bf, float *h_back, float *bf_back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    h[i] = __float2half_rn(f[i]);
    bf[i] = __float2bfloat16_rn(f[i]);
    h_back[i] = __half2float(h[i]);
    bf_back[i] = __bfloat162float(bf[i]);
}

__global__ void bf16_ops(const __nv_bfloat16 *a, const __nv_bfloat16 *b, __nv_bfloat16 *sum, __nv_bfloat16 *prod,
                         __nv_bfloat162 *pair, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sum[i] = __hadd(a[i], b[i]);
    prod[i] = __hmul(a[i], b[i]);
    __nv_bfloat162 p = __halves2bfloat162(a[i], b[i]);
    pair[i] = __hmul2(p, p);
}

__global__ void half_dot(const __half2 *a, const __half2 *b, float *out, int n2) {
    __shared__ float s[256];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += gridDim.x * blockDim.x) {
        float2 fa = __half22float2(a[i]), fb = __half22float2(b[i]);
        acc += fa.x * fb.x + fa.y * fb.y;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int st = blockDim.x / 2; st > 0; st >>= 1) {
        if (threadIdx.x < st) s[threadIdx.x] += s[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

static unsigned short bits(__half h) { __half_raw r = h; return r.x; }
static unsigned short bits(__nv_bfloat16 h) { __nv_bfloat16_raw r = h; return r.x; }

int main() {
    Rng rng(18);
    const int n = 1 << 16;
    // Inputs are k/256 with |k| <= 1024: every sum, product and a*b+c is exact in float, so
    // computing in float and rounding once to half is the correctly rounded half result.
    __half *ha = new __half[n], *hb = new __half[n], *hc = new __half[n];
    for (int i = 0; i < n; i++) {
        ha[i] = __float2half((float)rng.range(-1024, 1024) / 256.0f);
        hb[i] = __float2half((float)rng.range(-1024, 1024) / 256.0f);
        hc[i] = __float2half((float)rng.range(-1024, 1024) / 256.0f);
    }
    __half *da, *db, *dc, *ds, *dp, *df, *dn;
    size_t hbytes = n * sizeof(__half);
    CHECK(cudaMalloc(&da, hbytes)); CHECK(cudaMalloc(&db, hbytes)); CHECK(cudaMalloc(&dc, hbytes));
    CHECK(cudaMalloc(&ds, hbytes)); CHECK(cudaMalloc(&dp, hbytes)); CHECK(cudaMalloc(&df, hbytes));
    CHECK(cudaMalloc(&dn, hbytes));
    CHECK(cudaMemcpy(da, ha, hbytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, hb, hbytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, hc, hbytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(ds, 0xFF, hbytes)); CHECK(cudaMemset(dp, 0xFF, hbytes));
    CHECK(cudaMemset(df, 0xFF, hbytes)); CHECK(cudaMemset(dn, 0xFF, hbytes));
    half_ops<<<n / 256, 256>>>(da, db, dc, ds, dp, df, dn, n);
    CHECK_LAUNCH();
    __half *gs = new __half[n], *gp = new __half[n], *gf = new __half[n], *gn = new __half[n];
    CHECK(cudaMemcpy(gs, ds, hbytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gp, dp, hbytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gf, df, hbytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gn, dn, hbytes, cudaMemcpyDeviceToHost));
    unsigned *got_bits = new unsigned[n * 4], *want_bits = new unsigned[n * 4];
    for (int i = 0; i < n; i++) {
        float a = __half2float(ha[i]), b = __half2float(hb[i]), c = __half2float(hc[i]);
        want_bits[4 * i + 0] = bits(__float2half_rn(a + b));
        want_bits[4 * i + 1] = bits(__float2half_rn(a * b));
        want_bits[4 * i + 2] = bits(__float2half_rn(a * b + c));
        want_bits[4 * i + 3] = bits(__float2half_rn(a > b ? -a : -b));
        got_bits[4 * i + 0] = bits(gs[i]); got_bits[4 * i + 1] = bits(gp[i]);
        got_bits[4 * i + 2] = bits(gf[i]); got_bits[4 * i + 3] = bits(gn[i]);
    }
    compare_exact("half add/mul/fma/negmax bits", got_bits, want_bits, (size_t)n * 4);

    // Packed: the same inputs viewed as n/2 __half2 pairs.
    CHECK(cudaMemset(ds, 0xFF, hbytes)); CHECK(cudaMemset(dp, 0xFF, hbytes)); CHECK(cudaMemset(df, 0xFF, hbytes));
    half2_ops<<<n / 2 / 256, 256>>>((__half2 *)da, (__half2 *)db, (__half2 *)dc, (__half2 *)ds, (__half2 *)dp, (__half2 *)df, n / 2);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(gs, ds, hbytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gp, dp, hbytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gf, df, hbytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        float a = __half2float(ha[i]), b = __half2float(hb[i]), c = __half2float(hc[i]);
        want_bits[3 * i + 0] = bits(__float2half_rn(a + b));
        want_bits[3 * i + 1] = bits(__float2half_rn(a * b));
        want_bits[3 * i + 2] = bits(__float2half_rn(-(a * b + c)));
        got_bits[3 * i + 0] = bits(gs[i]); got_bits[3 * i + 1] = bits(gp[i]); got_bits[3 * i + 2] = bits(gf[i]);
    }
    compare_exact("half2 add/mul/negfma bits", got_bits, want_bits, (size_t)n * 3);

    // Conversions of arbitrary floats (including ties, tiny and huge values) against the host's.
    float *fin = new float[n];
    for (int i = 0; i < n; i++) {
        switch (i % 4) {
        case 0: fin[i] = rng.uniform(-70000.0f, 70000.0f); break;  // beyond half's range at the ends
        case 1: fin[i] = rng.uniform(-1e-6f, 1e-6f); break;        // half subnormals
        case 2: { unsigned u = rng.u32(); memcpy(&fin[i], &u, 4); if (std::isnan(fin[i])) fin[i] = 1.0f; } break;
        default: fin[i] = (float)rng.range(-4096, 4096) + 0.5f; break;  // ties in bf16 for large values
        }
    }
    float *dfin, *dhb, *dbb; __half *dh; __nv_bfloat16 *dbf;
    CHECK(cudaMalloc(&dfin, n * sizeof(float))); CHECK(cudaMalloc(&dhb, n * sizeof(float)));
    CHECK(cudaMalloc(&dbb, n * sizeof(float))); CHECK(cudaMalloc(&dh, hbytes)); CHECK(cudaMalloc(&dbf, n * sizeof(__nv_bfloat16)));
    CHECK(cudaMemcpy(dfin, fin, n * sizeof(float), cudaMemcpyHostToDevice));
    convert<<<n / 256, 256>>>(dfin, dh, dbf, dhb, dbb, n);
    CHECK_LAUNCH();
    __half *gh = new __half[n]; __nv_bfloat16 *gbf = new __nv_bfloat16[n];
    float *ghb = new float[n], *gbb = new float[n], *rhb = new float[n], *rbb = new float[n];
    CHECK(cudaMemcpy(gh, dh, hbytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gbf, dbf, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(ghb, dhb, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gbb, dbb, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        got_bits[2 * i] = bits(gh[i]); want_bits[2 * i] = bits(__float2half_rn(fin[i]));
        got_bits[2 * i + 1] = bits(gbf[i]); want_bits[2 * i + 1] = bits(__float2bfloat16_rn(fin[i]));
        rhb[i] = __half2float(__float2half_rn(fin[i]));
        rbb[i] = __bfloat162float(__float2bfloat16_rn(fin[i]));
    }
    compare_exact("half/bf16 conversion bits", got_bits, want_bits, (size_t)n * 2);
    compare_exact("half->float", ghb, rhb, n);
    compare_exact("bf16->float", gbb, rbb, n);

    // bfloat16 arithmetic: inputs k/16 with |k| < 256 keep float intermediates exact.
    __nv_bfloat16 *ba = new __nv_bfloat16[n], *bb = new __nv_bfloat16[n];
    for (int i = 0; i < n; i++) {
        ba[i] = __float2bfloat16((float)rng.range(-255, 255) / 16.0f);
        bb[i] = __float2bfloat16((float)rng.range(-255, 255) / 16.0f);
    }
    __nv_bfloat16 *dba, *dbb2, *dbs, *dbp; __nv_bfloat162 *dpair;
    size_t bbytes = n * sizeof(__nv_bfloat16);
    CHECK(cudaMalloc(&dba, bbytes)); CHECK(cudaMalloc(&dbb2, bbytes)); CHECK(cudaMalloc(&dbs, bbytes));
    CHECK(cudaMalloc(&dbp, bbytes)); CHECK(cudaMalloc(&dpair, n * sizeof(__nv_bfloat162)));
    CHECK(cudaMemcpy(dba, ba, bbytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbb2, bb, bbytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dbs, 0xFF, bbytes)); CHECK(cudaMemset(dbp, 0xFF, bbytes));
    CHECK(cudaMemset(dpair, 0xFF, n * sizeof(__nv_bfloat162)));
    bf16_ops<<<n / 256, 256>>>(dba, dbb2, dbs, dbp, dpair, n);
    CHECK_LAUNCH();
    __nv_bfloat16 *gbs = new __nv_bfloat16[n], *gbp = new __nv_bfloat16[n];
    __nv_bfloat162 *gpair = new __nv_bfloat162[n];
    CHECK(cudaMemcpy(gbs, dbs, bbytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gbp, dbp, bbytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gpair, dpair, n * sizeof(__nv_bfloat162), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        float a = __bfloat162float(ba[i]), b = __bfloat162float(bb[i]);
        want_bits[4 * i + 0] = bits(__float2bfloat16_rn(a + b));
        want_bits[4 * i + 1] = bits(__float2bfloat16_rn(a * b));
        want_bits[4 * i + 2] = bits(__float2bfloat16_rn(a * a));
        want_bits[4 * i + 3] = bits(__float2bfloat16_rn(b * b));
        got_bits[4 * i + 0] = bits(gbs[i]); got_bits[4 * i + 1] = bits(gbp[i]);
        got_bits[4 * i + 2] = bits(gpair[i].x); got_bits[4 * i + 3] = bits(gpair[i].y);
    }
    compare_exact("bf16 add/mul/pair bits", got_bits, want_bits, (size_t)n * 4);

    // Dot product of the half inputs, accumulated in float: small integers/256 keep it exact.
    float *ddot, dot = -1.0f, ref_dot = 0.0f;
    CHECK(cudaMalloc(&ddot, sizeof(float)));
    CHECK(cudaMemset(ddot, 0, sizeof(float)));
    half_dot<<<16, 256>>>((__half2 *)da, (__half2 *)db, ddot, n / 2);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(&dot, ddot, sizeof(float), cudaMemcpyDeviceToHost));
    double acc = 0;
    for (int i = 0; i < n; i++) acc += (double)__half2float(ha[i]) * (double)__half2float(hb[i]);
    ref_dot = (float)acc;
    compare_close("dot", &dot, &ref_dot, 1, 1e-5, 0.5);  // float accumulation in a different order

    return finish();
}
