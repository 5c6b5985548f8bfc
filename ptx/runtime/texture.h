/* The texture/surface descriptor kernel code receives as a 64-bit handle on the CPU: the driver fills one
   per texture or surface object (zluda_py/driver/texture.py, through ptx/runtime/texture.py). */
#ifndef PTX_TEXTURE_H
#define PTX_TEXTURE_H
#include <stdint.h>

/* CUarray_format codes */
enum { PTX_TF_U8 = 0x01, PTX_TF_U16 = 0x02, PTX_TF_U32 = 0x03, PTX_TF_S8 = 0x08, PTX_TF_S16 = 0x09,
       PTX_TF_S32 = 0x0a, PTX_TF_F16 = 0x10, PTX_TF_F32 = 0x20 };
/* CUaddress_mode */
enum { PTX_TA_WRAP = 0, PTX_TA_CLAMP = 1, PTX_TA_MIRROR = 2, PTX_TA_BORDER = 3 };
/* geometries, in PTX's order */
enum { PTX_TG_1D, PTX_TG_2D, PTX_TG_3D, PTX_TG_A1D, PTX_TG_A2D, PTX_TG_CUBE, PTX_TG_ACUBE, PTX_TG_2DMS,
       PTX_TG_A2DMS };
/* result / coordinate element types */
enum { PTX_TT_F32, PTX_TT_S32, PTX_TT_U32, PTX_TT_F16 };
/* surface out-of-range behaviour */
enum { PTX_SC_TRAP, PTX_SC_CLAMP, PTX_SC_ZERO };

#define PTX_TEXTURE_MAX_LEVELS 16     /* log2(32768) + 1: the largest mipmapped extent's chain */
/* tex_flags */
enum { PTX_TEX_CUBEMAP = 1 };
/* fetch modes of ptx_tex_fetch_mip: tex (LOD 0), tex.level, tex.grad */
enum { PTX_MIP_BASE, PTX_MIP_LEVEL, PTX_MIP_GRAD };

typedef struct ptx_texture_level {   /* one level of a mipmapped texture */
    uint64_t base, pitch, slice;
    uint32_t width, height, depth;   /* 0 where the texture has no such dimension */
    uint32_t reserved;
} ptx_texture_level;

typedef struct ptx_texture {
    uint64_t base;            /* address of texel (0,0,0) */
    uint64_t pitch;           /* bytes from one row to the next */
    uint64_t slice;           /* bytes from one slice (3D) or layer/face to the next */
    uint32_t format;          /* PTX_TF_* */
    uint32_t channels;        /* 1, 2 or 4 */
    uint32_t width, height, depth;   /* texels; height/depth 0 when the geometry has none */
    uint32_t layers;          /* layered / cubemap: layers (cubemap: faces * cubes) */
    uint32_t linear;          /* 1: a linear-memory resource (integer fetch only, 0 out of range) */
    uint32_t address[3];      /* PTX_TA_* per dimension */
    uint32_t filter;          /* 0 point, 1 linear */
    uint32_t read_normalized; /* 1: 8/16-bit integers read as [0,1] / [-1,1] floats */
    uint32_t normalized;      /* 1: coordinates in [0,1) */
    float border[4];
    uint32_t magic;           /* PTX_TEXTURE_MAGIC: a handle that is not one is refused */
    uint32_t filtering;       /* 0 from the driver; texture.c sets it on its own copy while filtering */
    /* mipmapped textures (appended, so the fields above keep their offsets) */
    uint32_t mip_levels;      /* levels in `level` (level 0 repeats the fields above); 0: not mipmapped */
    uint32_t mip_filter;      /* 0 point (the nearest level), 1 linear (a blend of two) */
    float lod_bias, min_lod, max_lod;   /* mipmapLevelBias, min/maxMipmapLevelClamp */
    uint32_t max_anisotropy;
    uint32_t tex_flags;       /* PTX_TEX_CUBEMAP: the array is a cubemap (txq.depth tells cubes) */
    ptx_texture_level level[PTX_TEXTURE_MAX_LEVELS];
} ptx_texture;

#define PTX_TEXTURE_MAGIC 0x54585452u

/* coords: 4 x 32 bits as PTX gives them (the array index first for a1d/a2d/acube); out: 4 x 32 bits */
void ptx_tex_fetch(const ptx_texture *t, uint32_t geom, uint32_t rtype, uint32_t ctype,
                   const uint32_t *coords, uint32_t *out);
void ptx_tex_gather(const ptx_texture *t, uint32_t comp, uint32_t geom, uint32_t rtype, uint32_t ctype,
                    const uint32_t *coords, uint32_t *out);
int32_t ptx_tex_query(const ptx_texture *t, uint32_t what);
/* tex / tex.level / tex.grad on any texture (mode PTX_MIP_*): args holds the LOD (as ctype) or dPdx[4] then
   dPdy[4] (f32) */
