"""Video instructions (scalar vadd..vset with part selectors, .sat, secondary op and merge; vmad; SIMD
vop2/vop4/vset2/vset4 with lane selectors, masks, .sat and .add) and packed .u16x2/.s16x2 add/min/max, against
Python references written from the PTX ISA pseudocode, corrected where NVIDIA's H200 answers differ (noted at
each), and against those answers on stored inputs (tests/data/nvidia_simd_answers.json: `record()` below, run
with PTXKIT_BACKEND=cuda on the GPU)."""

import json
import os

import numpy as np
import pytest

import ptxkit as K
from ptxkit import rng  # noqa: F401  (fixture)

N = 384
KS = K.KernelSet(target="sm_90")
CASES = {}  # name -> (instruction text, number of inputs, reference on python ints)
ANSWERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                       "nvidia_simd_answers.json")
M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1


def case(name, text, nin, ref):
    regs = [(r, "b32") for r in "abc"[:nin]]
    KS.add(name, K.elementwise(name, text, regs, [("d", "b32")]))
    CASES[name] = (text, nin, ref)


def _s(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _ext(v, bits, signed):
    v &= (1 << bits) - 1
    return _s(v, bits) if signed else v


def _clamp(v, signed, bits):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return min(max(v, lo), hi)


# ---------------------------------------------------------------- scalar video instructions

def _part(x, signed, sel):
    if not sel:
        return _ext(x, 32, signed)
    k = int(sel[1])
    w = 8 if sel[0] == "b" else 16
    return _ext(x >> (k * w), w, signed)


def _dbits(dsel):
    return 32 if not dsel else 16 if dsel[0] == "h" else 8


def _finish(tmp, c, sat, dsigned, dsel, sec):
    """What NVIDIA's H200 does (its answers, where the ISA text's pseudocode differs): a full-word unsigned
    .sat clamps below at 0 only; .sat into a part is an unsigned minimum with the part's maximum (a negative
    result becomes the maximum); for a signed destination the secondary operation takes the result's low word;
    .h1 keeps the result's own upper half, the byte selectors move its low byte into place."""
    if sat and not dsel:
        tmp = _clamp(tmp, True, 32) if dsigned else max(tmp, 0)
    elif sat:
        w = _dbits(dsel)
        tmp = min(tmp & M64, (1 << (w - 1)) - 1 if dsigned else (1 << w) - 1)
    if sec:
        x, cc = (_s(tmp, 32), _s(c, 32)) if dsigned else (tmp, c & M32)
        tmp = x + cc if sec == "add" else min(x, cc) if sec == "min" else max(x, cc)
    if dsel:
        w = _dbits(dsel)
        sh = int(dsel[1]) * w
        m = ((1 << w) - 1) << sh
        tmp = ((tmp if dsel == "h1" else tmp << sh) & m) | (c & ~m)
    return tmp & M32


_VOPS = {"vadd": lambda a, b: a + b, "vsub": lambda a, b: a - b, "vabsdiff": lambda a, b: abs(a - b),
         "vmin": min, "vmax": max}
_CMPS = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
         "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _sfx(x):
    return f".{x}" if x else ""


def _scalar(op, dt, at, bt, sat, sec, asel, bsel, dsel):
    mods = f"{op}.{dt}.{at}.{bt}{'.sat' if sat else ''}{_sfx(sec)}"
    four = bool(sec or dsel)
    text = f"{mods} %d{_sfx(dsel)}, %a{_sfx(asel)}, %b{_sfx(bsel)}{', %c' if four else ''};"
    name = K.kname(op, dt, at, bt, "sat" if sat else "", sec, asel, bsel, "d" + dsel if dsel else "")

    def ref(a, b, c=0):
        ta, tb = _part(a, at == "s32", asel), _part(b, bt == "s32", bsel)
        return _finish(_VOPS[op](ta, tb), c, sat, dt == "s32", dsel, sec)
    case(name, text, 3 if four else 2, ref)


for op in _VOPS:
    for dt, at, bt in (("u32", "u32", "u32"), ("s32", "s32", "s32"), ("s32", "u32", "s32"), ("u32", "s32", "u32")):
        _scalar(op, dt, at, bt, False, "", "", "", "")
        _scalar(op, dt, at, bt, True, "", "", "", "")
    for asel, bsel in (("b0", "b3"), ("b1", "h1"), ("h0", "b2"), ("h1", "h0")):
        _scalar(op, "s32", "s32", "u32", True, "", asel, bsel, "")
        _scalar(op, "u32", "u32", "s32", False, "", asel, bsel, "")
    for sec in ("add", "min", "max"):
        _scalar(op, "s32", "s32", "s32", False, sec, "b1", "", "")
        _scalar(op, "u32", "u32", "u32", True, sec, "", "h1", "")
    for dsel in ("b0", "b1", "b2", "b3", "h0", "h1"):
        _scalar(op, "s32", "s32", "s32", True, "", "", "b2", dsel)
        _scalar(op, "u32", "u32", "s32", True, "", "h0", "", dsel)
        _scalar(op, "u32", "s32", "u32", False, "", "", "", dsel)


def _shift(op, dt, at, sat, mode, sec, asel, bsel, dsel):
    mods = f"{op}.{dt}.{at}.u32{'.sat' if sat else ''}.{mode}{_sfx(sec)}"
    four = bool(sec or dsel)
    text = f"{mods} %d{_sfx(dsel)}, %a{_sfx(asel)}, %b{_sfx(bsel)}{', %c' if four else ''};"
    name = K.kname(op, dt, at, "sat" if sat else "", mode, sec, asel, bsel, "d" + dsel if dsel else "")

    def ref(a, b, c=0):
        ta, tb = _part(a, at == "s32", asel), _part(b, False, bsel)
        tb = min(tb, 32) if mode == "clamp" else tb & 31
        # NVIDIA: the shifted value is cut to the ISA's s34 and clamped as the ISA says (not as vadd & co.)
        tmp = _s(ta << tb if op == "vshl" else ta >> tb, 34)
        if sat:
            tmp = _clamp(tmp, dt == "s32", _dbits(dsel))
        return _finish(tmp, c, False, dt == "s32", dsel, sec)
    case(name, text, 3 if four else 2, ref)


for op in ("vshl", "vshr"):
    for mode in ("clamp", "wrap"):
        for dt, at in (("u32", "u32"), ("s32", "s32"), ("s32", "u32"), ("u32", "s32")):
            _shift(op, dt, at, False, mode, "", "", "", "")
            _shift(op, dt, at, True, mode, "", "", "", "")
        _shift(op, "s32", "s32", True, mode, "", "h1", "b0", "")
        _shift(op, "u32", "u32", False, mode, "add", "b2", "", "")
        _shift(op, "s32", "s32", True, mode, "", "", "b1", "h1")
        _shift(op, "u32", "s32", True, mode, "", "b3", "", "b2")


def _vset(at, bt, cmp, sec, asel, bsel, dsel):
    four = bool(sec or dsel)
    text = f"vset.{at}.{bt}.{cmp}{_sfx(sec)} %d{_sfx(dsel)}, %a{_sfx(asel)}, %b{_sfx(bsel)}{', %c' if four else ''};"
    name = K.kname("vset", at, bt, cmp, sec, asel, bsel, "d" + dsel if dsel else "")

    def ref(a, b, c=0):
        t = int(_CMPS[cmp](_part(a, at == "s32", asel), _part(b, bt == "s32", bsel)))
        # NVIDIA: .min/.max compare with c as signed when a source is signed
        return _finish(t, c, False, "s32" in (at, bt), dsel, sec)
    case(name, text, 3 if four else 2, ref)


for cmp in _CMPS:
    for at, bt in (("u32", "u32"), ("s32", "s32"), ("s32", "u32"), ("u32", "s32")):
        _vset(at, bt, cmp, "", "", "", "")
    _vset("s32", "s32", cmp, "", "b1", "h0", "")
    _vset("u32", "s32", cmp, "add", "", "b3", "")
    _vset("s32", "u32", cmp, "max", "h1", "", "")
    _vset("s32", "s32", cmp, "", "b0", "b0", "b2")


def _vmad(dt, at, bt, sat, po, scale, asel, bsel):
    mods = f"vmad.{dt}.{at}.{bt}{'.po' if po else ''}{'.sat' if sat else ''}{_sfx(scale)}"
    text = f"{mods} %d, %a{_sfx(asel)}, %b{_sfx(bsel)}, %c;"
    name = K.kname("vmad", dt, at, bt, "po" if po else "", "sat" if sat else "", scale, asel, bsel)
    signed = at == "s32" or bt == "s32"
    # NVIDIA: one signed source (or a scale) makes every whole-word source signed, an unsigned one too
    ops = signed or bool(scale)

    def ref(a, b, c):
        ta = _part(a, at == "s32" or (ops and not asel), asel)
        tb = _part(b, bt == "s32" or (ops and not bsel), bsel)
        t = ta * tb + _ext(c, 32, ops) + (1 if po else 0)
        t >>= {"": 0, "shr7": 7, "shr15": 15}[scale]
        t = _ext(t, 64, signed)
        if sat:
            t = _clamp(t, signed, 32)
        return t & M32
    case(name, text, 3, ref)


for dt, at, bt in (("u32", "u32", "u32"), ("s32", "s32", "s32"), ("s32", "u32", "s32"), ("s32", "s32", "u32")):
    for sat in (False, True):
        for scale in ("", "shr7", "shr15"):
            _vmad(dt, at, bt, sat, False, scale, "", "")
    _vmad(dt, at, bt, True, True, "", "", "")
    _vmad(dt, at, bt, False, False, "shr15", "h0", "h1")
    _vmad(dt, at, bt, True, True, "shr7", "b1", "b3")


# ---------------------------------------------------------------- SIMD video instructions

def _avrg(x, y):
    s = x + y
    return (s + 1) >> 1 if s >= 0 else s >> 1


_SIMD = {"vadd": lambda a, b: a + b, "vsub": lambda a, b: a - b, "vavrg": _avrg,
         "vabsdiff": lambda a, b: abs(a - b), "vmin": min, "vmax": max}


def _simd(op, n, dt, at, bt, sat, add, mask, asel, bsel, cmp=""):
    w = 32 // n
    types = f"{at}.{bt}.{cmp}" if op == "vset" else f"{dt}.{at}.{bt}"
    mods = f"{op}{n}.{types}{'.sat' if sat else ''}{'.add' if add else ''}"
    text = f"{mods} %d{_sfx(mask)}, %a{_sfx(asel)}, %b{_sfx(bsel)}, %c;"
    name = K.kname(op + str(n), dt if op != "vset" else "", at, bt, cmp, "sat" if sat else "", "add" if add else "",
                   "m" + mask if mask else "", asel, bsel)
    ai = [int(ch) for ch in reversed((asel or ("h10" if n == 2 else "b3210"))[1:])]
    bi = [int(ch) for ch in reversed((bsel or ("h32" if n == 2 else "b7654"))[1:])]
    lanes = {int(ch) for ch in (mask or ("h10" if n == 2 else "b3210"))[1:]}
    fn = (lambda x, y: int(_CMPS[cmp](x, y))) if op == "vset" else _SIMD[op]

    def ref(a, b, c):
        x = (a & M32) | ((b & M32) << 32)
        d = c if add else 0
        for i in range(n):
            if i not in lanes:
                if not add:
                    d |= ((c >> (i * w)) & ((1 << w) - 1)) << (i * w)
                continue
            t = fn(_ext(x >> (ai[i] * w), w, at == "s32"), _ext(x >> (bi[i] * w), w, bt == "s32"))
            if sat:
                t = _clamp(t, dt == "s32", w)
            d = d + t if add else d | ((t & ((1 << w) - 1)) << (i * w))
        return d & M32
    case(name, text, 3, ref)


_TYPES3 = (("u32", "u32", "u32"), ("s32", "s32", "s32"), ("s32", "u32", "s32"), ("u32", "s32", "u32"))
for op in _SIMD:
    for dt, at, bt in _TYPES3:
        _simd(op, 2, dt, at, bt, False, False, "", "", "")
        _simd(op, 2, dt, at, bt, True, False, "", "", "")
        _simd(op, 2, dt, at, bt, False, True, "", "", "")
        _simd(op, 4, dt, at, bt, False, False, "", "", "")
        _simd(op, 4, dt, at, bt, True, False, "", "", "")
        _simd(op, 4, dt, at, bt, False, True, "", "", "")
    _simd(op, 2, "s32", "s32", "s32", True, False, "h0", "h32", "h01")
    _simd(op, 2, "u32", "u32", "u32", False, False, "h1", "h13", "h20")
    _simd(op, 2, "s32", "s32", "u32", False, True, "h1", "h00", "h33")
    _simd(op, 4, "s32", "s32", "s32", True, False, "b20", "b7150", "b0246")
    _simd(op, 4, "u32", "u32", "u32", False, False, "b31", "b3333", "b4567")
    _simd(op, 4, "u32", "s32", "s32", False, True, "b310", "b6420", "b1357")
for cmp in _CMPS:
    for _, at, bt in _TYPES3:
        _simd("vset", 2, "", at, bt, False, False, "", "", "", cmp)
        _simd("vset", 2, "", at, bt, False, True, "", "", "", cmp)
        _simd("vset", 4, "", at, bt, False, False, "", "", "", cmp)
        _simd("vset", 4, "", at, bt, False, True, "", "", "", cmp)
    _simd("vset", 2, "", "s32", "u32", False, False, "h1", "h31", "h02", cmp)
    _simd("vset", 4, "", "s32", "s32", False, False, "b21", "b7531", "b0000", cmp)
    _simd("vset", 4, "", "u32", "s32", False, True, "b30", "b1234", "b7777", cmp)


# ---------------------------------------------------------------- packed .u16x2 / .s16x2

def _packed(op, tn, relu=False):
    signed = tn == "s16x2"

    def ref(a, b):
        d = 0
        for i in range(2):
            x, y = _ext(a >> (16 * i), 16, signed), _ext(b >> (16 * i), 16, signed)
            r = {"add": x + y, "sub": x - y, "min": min(x, y), "max": max(x, y)}[op]
            if relu:
                r = max(r, 0)
            d |= (r & 0xFFFF) << (16 * i)
        return d
    case(K.kname(op, "relu" if relu else "", tn), f"{op}{'.relu' if relu else ''}.{tn} %d, %a, %b;", 2, ref)


@pytest.mark.parametrize("tn", ["u16x2", "s16x2"])
def test_sub_16x2_refused(tn):
    """ptxas (H200, driver 580) refuses sub.u16x2/sub.s16x2: 'Unexpected instruction types specified for
    'sub'' (tests/data/nvidia_simd_answers.json, "refused"); so do we, at the same line."""
    import ptx
    from ptx.errors import PTXSemanticError
    text = K.module(K.elementwise("k", f"sub.{tn} %d, %a, %b;", [("a", "b32"), ("b", "b32")], [("d", "b32")]),
                    target="sm_90")
    with pytest.raises(PTXSemanticError, match="Unexpected instruction types specified for 'sub'"):
        ptx.compile(text, target="host")


for tn in ("u16x2", "s16x2"):
    for op in ("add", "min", "max"):
        _packed(op, tn)
for op in ("min", "max"):
    _packed(op, "s16x2", relu=True)


# ---------------------------------------------------------------- inputs and checks

_EDGE_BYTES = np.array([0x00, 0x01, 0x7F, 0x80, 0x81, 0xFF, 0xFE, 0x40], dtype=np.uint32)
_EDGE_HALVES = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0xFFFE, 0x00FF, 0xFF00],
                        dtype=np.uint32)


