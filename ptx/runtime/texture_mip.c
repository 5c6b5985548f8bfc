/* Mipmapped textures: level selection (explicit LOD, gradients), blending across levels and per-level
   queries, as an H100 answers them (tests/data/nvidia_mipmap_answers.json). Part of texture.c's unit. */

/* ---- mipmapped textures ------------------------------------------------------------------------------- */
/* What follows answers what an H100 answered (tests/data/nvidia_mipmap_answers.json, from
   scripts/nvidia_mipmap_probe.cu): the LOD is fixed point with 8 fractional bits, truncated; tex.level's LOD
   and tex.grad's take the bias, then maxMipmapLevelClamp, then minMipmapLevelClamp (which wins when they
   cross), then the level range; plain tex is LOD 0 under the clamps but without the bias; tld4 reads level
   0; an integer LOD (tex.level with .s32 coordinates) names a level as is, and one past the chain reads 0. */

/* log2(1.m) in 1/256 for the top 8 bits of m, as the LOD unit's table holds it (the grad sweeps: the same
   table in every octave, within one unit of 256 * log2(1 + (k + 0.5) / 256)) */
static const uint8_t LOG2_MANTISSA[256] = {
    0, 2, 4, 5, 6, 8, 9, 11, 12, 13, 15, 16, 18, 19, 20, 22,
    23, 24, 26, 27, 28, 30, 31, 32, 34, 35, 36, 38, 39, 40, 42, 43,
    44, 45, 47, 48, 49, 50, 52, 53, 54, 55, 57, 58, 59, 60, 62, 63,
    64, 65, 66, 68, 69, 70, 71, 72, 74, 75, 76, 77, 78, 79, 81, 82,
    83, 84, 85, 86, 88, 89, 90, 91, 92, 93, 94, 95, 97, 98, 99, 100,
    101, 102, 103, 104, 105, 106, 107, 109, 110, 111, 112, 113, 114, 115, 116, 117,
    118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133,
    135, 136, 137, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149,
    150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 162, 163, 164,
    165, 166, 167, 168, 169, 170, 171, 172, 173, 173, 174, 175, 176, 177, 178, 179,
    180, 181, 181, 182, 183, 184, 185, 186, 187, 188, 188, 189, 190, 191, 192, 193,
    194, 195, 195, 196, 197, 198, 199, 200, 200, 201, 202, 203, 204, 205, 205, 206,
    207, 208, 209, 210, 210, 211, 212, 213, 214, 214, 215, 216, 217, 218, 218, 219,
    220, 221, 222, 222, 223, 224, 225, 226, 226, 227, 228, 229, 229, 230, 231, 232,
    233, 233, 234, 235, 236, 236, 237, 238, 239, 239, 240, 241, 242, 242, 243, 244,
    245, 245, 246, 247, 248, 248, 249, 250, 251, 251, 252, 253, 253, 254, 255, 255};

/* Level l of a mipmapped texture as a texture of its own: the same modes over the level's memory. */
static void level_of(const ptx_texture *t, int l, ptx_texture *out) {
    *out = *t;
    const ptx_texture_level *v = &t->level[l];
    out->base = v->base; out->pitch = v->pitch; out->slice = v->slice;
    out->width = v->width; out->height = v->height; out->depth = v->depth;
    out->mip_levels = 0;
}

/* The coordinates level l reads: unnormalised float ones are level 0's texels, scaled to the level's
   (not measured: the probe's unnormalised cases sample constant levels). */
static void level_coords(const ptx_texture *t, int l, uint32_t geom, uint32_t ctype, const uint32_t *coords,
                         uint32_t *out) {
    memcpy(out, coords, 16);
    if (t->normalized || ctype != PTX_TT_F32 || geom == PTX_TG_CUBE || geom == PTX_TG_ACUBE || l == 0) return;
    int first = (geom == PTX_TG_A1D || geom == PTX_TG_A2D) ? 1 : 0;
    const uint32_t n0[3] = {t->level[0].width, t->level[0].height, t->level[0].depth};
    const uint32_t nl[3] = {t->level[l].width, t->level[l].height, t->level[l].depth};
    for (int d = 0; d < dims_of(geom) && first + d < 4; d++)
        if (n0[d]) out[first + d] = bits_of(f32_of(coords[first + d]) * (float)nl[d] / (float)n0[d]);
}

/* Cubemap direction derivatives -> derivatives of the face coordinates (s, t in [0,1]): the quotient
   rule on s = (sc / |ma| + 1) / 2 with the face cube_face picks (not matched: see the README). */
