/* What NVIDIA's driver answers for tensor maps, bulk tensor copies and graph memory nodes: one JSON object
 * on stdout. "encode": the CUresult of cuTensorMapEncode* / cuTensorMapReplaceAddress per case; "tma": each
 * copy's bytes (shared memory after a load, the tensor after a store) as zlib-free hex runs; "graph": the
 * CUresult (or value) per graph-memory case. Build: nvcc -arch=compute_90 -o probe nvidia_tma_probe.cu -ldl
 * (PTX for sm_90: the bulk tensor copies need it); run it against libcuda.so.1 (ZLUDA_CC=9.0 on zluda-py). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*enc_tiled_t)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
typedef CUresult (*enc_im2col_t)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                 const cuuint64_t *, const int *, const int *, cuuint32_t, cuuint32_t,
                                 const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
typedef CUresult (*fn_t)(...);
static void *lib;
static fn_t sym(const char *n) {
    fn_t f = (fn_t)dlsym(lib, n);
    if (!f) { fprintf(stderr, "no %s\n", n); exit(2); }
    return f;
}
static int first = 1;
static sigjmp_buf jb;
static void segv(int s) { (void)s; siglongjmp(jb, 1); }
#define out(name, expr) do { printf("%s\n  \"%s\": ", first ? "" : ",", name); first = 0; \
    if (sigsetjmp(jb, 1)) printf("\"crash\""); else { long long r_ = (long long)(expr); printf("%lld", r_); } } while (0)
static void section(const char *name) { printf("%s\n \"%s\": {", first == 2 ? "" : "},", name); first = 1; }

static enc_tiled_t enc_tiled;
static enc_im2col_t enc_im2col;
static CUresult (*replace_addr)(CUtensorMap *, void *);

static const unsigned ESIZE[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};

/* ------------------------------------------------------------------ encode answers */
struct Tiled {
    int dtype, rank; cuuint64_t dims[5], strides[4]; cuuint32_t box[5], es[5];
    int interleave, swizzle, l2, oob;
};

static Tiled base_tiled() {
    Tiled t = {7, 2, {64, 32, 1, 1, 1}, {256, 0, 0, 0}, {16, 8, 1, 1, 1}, {1, 1, 1, 1, 1}, 0, 0, 0, 0};
    return t;
}

static CUresult tiled(CUtensorMap *m, void *addr, Tiled t) {
    return enc_tiled(m, (CUtensorMapDataType)t.dtype, t.rank, addr, t.dims, t.strides, t.box, t.es,
                     (CUtensorMapInterleave)t.interleave, (CUtensorMapSwizzle)t.swizzle,
                     (CUtensorMapL2promotion)t.l2, (CUtensorMapFloatOOBfill)t.oob);
}

struct Im2col {
    int dtype, rank; cuuint64_t dims[5], strides[4]; int lower[3], upper[3]; unsigned channels, pixels;
    cuuint32_t es[5]; int interleave, swizzle, oob;
};

static Im2col base_im2col() {   /* NHWC, f32: C=16, W=10, H=9, N=3 */
    Im2col t = {7, 4, {16, 10, 9, 3, 1}, {64, 640, 5760, 0}, {-1, -1, 0}, {-1, -1, 0}, 16, 32,
                {1, 1, 1, 1, 1}, 0, 0, 0};
    return t;
}

static CUresult im2col(CUtensorMap *m, void *addr, Im2col t) {
    return enc_im2col(m, (CUtensorMapDataType)t.dtype, t.rank, addr, t.dims, t.strides, t.lower, t.upper,
                      t.channels, t.pixels, t.es, (CUtensorMapInterleave)t.interleave,
                      (CUtensorMapSwizzle)t.swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                      (CUtensorMapFloatOOBfill)t.oob);
}

