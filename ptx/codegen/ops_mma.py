"""Tensor-core matrix products on the CPU: wmma.mma and mma.sync. A lane holds a fragment of A, B and C
(mma_layouts.py); to compute its own elements of D it needs rows of A and columns of B that other lanes
hold, so the warp exchanges words once (ops_warp.exchange, one table per form) and each lane then
computes its elements alone (mma_arith.py). wmma.load/store and ldmatrix/stmatrix/movmatrix are in
ops_mma_move.py. On AMD GPUs the same code runs with the exchange in lane shuffles (no WMMA/MFMA yet)."""

from __future__ import annotations

import re
from functools import lru_cache

from ptx import ast as A
from ptx.codegen import mma_arith as M
from ptx.codegen import mma_kinds as KD
from ptx.codegen import mma_layouts as L
from ptx.codegen.function_emitter import FunctionEmitter, handles, semantic, unsupported
from ptx.codegen.ops_warp import lane_constant

ELEM_TYPES = ("f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s4", "u4", "b1", "s32", "e4m3", "e5m2")
LAYOUTS = ("row", "col")
RNDS = ("rn", "rz", "rm", "rp")
WMMA_SHAPES = {"f16": ("m16n16k16", "m8n32k16", "m32n8k16"), "bf16": ("m16n16k16", "m8n32k16", "m32n8k16"),
               "s8": ("m16n16k16", "m8n32k16", "m32n8k16"), "u8": ("m16n16k16", "m8n32k16", "m32n8k16"),
               "tf32": ("m16n16k8",), "f64": ("m8n8k4",), "s4": ("m8n8k32",), "u4": ("m8n8k32",),
               "b1": ("m8n8k128",)}
MMA_SHAPES = {"f16": ("m8n8k4", "m16n8k8", "m16n8k16"), "bf16": ("m16n8k8", "m16n8k16"),
              "tf32": ("m16n8k4", "m16n8k8"), "f64": ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"),
              "s8": ("m8n8k16", "m16n8k16", "m16n8k32"), "u8": ("m8n8k16", "m16n8k16", "m16n8k32"),
              "s4": ("m8n8k32", "m16n8k32", "m16n8k64"), "u4": ("m8n8k32", "m16n8k32", "m16n8k64"),
              "b1": ("m8n8k128", "m16n8k128", "m16n8k256"), "e4m3": ("m16n8k16", "m16n8k32"),
              "e5m2": ("m16n8k16", "m16n8k32")}
ACCUMULATORS = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "f64": ("f64",), "s8": ("s32",),
                "u8": ("s32",), "s4": ("s32",), "u4": ("s32",), "b1": ("s32",), "e4m3": ("f16", "f32"),
                "e5m2": ("f16", "f32")}
FP8 = ("e4m3", "e5m2")
INTS = ("s8", "u8", "s4", "u4")


