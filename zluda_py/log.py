"""Logging for the shim: ZLUDA_LOG (failing calls), ZLUDA_TRACE (every call), ZLUDA_LOG_FILE (destination);
fatal configuration problems are written once whatever ZLUDA_LOG says."""

import os
import sys
import threading

LOG = os.environ.get("ZLUDA_LOG", "0") not in ("", "0")
TRACE = os.environ.get("ZLUDA_TRACE", "0") not in ("", "0")
_lock = threading.Lock()
_stream = None
_once: set = set()
_fatal: set = set()


def _out():
    global _stream
    if _stream is None:
        path = os.environ.get("ZLUDA_LOG_FILE")
        if path:
            try:
                _stream = open(path, "a", buffering=1)
            except OSError:
                _stream = sys.stderr
        else:
            _stream = sys.stderr
    return _stream


def write(line: str) -> None:
    """Write one line prefixed with [zluda]; never raises (the host app must not see our failures)."""
    try:
        with _lock:
            out = _out()
            out.write("[zluda] " + line.rstrip("\n") + "\n")
            out.flush()
    except Exception:
        pass


def error(line: str) -> None:
    if LOG or TRACE:
        write(line)


def once(key: str, line: str) -> None:
    """Log a line the first time `key` is seen (unimplemented symbols, deprecated paths)."""
    if key in _once:
        return
    _once.add(key)
    error(line)


def fatal(key: str, line: str) -> bool:
    """Write `line` the first time `key` is seen, even without ZLUDA_LOG: a problem no program gets past
    (no device, no binary it can run) must not leave a user with nothing but an error code. True when
    written."""
    with _lock:
        if key in _fatal:
            return False
        _fatal.add(key)
    write(line)
    return True
