/* ZLUDA_MEMCHECK=1 from C through the real libcuda.so.1: each mode makes one bad access (or none, "ok")
 * and prints the code cuCtxSynchronize returns, "rc=N", then the first word of its output buffer.
 * argv[1]: ok, oob (one element past a cuMemAlloc), host (a malloc pointer), freed (after cuMemFree),
 * misaligned (a 4-byte store at base+2), shared (past a 64-byte .shared array), local (past a 16-byte
 * .local array), generic (an oob generic store), read (an oob load), pinned (one past cuMemAllocHost). */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* put(p, off): thread i stores i at p + off + 4*i (global); gput the same through a generic store;
   get(p, off, out): out[i] = p[off/4 + i]; sh(off)/loc(off): a store to s+off / l+off */
static const char *PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry put(.param .u64 p, .param .u64 off)\n{\n"
    "  .reg .b32 %r<3>;\n  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u64 %rd2, [off];\n  mov.u32 %r1, %tid.x;\n"
    "  mul.wide.u32 %rd3, %r1, 4;\n  add.s64 %rd4, %rd1, %rd2;\n  add.s64 %rd5, %rd4, %rd3;\n"
    "  st.global.u32 [%rd5], %r1;\n  ret;\n}\n"
    ".visible .entry gput(.param .u64 p, .param .u64 off)\n{\n"
    "  .reg .b32 %r<3>;\n  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u64 %rd2, [off];\n  mov.u32 %r1, %tid.x;\n"
    "  mul.wide.u32 %rd3, %r1, 4;\n  add.s64 %rd4, %rd1, %rd2;\n  add.s64 %rd5, %rd4, %rd3;\n"
    "  st.u32 [%rd5], %r1;\n  ret;\n}\n"
    ".visible .entry get(.param .u64 p, .param .u64 off, .param .u64 out)\n{\n"
    "  .reg .b32 %r<3>;\n  .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u64 %rd2, [off];\n  ld.param.u64 %rd6, [out];\n"
    "  mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd3, %r1, 4;\n  add.s64 %rd4, %rd1, %rd2;\n"
    "  add.s64 %rd5, %rd4, %rd3;\n  ld.global.u32 %r2, [%rd5];\n  add.s64 %rd7, %rd6, %rd3;\n"
    "  st.global.u32 [%rd7], %r2;\n  ret;\n}\n"
    ".visible .entry sh(.param .u32 off)\n{\n"
    "  .shared .align 4 .b8 s[64];\n  .reg .b32 %r<4>;\n"
    "  ld.param.u32 %r1, [off];\n  mov.u32 %r2, s;\n  add.s32 %r3, %r2, %r1;\n"
    "  st.shared.u32 [%r3], %r1;\n  ret;\n}\n"
    ".visible .entry loc(.param .u64 off, .param .u64 out)\n{\n"
    "  .local .align 4 .b8 l[16];\n  .reg .b32 %r<2>;\n  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [off];\n  ld.param.u64 %rd4, [out];\n  mov.u64 %rd2, l;\n"
    "  add.s64 %rd3, %rd2, %rd1;\n  mov.u32 %r1, 7;\n  st.local.u32 [%rd3], %r1;\n"
    "  ld.local.u32 %r1, [%rd2];\n  st.global.u32 [%rd4], %r1;\n  ret;\n}\n";

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction put, gput, get, sh, loc;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, PTX) ||
        cuModuleGetFunction(&put, mod, "put") || cuModuleGetFunction(&gput, mod, "gput") ||
        cuModuleGetFunction(&get, mod, "get") || cuModuleGetFunction(&sh, mod, "sh") ||
        cuModuleGetFunction(&loc, mod, "loc")) {
        printf("setup failed\n");
        return 2;
    }
    CUdeviceptr buf, out;
    cuMemAlloc(&buf, 16 * 4);
    cuMemAlloc(&out, 16 * 4);
    cuMemsetD32(out, 0, 16);
    uint64_t p = buf, off = 0, outp = out;
    uint32_t soff = 0;
    unsigned threads = 16;
    CUfunction f = put;
    void *args2[] = {&p, &off}, *args3[] = {&p, &off, &outp}, *argsh[] = {&soff}, *argsl[] = {&off, &outp};
    void **args = args2;
    void *host = NULL;
    if (!strcmp(mode, "oob")) {
        threads = 17;
    } else if (!strcmp(mode, "host")) {
        host = malloc(64);
        p = (uint64_t)(uintptr_t)host;
    } else if (!strcmp(mode, "freed")) {
        CUdeviceptr gone;
        cuMemAlloc(&gone, 64);
        cuMemFree(gone);
        p = gone;
        threads = 1;
    } else if (!strcmp(mode, "misaligned")) {
        off = 2;
        threads = 1;
    } else if (!strcmp(mode, "generic")) {
        f = gput;
        off = 4;
    } else if (!strcmp(mode, "read")) {
        f = get;
        args = args3;
        off = 8;
    } else if (!strcmp(mode, "pinned")) {
        void *h;
        cuMemAllocHost(&h, 64);
        p = (uint64_t)(uintptr_t)h;
        threads = 17;
    } else if (!strcmp(mode, "shared")) {
        f = sh;
        args = argsh;
        soff = 64;
        threads = 1;
    } else if (!strcmp(mode, "local")) {
        f = loc;
        args = argsl;
        off = 16;
        threads = 1;
    } else if (!strcmp(mode, "ok")) {
        CUresult r = cuLaunchKernel(sh, 1, 1, 1, 1, 1, 1, 0, 0, argsh, NULL);
        off = 12;
        r = r ? r : cuLaunchKernel(loc, 1, 1, 1, 1, 1, 1, 0, 0, argsl, NULL);
        off = 0;
        r = r ? r : cuLaunchKernel(get, 1, 1, 1, 16, 1, 1, 0, 0, args3, NULL);
        r = r ? r : cuLaunchKernel(gput, 1, 1, 1, 16, 1, 1, 0, 0, args2, NULL);
        if (r) printf("launch rc=%d\n", (int)r);
    }
    CUresult r = cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, 0, 0, args, NULL);
    if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
    printf("rc=%d\n", (int)r);
    fflush(stdout);
    free(host);
    return 0;
}
