"""A kernel that LLVM 22's SLP vectorizer breaks for AVX2 CPUs (a shufflevector before the instruction it reads,
then an instruction-selection assertion): it compiles, without the vectorizers, and computes the right sums."""

import numpy as np
import pytest

import ptx

# ggml's mmvq.cu mul_mat_vec_q<GGML_TYPE_Q8_0, 4 columns> (nvcc -arch=compute_86), cut down line by line to what
# still breaks: eight dp4a dot products of 8-bit quants scaled by f16 factors, live across a barrier. The values
# the cut left undefined are read from `v` (p2); the accumulators' initial values stay undefined on the path
# that skips the dot products, which no thread takes here (%r21 >> 5 exceeds every block index).
DOT8 = r"""
.version 9.0
.target sm_86
.address_size 64
.visible .entry dot8(
 .param .u64 p0,
 .param .u64 p1,
 .param .u64 p2,
 .param .u64 p4,
 .param .u32 p7,
 .param .u32 p8
)
.maxntid 128, 1, 1
.minnctapersm 1
{
 .reg .pred %p<59>;
 .reg .b16 %rs<33>;
 .reg .f32 %f<217>;
 .reg .b32 %r<304>;
 .reg .b64 %rd<84>;
 .shared .align 4 .b8 partial[3072];
 ld.param.u64 %rd80, [p2];
 cvta.to.global.u64 %rd80, %rd80;
 ld.global.f32 %f111, [%rd80+0];
 ld.global.f32 %f126, [%rd80+8];
 ld.global.f32 %f141, [%rd80+16];
 ld.global.f32 %f156, [%rd80+24];
 ld.global.f32 %f171, [%rd80+32];
 ld.global.f32 %f186, [%rd80+40];
 ld.global.f32 %f81, [%rd80+48];
 ld.global.f32 %f96, [%rd80+56];
 ld.global.u32 %r1, [%rd80+64];
 ld.global.u32 %r160, [%rd80+72];
 ld.global.u32 %r161, [%rd80+80];
 ld.global.u32 %r162, [%rd80+88];
 ld.global.u32 %r165, [%rd80+96];
 ld.global.u32 %r174, [%rd80+104];
 ld.global.u32 %r179, [%rd80+112];
 ld.global.u32 %r196, [%rd80+120];
 ld.global.u32 %r198, [%rd80+128];
 ld.global.u32 %r21, [%rd80+136];
 ld.global.u32 %r26, [%rd80+144];
 ld.global.u32 %r28, [%rd80+152];
 ld.global.u32 %r203, [%rd80+160];
 ld.global.u32 %r204, [%rd80+168];
 ld.global.u32 %r206, [%rd80+176];
 ld.global.u32 %r207, [%rd80+184];
 ld.global.u32 %r209, [%rd80+192];
 ld.global.u32 %r210, [%rd80+200];
 ld.global.u32 %r231, [%rd80+208];
 ld.global.u32 %r233, [%rd80+216];
 ld.global.u32 %r234, [%rd80+224];
 ld.global.u32 %r235, [%rd80+232];
 ld.global.u32 %r238, [%rd80+240];
 ld.global.u32 %r241, [%rd80+248];
 ld.global.u32 %r244, [%rd80+256];
 ld.global.u32 %r248, [%rd80+264];
 ld.global.u32 %r253, [%rd80+272];
 ld.global.u32 %r256, [%rd80+280];
 ld.global.u32 %r259, [%rd80+288];
 ld.global.u32 %r262, [%rd80+296];
 ld.global.u32 %r265, [%rd80+304];
 ld.global.u32 %r266, [%rd80+312];
 ld.global.u32 %r267, [%rd80+320];
 ld.global.u32 %r268, [%rd80+328];
 ld.global.u32 %r270, [%rd80+336];
 ld.global.u32 %r271, [%rd80+344];
 ld.global.u32 %r273, [%rd80+352];
 ld.global.u32 %r274, [%rd80+360];
 ld.global.u32 %r276, [%rd80+368];
 ld.global.u32 %r277, [%rd80+376];
 ld.global.u32 %r279, [%rd80+384];
 ld.global.u32 %r280, [%rd80+392];
 ld.global.u32 %r282, [%rd80+400];
 ld.global.u32 %r32, [%rd80+408];
 ld.global.u32 %r34, [%rd80+416];
 ld.global.u32 %r39, [%rd80+424];
 ld.global.u32 %r44, [%rd80+432];
 ld.global.u32 %r45, [%rd80+440];
 ld.global.u32 %r46, [%rd80+448];
 ld.global.u32 %r48, [%rd80+456];
 ld.global.u32 %r52, [%rd80+464];
 ld.global.u32 %r61, [%rd80+472];
 ld.global.u32 %r68, [%rd80+480];
 ld.global.u64 %rd4, [%rd80+488];
 ld.global.u64 %rd30, [%rd80+496];
 ld.global.u64 %rd37, [%rd80+504];
 ld.global.u16 %rs1, [%rd80+512];
 ld.global.u16 %rs4, [%rd80+520];
 ld.global.f32 %f200, [%rd80+536];
 ld.param.u64 %rd15, [p0];
 ld.param.u64 %rd16, [p1];
 ld.param.u32 %r22, [p7];
 ld.param.u32 %r23, [p8];
 shl.b32 %r37, %r1, 5;
 mov.u32 %r38, %tid.x;
 add.s32 %r2, %r37, %r38;
 shr.u32 %r40, %r39, 30;
 add.s32 %r41, %r2, %r40;
 shr.s32 %r303, %r41, 2;
 shr.u32 %r42, %r21, 5;
 setp.ge.s32 %p3, %r303, %r42;
 mov.f32 %f210, %f209;
 mov.f32 %f211, %f209;
 mov.f32 %f212, %f209;
 mov.f32 %f213, %f209;
 mov.f32 %f214, %f209;
 mov.f32 %f215, %f209;
 mov.f32 %f216, %f209;
 @%p3 bra $L__BB89_3;
 cvt.u64.u32 %rd18, %r45;
 cvt.u64.u32 %rd19, %r46;
 add.s64 %rd1, %rd19, %rd18;
 shr.u32 %r49, %r48, %r32;
 mul.lo.s32 %r50, %r49, %r34;
 shr.u32 %r53, %r52, %r26;
 mul.lo.s32 %r54, %r53, %r28;
 cvta.to.global.u64 %rd83, %rd15;
 and.b32 %r58, %r41, -4;
 sub.s32 %r59, %r2, %r58;
 shl.b32 %r60, %r59, 1;
 cvt.s64.s32 %rd3, %r60;
 shl.b32 %r64, %r23, 1;
 add.s32 %r302, %r303, %r64;
 mad.lo.s32 %r301, %r23, 3, %r303;
 mul.wide.s32 %rd5, %r68, 34;
 mad.lo.s32 %r69, %r44, %r22, %r303;
 add.s32 %r70, %r69, %r50;
 add.s32 %r71, %r70, %r54;
 mul.wide.s32 %rd6, %r71, 34;
 mul.wide.s32 %rd20, %r61, 2;
 add.s64 %rd21, %rd6, %rd20;
 add.s64 %rd7, %rd21, 4;
 add.s64 %rd22, %rd5, %rd20;
 add.s64 %rd8, %rd22, 2;
 cvta.to.global.u64 %rd9, %rd16;
 shl.b64 %rd29, %rd3, 2;
 shl.b64 %rd31, %rd4, 2;
 cvt.u64.u32 %rd23, %r303;
 add.s64 %rd24, %rd1, %rd23;
 mul.lo.s64 %rd25, %rd24, 36;
 add.s64 %rd26, %rd9, %rd25;
 add.s64 %rd27, %rd26, 4;
 add.s64 %rd28, %rd83, %rd7;
 ld.global.nc.u16 %rs25, [%rd28+-2];
 ld.global.nc.u16 %rs26, [%rd28];
 mov.b32 %r74, {%rs25, %rs26};
 ld.global.nc.u32 %r75, [%rd30];
 ld.global.nc.u16 %rs27, [%rd28+2];
 ld.global.nc.u16 %rs28, [%rd28+4];
 mov.b32 %r78, {%rs27, %rs28};
 add.s64 %rd32, %rd27, %rd31;
 ld.global.nc.u32 %r79, [%rd32];
 { cvt.f32.f16 %f49, %rs1;}
 ld.global.nc.u32 %r72, [%rd26];
 {.reg .f16 low,high;
 mov.b32 {low,high}, %r72;
 mov.b16 %rs2, low;}
 { cvt.f32.f16 %f50, %rs2;}
 mov.u32 %r139, 0;
 dp4a.s32.s32 %r73, %r74, %r75, %r139;
 dp4a.s32.s32 %r77, %r78, %r79, %r73;
 mul.ftz.f32 %f65, %f49, %f50;
 cvt.rn.f32.s32 %f66, %r77;
 fma.rn.ftz.f32 %f216, %f65, %f66, %f200;
 add.s64 %rd34, %rd83, %rd8;
 ld.global.nc.u16 %rs29, [%rd34];
 ld.global.nc.u16 %rs30, [%rd34+2];
 mov.b32 %r83, {%rs29, %rs30};
 ld.global.nc.u16 %rs31, [%rd34+4];
 ld.global.nc.u16 %rs32, [%rd34+6];
 mov.b32 %r87, {%rs31, %rs32};
 { cvt.f32.f16 %f51, %rs4;}
 {.reg .f16 low,high;
 mov.b32 {low,high}, %r72;
 mov.b16 %rs5, low;}
 { cvt.f32.f16 %f52, %rs5;}
 dp4a.s32.s32 %r82, %r83, %r75, %r139;
 dp4a.s32.s32 %r86, %r87, %r79, %r82;
 mul.ftz.f32 %f67, %f51, %f52;
 cvt.rn.f32.s32 %f68, %r86;
 fma.rn.ftz.f32 %f215, %f67, %f68, %f200;
 mul.lo.s64 %rd38, %rd37, 36;
 add.s64 %rd39, %rd9, %rd38;
 add.s64 %rd40, %rd39, 4;
 add.s64 %rd41, %rd40, %rd29;
 ld.global.nc.u32 %r93, [%rd41];
 add.s64 %rd42, %rd40, %rd31;
 ld.global.nc.u32 %r97, [%rd42];
 { cvt.f32.f16 %f53, %rs1;}
 ld.global.nc.u32 %r90, [%rd39];
 {.reg .f16 low,high;
 mov.b32 {low,high}, %r90;
 mov.b16 %rs8, low;}
 { cvt.f32.f16 %f54, %rs8;}
 dp4a.s32.s32 %r91, %r74, %r93, %r139;
 dp4a.s32.s32 %r95, %r78, %r97, %r91;
 mul.ftz.f32 %f69, %f53, %f54;
 cvt.rn.f32.s32 %f70, %r95;
 fma.rn.ftz.f32 %f214, %f69, %f70, %f200;
 { cvt.f32.f16 %f55, %rs4;}
 {.reg .f16 low,high;
 mov.b32 {low,high}, %r90;
 mov.b16 %rs11, low;}
 { cvt.f32.f16 %f56, %rs11;}
 dp4a.s32.s32 %r100, %r83, %r93, %r139;
 dp4a.s32.s32 %r104, %r87, %r97, %r100;
 mul.ftz.f32 %f71, %f55, %f56;
 cvt.rn.f32.s32 %f72, %r104;
 fma.rn.ftz.f32 %f213, %f71, %f72, %f200;
 cvt.u64.u32 %rd43, %r302;
 add.s64 %rd44, %rd1, %rd43;
 mul.lo.s64 %rd45, %rd44, 36;
 add.s64 %rd46, %rd9, %rd45;
 add.s64 %rd47, %rd46, 4;
 add.s64 %rd48, %rd47, %rd29;
 ld.global.nc.u32 %r111, [%rd48];
 add.s64 %rd49, %rd47, %rd31;
 ld.global.nc.u32 %r115, [%rd49];
 { cvt.f32.f16 %f57, %rs1;}
 ld.global.nc.u32 %r108, [%rd46];
 {.reg .f16 low,high;
 mov.b32 {low,high}, %r108;
 mov.b16 %rs14, low;}
 { cvt.f32.f16 %f58, %rs14;}
 dp4a.s32.s32 %r109, %r74, %r111, %r139;
 dp4a.s32.s32 %r113, %r78, %r115, %r109;
 mul.ftz.f32 %f73, %f57, %f58;
 cvt.rn.f32.s32 %f74, %r113;
 fma.rn.ftz.f32 %f212, %f73, %f74, %f200;
 { cvt.f32.f16 %f59, %rs4;}
 {.reg .f16 low,high;
 mov.b32 {low,high}, %r108;
 mov.b16 %rs17, low;}
 { cvt.f32.f16 %f60, %rs17;}
 dp4a.s32.s32 %r118, %r83, %r111, %r139;
 dp4a.s32.s32 %r122, %r87, %r115, %r118;
 mul.ftz.f32 %f75, %f59, %f60;
 cvt.rn.f32.s32 %f76, %r122;
 fma.rn.ftz.f32 %f211, %f75, %f76, %f200;
 cvt.u64.u32 %rd50, %r301;
 add.s64 %rd51, %rd1, %rd50;
 mul.lo.s64 %rd52, %rd51, 36;
 add.s64 %rd53, %rd9, %rd52;
 add.s64 %rd54, %rd53, 4;
 add.s64 %rd55, %rd54, %rd29;
 ld.global.nc.u32 %r129, [%rd55];
 add.s64 %rd56, %rd54, %rd31;
 ld.global.nc.u32 %r133, [%rd56];
 { cvt.f32.f16 %f61, %rs1;}
 ld.global.nc.u32 %r126, [%rd53];
 {.reg .f16 low,high;
 mov.b32 {low,high}, %r126;
 mov.b16 %rs20, low;}
 { cvt.f32.f16 %f62, %rs20;}
 dp4a.s32.s32 %r127, %r74, %r129, %r139;
 dp4a.s32.s32 %r131, %r78, %r133, %r127;
 mul.ftz.f32 %f77, %f61, %f62;
 cvt.rn.f32.s32 %f78, %r131;
 fma.rn.ftz.f32 %f210, %f77, %f78, %f200;
 { cvt.f32.f16 %f63, %rs4;}
 {.reg .f16 low,high;
 mov.b32 {low,high}, %r126;
 mov.b16 %rs23, low;}
 { cvt.f32.f16 %f64, %rs23;}
 dp4a.s32.s32 %r136, %r83, %r129, %r139;
 dp4a.s32.s32 %r140, %r87, %r133, %r136;
 mul.ftz.f32 %f79, %f63, %f64;
 cvt.rn.f32.s32 %f80, %r140;
 fma.rn.ftz.f32 %f209, %f79, %f80, %f200;
$L__BB89_3:
 bar.sync 0;
 add.ftz.f32 %f82, %f81, %f216;
 add.ftz.f32 %f97, %f96, %f215;
 shfl.sync.bfly.b32 %r178|%p15, %r174, %r161, %r160, %r162;
 shfl.sync.bfly.b32 %r181|%p16, %r179, %r165, %r160, %r162;
 add.ftz.f32 %f112, %f111, %f214;
 shfl.sync.bfly.b32 %r205|%p25, %r203, %r204, %r196, %r198;
 shfl.sync.bfly.b32 %r208|%p26, %r206, %r207, %r196, %r198;
 shfl.sync.bfly.b32 %r211|%p27, %r209, %r210, %r196, %r198;
 add.ftz.f32 %f127, %f126, %f213;
 add.ftz.f32 %f142, %f141, %f212;
 add.ftz.f32 %f157, %f156, %f211;
 shfl.sync.bfly.b32 %r252|%p41, %r248, %r234, %r233, %r235;
 shfl.sync.bfly.b32 %r255|%p42, %r253, %r238, %r233, %r235;
 shfl.sync.bfly.b32 %r258|%p43, %r256, %r241, %r233, %r235;
 shfl.sync.bfly.b32 %r261|%p44, %r259, %r244, %r233, %r235;
 shfl.sync.bfly.b32 %r264|%p45, %r262, %r231, %r233, %r235;
 add.ftz.f32 %f172, %f171, %f210;
 shfl.sync.bfly.b32 %r269|%p47, %r265, %r267, %r266, %r268;
 shfl.sync.bfly.b32 %r272|%p48, %r270, %r271, %r266, %r268;
 shfl.sync.bfly.b32 %r275|%p49, %r273, %r274, %r266, %r268;
 shfl.sync.bfly.b32 %r278|%p50, %r276, %r277, %r266, %r268;
 shfl.sync.bfly.b32 %r281|%p51, %r279, %r280, %r266, %r268;
 add.ftz.f32 %f187, %f186, %f209;
 shfl.sync.bfly.b32 %r286|%p53, %r282, %r267, %r266, %r268;
 ld.param.u64 %rd81, [p4];
 cvta.to.global.u64 %rd81, %rd81;
 mul.wide.u32 %rd82, %r38, 32;
 add.s64 %rd81, %rd81, %rd82;
 st.global.f32 [%rd81+0], %f216;
 st.global.f32 [%rd81+4], %f215;
 st.global.f32 [%rd81+8], %f214;
 st.global.f32 [%rd81+12], %f213;
 st.global.f32 [%rd81+16], %f212;
 st.global.f32 [%rd81+20], %f211;
 st.global.f32 [%rd81+24], %f210;
 st.global.f32 [%rd81+28], %f209;
 ret;
}
"""

