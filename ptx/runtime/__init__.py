"""The native CPU runtime (ptxrt.c) seen from Python: run a compiled block function over a grid.

API (what ptx.host / the codegen uses):

    from ptx import runtime
    runtime.symbols() -> dict[str, int]
        addresses of the callbacks generated code calls: ptx_rt_vprintf, ptx_rt_malloc, ptx_rt_free,
        ptx_rt_trap, ptx_rt_assertfail, ptx_rt_globaltimer, ptx_rt_grid_sync, ptx_rt_yield (signatures
        and the cooperative-launch design in ptxrt.h);
        register each with llvmlite.binding.add_symbol(name, address) before compiling.
    runtime.launch(block_fn, params, grid, block, static_shared=0, dyn_shared=0, frame_bytes=0,
                   cooperative=False) -> int status
        block_fn: address of a ptx_block_fn (int); params: address (int) of the packed parameter
        buffer, or bytes/bytearray/memoryview/ctypes object holding it; grid, block: int or 1-3 ints.
        Runs the whole grid on the worker pool with the GIL released and returns when it is done:
        OK (0), TRAP (1), ASSERT (2), BAD_LAUNCH (3), FAULT (4: a memory fault, ptx_rt_last_fault) or MISALIGNED
        (5: a misaligned surface access). Device printf output has been written to
        stdout (the C FILE*) by then. cooperative=True allows ptx_rt_grid_sync (one fiber per block);
        an int is the launch's flags (COOPERATIVE, or cluster_flags(dims) for a thread-block cluster launch).
    runtime.libcalls() -> dict[str, int]
        addresses of every function LLVM may lower kernel code to a call of (libcalls.c's table: half and
        bfloat conversions, 128-bit integer builtins, libm, memcpy/memset/memmove), by the name LLVM calls
    runtime.num_workers() -> int         threads running blocks (the launching thread included)
    runtime.library_path() -> str        the built libptxrt .so
    runtime.HEADER                       path of ptxrt.h (the ABI)
    runtime.OK, TRAP, ASSERT, BAD_LAUNCH, FAULT, MISALIGNED, COOPERATIVE

The library is compiled on first use (see build.py) and loaded with ctypes.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from pathlib import Path

from ptx.runtime.build import RuntimeBuildError, ensure_built  # noqa: F401
from ptx.runtime.texture import ENTRY_POINTS as TEXTURE_ENTRY_POINTS

OK, TRAP, ASSERT, BAD_LAUNCH, FAULT, MISALIGNED = 0, 1, 2, 3, 4, 5     # ptxrt.h's PTXRT_* statuses
COOPERATIVE = 1
CLUSTER = 4


def cluster_flags(dims, explicit: bool = True) -> int:
    """Launch flags for a thread-block cluster of `dims` CTAs (ptxrt.h PTXRT_CLUSTER, PTXRT_CLUSTER_DIMS)."""
    x, y, z = _dims(dims)
    if not all(1 <= d <= 16 for d in (x, y, z)):
        raise ValueError(f"cluster dimensions {dims!r} out of range")
    return (CLUSTER if explicit else 0) | x << 8 | y << 13 | z << 18
HEADER = str(Path(__file__).resolve().parent / "ptxrt.h")

CALLBACKS = (
    "ptx_rt_vprintf",
    "ptx_rt_malloc",
    "ptx_rt_free",
    "ptx_rt_trap",
    "ptx_rt_assertfail",
    "ptx_rt_globaltimer",
    "ptx_rt_grid_sync",
    "ptx_rt_yield",
    "ptx_rt_rotate",
    "ptx_rt_cluster_wait",
    "ptx_rt_cluster_wait_end",
    "ptx_rt_cluster_rank_of",
    "ptx_rt_memcheck",
    # texture.c's ENTRY_POINTS follow (ptx/codegen/ops_tex.py, ops_surf.py)
    # devlaunch.c: cudadevrt's device functions (ptx/codegen/ops_cdp.py)
    "ptx_rt_cdp_param_buffer",
    "ptx_rt_cdp_param_buffer_v2",
    "ptx_rt_cdp_launch",
    "ptx_rt_cdp_launch_v2",
    "ptx_rt_cdp_stream_create",
    "ptx_rt_cdp_stream_destroy",
    "ptx_rt_cdp_memcpy",
    "ptx_rt_cdp_memset",
    "ptx_rt_cdp_last_error",
    "ptx_rt_cdp_error_text",
    "ptx_rt_graph_set_conditional",
) + TEXTURE_ENTRY_POINTS

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_launch_ex = None
_path: str | None = None


def _load() -> ctypes.CDLL:
    global _lib, _launch_ex, _path
    with _lock:
        if _lib is None:
            path = ensure_built()
            # RTLD_GLOBAL: code JIT-compiled or dlopened later can resolve ptx_rt_* by name too.
            lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            # No argtypes on the launch: ctypes' per-argument converters cost ~6 us a call; plain ints
            # go as C ints (masked to 32 bits, range-checked in launch()), pointers as c_void_p.
            fn = lib.ptx_rt_launch_ex
            fn.restype = ctypes.c_int32
            lib.ptx_rt_num_workers.restype = ctypes.c_uint32
            lib.ptx_rt_num_workers.argtypes = []
            _launch_ex = fn
            _path = str(path)
            _lib = lib
    return _lib


def library() -> ctypes.CDLL:
    return _lib if _lib is not None else _load()


def library_path() -> str:
    library()
    return _path


def symbols() -> dict[str, int]:
    lib = library()
    return {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in CALLBACKS}


class _Libcall(ctypes.Structure):     # ptx_libcall (libcalls.c)
    _fields_ = [("name", ctypes.c_char_p), ("address", ctypes.c_void_p)]


def libcalls() -> dict[str, int]:
    lib = library()
    table = ctypes.cast(ctypes.addressof(ctypes.c_char.in_dll(lib, "ptx_rt_libcalls")),
                        ctypes.POINTER(_Libcall))
    out = {}
    for i in itertools.count():
        if not table[i].name:
            return out
        out[table[i].name.decode()] = table[i].address


def register_kernel(block_fn: int, static_shared: int, frame_bytes: int, param_size: int) -> None:
    """What a device-side launch of the kernel at `block_fn` needs besides its code (ptxrt.h)."""
    library().ptx_rt_register_kernel(ctypes.c_uint64(block_fn), ctypes.c_uint32(static_shared),
                                     ctypes.c_uint32(frame_bytes), ctypes.c_uint32(param_size))


HINT_INTERLEAVE = 1     # ptxrt.h PTXRT_HINT_INTERLEAVE


def kernel_hints(block_fn: int, hints: int) -> None:
    """How the runtime should run the registered kernel at `block_fn`'s blocks (ptxrt.h ptx_rt_kernel_hints)."""
    library().ptx_rt_kernel_hints(ctypes.c_uint64(block_fn), ctypes.c_uint32(hints))


