/* Texture fetches, gathers, queries and surface accesses on the CPU, answering what NVIDIA's texture
   units answer (tests/data/nvidia_texture_answers.json): filtering weights in 8 fractional bits, border
   colours quantised to the texel format, 8/16-bit integers read as normalised floats. */
#if defined(__AMDGCN__)
/* AMD GPUs (ptx/amdgpu_texture.py builds this file freestanding for them): no C library, so the math and
   memory functions are clang's builtins, which become LLVM intrinsics; long double is double there. */
#include <stdint.h>
#define memcpy __builtin_memcpy
#define memset __builtin_memset
#define floorf __builtin_floorf
#define ceilf __builtin_ceilf
#define fabsf __builtin_fabsf
#define fmaxf __builtin_fmaxf
#define fminf __builtin_fminf
#define log2f __builtin_log2f
#define fabs __builtin_fabs
#define fmax __builtin_fmax
#define fabsl __builtin_fabsl
#define floorl __builtin_floorl
#define roundl __builtin_roundl
#define ldexpl __builtin_ldexpl
#define frexpl __builtin_frexpl
#define INFINITY __builtin_inff()
static float nextafterf(float x, float toward) {      /* for finite x, as round_away uses it */
    uint32_t u;
    __builtin_memcpy(&u, &x, 4);
    if (x == 0) u = (toward > 0 ? 0u : 0x80000000u) | 1u;
    else if ((x < toward) == (x > 0)) u++;
    else u--;
    __builtin_memcpy(&x, &u, 4);
    return x;
}
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#endif
#include "texture.h"

typedef struct { float f[4]; uint32_t u[4]; } texel;   /* f: float reads; u: element (integer) reads */

static float f32_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static float half_to_float(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return f32_of(s | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);   /* m * 2^-24, exact */
        return s ? -v : v;
    }
    return f32_of(s | ((e + 112) << 23) | (m << 13));
}

/* to float, to nearest, ties away from zero */
static float round_away(long double x) {
    float f = (float)x;
    long double d = x - (long double)f;
    if (d != 0) {
        float g = nextafterf(f, d > 0 ? INFINITY : -INFINITY);
        long double e = (long double)g - x;
        if (fabsl(e) == fabsl(d) && fabsf(g) > fabsf(f)) return g;
    }
    return f;
}
/* to the nearest value with a half's 11 significant bits (ties away), as a float */
static float to_half_precision(long double x) {
    if (x == 0) return (float)x;
    int e;
    frexpl(x, &e);
    long double q = ldexpl(1.0L, e - 11);
    long double r = roundl(x / q) * q;
    return (float)r;
}

static int is_float(uint32_t fmt) { return fmt == PTX_TF_F32 || fmt == PTX_TF_F16; }
static int is_signed(uint32_t fmt) { return fmt == PTX_TF_S8 || fmt == PTX_TF_S16 || fmt == PTX_TF_S32; }
static uint32_t elem_size(uint32_t fmt) {
    switch (fmt) {
    case PTX_TF_U8: case PTX_TF_S8: return 1;
    case PTX_TF_U16: case PTX_TF_S16: case PTX_TF_F16: return 2;
    case PTX_TF_UNORM8X1: case PTX_TF_UNORM8X2: case PTX_TF_UNORM8X4:
    case PTX_TF_SNORM8X1: case PTX_TF_SNORM8X2: case PTX_TF_SNORM8X4: return 1;
    case PTX_TF_UNORM16X1: case PTX_TF_UNORM16X2: case PTX_TF_UNORM16X4:
    case PTX_TF_SNORM16X1: case PTX_TF_SNORM16X2: case PTX_TF_SNORM16X4: return 2;
    default: return 4;
    }
}