# v's 8-byte slots, in the order the kernel reads them
SLOTS = ("f111 f126 f141 f156 f171 f186 f81 f96 r1 r160 r161 r162 r165 r174 r179 r196 r198 r21 r26 r28 r203 "
         "r204 r206 r207 r209 r210 r231 r233 r234 r235 r238 r241 r244 r248 r253 r256 r259 r262 r265 r266 r267 "
         "r268 r270 r271 r273 r274 r276 r277 r279 r280 r282 r32 r34 r39 r44 r45 r46 r48 r52 r61 r68 rd4 rd30 "
         "rd37 rs1 rs4 f209 f200").split()
SHFL_LANES = "r161 r165 r204 r207 r210 r234 r238 r241 r244 r231 r267 r271 r274 r277 r280".split()
SHFL_CLAMPS, SHFL_MASKS = "r160 r196 r233 r266".split(), "r162 r198 r235 r268".split()
THREADS, BLOCKS_Y = 128, 32          # 4 threads per x block; y has BLOCKS_Y blocks of 36 bytes


def _dp4a(a, b, c):
    """dp4a.s32.s32: c plus the products of the four signed bytes of a and b."""
    sa = a.astype("<u4").view(np.int8).reshape(-1, 4).astype(np.int64)
    sb = b.astype("<u4").view(np.int8).reshape(-1, 4).astype(np.int64)
    return c + (sa * sb).sum(axis=1)


