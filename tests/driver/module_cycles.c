/* Module, library and context churn through the real libcuda.so.1 from a C host: each cycle loads a
 * module (a global, a barrier, an attribute query), launches it, and unloads it (modules: with the
 * launch still possibly queued) or destroys its context. Prints the resident set's growth per phase
 * after a warm-up, and checks every result. Usage: module_cycles MODULES LIBRARIES CONTEXTS */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d (line %d)\n", #call, r_, __LINE__); exit(1); } } while (0)
#define N 64

static const char PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .global .align 4 .u32 base;\n"
    ".visible .entry fill(.param .u64 out, .param .u32 k)\n{\n"
    "  .reg .b32 %r<8>;\n  .reg .b64 %rd<4>;\n  .shared .align 4 .b32 sh[64];\n"
    "  ld.param.u64 %rd1, [out];\n  ld.param.u32 %r1, [k];\n  mov.u32 %r2, %tid.x;\n"
    "  ld.global.u32 %r3, [base];\n  add.u32 %r4, %r3, %r1;\n"
    "  mul.wide.u32 %rd2, %r2, 4;\n  mov.u64 %rd3, sh;\n  add.u64 %rd3, %rd3, %rd2;\n"
    "  st.shared.u32 [%rd3], %r4;\n  bar.sync 0;\n  ld.shared.u32 %r5, [%rd3];\n"
    "  add.u32 %r6, %r5, %r2;\n  add.u64 %rd1, %rd1, %rd2;\n  st.global.u32 [%rd1], %r6;\n  ret;\n}\n";

static long rss_kb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) { printf("FAIL statm\n"); exit(1); }
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void run(CUfunction fn, CUdeviceptr g, CUdeviceptr out, unsigned k, CUstream s, int check) {
    unsigned base = 1000 + k;
    OK(cuMemcpyHtoD(g, &base, 4));
    void *args[] = {&out, &k};
    OK(cuLaunchKernel(fn, 1, 1, 1, N, 1, 1, 0, s, args, NULL));
    if (check) {
        unsigned host[N];
        OK(cuStreamSynchronize(s));
        OK(cuMemcpyDtoH(host, out, sizeof host));
        for (int i = 0; i < N; i++)
            if (host[i] != base + k + (unsigned)i) { printf("FAIL cycle %u: [%d] = %u\n", k, i, host[i]); exit(1); }
    }
}

static void use_module(CUmodule m, CUdeviceptr out, unsigned k, int check) {
    CUfunction fn;
    CUdeviceptr g;
    size_t size;
    int regs;
    OK(cuModuleGetFunction(&fn, m, "fill"));
    OK(cuModuleGetGlobal(&g, &size, m, "base"));
    OK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
    if (size != 4 || regs < 8) { printf("FAIL size %zu regs %d\n", size, regs); exit(1); }
    run(fn, g, out, k, 0, check);
}

int main(int argc, char **argv) {
    int modules = argc > 1 ? atoi(argv[1]) : 1000, libraries = argc > 2 ? atoi(argv[2]) : 500,
        contexts = argc > 3 ? atoi(argv[3]) : 500, warm = 50;
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr out;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuCtxCreate(&ctx, NULL, 0, dev));
    OK(cuMemAlloc(&out, N * 4));

    long start = 0;
    for (int i = 0; i < warm + modules; i++) {
        CUmodule m;
        if (i == warm) start = rss_kb();
        OK(cuModuleLoadData(&m, PTX));
        use_module(m, out, (unsigned)i, i % 10 == 0);
        OK(cuModuleUnload(m));          /* the launch may still be queued: it must finish first */
    }
    OK(cuCtxSynchronize());
    printf("modules %d: %ld KB\n", modules, rss_kb() - start);

    for (int i = 0; i < warm + libraries; i++) {
        CUlibrary lib;
        CUkernel kern;
        CUfunction fn;
        CUdeviceptr g;
        size_t size;
        if (i == warm) start = rss_kb();
        OK(cuLibraryLoadData(&lib, PTX, NULL, NULL, 0, NULL, NULL, 0));
        OK(cuLibraryGetKernel(&kern, lib, "fill"));
        OK(cuKernelGetFunction(&fn, kern));
        OK(cuLibraryGetGlobal(&g, &size, lib, "base"));
        run(fn, g, out, (unsigned)i, 0, 1);
        OK(cuLibraryUnload(lib));
    }
    printf("libraries %d: %ld KB\n", libraries, rss_kb() - start);
    OK(cuMemFree(out));
    OK(cuCtxDestroy(ctx));

    for (int i = 0; i < warm + contexts; i++) {
        CUcontext c;
        CUmodule m;
        CUdeviceptr o;
        if (i == warm) start = rss_kb();
        OK(cuCtxCreate(&c, NULL, 0, dev));
        OK(cuMemAlloc(&o, N * 4));
        OK(cuModuleLoadData(&m, PTX));
        use_module(m, o, (unsigned)i, i % 10 == 0);
        OK(cuCtxDestroy(c));            /* the module and the memory go with it */
    }
    printf("contexts %d: %ld KB\n", contexts, rss_kb() - start);
    printf("ALL PASSED\n");
    return 0;
}