/* One stored channel (raw bits, sign-extended for signed formats) as the read mode sees it. */
static void channel(const ptx_texture *t, uint32_t raw, texel *v, int c) {
    uint32_t fmt = t->format;
    switch (fmt) {
    case PTX_TF_F32: v->f[c] = f32_of(raw); v->u[c] = raw; return;
    case PTX_TF_F16: v->f[c] = half_to_float((uint16_t)raw); v->u[c] = bits_of(v->f[c]); return;
    case PTX_TF_U8: v->f[c] = (float)raw / 255.0f; break;
    case PTX_TF_U16: v->f[c] = (float)raw / 65535.0f; break;
    case PTX_TF_S8:
        if (t->filtering) {  /* filtering widens to 16 bits first, replicating the 7 magnitude bits */
            int32_t x = (int32_t)raw, m = x < 0 ? -x : x;
            int32_t w = m >= 127 ? 32767 : (m << 8) | (m << 1) | (m >> 6);
            v->f[c] = fmaxf(-1.0f, (float)(x < 0 ? -w : w) / 32767.0f);
        } else {
            v->f[c] = fmaxf(-1.0f, (float)(int32_t)raw / 127.0f);
        }
        break;
    case PTX_TF_S16: v->f[c] = fmaxf(-1.0f, (float)(int32_t)raw / 32767.0f); break;
    default: v->f[c] = 0; break;
    }
    v->u[c] = raw;
}

static uint32_t load_raw(const uint8_t *p, uint32_t fmt) {
    switch (fmt) {
    case PTX_TF_U8: return p[0];
    case PTX_TF_S8: return (uint32_t)(int32_t)(int8_t)p[0];
    case PTX_TF_U16: case PTX_TF_F16: { uint16_t h; memcpy(&h, p, 2); return h; }
    case PTX_TF_S16: { int16_t h; memcpy(&h, p, 2); return (uint32_t)(int32_t)h; }
    default: { uint32_t w; memcpy(&w, p, 4); return w; }
    }
}

/* The border colour as a texel: stored in the format first (normalised formats round to the nearest
   code, element reads of integers take the colour's low bits as the hardware does). */
static void border(const ptx_texture *t, texel *v) {
    uint32_t fmt = t->format;
    for (int c = 0; c < 4; c++) {
        float b = t->border[c];
        uint32_t raw;
        if (c >= (int)t->channels) { v->f[c] = 0; v->u[c] = 0; continue; }
        if (fmt == PTX_TF_F32) raw = bits_of(b);
        else if (fmt == PTX_TF_F16) { v->f[c] = b; v->u[c] = bits_of(b); continue; }
        else if (t->read_normalized) {
            float lim = fmt == PTX_TF_U8 ? 255.0f : fmt == PTX_TF_U16 ? 65535.0f
                      : fmt == PTX_TF_S8 ? 127.0f : fmt == PTX_TF_S16 ? 32767.0f : 0.0f;
            float lo = is_signed(fmt) ? -1.0f : 0.0f;
            float x = fminf(fmaxf(b, lo), 1.0f) * lim;
            raw = (uint32_t)(int32_t)ceilf(x - 0.5f);   /* halves round down */
        } else {
            raw = bits_of(b);
            uint32_t sz = elem_size(fmt);
            if (sz < 4) {
                raw &= (1u << (8 * sz)) - 1;
                if (is_signed(fmt) && (raw >> (8 * sz - 1))) raw |= ~((1u << (8 * sz)) - 1);
            }
        }
        channel(t, raw, v, c);
    }
}

static void fetch_texel(const ptx_texture *t, int x, int y, int z, int layer, texel *v) {
    const uint32_t sz = elem_size(t->format);
    const uint8_t *p = (const uint8_t *)(uintptr_t)t->base + (uint64_t)layer * t->slice
                     + (uint64_t)z * t->slice + (uint64_t)y * t->pitch + (uint64_t)x * t->channels * sz;
    for (int c = 0; c < 4; c++) {
        if (c < (int)t->channels) channel(t, load_raw(p + c * sz, t->format), v, c);
        else { v->f[c] = 0; v->u[c] = 0; }
    }
}

