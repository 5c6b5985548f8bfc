"""The native launch queue (launchq.c) seen from Python: built once per source hash with the system C compiler,
loaded through cffi's ABI mode (each call releases the GIL). `get()` is None when it cannot be built."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import cffi

from zluda_py import cffi_abi, log

HERE = Path(__file__).resolve().parent
CFLAGS = ["-O2", "-shared", "-fPIC", "-pthread", "-std=gnu11"]
# How long a finished launcher, or a host thread waiting on a launch, spins before it sleeps: a loop of
# launch + synchronize comes back within this, and an idle process burns nothing after it.
SPIN_NS = 50_000

ffi = cffi.FFI()
ffi.cdef("""
    int zq_init(uintptr_t launch_ex, uintptr_t last_fault, uintptr_t reserve, uint64_t spin_ns, uint32_t nlanes);
    uint64_t zq_submit(uint64_t prev, uintptr_t fn, const char *params, uint32_t nparams, uint32_t gx,
                       uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t static_shared,
                       uint32_t dyn_shared, uint32_t frame_bytes, uint32_t flags, uint64_t *state);
    void zq_wait(uint64_t ticket, uint64_t spin_ns);
    uint64_t zq_stamp(uint64_t prev, uint64_t *dst);
    uint64_t zq_after(uint64_t prev, uint64_t ticket);
    uint64_t zq_outstanding(void);
    uint32_t zq_pack(char *dst, uintptr_t kernel_params, uint32_t *plan, uint32_t n);
    uint64_t *zq_done_address(void);
    int zq_cas(uint32_t *claim, uint32_t old, uint32_t new_);
    int zq_grace(uint32_t *claim, uint32_t open, uint64_t grace_ns);
    void zq_post(uint64_t *slot, uint32_t *claim, uint32_t open);
    int zq_park(uint64_t *slot, uint32_t seen, uint64_t spin_ns, uint64_t timeout_ns, uint64_t grace_ns);
    void zq_profile(int on);
    int zq_profile_get(uint32_t i, uint64_t *out);

    void zq_set_busy_counter(int64_t *counter);
    void *zq_stream_create(uint64_t ctx, uint64_t handle, uint64_t thread, int32_t blocking);
    void zq_stream_release(void *s);
    uint64_t zq_stream_submit(void *s, uintptr_t fn, const char *params, uint32_t nparams, uint32_t gx,
                              uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                              uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes, uint32_t flags);
    uint64_t zq_stream_stamp(void *s, uint64_t *dst);
    uint64_t zq_stream_after(void *s, uint64_t ticket);
    void zq_stream_close(void *s);
    void zq_stream_open(void *s);
    int zq_stream_hold(void *s);
    void zq_stream_unhold(void *s);
    int zq_stream_idle(void *s, uint64_t ticket);
    int zq_fast_launch(uint64_t ctx, uint64_t handle, uint64_t thread, uintptr_t fn, const char *params,
                       uint32_t nparams, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                       uint32_t bz, uint32_t static_shared, uint32_t dyn_shared, uint32_t frame_bytes);
    int zq_fast_sync(uint64_t ctx, int32_t mode, uint64_t handle, uint64_t thread);
    int zq_fast_query(uint64_t ctx, uint64_t handle, uint64_t thread);
