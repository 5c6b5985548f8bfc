"""The emulated lane: AMD code objects run on tinygrad's RDNA3/CDNA emulator (ZLUDA_AMDGPU_EMULATOR), compared
with the CPU backend and numpy. Emulation is not hardware. ZLUDA_EMU_FULL=1 runs everything."""

# Each job is a pytest run in a child process (an emulator fault kills the child, not this run), two at a
# time: tests/ptx instruction files through ptxkit's gfx backend (ptxkit_amd.py) and the samples' kernels
# (emulated/corpus_cases.py). A test failing there must be one of the job's stated gaps, and a stated gap
# must still fail; what the default slice leaves out is named with the reason in _jobs.

import concurrent.futures
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import need_linker

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("ZLUDA_EMU_FULL") == "1"
INSTR = "tests/ptx/test_instr_{}.py"
INSTR_FILES = ("warp", "atomic", "barrier", "mem", "control", "int", "bits", "cmp", "sreg", "transcendental",
               "float", "cvt", "half", "mma", "mma_sparse", "mma_kinds", "wmma", "ldmatrix", "tex", "texref")
CORPUS = "tests/amdgpu/emulated/corpus_cases.py"

# Not the emulator's fault: the AMD backend refuses these (PTXUnsupportedError naming them; KNOWN_UNSUPPORTED).
AMD_UNSUPPORTED = {
    "[bar_sync_count-": "bar.sync with a thread count: no AMDGPU equivalent",
    "test_named_barrier_arrive_then_sync": "bar.arrive: no AMDGPU equivalent",
    "test_two_named_barriers_with_partial_counts": "bar.sync/bar.arrive with thread counts",
    "test_vprintf": "printf with a format not known at compile time",
}
# What the emulator does not model, or models wrongly: each fails here while the CPU backend passes the
# same test (the evidence), and real hardware runs LLVM's code for these instructions.
ROUNDING = "no rounding-mode register: s_round_mode / s_setreg of MODE are ignored, every op rounds to nearest"
EMU_GAPS = {
    "test_trap_raises_kernel_fault": "s_trap does not compile in the emulator (its pcode is prose)",
    "test_clocks_are_monotonic": "s_sendmsg_rtn_b64 (clock64, globaltimer) is not implemented",
    "test_envregs_and_globaltimer_halves": "s_sendmsg_rtn_b64 (%globaltimer_lo/hi) is not implemented",
    "_rm_": ROUNDING, "_rp_": ROUNDING, "_rz_": ROUNDING,
    ".rm.f64.": ROUNDING, ".rp.f64.": ROUNDING, ".rz.f64.": ROUNDING,     # wmma .f64 directed rounding
    "[div_rn_": "IEEE division: quotients near the denormal or overflow range come out 0 or inf "
                "(v_div_scale/v_div_fmas/v_div_fixup rescaling)",
    "[rcp_rn_": "IEEE reciprocal: results near the denormal or overflow range come out 0 or inf (as div)",
    "[div_approx_": "sometimes: v_rcp_f32 flushes denormal results to 0 (the test's bound is 1 denormal ulp)",
    "[div_full_": "sometimes: v_rcp_f32 flushes denormal results to 0 (as div.approx)",
    "[rcp_approx_f32]": "sometimes: v_rcp_f32 flushes denormal results to 0 (inputs near 2^127)",
    "[cvt_rni_": "v_rndne_f32/f64 lose the sign of a zero result (-0.3 rounds to +0) and f16 ties",
    "[cvt_rn_f16_f64]": "f64 beyond the f16 range converts to NaN, not +-inf",
    "[cvt_rn_bf16_f64]": "f64 beyond the bf16 range converts to NaN, not +-inf",
    "half_arith[fma_rn_": "f16/bf16 fma rounded twice (computed in f32): ties come out 1 ulp off",
    "[min_f16x2]": "sometimes: v_pk_min_f16 with -0 against +0 or NaN operands (when the inputs hold them)",
    "[max_f16x2]": "sometimes: v_pk_max_f16 with -0 against +0 or NaN operands",
    "[max_NaN_f16x2]": "sometimes: v_pk_max_f16 with -0 against +0",
}
# CDNA (gfx950) only: LLVM's gfx9 encodings the emulator runs differently from RDNA's.
CDNA_GAPS = {
    "[add_sat_s32]": "VOP3 clamp on v_add_i32 (integer saturation) ignored: the sum wraps",
    "[sub_sat_s32]": "VOP3 clamp on v_sub_i32 ignored: the difference wraps",
    "[mad_hi_sat_s32]": "sometimes: VOP3 clamp on the integer add ignored: the result wraps",
    "[max_NaN_": "sometimes: v_max/v_pk_max (gfx9 IEEE mode): NaN operands and -0 against +0",
    "[min_NaN_": "sometimes: v_min/v_pk_min (gfx9 IEEE mode): NaN operands and -0 against +0",
    "test_float_minmax_sign[m": "sometimes: v_min/v_max_f32 with -0 against +0 or denormals under .ftz",
    "test_half_minmax_neg_abs[": "sometimes: gfx9 v_max/v_min_f16 and v_pk_max/min_f16 return NaN for ordered "
                                 "operands (the CPU backend and the emulated gfx1100 agree with the test)",
}
# Approximate instructions (sin/cos/ex2/lg2/tanh/rcp/sqrt .approx) are host math in the emulator and the
# CPU backend's own code: each checked against the test's documented bound, not against each other.
APPROX = "report"


