// What an H200 answers for each address mode with unnormalised and normalised coordinates, point and linear
// filtering, at coordinates outside an 8-texel row (tests/data/nvidia_address_mode_answers.txt holds its output).
#include <cuda_runtime.h>
#include <stdio.h>
__global__ void fetch(cudaTextureObject_t t, const float *xs, float *out, int n) {
    int i = threadIdx.x;
    if (i < n) out[i] = tex2D<float>(t, xs[i], 0.5f);
}
int main() {
    const int W = 8;
    float img[W]; for (int i = 0; i < W; i++) img[i] = (float)(i + 1);
    cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
    cudaArray_t arr; cudaMallocArray(&arr, &cd, W, 1);
    cudaMemcpy2DToArray(arr, 0, 0, img, W * 4, W * 4, 1, cudaMemcpyHostToDevice);
    float xs[] = {-2.5f, -1.5f, -0.5f, 0.25f, 3.5f, 7.5f, 8.5f, 9.5f, 10.7f, 15.5f, 16.5f, -9.5f};
    int n = sizeof xs / 4;
    float *dx, *dout, out[32];
    cudaMalloc(&dx, sizeof xs); cudaMalloc(&dout, 4 * n);
    cudaMemcpy(dx, xs, sizeof xs, cudaMemcpyHostToDevice);
    const char *mn[] = {"wrap", "clamp", "mirror", "border"};
    for (int filt = 0; filt < 2; filt++)
        for (int mode = 0; mode < 4; mode++)
            for (int norm = 0; norm < 2; norm++) {
                cudaResourceDesc rd = {}; rd.resType = cudaResourceTypeArray; rd.res.array.array = arr;
                cudaTextureDesc td = {}; td.addressMode[0] = td.addressMode[1] = (cudaTextureAddressMode)mode;
                td.filterMode = filt ? cudaFilterModeLinear : cudaFilterModePoint;
                td.readMode = cudaReadModeElementType; td.normalizedCoords = norm;
                cudaTextureObject_t t; cudaError_t e = cudaCreateTextureObject(&t, &rd, &td, NULL);
                float sx[32]; for (int i = 0; i < n; i++) sx[i] = norm ? xs[i] / W : xs[i];
                cudaMemcpy(dx, sx, 4 * n, cudaMemcpyHostToDevice);
                fetch<<<1, 32>>>(t, dx, dout, n);
                cudaError_t e2 = cudaDeviceSynchronize();
                cudaMemcpy(out, dout, 4 * n, cudaMemcpyDeviceToHost);
                printf("%s %s norm=%d (%d,%d):", filt ? "linear" : "point", mn[mode], norm, (int)e, (int)e2);
                for (int i = 0; i < n; i++) printf(" %g", out[i]);
                printf("\n");
                cudaDestroyTextureObject(t);
            }
    return 0;
}
