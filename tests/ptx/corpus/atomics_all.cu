// Every atomic the CUDA runtime headers expose: all operations, 32/64-bit, float/double/half2 add, CAS,
// scoped (_block/_system) forms, and results both used (atom) and unused (red).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__global__ void atomics_used(int* i32, unsigned* u32, unsigned long long* u64, long long* s64, float* f32,
                             double* f64, __half2* h2, __half* h1, int* out)
{
    int t = threadIdx.x;
    int r = 0;
    r += atomicAdd(i32, t);
    r += atomicSub(i32 + 1, t);
    r += atomicExch(i32 + 2, t);
    r += atomicMin(i32 + 3, t - 16);
    r += atomicMax(i32 + 4, t - 16);
    r += atomicAnd(i32 + 5, ~t);
    r += atomicOr(i32 + 6, 1 << (t & 31));
    r += atomicXor(i32 + 7, t * 7);
    r += atomicCAS(i32 + 8, t, t + 1);
    r += atomicInc(u32, 17u);
    r += atomicDec(u32 + 1, 17u);
    r += atomicMin(u32 + 2, (unsigned)t);
    r += atomicMax(u32 + 3, (unsigned)t);
    r += (int)atomicAdd(u64, 1ull << t);
    r += (int)atomicExch(u64 + 1, (unsigned long long)t);
    r += (int)atomicCAS(u64 + 2, 0ull, (unsigned long long)t);
    r += (int)atomicMin(u64 + 3, (unsigned long long)t);
    r += (int)atomicMax(u64 + 4, (unsigned long long)t);
    r += (int)atomicAnd(u64 + 5, (unsigned long long)t);
    r += (int)atomicOr(u64 + 6, (unsigned long long)t);
    r += (int)atomicXor(u64 + 7, (unsigned long long)t);
    r += (int)atomicMin(s64, (long long)t - 5);
    r += (int)atomicMax(s64 + 1, (long long)t - 5);
    r += (int)atomicAdd(f32, 0.5f * t);
    r += (int)atomicExch(f32 + 1, 1.5f);
    r += (int)atomicAdd(f64, 0.25 * t);
    __half2 old2 = atomicAdd(h2, __floats2half2_rn(1.0f, 2.0f));
    __half old1 = atomicAdd(h1, __float2half(0.5f));
    r += (int)__low2float(old2) + (int)__half2float(old1);
    r += atomicAdd_block(i32 + 9, 1) + atomicAdd_system(i32 + 10, 1);
    r += atomicCAS_block(i32 + 11, 0, 1) + atomicExch_system(i32 + 12, 2);
    unsigned short us = atomicCAS((unsigned short*)(i32 + 13), (unsigned short)0, (unsigned short)t);
    out[t] = r + us;
}

__global__ void atomics_unused(int* i32, unsigned long long* u64, float* f32, double* f64)
{
    int t = threadIdx.x;
    atomicAdd(i32, t);
    atomicOr(i32 + 1, t);
    atomicMax(i32 + 2, t);
    atomicAdd(u64, (unsigned long long)t);
    atomicAdd(f32, 1.0f);
    atomicAdd(f64, 1.0);
    atomicInc((unsigned*)i32 + 3, 9u);
}