static void encode_cases(char *dev) {
    alignas(128) static unsigned char raw[256];
    CUtensorMap *m = (CUtensorMap *)raw;
    Tiled t;
#define T(name, edit) do { t = base_tiled(); edit; out(name, tiled(m, dev, t)); } while (0)
#define TA(name, addr, edit) do { t = base_tiled(); edit; out(name, tiled(m, addr, t)); } while (0)
    T("tiled_ok", );
    out("tiled_map_null", tiled(NULL, dev, base_tiled()));
    out("tiled_map_align32", tiled((CUtensorMap *)(raw + 32), dev, base_tiled()));
    out("tiled_map_align64", tiled((CUtensorMap *)(raw + 64), dev, base_tiled()));
    T("tiled_dtype13", t.dtype = 13);
    T("tiled_dtype14", t.dtype = 14; t.dims[0] = 128; t.box[0] = 128);
    T("tiled_dtype15", t.dtype = 15; t.dims[0] = 128; t.box[0] = 128);
    T("tiled_dtype16", t.dtype = 16);
    T("tiled_rank0", t.rank = 0);
    T("tiled_rank6", t.rank = 6);
    T("tiled_rank1", t.rank = 1);
    T("tiled_rank5", t.rank = 5; t.strides[1] = 256 * 32; t.strides[2] = 256 * 32; t.strides[3] = 256 * 32);
    TA("tiled_addr_null", (void *)0, );
    TA("tiled_addr_align8", dev + 8, );
    TA("tiled_addr_align16", dev + 16, );
    {
        void *host = aligned_alloc(256, 1 << 16);
        TA("tiled_addr_host_malloc", host, );
        free(host);
    }
    T("tiled_dim0_zero", t.dims[0] = 0);
    T("tiled_dim1_zero", t.dims[1] = 0);
    T("tiled_dim_2p32", t.dims[1] = 1ull << 32);
    T("tiled_dim_2p32_plus1", t.dims[1] = (1ull << 32) + 1);
    T("tiled_stride8", t.strides[0] = 8);
    T("tiled_stride0", t.strides[0] = 0);
    T("tiled_stride16", t.strides[0] = 16);
    T("tiled_stride_2p40", t.strides[0] = 1ull << 40);
    T("tiled_stride_2p40_minus16", t.strides[0] = (1ull << 40) - 16);
    T("tiled_stride_below_row", t.strides[0] = 128);
    T("tiled_box0_zero", t.box[0] = 0);
    T("tiled_box1_zero", t.box[1] = 0);
    T("tiled_box1_257", t.box[1] = 257; t.dims[1] = 1024);
    T("tiled_box1_256", t.box[1] = 256; t.dims[1] = 1024);
    T("tiled_box0_256", t.box[0] = 256; t.dims[0] = 1024; t.strides[0] = 4096);
    T("tiled_box0_8bytes", t.box[0] = 2);
    T("tiled_box0_20bytes", t.box[0] = 5);
    T("tiled_box_beyond_dims", t.box[0] = 128; t.box[1] = 64);
    T("tiled_es0", t.es[1] = 0);
    T("tiled_es9", t.es[1] = 9);
    T("tiled_es8", t.es[1] = 8);
    T("tiled_es_dim0_2", t.es[0] = 2);
    T("tiled_es_dim0_9", t.es[0] = 9);
    T("tiled_interleave3", t.interleave = 3);
    T("tiled_interleave16_rank2", t.interleave = 1);
    T("tiled_interleave16_rank3", t.interleave = 1; t.rank = 3; t.dtype = 6; t.dims[0] = 8; t.strides[0] = 16;
      t.strides[1] = 16 * 32; t.dims[2] = 4; t.box[0] = 8; t.box[2] = 2);
    T("tiled_interleave16_box0_4", t.interleave = 1; t.rank = 3; t.dtype = 6; t.dims[0] = 8; t.strides[0] = 16;
      t.strides[1] = 16 * 32; t.dims[2] = 4; t.box[0] = 4; t.box[2] = 2);
    T("tiled_interleave16_box0_16", t.interleave = 1; t.rank = 3; t.dtype = 6; t.dims[0] = 16; t.strides[0] = 32;
      t.strides[1] = 32 * 32; t.dims[2] = 4; t.box[0] = 16; t.box[2] = 2);
    T("tiled_interleave32_swz_none", t.interleave = 2; t.rank = 3; t.dtype = 6; t.dims[0] = 16;
      t.strides[0] = 32; t.strides[1] = 32 * 32; t.dims[2] = 4; t.box[0] = 16; t.box[2] = 2);
    T("tiled_interleave32_swz32", t.interleave = 2; t.swizzle = 1; t.rank = 3; t.dtype = 6; t.dims[0] = 16;
      t.strides[0] = 32; t.strides[1] = 32 * 32; t.dims[2] = 4; t.box[0] = 16; t.box[2] = 2);
    TA("tiled_interleave32_addr16", dev + 16, t.interleave = 2; t.swizzle = 1; t.rank = 3; t.dtype = 6;
       t.dims[0] = 16; t.strides[0] = 32; t.strides[1] = 32 * 32; t.dims[2] = 4; t.box[0] = 16; t.box[2] = 2);
    T("tiled_interleave32_stride48", t.interleave = 2; t.swizzle = 1; t.rank = 3; t.dtype = 6; t.dims[0] = 16;
      t.strides[0] = 48; t.strides[1] = 48 * 32; t.dims[2] = 4; t.box[0] = 16; t.box[2] = 2);
    T("tiled_swz32_inner64", t.swizzle = 1);
    T("tiled_swz32_inner32", t.swizzle = 1; t.box[0] = 8);
    T("tiled_swz64_inner64", t.swizzle = 2);
    T("tiled_swz64_inner128", t.swizzle = 2; t.box[0] = 32);
    T("tiled_swz128_inner128", t.swizzle = 3; t.box[0] = 32);
    T("tiled_swz128_inner256", t.swizzle = 3; t.box[0] = 64);
    T("tiled_swz4", t.swizzle = 4; t.box[0] = 32);
    T("tiled_swz5", t.swizzle = 5; t.box[0] = 32);
    T("tiled_swz6", t.swizzle = 6; t.box[0] = 32);
    T("tiled_swz7", t.swizzle = 7; t.box[0] = 32);
    T("tiled_l2_3", t.l2 = 3);
    T("tiled_l2_4", t.l2 = 4);
    T("tiled_oob2", t.oob = 2);
    T("tiled_nan_u8", t.oob = 1; t.dtype = 0);
    T("tiled_nan_i32", t.oob = 1; t.dtype = 3);
    T("tiled_nan_f16", t.oob = 1; t.dtype = 6);
    T("tiled_nan_tf32", t.oob = 1; t.dtype = 11);
    t = base_tiled();
    out("tiled_globaldim_null", enc_tiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, dev, NULL, t.strides, t.box, t.es,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    out("tiled_strides_null_rank1", enc_tiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, dev, t.dims, NULL, t.box, t.es,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    out("tiled_box_null", enc_tiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, dev, t.dims, t.strides, NULL, t.es,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    out("tiled_es_null", enc_tiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, dev, t.dims, t.strides, t.box, NULL,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));

    Im2col c;
#define I(name, edit) do { c = base_im2col(); edit; out(name, im2col(m, dev, c)); } while (0)
    I("im2col_ok", );
    I("im2col_rank2", c.rank = 2);
    I("im2col_rank3", c.rank = 3; c.dims[2] = 3; c.strides[1] = 640);
    I("im2col_rank5", c.rank = 5; c.dims[3] = 2; c.dims[4] = 3; c.strides[2] = 5760; c.strides[3] = 11520);
    I("im2col_rank6", c.rank = 6);
    I("im2col_lower_m128", c.lower[0] = -128);
    I("im2col_lower_m129", c.lower[0] = -129);
    I("im2col_upper_127", c.upper[1] = 127);
    I("im2col_upper_128", c.upper[1] = 128);
    I("im2col_rank3_lower_m32768", c.rank = 3; c.dims[2] = 3; c.strides[1] = 640; c.lower[0] = -32768);
    I("im2col_rank3_lower_m32769", c.rank = 3; c.dims[2] = 3; c.strides[1] = 640; c.lower[0] = -32769);
    I("im2col_rank5_lower_m16", c.rank = 5; c.dims[3] = 2; c.dims[4] = 3; c.strides[2] = 5760;
      c.strides[3] = 11520; c.lower[2] = -16);
    I("im2col_rank5_lower_m17", c.rank = 5; c.dims[3] = 2; c.dims[4] = 3; c.strides[2] = 5760;
      c.strides[3] = 11520; c.lower[2] = -17);
    I("im2col_rank5_upper_15", c.rank = 5; c.dims[3] = 2; c.dims[4] = 3; c.strides[2] = 5760;
      c.strides[3] = 11520; c.upper[2] = 15);
    I("im2col_rank5_upper_16", c.rank = 5; c.dims[3] = 2; c.dims[4] = 3; c.strides[2] = 5760;
      c.strides[3] = 11520; c.upper[2] = 16);
    I("im2col_box_one_wide", c.lower[0] = 0; c.upper[0] = -9);
    I("im2col_box_empty", c.lower[0] = 0; c.upper[0] = -10);
    I("im2col_box_inverted", c.lower[0] = 5; c.upper[0] = -8);
    I("im2col_channels0", c.channels = 0);
    I("im2col_channels256", c.channels = 256);
    I("im2col_channels257", c.channels = 257);
    I("im2col_channels3_12bytes", c.channels = 3);
    I("im2col_pixels0", c.pixels = 0);
    I("im2col_pixels1024", c.pixels = 1024);
    I("im2col_pixels1025", c.pixels = 1025);
    I("im2col_swz32_64bytes", c.swizzle = 1);
    I("im2col_swz64_64bytes", c.swizzle = 2);
    I("im2col_es_n3", c.es[3] = 3);
    I("im2col_es_w9", c.es[1] = 9);

    t = base_tiled();
    out("replace_before", tiled(m, dev, t));
    out("replace_ok", replace_addr(m, dev + 256));
    out("replace_align8", replace_addr(m, dev + 8));
    out("replace_null_addr", replace_addr(m, NULL));
    out("replace_null_map", replace_addr(NULL, dev));
    out("replace_map_align32", replace_addr((CUtensorMap *)(raw + 32), dev));
    t.interleave = 2; t.swizzle = 1; t.rank = 3; t.dtype = 6; t.dims[0] = 16; t.strides[0] = 32;
    t.strides[1] = 32 * 32; t.dims[2] = 4; t.box[0] = 16; t.box[2] = 2;
    out("replace_before_i32", tiled(m, dev, t));
    out("replace_i32_align16", replace_addr(m, dev + 16));
    out("replace_i32_align32", replace_addr(m, dev + 32));
    {
        alignas(128) static unsigned char junk[128];
        memset(junk, 0x5A, sizeof junk);
        out("replace_garbage_map", replace_addr((CUtensorMap *)junk, dev));
    }
}

/* ------------------------------------------------------------------ bulk tensor copies */
struct Co { int c[5]; unsigned short off[3]; };

__device__ unsigned long long gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void tma_load(const __grid_constant__ CUtensorMap tm, Co co, int rank, int im2col, unsigned box_bytes,
                         unsigned smem_off, unsigned dump, unsigned char *out, int *status) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long bar;
    for (unsigned i = threadIdx.x; i < smem_off + dump; i += blockDim.x) smem[i] = 0xA5;
    unsigned dst = (unsigned)__cvta_generic_to_shared(smem + smem_off);
    unsigned mb = (unsigned)__cvta_generic_to_shared(&bar);
    unsigned long long tmp = (unsigned long long)&tm;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(mb));
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(mb), "r"(box_bytes) : "memory");
        const int *c = co.c;
        if (!im2col) {
            switch (rank) {
            case 1: asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2}], [%3];" ::"r"(dst), "l"(tmp), "r"(c[0]), "r"(mb) : "memory"); break;
            case 2: asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst), "l"(tmp), "r"(c[0]), "r"(c[1]), "r"(mb)
                                 : "memory"); break;
            case 3: asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst), "l"(tmp), "r"(c[0]), "r"(c[1]),
                                 "r"(c[2]), "r"(mb) : "memory"); break;
            case 4: asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst), "l"(tmp), "r"(c[0]), "r"(c[1]),
                                 "r"(c[2]), "r"(c[3]), "r"(mb) : "memory"); break;
            case 5: asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(dst), "l"(tmp), "r"(c[0]), "r"(c[1]),
                                 "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(mb) : "memory"); break;
            }
        } else {
            unsigned short w = co.off[0], h = co.off[1], d = co.off[2];
            switch (rank) {
            case 3: asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3, %4}], [%5], {%6};" ::"r"(dst), "l"(tmp), "r"(c[0]), "r"(c[1]),
                                 "r"(c[2]), "r"(mb), "h"(w) : "memory"); break;
            case 4: asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};" ::"r"(dst), "l"(tmp), "r"(c[0]),
                                 "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(mb), "h"(w), "h"(h) : "memory"); break;
            case 5: asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3, %4, %5, %6}], [%7], {%8, %9, %10};" ::"r"(dst), "l"(tmp),
                                 "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(mb), "h"(w), "h"(h), "h"(d)
                                 : "memory"); break;
            }
        }
    }
    int ok = 0;
    unsigned long long t0 = gtimer();
    while (!ok && gtimer() - t0 < 200000000ull) {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                     : "=r"(ok) : "r"(mb) : "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) *status = ok;
    for (unsigned i = threadIdx.x; i < dump; i += blockDim.x) out[i] = smem[smem_off + i];
}

