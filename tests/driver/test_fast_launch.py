"""The shim's launch fast path (src/fastlaunch.c over the CPU backend's launchq_streams.c) through
tests/driver/fast_launch.c compiled against the built libcuda.so.1: stream order across the legacy, blocking,
non-blocking and per-thread streams mixed with Python's work (asynchronous copies, fills, events),
parameters, asynchrony, errors answered as with the fast path off, faults, lazy first launches, threads,
capture, what must be forgotten; ZLUDA_TRACE and ZLUDA_PROFILE see every call (the fast path is off)."""

import re
import subprocess

import pytest

from chost import C_HOST, user_env, build_c_host

pytestmark = C_HOST

PARTS = ["order", "params", "async", "errors", "fault", "trap", "lazy", "threads", "threads_quiet", "capture", "forget",
         "empty"]


@pytest.fixture(scope="module")
def exe(shim_libdir, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fast_launch") / "fast_launch")
    build_c_host(shim_libdir, "fast_launch.c", path, ["-lpthread", "-ldl"])
    return path


def run(exe, part, **env):
    r = subprocess.run([exe, part], env=user_env(**env), capture_output=True, text=True, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def served(r) -> tuple:
    m = re.search(r"^served (\d+) (\d+) (\d+)$", r.stdout, re.M)
    assert m, r.stdout
    return tuple(int(x) for x in m.groups())


@pytest.mark.parametrize("part", PARTS)
def test_part(exe, part):
    r = run(exe, part)
    assert r.returncode == 0 and f"PASSED {part}" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("streams", ["1", "4"])
def test_order_with_lanes(exe, streams):
    r = run(exe, "order", ZLUDA_STREAMS=streams)
    assert r.returncode == 0 and "PASSED order" in r.stdout, r.stdout + r.stderr


def test_order_without_the_native_queue(exe):
    """ZLUDA_CPU_NATIVE_QUEUE=0: every launch is Python's, nothing for C to serve."""
    r = run(exe, "order", ZLUDA_CPU_NATIVE_QUEUE="0")
    assert r.returncode == 0 and "PASSED order" in r.stdout, r.stdout + r.stderr
    assert served(r) == (0, 0, 0)


def test_the_fast_path_serves_ordinary_calls(exe):
    """What C answered: every launch + synchronize of the loop but the first launch (Python's, which
    compiles the kernel); a lazy kernel's nine launches after its first; queries of the async part."""
    launches, syncs, _ = served(run(exe, "empty"))
    assert launches == 1999 and syncs == 2000
    r = run(exe, "lazy")
    assert "lazy served 9" in r.stdout, r.stdout
    assert served(run(exe, "async"))[2] > 0
    # four threads mixing their streams with the legacy stream's work: C serves some, while each launch
    # with a legacy wait to make is Python's (how many depends on timing); without the legacy stream's
    # work, all of their 4 x 300 launches but at most two a thread: its first (racing the kernel's first,
    # which publishes it) and its first on its per-thread stream (unknown to C until Python made it)
    assert served(run(exe, "threads"))[0] > 0
    assert served(run(exe, "threads_quiet"))[0] >= 1200 - 2 * 4


def test_errors_are_python_answers(exe, tmp_path):
    """Each bad launch, synchronize or query falls to the Python handler: the same codes as with the fast
    path off (ZLUDA_TRACE=1), each logged once with ZLUDA_LOG=1."""
    fast = run(exe, "errors", ZLUDA_LOG="1")
    slow = run(exe, "errors", ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(tmp_path / "trace.log"))
    for r in (fast, slow):
        assert r.returncode == 0 and "PASSED errors" in r.stdout, r.stdout + r.stderr

    def answers(r):
        return [l for l in r.stdout.splitlines() if re.fullmatch(r"[a-z0-9^-]+ -?\d+", l)]
    assert answers(fast) == answers(slow) and len(answers(fast)) > 50
    got = dict(l.split() for l in answers(fast))
    assert got["grid-x-0"] == got["block-1025"] == got["shared-49153"] == got["param-1-null"] == "1"
    assert got["function-bad"] == got["stream-bad"] == got["unloaded-function"] == "400"
    assert got["no-ctx-launch"] == "201" and got["ex-cooperative"] == "0" and got["ex-unknown-attr"] == "1"
    errors = [l for l in answers(fast) if not l.endswith(" 0")]
    logged = [l for l in fast.stderr.splitlines() if l.startswith("[zluda]") and "CUDA_ERROR" in l]
    assert len(logged) == len(errors), (errors, logged)


@pytest.mark.parametrize("part", ["order", "threads"])
def test_trace_sees_every_launch(exe, part, tmp_path):
    log = tmp_path / "trace.log"
    r = run(exe, part, ZLUDA_TRACE="1", ZLUDA_LOG_FILE=str(log))
    assert r.returncode == 0 and f"PASSED {part}" in r.stdout, r.stdout + r.stderr
    assert served(r) == (0, 0, 0)
    text = log.read_text()
    launches = text.count("cuLaunchKernel(") + text.count("cuLaunchKernel_ptsz(")
    if part == "threads":
        assert launches == 5 * 300
    else:
        assert launches > 300


def test_profile_counts_every_launch(exe, tmp_path):
    """ZLUDA_PROFILE=1: the fast path is off, so the table counts each of the 2000 empty launches."""
    log = tmp_path / "profile.log"
    r = run(exe, "empty", ZLUDA_PROFILE="1", ZLUDA_LOG_FILE=str(log))
    assert r.returncode == 0 and "PASSED empty" in r.stdout, r.stdout + r.stderr
    assert served(r) == (0, 0, 0)
    text = log.read_text()
    assert re.search(r"cuLaunchKernel\s+2000\b", text), text
    assert re.search(r"cuCtxSynchronize\s+2000\b", text), text