""")
# A stream's native state (launchq_streams.c's struct zq_stream) as Python reads it, in uint64_t words.
W_TICKET = 0        # its last native item
W_STATE = 1         # [1..10]: the fault record its launches write (see zq_submit)
W_COUNTED = 11      # counted busy (in its context's count and the shim's)
W_SYNCED = 12       # a synchronize came since its Python work last went to the pool
W_CLOSED = 13       # Python work is queued: the shim's fast path leaves the stream to Python
W_DESTROYED = 14    # Python sets it when the stream leaves its context: the fast path no longer finds it
W_CTX_BUSY = 15     # the address of its context's count of busy streams (an int64_t)
WORDS = 16

_lock = threading.Lock()
_lib = None
_failed = os.environ.get("ZLUDA_CPU_NATIVE_QUEUE", "1") == "0"   # off: the all-Python path (for comparison)
# DONE[(t & 15) << 3] >= t: ticket t has run (lane t & 15's done counter); a uint64_t* into the library once
# it is loaded. Before that no ticket exists: a tuple that answers "run" for the 0 of a fresh stream.
DONE = (0,) * 128
LANE_MASK = 15
# Lanes of the launch queue, i.e. streams whose kernels run at once. 1 runs every launch in one order, as
# before lanes existed; measured on 2 cores (scripts/bench_streams), see DEFAULT_STREAMS.
DEFAULT_STREAMS = 2
MAX_STREAMS = 16


def streams() -> int:
    """ZLUDA_STREAMS, clamped to 1..16 (anything else: the default)."""
    try:
        n = int(os.environ.get("ZLUDA_STREAMS", DEFAULT_STREAMS))
    except ValueError:
        return DEFAULT_STREAMS
    return min(max(n, 1), MAX_STREAMS)


def reached(ticket: int) -> bool:
    return DONE[(ticket & LANE_MASK) << 3] >= ticket


def wait(ticket: int) -> None:
    """Return once `ticket` has run (GIL released while waiting)."""
    if DONE[(ticket & LANE_MASK) << 3] < ticket:
        _lib.zq_wait(ticket, SPIN_NS)


SOURCES = ("launchq.c", "launchq_streams.c")
INPUTS = SOURCES + ("launchq.h",)


def _build() -> Path:
    from ptx.runtime.build import build_library
    return build_library("launchq", [HERE / n for n in SOURCES], [HERE / n for n in INPUTS], CFLAGS,
                         [HERE / "_build"] + _shared_dirs())


def _shared_dirs():
    from ptx.runtime.build import _candidate_dirs
    return _candidate_dirs(None)


def get():
    """The loaded library (zq_* functions), or None: pool threads then park on Python locks."""
    global _lib, _failed, DONE
    if _lib is not None or _failed:
        return _lib
    with _lock:
        if _lib is None and not _failed:
            try:
                lib = cffi_abi.dlopen(ffi, str(_build()))
                DONE = lib.zq_done_address()
                from zluda_py import native
                if native.lib is not None:      # streams count as busy where the shim's fast paths look
                    lib.zq_set_busy_counter(ffi.cast("int64_t *", native.lib.zl_fast_busy_address()))
                _lib = lib
            except Exception as e:  # noqa: BLE001 - the Python path still works
                log.error(f"native launch queue unavailable, streams run all work on Python threads: {e}")
                _failed = True
    return _lib


_launcher = None
_launcher_failed = False


def launcher():
    """The library, told the runtime's entry points (loads ptx.runtime): None when launches must take the
    Python path."""
    global _launcher, _launcher_failed
    if _launcher is not None or _launcher_failed:
        return _launcher
    lib = get()
    with _lock:
        if _launcher is None and not _launcher_failed:
            try:
                if lib is None:
                    raise OSError("launchq.c could not be built")
                import ctypes
                from ptx import runtime
                rt = runtime.library()
                launch_ex = ctypes.cast(rt.ptx_rt_launch_ex, ctypes.c_void_p).value
                last_fault = getattr(rt, "ptx_rt_last_fault", None)
                last_fault = ctypes.cast(last_fault, ctypes.c_void_p).value if last_fault is not None else 0
                n = streams()
                rt.ptx_rt_set_concurrency.restype = ctypes.c_uint32
                rt.ptx_rt_set_concurrency.argtypes = [ctypes.c_uint32]
                rt.ptx_rt_set_concurrency(n)
                reserve = ctypes.cast(rt.ptx_rt_reserve, ctypes.c_void_p).value if n > 1 else 0
                lib.zq_init(launch_ex, last_fault or 0, reserve, SPIN_NS, n)
                from zluda_py import profile
                if profile.ON:
                    lib.zq_profile(1)
                _launcher = lib
            except Exception as e:  # noqa: BLE001 - the Python path still works
                log.error(f"native launch queue unavailable, launches take the Python path: {e}")
                _launcher_failed = True
    return _launcher


def pending() -> int:
    """Launches (and time stamps, waits) queued that have not run yet."""
    lib = _launcher
    return lib.zq_outstanding() if lib is not None else 0


def profile_entries() -> list:
    """ZLUDA_PROFILE's per-kernel figures of native launches: (kernel address, launches, total ns, max ns)."""
    lib = _launcher
    if lib is None:
        return []
    out, buf, i = [], ffi.new("uint64_t[4]"), 0
    while lib.zq_profile_get(i, buf):
        if buf[0] and buf[1]:
            out.append((buf[0], buf[1], buf[2], buf[3]))
        i += 1
    return out
