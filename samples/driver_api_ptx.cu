// nvcc-flags: -lcuda
// Driver API only (cuda.h, linked with -lcuda): loads hand-written PTX holding several kernels and a
// global with cuModuleLoadData/LoadDataEx, launches with cuLaunchKernel through kernelParams and
// through `extra` (a packed, aligned parameter buffer), and checks module globals, function
// attributes, streams and the errors for a missing kernel and for broken PTX.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>

static int g_failures = 0;

#define CU(call)                                                                             \
    do {                                                                                     \
        CUresult r_ = (call);                                                                \
        if (r_ != CUDA_SUCCESS) {                                                            \
            const char *name_ = nullptr;                                                     \
            cuGetErrorName(r_, &name_);                                                      \
            printf("error: %s returned %s (%d)\n", #call, name_ ? name_ : "?", (int)r_);    \
            printf("FAIL\n");                                                                \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static void expect(bool ok, const char *msg) {
    if (!ok) { printf("check failed: %s\n", msg); g_failures++; }
}

static const char *kPtx = R"PTX(
.version 6.0
.target sm_50
.address_size 64

.visible .global .align 4 .u32 launch_count = 0;
.visible .global .align 8 .u64 magic = 81985529216486895;

// y[i] = a * x[i] + y[i]
.visible .entry saxpy(
    .param .f32 saxpy_a,
    .param .u64 saxpy_x,
    .param .u64 saxpy_y,
    .param .u32 saxpy_n
)
{
    .reg .pred %p<2>;
    .reg .f32 %f<5>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;

    ld.param.f32 %f1, [saxpy_a];
    ld.param.u64 %rd1, [saxpy_x];
    ld.param.u64 %rd2, [saxpy_y];
    ld.param.u32 %r1, [saxpy_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra SAXPY_DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.s32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
SAXPY_DONE:
    ret;
}

// out[i] = in[i] + offset + i (64-bit); thread 0 of block 0 counts launches in a module global.
.visible .entry add_offset(
    .param .u64 ao_out,
    .param .u64 ao_in,
    .param .u32 ao_n,
    .param .u64 ao_offset
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;

    ld.param.u64 %rd1, [ao_out];
    ld.param.u64 %rd2, [ao_in];
    ld.param.u32 %r1, [ao_n];
    ld.param.u64 %rd3, [ao_offset];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    or.b32 %r6, %r2, %r4;
    setp.ne.s32 %p2, %r6, 0;
    @%p2 bra AO_BODY;
    atom.global.add.u32 %r7, [launch_count], 1;
AO_BODY:
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra AO_DONE;
    mul.wide.u32 %rd4, %r5, 8;
    add.s64 %rd5, %rd2, %rd4;
    add.s64 %rd6, %rd1, %rd4;
    ld.global.u64 %rd7, [%rd5];
    add.s64 %rd8, %rd7, %rd3;
    cvt.u64.u32 %rd9, %r5;
    add.s64 %rd10, %rd8, %rd9;
    st.global.u64 [%rd6], %rd10;
AO_DONE:
    ret;
}

// Reverses each block of 256 ints through static shared memory.
.visible .entry block_reverse(
    .param .u64 br_data
)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<10>;
    .shared .align 4 .b8 br_buf[1024];

    ld.param.u64 %rd1, [br_data];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mad.lo.s32 %r3, %r2, 256, %r1;
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r4, [%rd4];
    mul.wide.u32 %rd5, %r1, 4;
    mov.u64 %rd6, br_buf;
    add.s64 %rd7, %rd6, %rd5;
    st.shared.u32 [%rd7], %r4;
    bar.sync 0;
    sub.s32 %r5, 255, %r1;
    mul.wide.u32 %rd8, %r5, 4;
    add.s64 %rd9, %rd6, %rd8;
    ld.shared.u32 %r6, [%rd9];
    st.global.u32 [%rd4], %r6;
    ret;
}
)PTX";

int main() {
    CU(cuInit(0));
    int count = 0, version = 0;
    CU(cuDeviceGetCount(&count));
    CU(cuDriverGetVersion(&version));
    expect(count >= 1, "at least one device");
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    char name[256];
    CU(cuDeviceGetName(name, sizeof(name), dev));
    size_t total = 0;
    CU(cuDeviceTotalMem(&total, dev));
    int major = 0, minor = 0;
    CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    printf("device: %s, cc %d.%d, %zu MiB, driver %d\n", name, major, minor, total >> 20, version);
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));

    CUmodule mod;
    CU(cuModuleLoadData(&mod, kPtx));
    CUfunction saxpy, add_offset, block_reverse;
    CU(cuModuleGetFunction(&saxpy, mod, "saxpy"));
    CU(cuModuleGetFunction(&add_offset, mod, "add_offset"));
    CU(cuModuleGetFunction(&block_reverse, mod, "block_reverse"));
    CUfunction missing;
    CUresult r = cuModuleGetFunction(&missing, mod, "no_such_kernel");
    expect(r == CUDA_ERROR_NOT_FOUND, "a missing kernel is CUDA_ERROR_NOT_FOUND");

    int max_threads = 0, shared = -1;
    CU(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, saxpy));
    CU(cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, block_reverse));
    expect(max_threads >= 256 && max_threads <= 1024, "max threads per block of saxpy");
    expect(shared == 1024, "static shared size of block_reverse is 1024");

    // --- saxpy through kernelParams ---
    const unsigned n = 1 << 16;
    float *x = new float[n], *y = new float[n], *ref = new float[n];
    uint64_t s = 12345;
    for (unsigned i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((int)(s >> 40) % 2000 - 1000);
        y[i] = (float)((int)(s >> 20) % 2000 - 1000);
        ref[i] = 3.0f * x[i] + y[i];
    }
    CUdeviceptr dx, dy;
    CU(cuMemAlloc(&dx, n * sizeof(float)));
    CU(cuMemAlloc(&dy, n * sizeof(float)));
    CU(cuMemcpyHtoD(dx, x, n * sizeof(float)));
    CU(cuMemcpyHtoD(dy, y, n * sizeof(float)));
    float a = 3.0f;
    unsigned nn = n;
    void *params[] = {&a, &dx, &dy, &nn};
    CU(cuLaunchKernel(saxpy, n / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CU(cuCtxSynchronize());
    float *got = new float[n];
    CU(cuMemcpyDtoH(got, dy, n * sizeof(float)));
    for (unsigned i = 0; i < n; i++)
        if (got[i] != ref[i]) { if (g_failures < 10) printf("saxpy[%u] = %g want %g\n", i, got[i], ref[i]); g_failures++; }

    // --- add_offset through `extra`: the buffer follows the PTX parameter layout (u64 at 8-byte
    // alignment after the u32) ---
    uint64_t *in64 = new uint64_t[n], *out64 = new uint64_t[n];
    for (unsigned i = 0; i < n; i++) { s = s * 6364136223846793005ull + 1; in64[i] = s; }
    CUdeviceptr din, dout;
    CU(cuMemAlloc(&din, n * 8));
    CU(cuMemAlloc(&dout, n * 8));
    CU(cuMemcpyHtoD(din, in64, n * 8));
    CU(cuMemsetD8(dout, 0xFF, n * 8));
    struct {
        CUdeviceptr out, in;
        unsigned n, pad;
        unsigned long long offset;
    } buf = {dout, din, n, 0, 0x1000000000ull};
    size_t buf_size = sizeof(buf);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &buf_size, CU_LAUNCH_PARAM_END};
    CUstream stream;
    CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU(cuLaunchKernel(add_offset, n / 128, 1, 1, 128, 1, 1, 0, stream, nullptr, extra));
    CU(cuLaunchKernel(add_offset, n / 128, 1, 1, 128, 1, 1, 0, stream, nullptr, extra));  // counted twice
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(out64, dout, n * 8));
    for (unsigned i = 0; i < n; i++) {
        uint64_t want = in64[i] + 0x1000000000ull + i;
        if (out64[i] != want) { if (g_failures < 10) printf("add_offset[%u] = %llu want %llu\n", i, (unsigned long long)out64[i], (unsigned long long)want); g_failures++; }
    }

    // --- module globals ---
    CUdeviceptr dcount, dmagic;
    size_t bytes = 0, magic_bytes = 0;
    CU(cuModuleGetGlobal(&dcount, &bytes, mod, "launch_count"));
    CU(cuModuleGetGlobal(&dmagic, &magic_bytes, mod, "magic"));
    expect(bytes == 4 && magic_bytes == 8, "global sizes");
    unsigned launches = 0;
    unsigned long long magic = 0;
    CU(cuMemcpyDtoH(&launches, dcount, 4));
    CU(cuMemcpyDtoH(&magic, dmagic, 8));
    expect(launches == 2, "launch_count counted both add_offset launches");
    expect(magic == 81985529216486895ull, "initialised global");

    // --- shared memory and barrier, module loaded a second time with JIT options ---
    char log_buf[4096] = {0};
    CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *opt_vals[] = {log_buf, (void *)(uintptr_t)sizeof(log_buf)};
    CUmodule mod2;
    CU(cuModuleLoadDataEx(&mod2, kPtx, 2, opts, opt_vals));
    CUfunction rev2;
    CU(cuModuleGetFunction(&rev2, mod2, "block_reverse"));
    const unsigned m = 4096;
    int *iv = new int[m], *iref = new int[m], *igot = new int[m];
    for (unsigned i = 0; i < m; i++) iv[i] = (int)(i * 2654435761u);
    for (unsigned b = 0; b < m / 256; b++) for (unsigned t = 0; t < 256; t++) iref[b * 256 + t] = iv[b * 256 + 255 - t];
    CUdeviceptr dv;
    CU(cuMemAlloc(&dv, m * 4));
    CU(cuMemcpyHtoD(dv, iv, m * 4));
    void *rparams[] = {&dv};
    CU(cuLaunchKernel(rev2, m / 256, 1, 1, 256, 1, 1, 0, nullptr, rparams, nullptr));
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(igot, dv, m * 4));
    for (unsigned i = 0; i < m; i++)
        if (igot[i] != iref[i]) { if (g_failures < 10) printf("reverse[%u] = %d want %d\n", i, igot[i], iref[i]); g_failures++; }
    // Each module has its own globals.
    CUdeviceptr dcount2;
    CU(cuModuleGetGlobal(&dcount2, &bytes, mod2, "launch_count"));
    unsigned launches2 = 99;
    CU(cuMemcpyDtoH(&launches2, dcount2, 4));
    expect(dcount2 != dcount && launches2 == 0, "second module has its own launch_count");

    // --- broken PTX is rejected, nothing crashes ---
    CUmodule bad;
    r = cuModuleLoadData(&bad, ".version 6.0\n.target sm_50\n.address_size 64\n.visible .entry broken( { ret; }\n");
    expect(r == CUDA_ERROR_INVALID_PTX, "broken PTX is CUDA_ERROR_INVALID_PTX");
    if (r != CUDA_ERROR_INVALID_PTX) {
        const char *nm = nullptr;
        cuGetErrorName(r, &nm);
        printf("broken PTX gave %s\n", nm ? nm : "?");
    }

    CU(cuStreamDestroy(stream));
    CU(cuMemFree(dx)); CU(cuMemFree(dy)); CU(cuMemFree(din)); CU(cuMemFree(dout)); CU(cuMemFree(dv));
    CU(cuModuleUnload(mod));
    CU(cuModuleUnload(mod2));
    CU(cuDevicePrimaryCtxRelease(dev));
    if (g_failures == 0) { printf("PASS\n"); return 0; }
    printf("%d check(s) failed\nFAIL\n", g_failures);
    return 1;
}
