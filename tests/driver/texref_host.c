/* Legacy texture and surface references through libcuda.so.1, as a CUDA <= 11 program drove them: bind with
 * cuTexRefSet*, launch (cuLaunchKernel and the legacy cuParamSetTexRef/cuLaunchGrid), read back, rebind. Each
 * fetch is checked against the texels on the host. Bad calls print "code NAME RESULT" lines for the test to
 * compare with NVIDIA's answers. Ends with "ok 0". argv[1]: a seed. */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 8
#define H 4
#define N 96

static int failures;
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("FAIL %s -> %d (line %d)\n", #x, r_, __LINE__); exit(1); } } while (0)
#define CODE(name, x) printf("code %s %d\n", name, (int)(x))

static const char *PTX =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".global .texref tex2;\n.global .texref tex1;\n.global .surfref surf;\n"
    ".visible .entry fetch2d(.param .u64 out, .param .u64 coords, .param .u32 n)\n{\n"
    "  .reg .u32 %r<4>;\n  .reg .u64 %rd<8>;\n  .reg .f32 %f<8>;\n  .reg .pred %p;\n"
    "  mov.u32 %r1, %tid.x;\n  ld.param.u32 %r2, [n];\n  setp.ge.u32 %p, %r1, %r2;\n  @%p bra done;\n"
    "  ld.param.u64 %rd1, [coords];\n  mul.wide.u32 %rd2, %r1, 8;\n  add.u64 %rd1, %rd1, %rd2;\n"
    "  ld.global.v2.f32 {%f1, %f2}, [%rd1];\n"
    "  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [tex2, {%f1, %f2}];\n"
    "  ld.param.u64 %rd3, [out];\n  mul.wide.u32 %rd4, %r1, 4;\n  add.u64 %rd3, %rd3, %rd4;\n"
    "  st.global.f32 [%rd3], %f3;\ndone:\n  ret;\n}\n"
    ".visible .entry fetch1d(.param .u64 out, .param .u64 idx, .param .u32 n)\n{\n"
    "  .reg .u32 %r<8>;\n  .reg .u64 %rd<8>;\n  .reg .pred %p;\n"
    "  mov.u32 %r1, %tid.x;\n  ld.param.u32 %r2, [n];\n  setp.ge.u32 %p, %r1, %r2;\n  @%p bra done;\n"
    "  ld.param.u64 %rd1, [idx];\n  mul.wide.u32 %rd2, %r1, 4;\n  add.u64 %rd1, %rd1, %rd2;\n"
    "  ld.global.s32 %r3, [%rd1];\n  tex.1d.v4.u32.s32 {%r4, %r5, %r6, %r7}, [tex1, {%r3}];\n"
    "  ld.param.u64 %rd3, [out];\n  add.u64 %rd3, %rd3, %rd2;\n  st.global.u32 [%rd3], %r4;\ndone:\n  ret;\n}\n"
    ".visible .entry store(.param .u32 base)\n{\n  .reg .u32 %r<8>;\n"
    "  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %tid.y;\n  ld.param.u32 %r3, [base];\n"
    "  mad.lo.u32 %r3, %r2, 1000, %r3;\n  add.u32 %r3, %r3, %r1;\n  shl.b32 %r4, %r1, 2;\n"
    "  sust.b.2d.b32.trap [surf, {%r4, %r2}], {%r3};\n  ret;\n}\n";

static uint32_t seed;
static uint32_t rnd(void) { seed = seed * 1664525u + 1013904223u; return seed >> 8; }

static float img[H][W], img2[H][W];

static float texel(float im[H][W], int x, int y) {
    x = x < 0 ? 0 : x >= W ? W - 1 : x;
    y = y < 0 ? 0 : y >= H ? H - 1 : y;
    return im[y][x];
}

/* what the texture unit answers for texel coordinates on a 1/16 grid, clamped (8-bit weights, exact here) */
static float sample(float im[H][W], float x, float y, int linear) {
    if (!linear) return texel(im, (int)floorf(x), (int)floorf(y));
    long qx = lroundf((x - 0.5f) * 256), qy = lroundf((y - 0.5f) * 256);
    int i0 = (int)(qx >> 8), j0 = (int)(qy >> 8);
    long a = qx & 255, b = qy & 255, ab = (a * b + 128) >> 8;
    double v = (256 - a - b + ab) * (double)texel(im, i0, j0) + (a - ab) * (double)texel(im, i0 + 1, j0)
             + (b - ab) * (double)texel(im, i0, j0 + 1) + ab * (double)texel(im, i0 + 1, j0 + 1);
    return (float)(v / 256);
}

static float coords[N][2];
static CUdeviceptr dcoords, dout;

static void check_fetch(const char *what, float im[H][W], int linear, float *got) {
    for (int i = 0; i < N; i++) {
        float want = sample(im, coords[i][0], coords[i][1], linear);
        if (memcmp(&want, &got[i], 4)) {
            printf("FAIL %s [%d] at (%g, %g): got %g want %g\n", what, i, coords[i][0], coords[i][1], got[i], want);
            failures++;
            return;
        }
    }
}

static void fetch(CUfunction f, CUstream s, float *host) {
    unsigned n = N;
    void *args[] = {&dout, &dcoords, &n};
    CK(cuLaunchKernel(f, 1, 1, 1, N, 1, 1, 0, s, args, NULL));
    if (host) CK(cuMemcpyDtoH(host, dout, N * 4));
}

int main(int argc, char **argv) {
    seed = argc > 1 ? (uint32_t)atoi(argv[1]) : 1;
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, PTX));
    CUfunction f2, f1, fs;
    CK(cuModuleGetFunction(&f2, mod, "fetch2d"));
    CK(cuModuleGetFunction(&f1, mod, "fetch1d"));
    CK(cuModuleGetFunction(&fs, mod, "store"));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            img[y][x] = (float)((int)(rnd() % 2001) - 1000);
            img2[y][x] = (float)((int)(rnd() % 2001) - 1000);
        }
    for (int i = 0; i < N; i++) {
        coords[i][0] = (float)((int)(rnd() % ((W + 4) * 16)) - 32) / 16;
        coords[i][1] = (float)((int)(rnd() % ((H + 4) * 16)) - 32) / 16;
    }
    CK(cuMemAlloc(&dcoords, sizeof coords));
    CK(cuMemAlloc(&dout, 4 * N));
    CK(cuMemcpyHtoD(dcoords, coords, sizeof coords));

    /* references of the module: the same handle each time; a surface's name is no texture's */
    CUtexref tex2, again, tex1, other;
    CUsurfref surf;
    CK(cuModuleGetTexRef(&tex2, mod, "tex2"));
    CK(cuModuleGetTexRef(&again, mod, "tex2"));
    CK(cuModuleGetTexRef(&tex1, mod, "tex1"));
    CK(cuModuleGetSurfRef(&surf, mod, "surf"));
    if (again != tex2) { printf("FAIL cuModuleGetTexRef gave a second handle\n"); failures++; }
    CODE("GetTexRef_unknown", cuModuleGetTexRef(&other, mod, "nope"));
    CODE("GetTexRef_of_surfref", cuModuleGetTexRef(&other, mod, "surf"));
    CODE("GetSurfRef_of_texref", cuModuleGetSurfRef(&surf, mod, "tex2"));
    CK(cuModuleGetSurfRef(&surf, mod, "surf"));

    /* an array bound, point then linear filtering: each launch sees the binding made before it */
    CUarray a1, a2;
    CUDA_ARRAY_DESCRIPTOR ad = {W, H, CU_AD_FORMAT_FLOAT, 1};
    CK(cuArrayCreate(&a1, &ad));
    CK(cuArrayCreate(&a2, &ad));
    CK(cuMemcpyHtoA(a1, 0, img, sizeof img));
    CK(cuMemcpyHtoA(a2, 0, img2, sizeof img2));
    CODE("SetArray_flags0", cuTexRefSetArray(tex2, a1, 0));
    CK(cuTexRefSetArray(tex2, a1, CU_TRSA_OVERRIDE_FORMAT));
    CK(cuTexRefSetAddressMode(tex2, 0, CU_TR_ADDRESS_MODE_CLAMP));
    CK(cuTexRefSetAddressMode(tex2, 1, CU_TR_ADDRESS_MODE_CLAMP));
    CK(cuTexRefSetFilterMode(tex2, CU_TR_FILTER_MODE_POINT));
    float got[N], got2[N];
    fetch(f2, 0, got);
    check_fetch("point", img, 0, got);
    CK(cuTexRefSetFilterMode(tex2, CU_TR_FILTER_MODE_LINEAR));
    fetch(f2, 0, got);
    check_fetch("linear", img, 1, got);
    /* a launch queued on a stream before a rebinding still reads the old binding */
    CUstream s;
    CUdeviceptr dout1 = dout, dout2;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&dout2, 4 * N));
    fetch(f2, s, NULL);
    CK(cuTexRefSetArray(tex2, a2, CU_TRSA_OVERRIDE_FORMAT));
    dout = dout2;
    fetch(f2, s, NULL);
    CK(cuStreamSynchronize(s));
    CK(cuMemcpyDtoH(got, dout1, sizeof got));
    CK(cuMemcpyDtoH(got2, dout2, sizeof got2));
    check_fetch("before the rebinding", img, 1, got);
    check_fetch("after the rebinding", img2, 1, got2);
    dout = dout1;

    /* the Get* calls read back what was set */
    CUarray ga;
    CUarray_format fmt;
    int nch, aniso;
    unsigned flags;
    CUaddress_mode am;
    CUfilter_mode fm;
    float bc[4] = {1.5f, -2, 0.25f, 7}, gbc[4];
    CK(cuTexRefSetBorderColor(tex2, bc));
    CK(cuTexRefSetFlags(tex2, CU_TRSF_READ_AS_INTEGER));
    CK(cuTexRefSetMaxAnisotropy(tex2, 4));
    CK(cuTexRefGetArray(&ga, tex2));
    CK(cuTexRefGetFormat(&fmt, &nch, tex2));
    CK(cuTexRefGetFlags(&flags, tex2));
    CK(cuTexRefGetAddressMode(&am, tex2, 1));
    CK(cuTexRefGetFilterMode(&fm, tex2));
    CK(cuTexRefGetBorderColor(gbc, tex2));
    CK(cuTexRefGetMaxAnisotropy(&aniso, tex2));
    if (ga != a2 || fmt != CU_AD_FORMAT_FLOAT || nch != 1 || flags != CU_TRSF_READ_AS_INTEGER
        || am != CU_TR_ADDRESS_MODE_CLAMP || fm != CU_TR_FILTER_MODE_LINEAR || memcmp(bc, gbc, sizeof bc) || aniso != 4) {
        printf("FAIL Get*: array %d format %d x %d flags %u mode %d filter %d aniso %d\n", ga == a2, fmt, nch, flags,
               am, fm, aniso);
        failures++;
    }
    CK(cuTexRefSetFlags(tex2, 0));
    CODE("GetAddress_of_array_binding", cuTexRefGetAddress(&dout2, tex2));

    /* the legacy launch: every reference of the function's module is its already */
    unsigned n = N;
    CK(cuTexRefSetFilterMode(tex2, CU_TR_FILTER_MODE_POINT));
    CK(cuFuncSetBlockShape(f2, N, 1, 1));
    CK(cuParamSetSize(f2, 20));
    CK(cuParamSetv(f2, 0, &dout, 8));
    CK(cuParamSetv(f2, 8, &dcoords, 8));
    CK(cuParamSeti(f2, 16, n));
    CK(cuParamSetTexRef(f2, CU_PARAM_TR_DEFAULT, tex2));
    CODE("ParamSetTexRef_unit0", cuParamSetTexRef(f2, 0, tex2));
    CK(cuLaunchGrid(f2, 1, 1));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(got, dout, sizeof got));
    check_fetch("cuLaunchGrid", img2, 0, got);

    /* linear memory 8 bytes past an aligned address: the offset comes back, the kernel adds it */
    uint32_t lin[64], lgot[N];
    int32_t idx[N];
    CUdeviceptr dlin, didx;
    size_t off = 777;
    for (int i = 0; i < 64; i++) lin[i] = rnd();
    CK(cuMemAlloc(&dlin, 4096));
    CK(cuMemAlloc(&didx, sizeof idx));
    CK(cuMemcpyHtoD(dlin, lin, sizeof lin));
    CK(cuTexRefSetFormat(tex1, CU_AD_FORMAT_UNSIGNED_INT32, 1));
    CK(cuTexRefSetAddress(&off, tex1, dlin + 8, 4 * 40));
    int shift = (int)off / 4;
    for (int i = 0; i < N; i++) idx[i] = (int)(rnd() % 50) - 4;
    CK(cuMemcpyHtoD(didx, idx, sizeof idx));
    void *args1[] = {&dout, &didx, &n};
    CK(cuLaunchKernel(f1, 1, 1, 1, N, 1, 1, 0, NULL, args1, NULL));
    CK(cuMemcpyDtoH(lgot, dout, sizeof lgot));
    for (int i = 0; i < N; i++) {
        int e = idx[i];        /* elements from the aligned base: the first `shift` precede dptr */
        uint32_t want = e >= 0 && e < shift + 40 ? lin[e] : 0;
        if (lgot[i] != want) { printf("FAIL linear [%d] element %d: got %u want %u\n", i, e, lgot[i], want); failures++; break; }
    }
    CUdeviceptr back;
    CK(cuTexRefGetAddress(&back, tex1));
    if (off != 8 || back != dlin) { printf("FAIL offset %zu, address back %d\n", off, back == dlin); failures++; }
    CODE("GetArray_of_linear_binding", cuTexRefGetArray(&ga, tex1));

    /* pitched 2D memory */
    CUdeviceptr dpitch;
    CK(cuMemAlloc(&dpitch, 4096));
    for (int y = 0; y < H; y++) CK(cuMemcpyHtoD(dpitch + 64 * y, img[y], sizeof img[y]));
    CK(cuTexRefSetAddress2D(tex2, &ad, dpitch, 64));
    fetch(f2, 0, got);
    check_fetch("pitch2D", img, 0, got);
    CODE("SetAddress2D_misaligned", cuTexRefSetAddress2D(tex2, &ad, dpitch + 16, 64));
    CODE("SetAddress2D_bad_pitch", cuTexRefSetAddress2D(tex2, &ad, dpitch, 40));

    /* a surface reference: each thread stores its texel */
    CUarray as;
    CUDA_ARRAY3D_DESCRIPTOR ad3 = {W, H, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1, CUDA_ARRAY3D_SURFACE_LDST};
    CK(cuArray3DCreate(&as, &ad3));
    CK(cuSurfRefSetArray(surf, as, 0));
    CK(cuSurfRefGetArray(&ga, surf));
    unsigned base = rnd() % 100000, sgot[H][W];
    void *args3[] = {&base};
    CK(cuLaunchKernel(fs, 1, 1, 1, W, H, 1, 0, NULL, args3, NULL));
    CK(cuMemcpyAtoH(sgot, as, 0, sizeof sgot));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            if (sgot[y][x] != base + 1000 * y + x || ga != as) {
                printf("FAIL surface (%d, %d): %u\n", x, y, sgot[y][x]);
                failures++;
                y = H;
                break;
            }

    /* a mipmapped array bound: it, not an array, comes back */
    CUmipmappedArray mip, gmip;
    CUDA_ARRAY3D_DESCRIPTOR md = {W, H, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CK(cuMipmappedArrayCreate(&mip, &md, 2));
    CK(cuTexRefSetMipmappedArray(tex2, mip, CU_TRSA_OVERRIDE_FORMAT));
    CK(cuTexRefGetMipmappedArray(&gmip, tex2));
    if (gmip != mip) { printf("FAIL cuTexRefGetMipmappedArray\n"); failures++; }
    CODE("GetArray_of_mipmapped_binding", cuTexRefGetArray(&ga, tex2));
    CODE("SetMipmappedArray_null", cuTexRefSetMipmappedArray(tex2, NULL, CU_TRSA_OVERRIDE_FORMAT));
    CK(cuTexRefSetArray(tex2, a1, CU_TRSA_OVERRIDE_FORMAT));
    CK(cuMipmappedArrayDestroy(mip));

    /* bad input */
    float nanbc[4];
    CODE("SetFormat_bad_format", cuTexRefSetFormat(tex2, (CUarray_format)0x77, 1));
    CODE("SetFormat_3_channels", cuTexRefSetFormat(tex2, CU_AD_FORMAT_FLOAT, 3));
    CODE("SetAddressMode_dim3", cuTexRefSetAddressMode(tex2, 3, CU_TR_ADDRESS_MODE_CLAMP));
    CODE("SetFilterMode_2", cuTexRefSetFilterMode(tex2, (CUfilter_mode)2));
    CODE("SetFlags_unknown_bit", cuTexRefSetFlags(tex2, 0x100));
    CODE("SetBorderColor_null", cuTexRefSetBorderColor(tex2, NULL));
    CODE("GetBorderColor_null", cuTexRefGetBorderColor(NULL, tex2));
    CODE("SetArray_null_array", cuTexRefSetArray(tex2, NULL, CU_TRSA_OVERRIDE_FORMAT));
    CODE("SurfSetArray_flags1", cuSurfRefSetArray(surf, as, 1));
    (void)nanbc;

    /* a reference of no module */
    CUtexref made;
    CK(cuTexRefCreate(&made));
    CK(cuTexRefSetFilterMode(made, CU_TR_FILTER_MODE_LINEAR));
    CK(cuTexRefSetArray(made, a1, CU_TRSA_OVERRIDE_FORMAT));
    CK(cuTexRefGetArray(&ga, made));
    CK(cuTexRefGetFilterMode(&fm, made));
    if (ga != a1 || fm != CU_TR_FILTER_MODE_LINEAR) { printf("FAIL created reference\n"); failures++; }
    CODE("ParamSetTexRef_created", cuParamSetTexRef(f2, CU_PARAM_TR_DEFAULT, made));
    CODE("Destroy_module_ref", cuTexRefDestroy(tex2));
    CK(cuTexRefDestroy(made));
    CODE("Destroy_null", cuTexRefDestroy(NULL));

    /* an unloaded module's references are gone */
    CK(cuModuleUnload(mod));
    CODE("GetFilterMode_after_unload", cuTexRefGetFilterMode(&fm, tex2));
    CODE("SetArray_after_unload", cuTexRefSetArray(tex2, a1, CU_TRSA_OVERRIDE_FORMAT));
    CODE("SurfGetArray_after_unload", cuSurfRefGetArray(&ga, surf));
    printf("ok %d\n", failures);
    return failures != 0;
}