/* An integer texel index under an address mode: -1 when it selects the border. */
static int address(int i, int n, uint32_t mode) {
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case PTX_TA_WRAP: { int r = i % n; return r < 0 ? r + n : r; }
    case PTX_TA_MIRROR: {
        int p = i % (2 * n);
        if (p < 0) p += 2 * n;
        return p < n ? p : 2 * n - 1 - p;
    }
    case PTX_TA_BORDER: return -1;
    default: return i < 0 ? 0 : n - 1;
    }
}

/* A float coordinate in texels: normalised ones scaled (wrap and mirror fold them into [0,1) first). */
static float to_texels(const ptx_texture *t, float u, int n, uint32_t mode) {
    if (!t->normalized) return u;
    if (mode == PTX_TA_WRAP) u = u - floorf(u);
    else if (mode == PTX_TA_MIRROR) {
        float fl = floorf(u);
        u = ((int64_t)fl & 1) ? 1.0f - (u - fl) : u - fl;
    }
    return u * (float)n;
}

/* The 2x2x2 neighbourhood (or 1 texel) the filter reads, with its 8-bit fixed-point weights. */
typedef struct { int i[3][2]; float a[3]; int w[3]; int dims; } footprint;

static int64_t round8(int64_t n) { return (n + 128) >> 8; }   /* n / 256, halves up */

/* A corner's weight in 1/256: the far corner's the rounded product of the axes' 8-bit weights, the
   others what is left of each axis' weight, so the weights always sum to exactly 1. */
static int64_t corner_weight(const footprint *fp, int dims, int cx, int cy, int cz) {
    int64_t a = fp->w[0], w = cx ? a : 256 - a;
    if (dims > 1) {
        int64_t b = fp->w[1], ab = round8(a * b);
        w = cx ? (cy ? ab : a - ab) : (cy ? b - ab : 256 - a - b + ab);
    }
    if (dims > 2) {     /* then z (3D agrees for ~80% of the H200's samples: its order is not this) */
        int64_t c = fp->w[2], wc = round8(w * c);
        w = cz ? wc : w - wc;
    }
    return w;
}

static void locate(const ptx_texture *t, const float *x, int dims, const int *n, int linear, footprint *fp) {
    fp->dims = dims;
    for (int d = 0; d < 3; d++) {
        fp->w[d] = 0;
        if (d >= dims) { fp->i[d][0] = fp->i[d][1] = 0; fp->a[d] = 0; continue; }
        uint32_t mode = t->address[d];
        /* wrap and mirror need normalised coordinates (the programming guide): with unnormalised ones an
           H200 clamps, point and linear (tests/data/nvidia_address_mode_answers.txt) */
        if (!t->normalized && (mode == PTX_TA_WRAP || mode == PTX_TA_MIRROR)) mode = PTX_TA_CLAMP;
        float xt = to_texels(t, x[d], n[d], mode);
        if (linear) {
            /* the position in 8 fractional bits (the programming guide's 9-bit fixed point weights):
               rounded first, so a coordinate just below a texel centre selects that texel, weight 0 */
            float q = floorf(fmaxf(fminf((xt - 0.5f) * 256.0f, 2.0e9f), -2.0e9f) + 0.5f);
            int64_t qi = (int64_t)q;
            int i0 = (int)(qi >> 8);
            fp->a[d] = (float)(qi & 255) * (1.0f / 256.0f);
            fp->w[d] = (int)(qi & 255);
            fp->i[d][0] = address(i0, n[d], mode);
            fp->i[d][1] = address(i0 + 1, n[d], mode);
        } else {
            float fl = floorf(xt);
            int i0 = (int)fmaxf(fminf(fl, 2147483000.0f), -2147483000.0f);
            fp->i[d][0] = fp->i[d][1] = address(i0, n[d], mode);
            fp->a[d] = 0;
        }
    }
}

static void corner(const ptx_texture *t, const footprint *fp, int cx, int cy, int cz, int layer, texel *v) {
    int x = fp->i[0][cx], y = fp->i[1][cy], z = fp->i[2][cz];
    if (x < 0 || y < 0 || z < 0) border(t, v);
    else fetch_texel(t, x, y, z, layer, v);
}

