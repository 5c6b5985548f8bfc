"""Every nvcc-built sample in samples/, in each build flavour, runs unmodified through `zluda-py run` and passes.

The samples are built once per session by scripts/build_samples (skipped when nvcc is absent).
A sample passes when it exits 0, its last line is PASS, and (for the printf sample) the lines the
device printed appear, in order, exactly as a real GPU prints them.
"""

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = ROOT / "samples"
BUILD_DIR = SAMPLES_DIR / "build"
FLAVOURS = ("ptx", "default", "compressed")
SAMPLES = sorted(p.stem for p in SAMPLES_DIR.glob("*.cu"))
# Seconds per sample run; the CPU emulator compiles every kernel on first use.
RUN_TIMEOUT = int(os.environ.get("ZLUDA_SAMPLE_TIMEOUT", "600"))

# What device printf must produce (as NVIDIA's driver prints it), in this order.
EXPECTED_LINES = {
    "device_printf": [
        "printf: int=42 unsigned=3735928559 hex=deadbeef HEX=DEADBEEF",
        "printf: ll=-1234567890123 neg=-42 char=Z str=hello pct=%",
        "printf: float=3.142 double=2.718282 exp=2.72e+00 width=[   3.1] left=[42   ]",
        "printf: launch 0 block 0 of 1 threads 64",
        "printf: launch 1 block 0 of 1 threads 64",
        "printf: launch 2 block 0 of 1 threads 64",
        "printf: data[0] = 1",
        "printf: data[1] = 4",
        "printf: data[2] = 9",
        "printf: data[3] = 16",
        "printf: data[4] = 25",
        "printf: from constant memory",
    ],
}


def _first_error_line(text: str) -> str:
    for line in text.splitlines():
        low = line.lower()
        if any(k in low for k in ("error", "mismatch", "failed", "fail", "traceback", "exception")):
            return line.strip()
    return ""


def _check_lines_in_order(stdout_lines: list[str], expected: list[str]) -> list[str]:
    """Expected lines missing from stdout, or out of order (each must follow the previous one)."""
    missing, pos = [], 0
    for want in expected:
        try:
            pos = stdout_lines.index(want, pos) + 1
        except ValueError:
            missing.append(want)
    return missing


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("name", SAMPLES)
def test_sample_runs_through_shim(built_samples, shim_libdir, name, flavour):
    binary = built_samples / flavour / name
    assert binary.exists(), f"{binary} was not built"
    env = dict(os.environ)
    env.setdefault("ZLUDA_LOG", "1")  # a failing call names itself on stderr
    try:
        proc = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", str(binary)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT, errors="replace")
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"")
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        pytest.fail(f"{flavour}/{name} timed out after {RUN_TIMEOUT}s; stdout tail:\n{out[-2000:]}")
    lines = [ln.rstrip("\r") for ln in proc.stdout.splitlines()]
    nonempty = [ln for ln in lines if ln.strip()]
    summary = (f"{flavour}/{name}: exit {proc.returncode}; first error: "
               f"{_first_error_line(proc.stdout) or _first_error_line(proc.stderr) or '(none)'}\n"
               f"--- stdout (tail) ---\n{proc.stdout[-3000:]}\n--- stderr (tail) ---\n{proc.stderr[-3000:]}")
    assert proc.returncode == 0, summary
    assert nonempty and nonempty[-1].strip() == "PASS", summary
    missing = _check_lines_in_order(lines, EXPECTED_LINES.get(name, []))
    assert not missing, f"device printf lines missing or out of order: {missing}\n{summary}"


def _elf_section(path: Path, name: str) -> bytes | None:
    """The bytes of one section of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF", f"{path} is not an ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_off = headers[shstrndx][4]
    for h in headers:
        end = data.index(b"\0", names_off + h[0])
        if data[names_off + h[0]:end].decode() == name:
            return data[h[4]:h[4] + h[5]]
    return None


def _fatbin_entries(blob: bytes, headers: int = 1 << 30) -> list[tuple[int, int, int]]:
    """(kind, sm, flags) of every entry of the first `headers` fatbin headers in a .nv_fatbin section (layout:
    fatbin.md)."""
    out, off = [], 0
    while off + 16 <= len(blob) and headers > 0:
        headers -= 1
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", blob, off)
        if magic != 0xBA55ED50:
            break
        e, end = off + header_size, off + header_size + size
        while e < end:
            kind, _v, entry_header, padded = struct.unpack_from("<HHII", blob, e)
            compressed, = struct.unpack_from("<I", blob, e + 16)
            sm, = struct.unpack_from("<I", blob, e + 28)
            flags, = struct.unpack_from("<Q", blob, e + 40)
            out.append((kind, sm, flags))
            e += entry_header + max(padded, compressed)
        off = end
    return out


PTX_KIND, ELF_KIND, LZ4, ZSTD = 1, 2, 0x2000, 0x8000


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_flavour_images(built_samples, flavour):
    """Each flavour embeds what it promises: PTX-only zstd, nvcc's SASS+PTX default, PTX-only LZ4."""
    cc = os.environ.get("ZLUDA_CC", "8.6").strip()
    cc = int(cc.replace(".", "")) if "." in cc else int(cc)
    for name in SAMPLES:
        blob = _elf_section(built_samples / flavour / name, ".nv_fatbin")
        assert blob, f"{flavour}/{name} has no .nv_fatbin section"
        entries = _fatbin_entries(blob)
        if "-rdc=true" in (SAMPLES_DIR / f"{name}.cu").read_text().split("\n", 1)[0]:
            # relocatable device code: .nv_fatbin holds the device-linked SASS (or nothing); the sample's own
            # fatbin comes first in __nv_relfatbin, then libcudadevrt's
            entries += _fatbin_entries(_elf_section(built_samples / flavour / name, "__nv_relfatbin"), headers=1)
        ptx = [e for e in entries if e[0] == PTX_KIND]
        elf = [e for e in entries if e[0] == ELF_KIND]
        assert ptx, f"{flavour}/{name}: no PTX entry in {entries}"
        if flavour == "default":
            assert elf and all(sm == 75 for _, sm, _ in entries), f"{flavour}/{name}: {entries}"
        else:
            codec = ZSTD if flavour == "ptx" else LZ4
            assert not elf, f"{flavour}/{name} carries SASS: {entries}"
            assert all(sm == cc and flags & codec for _, sm, flags in ptx), f"{flavour}/{name}: {entries}"


def test_sample_count():
    """The suite promises at least 25 samples."""
    assert len(SAMPLES) >= 25, SAMPLES


def test_rdc_sample_on_a_device_newer_than_the_device_runtimes_ptx(built_samples, shim_libdir):
    """libcudadevrt.a carries NVIDIA's device runtime as PTX for sm_121, over the driver's private cnp*
    calls: on a device of 13.0 it was linked in beside the program's own PTX and the load failed. The shim
    implements the runtime's entry points itself, so that PTX is never taken, whatever the capability."""
    env = dict(os.environ, ZLUDA_CC="13.0", ZLUDA_LOG="1")
    proc = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--",
                           str(built_samples / "default" / "dynamic_parallelism")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("PASS"), proc.stdout[-2000:] + proc.stderr[-2000:]


def test_sample_runs_with_an_empty_environment(built_samples, shim_libdir, tmp_path):
    """A program started with no environment at all (`env -i`): no PATH, on which gcc finds its linker; the kernel
    cache off, so the kernels are compiled and linked in that process."""
    env = {"ZLUDA_JIT_CACHE": "0", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", str(built_samples / "ptx" / "vector_add")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("PASS"), proc.stdout[-2000:] + proc.stderr[-2000:]