@dataclass
class Job:
    name: str
    target: str
    paths: list
    select: str = ""                         # pytest -k expression of the default slice ("" = all)
    why_left_out: str = ""                   # what the slice leaves out, and why (FULL runs it)
    gaps: dict = field(default_factory=dict)   # nodeid substring -> why it fails ("sometimes: ..." when only
    #                                            some random inputs reach it; the others must keep failing)
    host: str = "strict"                     # PTXKIT_EMU_HOST: compare every output with the CPU backend's
    timeout: int = 900


def _jobs():
    g = "gfx1100"
    gaps = {**AMD_UNSUPPORTED, **EMU_GAPS}
    cdna = {**gaps, **CDNA_GAPS}
    jobs = [
        Job("warp", g, [INSTR.format("warp")]),
        Job("atomic", g, [INSTR.format("atomic")]),
        Job("barrier", g, [INSTR.format("barrier")], gaps=gaps),
        Job("mem", g, [INSTR.format("mem")]),
        Job("control", g, [INSTR.format("control")], gaps=gaps),
        Job("int+bits+cmp", g, [INSTR.format(f) for f in ("int", "bits", "cmp")]),
        Job("math", g, [INSTR.format("transcendental"), INSTR.format("float")], gaps=gaps, host=APPROX, timeout=3600,
            select="transcendental or _rn_ or approx or min or max or add_rm_f32 or fma_rz_f64",
            why_left_out="the other directed-rounding cases: the same rounding-mode gap as add_rm/fma_rz"),
        Job("sreg", g, [INSTR.format("sreg")], gaps=gaps),
        Job("tensor cores", g, [INSTR.format(f) for f in ("mma", "wmma", "ldmatrix")], gaps=gaps),
        Job("sparse and sm_120 mma", g, [INSTR.format(f) for f in ("mma_sparse", "mma_kinds")]),
        Job("textures", g, [INSTR.format("tex"), INSTR.format("texref")]),
        Job("corpus", g, [CORPUS]),
        Job("warp+barrier+mem (cumode)", g + ":cumode", [INSTR.format(f) for f in ("warp", "barrier", "mem")],
            gaps=gaps, select="" if FULL else "shfl or match or redux or vote or tree_reduction or shared",
            why_left_out="the rest of these files does not depend on CU/WGP mode"),
        Job("corpus (cumode)", g + ":cumode", [CORPUS], select="scan or matmul or histogram or bitonic",
            why_left_out="the kernels without barriers do not depend on CU/WGP mode"),
        Job("warp+atomic (gfx950)", "gfx950", [INSTR.format("warp"), INSTR.format("atomic")], gaps=cdna),
        Job("mma+ldmatrix+tex (gfx950)", "gfx950", [INSTR.format(f) for f in ("mma", "ldmatrix", "tex")],
            gaps=cdna),
        Job("corpus (gfx950)", "gfx950", [CORPUS], gaps=cdna),
    ]
    if FULL:                                 # every instruction file on every target, one job each
        have = {(j.target, p) for j in jobs for p in j.paths}
        for target in (g, g + ":cumode", "gfx950"):
            for f in INSTR_FILES:
                if (target, INSTR.format(f)) not in have:
                    host = APPROX if f in ("float", "transcendental", "half", "cvt") else "strict"
                    jobs.append(Job(f"{f} ({target})", target, [INSTR.format(f)], host=host, timeout=3600,
                                    gaps=cdna if target == "gfx950" else gaps))
    return jobs


JOBS = {j.name: j for j in _jobs()
        if not os.environ.get("ZLUDA_EMU_JOBS") or j.name in os.environ["ZLUDA_EMU_JOBS"].split(",")}


