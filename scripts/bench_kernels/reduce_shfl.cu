// Sum of each 256-element slice: shfl.down within warps, then the 8 warp sums by warp 0.
extern "C" __global__ void reduce_shfl(const float *in, float *out) {
    __shared__ float warp_sums[8];
    unsigned t = threadIdx.x;
    float v = in[blockIdx.x * 256 + t];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((t & 31) == 0) warp_sums[t >> 5] = v;
    __syncthreads();
    if (t < 32) {
        v = t < 8 ? warp_sums[t] : 0.0f;
        for (int o = 4; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (t == 0) out[blockIdx.x] = v;
    }
}
