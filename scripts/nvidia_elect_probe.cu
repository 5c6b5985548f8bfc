// What an H200 answers: elect.sync's leader for member masks (members branch into it, the rest around),
// and the driver's verdict on sm_90-only instructions in a module whose .target is sm_86.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void elect_k(const unsigned *masks, unsigned *d, unsigned *p) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned mask = masks[i / 32], lane = threadIdx.x % 32;
    unsigned dd = 0x5A5A, pp = 7;
    if ((mask >> lane) & 1) {
        asm volatile("{\n .reg .pred q;\n elect.sync %0|q, %2;\n selp.u32 %1, 1, 0, q;\n}"
                     : "=r"(dd), "=r"(pp) : "r"(mask));
    }
    d[i] = dd; p[i] = pp;
}

static const char *HEAD = ".version 8.0\n.target sm_86\n.address_size 64\n.visible .entry k(.param .u64 a)\n{\n"
                          " .reg .b32 %r<4>;\n .reg .b64 %rd<4>;\n .reg .pred %p<2>;\n";

int main() {
    enum { W = 12 };
    unsigned masks[W] = {0xFFFFFFFFu, 0x0000FFFFu, 0x80000001u, 0xF0F0F0F0u, 0x80000000u, 0x00000001u,
                         0x12345678u, 0xFFFF0000u, 0x00010000u, 0xAAAAAAAAu, 0x55555554u, 0x7FFFFFFEu};
    unsigned *dm, *dd, *dp, d[W * 32], p[W * 32];
    cudaMalloc(&dm, sizeof masks); cudaMalloc(&dd, sizeof d); cudaMalloc(&dp, sizeof p);
    cudaMemcpy(dm, masks, sizeof masks, cudaMemcpyHostToDevice);
    elect_k<<<W, 32>>>(dm, dd, dp);
    printf("launch %d\n", (int)cudaDeviceSynchronize());
    cudaMemcpy(d, dd, sizeof d, cudaMemcpyDeviceToHost); cudaMemcpy(p, dp, sizeof p, cudaMemcpyDeviceToHost);
    for (int w = 0; w < W; w++) {
        printf("elect mask %08x:", masks[w]);
        for (int l = 0; l < 32; l++) printf(" %u/%u", d[w * 32 + l], p[w * 32 + l]);
        printf("\n");
    }
    const char *bodies[] = {"elect.sync %r1|%p1, 0xffffffff;\n", "mapa.u64 %rd1, %rd2, %r1;\n",
                            "multimem.ld_reduce.relaxed.sys.global.add.u32 %r1, [%rd2];\n",
                            "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r1,%r1,%r1,%r1}, {%r2,%r2}, "
                            "{%r3,%r3}, {%r1,%r1,%r1,%r1}, %r2, 0x0;\n",
                            "alloca.u64 %rd1, %rd2;\n", "stacksave.u64 %rd1;\n"};
    CUcontext ctx; cuCtxGetCurrent(&ctx);
    for (int b = 0; b < 6; b++) {
        char src[1024], log[2048] = "";
        snprintf(src, sizeof src, "%s %s ret;\n}\n", HEAD, bodies[b]);
        CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *val[2] = {log, (void *)(size_t)sizeof log};
        CUmodule m;
        CUresult r = cuModuleLoadDataEx(&m, src, 2, opt, val);
        for (char *c = log; *c; c++) if (*c == '\n') *c = ' ';
        printf("sm86 %d %s -> %d | %s\n", b, bodies[b], (int)r, log);
        if (!r) cuModuleUnload(m);
    }
    return 0;
}
