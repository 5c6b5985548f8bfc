"""ZLUDA_PROFILE=1: time spent in each driver API handler, each kernel's run time and each module's compile
time, printed as one table at process exit (stderr, or ZLUDA_LOG_FILE)."""

import os
import threading
import time

from zluda_py import log

ON = os.environ.get("ZLUDA_PROFILE", "0") not in ("", "0")
_clock = time.perf_counter_ns
_lock = threading.Lock()
_calls: dict = {}       # function name -> [calls, total ns]
_kernels: dict = {}     # kernel name -> [launches, total ns, max ns] (Python launch path)
_modules: list = []     # (module name, ns, cache hit)
_lazy_kernels: list = []    # (kernel name, ns, cache hit) of lazy modules' kernels
_start = _clock()
_installed = False
_reported = False
_pid = os.getpid()      # a forked child inherits the exit hooks but not the figures' meaning
_MAX_CALLS, _MAX_KERNELS, _MAX_MODULES = 14, 10, 6


def wrap(name: str, handler):
    """`handler` timed into the per-function table (dispatch.py builds its table with it when ON)."""
    st = _calls.setdefault(name, [0, 0])

    def profiled(*values):
        t0 = _clock()
        try:
            return handler(*values)
        finally:
            dt = _clock() - t0
            with _lock:
                st[0] += 1
                st[1] += dt
    return profiled


def kernel_ran(name: str, ns: int) -> None:
    """A kernel launch that ran on a Python thread took `ns` (native launches are timed in launchq.c)."""
    with _lock:
        st = _kernels.get(name)
        if st is None:
            st = _kernels[name] = [0, 0, 0]
        st[0] += 1
        st[1] += ns
        if ns > st[2]:
            st[2] = ns


def module_compiled(name: str, ns: int, cache_hit: bool) -> None:
    with _lock:
        _modules.append((name, ns, cache_hit))


def kernel_compiled(name: str, ns: int, cache_hit: bool) -> None:
    """A lazy module's kernel built at its first use (CUDA_MODULE_LOADING=LAZY)."""
    with _lock:
        _lazy_kernels.append((name, ns, cache_hit))


