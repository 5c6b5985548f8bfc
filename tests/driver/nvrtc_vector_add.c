/* vectorAdd the way NVIDIA's vectorAdd_nvrtc does it: CUDA C++ compiled at run time by NVRTC for the
 * options on the command line, the program's "cubin" handed to cuModuleLoadData, every element checked.
 * Usage: nvrtc_vector_add SEED N OPTION... ; prints "PASS" or why not, exit status 0 only on PASS. */
#include <cuda.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *source =
    "extern \"C\" __global__ void vadd(const float *a, const float *b, float *c, int n) {\n"
    "    int i = blockDim.x * blockIdx.x + threadIdx.x;\n"
    "    if (i < n) c[i] = a[i] * 2.0f + b[i];\n"
    "}\n";

#define NV(call)                                                                                        \
    do {                                                                                                \
        nvrtcResult r_ = (call);                                                                        \
        if (r_ != NVRTC_SUCCESS) {                                                                      \
            printf("%s -> %d %s\n", #call, (int)r_, nvrtcGetErrorString(r_));                           \
            return 1;                                                                                   \
        }                                                                                               \
    } while (0)
#define CU(call)                                                                                        \
    do {                                                                                                \
        CUresult r_ = (call);                                                                           \
        if (r_ != CUDA_SUCCESS) {                                                                       \
            printf("%s -> %d\n", #call, (int)r_);                                                       \
            return 1;                                                                                   \
        }                                                                                               \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    srand((unsigned)strtoul(argv[1], NULL, 10));
    int n = atoi(argv[2]);
    nvrtcProgram prog;
    NV(nvrtcCreateProgram(&prog, source, "vadd.cu", 0, NULL, NULL));
    nvrtcResult rc = nvrtcCompileProgram(prog, argc - 3, (const char *const *)argv + 3);
    if (rc != NVRTC_SUCCESS) {
        size_t len = 0;
        nvrtcGetProgramLogSize(prog, &len);
        char *log = malloc(len + 1);
        nvrtcGetProgramLog(prog, log);
        printf("nvrtcCompileProgram -> %d %s\n%s\n", (int)rc, nvrtcGetErrorString(rc), log);
        return 1;
    }
    size_t size = 0;
    NV(nvrtcGetCUBINSize(prog, &size));
    char *image = malloc(size);
    memset(image, 0x5a, size);
    NV(nvrtcGetCUBIN(prog, image));
    NV(nvrtcDestroyProgram(&prog));

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuCtxCreate(&ctx, NULL, 0, dev));
    CU(cuModuleLoadData(&mod, image));
    CU(cuModuleGetFunction(&fn, mod, "vadd"));

    size_t bytes = (size_t)n * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    for (int i = 0; i < n; i++) {
        a[i] = (float)rand() / RAND_MAX * 200.0f - 100.0f;
        b[i] = (float)rand() / RAND_MAX * 200.0f - 100.0f;
    }
    CUdeviceptr da, db, dc;
    CU(cuMemAlloc(&da, bytes));
    CU(cuMemAlloc(&db, bytes));
    CU(cuMemAlloc(&dc, bytes));
    CU(cuMemcpyHtoD(da, a, bytes));
    CU(cuMemcpyHtoD(db, b, bytes));
    CU(cuMemsetD32(dc, 0x7fc00001u, n)); /* poison: a NaN no correct element can equal */
    void *args[] = {&da, &db, &dc, &n};
    CU(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(c, dc, bytes));
    for (int i = 0; i < n; i++)
        if (c[i] != a[i] * 2.0f + b[i]) {
            printf("element %d: %g, want %g\n", i, c[i], a[i] * 2.0f + b[i]);
            return 1;
        }
    printf("PASS\n");
    return 0;
}
