/* nvJitLink from a C host, built against NVIDIA's nvJitLink.h: two PTX modules (a kernel and the device
 * function it calls from the other) linked for a real sm_XX, a kernel NVRTC compiled to LTO-IR linked with
 * -lto, each image loaded with cuModuleLoadData and launched, every element checked; then the answers to
 * bad links, one "name value" line each. The same program runs on NVIDIA's driver and nvJitLink (its
 * answers are kept in tests/data/nvidia_nvjitlink_answers.json). Usage: nvjitlink_link SEED sm_XX */
#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call) do { CUresult r_ = (call); if (r_) { printf("FAIL %s -> %d\n", #call, r_); exit(1); } } while (0)

static const char *callee =
    ".version 7.8\n.target sm_80\n.address_size 64\n"
    ".visible .func (.param .b32 r) scale(.param .b32 x)\n{\n  .reg .b32 %r<3>;\n"
    "  ld.param.b32 %r1, [x];\n  mul.lo.s32 %r2, %r1, 3;\n  st.param.b32 [r], %r2;\n  ret;\n}\n";

static const char *caller_fmt =
    ".version 7.8\n.target sm_80\n.address_size 64\n"
    ".extern .func (.param .b32 r) %s(.param .b32 x);\n"
    ".visible .entry k(.param .u64 out, .param .u32 n, .param .u32 seed)\n{\n"
    "  .reg .b32 %%r<8>;\n  .reg .b64 %%rd<4>;\n  .reg .pred %%p;\n"
    "  mov.u32 %%r1, %%ctaid.x;\n  mov.u32 %%r2, %%ntid.x;\n  mov.u32 %%r3, %%tid.x;\n"
    "  mad.lo.s32 %%r1, %%r1, %%r2, %%r3;\n  ld.param.u32 %%r4, [n];\n  setp.ge.u32 %%p, %%r1, %%r4;\n"
    "  @%%p bra done;\n  {\n  .param .b32 a;\n  .param .b32 b;\n  st.param.b32 [a], %%r1;\n"
    "  call.uni (b), %s, (a);\n  ld.param.b32 %%r5, [b];\n  }\n  ld.param.u32 %%r6, [seed];\n"
    "  add.s32 %%r5, %%r5, %%r6;\n  ld.param.u64 %%rd1, [out];\n  mul.wide.u32 %%rd2, %%r1, 4;\n"
    "  add.s64 %%rd1, %%rd1, %%rd2;\n  st.global.u32 [%%rd1], %%r5;\ndone:\n  ret;\n}\n";

static const char *lto_kernel =
    "extern \"C\" __global__ void k(int *out, unsigned n, int seed) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = 3 * (int)i + seed;\n}\n";

static char arch_opt[32];

/* Loads `image`, runs k over n elements and checks out[i] == 3 i + seed. */
static int run_image(const void *image, unsigned seed) {
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr d;
    unsigned n = 1000 + seed % 3000;
    int *host = malloc(n * sizeof *host), ok = 1;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&fn, mod, "k"));
    CK(cuMemAlloc(&d, n * sizeof *host));
    CK(cuMemsetD32(d, 0xdeadbeef, n));
    void *args[] = {&d, &n, &seed};
    CK(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CK(cuMemcpyDtoH(host, d, n * sizeof *host));
    for (unsigned i = 0; i < n; i++)
        ok &= host[i] == (int)(3 * i + seed);
    CK(cuMemFree(d));
    CK(cuModuleUnload(mod));
    free(host);
    return ok;
}

static nvJitLinkResult linked(nvJitLinkHandle h, void **image) {
    size_t size = 0;
    nvJitLinkResult r = nvJitLinkGetLinkedCubinSize(h, &size);
    if (r == NVJITLINK_SUCCESS) {
        *image = malloc(size);
        r = nvJitLinkGetLinkedCubin(h, *image);
    }
    return r;
}

static void link_ptx(unsigned seed) {
    const char *opts[] = {arch_opt};
    nvJitLinkHandle h;
    char caller[4096];
    void *image = NULL;
    snprintf(caller, sizeof caller, caller_fmt, "scale", "scale");
    int ok = nvJitLinkCreate(&h, 1, opts) == NVJITLINK_SUCCESS &&
             nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, caller, strlen(caller), "caller.ptx") == NVJITLINK_SUCCESS &&
             nvJitLinkAddData(h, NVJITLINK_INPUT_ANY, callee, strlen(callee) + 1, "callee.ptx") == NVJITLINK_SUCCESS &&
             nvJitLinkComplete(h) == NVJITLINK_SUCCESS && linked(h, &image) == NVJITLINK_SUCCESS;
    ok = ok && run_image(image, seed);
    size_t ptx_size = 0;
    printf("link_ptx %s\n", ok ? "PASS" : "FAIL");
    printf("ptx_of_a_cubin_link %d\n", nvJitLinkGetLinkedPtxSize(h, &ptx_size));
    nvJitLinkDestroy(&h);
    printf("destroy_clears_handle %d\n", h == NULL);
    free(image);
}

