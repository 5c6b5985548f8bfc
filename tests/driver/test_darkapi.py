"""The dark-API tables in the built shim: MD2 / HMAC-MD2 against RFC 1319 and an independent Python MD2,
the integrity check against a digest recomputed here, the table layout cudart relies on, and
context-local storage with destructors run at primary-context release."""

import ctypes
import os
import random
import threading
import time

import pytest

from zluda_py import native

RFC1319 = {
    b"": "8350e5a3e24c153df2275c9f80692773",
    b"a": "32ec01ec4a6dac72c0ab96fb34c0b5d1",
    b"abc": "da853b0d3f88d99b30283a69e6ded6bb",
    b"message digest": "ab4f496bfb2a530b219ff33031fe06b0",
    b"abcdefghijklmnopqrstuvwxyz": "4e8ddff3650292ab5a4108c3aa47940b",
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789": "da33def2a42df13975352846c30338cd",
    b"1234567890" * 8: "d5976f79d83d3a0dc9806c3c66f3efd8",
}

TABLES = {
    "CUDART_INTERFACE": ("6bd5fb6c5bf4e74a8987d93912fd9df9", 13),
    "TOOLS_TLS": ("42d85a8123f6cb478298f6e78a3aecdc", 4),
    "TOOLS_RUNTIME_CALLBACK_HOOKS": ("a094798c2e742e7493f20800200c0a66", 7),
    "CONTEXT_CHECKS": ("263e88607cd2614392f6bbd5006dfa7e", 4),
    "INTEGRITY_CHECK": ("d4082055bde6704b8d34ba123c66e1f2", 3),
    "CTX_CREATE_BYPASS": ("0ca50b8c1004929a89a7d0df10e77286", 2),
    "HEAP_ACCESS": ("195bcbf4d67d024aacc51d29cea631ae", 3),
    "DEVICE_EXTENDED_RT": ("b10541e1f7c7c74a9f64f223be99f1e2", 26),
    "TOOLS_MODULE": ("6e163fbeb958444d835ce182aff1991e", 8),
}
CLS_ID = "c693336e1121df11a8c368f355d89593"
KEY = bytes.fromhex("146ADDAE53A9A752AA0841360BF55A9F")


def _md2_python(data: bytes) -> bytes:
    """RFC 1319 section 3, written from the RFC independently of src/darkapi.c."""
    s = _PI_SUBST   # the RFC's published permutation of 0..255 built from pi's digits
    pad = 16 - len(data) % 16
    data = data + bytes([pad]) * pad
    c = bytearray(16)
    last = 0
    for i in range(0, len(data), 16):
        for j in range(16):
            c[j] ^= s[data[i + j] ^ last]
            last = c[j]
    data += bytes(c)
    x = bytearray(48)
    for i in range(0, len(data), 16):
        for j in range(16):
            x[16 + j] = data[i + j]
            x[32 + j] = x[16 + j] ^ x[j]
        t = 0
        for j in range(18):
            for k in range(48):
                x[k] ^= s[t]
                t = x[k]
            t = (t + j) % 256
    return bytes(x[:16])


_PI_SUBST = bytes([
    41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19, 98, 167, 5, 243, 192, 199, 115, 140,
    152, 147, 43, 217, 188, 76, 130, 202, 30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18,
    190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122, 169, 104, 121, 145, 21, 178, 7,
    63, 148, 194, 16, 137, 11, 34, 95, 33, 128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3,
    255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198, 79, 184, 56, 210, 150, 164, 125,
    182, 118, 252, 107, 226, 156, 116, 4, 241, 69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45,
    168, 2, 27, 96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15, 85, 71, 163, 35, 221, 81, 175,
    58, 195, 92, 249, 206, 186, 197, 234, 38, 44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77,
    82, 106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74, 120, 136, 149, 139, 227, 99,
    232, 109, 233, 203, 213, 254, 59, 0, 29, 57, 242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235,
    117, 75, 10, 49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20])


def _hmac_md2_python(key: bytes, msg: bytes) -> bytes:
    k = key.ljust(16, b"\0")
    inner = _md2_python(bytes(b ^ 0x36 for b in k) + msg)
    return _md2_python(bytes(b ^ 0x5C for b in k) + inner)


@pytest.fixture(scope="module")
def cu(shim_libdir):
    lib = ctypes.CDLL(os.path.join(shim_libdir, "libcuda.so.1"))
    assert lib.cuInit(0) == 0
    assert native.loaded()
    return lib