__global__ void tma_store(const __grid_constant__ CUtensorMap tm, Co co, int rank, const unsigned char *in,
                          unsigned box_bytes, unsigned smem_off) {
    extern __shared__ __align__(1024) unsigned char smem[];
    for (unsigned i = threadIdx.x; i < box_bytes; i += blockDim.x) smem[smem_off + i] = in[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    unsigned src = (unsigned)__cvta_generic_to_shared(smem + smem_off);
    unsigned long long tmp = (unsigned long long)&tm;
    const int *c = co.c;
    if (threadIdx.x == 0) {
        switch (rank) {
        case 1: asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%0, {%1}], [%2];"
                             ::"l"(tmp), "r"(c[0]), "r"(src) : "memory"); break;
        case 2: asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                             ::"l"(tmp), "r"(c[0]), "r"(c[1]), "r"(src) : "memory"); break;
        case 3: asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];"
                             ::"l"(tmp), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(src) : "memory"); break;
        }
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

struct Case {
    const char *name;
    int im2col, store, dtype, rank;
    unsigned long long dims[5];
    unsigned stride_pad;        /* extra bytes per row (dimension 1's stride) */
    unsigned box[5], es[5];     /* im2col: box = {channels, pixels} */
    int lower[3], upper[3];
    int interleave, swizzle, oob;
    Co co;
    unsigned smem_off;
};

