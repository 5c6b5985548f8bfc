/* Surface accesses: suld.b/sust.b, formatted sust.p stores and sured reductions, as an H100 answers them
   (tests/data/nvidia_surface_answers.json). Part of texture.c's unit. */

/* surf_place's answer for a .zero access out of range: nothing is accessed, and the instruction goes on */
#define SURF_SKIP (-1)

/* Where a surface access of nbytes at x * unit bytes lands (*p), under the out-of-range mode: 0, a
   PTX_SURF_* fault (texture.h; an access not aligned to its size faults whatever the mode, as an H100's
   does: tests/data/nvidia_surface_answers.json), or SURF_SKIP. .clamp moves the access to the nearest
   place inside the surface. */
static int surf_place(const ptx_texture *t, uint32_t geom, const int32_t *coords, uint32_t unit,
                      uint32_t nbytes, uint32_t clamp, uint8_t **p) {
    if (!valid(t)) return PTX_SURF_OUT_OF_RANGE;
    int first = (geom == PTX_TG_A1D || geom == PTX_TG_A2D) ? 1 : 0;
    int32_t layer = first ? coords[0] : 0;
    int64_t bx = (int64_t)coords[first] * unit;
    int32_t y = dims_of(geom) > 1 ? coords[first + 1] : 0;
    int32_t z = dims_of(geom) > 2 ? coords[first + 2] : 0;
    const int64_t row = (int64_t)t->width * t->channels * elem_size(t->format);
    const int32_t h = t->height ? (int32_t)t->height : 1, d = t->depth ? (int32_t)t->depth : 1;
    const int32_t nl = t->layers ? (int32_t)t->layers : 1;
    if (bx & (nbytes - 1)) return PTX_SURF_MISALIGNED;
    int out = bx < 0 || bx + nbytes > row || y < 0 || y >= h || z < 0 || z >= d || layer < 0 || layer >= nl;
    if (out) {
        if (clamp == PTX_SC_TRAP) return PTX_SURF_OUT_OF_RANGE;
        if (clamp == PTX_SC_ZERO) return SURF_SKIP;
        bx = bx < 0 ? 0 : (bx + nbytes > row ? row - nbytes : bx);
        y = y < 0 ? 0 : y >= h ? h - 1 : y;
        z = z < 0 ? 0 : z >= d ? d - 1 : z;
        layer = layer < 0 ? 0 : layer >= nl ? nl - 1 : layer;
    }
    *p = (uint8_t *)(uintptr_t)t->base + (uint64_t)(layer + z) * t->slice + (uint64_t)y * t->pitch + (uint64_t)bx;
    return 0;
}

int32_t ptx_surf_access(const ptx_texture *t, uint32_t geom, const int32_t *coords, void *data,
                        uint32_t nbytes, uint32_t clamp, uint32_t store) {
    uint8_t *p;
    int r = surf_place(t, geom, coords, 1, nbytes, clamp, &p);
    if (r == SURF_SKIP && !store) memset(data, 0, nbytes);
    if (r) return r == SURF_SKIP ? PTX_SURF_OK : r;
    if (store) memcpy(p, data, nbytes);
    else memcpy(data, p, nbytes);
    return 0;
}

/* sust.p's conversions, as an H100 stores them (scripts/nvidia_surface_probe.cu): the data are unsigned
   for unsigned integer formats, signed for signed ones and saturate to the format's range; floats go to
   half precision toward zero (so past 65504 to 65504; a NaN keeps its sign and top payload bits, and stays
   a NaN), to 32 bits unchanged (NaN payloads too), and to unorm/snorm codes from the value clamped to
   [0, 1] / [-1, 1] (NaN: 0), cut to 4 bits below the code's magnitude and rounded half down. */
static uint32_t to_half_rz(uint32_t u) {
    uint32_t s = (u >> 16) & 0x8000u, e = (u >> 23) & 0xffu, m = u & 0x7fffffu;
    if (e == 0xff) return m ? s | 0x7c00u | (m >> 13) | ((m >> 13) == 0) : s | 0x7c00u;
    if (e >= 143) return s | 0x7bffu;                   /* beyond the largest half */
    if (e >= 113) return s | ((e - 112) << 10) | (m >> 13);
    if (e < 102) return s;                              /* below half the smallest subnormal */
    return s | ((m | 0x800000u) >> (126 - e));          /* a subnormal half: units of 2^-24 */
}

static uint32_t to_norm(uint32_t u, int bits, int sgn) {
    float x = f32_of(u);
    if (x != x) return 0;
    const uint64_t scale = sgn ? (1u << (bits - 1)) - 1 : (1u << bits) - 1;
    const int frac = bits - sgn + 4;                    /* 4 bits below the code's magnitude */
    x = fminf(fmaxf(x, sgn ? -1.0f : 0.0f), 1.0f);
    float a = fabsf(x);
    uint64_t q = (uint64_t)(a * (float)(1u << frac));  /* exact scaling, truncated */
    int64_t n = (int64_t)((q * scale + (1ull << (frac - 1)) - 1) >> frac);
    return (uint32_t)(x < 0 ? -n : n) & ((1u << bits) - 1);
}

