/* What a GPU's texture units answer: textures of several formats, filter, read and address modes sampled
 * at chosen coordinates (texel centres, 1/256 and 1/512 steps, edges, out of range), printed as JSON of
 * raw 32-bit results. Run once on NVIDIA hardware (tests/data/nvidia_texture_answers.json), then through
 * the shim with the same binary: tests/apps/test_texture_probe.py compares the two bit for bit.
 * Build: nvcc -O1 -o probe nvidia_texture_probe.cu */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static uint32_t seed = 12345;
static uint32_t lcg(void) { seed = seed * 1664525u + 1013904223u; return seed >> 8; }

enum { F_U8, F_S8, F_U16, F_S16, F_U32, F_S32, F_F32, F_F16 };
static const char *FNAME[] = {"u8", "s8", "u16", "s16", "u32", "s32", "f32", "f16"};
static const int FSIZE[] = {1, 1, 2, 2, 4, 4, 4, 2};
static const char *ANAME[] = {"wrap", "clamp", "mirror", "border"};

static cudaChannelFormatDesc chan(int f, int nch) {
    int b = FSIZE[f] * 8;
    cudaChannelFormatKind k = (f == F_F32 || f == F_F16) ? cudaChannelFormatKindFloat
        : (f == F_S8 || f == F_S16 || f == F_S32) ? cudaChannelFormatKindSigned : cudaChannelFormatKindUnsigned;
    return cudaCreateChannelDesc(b, nch > 1 ? b : 0, nch > 2 ? b : 0, nch > 3 ? b : 0, k);
}

static void fill(uint8_t *p, int f, size_t n) {     /* n elements (channels) */
    for (size_t i = 0; i < n; i++) {
        uint32_t r = lcg();
        switch (f) {
        case F_U8: case F_S8: p[i] = (uint8_t)r; break;
        case F_U16: case F_S16: ((uint16_t *)p)[i] = (uint16_t)r; break;
        case F_U32: case F_S32: ((uint32_t *)p)[i] = r * 2654435761u; break;
        case F_F32: ((float *)p)[i] = ((int)(r % 20001) - 10000) / 37.0f; break;
        case F_F16: { __half h = __float2half(((int)(r % 2001) - 1000) / 13.0f);
                      memcpy((uint16_t *)p + i, &h, 2); break; }
        }
    }
}

/* kind: 0 = 1D, 1 = 2D, 2 = 3D, 3 = 2D layered, 4 = cubemap, 5 = 1D fetch (integer coordinate),
 * 6..9 = 2D gather of component 0..3, 10 = 1D layered */
template <typename T>
__global__ void sample(cudaTextureObject_t t, int kind, const float *c, int n, uint4 *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = c[4 * i], y = c[4 * i + 1], z = c[4 * i + 2];
    int layer = (int)c[4 * i + 3];
    T v;
    switch (kind) {
    case 0: v = tex1D<T>(t, x); break;
    case 1: v = tex2D<T>(t, x, y); break;
    case 2: v = tex3D<T>(t, x, y, z); break;
    case 3: v = tex2DLayered<T>(t, x, y, layer); break;
    case 4: v = texCubemap<T>(t, x, y, z); break;
    case 5: v = tex1Dfetch<T>(t, (int)x); break;
    case 6: v = tex2Dgather<T>(t, x, y, 0); break;
    case 7: v = tex2Dgather<T>(t, x, y, 1); break;
    case 8: v = tex2Dgather<T>(t, x, y, 2); break;
    case 9: v = tex2Dgather<T>(t, x, y, 3); break;
    default: v = tex1DLayered<T>(t, x, layer); break;
    }
    uint4 u;
    memcpy(&u, &v, 16);
    out[i] = u;
}

static const char *KNAME[] = {"1d", "2d", "3d", "a2d", "cube", "fetch", "gather0", "gather1", "gather2",
                              "gather3", "a1d"};
static int first = 1;