def inputs(rng, name, n=N):
    """Random words; a third built from edge bytes, a third from edge half-words; shift counts near 0..40."""
    out = []
    for k in range(3):
        x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        t = n // 3
        by = rng.choice(_EDGE_BYTES, (t, 4))
        x[:t] = by[:, 0] | (by[:, 1] << 8) | (by[:, 2] << 16) | (by[:, 3] << 24)
        hw = rng.choice(_EDGE_HALVES, (t, 2))
        x[t:2 * t] = hw[:, 0] | (hw[:, 1] << 16)
        if k == 1 and name.startswith(("vshl", "vshr")):
            x[::2] = rng.integers(0, 40, len(x[::2])) * np.uint32(0x01010101)
        x[rng.permutation(n)] = x.copy()
        out.append(x)
    return out[:CASES[name][1]]


def _want(name, arrs):
    ref = CASES[name][2]
    return np.array([ref(*vals) for vals in zip(*[a.tolist() for a in arrs])], dtype=np.uint32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_simd_op(name, rng):
    arrs = inputs(rng, name)
    (got,) = K.run_elementwise(KS, name, arrs, ["b32"], rng)
    K.check_equal(got, _want(name, arrs), arrs, name)


def _answers():
    if not os.path.exists(ANSWERS):
        return {}
    with open(ANSWERS) as f:
        return json.load(f)["cases"]


# Where NVIDIA's answers follow no rule found so far (strict xfails: each must go once it is modelled).
_SHIFT_SAT = "vshl/vshr .sat into a part (.h1; one .b2 form): NVIDIA's clamp there is not modelled"
_U32_SEC = "u32 .sat with .min/.max: NVIDIA compares the clamped sum with c in a way not modelled"
DIVERGES = {
    "vabsdiff_s32_s32_s32_max_b1": "s32 .max after vabsdiff: 1 of 256 differs (|x| of INT_MIN-like values)",
    "vabsdiff_s32_s32_s32_min_b1": "s32 .min after vabsdiff: 2 of 256 differ (|x| of INT_MIN-like values)",
    "vadd_u32_u32_u32_sat_max_h1": _U32_SEC, "vadd_u32_u32_u32_sat_min_h1": _U32_SEC,
    "vsub_u32_u32_u32_sat_max_h1": _U32_SEC, "vsub_u32_u32_u32_sat_min_h1": _U32_SEC,
    "vmad_u32_u32_u32_po_sat": "vmad u32 .sat without a scale: NVIDIA's clamp of a wide product is not modelled",
    "vmad_u32_u32_u32_sat": "vmad u32 .sat without a scale: NVIDIA's clamp of a wide product is not modelled",
}
for _n in ("vshl_s32_s32_sat_clamp_b1_dh1", "vshl_s32_s32_sat_wrap_b1_dh1", "vshl_u32_s32_sat_wrap_b3_db2",
           "vshr_s32_s32_sat_clamp_b1_dh1", "vshr_s32_s32_sat_wrap_b1_dh1"):
    DIVERGES[_n] = _SHIFT_SAT


@pytest.mark.parametrize("name", K.cases(sorted(_answers()), DIVERGES))
def test_simd_matches_nvidia(name, rng):
    """The stored inputs give NVIDIA's stored outputs (and the reference agrees with NVIDIA)."""
    rec = _answers()[name]
    assert rec["text"] == CASES[name][0], "the instruction changed since the answers were recorded"
    arrs = [np.array(a, dtype=np.uint32) for a in rec["inputs"]]
    nv = np.array(rec["outputs"], dtype=np.uint32)
    (got,) = K.run_elementwise(KS, name, arrs, ["b32"], rng)
    K.check_equal(got, nv, arrs, name + " vs NVIDIA")
    K.check_equal(_want(name, arrs), nv, arrs, name + " reference vs NVIDIA")


def record(path, n=256, seed=11):
    """On a GPU (PTXKIT_BACKEND=cuda): every case's outputs on fixed inputs, as JSON at `path`."""
    rng_ = np.random.default_rng(seed)
    out, failed = {}, {}
    for name in sorted(CASES):
        arrs = inputs(rng_, name, n)
        try:
            (got,) = K.run_elementwise(KS, name, arrs, ["b32"], rng_)
        except Exception as e:  # noqa: BLE001 - a form NVIDIA refuses is recorded as refused
            failed[name] = str(e)
            continue
        out[name] = {"text": CASES[name][0], "inputs": [a.tolist() for a in arrs], "outputs": got.tolist()}
    with open(path, "w") as f:
        json.dump({"device": os.environ.get("SIMD_DEVICE", ""), "cases": out, "refused": failed}, f)
    return len(out), failed
