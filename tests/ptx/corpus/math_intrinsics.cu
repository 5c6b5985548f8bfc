// Integer and float intrinsics that map to single PTX instructions (popc, clz, brev, prmt, shf, bfe/bfi,
// dp4a, sad, mul.hi, fast-math approximations) and rounding-mode conversions.
__global__ void intrinsics(const unsigned* u, const int* s, const float* f, const double* d, unsigned* uo,
                           float* fo, double* dout)
{
    int t = threadIdx.x;
    unsigned a = u[t], b = u[t + 1];
    int x = s[t], y = s[t + 1];
    uo[t] = __popc(a) + __popcll((unsigned long long)a << 20) + __clz(x) + __clzll((long long)y) + __brev(a)
          + __byte_perm(a, b, 0x5140) + __funnelshift_l(a, b, x & 31) + __funnelshift_rc(a, b, y)
          + __ffs(x) + __ffsll((long long)y) + __dp4a(x, y, 7) + __dp2a_lo(x, y, 3) + __sad(x, y, 1u)
          + __umulhi(a, b) + __mulhi(x, y) + (unsigned)__umul64hi(a, (unsigned long long)b << 3)
          + __usad(a, b, 2u) + __uhadd(a, b) + __rhadd(x, y) + __vadd4(a, b) + __vcmpgeu2(a, b) + __brevll(a);
    unsigned bf;
    asm("bfe.u32 %0, %1, 3, 5;" : "=r"(bf) : "r"(a));
    asm("bfi.b32 %0, %1, %0, 4, 8;" : "+r"(bf) : "r"(b));
    unsigned l3;
    asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(l3) : "r"(a), "r"(b), "r"(bf));
    uo[t + 64] = bf + l3;
    float v = f[t];
    fo[t] = __expf(v) + __logf(v) + __sinf(v) + __cosf(v) + __tanf(v) + __powf(v, 1.5f) + __fdividef(v, 3.0f)
          + rsqrtf(v) + __frcp_rn(v) + __fsqrt_rz(v) + __fadd_rd(v, 1.0f) + __fmul_ru(v, 2.0f)
          + __fmaf_rz(v, v, v) + __saturatef(v) + copysignf(v, -1.0f) + fminf(v, 1.0f) + fmaxf(v, -1.0f)
          + (float)__float2int_rn(v) + (float)__float2uint_rz(v) + (float)__float2ll_ru(v) + __int2float_rd(x)
          + __uint2float_ru(a) + truncf(v) + roundf(v) + floorf(v) + ceilf(v) + exp2f(v) + log2f(v) + tanhf(v)
          + erff(v) + lgammaf(v) + atan2f(v, 2.0f) + cbrtf(v) + hypotf(v, 3.0f) + fmodf(v, 1.7f);
    double w = d[t];
    dout[t] = sqrt(w) + exp(w) + log(w) + sin(w) + cos(w) + pow(w, 0.3) + __drcp_rn(w) + __dsqrt_rd(w)
            + __dadd_rz(w, 1.0) + __fma_ru(w, w, w) + (double)__double2float_rn(w) + (double)__double2int_rz(w)
            + __longlong_as_double(__double_as_longlong(w) ^ 1) + __hiloint2double(x, y) + rint(w) + fabs(w)
            + (isnan(w) ? 1.0 : 0.0) + (isinf(w) ? 2.0 : 0.0) + ldexp(w, 3) + frexp(w, &x) + x;
}