static uint32_t store_convert(uint32_t fmt, uint32_t v) {
    switch (fmt) {
    case PTX_TF_U8: return v > 0xffu ? 0xffu : v;
    case PTX_TF_U16: return v > 0xffffu ? 0xffffu : v;
    case PTX_TF_S8: { int32_t s = (int32_t)v; return (uint32_t)(s < -128 ? -128 : s > 127 ? 127 : s) & 0xffu; }
    case PTX_TF_S16: { int32_t s = (int32_t)v; return (uint32_t)(s < -32768 ? -32768 : s > 32767 ? 32767 : s) & 0xffffu; }
    case PTX_TF_F16: return to_half_rz(v);
    case PTX_TF_UNORM8X1: case PTX_TF_UNORM8X2: case PTX_TF_UNORM8X4: return to_norm(v, 8, 0);
    case PTX_TF_UNORM16X1: case PTX_TF_UNORM16X2: case PTX_TF_UNORM16X4: return to_norm(v, 16, 0);
    case PTX_TF_SNORM8X1: case PTX_TF_SNORM8X2: case PTX_TF_SNORM8X4: return to_norm(v, 8, 1);
    case PTX_TF_SNORM16X1: case PTX_TF_SNORM16X2: case PTX_TF_SNORM16X4: return to_norm(v, 16, 1);
    default: return v;      /* 32-bit integers and floats */
    }
}

int32_t ptx_surf_store_p(const ptx_texture *t, uint32_t geom, const int32_t *coords, const uint32_t *data,
                         uint32_t vec, uint32_t clamp) {
    if (!valid(t)) return PTX_SURF_OUT_OF_RANGE;
    const uint32_t sz = elem_size(t->format), n = t->channels * sz;
    uint8_t *p, texel[16];
    int r = surf_place(t, geom, coords, n, n, clamp, &p);
    if (r) return r == SURF_SKIP ? PTX_SURF_OK : r;
    /* the components the data lack are written 0; data past the surface's components are dropped */
    for (uint32_t c = 0; c < t->channels && c < 4; c++) {
        uint32_t v = c < vec ? store_convert(t->format, data[c]) : 0;
        memcpy(texel + c * sz, &v, sz);     /* little-endian: the low bytes */
    }
    memcpy(p, texel, n);
    return 0;
}

/* The reduction as one atomic read-modify-write of the word (min/max by compare-and-swap, which the
   builtins have for every compiler and target), so that threads of any block on any worker reducing
   into the same texel all count. */
#define SURF_REDUCE(T, S)                                                                                   \
    static void reduce_##T(T *w, T v, uint32_t op, int sgn) {                                               \
        if (op == PTX_SR_ADD) { __atomic_fetch_add(w, v, __ATOMIC_RELAXED); return; }                       \
        if (op == PTX_SR_AND) { __atomic_fetch_and(w, v, __ATOMIC_RELAXED); return; }                       \
        if (op == PTX_SR_OR) { __atomic_fetch_or(w, v, __ATOMIC_RELAXED); return; }                         \
        T old = __atomic_load_n(w, __ATOMIC_RELAXED);                                                       \
        for (;;) {                                                                                          \
            int less = sgn ? (S)v < (S)old : v < old;                                                       \
            if (less != (op == PTX_SR_MIN) || v == old) return;                                             \
            if (__atomic_compare_exchange_n(w, &old, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;     \
        }                                                                                                   \
    }
SURF_REDUCE(uint32_t, int32_t)
SURF_REDUCE(uint64_t, int64_t)

int32_t ptx_surf_reduce(const ptx_texture *t, uint32_t geom, const int32_t *coords, uint64_t value, uint32_t op,
                        uint32_t flags, uint32_t clamp) {
    if (!valid(t)) return PTX_SURF_OUT_OF_RANGE;
    const uint32_t nbytes = (flags & PTX_SR_64) ? 8 : 4;
    int sgn = (flags & PTX_SR_SIGNED) != 0;
    if (flags & PTX_SR_SAMPLE) sgn = is_signed(t->format);
    uint8_t *p;
    int r = surf_place(t, geom, coords, (flags & PTX_SR_SAMPLE) ? nbytes : 1, nbytes, clamp, &p);
    if (r) return r == SURF_SKIP ? PTX_SURF_OK : r;
    if (nbytes == 8) reduce_uint64_t((uint64_t *)(void *)p, value, op, sgn);
    else reduce_uint32_t((uint32_t *)(void *)p, (uint32_t)value, op, sgn);
    return 0;
}