static void link_lto(unsigned seed) {
    nvrtcProgram p;
    char arch[40];
    snprintf(arch, sizeof arch, "-arch=compute_%s", arch_opt + strlen("-arch=sm_"));
    const char *nopts[] = {"-dlto", arch};
    size_t n = 0;
    if (nvrtcCreateProgram(&p, lto_kernel, "k.cu", 0, NULL, NULL) || nvrtcCompileProgram(p, 2, nopts) ||
        nvrtcGetLTOIRSize(p, &n)) {
        printf("lto FAIL nvrtc\n");
        return;
    }
    char *ir = malloc(n);
    nvrtcGetLTOIR(p, ir);
    nvrtcDestroyProgram(&p);
    const char *opts[] = {arch_opt, "-lto"};
    nvJitLinkHandle h;
    void *image = NULL;
    int ok = nvJitLinkCreate(&h, 2, opts) == NVJITLINK_SUCCESS &&
             nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, ir, n, "k.ltoir") == NVJITLINK_SUCCESS &&
             nvJitLinkComplete(h) == NVJITLINK_SUCCESS && linked(h, &image) == NVJITLINK_SUCCESS;
    size_t ptx_size = 0;
    printf("lto %s\n", ok && run_image(image, seed) ? "PASS" : "FAIL");
    printf("ptx_of_an_lto_link %d\n", nvJitLinkGetLinkedPtxSize(h, &ptx_size));
    nvJitLinkDestroy(&h);
    free(image);
    free(ir);
}

/* Complete's answer for one input, and whether the error log then says something. */
static void bad_link(const char *name, const char *a, const char *b) {
    const char *opts[] = {arch_opt};
    nvJitLinkHandle h;
    if (nvJitLinkCreate(&h, 1, opts)) {
        printf("%s create_failed\n", name);
        return;
    }
    nvJitLinkResult add = nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, a, strlen(a), "a.ptx");
    if (add == NVJITLINK_SUCCESS && b)
        add = nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, b, strlen(b), "b.ptx");
    nvJitLinkResult r = add ? add : nvJitLinkComplete(h);
    size_t log = 0, cubin = 0;
    nvJitLinkGetErrorLogSize(h, &log);
    char *text = calloc(log + 1, 1);
    if (log && nvJitLinkGetErrorLog(h, text) == NVJITLINK_SUCCESS)
        fprintf(stderr, "%s log: %s\n", name, text);     /* the wording is the linker's own */
    free(text);
    printf("%s %d %s %d log %d cubin_after %d\n", name, add, add ? "at_add" : "at_complete", r, log > 1,
           nvJitLinkGetLinkedCubinSize(h, &cubin));
    nvJitLinkDestroy(&h);
}

int main(int argc, char **argv) {
    unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1;
    snprintf(arch_opt, sizeof arch_opt, "-arch=%s", argc > 2 ? argv[2] : "sm_86");
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate(&ctx, NULL, 0, dev));
    link_ptx(seed);
    link_lto(seed);

    nvJitLinkHandle h = NULL;
    const char *none[] = {"-O3"}, *bogus[] = {arch_opt, "-no-such-option"};
    printf("missing_arch %d\n", nvJitLinkCreate(&h, 1, none));
    printf("unknown_option %d\n", nvJitLinkCreate(&h, 2, bogus));
    char caller[4096];
    snprintf(caller, sizeof caller, caller_fmt, "nowhere", "nowhere");
    bad_link("undefined_function", caller, NULL);
    bad_link("bad_ptx", ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k() { frob.u32; }\n", NULL);
    const char *opts[] = {arch_opt};
    size_t size = 0;
    nvJitLinkCreate(&h, 1, opts);
    printf("cubin_before_complete %d\n", nvJitLinkGetLinkedCubinSize(h, &size));
    printf("empty_link %d\n", nvJitLinkComplete(h));
    nvJitLinkDestroy(&h);
    printf("null_handle_add %d\n", nvJitLinkAddData(NULL, NVJITLINK_INPUT_PTX, callee, strlen(callee), "x"));
    unsigned major = 0, minor = 0;
    nvJitLinkResult v = nvJitLinkVersion(&major, &minor);
    printf("version %d %d\n", v, major >= 12);
    /* the driver's own linker on the same undefined reference */
    CUlinkState st;
    void *out;
    char elog[4096] = "";
    CUjit_option lo[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *lv[] = {elog, (void *)(size_t)sizeof elog};
    CK(cuLinkCreate(2, lo, lv, &st));
    CUresult add = cuLinkAddData(st, CU_JIT_INPUT_PTX, caller, strlen(caller) + 1, "a.ptx", 0, NULL, NULL);
    printf("driver_link_undefined %d %d\n", add, add ? add : cuLinkComplete(st, &out, &size));
    fprintf(stderr, "driver_link_undefined log: %s\n", elog);
    cuLinkDestroy(st);
    CK(cuCtxDestroy(ctx));
    printf("DONE\n");
    return 0;
}