class Form:
    """What an mma instruction computes, from its modifiers."""

    def __init__(self, ins):
        mods = list(ins.mods)
        self.wmma = ins.opcode == "wmma"
        if self.wmma:
            mods = mods[1:]              # 'mma'
        known = {"sync", "aligned", "satfinite", "popc", "xor", "and", "sp", "sp::ordered_metadata", *LAYOUTS,
                 *RNDS, *ELEM_TYPES}
        # mma.sp: 2:4 structured sparse A, its metadata register and sparsity selector (operands 5 and 6)
        self.sparse = None
        if not self.wmma and ("sp" in mods or "sp::ordered_metadata" in mods):
            ops = ins.operands
            scaled = 4 if "block_scale" in mods else 0
            if len(ops) != 6 + scaled or not isinstance(ops[5], A.Imm):
                semantic(ins, "mma.sp needs d, a, b, c, e and an immediate sparsity selector")
            self.sparse = ops[5].value
        self.kind = self.scale = None
        kind_types = None
        if not self.wmma and any(m.startswith("kind::") for m in mods):
            mods, kind_types = KD.parse(self, ins, mods)
        shapes = [m for m in mods if L.shape_mnk(m)]
        odd = [m for m in mods if m not in known and not L.shape_mnk(m)]
        if odd or len(shapes) != 1 or "sync" not in mods or "aligned" not in mods:
            unsupported(ins)
        self.shape = shapes[0]
        self.m, self.n, self.k = L.shape_mnk(self.shape)
        lays = [m for m in mods if m in LAYOUTS]
        types = list(kind_types) if kind_types else [m for m in mods if m in ELEM_TYPES]
        if self.wmma and len(types) == 2:
            types = [types[0], "f16", "f16", types[1]]
        if len(lays) != 2 or len(types) != 4:
            unsupported(ins)
        self.alayout, self.blayout = lays
        self.dt, self.at, self.bt, self.ct = types
        self.sat = "satfinite" in mods
        self.rnd = next((m for m in mods if m in RNDS), None)
        self.bitop = next((m for m in ("xor", "and") if m in mods), None)
        if self.kind is None:
            self._check(ins)

    def _check(self, ins):
        at, bt, ct, dt, shape = self.at, self.bt, self.ct, self.dt, self.shape
        if self.sparse is not None:
            return self._check_sparse(ins)
        shapes = (WMMA_SHAPES if self.wmma else MMA_SHAPES).get(at, ())
        same_ab = at == bt or any(at in kind and bt in kind and not self.wmma
                                  for kind in (("s8", "u8"), ("s4", "u4"), FP8))
        ok = shape in shapes and same_ab and ct in ACCUMULATORS[at] and dt in ACCUMULATORS[at]
        ok = ok and (self.bitop is not None) == (at == "b1") and (not self.sat or at in ("s8", "u8", "s4", "u4"))
        ok = ok and (self.rnd is None or at == "f64") and (not self.rnd or self.wmma or self.rnd == "rn")
        if not self.wmma and not (shape == "m8n8k4" and at == "f16"):
            ok = ok and (self.alayout, self.blayout) == ("row", "col")
        if self.wmma and at in ("s4", "u4", "b1"):
            ok = ok and (self.alayout, self.blayout) == ("row", "col")
        if shape == "m8n8k4" and at == "f16" and not self.wmma:
            ok = ok and not (ct == "f32" and dt == "f16")
        elif at in ("f16", *FP8) and not self.wmma:
            # fp8 too: ptxas (CUDA 13.0) rejects C and D of different types for sm_90 and sm_120a alike
            ok = ok and ct == dt
        if not ok:
            unsupported(ins)

    def _check_sparse(self, ins):
        """The mma.sp forms ptxas takes for sm_80..sm_90 (.e4m3/.e5m2: .f32 only)."""
        at, bt, ct, dt = self.at, self.bt, self.ct, self.dt
        selectors = L.SPARSE_SHAPES.get(at, {}).get(self.shape)
        same_ab = at == bt or any({at, bt} <= set(kind) for kind in (("s8", "u8"), ("s4", "u4"), FP8))
        ok = selectors is not None and same_ab and ct == dt and ct in ACCUMULATORS[at]
        ok = ok and (self.alayout, self.blayout) == ("row", "col") and self.rnd is None and self.bitop is None
        ok = ok and (not self.sat or at in ("s8", "u8", "s4", "u4")) and (at not in FP8 or ct == "f32")
        if not ok:
            unsupported(ins)
        if not 0 <= self.sparse < selectors:
            semantic(ins, f"sparsity selector {self.sparse} of mma.sp.{self.shape}.{at} is not 0..{selectors - 1}")

    def key(self):
        return (self.wmma, self.shape, self.at, self.bt, self.ct, self.dt, self.alayout, self.blayout, self.sparse,
                self.kind, self.scale)


# ------------------------------------------------------------------ fragments and the exchange plan

class Frag:
    def __init__(self, layout, ty, regs, reg_bits):
        self.layout, self.ty, self.regs, self.reg_bits = layout, ty, regs, reg_bits
        self.bits = L.BITS[ty]
        self.words = regs * reg_bits // 32

    def place(self, slot):
        """(first word, sub-element) of a slot within the fragment's words."""
        bit = slot * self.bits
        return bit // 32, (bit % 32) // self.bits if self.bits < 32 else 0


