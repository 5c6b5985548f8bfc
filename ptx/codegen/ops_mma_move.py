"""Tensor-core fragments to and from memory: wmma.load/wmma.store (each lane reads or writes its own slots:
no data crosses lanes, so they suspend nothing) and ldmatrix/stmatrix/movmatrix (the row addresses, or the
elements, cross lanes through one exchange, FunctionEmitter.exchange_words)."""

from __future__ import annotations

from ptx import ast as A
from ptx.codegen import memcheck
from ptx.codegen import mma_layouts as L
from ptx.codegen.function_emitter import handles, semantic, unsupported
from ptx.codegen.ops_mem import space_of
from ptx.codegen.ops_mma import ELEM_TYPES, LAYOUTS, WMMA_SHAPES, fragment_of, read_words

BIG3 = WMMA_SHAPES["f16"]
ACC_SHAPES = {"f16": BIG3, "f32": BIG3 + ("m16n16k8",), "s32": BIG3 + ("m8n8k32", "m8n8k128"), "f64": ("m8n8k4",)}


def _affine(layout):
    """(row of g, row of t, col of g, col of t, [(row, col) of each slot at lane 0]) when every slot's row
    and column are the same linear function of groupID g and threadID_in_group t plus a constant."""
    at = lambda lane: layout[lane]
    base = at(0)
    dg = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(at(4), base)]
    dt = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(at(1), base)]
    if len(set(dg)) != 1 or len(set(dt)) != 1:
        return None
    (rg, cg), (rt, ct) = dg[0], dt[0]
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        if any(rc != (r + rg * g + rt * t, c + cg * g + ct * t) for rc, (r, c) in zip(at(lane), base)):
            return None
    return rg, rt, cg, ct, base


def _wmma_parts(em, ins, store):
    mods = list(ins.mods)
    mat = mods[1] if len(mods) > 1 else None
    shapes = [m for m in mods if L.shape_mnk(m)]
    types = [m for m in mods if m in ELEM_TYPES]
    lays = [m for m in mods if m in LAYOUTS]
    known = {"load", "store", "a", "b", "c", "d", "sync", "aligned", "global", "shared", "generic", *LAYOUTS,
             *ELEM_TYPES}
    if any(m not in known and not L.shape_mnk(m) and not m.startswith("shared::") for m in mods) or \
            len(shapes) != 1 or len(types) != 1 or len(lays) != 1 or mat not in (("d",) if store else "abc"):
        unsupported(ins)
    shape, ty, lay = shapes[0], types[0], lays[0]
    at = ty if mat in "ab" else None
    if at is not None and shape not in WMMA_SHAPES.get(at, ()):
        unsupported(ins)
    if mat in "cd" and shape not in ACC_SHAPES.get(ty, ()):
        unsupported(ins)
    if ty in ("s4", "u4", "b1") and lay != {"a": "row", "b": "col"}[mat]:
        unsupported(ins)
    frag = fragment_of(ins, "c" if mat == "d" else mat, shape, ty)
    return mat, shape, ty, lay, frag, space_of(mods)


