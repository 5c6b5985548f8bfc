// Warp-level primitives and special registers: shfl (idx/up/down/xor, widths, 64-bit), vote, match,
// redux, activemask, lanemask/clock/timer registers read through inline PTX.
__device__ unsigned read_sreg_laneid() { unsigned r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }

__global__ void warp_ops(int* out, const float* fin, const double* din, const long long* lin)
{
    int t = threadIdx.x;
    unsigned full = 0xffffffffu;
    float f = fin[t];
    double d = din[t];
    long long l = lin[t];
    float a = __shfl_sync(full, f, (t + 3) & 31);
    float b = __shfl_up_sync(full, f, 2, 16);
    float c = __shfl_down_sync(full, f, 5, 8);
    float e = __shfl_xor_sync(full, f, 1);
    double dd = __shfl_xor_sync(full, d, 4);
    long long ll = __shfl_down_sync(full, l, 1);
    out[t] = (int)(a + b + c + e) + (int)dd + (int)ll;
    out[32 + t] = __all_sync(full, f > 0) + 2 * __any_sync(full, f < 0) + __popc(__ballot_sync(full, f > 1));
    out[64 + t] = __match_any_sync(full, (int)f);
    int pred;
    out[96 + t] = __match_all_sync(full, (int)f, &pred) + pred;
#if __CUDA_ARCH__ >= 800
    out[128 + t] = __reduce_add_sync(full, t) + __reduce_min_sync(full, (unsigned)t) + __reduce_max_sync(full, t)
                 + __reduce_and_sync(full, (unsigned)t) + __reduce_or_sync(full, (unsigned)t)
                 + __reduce_xor_sync(full, (unsigned)t);
#endif
    out[160 + t] = __activemask();
    unsigned lt, le, eq, ge, gt, warpid, nwarpid, smid, nsmid, dyn, total, aggr;
    unsigned long long c64, gt64;
    unsigned c32;
    asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
    asm volatile("mov.u32 %0, %%lanemask_le;" : "=r"(le));
    asm volatile("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
    asm volatile("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
    asm volatile("mov.u32 %0, %%lanemask_gt;" : "=r"(gt));
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(warpid));
    asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(nwarpid));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(nsmid));
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(total));
    asm volatile("mov.u32 %0, %%aggr_smem_size;" : "=r"(aggr));
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c64));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt64));
    asm volatile("mov.u32 %0, %%clock;" : "=r"(c32));
    out[192 + t] = lt + le + eq + ge + gt + warpid + nwarpid + smid + nsmid + dyn + total + aggr
                 + (unsigned)c64 + (unsigned)gt64 + c32 + read_sreg_laneid();
    __syncwarp();
    if (t < 16) __syncwarp(0xffffu);
    out[224 + t] = threadIdx.y + threadIdx.z + blockIdx.y + blockIdx.z + gridDim.x + gridDim.y + gridDim.z
                 + blockDim.y + blockDim.z + warpSize;
}
