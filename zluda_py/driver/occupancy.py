"""cuOccupancy*: how many blocks of a function fit on one multiprocessor, computed from the device's
attributes the way CUDA's occupancy calculator does (warps, registers, shared memory, block slots)."""

from __future__ import annotations

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver.device import device_props
from zluda_py.driver.module import (ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES as _ATTR_MAX_DYNAMIC_SHARED,
                                      ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT as _ATTR_CARVEOUT, Function,
                                      get_function)
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_CLUSTER_SIZE

_MAX_THREADS_PER_BLOCK = 1
_SHARED_PER_BLOCK = 8
_REGISTERS_PER_BLOCK = 12
_MULTIPROCESSOR_COUNT = 16
_WARP_SIZE = 10
_MAX_THREADS_PER_SM = 39
_MAX_SHARED_PER_SM = 81
_MAX_REGISTERS_PER_SM = 82
_SHARED_PER_BLOCK_OPTIN = 97
_MAX_BLOCKS_PER_SM = 106
_RESERVED_SHARED_PER_BLOCK = 111

# The occupancy calculator's architecture constants (cuda_occupancy.h) for compute capability 7.0+:
# registers go to warps in units of 256, split over 4 sub-partitions; shared memory in units of 128
# bytes from Ampere on (256 before).
_REG_UNIT = 256
_SUB_PARTITIONS = 4
_MAX_REGS_PER_THREAD = 255
_CARVEOUT_STEPS_KIB = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)   # shared/L1 splits, up to the SM's
# CUfunc_cache -> the carveout percentage it stands for (PREFER_NONE leaves the default)
_CACHE_CONFIG_CARVEOUT = {1: 100, 2: 0, 3: 50}


def _attrs(f: Function) -> dict:
    return device_props(f.device).attributes


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _smem_unit(f: Function) -> int:
    return 128 if device_props(f.device).cc_major >= 8 else 256


def _carveout_size(a: dict, size: int) -> int:
    """The smallest shared/L1 split the SM offers holding `size` bytes (the whole SM's if none)."""
    top = a.get(_MAX_SHARED_PER_SM, 100 * 1024)
    for kib in _CARVEOUT_STEPS_KIB:
        if size <= kib * 1024 <= top:
            return kib * 1024
    return top


