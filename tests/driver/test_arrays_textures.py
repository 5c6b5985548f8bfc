"""CUDA arrays and texture/surface objects through the real libcuda.so.1 (ctypes): descriptors read back as
created, copies into and out of arrays (1D, 2D with offsets, 3D layered) land every byte where CUDA puts it,
and object descriptors round-trip."""

import numpy as np

from chost import run_py

SCENARIO = """
import numpy as np
primary()
rng = np.random.default_rng(int(sys.argv[2]))
u64, u32 = ctypes.c_uint64, ctypes.c_uint32

class AD3(ctypes.Structure):
    _fields_ = [("w", ctypes.c_size_t), ("h", ctypes.c_size_t), ("d", ctypes.c_size_t),
                ("fmt", u32), ("nch", u32), ("flags", u32)]

class AD(ctypes.Structure):
    _fields_ = [("w", ctypes.c_size_t), ("h", ctypes.c_size_t), ("fmt", u32), ("nch", u32)]

class M3D(ctypes.Structure):     # CUDA_MEMCPY3D
    _fields_ = [("srcX", ctypes.c_size_t), ("srcY", ctypes.c_size_t), ("srcZ", ctypes.c_size_t),
                ("srcLOD", ctypes.c_size_t), ("srcType", u32), ("srcHost", ctypes.c_void_p),
                ("srcDevice", u64), ("srcArray", ctypes.c_void_p), ("r0", ctypes.c_void_p),
                ("srcPitch", ctypes.c_size_t), ("srcHeight", ctypes.c_size_t),
                ("dstX", ctypes.c_size_t), ("dstY", ctypes.c_size_t), ("dstZ", ctypes.c_size_t),
                ("dstLOD", ctypes.c_size_t), ("dstType", u32), ("dstHost", ctypes.c_void_p),
                ("dstDevice", u64), ("dstArray", ctypes.c_void_p), ("r1", ctypes.c_void_p),
                ("dstPitch", ctypes.c_size_t), ("dstHeight", ctypes.c_size_t),
                ("W", ctypes.c_size_t), ("H", ctypes.c_size_t), ("D", ctypes.c_size_t)]

# a layered array of float2: 3 layers of 5 x 4
W, H, L = 5, 4, 3
arr = ctypes.c_void_p()
ok(lib.cuArray3DCreate_v2(P(arr), P(AD3(W, H, L, 0x20, 2, 0x1 | 0x2))), "cuArray3DCreate")
got = AD3()
ok(lib.cuArray3DGetDescriptor_v2(P(got), arr))
assert (got.w, got.h, got.d, got.fmt, got.nch, got.flags) == (W, H, L, 0x20, 2, 3), (got.w, got.h, got.d)
host = rng.standard_normal((L, H, W, 2)).astype(np.float32)
c = M3D(srcType=1, srcHost=host.ctypes.data, srcPitch=W * 8, srcHeight=H, dstType=3, dstArray=arr,
        W=W * 8, H=H, D=L)
ok(lib.cuMemcpy3D_v2(P(c)), "cuMemcpy3D to array")
back = np.full((L, H, W, 2), np.nan, np.float32)
ok(lib.cuMemcpyAtoH_v2(ctypes.c_void_p(back.ctypes.data), arr, u64(0), u64(back.nbytes)), "cuMemcpyAtoH")
assert (back.view(np.uint32) == host.view(np.uint32)).all()
# a sub-box out of the array into device memory, then to the host: layer 1..2, rows 1..3, texels 2..4
dev = u64()
ok(lib.cuMemAlloc_v2(P(dev), u64(1 << 16)))
c = M3D(srcX=2 * 8, srcY=1, srcZ=1, srcType=3, srcArray=arr, dstType=2, dstDevice=dev.value,
        dstPitch=64, dstHeight=3, W=3 * 8, H=3, D=2)
ok(lib.cuMemcpy3D_v2(P(c)), "cuMemcpy3D from array")
box = np.full((2, 3, 8, 2), np.nan, np.float32)
ok(lib.cuMemcpyDtoH_v2(ctypes.c_void_p(box.ctypes.data), dev, u64(box.nbytes)))
assert (box[:, :, :3].view(np.uint32) == host[1:3, 1:4, 2:5].view(np.uint32)).all()
# a box that leaves the array is refused
c.srcY = 2
assert lib.cuMemcpy3D_v2(P(c)) == 1
# 2D array of u8x4 filled with cuMemcpyHtoA at an offset, read with cuMemcpy2D at (x, y)
a2 = ctypes.c_void_p()
ok(lib.cuArrayCreate_v2(P(a2), P(AD(7, 6, 0x01, 4))))
d2 = AD()
ok(lib.cuArrayGetDescriptor_v2(P(d2), a2))
assert (d2.w, d2.h, d2.fmt, d2.nch) == (7, 6, 1, 4)
img = rng.integers(0, 256, (6, 7, 4), dtype=np.uint8)
ok(lib.cuMemcpyHtoA_v2(a2, u64(0), ctypes.c_void_p(img.ctypes.data), u64(img.nbytes)))
out = np.zeros((6, 7, 4), np.uint8)
ok(lib.cuMemcpyAtoH_v2(ctypes.c_void_p(out.ctypes.data), a2, u64(28), u64(28)))
assert (out.reshape(-1)[:28] == img[1].reshape(-1)).all()
assert lib.cuMemcpyHtoA_v2(a2, u64(1), ctypes.c_void_p(img.ctypes.data), u64(img.nbytes)) == 1   # past the end
# a texture object over it: the descriptors come back as given
res = (ctypes.c_ubyte * 144)()
ctypes.c_uint32.from_buffer(res, 0).value = 0
ctypes.c_void_p.from_buffer(res, 8).value = a2.value
td = (ctypes.c_ubyte * 104)()
for i, v in enumerate((3, 2, 1, 1, 0x2)):
    ctypes.c_uint32.from_buffer(td, 4 * i).value = v
tex = u64()
ok(lib.cuTexObjectCreate(P(tex), res, td, None), "cuTexObjectCreate")
r2, t2 = (ctypes.c_ubyte * 144)(), (ctypes.c_ubyte * 104)()
ok(lib.cuTexObjectGetResourceDesc(r2, tex))
ok(lib.cuTexObjectGetTextureDesc(t2, tex))
assert bytes(r2) == bytes(res) and bytes(t2) == bytes(td)
ok(lib.cuTexObjectDestroy(tex))
assert lib.cuTexObjectGetResourceDesc(r2, tex) == 400
surf = u64()
ok(lib.cuSurfObjectCreate(P(surf), res))
ok(lib.cuSurfObjectGetResourceDesc(r2, surf))
assert bytes(r2) == bytes(res)
ok(lib.cuSurfObjectDestroy(surf))
ok(lib.cuArrayDestroy(a2))
assert lib.cuArrayGetDescriptor_v2(P(d2), a2) == 400
ok(lib.cuArrayDestroy(arr))
print("done")
"""


def test_arrays_copies_and_object_descriptors(shim_libdir):
    seed = int(np.random.default_rng().integers(1 << 31))
    proc = run_py(shim_libdir, SCENARIO.replace("int(sys.argv[2])", str(seed)))
    assert proc.returncode == 0 and "done" in proc.stdout, f"seed {seed}\n{proc.stdout}\n{proc.stderr[-3000:]}"