def unregister_kernel(block_fn: int) -> None:
    library().ptx_rt_unregister_kernel(ctypes.c_uint64(block_fn))


def num_workers() -> int:
    return int(library().ptx_rt_num_workers())


def _dims(d) -> tuple[int, int, int]:
    if isinstance(d, int):
        return d, 1, 1
    d = tuple(int(x) for x in d)
    if not 1 <= len(d) <= 3:
        raise ValueError(f"dimensions must be 1 to 3 ints, got {d!r}")
    return d + (1,) * (3 - len(d))


def _address(params):
    """(address, keepalive) of a parameter buffer given as an int or a buffer object."""
    if params is None:
        return None, None
    if isinstance(params, int):
        return params, None
    if isinstance(params, bytes):
        buf = ctypes.create_string_buffer(params, len(params) or 1)
        return ctypes.addressof(buf), buf
    if isinstance(params, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure)):
        return ctypes.addressof(params), params
    mv = memoryview(params)
    if mv.readonly:
        buf = ctypes.create_string_buffer(mv.tobytes(), mv.nbytes or 1)
        return ctypes.addressof(buf), buf
    buf = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    return ctypes.addressof(buf), buf


_void_p = ctypes.c_void_p


def launch(block_fn: int, params, grid, block, static_shared: int = 0, dyn_shared: int = 0,
           frame_bytes: int = 0, cooperative: bool = False) -> int:
    if _launch_ex is None:
        _load()
    gx, gy, gz = grid if type(grid) is tuple and len(grid) == 3 else _dims(grid)
    bx, by, bz = block if type(block) is tuple and len(block) == 3 else _dims(block)
    every = gx | gy | gz | bx | by | bz | static_shared | dyn_shared | frame_bytes
    if every < 0 or every >> 32:
        raise ValueError(f"launch dimension or size out of range: grid={grid} block={block} "
                         f"shared={static_shared}+{dyn_shared} frame={frame_bytes}")
    if type(params) is bytes and params:
        arg, keep = params, None     # ctypes passes a bytes object as a pointer to its own buffer
    else:
        addr, keep = _address(params)
        arg = _void_p(addr)
    status = _launch_ex(_void_p(block_fn), arg, gx, gy, gz, bx, by, bz, static_shared,
                        dyn_shared, frame_bytes, int(cooperative))
    del keep
    return status