def _preferred_shared_per_sm(f: Function, a: dict) -> int:
    """Shared memory per SM under the function's carveout preference (cuFuncSetAttribute's
    PREFERRED_SHARED_MEMORY_CARVEOUT, else its cache config); the whole SM's by default."""
    carveout = f.settable[_ATTR_CARVEOUT]
    if carveout < 0:
        carveout = _CACHE_CONFIG_CARVEOUT.get(f.cache_config, -1)
    top = a.get(_MAX_SHARED_PER_SM, 100 * 1024)
    if carveout < 0:
        return top
    return _carveout_size(a, carveout * top // 100)


def _shared_limit_per_block(f: Function, a: dict) -> int:
    """The most shared memory (runtime's reserve included) one block may take: the default per-block
    limit, or the opt-in one when cuFuncSetAttribute raised the function's dynamic maximum past it."""
    static = f.static_shared() + a.get(_RESERVED_SHARED_PER_BLOCK, 0)
    default = a.get(_SHARED_PER_BLOCK, 48 * 1024)
    opted = f.settable[_ATTR_MAX_DYNAMIC_SHARED]
    limit = a.get(_SHARED_PER_BLOCK_OPTIN, default) if opted and static + opted > default else default
    return limit + a.get(_RESERVED_SHARED_PER_BLOCK, 0)


def max_active_blocks(f: Function, block_size: int, dynamic_shared: int) -> int:
    """Resident blocks per SM: the least of the warp, block-slot, register and shared memory limits."""
    if block_size <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"block size {block_size} <= 0")
    if dynamic_shared < 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dynamic shared memory {dynamic_shared} < 0")
    if block_size > f.max_threads():
        return 0
    a = _attrs(f)
    warp = a.get(_WARP_SIZE, 32)
    warps = -(-block_size // warp)
    limit = a.get(_MAX_BLOCKS_PER_SM, 16)
    limit = min(limit, (a.get(_MAX_THREADS_PER_SM, 2048) // warp) // warps)

    # registers: whole 256-register units per warp; a block must fit the per-block file even with its
    # warps rounded up to the sub-partitions (the hardware's check), and the SM holds as many warps as
    # each sub-partition's quarter of the file does
    regs = f.num_regs()
    per_warp = _round_up(regs * warp, _REG_UNIT)
    per_block = a.get(_REGISTERS_PER_BLOCK, 65536)
    if regs > _MAX_REGS_PER_THREAD or per_warp * _round_up(warps, _SUB_PARTITIONS) > per_block \
            or per_warp * warps > per_block:
        return 0
    if per_warp:
        warps_per_part = (a.get(_MAX_REGISTERS_PER_SM, 65536) // _SUB_PARTITIONS) // per_warp
        limit = min(limit, warps_per_part * _SUB_PARTITIONS // warps)

    # shared memory: the runtime's reserve counts for every block, allocated in 128-byte units
    if f.settable[_ATTR_MAX_DYNAMIC_SHARED] and dynamic_shared > f.dynamic_shared_limit():
        return 0
    smem = _round_up(f.static_shared() + a.get(_RESERVED_SHARED_PER_BLOCK, 0) + dynamic_shared,
                     _smem_unit(f))
    if smem > _shared_limit_per_block(f, a):
        return 0
    if smem:
        per_sm = _preferred_shared_per_sm(f, a)
        if per_sm < smem:       # a preference too small for one block gives way to what the block needs
            per_sm = _carveout_size(a, smem)
        limit = min(limit, per_sm // smem)
    return max(limit, 0)


def _blocks_per_sm(value_out, hfunc, block_size, dynamic_shared, flags):
    f = get_function(hfunc)
    if not value_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "numBlocks is NULL")
    if flags & ~1:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown occupancy flags {flags:#x}")
    cmem.write_i32(value_out, max_active_blocks(f, block_size, dynamic_shared))


@export("cuOccupancyMaxActiveBlocksPerMultiprocessor")
def occupancy_max_active_blocks(value_out, hfunc, block_size, dynamic_shared):
    _blocks_per_sm(value_out, hfunc, block_size, dynamic_shared, 0)


@export("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags")
def occupancy_max_active_blocks_with_flags(value_out, hfunc, block_size, dynamic_shared, flags):
    _blocks_per_sm(value_out, hfunc, block_size, dynamic_shared, flags)


def _potential_block_size(min_grid_out, block_out, hfunc, b2d, dynamic_shared, limit, flags):
    f = get_function(hfunc)
    if not min_grid_out or not block_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "minGridSize or blockSize is NULL")
    if flags & ~1:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown occupancy flags {flags:#x}")
    a = _attrs(f)
    warp = a.get(_WARP_SIZE, 32)
    top = f.max_threads()
    if limit > 0:
        top = min(top, limit)
    full = a.get(_MAX_THREADS_PER_SM, 2048)
    shared_of = cmem.ffi.cast("size_t (*)(int)", b2d) if b2d else None
    best = (0, 0, 0)   # (threads resident per SM, block size, blocks per SM)
    # from the largest size down in warps, the first being the limit itself; a full SM ends the search
    aligned = _round_up(top, warp)
    while aligned > 0 and best[0] < full:
        size = min(top, aligned)
        dyn = int(shared_of(size)) if shared_of is not None else dynamic_shared
        blocks = max_active_blocks(f, size, dyn)
        if blocks * size > best[0]:
            best = (blocks * size, size, blocks)
        aligned -= warp
    cmem.write_i32(min_grid_out, best[2] * a.get(_MULTIPROCESSOR_COUNT, 1))
    cmem.write_i32(block_out, best[1])


@export("cuOccupancyMaxPotentialBlockSize")
def occupancy_max_potential_block_size(min_grid_out, block_out, hfunc, b2d, dynamic_shared, limit):
    _potential_block_size(min_grid_out, block_out, hfunc, b2d, dynamic_shared, limit, 0)


@export("cuOccupancyMaxPotentialBlockSizeWithFlags")
def occupancy_max_potential_block_size_with_flags(min_grid_out, block_out, hfunc, b2d, dynamic_shared, limit,
                                                  flags):
    _potential_block_size(min_grid_out, block_out, hfunc, b2d, dynamic_shared, limit, flags)


@export("cuOccupancyAvailableDynamicSMemPerBlock")
def occupancy_available_dynamic_smem(size_out, hfunc, num_blocks, block_size):
    f = get_function(hfunc)
    if not size_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "dynamicSmemSize is NULL")
    if num_blocks <= 0 or block_size <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"numBlocks {num_blocks} / blockSize {block_size} <= 0")
    if max_active_blocks(f, block_size, 0) < num_blocks:
        cmem.write_u64(size_out, 0)
        return
    a = _attrs(f)
    # the calculator's rule: one block may use the whole per-block limit, several share the SM's
    # preferred carveout in allocation units. The runtime's reserve comes off each block's share too
    # (cuda_occupancy.h forgets it, and its answer for 3 blocks then fits only 2).
    per_block_limit = _shared_limit_per_block(f, a)
    if num_blocks == 1:
        per_sm = per_block_limit
    else:
        per_sm = _preferred_shared_per_sm(f, a) or _carveout_size(a, 1)
    unit = _smem_unit(f)
    share = min(per_sm // num_blocks // unit * unit, per_block_limit)
    avail = share - a.get(_RESERVED_SHARED_PER_BLOCK, 0) - f.static_shared()
    avail = min(avail, f.dynamic_shared_limit())
    cmem.write_u64(size_out, max(avail, 0))


@export("cuOccupancyMaxActiveClusters")
def occupancy_max_active_clusters(value_out, hfunc, config):
    from zluda_py.driver.launch import cluster_limit, read_launch_config
    f = get_function(hfunc)
    if not value_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "numClusters is NULL")
    c = read_launch_config(config)
    block, shared, cluster, portable = c.block, c.shared, c.cluster, c.portable
    if cluster is None:     # the kernel's __cluster_dims__, else clusters of one
        cluster = f.cluster_requirement()[0] or (1, 1, 1)
    size = cluster[0] * cluster[1] * cluster[2]
    if size <= 0:
        raise CudaError(CUDA_ERROR_INVALID_CLUSTER_SIZE, f"cluster dimension {cluster} has a zero")
    if size > cluster_limit(f, portable):
        raise CudaError(CUDA_ERROR_INVALID_CLUSTER_SIZE, f"cluster {cluster} is too large")
    blocks = max_active_blocks(f, block[0] * block[1] * block[2], shared) * _attrs(f).get(_MULTIPROCESSOR_COUNT, 1)
    cmem.write_i32(value_out, blocks // size)


@export("cuOccupancyMaxPotentialClusterSize")
def occupancy_max_potential_cluster_size(value_out, hfunc, config):
    """The largest cluster a launch of the config could have: 8 CTAs (portable), 16 once
    CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED is set; a kernel's .reqnctapercluster is its size.
    (The CPU backend runs a cluster's CTAs as fibers of one worker: any block size fits.)"""
    from zluda_py.driver.launch import cluster_limit, read_launch_config
    f = get_function(hfunc)
    if not value_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "clusterSize is NULL")
    portable = read_launch_config(config).portable
    required = f.cluster_requirement()[0]
    size = required[0] * required[1] * required[2] if required else cluster_limit(f, portable)
    cmem.write_i32(value_out, size)
