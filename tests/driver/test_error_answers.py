"""tests/driver/error_answers.c through the real libcuda.so.1, each case in its own process, against what
NVIDIA's driver answered to the same program (tests/data/nvidia_error_answers.json): sticky faults and what
they poison, a released primary context, odd arguments, kernelParams/extra abuse, host-function threads."""

import json
import os
import re
import subprocess

import pytest

from chost import C_HOST, user_env, build_c_host

from zluda_py.errors import NAME_OF

HERE = os.path.dirname(os.path.abspath(__file__))
NVIDIA = json.load(open(os.path.join(HERE, "..", "data", "nvidia_error_answers.json")))
LINE = re.compile(r"^([\w.]+) (-?\d+)(?: (\w+))?$")

pytestmark = C_HOST


@pytest.fixture(scope="module")
def exe(shim_libdir, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("answers") / "error_answers")
    build_c_host(shim_libdir, "error_answers.c", path, ["-lpthread"])
    return path


@pytest.fixture(scope="module")
def ours(exe):
    """Every case, logged: {key: code}, and per case the (function, code, log lines) of its process."""
    r = subprocess.run([exe], env=user_env(ZLUDA_LOG="1"), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    answers = {}
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if m:
            answers[m.group(1)] = int(m.group(2))
    return answers, r.stdout


def test_same_answers_as_nvidia(ours):
    answers, _ = ours
    wrong = []
    for key, want in NVIDIA["answers"].items():
        if key.endswith(".died_by_signal"):
            continue        # NVIDIA's driver crashed; ours must not (below)
        if answers.get(key) != want:
            wrong.append(f"{key}: ours {answers.get(key)}, NVIDIA {want}")
    assert not wrong, "\n".join(wrong)


def test_no_crash_where_nvidia_crashes(ours):
    answers, _ = ours
    assert not [k for k in answers if k.endswith((".died_by_signal", ".exit_status"))]
    for key in NVIDIA["answers"]:
        if key.endswith(".died_by_signal"):
            case = key[:-len(".died_by_signal")]
            assert answers.get(case + ".launch") == 1, case    # an error instead (INVALID_VALUE)


def test_host_functions_run_on_a_driver_thread_and_may_wait_for_the_caller(ours):
    answers, _ = ours
    for case in ("host_fn", "stream_callback"):
        assert answers[f"{case}.query_before_signal"] == 600, case     # NOT_READY: not run inside the query
        assert answers[f"{case}.ran_after_signal"] == 1, case
        assert answers[f"{case}.other_thread"] == 1, case


def test_every_failing_call_logs_its_line(exe):
    """Run case by case so that the log lines and the answers interleave in one stream, in order."""
    for case in ("fault700", "fault_created", "fault_reset", "released", "args", "launch.extra_size_large"):
        r = subprocess.run([exe, case], env=user_env(ZLUDA_LOG="1"), stderr=subprocess.STDOUT,
                           stdout=subprocess.PIPE, text=True, timeout=120)
        assert r.returncode == 0, r.stdout
        pending = []        # log lines since the last answer
        for line in r.stdout.splitlines():
            if line.startswith("[zluda]"):
                pending.append(line)
                continue
            m = LINE.match(line)
            if not m:
                continue
            code, fn = int(m.group(2)), m.group(3)
            if code and fn and fn.startswith("cu"):
                want = re.compile(rf"^\[zluda\] {fn}(_v\d)?(_ptsz)?: {NAME_OF[code]}")
                assert any(want.match(p) for p in pending), f"{case}: {line} was not logged: {pending}"
            pending = []