void ptx_tex_fetch_mip(const ptx_texture *t, uint32_t geom, uint32_t rtype, uint32_t ctype, uint32_t mode,
                       const uint32_t *coords, const uint32_t *args, uint32_t *out);
/* txq.level: what 0 width, 1 height, 2 depth of level lod */
int32_t ptx_tex_query_level(const ptx_texture *t, uint32_t what, int32_t lod);
/* surfaces: x in bytes; nbytes the whole access; returns 0, PTX_SURF_OUT_OF_RANGE (a .trap access out of
   range, or no surface: a GPU answers CUDA_ERROR_ILLEGAL_ADDRESS) or PTX_SURF_MISALIGNED (x not a multiple
   of the access's size, whatever the mode: CUDA_ERROR_MISALIGNED_ADDRESS) */
enum { PTX_SURF_OK, PTX_SURF_OUT_OF_RANGE, PTX_SURF_MISALIGNED };
int32_t ptx_surf_access(const ptx_texture *t, uint32_t geom, const int32_t *coords, void *data,
                        uint32_t nbytes, uint32_t clamp, uint32_t store);
/* sust.p: vec 32-bit values (R, G, B, A) converted to the surface's format at x counted in texels; returns
   as ptx_surf_access does */
int32_t ptx_surf_store_p(const ptx_texture *t, uint32_t geom, const int32_t *coords, const uint32_t *data,
                         uint32_t vec, uint32_t clamp);
/* sured: ops and flags of ptx_surf_reduce */
enum { PTX_SR_ADD, PTX_SR_MIN, PTX_SR_MAX, PTX_SR_AND, PTX_SR_OR };
enum { PTX_SR_SIGNED = 1, PTX_SR_64 = 2, PTX_SR_SAMPLE = 4 };
/* sured.b (x in bytes) or, with PTX_SR_SAMPLE, sured.p (x in operands, signedness from the format):
   value combined atomically into the 32-bit (PTX_SR_64: 64-bit) word there; returns as ptx_surf_access */
int32_t ptx_surf_reduce(const ptx_texture *t, uint32_t geom, const int32_t *coords, uint64_t value, uint32_t op,
                        uint32_t flags, uint32_t clamp);
/* CUarray_format's normalised integer formats (sust.p converts floats to them) */
enum { PTX_TF_UNORM8X1 = 0xc0, PTX_TF_UNORM8X2, PTX_TF_UNORM8X4, PTX_TF_UNORM16X1, PTX_TF_UNORM16X2,
       PTX_TF_UNORM16X4, PTX_TF_SNORM8X1, PTX_TF_SNORM8X2, PTX_TF_SNORM8X4, PTX_TF_SNORM16X1,
       PTX_TF_SNORM16X2, PTX_TF_SNORM16X4 };

/* A .samplerref of independent texturing mode: the module's initialiser, laid out when it is compiled
   (ptx/codegen/ops_texref.py); a sampler handle is its address. */
typedef struct ptx_sampler {
    uint32_t magic;              /* PTX_SAMPLER_MAGIC */
    uint32_t filter;             /* filter_mode: 0 nearest, 1 linear */
    uint32_t mode[3];            /* addr_mode_0..2 in PTX's enum: PTX_SA_* */
    uint32_t force_unnormalized; /* force_unnormalized_coords */
} ptx_sampler;

#define PTX_SAMPLER_MAGIC 0x534D504Cu
enum { PTX_SA_WRAP, PTX_SA_MIRROR, PTX_SA_CLAMP_OGL, PTX_SA_CLAMP_TO_EDGE, PTX_SA_CLAMP_TO_BORDER };
/* what ptx_sampler_query answers besides ptx_tex_query's: force_unnormalized_coords */
#define PTX_QUERY_FORCE_UNNORMALIZED 13
/* istypep kinds */
enum { PTX_KIND_TEXTURE, PTX_KIND_SAMPLER, PTX_KIND_SURFACE };

/* tex/tld4 [t, s, c]: t's descriptor copied to out with s's filtering and addressing (and unnormalised
   coordinates where s forces them); s is a sampler (independent mode) or a texture (unified mode: its own
   filtering, addressing and normalisation); returns out, or NULL when t is no texture or s neither. */
const ptx_texture *ptx_tex_sampled(const ptx_texture *t, const ptx_sampler *s, ptx_texture *out);
/* txq through a handle that may be a sampler's: its attributes (ptx_tex_query's numbering, addressing modes in
   PTX's enum, PTX_QUERY_FORCE_UNNORMALIZED), or a texture's as ptx_tex_query answers */
int32_t ptx_sampler_query(const void *h, uint32_t what);
/* istypep: 1 when h is a descriptor of that kind (PTX_KIND_*; a surface's descriptor is a texture's) */
int32_t ptx_handle_is(const void *h, uint32_t kind);
#endif