/* One case: a texture over `res`, sampled at coordinates made from unnormalised ones (w,h,d scale them when
 * normalised), its answers printed. ret: 0 float4, 1 int4, 2 uint4. */
static void run_case(const cudaResourceDesc *res, int kind, int f, int nch, int w, int h, int d, int layers,
                     const uint8_t *data, size_t nbytes, int filter, int readnorm, int addr, int norm, int ret,
                     const float *uc, int n) {
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    for (int i = 0; i < 3; i++) td.addressMode[i] = (cudaTextureAddressMode)addr;
    td.filterMode = filter ? cudaFilterModeLinear : cudaFilterModePoint;
    td.readMode = readnorm ? cudaReadModeNormalizedFloat : cudaReadModeElementType;
    td.normalizedCoords = norm;
    td.borderColor[0] = 0.25f; td.borderColor[1] = 0.5f; td.borderColor[2] = 0.75f; td.borderColor[3] = 2.0f;
    cudaTextureObject_t t;
    cudaError_t e = cudaCreateTextureObject(&t, res, &td, NULL);
    printf("%s\n  {\"kind\": \"%s\", \"format\": \"%s\", \"channels\": %d, \"width\": %d, \"height\": %d, "
           "\"depth\": %d, \"layers\": %d, \"filter\": \"%s\", \"read\": \"%s\", \"address\": \"%s\", "
           "\"normalized\": %d, \"border\": [0.25, 0.5, 0.75, 2.0], \"ret\": \"%s\", \"create\": %d",
           first ? "" : ",", KNAME[kind], FNAME[f], nch, w, h, d, layers, filter ? "linear" : "point",
           readnorm ? "normalized" : "element", ANAME[addr], norm, ret == 0 ? "f32" : ret == 1 ? "s32" : "u32",
           (int)e);
    first = 0;
    printf(",\n   \"data\": \"");
    for (size_t i = 0; i < nbytes; i++) printf("%02x", data[i]);
    printf("\"");
    if (e != cudaSuccess) { cudaGetLastError(); printf("}"); return; }
    float *hc = (float *)malloc(16 * n);
    for (int i = 0; i < n; i++) {
        hc[4 * i] = uc[4 * i]; hc[4 * i + 1] = uc[4 * i + 1]; hc[4 * i + 2] = uc[4 * i + 2];
        hc[4 * i + 3] = uc[4 * i + 3];
        if (norm && kind != 4) {
            hc[4 * i] /= w; hc[4 * i + 1] /= (h ? h : 1); hc[4 * i + 2] /= (d ? d : 1);
        }
    }
    float *dc; uint4 *dout;
    CK(cudaMalloc(&dc, 16 * n));
    CK(cudaMalloc(&dout, 16 * n));
    CK(cudaMemcpy(dc, hc, 16 * n, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xA5, 16 * n));
    if (ret == 0) sample<float4><<<(n + 63) / 64, 64>>>(t, kind, dc, n, dout);
    else if (ret == 1) sample<int4><<<(n + 63) / 64, 64>>>(t, kind, dc, n, dout);
    else sample<uint4><<<(n + 63) / 64, 64>>>(t, kind, dc, n, dout);
    CK(cudaGetLastError());
    uint4 *ho = (uint4 *)malloc(16 * n);
    CK(cudaMemcpy(ho, dout, 16 * n, cudaMemcpyDeviceToHost));
    printf(",\n   \"coords\": [");
    for (int i = 0; i < n; i++) {
        uint32_t b[4];
        memcpy(b, hc + 4 * i, 16);
        printf("%s[\"%08x\", \"%08x\", \"%08x\", \"%08x\"]", i ? ", " : "", b[0], b[1], b[2], b[3]);
    }
    printf("],\n   \"results\": [");
    for (int i = 0; i < n; i++)
        printf("%s[\"%08x\", \"%08x\", \"%08x\", \"%08x\"]", i ? ", " : "", ho[i].x, ho[i].y, ho[i].z, ho[i].w);
    printf("]}");
    CK(cudaDestroyTextureObject(t));
    CK(cudaFree(dc)); CK(cudaFree(dout));
    free(hc); free(ho);
}

