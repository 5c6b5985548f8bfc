// Every state space and initialiser nvcc emits: dynamic and static shared memory, local arrays indexed at
// run time, __constant__ tables with initialisers, __device__ globals holding pointers (generic(),
// mask initialisers for packed structs), managed variables, 2-D arrays, vector loads/stores.
#include <cstdint>

__constant__ float ctab[8] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e30f, 1e-30f, 3.14159265f};
__constant__ double dtab[3] = {1.0, 2.0e-300, -7.5};
__constant__ int itab2d[2][3] = {{1, 2, 3}, {4, 5, 6}};
__device__ int gcounter;
__device__ int garr[16];
__device__ int* gptr = &garr[3];
__device__ const char* gnames[2] = {"alpha", "beta"};
struct __attribute__((packed)) Packed { char tag; int* ptr; short s; };
__device__ Packed gpacked = {7, &garr[5], 9};
__managed__ int mcount = 42;
__managed__ float mvec[4];

__global__ void spaces(float4* out4, const float4* in4, float* out, int k, int n)
{
    extern __shared__ float dyn[];
    __shared__ int stat[32][33];
    int t = threadIdx.x;
    float local[24];
    for (int i = 0; i < 24; ++i) local[i] = in4[(t + i) % n].x * ctab[i & 7];
    dyn[t] = local[(t * k) % 24] + (float)dtab[t % 3];
    stat[t & 31][(t * 3) & 31] = itab2d[t & 1][t % 3] + *gptr + gnames[t & 1][0] + gpacked.tag + *gpacked.ptr;
    __syncthreads();
    float4 v = in4[t];
    v.x += dyn[(t + 1) % blockDim.x];
    v.y += stat[(t + 1) & 31][t & 31];
    v.z += mcount + mvec[t & 3];
    out4[t] = v;
    atomicAdd(&gcounter, 1);
    out[t] = local[k % 24];
    mvec[t & 3] = v.w;
}
