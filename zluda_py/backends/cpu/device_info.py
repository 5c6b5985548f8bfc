"""Facts about the host machine that make up the CPU device: name, a stable UUID, memory, cores, clock."""

import hashlib
import os
import platform
import socket

from zluda_py import log

DEFAULT_CC = (8, 6)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _machine_id() -> str:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as f:
                text = f.read().strip()
                if text:
                    return text
        except OSError:
            pass
    return socket.gethostname()


def device_uuid(ordinal: int = 0) -> bytes:
    """16 bytes, the same on every run on this machine (cudart hashes it into its integrity check)."""
    seed = f"zluda-py cpu device {ordinal}|{_machine_id()}|{cpu_model()}".encode()
    return hashlib.sha256(seed).digest()[:16]


def _cgroup_limit() -> int:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
            if text.isdigit():
                return int(text)
        except OSError:
            pass
    return 1 << 62


def total_memory() -> int:
    """Physical memory, capped by the container's memory limit."""
    phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(phys, _cgroup_limit())


def available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return total_memory()


def clock_khz() -> int:
    for path in ("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
                 "/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"):
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return int(float(line.split(":", 1)[1]) * 1000)
    except (OSError, ValueError):
        pass
    return 2_000_000


def l2_cache_bytes() -> int:
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            text = f.read().strip().upper()
        scale = {"K": 1024, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        return 4 << 20


def compute_capability() -> tuple:
    """ZLUDA_CC="major.minor" (default 8.6): what PTX targets and cudart's checks see."""
    text = os.environ.get("ZLUDA_CC", "").strip()
    if not text:
        return DEFAULT_CC
    try:
        major, minor = (int(x) for x in text.split("."))
        if major > 0 and 0 <= minor < 10:
            return major, minor
    except ValueError:
        pass
    log.once("ZLUDA_CC", f"ZLUDA_CC={text!r} is not 'major.minor'; using {DEFAULT_CC[0]}.{DEFAULT_CC[1]}")
    return DEFAULT_CC