static const float XS[] = {-2.3f, -0.5f, -0.1f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.37f, 2.5f, 3.001f, 3.999f,
                           4.5078125f, 4.50390625f, 4.501953125f, 4.998046875f, 5.2f, 6.77f, 7.5f, 7.9f, 8.0f,
                           8.6f, 9.3f, 13.1f, 17.0f, -7.75f, 1.5f + 1.0f / 1024, 2.5f - 1.0f / 1024};
#define NX ((int)(sizeof XS / sizeof XS[0]))

static float *coords2(int w, int h, int d, int layers, int *n) {
    int m = NX * 2;
    float *c = (float *)malloc(16 * m);
    for (int i = 0; i < m; i++) {
        float x = XS[i % NX], y = XS[(i * 7 + 3) % NX] * h / 8.0f, z = XS[(i * 5 + 1) % NX] * (d ? d : 1) / 8.0f;
        if (i >= NX) { float t = x; x = y * w / 8.0f; y = t * h / 8.0f; }
        c[4 * i] = x * w / 8.0f; c[4 * i + 1] = y; c[4 * i + 2] = z;
        c[4 * i + 3] = (float)((i % (layers + 2)) - 1);     /* includes layer -1 and layer `layers` */
    }
    *n = m;
    return c;
}

static int filter_ok(int f, int readnorm) { return f == F_F32 || f == F_F16 || (readnorm && FSIZE[f] <= 2); }

