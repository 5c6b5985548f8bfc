"""zluda_py.fatbin against real nvcc output (every compress mode, gencode combos, an executable's
.nv_fatbin section) and against corrupt images, which must fail with a CudaError and nothing else."""

import ctypes
import os
import random
import shutil
import struct
import subprocess

import pytest

from zluda_py import fatbin
from zluda_py.errors import (CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_NO_BINARY_FOR_GPU, CudaError)

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
pytestmark = pytest.mark.skipif(not os.path.exists(NVCC), reason="nvcc (CUDA toolkit) is not installed")

KERNEL = r"""
extern "C" __global__ void scale(float *x, float k, int n) {
#if __CUDA_ARCH__ >= 860
    const float tag = 86.0f;
#else
    const float tag = 75.0f;
#endif
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * k + tag;
}
"""
MAIN = r"""
#include <cstdio>
int main() { printf("built\n"); return 0; }
"""


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    d = tmp_path_factory.mktemp("fatbin")
    (d / "k.cu").write_text(KERNEL)
    (d / "exe.cu").write_text(KERNEL + MAIN)

    def run(out, *flags, src="k.cu"):
        path = d / out
        if not path.exists():
            subprocess.run([NVCC, *flags, "-o", str(path), str(d / src)], check=True, capture_output=True)
        return path.read_bytes()
    return run


def _fatbin(build, name, *flags):
    return build(name, "-fatbin", *flags)


@pytest.mark.parametrize("mode,flag", [("default", 0x8000), ("size", 0x8000), ("speed", 0x2000), ("none", 0)])
def test_compress_modes(build, mode, flag):
    data = _fatbin(build, f"k86_{mode}.fatbin", "-gencode", "arch=compute_86,code=compute_86",
                   f"--compress-mode={mode}")
    img = fatbin.parse_image(data)
    assert [(e.kind, e.sm) for e in img.entries] == [(fatbin.KIND_PTX, 86)]
    assert img.entries[0].flags & (fatbin.FLAG_LZ4 | fatbin.FLAG_ZSTD) == flag
    text = fatbin.select_ptx(img, 86)
    assert ".visible .entry scale(" in text and "\0" not in text
    assert "0f42AC0000" in text  # 86.0f: the sm_86 code path


@pytest.mark.parametrize("mode,blocked", [("default", "zstandard"), ("speed", "lz4.block")])
def test_missing_codec_is_named(build, monkeypatch, mode, blocked):
    """An installation without a codec package (a source tree before scripts/setup) names the package to install,
    not a corrupt image."""
    import sys
    data = _fatbin(build, f"k86_{mode}.fatbin", "-gencode", "arch=compute_86,code=compute_86",
                   f"--compress-mode={mode}")
    monkeypatch.setitem(sys.modules, blocked, None)
    with pytest.raises(CudaError) as got:
        fatbin.select_ptx(fatbin.parse_image(data), 86)
    pkg = blocked.split(".")[0]
    assert got.value.code == CUDA_ERROR_INVALID_IMAGE
    assert f"needs the Python package {pkg}, which is not installed" in str(got.value)
    assert "corrupt" not in str(got.value)


def test_pick_highest_sm_not_above_device(build):
    data = _fatbin(build, "k_multi.fatbin", "-gencode", "arch=compute_75,code=compute_75",
                   "-gencode", "arch=compute_86,code=compute_86", "-gencode", "arch=compute_90,code=compute_90")
    img = fatbin.parse_image(data)
    assert sorted(e.sm for e in img.entries) == [75, 86, 90]
    assert "0f42AC0000" in fatbin.select_ptx(img, 89)           # 86 chosen for an sm_89 device
    assert "0f42960000" in fatbin.select_ptx(img, 80)           # 75.0f: 75 chosen for sm_80
    with pytest.raises(CudaError) as e:
        fatbin.select_ptx(img, 70)
    assert e.value.code == CUDA_ERROR_NO_BINARY_FOR_GPU and "sm_75" in e.value.message


def test_default_flags_sass_plus_ptx(build):
    img = fatbin.parse_image(_fatbin(build, "k_default.fatbin"))
    assert {(e.kind, e.sm) for e in img.entries} == {(fatbin.KIND_ELF, 75), (fatbin.KIND_PTX, 75)}
    assert "0f42960000" in fatbin.select_ptx(img, 86)


def test_sass_only_names_sm(build):
    img = fatbin.parse_image(_fatbin(build, "k_sass.fatbin", "-gencode", "arch=compute_86,code=sm_86"))
    with pytest.raises(CudaError) as e:
        fatbin.select_ptx(img, 86, "k_sass")
    assert e.value.code == CUDA_ERROR_NO_BINARY_FOR_GPU
    assert "SASS sm_86" in e.value.message and "k_sass" in e.value.message


