// Texture and surface objects (tex/suld/sust with [object, {coords}] addresses) and, from sm_80 on,
// cp.async copies into shared memory; from sm_75 on, wmma tensor-core fragments.
#include <mma.h>
#include <cuda_pipeline.h>

__global__ void tex_surf(cudaTextureObject_t t1, cudaTextureObject_t t2, cudaSurfaceObject_t s2, float* out)
{
    int x = threadIdx.x, y = blockIdx.x;
    float a = tex1Dfetch<float>(t1, x);
    float4 b = tex2D<float4>(t2, x + 0.5f, y + 0.5f);
    float c;
    surf2Dread(&c, s2, x * 4, y);
    surf2Dwrite(a + b.x + c, s2, x * 4, y);
    out[y * blockDim.x + x] = a + b.y + b.z + b.w;
}

__global__ void wmma_tile(const half* a, const half* b, float* c)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 750
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
#endif
}

__global__ void async_copy(const float4* in, float4* out)
{
    __shared__ float4 buf[128];
    int t = threadIdx.x;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    __pipeline_memcpy_async(&buf[t], &in[t], sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(0);
#else
    buf[t] = in[t];
#endif
    __syncthreads();
    out[t] = buf[(t + 1) & 127];
}