/* Cubemap direction -> face and (s, t) in [0,1] (the programming guide's face table). */
static int cube_face(float x, float y, float z, float *s, float *tt) {
    float ax = fabsf(x), ay = fabsf(y), az = fabsf(z), m, sc, tc;
    int face;
    /* ties go to z, then y (what the hardware picks for (1, 1, 1)) */
    if (az >= ax && az >= ay) { m = az; face = z >= 0 ? 4 : 5; sc = z >= 0 ? x : -x; tc = -y; }
    else if (ay >= ax) { m = ay; face = y >= 0 ? 2 : 3; sc = x; tc = y >= 0 ? z : -z; }
    else { m = ax; face = x >= 0 ? 0 : 1; sc = x >= 0 ? -z : z; tc = -y; }
    *s = (sc / m + 1.0f) * 0.5f;
    *tt = (tc / m + 1.0f) * 0.5f;
    return face;
}

static int dims_of(uint32_t geom) {
    switch (geom) {
    case PTX_TG_1D: case PTX_TG_A1D: return 1;
    case PTX_TG_3D: return 3;
    default: return 2;
    }
}

/* Where a fetch reads: texel-space coordinates, the layer, the extents. Returns 0 for an integer
   coordinate fetch of linear memory out of range (the answer is then 0). */
static void prepare(const ptx_texture *t, uint32_t geom, uint32_t ctype, const uint32_t *coords,
                    float *x, int *layer, int *n, ptx_texture *local) {
    *local = *t;
    int first = (geom == PTX_TG_A1D || geom == PTX_TG_A2D || geom == PTX_TG_ACUBE) ? 1 : 0;
    *layer = first ? (int32_t)coords[0] : 0;
    for (int d = 0; d < 3; d++) {
        uint32_t c = coords[first + d < 4 ? first + d : 3];
        x[d] = ctype == PTX_TT_F32 ? f32_of(c) : (float)(int32_t)c;
    }
    n[0] = (int)t->width; n[1] = t->height ? (int)t->height : 1; n[2] = t->depth ? (int)t->depth : 1;
    if (geom == PTX_TG_CUBE || geom == PTX_TG_ACUBE) {
        float s, tc;
        int face = cube_face(x[0], x[1], x[2], &s, &tc);
        *layer = *layer * 6 + face;
        x[0] = s; x[1] = tc;
        local->normalized = 1;
        /* a face's own address mode: border stays border (a corner direction such as (1,1,1) lands on
           s = 1.0, outside the face), wrap and mirror act as clamp */
        for (int d = 0; d < 2; d++)
            if (local->address[d] != PTX_TA_BORDER) local->address[d] = PTX_TA_CLAMP;
    }
    if (ctype != PTX_TT_F32) {        /* integer coordinates address texels directly */
        local->normalized = 0;
        for (int d = 0; d < 3; d++) x[d] += 0.5f;
    }
    /* the layer index is unsigned: -1 selects the last layer */
    if (t->layers && (uint32_t)*layer >= t->layers) *layer = (int)t->layers - 1;
    if (!t->layers) *layer = 0;
}

static void write_out(const ptx_texture *t, const texel *v, uint32_t rtype, uint32_t *out) {
    int as_float = is_float(t->format) || t->read_normalized;
    for (int c = 0; c < 4; c++) out[c] = as_float ? bits_of(v->f[c]) : v->u[c];
    (void)rtype;
}

static int valid(const ptx_texture *t) { return t && t->magic == PTX_TEXTURE_MAGIC; }

/* One texture (or one level of a mipmapped one) sampled at coords: a point-sampled texel in *v (returns 0)
   or the exact weighted sum of the linear filter's texels in acc (returns 1); *lt is the texture as sampled
   (a cube face's address modes, integer coordinates unnormalised). */