static const Case CASES[] = {
    {"tile_2d_f32_inside", 0, 0, 7, 2, {40, 20}, 0, {16, 8}, {1, 1}, {}, {}, 0, 0, 0, {{8, 4}}, 0},
    {"tile_2d_f32_negative", 0, 0, 7, 2, {40, 20}, 32, {16, 8}, {1, 1}, {}, {}, 0, 0, 0, {{-5, -3}}, 0},
    {"tile_2d_f32_far_edge", 0, 0, 7, 2, {40, 20}, 0, {16, 8}, {1, 1}, {}, {}, 0, 0, 0, {{30, 17}}, 0},
    {"tile_2d_f32_nan_fill", 0, 0, 7, 2, {40, 20}, 0, {16, 8}, {1, 1}, {}, {}, 0, 0, 1, {{-4, 15}}, 0},
    {"tile_2d_f16_nan_fill", 0, 0, 6, 2, {40, 20}, 0, {16, 8}, {1, 1}, {}, {}, 0, 0, 1, {{32, -2}}, 0},
    {"tile_2d_bf16_nan_fill", 0, 0, 9, 2, {40, 20}, 0, {16, 8}, {1, 1}, {}, {}, 0, 0, 1, {{-8, 16}}, 0},
    {"tile_2d_f64_nan_fill", 0, 0, 8, 2, {20, 10}, 0, {8, 4}, {1, 1}, {}, {}, 0, 0, 1, {{16, 8}}, 0},
    {"tile_2d_tf32_nan_fill", 0, 0, 11, 2, {20, 10}, 0, {8, 4}, {1, 1}, {}, {}, 0, 0, 1, {{16, 8}}, 0},
    {"tile_2d_f32ftz_nan_fill", 0, 0, 10, 2, {20, 10}, 0, {8, 4}, {1, 1}, {}, {}, 0, 0, 1, {{-2, -2}}, 0},
    {"tile_1d_u8", 0, 0, 0, 1, {200}, 0, {64}, {1}, {}, {}, 0, 0, 0, {{170}}, 0},
    {"tile_3d_u16_estrides", 0, 0, 1, 3, {24, 13, 7}, 16, {16, 9, 5}, {4, 2, 3}, {}, {}, 0, 0, 0, {{3, 1, 2}}, 0},
    {"tile_4d_i32_oob", 0, 0, 3, 4, {8, 6, 5, 4}, 0, {8, 4, 3, 2}, {1, 1, 1, 1}, {}, {}, 0, 0, 0, {{0, 4, -1, 3}}, 0},
    {"tile_5d_u64", 0, 0, 4, 5, {4, 3, 3, 3, 3}, 0, {4, 2, 2, 2, 2}, {1, 1, 2, 1, 1}, {}, {}, 0, 0, 0,
     {{2, 2, 1, -1, 2}}, 0},
    {"tile_2d_huge_coords", 0, 0, 7, 2, {40, 20}, 0, {16, 8}, {1, 1}, {}, {}, 0, 0, 0, {{2147483600, -2147483600}}, 0},
    {"tile_swz32", 0, 0, 7, 2, {40, 40}, 0, {8, 16}, {1, 1}, {}, {}, 0, 1, 0, {{3, 2}}, 0},
    {"tile_swz64", 0, 0, 7, 2, {40, 40}, 0, {16, 16}, {1, 1}, {}, {}, 0, 2, 0, {{5, 1}}, 0},
    {"tile_swz128", 0, 0, 7, 2, {40, 40}, 0, {32, 16}, {1, 1}, {}, {}, 0, 3, 0, {{-3, 30}}, 0},
    {"tile_swz128_inner64", 0, 0, 7, 2, {40, 40}, 0, {16, 16}, {1, 1}, {}, {}, 0, 3, 0, {{0, 0}}, 0},
    {"tile_swz128_inner32", 0, 0, 7, 2, {40, 40}, 0, {8, 16}, {1, 1}, {}, {}, 0, 3, 0, {{0, 0}}, 0},
    {"tile_swz128_off384", 0, 0, 7, 2, {40, 40}, 0, {32, 8}, {1, 1}, {}, {}, 0, 3, 0, {{1, 1}}, 384},
    {"tile_swz64_off128", 0, 0, 7, 2, {40, 40}, 0, {16, 8}, {1, 1}, {}, {}, 0, 2, 0, {{1, 1}}, 128},
    {"tile_interleave16", 0, 0, 6, 3, {8, 12, 5}, 0, {8, 6, 3}, {1, 1, 1}, {}, {}, 1, 0, 0, {{0, 9, -1}}, 0},
    {"tile_interleave32_swz32", 0, 0, 6, 3, {16, 12, 5}, 0, {16, 6, 3}, {1, 1, 1}, {}, {}, 2, 1, 0, {{0, 1, 3}}, 0},
    {"im2col_4d_basic", 1, 0, 7, 4, {16, 10, 9, 3}, 0, {8, 32}, {1, 1, 1, 1}, {-1, -1}, {-1, -1}, 0, 0, 0,
     {{4, -1, -1, 0}, {0, 0}}, 0},
    {"im2col_4d_offsets_wrap", 1, 0, 7, 4, {16, 10, 9, 3}, 0, {16, 48}, {1, 1, 1, 1}, {-1, -1}, {-1, -1}, 0, 0, 0,
     {{0, 3, 5, 1}, {2, 1}}, 0},
    {"im2col_4d_asym_corners", 1, 0, 7, 4, {8, 10, 9, 3}, 0, {8, 64}, {1, 1, 1, 1}, {-2, 0}, {1, -1}, 0, 0, 0,
     {{0, -2, 0, 0}, {0, 0}}, 0},
    {"im2col_4d_strided", 1, 0, 7, 4, {8, 10, 9, 3}, 0, {8, 40}, {1, 2, 2, 1}, {-1, -1}, {-1, -1}, 0, 0, 0,
     {{0, -1, -1, 0}, {1, 0}}, 0},
    {"im2col_3d_nwc", 1, 0, 6, 3, {16, 20, 4}, 0, {16, 30}, {1, 1, 1}, {-2}, {0}, 0, 0, 0,
     {{0, -2, 1}, {3}}, 0},
    {"im2col_5d_ndhwc", 1, 0, 7, 5, {4, 5, 4, 3, 2}, 0, {4, 40}, {1, 1, 1, 1, 1}, {-1, 0, -1}, {0, -1, 0}, 0, 0, 0,
     {{0, -1, 0, -1, 0}, {1, 1, 1}}, 0},
    {"im2col_4d_nan_fill", 1, 0, 7, 4, {8, 6, 5, 2}, 0, {8, 20}, {1, 1, 1, 1}, {-2, -2}, {1, 1}, 0, 0, 1,
     {{0, -2, -2, 0}, {0, 0}}, 0},
    {"im2col_4d_swz64", 1, 0, 7, 4, {16, 10, 9, 3}, 0, {16, 16}, {1, 1, 1, 1}, {-1, -1}, {-1, -1}, 0, 2, 0,
     {{0, 2, 3, 0}, {0, 0}}, 0},
    {"im2col_4d_strided_offgrid", 1, 0, 7, 4, {8, 10, 9, 3}, 0, {8, 24}, {1, 2, 2, 1}, {-1, -1}, {-1, -1}, 0, 0, 0,
     {{0, 0, -1, 0}, {0, 0}}, 0},
    {"im2col_4d_estride_n", 1, 0, 7, 4, {8, 4, 3, 6}, 0, {8, 40}, {1, 1, 1, 2}, {0, 0}, {0, 0}, 0, 0, 0,
     {{0, 0, 0, 1}, {0, 0}}, 0},
    {"im2col_4d_start_past_row", 1, 0, 7, 4, {8, 10, 9, 3}, 0, {8, 24}, {1, 1, 1, 1}, {-1, -1}, {-1, -1}, 0, 0, 0,
     {{0, 9, 2, 0}, {0, 0}}, 0},
    {"im2col_4d_past_last_image", 1, 0, 7, 4, {8, 10, 9, 3}, 0, {8, 32}, {1, 1, 1, 1}, {-1, -1}, {-1, -1}, 0, 0, 0,
     {{0, 5, 7, 2}, {0, 0}}, 0},
    {"tile_2d_es0_ignored", 0, 0, 7, 2, {40, 20}, 0, {16, 7}, {2, 2}, {}, {}, 0, 0, 0, {{3, 2}}, 0},
    {"store_2d_f32_partial", 0, 1, 7, 2, {40, 20}, 0, {16, 8}, {1, 1}, {}, {}, 0, 0, 0, {{30, -3}}, 0},
    {"store_3d_u16", 0, 1, 1, 3, {24, 13, 7}, 16, {16, 4, 3}, {1, 1, 1}, {}, {}, 0, 0, 0, {{0, 11, 5}}, 0},
    {"store_2d_swz64", 0, 1, 7, 2, {40, 40}, 0, {16, 8}, {1, 1}, {}, {}, 0, 2, 0, {{4, 2}}, 0},
    {"store_1d_u8_estride", 0, 1, 0, 1, {100}, 0, {32}, {1}, {}, {}, 0, 0, 0, {{80}}, 0},
};

