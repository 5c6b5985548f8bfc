/* What NVIDIA's driver answers for bad CUDA-array, texture- and surface-object calls: one JSON line per
 * case (name and CUresult). Build: gcc -o errs nvidia_array_errors.c -ldl; run against libcuda.so.1. */
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fn_t)();
static void *lib;
static fn_t sym(const char *n) { fn_t f = (fn_t)dlsym(lib, n); if (!f) { fprintf(stderr, "no %s\n", n); exit(2); } return f; }
static int first = 1;
static sigjmp_buf jb;
static void segv(int s) { (void)s; siglongjmp(jb, 1); }
/* A case whose call crashes NVIDIA's driver (it reads through a NULL it was given) is answered "crash". */
#define out(name, expr) do { printf("%s\n  \"%s\": ", first ? "" : ",", name); first = 0; \
    if (sigsetjmp(jb, 1)) printf("\"crash\""); else { int r_ = (expr); printf("%d", r_); } } while (0)

typedef struct { size_t w, h; int fmt; unsigned nch; } AD;           /* CUDA_ARRAY_DESCRIPTOR */
typedef struct { size_t w, h, d; int fmt; unsigned nch, flags; } AD3;  /* CUDA_ARRAY3D_DESCRIPTOR */

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGSEGV, segv);
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    fn_t init = sym("cuInit"), devget = sym("cuDeviceGet"), ctxc = sym("cuDevicePrimaryCtxRetain"),
         setc = sym("cuCtxSetCurrent"), ac = sym("cuArrayCreate_v2"), a3 = sym("cuArray3DCreate_v2"),
         ad = sym("cuArrayDestroy"), agd = sym("cuArrayGetDescriptor_v2"), a3gd = sym("cuArray3DGetDescriptor_v2"),
         tc = sym("cuTexObjectCreate"), tdst = sym("cuTexObjectDestroy"), sc = sym("cuSurfObjectCreate"),
         sd = sym("cuSurfObjectDestroy"), trd = sym("cuTexObjectGetResourceDesc");
    int dev, r; void *ctx;
    out("cuArrayCreate_before_init", ac(&(void *){0}, &(AD){8, 8, 0x01, 1}));
    init(0); devget(&dev, 0); ctxc(&ctx, dev); setc(ctx);
    void *arr = 0;
    out("cuArrayCreate_null_handle", ac(NULL, &(AD){8, 8, 0x01, 1}));
    out("cuArrayCreate_null_desc", ac(&arr, NULL));
    out("cuArrayCreate_width0", ac(&arr, &(AD){0, 8, 0x01, 1}));
    r = -1; out("cuArrayCreate_height0", r = ac(&arr, &(AD){8, 0, 0x01, 1})); if (!r) ad(arr);
    out("cuArrayCreate_bad_format", ac(&arr, &(AD){8, 8, 0x77, 1}));
    out("cuArrayCreate_3_channels", ac(&arr, &(AD){8, 8, 0x01, 3}));
    out("cuArrayCreate_0_channels", ac(&arr, &(AD){8, 8, 0x01, 0}));
    out("cuArrayCreate_huge_width", ac(&arr, &(AD){1u << 30, 1, 0x01, 1}));
    out("cuArray3DCreate_bad_flags", a3(&arr, &(AD3){8, 8, 0, 0x01, 1, 0x80000}));
    out("cuArray3DCreate_cubemap_not_square", a3(&arr, &(AD3){8, 4, 6, 0x01, 1, 0x04}));
    out("cuArray3DCreate_cubemap_depth5", a3(&arr, &(AD3){8, 8, 5, 0x01, 1, 0x04}));
    r = -1; out("cuArray3DCreate_layered_depth0", r = a3(&arr, &(AD3){8, 8, 0, 0x01, 1, 0x01})); if (!r) ad(arr);
    out("cuArray3DCreate_w0_h8", a3(&arr, &(AD3){0, 8, 0, 0x01, 1, 0}));
    out("cuArray3DCreate_h0_d8", a3(&arr, &(AD3){8, 0, 8, 0x01, 1, 0}));
    r = -1; out("cuArray3DCreate_ok_2d", r = a3(&arr, &(AD3){8, 8, 0, 0x01, 1, 0}));
    AD got; AD3 got3;
    memset(&got3, 0, sizeof got3);
    out("cuArray3DGetDescriptor_of_2d", a3gd(&got3, arr));
    printf(",\n  \"got3_depth_of_2d\": %zu", got3.d);
    out("cuArrayGetDescriptor_null", agd(NULL, arr));
    out("cuArrayGetDescriptor_null_array", agd(&got, NULL));
    out("cuArrayDestroy_ok", ad(arr));
    out("cuArrayDestroy_twice", ad(arr));
    out("cuArrayDestroy_null", ad(NULL));
    a3(&arr, &(AD3){8, 8, 3, 0x01, 1, 0x01});
    out("cuArrayGetDescriptor_of_layered", agd(&got, arr));
    ad(arr);
    a3(&arr, &(AD3){8, 8, 4, 0x20, 1, 0});
    out("cuArrayGetDescriptor_of_3d", agd(&got, arr));
    /* texture and surface objects */
    uint64_t tex = 0;
    unsigned char res[144], td[104];
    memset(res, 0, sizeof res); memset(td, 0, sizeof td);
    out("cuTexObjectCreate_null_out", tc(NULL, res, td, NULL));
    out("cuTexObjectCreate_null_res", tc(&tex, NULL, td, NULL));
    out("cuTexObjectCreate_array_null", tc(&tex, res, td, NULL));
    *(int *)res = 0; *(void **)(res + 8) = arr;
    out("cuTexObjectCreate_null_texdesc", tc(&tex, res, NULL, NULL));
    out("cuTexObjectCreate_ok", tc(&tex, res, td, NULL));
    out("cuTexObjectGetResourceDesc_null", trd(NULL, tex));
    out("cuTexObjectDestroy_ok", tdst(tex));
    out("cuTexObjectDestroy_zero", tdst((uint64_t)0));
    out("cuSurfObjectCreate_without_flag", sc(&tex, res));
    ad(arr);
    a3(&arr, &(AD3){8, 8, 0, 0x01, 1, 0x02});
    *(void **)(res + 8) = arr;
    r = -1; out("cuSurfObjectCreate_ok", r = sc(&tex, res));
    if (!r) out("cuSurfObjectDestroy_ok", sd(tex));
    *(int *)res = 1;
    out("cuSurfObjectCreate_linear", sc(&tex, res));
    out("cuSurfObjectDestroy_zero", sd((uint64_t)0));
    /* linear filtering of a 32-bit integer format, and tex over linear memory with size 0 */
    *(int *)res = 0;
    td[16] = 0; *(int *)(td + 12) = 1;   /* filterMode linear */
    ad(arr);
    a3(&arr, &(AD3){8, 8, 0, 0x03, 1, 0});
    *(void **)(res + 8) = arr;
    r = -1; out("cuTexObjectCreate_linear_u32", r = tc(&tex, res, td, NULL)); if (!r) tdst(tex);
    memset(res, 0, sizeof res); memset(td, 0, sizeof td);
    *(int *)res = 1;
    out("cuTexObjectCreate_linear_null_ptr", tc(&tex, res, td, NULL));
    printf("\n}\n");
    return 0;
}
