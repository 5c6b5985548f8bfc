// One kernel per cuda_fp16.h / cuda_bf16.h math function, scalar and x2: tests/ptx/test_half_math.py runs
// each over every 16-bit input.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define ONE(f)                                                                                   \
    extern "C" __global__ void h_##f(const __half *a, __half *o, int n) {                        \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                           \
        if (i < n) o[i] = h##f(a[i]);                                                            \
    }                                                                                            \
    extern "C" __global__ void b_##f(const __nv_bfloat16 *a, __nv_bfloat16 *o, int n) {          \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                           \
        if (i < n) o[i] = h##f(a[i]);                                                            \
    }                                                                                            \
    extern "C" __global__ void h2_##f(const __half2 *a, __half2 *o, int n) {                     \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                           \
        if (i < n) o[i] = h2##f(a[i]);                                                           \
    }                                                                                            \
    extern "C" __global__ void b2_##f(const __nv_bfloat162 *a, __nv_bfloat162 *o, int n) {       \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                           \
        if (i < n) o[i] = h2##f(a[i]);                                                           \
    }

ONE(exp) ONE(exp2) ONE(exp10) ONE(log) ONE(log2) ONE(log10)
ONE(sin) ONE(cos) ONE(rcp) ONE(rsqrt) ONE(sqrt) ONE(tanh)