static void hex(const unsigned char *p, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
    putchar('"');
}

static void tma_cases(CUdeviceptr scratch) {
    unsigned char *dev_tensor, *dev_out, *dev_in; int *dev_status;
    cudaMalloc(&dev_tensor, 1 << 20); cudaMalloc(&dev_out, 1 << 16); cudaMalloc(&dev_in, 1 << 16);
    cudaMalloc(&dev_status, 4);
    cudaFuncSetAttribute(tma_load, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10);
    cudaFuncSetAttribute(tma_store, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10);
    static unsigned char host[1 << 20], box[1 << 16];
    for (size_t k = 0; k < sizeof CASES / sizeof *CASES; k++) {
        const Case &cs = CASES[k];
        unsigned es = ESIZE[cs.dtype];
        cuuint64_t dims[5], strides[4];
        unsigned long long total = 1;
        unsigned row = (unsigned)(cs.dims[0] * es);
        unsigned align = cs.interleave == 2 ? 32 : 16;
        row = (row + align - 1) / align * align + cs.stride_pad;
        for (int d = 0; d < cs.rank; d++) dims[d] = cs.dims[d];
        for (int d = 0; d + 1 < cs.rank; d++) strides[d] = (d ? strides[d - 1] * cs.dims[d] : row);
        total = cs.rank > 1 ? strides[cs.rank - 2] * cs.dims[cs.rank - 1] : row;
        for (unsigned long long j = 0; j < total; j++) host[j] = (unsigned char)(j * 151 + 17 + k * 3);
        cudaMemcpy(dev_tensor, host, total, cudaMemcpyHostToDevice);
        alignas(128) CUtensorMap tm;
        CUresult rc;
        unsigned box_bytes;
        if (cs.im2col) {
            cuuint32_t est[5];
            for (int d = 0; d < cs.rank; d++) est[d] = cs.es[d];
            rc = enc_im2col(&tm, (CUtensorMapDataType)cs.dtype, cs.rank, dev_tensor, dims, strides, cs.lower,
                            cs.upper, cs.box[0], cs.box[1], est, (CUtensorMapInterleave)cs.interleave,
                            (CUtensorMapSwizzle)cs.swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                            (CUtensorMapFloatOOBfill)cs.oob);
            box_bytes = cs.box[0] * cs.box[1] * es;
        } else {
            cuuint32_t bx[5], est[5];
            box_bytes = es;
            for (int d = 0; d < cs.rank; d++) {
                bx[d] = cs.box[d]; est[d] = cs.es[d];
                unsigned e = (d == 0 && cs.interleave == 0) ? 1 : cs.es[d];
                box_bytes *= (cs.box[d] + e - 1) / e;
            }
            rc = enc_tiled(&tm, (CUtensorMapDataType)cs.dtype, cs.rank, dev_tensor, dims, strides, bx, est,
                           (CUtensorMapInterleave)cs.interleave, (CUtensorMapSwizzle)cs.swizzle,
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, (CUtensorMapFloatOOBfill)cs.oob);
        }
        printf("%s\n  \"%s\": {\"encode\": %d", first ? "" : ",", cs.name, (int)rc);
        first = 0;
        if (rc == 0) {
            int status = -1;
            cudaError_t e;
            if (!cs.store) {
                unsigned dump = box_bytes + 256;
                tma_load<<<1, 128, cs.smem_off + dump>>>(tm, cs.co, cs.rank, cs.im2col, box_bytes, cs.smem_off,
                                                           dump, dev_out, dev_status);
                e = cudaDeviceSynchronize();
                cudaMemcpy(&status, dev_status, 4, cudaMemcpyDeviceToHost);
                cudaMemcpy(box, dev_out, dump, cudaMemcpyDeviceToHost);
                printf(", \"launch\": %d, \"complete\": %d, \"box_bytes\": %u, \"smem\": ", (int)e, status, box_bytes);
                hex(box, dump);
            } else {
                for (unsigned j = 0; j < box_bytes; j++) box[j] = (unsigned char)(j * 37 + 101 + k);
                cudaMemcpy(dev_in, box, box_bytes, cudaMemcpyHostToDevice);
                tma_store<<<1, 128, cs.smem_off + box_bytes>>>(tm, cs.co, cs.rank, dev_in, box_bytes, cs.smem_off);
                e = cudaDeviceSynchronize();
                cudaMemcpy(host, dev_tensor, total, cudaMemcpyDeviceToHost);
                printf(", \"launch\": %d, \"tensor\": ", (int)e);
                hex(host, total);
            }
        }
        printf("}");
    }
    (void)scratch;
    cudaFree(dev_tensor); cudaFree(dev_out); cudaFree(dev_in); cudaFree(dev_status);
}

