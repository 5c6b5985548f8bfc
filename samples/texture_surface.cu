// Textures and surfaces, simpleTexture-style: an image in a CUDA array rotated through a texture object
// (point sampling at texel centres: exact; linear filtering at any angle: within the 1/256 weight step),
// tex1Dfetch over linear memory, then a surface written by a kernel (surf2Dwrite), read back with
// cudaMemcpy2DFromArray, and re-read in-kernel with surf2Dread (zero boundary mode out of range).
#include "sample_common.h"

__global__ void rotate(cudaTextureObject_t t, float *out, int w, int h, float c, float s) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float u = x - w / 2.0f + 0.5f, v = y - h / 2.0f + 0.5f;
    float tu = u * c - v * s + w / 2.0f, tv = v * c + u * s + h / 2.0f;
    out[y * w + x] = tex2D<float>(t, tu / w, tv / h);
}

__global__ void fetch(cudaTextureObject_t t, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<int>(t, i * 3 - 5);
}

__global__ void write_surface(cudaSurfaceObject_t s, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) surf2Dwrite(make_uchar4(x, y, x ^ y, 255 - x), s, x * 4, y);
}

__global__ void read_surface(cudaSurfaceObject_t s, uchar4 *out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    // one column and row past the end: zero boundary mode answers 0
    if (x <= w && y <= h) out[y * (w + 1) + x] = surf2Dread<uchar4>(s, x * 4, y, cudaBoundaryModeZero);
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

int main() {
    const int W = 64, H = 48;
    Rng rng(42);
    float *img = (float *)malloc(W * H * 4);
    for (int i = 0; i < W * H; i++) img[i] = (float)(rng.next() % 10000) / 100.0f;
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CHECK(cudaMallocArray(&arr, &fd, W, H));
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, img, W * 4, W * 4, H, cudaMemcpyHostToDevice));
    cudaResourceDesc rd = {};
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = arr;
    float *dout, *out = (float *)malloc(W * H * 4), *want = (float *)malloc(W * H * 4);
    CHECK(cudaMalloc(&dout, W * H * 4));
    dim3 blk(16, 16), grd((W + 15) / 16, (H + 15) / 16);
    for (int linear = 0; linear < 2; linear++) {
        cudaTextureDesc td = {};
        td.addressMode[0] = td.addressMode[1] = cudaAddressModeWrap;
        td.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
        td.readMode = cudaReadModeElementType;
        td.normalizedCoords = 1;
        cudaTextureObject_t t;
        CHECK(cudaCreateTextureObject(&t, &rd, &td, NULL));
        // point: a half turn lands every pixel on a texel centre; linear: 0.5 radians
        float ang = linear ? 0.5f : 3.14159265f, c = cosf(ang), s = sinf(ang);
        if (!linear) { c = -1.0f; s = 0.0f; }
        CHECK(cudaMemset(dout, 0xFF, W * H * 4));
        rotate<<<grd, blk>>>(t, dout, W, H, c, s);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(out, dout, W * H * 4, cudaMemcpyDeviceToHost));
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                float u = x - W / 2.0f + 0.5f, v = y - H / 2.0f + 0.5f;
                float tu = u * c - v * s + W / 2.0f, tv = v * c + u * s + H / 2.0f;
                if (!linear) {
                    want[y * W + x] = img[((int)floorf(tv) % H + H) % H * W + ((int)floorf(tu) % W + W) % W];
                    continue;
                }
                // bilinear with wrap, weights rounded to 1/256 as the hardware's are
                float xb = tu - 0.5f, yb = tv - 0.5f;
                int x0 = (int)floorf(xb), y0 = (int)floorf(yb);
                float a = roundf((xb - x0) * 256) / 256, b = roundf((yb - y0) * 256) / 256;
                auto T = [&](int i, int j) { return img[((j % H) + H) % H * W + ((i % W) + W) % W]; };
                want[y * W + x] = (1 - a) * (1 - b) * T(x0, y0) + a * (1 - b) * T(x0 + 1, y0)
                                + (1 - a) * b * T(x0, y0 + 1) + a * b * T(x0 + 1, y0 + 1);
            }
        if (!linear) compare_exact("rotate (point)", out, want, W * H);
        else compare_close("rotate (linear)", out, want, W * H, 0.0, 100.0 / 128);
        CHECK(cudaDestroyTextureObject(t));
    }
    (void)clampf;
    // tex1Dfetch over linear memory: out-of-range indices read 0
    const int N = 200, NF = 100;
    int *lin = (int *)malloc(N * 4), *dlin, *dfetch, got_f[NF], want_f[NF];
    for (int i = 0; i < N; i++) lin[i] = (int)(rng.next() & 0x7fffffff);
    CHECK(cudaMalloc(&dlin, N * 4));
    CHECK(cudaMalloc(&dfetch, NF * 4));
    CHECK(cudaMemcpy(dlin, lin, N * 4, cudaMemcpyHostToDevice));
    cudaResourceDesc lrd = {};
    lrd.resType = cudaResourceTypeLinear;
    lrd.res.linear.devPtr = dlin;
    lrd.res.linear.desc = cudaCreateChannelDesc<int>();
    lrd.res.linear.sizeInBytes = N * 4;
    cudaTextureDesc ltd = {};
    ltd.readMode = cudaReadModeElementType;
    cudaTextureObject_t lt;
    CHECK(cudaCreateTextureObject(&lt, &lrd, &ltd, NULL));
    fetch<<<1, 128>>>(lt, dfetch, NF);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got_f, dfetch, NF * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < NF; i++) want_f[i] = (i * 3 - 5 >= 0 && i * 3 - 5 < N) ? lin[i * 3 - 5] : 0;
    compare_exact("tex1Dfetch", got_f, want_f, NF);
    CHECK(cudaDestroyTextureObject(lt));
    // a surface written by a kernel, read back by a copy and by a kernel
    cudaChannelFormatDesc sd = cudaCreateChannelDesc<uchar4>();
    cudaArray_t sarr;
    CHECK(cudaMallocArray(&sarr, &sd, W, H, cudaArraySurfaceLoadStore));
    cudaResourceDesc srd = {};
    srd.resType = cudaResourceTypeArray;
    srd.res.array.array = sarr;
    cudaSurfaceObject_t so;
    CHECK(cudaCreateSurfaceObject(&so, &srd));
    write_surface<<<grd, blk>>>(so, W, H);
    CHECK_LAUNCH();
    unsigned *back = (unsigned *)malloc(W * H * 4), *want_s = (unsigned *)malloc(W * H * 4);
    memset(back, 0xAB, W * H * 4);
    CHECK(cudaMemcpy2DFromArray(back, W * 4, sarr, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            want_s[y * W + x] = (unsigned)x | (unsigned)y << 8 | (unsigned)(x ^ y) << 16 | (unsigned)(255 - x) << 24;
    compare_exact("surface via cudaMemcpy2DFromArray", back, want_s, W * H);
    uchar4 *dsr;
    const int SW = W + 1, SH = H + 1;
    CHECK(cudaMalloc(&dsr, SW * SH * 4));
    CHECK(cudaMemset(dsr, 0x5A, SW * SH * 4));
    read_surface<<<dim3((SW + 15) / 16, (SH + 15) / 16), blk>>>(so, dsr, W, H);
    CHECK_LAUNCH();
    unsigned *sr = (unsigned *)malloc(SW * SH * 4), *want_r = (unsigned *)malloc(SW * SH * 4);
    CHECK(cudaMemcpy(sr, dsr, SW * SH * 4, cudaMemcpyDeviceToHost));
    for (int y = 0; y < SH; y++)
        for (int x = 0; x < SW; x++)
            want_r[y * SW + x] = (x < W && y < H) ? want_s[y * W + x] : 0;
    compare_exact("surf2Dread (zero boundary)", sr, want_r, SW * SH);
    CHECK(cudaDestroySurfaceObject(so));
    CHECK(cudaFreeArray(sarr));
    CHECK(cudaFreeArray(arr));
    CHECK(cudaFree(dout)); CHECK(cudaFree(dlin)); CHECK(cudaFree(dfetch)); CHECK(cudaFree(dsr));
    return finish();
}