def _slot_offsets(em, frag, mat, shape, lay, stride):
    """i64 element index of each slot of this lane (sub-byte types: of each register's first slot)."""
    f = em.f
    aff = _affine(frag.layout)
    if aff is None:
        raise AssertionError(f"wmma {mat} {shape} {frag.ty}: no affine layout")
    rg, rt, cg, ct, base = aff
    lane = em.lane_id()
    g, t = f.op(f"lshr i32 {lane}, 2"), f.op(f"and i32 {lane}, 3")
    row0 = f.op(f"add i32 {f.op(f'mul i32 {g}, {rg}')}, {f.op(f'mul i32 {t}, {rt}')}")
    col0 = f.op(f"add i32 {f.op(f'mul i32 {g}, {cg}')}, {f.op(f'mul i32 {t}, {ct}')}")
    row0, col0 = f.op(f"zext i32 {row0} to i64"), f.op(f"zext i32 {col0} to i64")
    per = max(1, 32 // frag.bits) if frag.bits < 8 else 1
    out = []
    for s in range(0, len(base), per):
        r, c = base[s]
        if per > 1:       # one register: `per` consecutive elements along the leading dimension
            lead = [base[s + i][1] - c if lay == "row" else base[s + i][0] - r for i in range(per)]
            if lead != list(range(per)):
                raise AssertionError("sub-byte wmma slots are not contiguous")
        row, col = f.op(f"add i64 {row0}, {r}"), f.op(f"add i64 {col0}, {c}")
        major, minor = (row, col) if lay == "row" else (col, row)
        out.append(f.op(f"add i64 {f.op(f'mul i64 {major}, {stride}')}, {minor}"))
    return out


def _stride(em, ins, mat, shape, lay):
    ops = ins.operands
    if len(ops) > 2:
        return em.f.op(f"zext i32 {em.read(ops[2], 'u32')} to i64")
    rows, cols = L.dims(mat, shape)
    return str(cols if lay == "row" else rows)


def _element_ptr(em, base, index, bits):
    return em.f.op(f"getelementptr i8, ptr {base}, i64 {em.f.op(f'mul i64 {index}, {bits // 8}')}") \
        if bits >= 8 else em.f.op(f"getelementptr i8, ptr {base}, i64 {em.f.op(f'lshr i64 {index}, {3 if bits == 1 else 1}')}")


def wmma_load(em, ins):
    mat, shape, ty, lay, frag, space = _wmma_parts(em, ins, store=False)
    f = em.f
    ops = ins.operands
    dst = ops[0].elems if isinstance(ops[0], A.Vector) else [ops[0]]
    if len(dst) != frag.regs:
        semantic(ins, f"the fragment needs {frag.regs} registers, has {len(dst)}")
    base = em.address(ops[1], space)
    offs = _slot_offsets(em, frag, mat, shape, lay, _stride(em, ins, mat, shape, lay))
    bits = frag.bits
    ety = f"i{max(bits, 32) if bits < 8 else bits}"
    vals = []
    for idx in offs:
        p = _element_ptr(em, base, idx, bits)
        size = max(bits, 32) // 8 if bits < 8 else bits // 8
        memcheck.check(em, p, size, False, space)
        vals.append(f.op(f"load {ety}, ptr {p}, align {size}"))
    if bits < 8:
        for r, v in zip(dst, vals):
            em.write(r, v, "b32")
        return
    from ptx.codegen.ops_mma import write_slots
    write_slots(em, dst, frag, vals)


def wmma_store(em, ins):
    mat, shape, ty, lay, frag, space = _wmma_parts(em, ins, store=True)
    f = em.f
    ops = ins.operands
    src = ops[1].elems if isinstance(ops[1], A.Vector) else [ops[1]]
    if len(src) != frag.regs:
        semantic(ins, f"the fragment needs {frag.regs} registers, has {len(src)}")
    base = em.address(ops[0], space)
    offs = _slot_offsets(em, frag, "d", shape, lay, _stride(em, ins, "d", shape, lay))
    words = read_words(em, src, frag.reg_bits)
    for s, idx in enumerate(offs):
        if frag.bits == 64:
            lo, hi = (f.op(f"zext i32 {w} to i64") for w in words[2 * s:2 * s + 2])
            v, ety = f.op(f"or i64 {lo}, {f.op(f'shl i64 {hi}, 32')}"), "i64"
        else:
            w, sub = frag.place(s)
            v = words[w]
            if frag.bits < 32:
                v = f.op(f"trunc i32 {f.op(f'lshr i32 {v}, {sub * frag.bits}')} to i{frag.bits}")
            ety = f"i{frag.bits}"
        p = _element_ptr(em, base, idx, frag.bits)
        memcheck.check(em, p, frag.bits // 8, True, space)
        f.emit(f"store {ety} {v}, ptr {p}, align {frag.bits // 8}")


# ------------------------------------------------------------------ ldmatrix / stmatrix / movmatrix

def _matrix_parts(em, ins, kind):
    mods = list(ins.mods)
    nums = [m for m in mods if m in ("x1", "x2", "x4")]
    known = {"sync", "aligned", "m8n8", "x1", "x2", "x4", "trans", "shared", "b16"}
    if any(m not in known and not m.startswith("shared::") for m in mods) or len(nums) != 1 or \
            "m8n8" not in mods or "b16" not in mods or "sync" not in mods or "aligned" not in mods:
        unsupported(ins)
    return int(nums[0][1]), "trans" in mods, space_of(mods)


def _address_value(em, op, space):
    """The i64 value of an address operand [reg+off] / [symbol+off] in its state space."""
    if not isinstance(op, A.Address) or op.base is None:
        semantic(em.cur_ins, "needs an address [p]")
    if em.is_register(op.base):
        rty, _ = em.reg(op.base)
        v = em.read(A.Reg(op.base, op.pos), "u64" if rty == "i64" else "u32")
        v = v if rty == "i64" else em.f.op(f"zext i32 {v} to i64")
    else:
        v = em.symbol_value(op.base, 0, em.cur_ins)
    return em.f.op(f"add i64 {v}, {op.offset}") if op.offset else v


def _split(em, v):
    f = em.f
    return [f.op(f"trunc i64 {v} to i32"), f.op(f"trunc i64 {f.op(f'lshr i64 {v}, 32')} to i32")]


def _row_sources(n, trans):
    """For every lane, the (lane, word) pairs of the row addresses it needs: per matrix, the row's
    (x1..x4: rows 8i..8i+7 of lanes' addresses), or for .trans the two rows of its column pair."""
    out = []
    for lane in range(32):
        row = []
        for i in range(n):
            srcs = [8 * i + (lane >> 2)] if not trans else [8 * i + 2 * (lane & 3) + j for j in range(2)]
            for s in srcs:
                row += [(s, 0), (s, 1)]
        out.append(row)
    return out


def _quad_byte(em, lane):
    """i64 4 * (lane % 4): the byte of a row where this lane's two elements start."""
    f = em.f
    t = f.op(f"and i32 {lane}, 3")
    return f.op(f"zext i32 {f.op(f'shl i32 {t}, 2')} to i64")


def _group_byte(em, lane):
    """i64 2 * (lane / 4): the byte of column lane/4 in a row of 16-bit elements."""
    f = em.f
    g = f.op(f"lshr i32 {lane}, 2")
    return f.op(f"zext i32 {f.op(f'shl i32 {g}, 1')} to i64")


def _rows(em, row, n, trans):
    """The exchanged row addresses (i64), per matrix (.trans: two per matrix)."""
    f = em.f
    ptrs = []
    for i in range(0, 2 * n * (2 if trans else 1), 2):
        lo, hi = (f.op(f"zext i32 {row.got(j)} to i64") for j in (i, i + 1))
        ptrs.append(f.op(f"or i64 {lo}, {f.op(f'shl i64 {hi}, 32')}"))
    return ptrs


@handles("ldmatrix")
def op_ldmatrix(em, ins):
    n, trans, space = _matrix_parts(em, ins, "ld")
    f = em.f
    dst = ins.operands[0].elems if isinstance(ins.operands[0], A.Vector) else [ins.operands[0]]
    if len(dst) != n:
        semantic(ins, f"needs {n} destination registers")
    words = _split(em, _address_value(em, ins.operands[1], space))

    def then(row):
        rows = _rows(em, row, n, trans)
        lane = em.lane_id()
        for i, r in enumerate(dst):
            if not trans:      # this lane's two elements of row lane/4: bytes 4*(lane%4) of that row
                p = em.space_ptr(f.op(f"add i64 {rows[i]}, {_quad_byte(em, lane)}"), space)
                memcheck.check(em, p, 4, False, space)
                em.write(r, f.op(f"load i32, ptr {p}, align 4"), "b32")
                continue
            col = _group_byte(em, lane)
            halves = []
            for j in range(2):     # column lane/4 of rows 2*(lane%4) + j
                p = em.space_ptr(f.op(f"add i64 {rows[2 * i + j]}, {col}"), space)
                memcheck.check(em, p, 2, False, space)
                halves.append(f.op(f"zext i16 {f.op(f'load i16, ptr {p}, align 2')} to i32"))
            em.write(r, f.op(f"or i32 {halves[0]}, {f.op(f'shl i32 {halves[1]}, 16')}"), "b32")
    em.exchange_words(words, _row_sources(n, trans), then)


@handles("stmatrix")
def op_stmatrix(em, ins):
    n, trans, space = _matrix_parts(em, ins, "st")
    f = em.f
    src = ins.operands[1].elems if isinstance(ins.operands[1], A.Vector) else [ins.operands[1]]
    if len(src) != n:
        semantic(ins, f"needs {n} source registers")
    words = _split(em, _address_value(em, ins.operands[0], space)) + [em.read(r, "b32") for r in src]

    def then(row):
        rows = _rows(em, row, n, trans)
        lane = em.lane_id()
        for i in range(n):
            v = row.own(2 + i)
            if not trans:
                p = em.space_ptr(f.op(f"add i64 {rows[i]}, {_quad_byte(em, lane)}"), space)
                memcheck.check(em, p, 4, True, space)
                f.emit(f"store i32 {v}, ptr {p}, align 4")
                continue
            col = _group_byte(em, lane)
            for j in range(2):
                p = em.space_ptr(f.op(f"add i64 {rows[2 * i + j]}, {col}"), space)
                memcheck.check(em, p, 2, True, space)
                h = f.op(f"trunc i32 {f.op(f'lshr i32 {v}, 16')} to i16") if j else f.op(f"trunc i32 {v} to i16")
                f.emit(f"store i16 {h}, ptr {p}, align 2")
    em.exchange_words(words, _row_sources(n, trans), then)


@handles("movmatrix")
def op_movmatrix(em, ins):
    mods = set(ins.mods)
    if mods != {"sync", "aligned", "m8n8", "trans", "b16"}:
        unsupported(ins)
    f = em.f
    # result element (row lane/4, column 2*(lane%4)+j) is source element (2*(lane%4)+j, lane/4), held by
    # lane 4*(2*(lane%4)+j) + lane/8 in the half (lane/4)%2
    sources = [[(4 * (2 * (lane & 3) + j) + (lane >> 3), 0) for j in range(2)] for lane in range(32)]

    def then(row):
        quad = f.op(f"lshr i32 {em.lane_id()}, 2")
        sh = f.op(f"shl i32 {f.op(f'and i32 {quad}, 1')}, 4")
        lo = f.op(f"and i32 {f.op(f'lshr i32 {row.got(0)}, {sh}')}, 65535")
        hi = f.op(f"and i32 {f.op(f'lshr i32 {row.got(1)}, {sh}')}, 65535")
        em.write(ins.operands[0], f.op(f"or i32 {lo}, {f.op(f'shl i32 {hi}, 16')}"), "b32")
    em.exchange_words([em.read(ins.operands[1], "b32")], sources, then)