static void cube_derivatives(const float *p, const float *d, float *ds, float *dt) {
    float ax = fabsf(p[0]), ay = fabsf(p[1]), az = fabsf(p[2]);
    float ma, dma, sc, dsc, tc, dtc;
    if (az >= ax && az >= ay) {
        ma = p[2]; dma = d[2]; sc = p[2] >= 0 ? p[0] : -p[0]; dsc = p[2] >= 0 ? d[0] : -d[0]; tc = -p[1]; dtc = -d[1];
    } else if (ay >= ax) {
        ma = p[1]; dma = d[1]; sc = p[0]; dsc = d[0]; tc = p[1] >= 0 ? p[2] : -p[2]; dtc = p[1] >= 0 ? d[2] : -d[2];
    } else {
        ma = p[0]; dma = d[0]; sc = p[0] >= 0 ? -p[2] : p[2]; dsc = p[0] >= 0 ? -d[2] : d[2]; tc = -p[1]; dtc = -d[1];
    }
    float m = fabsf(ma), dm = ma >= 0 ? dma : -dma;
    *ds = 0.5f * (dsc * m - sc * dm) / (m * m);
    *dt = 0.5f * (dtc * m - tc * dm) / (m * m);
}

/* A gradient component in texels as the LOD unit holds it: 10 significant bits, truncated. */
static double grad10(float x) { return (double)f32_of(bits_of(x) & 0xFFFFC000u); }

/* A vector's length as the LOD unit approximates it: the longest component plus 11/32 of the others. */
static double approx_length(const double *v, int dims) {
    double big = 0, rest = 0;
    for (int i = 0; i < dims; i++) {
        double a = fabs(v[i]);
        if (a > big) { rest += big; big = a; }
        else rest += a;
    }
    return big + rest * (11.0 / 32.0);
}

/* The LOD tex.grad computes, in 1/256: log2 of the footprint's longer extent, the longest of the two
   gradients and of their sum and difference scaled by 11/16 (so two equal parallel gradients give about
   sqrt(2) times one), each length approximated, through an exponent and LOG2_MANTISSA. Isotropic: the
   texture's maxAnisotropy does not enter (the H100 lowers the LOD for it; not modelled). */
static int32_t lod_from_gradients(const ptx_texture *t, uint32_t geom, const uint32_t *coords,
                                  const uint32_t *args) {
    const double n[3] = {t->width, t->height ? t->height : 1, t->depth ? t->depth : 1};
    double g[2][3] = {{0, 0, 0}, {0, 0, 0}};
    int dims = dims_of(geom);
    for (int k = 0; k < 2; k++) {
        const uint32_t *a = args + 4 * k;
        if (geom == PTX_TG_CUBE || geom == PTX_TG_ACUBE) {
            int first = geom == PTX_TG_ACUBE;
            float p[3], d[3], ds, dt;
            for (int i = 0; i < 3; i++) { p[i] = f32_of(coords[first + i]); d[i] = f32_of(a[i]); }
            cube_derivatives(p, d, &ds, &dt);
            g[k][0] = grad10(ds * (float)t->width);
            g[k][1] = grad10(dt * (float)t->width);
        } else {
            for (int i = 0; i < dims; i++) g[k][i] = grad10(f32_of(a[i]) * (float)n[i]);
        }
    }
    if (geom == PTX_TG_CUBE || geom == PTX_TG_ACUBE) dims = 2;
    double sum[3], diff[3];
    for (int i = 0; i < 3; i++) {
        sum[i] = grad10((float)(g[0][i] + g[1][i]));
        diff[i] = grad10((float)(g[0][i] - g[1][i]));
    }
    double rho = fmax(fmax(approx_length(g[0], dims), approx_length(g[1], dims)),
                      fmax(approx_length(sum, dims), approx_length(diff, dims)) * (11.0 / 16.0));
    float r = (float)rho;
    if (!(r > 0)) return INT32_MIN / 4;       /* zero or NaN gradients: below every level */
    if (r == INFINITY) return INT32_MAX / 4;
    uint32_t u = bits_of(r);
    return ((int32_t)((u >> 23) & 255) - 127) * 256 + LOG2_MANTISSA[(u >> 15) & 255];
}

/* A filter tap's weight in a blend of two levels, in 1/256: the level's weight wl split along x (the upper
   texel's share rounded, the lower's what is left), each part split along y and then z (the lower texel's
   share rounded). 2D linear-linear samples agree 74 of 80 times with the H100, 1D 39 of 39. */
static int64_t blend_weight(const footprint *fp, int dims, int64_t wl, int cx, int cy, int cz) {
    int64_t x1 = round8(fp->w[0] * wl), w = cx ? x1 : wl - x1;
    if (dims > 1) { int64_t y0 = round8(w * (256 - fp->w[1])); w = cy ? w - y0 : y0; }
    if (dims > 2) { int64_t z0 = round8(w * (256 - fp->w[2])); w = cz ? w - z0 : z0; }
    return w;
}

