// Pitched 2D and 3D memory: cudaMallocPitch, cudaMemcpy2D (H2D, D2D of a sub-rectangle, D2H),
// cudaMemset2D, cudaMemcpy2DAsync, cudaMalloc3D, cudaMemcpy3D (host <-> device, with offsets),
// cudaMemset3D, and kernels indexing through the pitch.
#include "sample_common.h"

__global__ void add_rowcol(float *p, size_t pitch, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        float *row = (float *)((char *)p + y * pitch);
        row[x] += (float)(y * 1000 + x);
    }
}

__global__ void scale3d(cudaPitchedPtr p, int w, int h, int d, int k) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
    if (x >= w || y >= h || z >= d) return;
    char *slice = (char *)p.ptr + (size_t)z * p.pitch * h;
    int *row = (int *)(slice + y * p.pitch);
    row[x] = row[x] * k + z;
}

int main() {
    Rng rng(17);
    // ---- 2D ----
    const int W = 300, H = 200;
    float *h = new float[W * H], *ref = new float[W * H], *got = new float[W * H];
    for (int i = 0; i < W * H; i++) h[i] = (float)rng.range(-1000, 1000);
    float *d; size_t pitch = 0;
    CHECK(cudaMallocPitch(&d, &pitch, W * sizeof(float), H));
    expect(pitch >= W * sizeof(float), "pitch covers a row");
    CHECK(cudaMemset2D(d, pitch, 0xFF, W * sizeof(float), H));
    CHECK(cudaMemcpy2D(d, pitch, h, W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
    add_rowcol<<<dim3((W + 31) / 32, (H + 7) / 8), dim3(32, 8)>>>(d, pitch, W, H);
    CHECK_LAUNCH();
    for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) ref[y * W + x] = h[y * W + x] + (float)(y * 1000 + x);
    CHECK(cudaMemcpy2D(got, W * sizeof(float), d, pitch, W * sizeof(float), H, cudaMemcpyDeviceToHost));
    compare_exact("2d", got, ref, W * H);

    // Copy a 100x50 sub-rectangle starting at (20, 30) into a second pitched buffer, then back
    // into a packed host array.
    const int sw = 100, sh = 50, ox = 20, oy = 30;
    float *d2; size_t pitch2;
    CHECK(cudaMallocPitch(&d2, &pitch2, sw * sizeof(float), sh));
    CHECK(cudaMemcpy2D(d2, pitch2, (char *)d + oy * pitch + ox * sizeof(float), pitch, sw * sizeof(float), sh, cudaMemcpyDeviceToDevice));
    float *sub = new float[sw * sh], *subref = new float[sw * sh];
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st));
    CHECK(cudaMemcpy2DAsync(sub, sw * sizeof(float), d2, pitch2, sw * sizeof(float), sh, cudaMemcpyDeviceToHost, st));
    CHECK(cudaStreamSynchronize(st));
    for (int y = 0; y < sh; y++) for (int x = 0; x < sw; x++) subref[y * sw + x] = ref[(y + oy) * W + x + ox];
    compare_exact("2d sub-rectangle", sub, subref, sw * sh);
    // Memset a band of rows to a byte pattern and check every element of the whole matrix.
    CHECK(cudaMemset2D((char *)d + 10 * pitch, pitch, 0, W * sizeof(float), 5));
    for (int y = 10; y < 15; y++) for (int x = 0; x < W; x++) ref[y * W + x] = 0.0f;
    CHECK(cudaMemcpy2D(got, W * sizeof(float), d, pitch, W * sizeof(float), H, cudaMemcpyDeviceToHost));
    compare_exact("2d after memset2d", got, ref, W * H);

    // ---- 3D ----
    const int X = 40, Y = 30, Z = 20;
    const size_t n3 = (size_t)X * Y * Z;
    int *h3 = new int[n3], *r3 = new int[n3], *g3 = new int[n3];
    for (size_t i = 0; i < n3; i++) h3[i] = rng.range(-10000, 10000);
    cudaExtent ext = make_cudaExtent(X * sizeof(int), Y, Z);
    cudaPitchedPtr dp;
    CHECK(cudaMalloc3D(&dp, ext));
    expect(dp.pitch >= X * sizeof(int) && dp.xsize == X * sizeof(int) && dp.ysize == (size_t)Y, "3D pitched pointer fields");
    CHECK(cudaMemset3D(dp, 0xFF, ext));
    cudaMemcpy3DParms up = {};
    up.srcPtr = make_cudaPitchedPtr(h3, X * sizeof(int), X, Y);
    up.dstPtr = dp;
    up.extent = ext;
    up.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&up));
    scale3d<<<dim3((X + 31) / 32, Y, Z), 32>>>(dp, X, Y, Z, 3);
    CHECK_LAUNCH();
    for (int z = 0; z < Z; z++) for (int y = 0; y < Y; y++) for (int x = 0; x < X; x++) {
        size_t i = ((size_t)z * Y + y) * X + x;
        r3[i] = h3[i] * 3 + z;
    }
    for (size_t i = 0; i < n3; i++) g3[i] = 0x5a5a5a5a;
    cudaMemcpy3DParms down = {};
    down.srcPtr = dp;
    down.dstPtr = make_cudaPitchedPtr(g3, X * sizeof(int), X, Y);
    down.extent = ext;
    down.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&down));
    compare_exact("3d", g3, r3, n3);

    // A 10x8x6 box at (5, 4, 3) of the device volume, into a host box of its own.
    const int bx = 10, by = 8, bz = 6;
    int box[bz][by][bx], boxref[bz][by][bx];
    memset(box, 0, sizeof(box));
    cudaMemcpy3DParms part = {};
    part.srcPtr = dp;
    part.srcPos = make_cudaPos(5 * sizeof(int), 4, 3);
    part.dstPtr = make_cudaPitchedPtr(box, bx * sizeof(int), bx, by);
    part.extent = make_cudaExtent(bx * sizeof(int), by, bz);
    part.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&part));
    for (int z = 0; z < bz; z++) for (int y = 0; y < by; y++) for (int x = 0; x < bx; x++)
        boxref[z][y][x] = r3[((size_t)(z + 3) * Y + (y + 4)) * X + (x + 5)];
    compare_exact("3d box", &box[0][0][0], &boxref[0][0][0], bx * by * bz);

    CHECK(cudaStreamDestroy(st));
    CHECK(cudaFree(d)); CHECK(cudaFree(d2)); CHECK(cudaFree(dp.ptr));
    return finish();
}