def _u32(buf, offsets):
    return np.array([int.from_bytes(buf[o:o + 4].tobytes(), "little") for o in offsets], np.uint32)


def _f16_low(words):
    return (words & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)


def _reference(x, y, w, v, stride):
    t = np.arange(THREADS)
    q, lane = t >> 2, t & 3
    dx1, dx2 = (np.float64(np.uint16(v[n]).view(np.float16)) for n in ("rs1", "rs4"))
    a = np.float64(np.uint32(v["f200"]).view(np.float32))
    # the x words: block q's (its quants at 34q + 2), and block 0's for the second factor
    x1 = (_u32(x, 34 * q + 2), _u32(x, 34 * q + 6))
    x2 = (_u32(x, 0 * q + 2), _u32(x, 0 * q + 6))
    ybase = [36 * q, 36 * np.full(THREADS, v["rd37"]), 36 * (q + 2 * stride), 36 * (q + 3 * stride)]
    out = np.empty((THREADS, 8))
    for c, base in enumerate(ybase):
        dy = _f16_low(_u32(y, base))
        first = np.full(THREADS, w[0], np.uint32) if c == 0 else _u32(y, base + 4 + 8 * lane)
        second = _u32(y, base + 4)
        for r, (xw, dx) in enumerate(((x1, dx1), (x2, dx2))):
            s = _dp4a(xw[1], second, _dp4a(xw[0], first, 0))
            out[:, 2 * c + r] = (dx * dy) * s + a      # exact in float64 for these magnitudes: one rounding
    return out.astype(np.float32)


