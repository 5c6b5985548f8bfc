/* Lazy kernels through the real libcuda.so.1 from a C host: a generated module of K kernels (each calls a
 * shared .func and reads a module global) plus `gap`, which uses an instruction the compiler lacks. It
 * launches L of them, checks their results, then asks for and launches `gap`, printing each CUresult, the
 * load time, the first launch's time and the resident set's growth. Usage: lazy_modules K L */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d (line %d)\n", #call, r_, __LINE__); exit(1); } } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static long rss_kb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) { printf("FAIL statm\n"); exit(1); }
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static char *module_text(int k) {
    size_t cap = 4096 + (size_t)k * 512, n = 0;
    char *s = malloc(cap);
    n += sprintf(s + n, ".version 7.8\n.target sm_80\n.address_size 64\n"
                 ".visible .global .align 4 .u32 base = 7;\n"
                 ".func (.reg .u32 r) bump(.reg .u32 a) { add.u32 r, a, 1000; ret; }\n"
                 ".visible .entry gap(.param .u64 out)\n{\n  .reg .b64 %%rd<2>;\n"
                 "  stacksave.u64 %%rd1;\n  ret;\n}\n");
    for (int i = 0; i < k; i++)
        n += sprintf(s + n, ".visible .entry k%d(.param .u64 out)\n{\n  .reg .b32 %%r<8>;\n  .reg .b64 %%rd<4>;\n"
                     "  ld.param.u64 %%rd1, [out];\n  ld.global.u32 %%r1, [base];\n  add.u32 %%r2, %%r1, %d;\n"
                     "  call (%%r3), bump, (%%r2);\n  st.global.u32 [%%rd1], %%r3;\n  ret;\n}\n", i, i);
    return s;
}

int main(int argc, char **argv) {
    int k = argc > 1 ? atoi(argv[1]) : 100, l = argc > 2 ? atoi(argv[2]) : 10;
    char *ptx = module_text(k);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuCtxCreate(&ctx, NULL, 0, dev));
    long rss0 = rss_kb();
    double t0 = now_ms();
    OK(cuModuleLoadData(&mod, ptx));
    double t1 = now_ms();
    printf("load_ms %.1f\n", t1 - t0);
    CUdeviceptr out;
    OK(cuMemAlloc(&out, 4));
    for (int i = 0; i < l; i++) {
        int which = (int)((long)i * k / l);
        char name[32];
        CUfunction fn;
        snprintf(name, sizeof name, "k%d", which);
        OK(cuModuleGetFunction(&fn, mod, name));
        int loaded = -1;
        OK(cuFuncIsLoaded((CUfunctionLoadingState *)&loaded, fn));
        if (i == 0) printf("loaded_before_launch %d\n", loaded);
        void *args[] = {&out};
        double a = now_ms();
        OK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
        OK(cuCtxSynchronize());
        if (i == 0) printf("first_launch_ms %.1f\n", now_ms() - a);
        unsigned got;
        OK(cuMemcpyDtoH(&got, out, 4));
        if (got != 7u + which + 1000u) { printf("FAIL %s gave %u\n", name, got); return 1; }
    }
    printf("rss_growth_kb %ld\n", rss_kb() - rss0);
    CUfunction gap;
    CUresult r = cuModuleGetFunction(&gap, mod, "gap");
    printf("gap_get %d\n", r);
    if (r == CUDA_SUCCESS) {
        void *args[] = {&out};
        printf("gap_launch %d\n", cuLaunchKernel(gap, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
    }
    CUfunction again;       /* the module still works after the gap's failure */
    OK(cuModuleGetFunction(&again, mod, "k0"));
    void *args[] = {&out};
    OK(cuLaunchKernel(again, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
    OK(cuCtxSynchronize());
    OK(cuModuleUnload(mod));
    OK(cuCtxDestroy(ctx));
    free(ptx);
    printf("ALL PASSED\n");
    return 0;
}