def test_newer_ptx_refused(build):
    img = fatbin.parse_image(_fatbin(build, "k90.fatbin", "-gencode", "arch=compute_90,code=compute_90"))
    with pytest.raises(CudaError) as e:
        fatbin.select_ptx(img, 86)
    assert e.value.code == CUDA_ERROR_NO_BINARY_FOR_GPU and "sm_90" in e.value.message


def test_cubin_is_sass_only(build):
    img = fatbin.parse_image(build("k.cubin", "-cubin", "-arch=sm_86"))
    assert img.cubin_sm == [86]
    with pytest.raises(CudaError) as e:
        fatbin.select_ptx(img, 86)
    assert e.value.code == CUDA_ERROR_NO_BINARY_FOR_GPU


def test_executable_nv_fatbin_section(build):
    data = build("exe", "-gencode", "arch=compute_86,code=compute_86", "-gencode", "arch=compute_75,code=sm_75",
                 src="exe.cu")
    img = fatbin.parse_image(data)
    assert img.fmt == "elf"
    assert (fatbin.KIND_PTX, 86) in {(e.kind, e.sm) for e in img.entries}
    assert "0f42AC0000" in fatbin.select_ptx(img, 86)


def _at(data: bytes):
    """A C buffer holding `data` (kept alive by the caller) and its address."""
    buf = ctypes.create_string_buffer(data, len(data) + 16)
    return buf, ctypes.addressof(buf)


def test_read_from_pointer_every_format(build):
    raw = _fatbin(build, "k86_speed.fatbin", "-gencode", "arch=compute_86,code=compute_86", "--compress-mode=speed")
    fb, fb_addr = _at(raw)
    # cudart's wrapper: {magic, version 1, data, filename}
    wrap, wrap_addr = _at(struct.pack("<IIQQ", fatbin.WRAPPER_MAGIC, 1, fb_addr, 0))
    # an empty fatbin header in front of the real one, as in an executable's section
    both, both_addr = _at(struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, 0) + raw)
    ptx_text = fatbin.select_ptx(fatbin.parse_image(raw), 86)
    txt, txt_addr = _at(ptx_text.encode())
    for addr in (fb_addr, wrap_addr, both_addr, txt_addr):
        assert fatbin.load_ptx_from_address(addr, 86) == ptx_text
    exe = build("exe", "-gencode", "arch=compute_86,code=compute_86", "-gencode", "arch=compute_75,code=sm_75",
                src="exe.cu")
    e, e_addr = _at(exe)
    assert "0f42AC0000" in fatbin.load_ptx_from_address(e_addr, 86)
    # wrapper version 2: the extra NULL-terminated list of prelinked fatbins
    arr, arr_addr = _at(struct.pack("<QQ", fb_addr, 0))
    wrap2, wrap2_addr = _at(struct.pack("<IIQQ", fatbin.WRAPPER_MAGIC, 2, fb_addr, arr_addr))
    assert len(fatbin.read_image(wrap2_addr).entries) == 2
    # an -rdc executable's .nv_fatbin can be one empty header followed by another section (module id
    # strings): the code is in the prelinked list alone
    lone, lone_addr = _at(struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, 0) + b"def 1_ab12cd34_5\0")
    wrap3, wrap3_addr = _at(struct.pack("<IIQQ", fatbin.WRAPPER_MAGIC, 2, lone_addr, arr_addr))
    image = fatbin.read_image(wrap3_addr)
    assert len(image.entries) == 1 and image.link_groups[0] == []
    assert fatbin.select_ptx(image, 86) == ptx_text


def _expect_image_error(data: bytes):
    with pytest.raises(CudaError) as e:
        fatbin.load_ptx_from_bytes(data, 86)
    buf, addr = _at(data)
    with pytest.raises(CudaError) as e2:
        fatbin.load_ptx_from_address(addr, 86)
    return e.value, e2.value