def install() -> None:
    """Arrange for the report at exit: Python's atexit when the host is Python, a C atexit handler in the
    shim when the host is a C program (its embedded interpreter is never finalised)."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        import atexit
        atexit.register(report)
        from zluda_py import native
        if native.lib is not None and hasattr(native.lib, "zluda_profile_at_exit"):
            native.ffi.def_extern(name="zluda_profile_report", onerror=native._swallow)(report)
            native.lib.zluda_profile_at_exit()
    except Exception as e:  # noqa: BLE001 - profiling must not break the driver
        log.error(f"ZLUDA_PROFILE: no report at exit: {e}")


_BUILTIN = {"v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char", "s": "short",
            "t": "unsigned short", "i": "int", "j": "unsigned", "l": "long", "m": "unsigned long",
            "x": "long long", "y": "unsigned long long", "f": "float", "d": "double", "Dh": "half"}


def _type(s: str, i: int):
    """One mangled type or template argument at s[i:]: (readable text, index after it); ValueError for
    what this small reader does not know (substitutions, function types...)."""
    c = s[i]
    if c in "PRK":
        t, i = _type(s, i + 1)
        return ("const " + t if c == "K" else t + ("*" if c == "P" else "&")), i
    if c == "L":        # literal: L <type> <digits, n for minus> E
        j = s.index("E", i)
        k = i + 1 + (2 if s[i + 1] == "D" else 1)
        return s[k:j].replace("n", "-"), j + 1
    if c == "N" or c.isdigit():
        nested, i, comps = c == "N", i + (c == "N"), []
        while s[i].isdigit():
            j = i
            while s[j].isdigit():
                j += 1
            comps.append(s[j:j + int(s[i:j])])
            i = j + int(s[i:j])
            if s[i] == "I":
                targs, i = _template_args(s, i + 1)
                comps[-1] += targs
            if not nested:
                break
        if nested:
            if s[i] != "E":
                raise ValueError(s)
            i += 1
        return "::".join(comps), i
    if s[i:i + 2] in _BUILTIN:
        return _BUILTIN[s[i:i + 2]], i + 2
    if c in _BUILTIN:
        return _BUILTIN[c], i + 1
    raise ValueError(s)


def _template_args(s: str, i: int):
    """Template arguments from just after their 'I': ('<a, b>', index after the 'E')."""
    args = []
    while s[i] != "E":
        t, i = _type(s, i)
        args.append(t)
    return "<" + ", ".join(args) + ">", i + 1


def short_name(mangled: str) -> str:
    """The readable part of an Itanium-mangled name: '_Z9vectorAddPKfS0_Pfi' -> 'vectorAdd',
    '_ZN2ns4scanIiLi3EEEvPT_' -> 'ns::scan<int, 3>'; other names unchanged (never raises)."""
    if not mangled.startswith("_Z"):
        return mangled
    try:
        s, i, parts = mangled, 2, []
        nested = s.startswith("N", i)
        if nested:
            i += 1
            while i < len(s) and s[i] in "rVK":
                i += 1
        while i < len(s) and s[i].isdigit():
            j = i
            while j < len(s) and s[j].isdigit():
                j += 1
            n = int(s[i:j])
            parts.append(s[j:j + n])
            i = j + n
            if i < len(s) and s[i] == "I":
                try:
                    targs, i = _template_args(s, i + 1)
                except (IndexError, ValueError):
                    parts[-1] += "<...>"
                    break
                parts[-1] += targs
            if not nested:
                break
        return "::".join(parts) if parts and all(parts) else mangled
    except (IndexError, ValueError):
        return mangled


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 2] + ".."


def _native_kernels():
    """Per-kernel figures of launches that ran on the native launch queue, by kernel name, and how many
    launches it still holds."""
    out: dict = {}
    try:
        from zluda_py.backends.cpu import launchq, stream
    except Exception:  # noqa: BLE001 - another backend
        return out, 0
    for address, count, total, peak in launchq.profile_entries():
        name = stream._kernel_names.get(address, f"kernel@{address:#x}")
        st = out.setdefault(name, [0, 0, 0])
        st[0] += count
        st[1] += total
        st[2] = max(st[2], peak)
    return out, launchq.pending()


def lines() -> list:
    """The report, at most about 40 lines: the top entries by total time."""
    from zluda_py import fastpath
    wall = (_clock() - _start) / 1e9
    with _lock:
        calls = [(n, c, t) for n, (c, t) in _calls.items() if c]
        kernels = {n: list(v) for n, v in _kernels.items()}
        modules = list(_modules)
    native, queued = _native_kernels()
    for n, (c, t, m) in native.items():
        st = kernels.setdefault(n, [0, 0, 0])
        st[0] += c
        st[1] += t
        st[2] = max(st[2], m)
    fast = "on" if fastpath.ON else "off: cuMemAlloc/cuMemFree/sync cuMemcpy are counted here too"
    out = [f"ZLUDA_PROFILE pid {os.getpid()}, {wall:.3f} s since the driver was loaded (C fast path {fast})"]
    calls.sort(key=lambda e: -e[2])
    out.append(f"{'driver API':<34}{'calls':>9}{'total ms':>11}{'mean us':>10}")
    for n, c, t in calls[:_MAX_CALLS]:
        out.append(f"  {_clip(n, 32):<32}{c:>9}{t / 1e6:>11.3f}{t / c / 1e3:>10.1f}")
    if len(calls) > _MAX_CALLS:
        rest = calls[_MAX_CALLS:]
        out.append(f"  ({len(rest)} more functions: {sum(c for _, c, _ in rest)} calls, "
                   f"{sum(t for _, _, t in rest) / 1e6:.3f} ms)")
    ks = sorted(kernels.items(), key=lambda e: -e[1][1])
    out.append(f"{'kernel (device time)':<36}{'mangled':<14}{'launches':>7}{'total ms':>11}{'mean us':>10}"
               f"{'max us':>10}")
    if not ks and not queued:
        out.append("  (no kernel ran)")
    for n, (c, t, m) in ks[:_MAX_KERNELS]:
        mangled = "" if short_name(n) == n else n
        out.append(f"  {_clip(short_name(n), 33):<34}{_clip(mangled, 13):<14}{c:>7}{t / 1e6:>11.3f}"
                   f"{t / max(c, 1) / 1e3:>10.1f}{m / 1e3:>10.1f}")
    if len(ks) > _MAX_KERNELS:
        out.append(f"  ({len(ks) - _MAX_KERNELS} more kernels)")
    if queued:
        out.append(f"  ({queued} launches not finished by exit, not counted)")
    if modules:
        hits = sum(1 for _, _, h in modules if h)
        out.append(f"module loads: {len(modules) - hits} compiled "
                   f"({sum(t for _, t, h in modules if not h) / 1e6:.1f} ms), {hits} from the cache "
                   f"({sum(t for _, t, h in modules if h) / 1e6:.1f} ms)")
        for n, t, h in sorted(modules, key=lambda e: -e[1])[:_MAX_MODULES]:
            out.append(f"  {_clip(n, 40):<42}{'cache hit' if h else 'compiled':<10}{t / 1e6:>10.1f} ms")
        if len(modules) > _MAX_MODULES:
            out.append(f"  ({len(modules) - _MAX_MODULES} more module loads)")
    with _lock:
        lazy = list(_lazy_kernels)
    if lazy:
        hits = sum(1 for _, _, h in lazy if h)
        out.append(f"lazy kernels: {len(lazy) - hits} compiled ({sum(t for _, t, h in lazy if not h) / 1e6:.1f} ms), "
                   f"{hits} from the cache ({sum(t for _, t, h in lazy if h) / 1e6:.1f} ms)")
    return out


def report() -> None:
    """Print the table once; never raises (it runs at exit, inside the host application)."""
    global _reported
    try:
        with _lock:
            if _reported or os.getpid() != _pid:
                return
            _reported = True
        for line in lines():
            log.write(line)
    except BaseException:  # noqa: BLE001 - nothing may reach the host at exit
        pass