/* Level l's share (wl/256) of a blend of two levels, added to acc; *lt the level as sampled. */
static void blend_level(const ptx_texture *t, int l, int64_t wl, uint32_t geom, uint32_t ctype,
                        const uint32_t *coords, ptx_texture *lt, long double *acc) {
    ptx_texture lv;
    uint32_t c[4];
    float x[3];
    int layer, n[3];
    level_of(t, l, &lv);
    level_coords(t, l, geom, ctype, coords, c);
    prepare(&lv, geom, ctype, c, x, &layer, n, lt);
    int dims = dims_of(geom);
    int linear = lt->filter && ctype == PTX_TT_F32;
    lt->filtering = 1;      /* texels as the filter unit reads them, as the blend does */
    footprint fp;
    locate(lt, x, dims, n, linear, &fp);
    for (int cz = 0; cz < (linear && dims > 2 ? 2 : 1); cz++)
        for (int cy = 0; cy < (linear && dims > 1 ? 2 : 1); cy++)
            for (int cx = 0; cx < (linear ? 2 : 1); cx++) {
                long double w = (long double)(linear ? blend_weight(&fp, dims, wl, cx, cy, cz) : wl) / 256.0L;
                texel v;
                corner(lt, &fp, cx, cy, cz, layer, &v);
                for (int k = 0; k < 4; k++) acc[k] += w * (long double)v.f[k];
            }
}

/* One level, or levels l0 and l0 + 1 blended by w/256, sampled at coords. */
static void fetch_levels(const ptx_texture *t, int l0, int w, uint32_t geom, uint32_t rtype, uint32_t ctype,
                         const uint32_t *coords, uint32_t *out) {
    if (w == 0) {
        ptx_texture lv;
        uint32_t c[4];
        level_of(t, l0, &lv);
        level_coords(t, l0, geom, ctype, coords, c);
        fetch_plain(&lv, geom, rtype, ctype, c, out);
        return;
    }
    long double acc[4] = {0, 0, 0, 0};
    ptx_texture lt;
    blend_level(t, l0, 256 - w, geom, ctype, coords, &lt, acc);
    blend_level(t, l0 + 1, w, geom, ctype, coords, &lt, acc);
    round_sum(&lt, acc, out);
}

void ptx_tex_fetch_mip(const ptx_texture *t, uint32_t geom, uint32_t rtype, uint32_t ctype, uint32_t mode,
                       const uint32_t *coords, const uint32_t *args, uint32_t *out) {
    if (!valid(t)) { memset(out, 0, 16); return; }
    if (!t->mip_levels || t->linear) {
        /* a texture without levels answers its one level whatever the LOD */
        ptx_texture plain = *t;
        plain.mip_levels = 0;
        ptx_tex_fetch(&plain, geom, rtype, ctype, coords, out);
        return;
    }
    const int top = (int)t->mip_levels - 1;
    if (mode == PTX_MIP_LEVEL && ctype != PTX_TT_F32) {
        int32_t l = (int32_t)args[0];
        if (l < 0 || l > top) { memset(out, 0, 16); return; }
        fetch_levels(t, l, 0, geom, rtype, ctype, coords, out);
        return;
    }
    float lod = 0.0f;
    if (mode == PTX_MIP_LEVEL) lod = f32_of(args[0]) + t->lod_bias;
    else if (mode == PTX_MIP_GRAD) lod = (float)lod_from_gradients(t, geom, coords, args) / 256.0f + t->lod_bias;
    if (lod != lod) lod = 0.0f;
    lod = fmaxf(fminf(lod, t->max_lod), t->min_lod);
    lod = fminf(fmaxf(lod, 0.0f), (float)top);
    int q = (int)floorf(lod * 256.0f);
    int l0, w = 0;
    if (t->mip_filter && (is_float(t->format) || t->read_normalized)) {
        l0 = q >> 8;
        w = q & 255;
    } else {
        l0 = (q + 128) >> 8;    /* the nearest level; half-way goes up */
    }
    if (l0 >= top) { l0 = top; w = 0; }
    fetch_levels(t, l0, w, geom, rtype, ctype, coords, out);
}

/* txq.level (and txq.width/height/depth, level 0): the level's extents as the H100 answers them: height 1
   for 1D and the layer count for 1D layered, depth the layer count for 2D layered and cubes of a cubemap
   array, 0 for 2D and cubemaps; 0 for a level the texture does not have. */
int32_t ptx_tex_query_level(const ptx_texture *t, uint32_t what, int32_t lod) {
    if (!valid(t)) return 0;
    int32_t levels = t->mip_levels ? (int32_t)t->mip_levels : 1;
    if (lod < 0 || lod >= levels) return 0;
    const ptx_texture_level *v = &t->level[lod];
    uint32_t w = t->mip_levels ? v->width : t->width, h = t->mip_levels ? v->height : t->height;
    uint32_t d = t->mip_levels ? v->depth : t->depth;
    int cube = (t->tex_flags & PTX_TEX_CUBEMAP) != 0;
    switch (what) {
    case 0: return (int32_t)w;
    case 1: return (int32_t)(h ? h : (t->layers ? t->layers : 1));
    default:
        if (d) return (int32_t)d;
        if (t->layers && h) return (int32_t)(cube ? (t->layers > 6 ? t->layers / 6 : 0) : t->layers);
        return 0;
    }
}

