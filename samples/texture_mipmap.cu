// Mipmapped textures: a mip chain built on the GPU (each level the 2x2 box average of the one above, read
// and written through surfaces on cudaGetMipmappedArrayLevel's arrays), its level extents (cudaArrayGetInfo),
// a level copied back, then the chain sampled through one texture object: tex2DLod at LODs that select one
// level (exact), tex2DGrad with gradients of a power-of-two length (exact), tex2DLod half-way between two
// levels with linear mipmap filtering (the two levels' mean), and plain tex2D (level 0).
#include "sample_common.h"

__global__ void downsample(cudaSurfaceObject_t src, cudaSurfaceObject_t dst, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float a = surf2Dread<float>(src, 8 * x, 2 * y), b = surf2Dread<float>(src, 8 * x + 4, 2 * y);
    float c = surf2Dread<float>(src, 8 * x, 2 * y + 1), d = surf2Dread<float>(src, 8 * x + 4, 2 * y + 1);
    surf2Dwrite(((a + b) + (c + d)) * 0.25f, dst, 4 * x, y);
}

// mode 0: tex2DLod(lod), 1: tex2DGrad with dPdx = (g / W, 0), dPdy = (0, g / H), 2: tex2D
__global__ void sample(cudaTextureObject_t t, const float2 *uv, const float *arg, float *out, int n, int mode,
                       int w, int h) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float2 p = uv[i];
    if (mode == 0) out[i] = tex2DLod<float>(t, p.x, p.y, arg[i]);
    else if (mode == 1) out[i] = tex2DGrad<float>(t, p.x, p.y, make_float2(arg[i] / w, 0), make_float2(0, arg[i] / h));
    else out[i] = tex2D<float>(t, p.x, p.y);
}