static int sample_one(const ptx_texture *t, uint32_t geom, uint32_t ctype, const uint32_t *coords,
                      ptx_texture *lt, texel *v, long double *acc) {
    float x[3];
    int layer, n[3];
    prepare(t, geom, ctype, coords, x, &layer, n, lt);
    int dims = dims_of(geom);
    int linear = lt->filter && ctype == PTX_TT_F32;
    if (geom == PTX_TG_1D && linear) {
        /* a 1D texture filters as a 2D one of height 1 sampled at y = 0, the edge of its one row: with a
           border address mode half of the result is the border colour (as the hardware answers) */
        dims = 2;
        x[1] = 0.0f;
        n[1] = 1;
    }
    lt->filtering = linear;   /* texels widened as the filter unit reads them */
    footprint fp;
    locate(lt, x, dims, n, linear, &fp);
    if (!linear) {
        corner(lt, &fp, 0, 0, 0, layer, v);
        return 0;
    }
    for (int k = 0; k < 4; k++) acc[k] = 0;
    for (int cz = 0; cz < (dims > 2 ? 2 : 1); cz++)
        for (int cy = 0; cy < (dims > 1 ? 2 : 1); cy++)
            for (int cx = 0; cx < 2; cx++) {
                long double w = (long double)corner_weight(&fp, dims, cx, cy, cz) / 256.0L;
                texel c;
                corner(lt, &fp, cx, cy, cz, layer, &c);
                for (int k = 0; k < 4; k++) acc[k] += w * (long double)c.f[k];
            }
    return 1;
}

/* A filtered sum rounded once, as the filter unit rounds it for the texel format. */
static void round_sum(const ptx_texture *lt, const long double *acc, uint32_t *out) {
    for (int k = 0; k < 4; k++) {
        float f;
        if (lt->read_normalized && !is_float(lt->format)) {
            /* 8/16-bit normalised texels are filtered as 16-bit fixed point and the sum rounded to it */
            long double scale = is_signed(lt->format) ? 32767.0L : 65535.0L;
            long double r = floorl(acc[k] * scale + 0.5L);
            f = (float)r / (float)scale;
        } else if (lt->format == PTX_TF_F16) {
            f = to_half_precision(acc[k]);
        } else {
            f = round_away(acc[k]);
        }
        out[k] = bits_of(f);
    }
}

/* A fetch from a texture that is not mipmapped, or from one level of a mipmapped one. */
static void fetch_plain(const ptx_texture *t, uint32_t geom, uint32_t rtype, uint32_t ctype,
                        const uint32_t *coords, uint32_t *out) {
    ptx_texture lt;
    texel v;
    long double acc[4];
    if (sample_one(t, geom, ctype, coords, &lt, &v, acc)) round_sum(&lt, acc, out);
    else write_out(&lt, &v, rtype, out);
}

void ptx_tex_fetch(const ptx_texture *t, uint32_t geom, uint32_t rtype, uint32_t ctype,
                   const uint32_t *coords, uint32_t *out) {
    if (!valid(t)) { memset(out, 0, 16); return; }
    if (t->linear) {     /* tex1Dfetch: an element index, 0 outside the buffer */
        int32_t i = ctype == PTX_TT_F32 ? (int32_t)floorf(f32_of(coords[0])) : (int32_t)coords[0];
        texel v;
        if (i < 0 || (uint32_t)i >= t->width) memset(&v, 0, sizeof v);
        else fetch_texel(t, i, 0, 0, 0, &v);
        write_out(t, &v, rtype, out);
        return;
    }
    if (t->mip_levels) ptx_tex_fetch_mip(t, geom, rtype, ctype, PTX_MIP_BASE, coords, 0, out);
    else fetch_plain(t, geom, rtype, ctype, coords, out);
}

void ptx_tex_gather(const ptx_texture *t, uint32_t comp, uint32_t geom, uint32_t rtype, uint32_t ctype,
                    const uint32_t *coords, uint32_t *out) {
    if (!valid(t)) { memset(out, 0, 16); return; }
    float x[3];
    int layer, n[3];
    ptx_texture lt;
    prepare(t, geom, ctype, coords, x, &layer, n, &lt);
    footprint fp;
    lt.filtering = 1;
    locate(&lt, x, 2, n, 1, &fp);
    static const int order[4][2] = {{0, 1}, {1, 1}, {1, 0}, {0, 0}};  /* (i0,j1) (i1,j1) (i1,j0) (i0,j0) */
    for (int k = 0; k < 4; k++) {
        texel c;
        corner(&lt, &fp, order[k][0], order[k][1], 0, layer, &c);
        uint32_t o[4];
        write_out(&lt, &c, rtype, o);
        out[k] = o[comp & 3];
    }
}

