"""The CTA's reserved shared memory (%reserved_smem_offset_*): one block in the module's common shared area,
laid out only where a function reads it (cooperative groups keep their multi-warp scratch there)."""

from ptx import ast as A

# What the driver reports as CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK; cooperative groups
# count on 288 bytes from %reserved_smem_offset_1.
RESERVED_SMEM_BYTES = 1024
_PREFIX = "%reserved_smem_offset_"


def _reads_reserved(funcs) -> bool:
    return any(isinstance(st, A.Instruction) and any(isinstance(o, A.Reg) and o.name.startswith(_PREFIX)
                                                     for o in st.operands)
               for ff in funcs.values() for st in ff.body)


def reserve_smem(mctx, funcs) -> None:
    """Places the block after the common shared variables, at the same offset for every function."""
    if _reads_reserved(funcs):
        off = (mctx.common_shared_end + 15) // 16 * 16
        mctx.reserved_smem, mctx.reserved_smem_bytes = off, RESERVED_SMEM_BYTES
        mctx.common_shared_end = off + RESERVED_SMEM_BYTES


def reserved_smem_register(mctx, name):
    """The shared-window offset (or size, for _cap) a %reserved_smem_offset_* register reads, or None.
    _0 and _1 name two halves, so that two users of the region never overlap."""
    which = name[len(_PREFIX):] if name.startswith(_PREFIX) else None
    begin, size = mctx.reserved_smem, mctx.reserved_smem_bytes
    if which is None or begin is None:
        return None
    return {"begin": begin, "end": begin + size, "cap": size, "0": begin, "1": begin + size // 2}.get(which)
