"""cuOccupancy*: how many blocks of a function fit on one multiprocessor, computed from the device's
attributes the way CUDA's occupancy calculator does (warps, registers, shared memory, block slots)."""

from __future__ import annotations

from zluda_py import cmem
from zluda_py.dispatch import export
from zluda_py.driver.device import device_props
from zluda_py.driver.module import Function, get_function
from zluda_py.errors import CudaError, CUDA_ERROR_INVALID_VALUE

_MULTIPROCESSOR_COUNT = 16
_WARP_SIZE = 10
_MAX_THREADS_PER_SM = 39
_MAX_SHARED_PER_SM = 81
_MAX_REGISTERS_PER_SM = 82
_MAX_BLOCKS_PER_SM = 106
_RESERVED_SHARED_PER_BLOCK = 111


def _attrs(f: Function) -> dict:
    return device_props(f.device).attributes


def max_active_blocks(f: Function, block_size: int, dynamic_shared: int) -> int:
    if block_size <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"block size {block_size} <= 0")
    if block_size > f.max_threads():
        return 0
    a = _attrs(f)
    warp = a.get(_WARP_SIZE, 32)
    warps = -(-block_size // warp)
    limit = a.get(_MAX_BLOCKS_PER_SM, 16)
    limit = min(limit, (a.get(_MAX_THREADS_PER_SM, 2048) // warp) // warps)
    regs = max(f.info.num_regs, 1) * warps * warp
    limit = min(limit, a.get(_MAX_REGISTERS_PER_SM, 65536) // regs)
    shared = f.info.static_shared_bytes + dynamic_shared
    if shared:
        if dynamic_shared > f.dynamic_shared_limit():
            return 0
        per_block = shared + a.get(_RESERVED_SHARED_PER_BLOCK, 0)
        limit = min(limit, a.get(_MAX_SHARED_PER_SM, 100 * 1024) // per_block)
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
    shared_of = cmem.ffi.cast("size_t (*)(int)", b2d) if b2d else None
    best = (0, 0, 0)   # (threads resident per SM, block size, blocks per SM)
    size = (top // warp) * warp or top
    while size > 0:
        dyn = shared_of(size) if shared_of is not None else dynamic_shared
        blocks = max_active_blocks(f, size, dyn)
        if blocks * size > best[0]:
            best = (blocks * size, size, blocks)
        size = size - warp if size > warp else 0
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
    per_block = a.get(_MAX_SHARED_PER_SM, 100 * 1024) // num_blocks - a.get(_RESERVED_SHARED_PER_BLOCK, 0)
    avail = min(per_block - f.info.static_shared_bytes, f.dynamic_shared_limit())
    cmem.write_u64(size_out, max(avail, 0))


@export("cuOccupancyMaxActiveClusters")
def occupancy_max_active_clusters(value_out, hfunc, config):
    from zluda_py.driver.launch import read_launch_config
    f = get_function(hfunc)
    if not value_out:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "numClusters is NULL")
    _grid, block, shared, _s, _coop, cluster = read_launch_config(config)
    size = cluster[0] * cluster[1] * cluster[2]
    if size <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cluster dimension {cluster} has a zero")
    blocks = max_active_blocks(f, block[0] * block[1] * block[2], shared) * _attrs(f).get(_MULTIPROCESSOR_COUNT, 1)
    cmem.write_i32(value_out, blocks // size)