int main(void) {
    int dev = 0;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    int drv = 0;
    cudaDriverGetVersion(&drv);
    printf("{\"about\": \"scripts/nvidia_texture_probe.cu on real hardware\", \"device\": \"%s\", "
           "\"cc\": \"%d.%d\", \"driver_version\": %d,\n \"cases\": [", prop.name, prop.major, prop.minor, drv);
    const int W = 8, H = 6;
    int n;
    float *c = coords2(W, H, 0, 1, &n);
    /* 2D arrays: every format and channel count, every mode */
    static const int FORMATS[][2] = {{F_U8, 1}, {F_S8, 1}, {F_U16, 1}, {F_S16, 1}, {F_U32, 1}, {F_S32, 1},
                                     {F_F32, 1}, {F_F16, 1}, {F_U8, 4}, {F_S16, 2}, {F_F32, 4}, {F_F16, 2}};
    for (size_t fi = 0; fi < sizeof FORMATS / sizeof FORMATS[0]; fi++) {
        int f = FORMATS[fi][0], nch = FORMATS[fi][1];
        size_t nbytes = (size_t)W * H * nch * FSIZE[f];
        uint8_t *data = (uint8_t *)malloc(nbytes);
        fill(data, f, (size_t)W * H * nch);
        cudaChannelFormatDesc cd = chan(f, nch);
        cudaArray_t arr;
        CK(cudaMallocArray(&arr, &cd, W, H));
        CK(cudaMemcpy2DToArray(arr, 0, 0, data, W * nch * FSIZE[f], W * nch * FSIZE[f], H, cudaMemcpyHostToDevice));
        cudaResourceDesc res;
        memset(&res, 0, sizeof res);
        res.resType = cudaResourceTypeArray;
        res.res.array.array = arr;
        for (int readnorm = 0; readnorm < 2; readnorm++) {
            if (readnorm && (f == F_F32 || f == F_F16 || FSIZE[f] == 4)) continue;
            int ret = readnorm || f == F_F32 || f == F_F16 ? 0 : (f == F_S8 || f == F_S16 || f == F_S32) ? 1 : 2;
            for (int filter = 0; filter < 2; filter++) {
                if (filter && !filter_ok(f, readnorm)) continue;
                for (int norm = 0; norm < 2; norm++)
                    for (int addr = 0; addr < 4; addr++) {
                        if (!norm && (addr == 0 || addr == 2)) continue;
                        /* the full mode matrix for the 1-channel u8/f32 textures, clamp/border otherwise */
                        if (norm && !(nch == 1 && (f == F_U8 || f == F_F32)) && (addr == 0 || addr == 2)) continue;
                        run_case(&res, 1, f, nch, W, H, 0, 0, data, nbytes, filter, readnorm, addr, norm, ret, c, n);
                    }
            }
        }
        /* gathers: every component */
        if (filter_ok(f, 1) && (nch == 1 || nch == 4 || nch == 2)) {
            int rn = !(f == F_F32 || f == F_F16);
            for (int comp = 0; comp < 4; comp++)
                run_case(&res, 6 + comp, f, nch, W, H, 0, 0, data, nbytes, 0, rn, 1, 0, 0, c, n);
        }
        CK(cudaFreeArray(arr));
        free(data);
    }
    free(c);
    /* 1D array, 3D array, 2D layered, 1D layered, cubemap, linear and pitch2D memory */
    {
        const int D = 4, L = 3, S = 4;
        struct { int kind, f, nch, w, h, d, layers, flags; } shapes[] = {
            {0, F_F32, 1, W, 0, 0, 0, 0}, {0, F_U8, 1, W, 0, 0, 0, 0},
            {2, F_F32, 1, W, H, D, 0, 0}, {2, F_U16, 2, W, H, D, 0, 0},
            {3, F_F32, 1, W, H, 0, L, cudaArrayLayered}, {3, F_U8, 4, W, H, 0, L, cudaArrayLayered},
            {10, F_F32, 2, W, 0, 0, L, cudaArrayLayered},
            {4, F_F32, 1, S, S, 0, 6, cudaArrayCubemap}, {4, F_U8, 1, S, S, 0, 6, cudaArrayCubemap},
        };
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int kind = shapes[si].kind, f = shapes[si].f, nch = shapes[si].nch, w = shapes[si].w;
            int h = shapes[si].h, d = shapes[si].d, layers = shapes[si].layers;
            int depth = kind == 2 ? d : layers;
            size_t elems = (size_t)w * (h ? h : 1) * (depth ? depth : 1) * nch;
            size_t nbytes = elems * FSIZE[f];
            uint8_t *data = (uint8_t *)malloc(nbytes);
            fill(data, f, elems);
            cudaChannelFormatDesc cd = chan(f, nch);
            cudaArray_t arr;
            CK(cudaMalloc3DArray(&arr, &cd, make_cudaExtent(w, h, depth), shapes[si].flags));
            cudaMemcpy3DParms p;
            memset(&p, 0, sizeof p);
            p.srcPtr = make_cudaPitchedPtr(data, (size_t)w * nch * FSIZE[f], w, h ? h : 1);
            p.dstArray = arr;
            p.extent = make_cudaExtent(w, h ? h : 1, depth ? depth : 1);
            p.kind = cudaMemcpyHostToDevice;
            CK(cudaMemcpy3D(&p));
            cudaResourceDesc res;
            memset(&res, 0, sizeof res);
            res.resType = cudaResourceTypeArray;
            res.res.array.array = arr;
            float *cc;
            int m;
            if (kind == 4) {
                static const float DIRS[][3] = {{1, 0.2f, -0.3f}, {-1, 0.5f, 0.5f}, {0.1f, 1, -0.9f},
                    {0.3f, -1, 0.25f}, {-0.6f, 0.6f, 1}, {0.7f, -0.1f, -1}, {2, 1.999f, 0.5f}, {0.5f, 0.5f, 0.5f},
                    {-3, -2.9f, 1}, {0.26f, 0.74f, -1}, {1, 1, 1}, {0.125f, -0.375f, 0.5f}, {-0.2f, -2, 0.01f},
                    {1, -0.999f, 0.001f}, {0.6f, 0.3f, 0.9f}, {-0.5f, 0.125f, 0.2f}};
                m = sizeof DIRS / sizeof DIRS[0];
                cc = (float *)malloc(16 * m);
                for (int i = 0; i < m; i++) {
                    cc[4 * i] = DIRS[i][0]; cc[4 * i + 1] = DIRS[i][1]; cc[4 * i + 2] = DIRS[i][2]; cc[4 * i + 3] = 0;
                }
            } else {
                cc = coords2(w, h, d, layers, &m);
            }
            for (int filter = 0; filter < 2; filter++) {
                int rn = f != F_F32;
                int ret = rn ? 0 : 0;
                run_case(&res, kind, f, nch, w, h, d, layers, data, nbytes, filter, rn, 1, 0, ret, cc, m);
                run_case(&res, kind, f, nch, w, h, d, layers, data, nbytes, filter, rn, 3, kind == 4 ? 0 : 1,
                         ret, cc, m);
                if (kind != 4)
                    run_case(&res, kind, f, nch, w, h, d, layers, data, nbytes, filter, rn, 0, 1, ret, cc, m);
            }
            free(cc);
            CK(cudaFreeArray(arr));
            free(data);
        }
        /* linear memory, fetched by integer index (out of range included), and pitch2D memory */
        int fi[][2] = {{F_F32, 1}, {F_U8, 4}, {F_S16, 1}};
        for (int k = 0; k < 3; k++) {
            int f = fi[k][0], nch = fi[k][1];
            size_t nbytes = (size_t)W * H * nch * FSIZE[f];
            uint8_t *data = (uint8_t *)malloc(nbytes);
            fill(data, f, (size_t)W * H * nch);
            void *dp;
            CK(cudaMalloc(&dp, nbytes));
            CK(cudaMemcpy(dp, data, nbytes, cudaMemcpyHostToDevice));
            cudaResourceDesc res;
            memset(&res, 0, sizeof res);
            res.resType = cudaResourceTypeLinear;
            res.res.linear.devPtr = dp;
            res.res.linear.desc = chan(f, nch);
            res.res.linear.sizeInBytes = nbytes;
            static const float IDX[] = {0, 1, 2, 5, 17, 47, 48, 49, 100, -1, -5, 1000};
            float cc[4 * 12];
            for (int i = 0; i < 12; i++) { cc[4 * i] = IDX[i]; cc[4 * i + 1] = cc[4 * i + 2] = cc[4 * i + 3] = 0; }
            int rn = f != F_F32;
            run_case(&res, 5, f, nch, W * H, 0, 0, 0, data, nbytes, 0, rn, 1, 0, 0, cc, 12);
            if (f == F_S16) run_case(&res, 5, f, nch, W * H, 0, 0, 0, data, nbytes, 0, 0, 1, 0, 1, cc, 12);
            CK(cudaFree(dp));
            /* pitch2D: rows of W elements at a pitch the device accepts */
            size_t pitch;
            void *pp;
            CK(cudaMallocPitch(&pp, &pitch, W * nch * FSIZE[f], H));
            CK(cudaMemcpy2D(pp, pitch, data, W * nch * FSIZE[f], W * nch * FSIZE[f], H, cudaMemcpyHostToDevice));
            memset(&res, 0, sizeof res);
            res.resType = cudaResourceTypePitch2D;
            res.res.pitch2D.devPtr = pp;
            res.res.pitch2D.desc = chan(f, nch);
            res.res.pitch2D.width = W;
            res.res.pitch2D.height = H;
            res.res.pitch2D.pitchInBytes = pitch;
            int m;
            float *c2 = coords2(W, H, 0, 1, &m);
            for (int filter = 0; filter < 2; filter++)
                run_case(&res, 1, f, nch, W, H, 0, 0, data, nbytes, filter, rn, 3, filter, 0, c2, m);
            free(c2);
            CK(cudaFree(pp));
            free(data);
        }
    }
    printf("\n ]}\n");
    return 0;
}