def _c_md2(data: bytes) -> bytes:
    out = native.ffi.new("uint8_t[16]")
    native.lib.zluda_md2(data, len(data), out)
    return bytes(out)


def test_md2_rfc1319_vectors(cu):
    for msg, digest in RFC1319.items():
        assert _c_md2(msg).hex() == digest, msg
        assert _md2_python(msg).hex() == digest, msg


def test_md2_and_hmac_random_against_python(cu):
    rng = random.Random()
    for _ in range(50):
        msg = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        assert _c_md2(msg) == _md2_python(msg)
        key = bytes(rng.randrange(256) for _ in range(16))
        out = native.ffi.new("uint8_t[16]")
        native.lib.zluda_hmac_md2(key, 16, msg, len(msg), out)
        assert bytes(out) == _hmac_md2_python(key, msg)


def _table(cu, hexid):
    ptr = ctypes.c_void_p()
    r = cu.cuGetExportTable(ctypes.byref(ptr), bytes.fromhex(hexid))
    return r, ptr.value or 0


def test_export_tables_layout(cu):
    for name, (hexid, slots) in TABLES.items():
        r, addr = _table(cu, hexid)
        assert r == 0 and addr, name
        words = (ctypes.c_uint64 * slots).from_address(addr)
        assert words[0] == slots * 8, name
        assert all(words[i] for i in range(1, slots)), f"{name} has a NULL slot cudart could call"
        assert _table(cu, hexid) == (0, addr)   # fixed address: the integrity hash covers it
    r, addr = _table(cu, CLS_ID)
    assert r == 0
    cls = (ctypes.c_uint64 * 4).from_address(addr)
    assert cls[0] and cls[1] and cls[2] and cls[3] == 0
    for unknown in ("f8cff95121468b4eb9e2fb469e7c0dd9", "da9151d3" + "00" * 12, "00" * 16):
        assert _table(cu, unknown)[0] == 1   # CUDA_ERROR_INVALID_VALUE
    assert cu.cuGetExportTable(None, bytes(16)) == 1


def _integrity_fn(cu):
    _r, addr = _table(cu, TABLES["INTEGRITY_CHECK"][0])
    slot = ctypes.c_uint64.from_address(addr + 8).value
    return ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64))(slot), \
        addr, slot


def test_integrity_check_matches_recomputed_hmac(cu):
    fn, table_addr, slot = _integrity_fn(cu)
    now = int(time.time())
    out = (ctypes.c_uint64 * 2)()
    assert fn(13000, now, out) == 0 and list(out) == [0x3341181C03CB675C, 0x8ED383AA1F4CD1E8]
    assert fn(13001, now, out) == 0 and list(out) == [0x1841181C03CB675C, 0x8ED383AA1F4CD1E8]

    def expected(tid):
        version = ctypes.c_int()
        count = ctypes.c_int()
        assert cu.cuDriverGetVersion(ctypes.byref(version)) == 0
        assert cu.cuDeviceGetCount(ctypes.byref(count)) == 0
        _r, iface = _table(cu, TABLES["CUDART_INTERFACE"][0])
        msg = b"".join(x.to_bytes(4, "little") for x in (version.value, 13002, os.getpid(), tid & 0xFFFFFFFF))
        msg += b"".join(x.to_bytes(8, "little") for x in (iface, table_addr, slot, now))
        for d in range(count.value):
            uuid = ctypes.create_string_buffer(16)
            assert cu.cuDeviceGetUuid(uuid, d) == 0
            msg += uuid.raw
            for attr in (50, 33, 34):
                v = ctypes.c_int()
                assert cu.cuDeviceGetAttribute(ctypes.byref(v), attr, d) == 0
                msg += v.value.to_bytes(4, "little", signed=True)
        digest = _hmac_md2_python(KEY, msg)
        return [int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")]

    assert fn(13002, now, out) == 0
    assert list(out) == expected(threading.get_ident())
    # The thread id is the caller's: another thread gets another digest, each one right.
    got = {}

    def other():
        o = (ctypes.c_uint64 * 2)()
        got["r"] = fn(13002, now, o)
        got["v"] = list(o)
        got["tid"] = threading.get_ident()
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert got["r"] == 0 and got["v"] == expected(got["tid"]) and got["v"] != list(out)


def test_cudart_interface_primary_context_and_cls(cu):
    _r, iface = _table(cu, TABLES["CUDART_INTERFACE"][0])
    slot2 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int)(
        ctypes.c_uint64.from_address(iface + 16).value)
    h = ctypes.c_uint64()
    assert slot2(ctypes.byref(h), 0) == 0 and h.value
    flags, active = ctypes.c_uint(), ctypes.c_int()
    assert cu.cuDevicePrimaryCtxGetState(0, ctypes.byref(flags), ctypes.byref(active)) == 0
    was_active = active.value
    retained = ctypes.c_uint64()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(retained), 0) == 0
    assert retained.value == h.value
    assert slot2(ctypes.byref(h), 99) != 0   # no such device

    _r, cls_addr = _table(cu, CLS_ID)
    slots = (ctypes.c_uint64 * 3).from_address(cls_addr)
    dtor_t = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p)
    put = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, dtor_t)(slots[0])
    delete = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p)(slots[1])
    get = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64, ctypes.c_void_p)(slots[2])
    ran = []
    dtor = dtor_t(lambda c, k, v: ran.append((c, k, v)))
    value = ctypes.c_void_p()
    assert get(ctypes.byref(value), h.value, 0x1234) == 400          # absent -> INVALID_HANDLE
    assert put(h.value, 0x1234, 0x5678, dtor) == 0
    assert put(h.value, 0x9999, 0x1111, dtor_t()) == 0
    assert get(ctypes.byref(value), h.value, 0x1234) == 0 and value.value == 0x5678
    assert delete(h.value, 0x9999) == 0 and delete(h.value, 0x9999) == 400
    if not was_active:
        # the last release of the primary context runs the destructors of what is left
        assert cu.cuDevicePrimaryCtxRelease_v2(0) == 0
        assert ran == [(h.value, 0x1234, 0x5678)]
        assert get(ctypes.byref(value), h.value, 0x1234) == 400
    else:
        assert cu.cuDevicePrimaryCtxRelease_v2(0) == 0
        assert delete(h.value, 0x1234) == 0