/* what: 0 width, 1 height, 2 depth, 3 channel data type, 4 channel order, 5 normalized coords,
   6 filter mode, 7..9 address mode 0..2, 10 array size, 11 mipmap levels, 12 samples */
int32_t ptx_tex_query(const ptx_texture *t, uint32_t what) {
    if (!valid(t)) return 0;
    switch (what) {
    case 0: return (int32_t)t->width;
    case 1: return (int32_t)(t->height ? t->height : 1);
    case 2: return (int32_t)(t->depth ? t->depth : 1);
    case 3: return (int32_t)t->format;
    case 4: return (int32_t)t->channels;
    case 5: return (int32_t)t->normalized;
    case 6: return (int32_t)t->filter;
    case 7: case 8: case 9: return (int32_t)t->address[what - 7];
    case 10: return (int32_t)t->layers;
    case 11: return (int32_t)t->mip_levels;     /* the PTX ISA: 0 when not mipmapped */
    case 12: return 1;
    default: return 0;
    }
}

/* ---- independent texturing mode: samplers apart from textures ---- */

static int is_sampler(const void *h) { return h && ((const ptx_sampler *)h)->magic == PTX_SAMPLER_MAGIC; }

/* PTX's addressing modes as the texture unit applies them: clamp_ogl clamps as clamp_to_edge does */
static uint32_t sampler_address(uint32_t mode) {
    switch (mode) {
    case PTX_SA_WRAP: return PTX_TA_WRAP;
    case PTX_SA_MIRROR: return PTX_TA_MIRROR;
    case PTX_SA_CLAMP_TO_BORDER: return PTX_TA_BORDER;
    default: return PTX_TA_CLAMP;
    }
}

const ptx_texture *ptx_tex_sampled(const ptx_texture *t, const ptx_sampler *s, ptx_texture *out) {
    if (!valid(t)) return 0;
    if (valid((const ptx_texture *)s)) {     /* unified mode's sampler: another texture's filtering and addressing */
        const ptx_texture *st = (const ptx_texture *)s;
        *out = *t;
        out->filter = st->filter;
        for (int d = 0; d < 3; d++) out->address[d] = st->address[d];
        out->normalized = st->normalized;
        return out;
    }
    if (!is_sampler(s)) return 0;
    *out = *t;
    out->filter = s->filter;
    for (int d = 0; d < 3; d++) out->address[d] = sampler_address(s->mode[d]);
    if (s->force_unnormalized) out->normalized = 0;
    return out;
}

int32_t ptx_sampler_query(const void *h, uint32_t what) {
    if (!is_sampler(h)) return what == PTX_QUERY_FORCE_UNNORMALIZED ? 0 : ptx_tex_query((const ptx_texture *)h, what);
    const ptx_sampler *s = (const ptx_sampler *)h;
    switch (what) {
    case 6: return (int32_t)s->filter;
    case 7: case 8: case 9: return (int32_t)s->mode[what - 7];
    case PTX_QUERY_FORCE_UNNORMALIZED: return (int32_t)s->force_unnormalized;
    default: return 0;
    }
}

int32_t ptx_handle_is(const void *h, uint32_t kind) {
    /* a sampler's magic is its first word: checked first, so a sampler is never read past its end; what is
       not 8-byte aligned is no descriptor */
    if (!h || ((uintptr_t)h & 7)) return 0;
    if (is_sampler(h)) return kind == PTX_KIND_SAMPLER;
    return kind != PTX_KIND_SAMPLER && valid((const ptx_texture *)h);
}

/* The mipmap and surface parts share this file's static helpers, and the AMDGPU bitcode is built from this
   one translation unit (ptx/amdgpu_texture.py), so they are included rather than compiled apart. */
#include "texture_mip.c"
#include "surface.c"