int main() {
    const int W = 64, H = 32, LEVELS = 7;      // 64x32, 32x16, ..., 2x1, 1x1
    Rng rng(7);
    // the chain on the host: integers at level 0, so every average is exact in float
    float *chain[LEVELS];
    int lw[LEVELS], lh[LEVELS];
    for (int l = 0; l < LEVELS; l++) {
        lw[l] = W >> l > 0 ? W >> l : 1;
        lh[l] = H >> l > 0 ? H >> l : 1;
        chain[l] = (float *)malloc(lw[l] * lh[l] * 4);
    }
    for (int i = 0; i < W * H; i++) chain[0][i] = (float)rng.range(0, 4095);
    for (int l = 1; l < LEVELS; l++)
        for (int y = 0; y < lh[l]; y++)
            for (int x = 0; x < lw[l]; x++) {
                const float *s = chain[l - 1];
                int sw = lw[l - 1], y1 = lh[l - 1] > 1 ? 2 * y + 1 : 2 * y;
                float a = s[2 * y * sw + 2 * x], b = s[2 * y * sw + 2 * x + 1];
                float c = s[y1 * sw + 2 * x], d = s[y1 * sw + 2 * x + 1];
                chain[l][y * lw[l] + x] = ((a + b) + (c + d)) * 0.25f;
            }
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    cudaMipmappedArray_t mm;
    CHECK(cudaMallocMipmappedArray(&mm, &fd, make_cudaExtent(W, H, 0), LEVELS, cudaArraySurfaceLoadStore));
    cudaArray_t level[LEVELS];
    for (int l = 0; l < LEVELS; l++) {
        CHECK(cudaGetMipmappedArrayLevel(&level[l], mm, l));
        cudaChannelFormatDesc got;
        cudaExtent ext;
        unsigned flags;
        CHECK(cudaArrayGetInfo(&got, &ext, &flags, level[l]));
        expect(ext.width == (size_t)lw[l] && ext.height == (size_t)lh[l] && ext.depth == 0,
               "a level's extent is the base's halved per level, down to 1");
        expect(got.x == 32 && got.f == cudaChannelFormatKindFloat, "a level keeps the format");
    }
    cudaArray_t beyond;
    expect(cudaGetMipmappedArrayLevel(&beyond, mm, LEVELS) == cudaErrorInvalidValue,
           "a level past the last is cudaErrorInvalidValue");
    cudaGetLastError();
    CHECK(cudaMemcpy2DToArray(level[0], 0, 0, chain[0], W * 4, W * 4, H, cudaMemcpyHostToDevice));
    // the chain built on the device, level by level through surfaces
    cudaSurfaceObject_t surf[LEVELS];
    for (int l = 0; l < LEVELS; l++) {
        cudaResourceDesc rd = {};
        rd.resType = cudaResourceTypeArray;
        rd.res.array.array = level[l];
        CHECK(cudaCreateSurfaceObject(&surf[l], &rd));
    }
    for (int l = 1; l < LEVELS; l++) {
        dim3 blk(16, 16), grd((lw[l] + 15) / 16, (lh[l] + 15) / 16);
        // a one-row level's successor averages that row with itself: copied from the host, since a
        // surface read past the last row faults
        if (lh[l - 1] == 1) {
            CHECK(cudaMemcpy2DToArray(level[l], 0, 0, chain[l], lw[l] * 4, lw[l] * 4, lh[l], cudaMemcpyHostToDevice));
            continue;
        }
        downsample<<<grd, blk>>>(surf[l - 1], surf[l], lw[l], lh[l]);
        CHECK_LAUNCH();
    }
    for (int l = 1; l < LEVELS; l++) {
        float *back = (float *)malloc(lw[l] * lh[l] * 4);
        CHECK(cudaMemcpy2DFromArray(back, lw[l] * 4, level[l], 0, 0, lw[l] * 4, lh[l], cudaMemcpyDeviceToHost));
        char what[64];
        snprintf(what, sizeof what, "level %d built on the device", l);
        compare_exact(what, back, chain[l], lw[l] * lh[l]);
        free(back);
    }
    // samples at the texel centres of the coarsest level each LOD selects
    const int N = 256;
    float2 *uv = (float2 *)malloc(N * sizeof(float2));
    float *arg = (float *)malloc(N * 4), *out = (float *)malloc(N * 4), *want = (float *)malloc(N * 4);
    int *lvl = (int *)malloc(N * 4);
    float2 *duv;
    float *darg, *dout;
    CHECK(cudaMalloc(&duv, N * sizeof(float2)));
    CHECK(cudaMalloc(&darg, N * 4));
    CHECK(cudaMalloc(&dout, N * 4));
    auto at = [&](int l, float u, float v) {     // a level's texel under normalised (u, v), clamped
        int x = (int)floorf(u * lw[l]), y = (int)floorf(v * lh[l]);
        x = x < 0 ? 0 : x >= lw[l] ? lw[l] - 1 : x;
        y = y < 0 ? 0 : y >= lh[l] ? lh[l] - 1 : y;
        return chain[l][y * lw[l] + x];
    };
    for (int mipLinear = 0; mipLinear < 2; mipLinear++) {
        cudaResourceDesc rd = {};
        rd.resType = cudaResourceTypeMipmappedArray;
        rd.res.mipmap.mipmap = mm;
        cudaTextureDesc td = {};
        td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
        td.filterMode = cudaFilterModePoint;
        td.mipmapFilterMode = mipLinear ? cudaFilterModeLinear : cudaFilterModePoint;
        td.readMode = cudaReadModeElementType;
        td.normalizedCoords = 1;
        td.maxMipmapLevelClamp = LEVELS - 1;
        td.disableTrilinearOptimization = 1;
        cudaTextureObject_t t;
        CHECK(cudaCreateTextureObject(&t, &rd, &td, NULL));
        for (int mode = 0; mode < 3; mode++) {
            for (int i = 0; i < N; i++) {
                int l = rng.range(0, LEVELS - 1);
                // the centre of a texel of the coarsest level in play, so every level reads one whole texel
                int c = mipLinear && mode == 0 && l < LEVELS - 1 ? l + 1 : l;
                c = mode == 2 ? 0 : c;
                uv[i] = make_float2((rng.range(0, lw[c] - 1) + 0.5f) / lw[c], (rng.range(0, lh[c] - 1) + 0.5f) / lh[c]);
                if (mode == 0) {
                    // point: a quarter level either side selects the nearest; linear: half-way to the next
                    arg[i] = mipLinear ? l + 0.5f : l + (rng.range(0, 1) ? 0.25f : -0.25f);
                    if (!mipLinear && l == 0) arg[i] = -0.25f;
                } else {
                    arg[i] = (float)(1 << l);     // a gradient of 2^l texels: LOD l
                }
                lvl[i] = mode == 2 ? 0 : l;
                float a = at(lvl[i], uv[i].x, uv[i].y);
                want[i] = a;
                if (mipLinear && mode == 0 && l < LEVELS - 1) want[i] = (a + at(l + 1, uv[i].x, uv[i].y)) * 0.5f;
            }
            CHECK(cudaMemcpy(duv, uv, N * sizeof(float2), cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(darg, arg, N * 4, cudaMemcpyHostToDevice));
            CHECK(cudaMemset(dout, 0xFF, N * 4));
            sample<<<(N + 127) / 128, 128>>>(t, duv, darg, dout, N, mode, W, H);
            CHECK_LAUNCH();
            CHECK(cudaMemcpy(out, dout, N * 4, cudaMemcpyDeviceToHost));
            static const char *names[] = {"tex2DLod", "tex2DGrad", "tex2D"};
            char what[64];
            snprintf(what, sizeof what, "%s, %s mipmap filter", names[mode], mipLinear ? "linear" : "point");
            compare_exact(what, out, want, N);
        }
        CHECK(cudaDestroyTextureObject(t));
    }
    for (int l = 0; l < LEVELS; l++) CHECK(cudaDestroySurfaceObject(surf[l]));
    CHECK(cudaFreeMipmappedArray(mm));
    CHECK(cudaFree(duv)); CHECK(cudaFree(darg)); CHECK(cudaFree(dout));
    return finish();
}
