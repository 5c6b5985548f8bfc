// Device printf with every argument kind, and assert (both become calls to runtime functions in PTX).
#include <cassert>
#include <cstdio>

__global__ void printf_kinds(const int* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        long long big = (long long)in[i] << 33;
        printf("thread %d of %u: int=%d uint=%u ll=%lld f=%f e=%e g=%g c=%c s=%s p=%p x=%x\n",
               i, blockDim.x, in[i], (unsigned)in[i], big, in[i] * 0.5f, in[i] * 1e-3, (double)in[i],
               'a' + (i & 15), "str", (const void*)in, in[i]);
    }
    printf("no args\n");
}

__global__ void asserting(const int* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        assert(in[i] >= 0 && "inputs are non-negative");
}