def fragments(key):
    """(A, B, C, D) fragments of a form; mma.sp's also its metadata word's (E)."""
    wmma, shape, at, bt, ct, dt, al, bl, sparse = key[:9]
    if sparse is not None:
        frag = lambda mat, ty: Frag(L.sparse_layout(shape, mat, ty), ty, L.sparse_regs(shape, mat, ty), 32)
        meta = L.metadata_layout(shape, at, sparse)
        cells = [[cell or ("unread", lane, s) for s, cell in enumerate(row)] for lane, row in enumerate(meta)]
        return frag("a", at), frag("b", bt), frag("c", ct), frag("d", dt), Frag(cells, "u4", 1, 32)
    if wmma:
        lay, regs = L.wmma_layout, L.wmma_regs
        frag = lambda mat, ty, _lay: Frag(lay(shape, mat, ty), ty, regs(shape, mat, ty), 64 if ty == "f64" else 32)
    else:
        frag = lambda mat, ty, lay: Frag(L.mma_layout(shape, mat, ty, lay), ty, L.mma_regs(shape, mat, ty),
                                        64 if ty == "f64" else 32)
    return frag("a", at, al), frag("b", bt, bl), frag("c", ct, "row"), frag("d", dt, "row")


def group_of(key):
    """The lanes that share one product: mma.m8n8k4 .f16 runs four per warp."""
    wmma, shape, at = key[:3]
    if not wmma and shape == "m8n8k4" and at == "f16":
        return L.m8n8k4_group
    return lambda lane: 0


