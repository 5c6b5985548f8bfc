// Ways to launch: triple chevrons with every argument (grid, block, shared, stream), cudaLaunchKernel
// with an argument array, cudaLaunchKernelExC with launch attributes, 3D grids and blocks, kernels
// taking structs by value (alignment and padding), many small arguments, and several kernels in one
// module launched back to back on the legacy default and a per-thread style non-blocking stream.
#include "sample_common.h"

struct Params {
    char tag;        // padding follows
    double scale;
    int offset;
    short small[3];
    float4 vec;      // 16-byte aligned
};

__global__ void with_struct(Params p, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)(i * p.scale) + p.offset + p.small[0] + p.small[1] + p.small[2] + p.vec.x + p.vec.w + p.tag;
}

__global__ void many_args(int *out, char a, short b, int c, long long d, float e, double f, unsigned char g,
                          unsigned short h, unsigned i, unsigned long long j, bool k, int2 l) {
    out[0] = a; out[1] = b; out[2] = c; out[3] = (int)(d >> 32); out[4] = (int)d; out[5] = (int)(e * 100);
    out[6] = (int)(f * 1000); out[7] = g; out[8] = h; out[9] = (int)i; out[10] = (int)(j >> 40); out[11] = k;
    out[12] = l.x; out[13] = l.y;
}

__global__ void index3d(int *out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz) out[(z * ny + y) * nx + x] = x + 1000 * y + 1000000 * z;
}

__global__ void shared_and_stream(int *out, int n) {
    extern __shared__ int s[];
    s[threadIdx.x] = threadIdx.x * 2;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = s[blockDim.x - 1 - threadIdx.x] + blockIdx.x;
}

__global__ void add_one(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

int main() {
    const int n = 1 << 16;
    float *dout, *out = new float[n], *ref = new float[n];
    CHECK(cudaMalloc(&dout, n * sizeof(float)));
    Params p;
    memset(&p, 0, sizeof(p));
    p.tag = 3; p.scale = 0.5; p.offset = -7; p.small[0] = 1; p.small[1] = 2; p.small[2] = 3;
    p.vec = make_float4(10.0f, 20.0f, 30.0f, 40.0f);
    for (int i = 0; i < n; i++) ref[i] = (float)(i * 0.5) + (-7) + 6 + 10.0f + 40.0f + 3;

    CHECK(cudaMemset(dout, 0xFF, n * sizeof(float)));
    with_struct<<<n / 256, 256>>>(p, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out, dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    compare_exact("struct (chevrons)", out, ref, n);

    // The same kernel through cudaLaunchKernel and an argument array.
    int nn = n;
    void *args[] = {&p, &dout, &nn};
    CHECK(cudaMemset(dout, 0xFF, n * sizeof(float)));
    CHECK(cudaLaunchKernel((const void *)with_struct, dim3(n / 128), dim3(128), args, 0, 0));
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out, dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    compare_exact("struct (cudaLaunchKernel)", out, ref, n);

    // And through cudaLaunchKernelExC with a launch attribute.
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(n / 512);
    cfg.blockDim = dim3(512);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributePriority;
    attr[0].val.priority = 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CHECK(cudaMemset(dout, 0xFF, n * sizeof(float)));
    CHECK(cudaLaunchKernelExC(&cfg, (const void *)with_struct, args));
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out, dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    compare_exact("struct (cudaLaunchKernelExC)", out, ref, n);

    int *dargs, gargs[14];
    CHECK(cudaMalloc(&dargs, sizeof(gargs)));
    CHECK(cudaMemset(dargs, 0xFF, sizeof(gargs)));
    many_args<<<1, 1>>>(dargs, (char)-5, (short)-300, 123456, 0x123456789abcll, 1.25f, 2.5, (unsigned char)200,
                        (unsigned short)60000, 4000000000u, 0xfedcba9876543210ull, true, make_int2(-1, 77));
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(gargs, dargs, sizeof(gargs), cudaMemcpyDeviceToHost));
    int rargs[14] = {-5, -300, 123456, 0x1234, 0x56789abc, 125, 2500, 200, 60000, (int)4000000000u,
                     (int)(0xfedcba9876543210ull >> 40), 1, -1, 77};
    compare_exact("many args", gargs, rargs, 14);

    const int nx = 37, ny = 19, nz = 11;
    int *d3, *g3 = new int[nx * ny * nz], *r3 = new int[nx * ny * nz];
    CHECK(cudaMalloc(&d3, nx * ny * nz * sizeof(int)));
    CHECK(cudaMemset(d3, 0xFF, nx * ny * nz * sizeof(int)));
    dim3 b3(8, 4, 2), g3d((nx + 7) / 8, (ny + 3) / 4, (nz + 1) / 2);
    index3d<<<g3d, b3>>>(d3, nx, ny, nz);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(g3, d3, nx * ny * nz * sizeof(int), cudaMemcpyDeviceToHost));
    for (int z = 0; z < nz; z++) for (int y = 0; y < ny; y++) for (int x = 0; x < nx; x++)
        r3[(z * ny + y) * nx + x] = x + 1000 * y + 1000000 * z;
    compare_exact("3d index", g3, r3, nx * ny * nz);

    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int *di, *gi = new int[n], *ri = new int[n];
    CHECK(cudaMalloc(&di, n * sizeof(int)));
    shared_and_stream<<<n / 64, 64, 64 * sizeof(int), st>>>(di, n);
    CHECK(cudaGetLastError());
    for (int r = 0; r < 10; r++) add_one<<<n / 256, 256, 0, st>>>(di, n);  // in order on the stream
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(st));
    CHECK(cudaMemcpy(gi, di, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ri[i] = (63 - i % 64) * 2 + i / 64 + 10;
    compare_exact("stream sequence", gi, ri, n);
    CHECK(cudaStreamDestroy(st));

    CHECK(cudaFree(dout)); CHECK(cudaFree(dargs)); CHECK(cudaFree(d3)); CHECK(cudaFree(di));
    return finish();
}