def _f16_bits(rng, n):
    """f16 scales of magnitude 2^-4 .. 2^4 (no subnormal, and the float64 sum above stays exact)."""
    mag = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-4, 4, n)
    return (mag * rng.choice([-1, 1], n)).astype(np.float16).view(np.uint16)


@pytest.mark.parametrize("cpu", ["x86-64-v3", ""])
def test_slp_broken_kernel_computes_its_sums(cpu):
    rng = np.random.default_rng()
    stride = int(rng.integers(1, 4))
    nblk = THREADS // 4
    x = rng.integers(0, 256, 34 * nblk + 8, dtype=np.uint8)
    y = rng.integers(0, 256, 36 * (nblk + 3 * stride) + 40, dtype=np.uint8)
    for blocks, size in ((x, 34), (y, 36)):
        for b in range(0, len(blocks) - 1, size):
            blocks[b:b + 2] = np.frombuffer(_f16_bits(rng, 1).tobytes(), np.uint8)
    w = rng.integers(0, 2**32, 1, dtype=np.uint32)
    vals = {n: int(rng.integers(0, 2**31)) for n in SLOTS}
    for n in ("r1", "r39", "r44", "r45", "r46", "r48", "r52", "r61", "r68", "rd4"):
        vals[n] = 0             # the block, warp and row offsets that would move x and y
    vals["r21"] = 1 << 20
    vals["rd37"] = int(rng.integers(0, nblk))
    vals["rs1"], vals["rs4"] = (int(b) for b in _f16_bits(rng, 2))
    vals["f200"] = int(np.float32(np.float16(rng.uniform(-8, 8))).view(np.uint32))
    vals.update({n: 1 << int(rng.integers(0, 5)) for n in SHFL_LANES})
    vals.update({n: 31 for n in SHFL_CLAMPS})
    vals.update({n: 0xFFFFFFFF for n in SHFL_MASKS})
    vals["rd30"] = w.ctypes.data
    v = np.array([vals[n] for n in SLOTS], np.uint64)
    out = np.full(THREADS * 8, np.nan, np.float32)
    mod = ptx.compile(DOT8, cpu=cpu, opt_level=3)
    mod.kernel("dot8").launch(1, THREADS, [x, y, v, out, 0, stride])
    want = _reference(x, y, w, vals, stride)
    np.testing.assert_array_equal(out.reshape(THREADS, 8), want)
