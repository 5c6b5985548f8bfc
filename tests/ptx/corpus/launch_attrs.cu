// Kernel attributes that become function directives (.maxntid, .minnctapersm, .maxnreg, cluster
// directives from sm_90 on), __grid_constant__ struct parameters, and an extern "C" device function.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

struct Params { int a[4]; float scale; double bias; };

extern "C" __device__ __noinline__ void store_three(int* p) { *p = 3; }

__global__ void __launch_bounds__(256, 2) bounded(int* o) { o[threadIdx.x] = 1; }

__global__ void __maxnreg__(32) few_registers(int* o) { o[threadIdx.x] = 2; }

__global__ void by_value(const __grid_constant__ Params p, int* o)
{
    o[threadIdx.x] = p.a[threadIdx.x & 3] + (int)(p.scale * threadIdx.x + p.bias);
    store_three(o + 64);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__global__ void __cluster_dims__(2, 1, 1) clustered(int* o)
{
    cg::cluster_group c = cg::this_cluster();
    o[c.block_rank()] = c.num_blocks();
    c.sync();
    int* remote = c.map_shared_rank(o, 1);
    o[0] = *remote;
}
#endif
