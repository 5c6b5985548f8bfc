/* One kernel launched with several block shapes through the real libcuda.so.1: a lazy kernel is compiled for
 * the block of its first launch, and a launch of any other block must run its code for any block. Each thread
 * writes its linear id and the block shape it sees; thread 0 writes the sum of tid.x over its block, added up
 * in shared memory between two barriers. Launches go through cuLaunchKernel (its C fast path from the second
 * launch of a shape on) and cuLaunchKernelEx, in an order that returns to the first shape. Prints
 * "ALL PASSED" or the first difference. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("FAIL %s -> %d (line %d)\n", #call, r_, __LINE__); exit(1); } } while (0)

static const char *PTX =
    ".version 7.8\n.target sm_80\n.address_size 64\n"
    ".visible .entry shape(.param .u64 out, .param .u64 sums)\n{\n"
    "  .reg .pred %p<2>; .reg .b32 %r<16>; .reg .b64 %rd<8>;\n"
    "  .shared .align 4 .b32 total;\n"
    "  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [sums];\n"
    "  mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r3, %tid.z;\n"
    "  mov.u32 %r4, %ntid.x; mov.u32 %r5, %ntid.y; mov.u32 %r6, %ntid.z;\n"
    "  mad.lo.u32 %r7, %r3, %r5, %r2; mad.lo.u32 %r7, %r7, %r4, %r1;\n"
    "  mul.lo.u32 %r9, %r4, %r5; mul.lo.u32 %r9, %r9, %r6;\n"
    "  setp.ne.u32 %p1, %r7, 0;\n"
    "  @%p1 bra $L_zeroed;\n  st.shared.u32 [total], 0;\n$L_zeroed:\n"
    "  bar.sync 0;\n"
    "  atom.shared.add.u32 %r10, [total], %r1;\n"
    "  bar.sync 0;\n"
    "  mov.u32 %r8, %ctaid.x;\n"
    "  mad.lo.u32 %r11, %r8, %r9, %r7;\n"
    "  mul.wide.u32 %rd3, %r11, 8; add.s64 %rd4, %rd1, %rd3;\n"
    "  shl.b32 %r12, %r5, 11; or.b32 %r12, %r12, %r4; shl.b32 %r13, %r6, 22; or.b32 %r12, %r12, %r13;\n"
    "  st.global.v2.u32 [%rd4], {%r7, %r12};\n"
    "  @%p1 bra $L_end;\n"
    "  ld.shared.u32 %r14, [total];\n"
    "  mul.wide.u32 %rd5, %r8, 4; add.s64 %rd6, %rd2, %rd5; st.global.u32 [%rd6], %r14;\n"
    "$L_end:\n  ret;\n}\n";

enum { GRID = 3 };

static void check(CUfunction f, CUdeviceptr dout, CUdeviceptr dsums, int bx, int by, int bz, int ex)
{
    int threads = bx * by * bz;
    size_t words = (size_t)GRID * threads * 2;
    unsigned *out = malloc(words * 4), sums[GRID];
    OK(cuMemsetD8(dout, 0xA5, words * 4));
    OK(cuMemsetD8(dsums, 0xA5, sizeof sums));
    void *args[] = {&dout, &dsums};
    if (ex) {
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = GRID; cfg.gridDimY = 1; cfg.gridDimZ = 1;
        cfg.blockDimX = bx; cfg.blockDimY = by; cfg.blockDimZ = bz;
        OK(cuLaunchKernelEx(&cfg, f, args, NULL));
    } else {
        OK(cuLaunchKernel(f, GRID, 1, 1, bx, by, bz, 0, NULL, args, NULL));
    }
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(out, dout, words * 4));
    OK(cuMemcpyDtoH(sums, dsums, sizeof sums));
    unsigned packed = (unsigned)bx | (unsigned)by << 11 | (unsigned)bz << 22;
    unsigned want = (unsigned)(by * bz) * (unsigned)(bx * (bx - 1) / 2);
    for (int b = 0; b < GRID; b++) {
        if (sums[b] != want) {
            printf("FAIL block (%d,%d,%d)%s: block %d's tid.x sum %u, want %u\n", bx, by, bz, ex ? " Ex" : "", b,
                   sums[b], want);
            exit(1);
        }
        for (int t = 0; t < threads; t++) {
            unsigned *w = out + 2 * ((size_t)b * threads + t);
            if (w[0] != (unsigned)t || w[1] != packed) {
                printf("FAIL block (%d,%d,%d)%s: block %d thread %d wrote (%u, 0x%x), want (%d, 0x%x)\n", bx, by,
                       bz, ex ? " Ex" : "", b, t, w[0], w[1], t, packed);
                exit(1);
            }
        }
    }
    free(out);
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuCtxCreate(&ctx, NULL, 0, dev));
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&f, mod, "shape"));
    CUdeviceptr dout, dsums;
    OK(cuMemAlloc(&dout, (size_t)GRID * 1024 * 8));
    OK(cuMemAlloc(&dsums, GRID * 4));
    static const int shapes[][4] = {
        {16, 16, 1, 0}, {16, 16, 1, 0}, {16, 16, 1, 0}, {8, 4, 2, 0}, {8, 4, 2, 0}, {256, 1, 1, 1}, {16, 16, 1, 1},
        {33, 3, 2, 0}, {1, 1, 1, 0}, {16, 16, 1, 0}, {1024, 1, 1, 0}, {7, 5, 3, 1}, {16, 16, 1, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check(f, dout, dsums, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
    OK(cuModuleUnload(mod));
    OK(cuCtxDestroy(ctx));
    printf("ALL PASSED\n");
    return 0;
}
