"""Per-architecture limits a device of a given compute capability reports (NVIDIA's own table: CCCL's
cuda/__device/arch_traits.h), so that `ZLUDA_CC` selects a coherent set of attributes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchTraits:
    shared_per_sm: int              # MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
    blocks_per_sm: int              # MAX_BLOCKS_PER_MULTIPROCESSOR
    threads_per_sm: int             # MAX_THREADS_PER_MULTIPROCESSOR
    reserved_shared: int            # RESERVED_SHARED_MEMORY_PER_BLOCK (the runtime's 1 KiB from 8.0 on)
    registers_per_block: int = 64 * 1024
    optin: int | None = None        # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN; None: shared_per_sm - reserved_shared

    @property
    def shared_per_block_optin(self) -> int:
        return self.optin if self.optin is not None else self.shared_per_sm - self.reserved_shared


K = 1024
# (major, minor) -> traits, as arch_traits.h states them (sm_60/61/62 opt in to no more than 48 KiB).
TRAITS = {
    (6, 0): ArchTraits(64 * K, 32, 2048, 0, optin=48 * K),
    (6, 1): ArchTraits(96 * K, 32, 2048, 0, optin=48 * K),
    (6, 2): ArchTraits(64 * K, 32, 2048, 0, registers_per_block=32 * K, optin=48 * K),
    (7, 0): ArchTraits(96 * K, 32, 2048, 0),
    (7, 5): ArchTraits(64 * K, 16, 1024, 0),
    (8, 0): ArchTraits(164 * K, 32, 2048, K),
    (8, 6): ArchTraits(100 * K, 16, 1536, K),
    (8, 7): ArchTraits(164 * K, 16, 1536, K),
    (8, 8): ArchTraits(100 * K, 16, 1536, K),
    (8, 9): ArchTraits(100 * K, 24, 1536, K),
    (9, 0): ArchTraits(228 * K, 32, 2048, K),
    (10, 0): ArchTraits(228 * K, 32, 2048, K),
    (10, 3): ArchTraits(228 * K, 32, 2048, K),
    (11, 0): ArchTraits(228 * K, 24, 1536, K),
    (12, 0): ArchTraits(100 * K, 24, 1536, K),
    (12, 1): ArchTraits(100 * K, 24, 1536, K),
}


def traits(cc: tuple) -> ArchTraits:
    """The traits of `cc`, else of the newest known architecture below it (a capability beyond every known
    one, such as 13.0, behaves as the newest: 12.x), else of the oldest known."""
    if cc in TRAITS:
        return TRAITS[cc]
    below = [k for k in TRAITS if k <= tuple(cc)]
    return TRAITS[max(below)] if below else TRAITS[min(TRAITS)]
