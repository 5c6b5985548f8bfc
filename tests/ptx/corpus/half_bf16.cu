// half and bfloat16 arithmetic, packed x2 forms, conversions with rounding modes, and comparisons.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__global__ void half_math(const __half* a, const __half* b, __half* out, const __half2* a2, __half2* out2,
                          float* fout, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half x = a[i], y = b[i];
    __half s = __hadd(x, y);
    s = __hfma(s, y, x);
    s = __hmul_sat(s, x);
    s = __hsub(s, __hneg(y));
    s = __hdiv(s, __habs(y) + __float2half(1.0f));
    s = hsqrt(__habs(s)) + hexp(x) + hlog(__habs(y) + __float2half(1.0f)) + hsin(x) + hcos(y) + hrcp(y);
    s = __hmax(s, x);
    s = __hmin_nan(s, y);
    out[i] = __hlt(x, y) ? s : __hge(x, y) ? x : y;
    __half2 p = a2[i];
    __half2 q = __hfma2(p, p, __float2half2_rn(0.5f));
    q = __hmul2(q, __hadd2(p, q));
    q = __h2div(q, __hadd2(__habs2(p), __float2half2_rn(1.0f)));
    out2[i] = __hmax2(q, __lowhigh2highlow(p));
    fout[i] = __half2float(s) + __low2float(q) + __high2float(q)
            + (float)__half2int_rz(x) + (float)__half2uint_rn(y) + __half2float(__int2half_rd(i))
            + __half2float(__float2half_ru(fout[i])) + (__hisnan(x) ? 1.0f : 0.0f) + (__hisinf(y) ? 2.0f : 0.0f);
}

__global__ void bf16_math(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out,
                          const __nv_bfloat162* a2, __nv_bfloat162* out2, float* fout, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 x = a[i], y = b[i];
    __nv_bfloat16 s = __hadd(x, y);
#if __CUDA_ARCH__ >= 800
    s = __hfma(s, y, x);
#else
    s = s * y + x;
#endif
    s = __hmul(s, x);
    s = __hsub(s, __hneg(y));
    s = __hdiv(s, __habs(y) + __float2bfloat16(1.0f));
    s = __hmax(s, x);
    out[i] = s;
    __nv_bfloat162 p = a2[i];
#if __CUDA_ARCH__ >= 800
    __nv_bfloat162 q = __hfma2(p, p, __float2bfloat162_rn(0.5f));
#else
    __nv_bfloat162 q = p * p + __float2bfloat162_rn(0.5f);
#endif
    q = __hmul2(q, __hadd2(p, q));
    out2[i] = __hmin2(q, p);
    fout[i] = __bfloat162float(s) + __low2float(q) + __high2float(q) + __bfloat162float(__float2bfloat16_rz(fout[i]))
            + (float)__bfloat162int_rn(x) + __bfloat162float(__int2bfloat16_rn(i)) + (__hlt(x, y) ? 1.0f : 0.0f);
}