class Plan:
    """For every D slot (the same slot in every lane): where its A row, B column and C element come from,
    as (source, sub-element) with source ('own', word) or ('got', index into the exchange's results)."""

    def __init__(self, key):
        frags = self.frags = fragments(key)
        fa, fb, fc, fd = frags[:4]
        fe = frags[4] if len(frags) > 4 else None
        sparse = key[8] is not None
        grp = group_of(key)
        m, n, k = L.shape_mnk(key[1])
        if not key[0] and key[1] == "m8n8k4" and key[2] == "f16":
            m, n, k = 8, 8, 4
        self.k = k
        mats = [("a", fa), ("b", fb), ("c", fc)] + ([("e", fe)] if fe else [])
        scaled = key[10] is not None
        if scaled:      # block scaling: each lane's scale-A and scale-B words, as cells (quad, lane in quad), and
            quad = Frag([[(lane // 4, lane % 4)] for lane in range(32)], "s32", 1, 32)      # its selectors
            mats += [("sa", quad), ("sb", quad), ("sel", quad)]
        base, self.offered = {}, 0
        for mat, fr in mats:
            base[mat], self.offered = self.offered, self.offered + fr.words
        holder = {}
        for mat, fr in mats:
            for lane, slots in enumerate(fr.layout):
                for s, rc in enumerate(slots):
                    w, sub = fr.place(s)
                    holder.setdefault((mat, grp(lane), rc), (lane, base[mat] + w, sub))
        self.sources = [[] for _ in range(32)]
        got = {}

        def source(locs):
            """(kind, word) for a word wanted by every lane: its own, or one the exchange brings."""
            if all(src == lane for lane, (src, _) in enumerate(locs)) and len({w for _, w in locs}) == 1:
                return ("own", locs[0][1])
            j = got.get(tuple(locs))
            if j is None:
                j = got[tuple(locs)] = len(self.sources[0])
                for lane, loc in enumerate(locs):
                    self.sources[lane].append(loc)
            return ("got", j)

        def request(mat, cell, wide):
            locs = [holder[(mat, grp(lane), cell(lane))] for lane in range(32)]
            subs = {sub for _, _, sub in locs}
            words = [source([(src, w + i) for src, w, _ in locs]) for i in range(2 if wide else 1)]
            # where the element sits in its word: the same in every lane, or lane by lane
            return words, subs.pop() if len(subs) == 1 else tuple(sub for _, _, sub in locs)

        self.slots = []
        for s in range(len(fd.layout[0])):
            rc = lambda lane: fd.layout[lane][s]
            # mma.sp: A's row has k/2 stored columns; the metadata nibbles of the row say which of B's rows each meets
            arow = [request("a", lambda lane, q=q: (rc(lane)[0], q), fa.bits == 64) for q in range(k // 2 if sparse
                                                                                                    else k)]
            bcol = [request("b", lambda lane, q=q: (q, rc(lane)[1]), fb.bits == 64) for q in range(k)]
            c = request("c", rc, fc.bits == 64)
            meta = scales = None
            if sparse:
                meta = [request("e", lambda lane, q=q: (rc(lane)[0], q), False)
                        for q in range(L.sparse_groups(key[1], key[2]))]
            if scaled:
                hi = {rc(lane)[0] // 8 for lane in range(32)}
                assert len(hi) == 1, "a D slot's rows straddle the two halves"
                scales = ([request("sa", lambda lane, j=j: (rc(lane)[0] % 8, j), False) for j in range(4)],
                          [request("sb", lambda lane, j=j: (rc(lane)[1], j), False) for j in range(4)],
                          request("sel", lambda lane: (lane // 4, lane % 4), False), hi.pop())
            self.slots.append((arow, bcol, c, meta, scales))


@lru_cache(maxsize=None)
def plan(key):
    return Plan(key)


# ------------------------------------------------------------------ lowering

def _vector(ins, op, n, what):
    elems = op.elems if isinstance(op, A.Vector) else [op]
    if len(elems) != n:
        semantic(ins, f"{what} needs {n} registers, has {len(elems)}")
    return elems


def read_words(em, regs, reg_bits):
    """The i32 words of a fragment's registers (a 64-bit register: low word first)."""
    f = em.f
    out = []
    for r in regs:
        if reg_bits == 64:
            v = em.read(r, "b64")
            out += [f.op(f"trunc i64 {v} to i32"), f.op(f"trunc i64 {f.op(f'lshr i64 {v}, 32')} to i32")]
        else:
            out.append(em.read(r, "b32"))
    return out


def write_slots(em, regs, frag, values):
    """Pack slot values (iN of the fragment's element width) into its registers and write them."""
    for r, v in zip(regs, _pack(em, frag, values)):
        em.write(r, v, "b64" if frag.reg_bits == 64 else "b32")


class Elements:
    """Element values from the exchanged words, each extracted (and decoded) once."""

    def __init__(self, em, got, own):
        self.em, self.got, self.own, self.memo = em, got, own, {}

    def word(self, src):
        return self.got[src[1]] if src[0] == "got" else self.own[src[1]]

    def raw(self, req, bits):
        words, sub = req
        key = ("raw", tuple(words), sub, bits)
        if key not in self.memo:
            f = self.em.f
            if bits == 64:
                lo = f.op(f"zext i32 {self.word(words[0])} to i64")
                hi = f.op(f"zext i32 {self.word(words[1])} to i64")
                self.memo[key] = f.op(f"or i64 {lo}, {f.op(f'shl i64 {hi}, 32')}")
            elif bits == 32:
                self.memo[key] = self.word(words[0])
            else:
                shift = sub * bits if isinstance(sub, int) else self.lane_shift(sub, bits)
                v = f.op(f"lshr i32 {self.word(words[0])}, {shift}") if shift else self.word(words[0])
                self.memo[key] = f.op(f"trunc i32 {v} to i{bits}")
        return self.memo[key]

    def lane_shift(self, subs, bits):
        """i32 bit offset of an element whose place in its word depends on the lane."""
        return lane_constant(self.em, "mma.shift", [s * bits for s in subs])

    def cached(self, req, tag, fn):
        key = (tag, tuple(req[0]), req[1])
        if key not in self.memo:
            self.memo[key] = fn()
        return self.memo[key]


def _widen_int(em, raw, ty):
    """i32 of a raw integer element of type ty."""
    return em.f.op(f"{'sext' if ty[0] == 's' else 'zext'} i{L.BITS[ty]} {raw} to i32")


def _int_elem(em, els, req, ty):
    return els.cached(req, ty, lambda: _widen_int(em, els.raw(req, L.BITS[ty]), ty))


def _float_elem(em, els, req, ty):
    return els.cached(req, "num" + ty, lambda: M.decode(em, els.raw(req, L.BITS[ty]), ty))


def _sparse_pairs(em, form, els, arow, bcol, meta):
    """mma.sp's products: each stored A element with the B element of the column its metadata names (raw bits,
    chosen by selects on the lane's nibble), decoded as the dense forms decode them."""
    f = em.f
    at, bt = form.at, form.bt
    bits = L.BITS[at]
    pairs = []
    for j, areq in enumerate(arow):
        if at == "tf32":        # 0b0100 / 0b1110: the first or the second of pair j, counted in 16-bit halves
            nib = f.op(f"zext i4 {els.raw(meta[j], 4)} to i32")
            idx, cands = f.op(f"and i32 {f.op(f'lshr i32 {nib}, 1')}, 1"), bcol[2 * j:2 * j + 2]
        elif bits == 4:         # groups of eight columns in pairs: elements 4q, 4q+1 are the pair the low 2 bits
            #                     name, 4q+2, 4q+3 the pair the high 2 bits name
            nib = f.op(f"zext i4 {els.raw(meta[j // 4], 4)} to i32")
            idx = f.op(f"and i32 {f.op(f'lshr i32 {nib}, {2 * (j % 4 // 2)}')}, 3")
            cands = [bcol[8 * (j // 4) + 2 * p + j % 2] for p in range(4)]
        else:                   # the low 2 bits index the group's first stored element, the high 2 its second
            nib = f.op(f"zext i4 {els.raw(meta[j // 2], 4)} to i32")
            idx = f.op(f"and i32 {f.op(f'lshr i32 {nib}, {2 * (j % 2)}')}, 3")
            cands = bcol[4 * (j // 2):4 * (j // 2) + 4]
        b = els.raw(cands[0], bits)
        for i, c in enumerate(cands[1:], 1):
            b = f.op(f"select i1 {f.op(f'icmp eq i32 {idx}, {i}')}, i{bits} {els.raw(c, bits)}, i{bits} {b}")
        if at in INTS:
            pairs.append((_int_elem(em, els, areq, at), _widen_int(em, b, bt)))
        else:
            pairs.append((_float_elem(em, els, areq, at), M.decode(em, b, bt)))
    return pairs


def compute_slot(em, form, pl, els, arow, bcol, creq, meta=None, scales=None):
    """The D element of one slot: iN bits of the D type."""
    f = em.f
    at, bt, ct, dt = form.at, form.bt, form.ct, form.dt
    if form.kind:               # sm_120's kinds: one grid sum of the (scaled) products
        nvec = form.scale[0] if form.scale else 1
        if meta is not None:
            # stored element j lies in the group of dense columns around 2j
            pairs, chunk_of = _sparse_pairs(em, form, els, arow, bcol, meta), lambda j: 2 * j * nvec // pl.k
        else:
            pairs = [(_float_elem(em, els, a, at), _float_elem(em, els, b, bt)) for a, b in zip(arow, bcol)]
            chunk_of = lambda q: q * nvec // pl.k
        if scales is not None:
            pairs = KD.scaled_pairs(em, form, pairs, chunk_of, scales, lambda req: els.word(req[0][0]))
        return M.tensor_dot(em, pairs, _float_elem(em, els, creq, ct), "f32" if dt == "f32" else "f16-acc")
    if meta is not None:        # mma.sp: the same sums as the dense forms', over the stored columns
        pairs = _sparse_pairs(em, form, els, arow, bcol, meta)
        if at in FP8:
            return M.fp8_dot(em, pairs, els.raw(creq, 32), dt)
    elif at == "b1":
        if any(sa != q % 32 for q, (_, sa) in enumerate(arow)) or \
                any(sb != q % 32 for q, (_, sb) in enumerate(bcol)):
            raise AssertionError("b1 rows are not whole words")
        pairs = [(els.word(arow[q][0][0]), els.word(bcol[q][0][0])) for q in range(0, pl.k, 32)]
        return M.popc_dot(em, pairs, els.raw(creq, 32), form.bitop)
    elif at in INTS:
        pairs = [(_int_elem(em, els, a, at), _int_elem(em, els, b, bt)) for a, b in zip(arow, bcol)]
    elif at == "f64":
        dbl = lambda r: els.cached(r, "f64", lambda: f.op(f"bitcast i64 {els.raw(r, 64)} to double"))
        nan = 0xFFF8000000000000 if not form.wmma and form.shape in ("m16n8k8", "m16n8k16") else 0x7FFFFFFFFFFFFFFF
        pairs = [(dbl(a), dbl(b)) for a, b in zip(arow, bcol)]
        return M.f64_chain(em, pairs, dbl(creq), form.rnd or "rn", nan - (1 << 64 if nan >> 63 else 0))
    elif not form.wmma and form.shape == "m8n8k4":
        half = lambda r: els.cached(r, "h2f", lambda: f.op(f"fpext half {f.op(f'bitcast i16 {els.raw(r, 16)} to half')} to float"))
        prods = [f.op(f"fmul float {half(a)}, {half(b)}") for a, b in zip(arow, bcol)]
        c = half(creq) if ct == "f16" else f.op(f"bitcast i32 {els.raw(creq, 32)} to float")
        return M.m8n8k4_f16(em, prods, c, ct, dt)
    else:
        pairs = [(_float_elem(em, els, a, at), _float_elem(em, els, b, bt)) for a, b in zip(arow, bcol)]
        if at in FP8:
            return M.fp8_dot(em, pairs, els.raw(creq, L.BITS[ct]), dt)
    if at in INTS:
        return M.int_dot(em, pairs, els.raw(creq, 32), form.sat, at[0] == "s" or bt[0] == "s")
    c = _float_elem(em, els, creq, ct)
    out = "f32" if dt == "f32" else ("f16-acc" if ct == "f16" else "f16")
    return M.tensor_dot(em, pairs, c, out, block=4 if form.wmma and at == "tf32" else None)


class _Body:
    """The out-of-line function that computes a lane's D from its exchange row (one per form and module:
    a kernel runs the same mma at many sites). What the arithmetic needs of an emitter."""

    def __init__(self, m, fn_class):
        self.m, self.f, self.cur_ins = m, fn_class(), None

    def lane_id(self):
        return "%lane"

    call = FunctionEmitter.call


def _compute_fn(em, form, pl):
    """Name of `void (ptr row, i32 lane)`: reads the row's offered and received words, leaves the D words
    after the received ones."""
    key = form.key() + (form.sat, form.rnd, form.bitop)
    name = "mma." + ".".join(str(x) for x in key)
    if name in em.m.helpers:
        return name
    b = _Body(em.m, type(em.f))
    f = b.f
    n_out = len(pl.sources[0])
    at = lambda i: f.op(f"getelementptr i32, ptr %row, i32 {i}")
    own = [f.op(f"load i32, ptr {at(i)}") for i in range(pl.offered)]
    got = [f.op(f"load i32, ptr {at(pl.offered + j)}") for j in range(n_out)]
    els = Elements(b, got, own)
    values = [compute_slot(b, form, pl, els, *slot) for slot in pl.slots]
    fd = pl.frags[3]
    words = []
    for v in _pack(b, fd, values):
        if fd.reg_bits == 64:
            words += [f.op(f"trunc i64 {v} to i32"), f.op(f"trunc i64 {f.op(f'lshr i64 {v}, 32')} to i32")]
        else:
            words.append(v)
    for i, w in enumerate(words):
        f.emit(f"store i32 {w}, ptr {at(pl.offered + n_out + i)}")
    f.term("ret void")
    text = "\n".join([f'define internal void @"{name}"(ptr %row, i32 %lane) nounwind {{', "entry:"] +
                      f.entry_allocas + f.lines + ["}"])
    em.m.add_helper(name, text)
    return name


def _pack(em, frag, values):
    """Register values (i32, or i64 for .f64) holding slot values of the fragment's element width."""
    f = em.f
    per = frag.reg_bits // frag.bits
    if frag.reg_bits == 64 or per == 1:
        return values
    out = []
    for i in range(frag.regs):
        word = "0"
        for j in range(per):
            v = f.op(f"zext i{frag.bits} {values[i * per + j]} to i32")
            word = f.op(f"or i32 {word}, {f.op(f'shl i32 {v}, {j * frag.bits}')}")
        out.append(word)
    return out


def lower_mma(em, ins):
    form = Form(ins)
    pl = plan(form.key())
    fa, fb, fc, fd = pl.frags[:4]
    ops = ins.operands
    n_sparse = 2 if form.sparse is not None else 0
    if len(ops) != 4 + n_sparse + (4 if form.scale else 0):
        semantic(ins, "needs d, a, b, c" + (", e, f" if n_sparse else "") +
                 (", scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}" if form.scale
                  else ""))
    d = _vector(ins, ops[0], fd.regs, "d")
    words = []
    for op, fr, what in ((ops[1], fa, "a"), (ops[2], fb, "b"), (ops[3], fc, "c")):
        words += read_words(em, _vector(ins, op, fr.regs, what), fr.reg_bits)
    if form.sparse is not None:
        words.append(em.read(ops[4], "b32"))        # the metadata word
    if form.scale:
        words += _scale_words(em, ins, form, ops[4 + n_sparse:])
    fn = _compute_fn(em, form, pl)
    f = em.f

    def then(row):
        f.emit(f'call void @"{fn}"(ptr {row.ptr}, i32 {em.lane_id()})')
        res = [row.load(row.free_at + i) for i in range(fd.words)]
        for i, r in enumerate(d):
            if fd.reg_bits == 64:
                lo, hi = (f.op(f"zext i32 {w} to i64") for w in res[2 * i:2 * i + 2])
                em.write(r, f.op(f"or i64 {lo}, {f.op(f'shl i64 {hi}, 32')}"), "b64")
            else:
                em.write(r, res[i], "b32")
    em.exchange_words(words, pl.sources, then, room=fd.words)


def _scale_words(em, ins, form, ops):
    """Block scaling's offered words: scale-a-data, scale-b-data and the four selectors, a byte each (byte-id-a,
    thread-id-a, byte-id-b, thread-id-b from the low byte up)."""
    f = em.f
    sels, imms = [], []
    for op in (ops[1], ops[3]):
        pair = _vector(ins, op, 2, "a {byte-id, thread-id} selector")
        imms.append(tuple(x.value if isinstance(x, A.Imm) else None for x in pair))
        for x in pair:
            v = f.op(f"zext i16 {em.read(x, 'b16')} to i32")
            sels.append(f.op(f"and i32 {v}, 255"))
    KD.check_selectors(form, ins, imms)
    word = "0"
    for i, v in enumerate(sels):
        word = f.op(f"or i32 {word}, {f.op(f'shl i32 {v}, {8 * i}')}")
    return [em.read(ops[0], "b32"), em.read(ops[2], "b32"), word]


@handles("mma")
def op_mma(em, ins):
    lower_mma(em, ins)


@handles("wmma")
def op_wmma(em, ins):
    from ptx.codegen import ops_mma_move
    kind = ins.mods[0] if ins.mods else None
    if kind == "mma":
        lower_mma(em, ins)
    elif kind == "load":
        ops_mma_move.wmma_load(em, ins)
    elif kind == "store":
        ops_mma_move.wmma_store(em, ins)
    else:
        unsupported(ins)


def fragment_of(ins, mat, shape, ty):
    """The wmma fragment (Frag) a load or store moves."""
    if re.fullmatch(r"m\d+n\d+k\d+", shape) is None:
        unsupported(ins)
    return Frag(L.wmma_layout(shape, mat, ty), ty, L.wmma_regs(shape, mat, ty), 64 if ty == "f64" else 32)