def test_tools_records_answer_none(cu):
    """21318c60[51]/[39], which cuBLAS calls before each launch: an empty record, then 0; NULL outputs refused."""
    _r, addr = _table(cu, "21318c60971432488ca641ff7324c8f2")
    words = (ctypes.c_uint64 * 93).from_address(addr)
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64))
    s51, s39 = fn(words[51]), fn(words[39])
    obj = ctypes.create_string_buffer(64)
    rec, val = ctypes.c_uint64(), ctypes.c_uint64(random.getrandbits(64))
    assert s51(ctypes.cast(obj, ctypes.c_void_p), 0, ctypes.byref(rec)) == 0 and rec.value
    assert not any((ctypes.c_uint64 * 64).from_address(rec.value))
    assert s39(ctypes.cast(obj, ctypes.c_void_p), rec.value, ctypes.byref(val)) == 0 and val.value == 0
    assert s51(ctypes.cast(obj, ctypes.c_void_p), 0, None) == 1 and s39(None, rec.value, None) == 1


PTX_KERNELS = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry {a}() {{ ret; }}
.visible .entry {b}(.param .u32 x) {{ ret; }}
.visible .func helper() {{ ret; }}
"""


def test_tools_module_iterates_functions(cu):
    """6e163fbe[7] (ctx, module, callback, user): each kernel of the module handed to the callback as the
    CUfunction cuModuleGetFunction gives, the count answered; a bad module answers its error."""
    names = [f"k{random.getrandbits(32):08x}", f"k{random.getrandbits(32):08x}"]
    ctx = ctypes.c_uint64()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and cu.cuCtxSetCurrent(ctx) == 0
    mod = ctypes.c_uint64()
    assert cu.cuModuleLoadData(ctypes.byref(mod), PTX_KERNELS.format(a=names[0], b=names[1]).encode()) == 0
    _r, addr = _table(cu, TABLES["TOOLS_MODULE"][0])
    cb_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)
    slot7 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, cb_t, ctypes.c_void_p)(
        ctypes.c_uint64.from_address(addr + 7 * 8).value)
    seen = []
    cb = cb_t(lambda user, fn, m: seen.append((user, fn, m)))
    assert slot7(ctx.value, mod.value, cb, 0x4242) == 2
    expect = set()
    for n in names:
        f = ctypes.c_uint64()
        assert cu.cuModuleGetFunction(ctypes.byref(f), mod, n.encode()) == 0
        expect.add(f.value)
    assert {fn for _u, fn, _m in seen} == expect and all(u == 0x4242 and m == mod.value for u, _f, m in seen)
    assert slot7(ctx.value, 0xdead0000, cb, 0) == 400 and len(seen) == 2      # INVALID_HANDLE, no calls
    assert cu.cuModuleUnload(mod) == 0
    assert cu.cuDevicePrimaryCtxRelease_v2(0) == 0