def test_corrupt_images(build):
    zstd = _fatbin(build, "k86_default.fatbin", "-gencode", "arch=compute_86,code=compute_86",
                   "--compress-mode=default")
    lz4 = _fatbin(build, "k86_speed.fatbin", "-gencode", "arch=compute_86,code=compute_86", "--compress-mode=speed")
    bad_magic = struct.pack("<I", fatbin.FATBIN_MAGIC ^ 0x100) + zstd[4:]
    assert _expect_image_error(bad_magic)[0].code == CUDA_ERROR_INVALID_IMAGE
    # truncated: cut inside the entry payload (bytes only: a pointer cannot be "short")
    for cut in (20, 16 + 40, len(zstd) - 50):
        with pytest.raises(CudaError) as e:
            fatbin.load_ptx_from_bytes(zstd[:cut], 86)
        assert e.value.code == CUDA_ERROR_INVALID_IMAGE
    # lying sizes: entries size bigger than the data, entry header size 0, payload size huge
    lie1 = zstd[:8] + struct.pack("<Q", len(zstd) * 4) + zstd[16:]
    with pytest.raises(CudaError) as e:
        fatbin.load_ptx_from_bytes(lie1, 86)
    assert e.value.code == CUDA_ERROR_INVALID_IMAGE
    lie2 = zstd[:16 + 4] + struct.pack("<I", 0) + zstd[24:]
    lie3 = zstd[:16 + 8] + struct.pack("<Q", 1 << 40) + zstd[32:]
    lie4 = zstd[:16 + 56] + struct.pack("<Q", 1 << 50) + zstd[16 + 64:]
    lie5 = zstd[:16 + 56] + struct.pack("<Q", 100) + zstd[16 + 64:]   # smaller than the real PTX
    for data in (lie2, lie3, lie4, lie5):
        for err in _expect_image_error(data):
            assert err.code == CUDA_ERROR_INVALID_IMAGE
    # bad compressed streams: flip bytes inside the payload
    rng = random.Random()
    for good in (zstd, lz4):
        body = 16 + 80
        for _ in range(20):
            data = bytearray(good)
            for _ in range(3):
                data[body + rng.randrange(0, 64)] ^= 1 + rng.randrange(255)
            try:
                fatbin.load_ptx_from_bytes(bytes(data), 86)
            except CudaError as e:
                assert e.code == CUDA_ERROR_INVALID_IMAGE
        garbage = bytearray(good)
        garbage[body:body + 8] = b"\xff" * 8
        for err in _expect_image_error(bytes(garbage)):
            assert err.code == CUDA_ERROR_INVALID_IMAGE
    # a wrapper with a bad version or NULL data
    buf, addr = _at(struct.pack("<IIQQ", fatbin.WRAPPER_MAGIC, 7, 0, 0))
    with pytest.raises(CudaError):
        fatbin.read_image(addr)
    # binary garbage is no PTX
    for err in _expect_image_error(bytes([1, 2, 3, 200, 9, 0])):
        assert err.code == CUDA_ERROR_INVALID_IMAGE


def test_random_mutations_only_raise_cuda_error(build):
    samples = [_fatbin(build, "k_default.fatbin"),
               _fatbin(build, "k86_speed.fatbin", "-gencode", "arch=compute_86,code=compute_86", "--compress-mode=speed"),
               build("k.cubin", "-cubin", "-arch=sm_86")]
    rng = random.Random()
    for _ in range(300):
        data = bytearray(rng.choice(samples))
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data) if rng.random() < 0.3 else min(len(data), 200))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[:rng.randrange(len(data))]
        try:
            fatbin.load_ptx_from_bytes(bytes(data), 86)
        except CudaError:
            pass


def test_pointer_with_lying_sizes_never_faults(build):
    """Through a raw pointer the size is whatever the headers say: sizes past mapped memory fail cleanly."""
    raw = _fatbin(build, "k86_speed.fatbin", "-gencode", "arch=compute_86,code=compute_86", "--compress-mode=speed")
    for declared in (1 << 28, (1 << 31) - 64):
        buf, addr = _at(raw[:8] + struct.pack("<Q", declared) + raw[16:])
        with pytest.raises(CudaError) as e:
            fatbin.read_image(addr)
        assert e.value.code == CUDA_ERROR_INVALID_IMAGE
    # a wrapper whose data pointer is not mapped (page 1 never is)
    wrap, wrap_addr = _at(struct.pack("<IIQQ", fatbin.WRAPPER_MAGIC, 1, 0x1000, 0))
    with pytest.raises(CudaError) as e:
        fatbin.read_image(wrap_addr)
    assert e.value.code == CUDA_ERROR_INVALID_IMAGE
    # an ELF whose section table lies far beyond the image
    cubin = build("k.cubin", "-cubin", "-arch=sm_86")
    bad = bytearray(cubin)
    bad[40:48] = struct.pack("<Q", 1 << 30)          # e_shoff
    buf, addr = _at(bytes(bad))
    with pytest.raises(CudaError) as e:
        fatbin.read_image(addr)
    assert e.value.code == CUDA_ERROR_INVALID_IMAGE


def test_ptx_text_for_newer_target_refused():
    from zluda_py.errors import CUDA_ERROR_INVALID_PTX
    for target, ok in (("sm_90", False), ("sm_90a", False), ("sm_86", True), ("sm_75", True)):
        text = f".version 8.0\n.target {target}\n.address_size 64\n".encode()
        if ok:
            assert fatbin.load_ptx_from_bytes(text, 86).startswith(".version")
        else:
            with pytest.raises(CudaError) as e:
                fatbin.load_ptx_from_bytes(text, 86)
            assert e.value.code == CUDA_ERROR_INVALID_PTX and "sm_90" in e.value.message
