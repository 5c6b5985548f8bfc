// Cooperative groups: grid-wide sync, block sync, tiled partitions with shuffles and reductions.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void grid_sum(const float* in, float* partial, float* total, int n)
{
    cg::grid_group grid = cg::this_grid();
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    float v = 0.0f;
    for (int i = grid.thread_rank(); i < n; i += grid.size())
        v += in[i];
    v = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0)
        atomicAdd(&partial[blockIdx.x], v);
    grid.sync();
    if (grid.thread_rank() == 0) {
        float s = 0.0f;
        for (unsigned b = 0; b < gridDim.x; ++b) s += partial[b];
        *total = s;
    }
    block.sync();
    cg::thread_block_tile<8> tile8 = cg::tiled_partition<8>(block);
    float w = tile8.shfl_down(v, 1) + tile8.shfl_xor(v, 2);
    if (tile8.any(w > 0.0f) && tile8.meta_group_rank() == 0)
        partial[gridDim.x + threadIdx.x] = w;
}
