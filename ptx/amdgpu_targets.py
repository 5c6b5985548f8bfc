"""The AMD GPU targets the amdgcn code generator knows: LLVM cpu name, wave size, ELF machine byte,
and how a ROCm `gcnArchName` ("gfx90a:sramecc+:xnack-") or "gfx1100:cumode" becomes a target."""

from __future__ import annotations

from dataclasses import dataclass

from ptx.errors import PTXUnsupportedError


@dataclass(frozen=True)
class AmdgpuTarget:
    cpu: str                 # LLVM processor, e.g. "gfx1100"
    family: str              # "RDNA3", "CDNA2", ...
    wave: int                # wavefront size the code is compiled for (32 or 64)
    mach: int                # EF_AMDGPU_MACH_* byte in e_flags
    features: str = ""       # extra LLVM target features (sramecc/xnack from gcnArchName)

    @property
    def llvm_features(self) -> str:
        wave = "+wavefrontsize32" if self.wave == 32 else ""
        return ",".join(x for x in (wave, self.features) if x)

    @property
    def key(self) -> str:
        return f"{self.cpu}|{self.llvm_features}"


# (cpu, family, wave, EF_AMDGPU_MACH byte) -- values from LLVM's ELF.h
_TABLE = [
    ("gfx1010", "RDNA1", 32, 0x33), ("gfx1011", "RDNA1", 32, 0x34), ("gfx1012", "RDNA1", 32, 0x35),
    ("gfx1030", "RDNA2", 32, 0x36), ("gfx1031", "RDNA2", 32, 0x37), ("gfx1032", "RDNA2", 32, 0x38),
    ("gfx1033", "RDNA2", 32, 0x39), ("gfx1034", "RDNA2", 32, 0x3e), ("gfx1035", "RDNA2", 32, 0x3d),
    ("gfx1036", "RDNA2", 32, 0x45),
    ("gfx1100", "RDNA3", 32, 0x41), ("gfx1101", "RDNA3", 32, 0x46), ("gfx1102", "RDNA3", 32, 0x47),
    ("gfx1103", "RDNA3", 32, 0x44), ("gfx1150", "RDNA3.5", 32, 0x43), ("gfx1151", "RDNA3.5", 32, 0x4a),
    ("gfx1200", "RDNA4", 32, 0x48), ("gfx1201", "RDNA4", 32, 0x4e),
    ("gfx908", "CDNA1", 64, 0x30), ("gfx90a", "CDNA2", 64, 0x3f), ("gfx942", "CDNA3", 64, 0x4c),
    ("gfx950", "CDNA4", 64, 0x4f),
]
TARGETS = {cpu: AmdgpuTarget(cpu, fam, wave, mach) for cpu, fam, wave, mach in _TABLE}
# the five targets the project verifies on every change
PRIMARY = ("gfx1030", "gfx1100", "gfx1201", "gfx90a", "gfx942")


# Target features a target string (or ZLUDA_AMDGPU_FEATURES) may turn on or off. cumode: workgroups run in
# CU mode instead of WGP mode on RDNA (no per-CU L0 invalidate after barriers: what some ROCm setups and
# the emulator need); the code runs on any RDNA GPU either way.
FEATURES = ("sramecc", "xnack", "cumode")
RDNA_ONLY = ("cumode",)


def _feature(flag, spec):
    """'sramecc+' / 'xnack-' (gcnArchName), '+cumode' / '-cumode' (LLVM), 'cumode' (on) -> (name, '+'|'-')."""
    name, sign = flag, "+"
    if flag[:1] in "+-":
        name, sign = flag[1:], flag[0]
    elif flag[-1:] in "+-":
        name, sign = flag[:-1], flag[-1]
    if name not in FEATURES:
        raise PTXUnsupportedError(f"unknown target feature {flag!r} in {spec!r} (known: {', '.join(FEATURES)})")
    return name, sign


def with_features(tgt: AmdgpuTarget, flags, spec=None) -> AmdgpuTarget:
    """tgt with the features `flags` (an iterable, or a string split at ',' and ':') added; a feature
    given twice with different signs is an error."""
    if isinstance(flags, str):
        flags = [f for f in flags.replace(":", ",").split(",") if f.strip()]
    have = dict(_feature(f, f) for f in tgt.features.split(",") if f)
    for fl in flags:
        name, sign = _feature(fl.strip(), spec or fl)
        if have.get(name, sign) != sign:
            raise PTXUnsupportedError(f"target feature {name} asked both on and off ({spec or fl})")
        if name in RDNA_ONLY and not tgt.family.startswith("RDNA"):
            raise PTXUnsupportedError(f"{name} applies to RDNA GPUs (WGP mode), not {tgt.cpu} ({tgt.family})")
        have[name] = sign
    feats = ",".join(f"{sign}{name}" for name, sign in have.items())
    return AmdgpuTarget(tgt.cpu, tgt.family, tgt.wave, tgt.mach, feats)


def parse_target(spec: str) -> AmdgpuTarget:
    """'gfx1100', 'amdgcn:gfx1100', 'gfx1100:cumode' or a gcnArchName like 'gfx90a:sramecc+:xnack-'."""
    s = spec.strip()
    if s.startswith("amdgcn:"):
        s = s[len("amdgcn:"):]
    elif s.startswith("amdgcn-amd-amdhsa--"):
        s = s[len("amdgcn-amd-amdhsa--"):]
    cpu, *flags = s.split(":")
    base = TARGETS.get(cpu)
    if base is None:
        if cpu.startswith(("gfx6", "gfx7", "gfx8", "gfx900", "gfx902", "gfx904", "gfx906")):
            raise PTXUnsupportedError(f"AMD GPU {cpu} (GCN / Polaris / Vega) is not supported: "
                                      "it lacks the instructions CUDA code needs (see the README, section AMD GPUs)")
        raise PTXUnsupportedError(f"unknown AMD GPU target {spec!r} (known: {', '.join(TARGETS)})")
    return with_features(base, [fl for fl in flags if fl], spec)


def is_amdgpu_target(spec: str) -> bool:
    s = spec.strip()
    return s.startswith(("gfx", "amdgcn:", "amdgcn-amd-amdhsa"))