def _run(job, work, ptx_map):
    tag = "".join(c if c.isalnum() else "_" for c in job.name)
    junit, stats = work / f"{tag}.xml", work / f"{tag}.jsonl"
    env = dict(os.environ, PTXKIT_BACKEND=job.target, PTXKIT_EMU_STATS=str(stats), PTXKIT_EMU_HOST=job.host,
               ZLUDA_EMU_TARGET=job.target, ZLUDA_EMU_STATS=str(stats), ZLUDA_EMU_PTX=str(ptx_map))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *job.paths]
    if job.select and not FULL:
        cmd += ["-k", job.select]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=job.timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = f"{e.stdout or ''}{e.stderr or ''}\ntimed out after {job.timeout} s", None
    (work / f"{tag}.log").write_text(out)
    return dict(rc=rc, out=out, seconds=time.monotonic() - t0, cases=_cases(junit), stats=_stats(stats))


def _cases(junit):
    """{'file::test[param]': 'passed' | 'failed' | 'skipped: why'} from pytest's junit XML."""
    if not junit.exists():
        return {}
    cases = {}
    for tc in ET.parse(junit).getroot().iter("testcase"):
        name = f"{tc.get('classname', '')}::{tc.get('name', '')}"
        kinds = {c.tag: c.get("message", "") for c in tc}
        cases[name] = "failed" if kinds.keys() & {"failure", "error"} else \
            f"skipped: {kinds['skipped']}" if "skipped" in kinds else "passed"
    return cases


def _stats(path):
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


@pytest.fixture(scope="session")
def emulated_runs(tmp_path_factory, request):
    """Every job, two at a time in child processes; {job name: result}."""
    need_linker()
    from ptx import amdgpu_emulator
    why = amdgpu_emulator.available()
    if why:
        pytest.skip(f"no AMD GPU emulator: {why}")
    try:                                     # without nvcc the corpus jobs skip; the instruction jobs still run
        built = request.getfixturevalue("built_ptx")
    except pytest.skip.Exception:
        built = {}
    work = tmp_path_factory.mktemp("emulated")
    ptx_map = work / "ptx.json"
    ptx_map.write_text(json.dumps({bid: str(p) for bid, (p, _) in built.items() if p is not None}))
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futs = {name: pool.submit(_run, job, work, ptx_map) for name, job in JOBS.items()}
        runs = {name: f.result() for name, f in futs.items()}
    runs["_wall"] = time.monotonic() - t0
    return runs


@pytest.mark.parametrize("name", list(JOBS))
def test_emulated(emulated_runs, name):
    job, run = JOBS[name], emulated_runs[name]
    tail = run["out"][-3000:]
    assert run["rc"] in (0, 1), f"{name} on {job.target}: the child ended with {run['rc']} (a crash?):\n{tail}"
    cases = run["cases"]
    assert cases, f"{name}: no test ran:\n{tail}"
    skipped = [r for r in cases.values() if r.startswith("skipped")]
    if len(skipped) == len(cases):
        pytest.skip(f"{name}: every test skipped ({skipped[0]})")
    failed = sorted(c for c, r in cases.items() if r == "failed")
    unexplained = [c for c in failed if not any(g in c for g in job.gaps)]
    assert not unexplained, (f"{name} on {job.target} (emulated): {len(unexplained)} failures that are no "
                             f"stated gap: {unexplained[:20]}\n{tail}")
    closed = [g for g, why in job.gaps.items() if not why.startswith("sometimes:")
              and any(g in c for c in cases) and not any(g in c for c in failed)]
    assert not closed, f"{name}: gaps that no longer fail, remove them: {closed}"


def test_lane_summary(emulated_runs, capsys):
    """What the lane compared (kernels, outputs, elements) and how long it took: printed, and not empty."""
    lines, total = [], {"kernels": set(), "outputs": 0, "elements": 0, "tests": 0}
    for name, job in JOBS.items():
        run = emulated_runs[name]
        st = run["stats"]
        kernels = {(s["target"], s["kernel"]) for s in st}
        outputs, elements = sum(s["outputs"] for s in st), sum(s["elements"] for s in st)
        tests = sum(1 for r in run["cases"].values() if not r.startswith("skipped"))
        total["kernels"] |= kernels
        total["outputs"] += outputs
        total["elements"] += elements
        total["tests"] += tests
        lines.append(f"  {name:30s} {job.target:15s} {tests:4d} tests {len(kernels):4d} kernels {outputs:5d} "
                     f"outputs {elements:9d} elements {run['seconds']:6.1f} s")
    lines.append(f"  {'total':30s} {'':15s} {total['tests']:4d} tests {len(total['kernels']):4d} kernels "
                 f"{total['outputs']:5d} outputs {total['elements']:9d} elements {emulated_runs['_wall']:6.1f} s wall")
    with capsys.disabled():
        print("\nemulated AMD lane (tinygrad's emulator, not hardware):\n" + "\n".join(lines))
    assert total["outputs"] > 0 and total["elements"] > 0
