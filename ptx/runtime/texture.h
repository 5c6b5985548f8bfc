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
} ptx_texture;

#define PTX_TEXTURE_MAGIC 0x54585452u

/* coords: 4 x 32 bits as PTX gives them (the array index first for a1d/a2d/acube); out: 4 x 32 bits */
void ptx_tex_fetch(const ptx_texture *t, uint32_t geom, uint32_t rtype, uint32_t ctype,
                   const uint32_t *coords, uint32_t *out);
void ptx_tex_gather(const ptx_texture *t, uint32_t comp, uint32_t geom, uint32_t rtype, uint32_t ctype,
                    const uint32_t *coords, uint32_t *out);
int32_t ptx_tex_query(const ptx_texture *t, uint32_t what);
/* surfaces: x in bytes; nbytes the whole access; returns 0, or 1 when a .trap access is out of range */
int32_t ptx_surf_access(const ptx_texture *t, uint32_t geom, const int32_t *coords, void *data,
                        uint32_t nbytes, uint32_t clamp, uint32_t store);
#endif