/* ------------------------------------------------------------------ graph memory nodes */
__global__ void fill_kernel(int *p, int n, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v + i;
}

static void alloc_params(CUDA_MEM_ALLOC_NODE_PARAMS *p, size_t bytes, int dev) {
    memset(p, 0, sizeof *p);
    p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->poolProps.location.id = dev;
    p->bytesize = bytes;
}

static void graph_cases() {
    fn_t gcreate = sym("cuGraphCreate"), gdestroy = sym("cuGraphDestroy"), galloc = sym("cuGraphAddMemAllocNode"),
         gfree = sym("cuGraphAddMemFreeNode"), ginst = sym("cuGraphInstantiateWithFlags"),
         gexecd = sym("cuGraphExecDestroy"), glaunch = sym("cuGraphLaunch"), gclone = sym("cuGraphClone"),
         gdnode = sym("cuGraphDestroyNode"), grmdep = sym("cuGraphRemoveDependencies"),
         gadddep = sym("cuGraphAddDependencies"), gchild = sym("cuGraphAddChildGraphNode"),
         gempty = sym("cuGraphAddEmptyNode"), gagp = sym("cuGraphMemAllocNodeGetParams"),
         gfgp = sym("cuGraphMemFreeNodeGetParams"), gattr = sym("cuDeviceGetGraphMemAttribute"),
         gsattr = sym("cuDeviceSetGraphMemAttribute"), gtrim = sym("cuDeviceGraphMemTrim"),
         mfree = sym("cuMemFree_v2"), malloc_ = sym("cuMemAlloc_v2"), ssync = sym("cuStreamSynchronize"),
         mfreeasync = sym("cuMemFreeAsync"), ntype = sym("cuGraphNodeGetType"), gnodes = sym("cuGraphGetNodes"),
         childget = sym("cuGraphChildGraphNodeGetGraph"), memcpyhd = sym("cuMemcpyHtoD_v2"),
         memcpydh = sym("cuMemcpyDtoH_v2");
    CUgraph g, g2, cl; CUgraphNode a, b, f, f2, e; CUgraphExec x, x2; CUDA_MEM_ALLOC_NODE_PARAMS p;
    CUstream s = 0; cuuint64_t v; CUdeviceptr plain, da, db;
    int dev = 0;
    cudaStreamCreateWithFlags((cudaStream_t *)&s, cudaStreamNonBlocking);

    gcreate(&g, 0);
    alloc_params(&p, 1000, dev);
    out("alloc_ok", galloc(&a, g, NULL, 0, &p));
    out("alloc_dptr_mod_256", p.dptr % 256);
    out("alloc_params_null", galloc(&b, g, NULL, 0, NULL));
    alloc_params(&p, 0, dev); out("alloc_size0", galloc(&b, g, NULL, 0, &p));
    alloc_params(&p, 64, dev); p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    out("alloc_type_invalid", galloc(&b, g, NULL, 0, &p));
    alloc_params(&p, 64, dev); p.poolProps.location.type = CU_MEM_LOCATION_TYPE_HOST;
    out("alloc_location_host", galloc(&b, g, NULL, 0, &p));
    alloc_params(&p, 64, 7); out("alloc_device7", galloc(&b, g, NULL, 0, &p));
    alloc_params(&p, 64, dev); p.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    out("alloc_handle_fd", galloc(&b, g, NULL, 0, &p));
    alloc_params(&p, 64, dev); p.accessDescCount = 1; p.accessDescs = NULL;
    out("alloc_access_null", galloc(&b, g, NULL, 0, &p));
    {
        CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        alloc_params(&p, 64, dev); p.accessDescCount = 1; p.accessDescs = &ad;
        out("alloc_access_rw_self", galloc(&b, g, NULL, 0, &p));
        CUmemAccessDesc ad2 = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READ};
        alloc_params(&p, 64, dev); p.accessDescCount = 1; p.accessDescs = &ad2;
        out("alloc_access_ro_self", galloc(&b, g, NULL, 0, &p));
        alloc_params(&p, 64, dev); p.accessDescCount = 2; p.accessDescs = &ad;
        out("alloc_access_count2", galloc(&b, g, NULL, 0, &p));
    }
    gdestroy(g);

    /* free-node rules */
    gcreate(&g, 0);
    alloc_params(&p, 4096, dev); galloc(&a, g, NULL, 0, &p); da = p.dptr;
    malloc_(&plain, 4096);
    out("free_plain_alloc", gfree(&f, g, &a, 1, plain));
    out("free_inside", gfree(&f, g, &a, 1, da + 16));
    out("free_zero", gfree(&f, g, &a, 1, (CUdeviceptr)0));
    out("free_unordered", gfree(&f, g, NULL, 0, da));
    out("free_ok", gfree(&f, g, &a, 1, da));
    out("free_twice", gfree(&f2, g, &f, 1, da));
    gcreate(&g2, 0);
    out("free_in_other_graph_of_freed", gfree(&f2, g2, NULL, 0, da));
    gdestroy(g2);
    {
        CUdeviceptr d2 = 0;
        out("free_node_get_params", gfgp(f, &d2));
        out("free_node_get_params_same", d2 == da);
        out("free_node_get_params_on_alloc", gfgp(a, &d2));
        CUDA_MEM_ALLOC_NODE_PARAMS q; memset(&q, 0, sizeof q);
        out("alloc_node_get_params", gagp(a, &q));
        out("alloc_node_get_params_size", q.bytesize);
        out("alloc_node_get_params_dptr_same", q.dptr == da);
        out("alloc_node_get_params_on_free", gagp(f, &q));
        CUgraphNodeType ty;
        ntype(a, &ty); out("alloc_node_type", ty);
        ntype(f, &ty); out("free_node_type", ty);
    }
    /* restrictions of a graph holding memory nodes */
    out("clone_with_mem_nodes", gclone(&cl, g));
    gempty(&e, g, &f, 1);
    out("remove_dependency", grmdep(g, &f, &e, 1));
    out("add_dependency", gadddep(g, &a, &e, 1));
    out("destroy_empty_node", gdnode(e));
    gcreate(&g2, 0);
    CUgraphNode child;
    out("child_with_mem_nodes", gchild(&child, g2, NULL, 0, g));
    gdestroy(g2);
    {
        CUgraph empty, inner; CUgraphNode cn, an;
        gcreate(&g2, 0); gcreate(&empty, 0);
        gchild(&cn, g2, NULL, 0, empty);
        childget(cn, &inner);
        alloc_params(&p, 64, dev);
        out("alloc_into_child_graph", galloc(&an, inner, NULL, 0, &p));
        gdestroy(empty); gdestroy(g2);
    }
    out("instantiate_first", ginst(&x, g, 0));
    out("instantiate_second", ginst(&x2, g, 0));
    out("launch_freed_in_graph", glaunch(x, s));
    out("launch_freed_in_graph_again", glaunch(x, s));
    ssync(s);
    out("memfree_graph_alloc_freed_in_graph", mfree(da));
    gexecd(x);
    out("instantiate_after_exec_destroy", ginst(&x, g, 0));
    gexecd(x);
    gdestroy(g);
    mfree(plain);

    /* virtual address reuse: the second allocation depends on the first's free */
    gcreate(&g, 0);
    alloc_params(&p, 1 << 20, dev); galloc(&a, g, NULL, 0, &p); da = p.dptr;
    gfree(&f, g, &a, 1, da);
    galloc(&b, g, &f, 1, &p); db = p.dptr;
    out("va_reused_after_free", da == db);
    CUgraphNode c2; CUDA_MEM_ALLOC_NODE_PARAMS p2; alloc_params(&p2, 1 << 20, dev);
    galloc(&c2, g, NULL, 0, &p2);
    out("va_distinct_unordered", p2.dptr != da && p2.dptr != db);
    gdestroy(g);

    /* an allocation not freed in its graph */
    gcreate(&g, 0);
    alloc_params(&p, 1 << 20, dev); galloc(&a, g, NULL, 0, &p); da = p.dptr;
    ginst(&x, g, 0);
    out("unfreed_launch1", glaunch(x, s));
    out("unfreed_launch2", glaunch(x, s));
    ssync(s);
    {
        int v1 = 12345, v2 = 0;
        out("unfreed_memcpy_to", memcpyhd(da, &v1, 4));
        out("unfreed_memcpy_from", memcpydh(&v2, da, 4));
        out("unfreed_value", v2);
    }
    gcreate(&g2, 0);
    out("free_unfreed_in_other_graph", gfree(&f2, g2, NULL, 0, da));
    out("free_unfreed_in_owner_after_other", gfree(&f, g, &a, 1, da));
    ginst(&x2, g2, 0);
    out("other_graph_frees", glaunch(x2, s));
    out("unfreed_launch_after_free", glaunch(x, s));
    ssync(s);
    out("memfree_after_launch", mfree(da));
    out("unfreed_launch_after_memfree", glaunch(x, s));
    ssync(s);
    out("memfreeasync_unfreed", mfreeasync(da, s));
    out("memfreeasync_twice", mfreeasync(da, s));
    ssync(s);
    gexecd(x2); gdestroy(g2);
    gexecd(x);
    gdestroy(g);

    gcreate(&g, 0);
    alloc_params(&p, 1 << 20, dev); galloc(&a, g, NULL, 0, &p); da = p.dptr;
    out("autofree_instantiate", ginst(&x, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    out("autofree_launch1", glaunch(x, s));
    out("autofree_launch2", glaunch(x, s));
    ssync(s);
    out("autofree_memfree", mfree(da));
    gexecd(x);
    gdestroy(g);

    /* attributes and trim */
    out("attr_used_current", gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v));
    out("attr_reserved_current", gattr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v));
    out("attr_used_high", gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v));
    out("attr_bad_attr", gattr(dev, (CUgraphMem_attribute)4, &v));
    out("attr_bad_device", gattr(7, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v));
    out("attr_null_value", gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, NULL));
    v = 0; out("set_used_high_0", gsattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v));
    v = 0; out("set_reserved_high_0", gsattr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &v));
    v = 5; out("set_used_high_5", gsattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v));
    v = 0; out("set_used_current", gsattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v));
    v = 0; out("set_bad_device", gsattr(7, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v));
    out("set_null_value", gsattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, NULL));
    out("trim_ok", gtrim(dev));
    out("trim_bad_device", gtrim(7));

    /* footprints: a 64 MiB allocation, freed in its graph, launched and trimmed */
    gtrim(dev);
    gcreate(&g, 0);
    alloc_params(&p, 64 << 20, dev); galloc(&a, g, NULL, 0, &p); da = p.dptr;
    gfree(&f, g, &a, 1, da);
    ginst(&x, g, 0);
    gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v); out("fp_after_instantiate_used", v);
    glaunch(x, s); ssync(s);
    gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v); out("fp_after_launch_used", v);
    gattr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v); out("fp_after_launch_reserved", v);
    gtrim(dev);
    gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v); out("fp_trim_with_exec_used", v);
    gexecd(x);
    gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v); out("fp_exec_destroyed_used", v);
    gattr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v); out("fp_exec_destroyed_reserved", v);
    gtrim(dev);
    gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v); out("fp_trimmed_used", v);
    gattr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v); out("fp_trimmed_reserved", v);
    gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v); out("fp_used_high", v);
    gdestroy(g);
    /* a small allocation: the granularity the footprint is counted in */
    gcreate(&g, 0);
    alloc_params(&p, 1000, dev); galloc(&a, g, NULL, 0, &p);
    gfree(&f, g, &a, 1, p.dptr);
    ginst(&x, g, 0); glaunch(x, s); ssync(s);
    gattr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v); out("fp_small_used", v);
    gexecd(x); gdestroy(g); gtrim(dev);

    /* stream capture */
    {
        CUgraph cg; void *d1 = 0; int *dplain = 0;
        cudaMalloc(&dplain, 64);
        cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeGlobal);
        out("capture_malloc_async", cudaMallocAsync(&d1, 4096, (cudaStream_t)s));
        fill_kernel<<<4, 256, 0, (cudaStream_t)s>>>((int *)d1, 1024, 7);
        out("capture_free_async", cudaFreeAsync(d1, (cudaStream_t)s));
        out("capture_end", cudaStreamEndCapture((cudaStream_t)s, (cudaGraph_t *)&cg));
        size_t n = 8; CUgraphNode nodes[8]; CUgraphNodeType ty;
        gnodes(cg, nodes, &n);
        out("capture_nodes", n);
        for (size_t i = 0; i < n && i < 3; i++) {
            char nm[32]; snprintf(nm, sizeof nm, "capture_node%zu_type", i);
            ntype(nodes[i], &ty); out(nm, ty);
        }
        cudaGraphDestroy((cudaGraph_t)cg);
        cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeGlobal);
        out("capture_free_plain", cudaFreeAsync(dplain, (cudaStream_t)s));
        cudaStreamCaptureStatus st;
        cudaStreamIsCapturing((cudaStream_t)s, &st);
        out("capture_status_after_free_plain", st);
        out("capture_end_after_free_plain", cudaStreamEndCapture((cudaStream_t)s, (cudaGraph_t *)&cg));
        cudaGetLastError();
        cudaFree(dplain);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGSEGV, segv);
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    enc_tiled = (enc_tiled_t)sym("cuTensorMapEncodeTiled");
    enc_im2col = (enc_im2col_t)sym("cuTensorMapEncodeIm2col");
    replace_addr = (CUresult(*)(CUtensorMap *, void *))sym("cuTensorMapReplaceAddress");
    printf("{\n \"about\": \"scripts/nvidia_tma_probe.cu against libcuda.so.1\",");
    first = 2;
    section("before_context");
    {
        alignas(128) static unsigned char raw[128];
        Tiled t = base_tiled();
        out("encode_before_init", tiled((CUtensorMap *)raw, (void *)0x10000, t));
        sym("cuInit")(0);
        out("encode_without_context", tiled((CUtensorMap *)raw, (void *)0x10000, t));
    }
    cudaFree(0);
    char *dev = 0;
    cudaMalloc(&dev, 1 << 20);
    section("encode");
    encode_cases(dev);
    section("graph");
    graph_cases();
    section("tma");              /* last: a faulting copy would leave the context unusable */
    tma_cases(0);
    printf("}\n}\n");
    return 0;
}
