"""The bulk tensor copy (cp.async.bulk.tensor) as one internal LLVM function per module: a box of a tensor
map (ptx/tensor_map.py) between global memory and shared memory, tiled or im2col, with out-of-bounds
elements filled on loads and skipped on stores, and the shared side swizzled as the map says."""

from __future__ import annotations

import functools

from ptx import tensor_map as TM
from ptx.codegen.irtext import IRFunction

NAME = '@"ptx.tensor_copy"'


def call(em, mode, tmap, box, box_addr, store, coords, offsets=("0", "0", "0")):
    """Copy one box; the returned i64 is the box's size in bytes, or -1 when `tmap` is no map of `mode`."""
    em.m.add_helper(NAME, _helper())
    gbase = em.space_ptr("0", "global")
    args = [("ptr", tmap), ("ptr", box), ("i64", box_addr), ("ptr", gbase), ("i32", "1" if store else "0"),
            ("i32", str(mode))]
    args += [("i32", c) for c in coords] + [("i32", o) for o in offsets]
    return em.f.op(f"call i64 {NAME}({', '.join(f'{t} {v}' for t, v in args)})")


@functools.lru_cache(maxsize=1)
def _helper():
    f = IRFunction("v")
    L = f.op

    def field(off, ty, ext=None):
        p = L(f"getelementptr i8, ptr %map, i64 {off}")
        v = L(f"load {ty}, ptr {p}, align 1")
        return L(f"{ext} {ty} {v} to i64") if ext else v

    def loop(n, body):
        """for (i = 0; i < n; i++) body(i), its counter a phi (no alloca: AMDGPU wants those in
        addrspace(5))."""
        pre, head, step, latch, done = (f.new_label(x) for x in ("pre", "head", "body", "latch", "done"))
        f.label(pre)
        f.term(f"br label %{head}")
        f.label(head)
        i, nxt = f.tmp(), f.tmp()
        f.emit(f"{i} = phi i64 [ 0, %{pre} ], [ {nxt}, %{latch} ]")
        f.term(f"br i1 {L(f'icmp ult i64 {i}, {n}')}, label %{step}, label %{done}")
        f.label(step)
        body(i)
        f.label(latch)
        f.emit(f"{nxt} = add i64 {i}, 1")
        f.term(f"br label %{head}")
        f.label(done)

    def bin(op, a, b, ty="i64"):
        return L(f"{op} {ty} {a}, {b}")

    def sel(cond, a, b):
        return L(f"select i1 {cond}, i64 {a}, i64 {b}")

    bad, ok = f.new_label("bad"), f.new_label("ok")
    want = L("zext i32 %want to i64")
    tag = field(TM.TAG, "i32")
    mode = field(TM.MODE, "i8", "zext")
    good = bin("and", bin("icmp eq", tag, TM.MAGIC, "i32"), bin("icmp eq", mode, want), "i1")
    f.term(f"br i1 {good}, label %{ok}, label %{bad}")
    f.label(bad)
    f.term("ret i64 -1")
    f.label(ok)
    gaddr = field(TM.ADDR, "i64")
    esz = field(TM.ELEM, "i8", "zext")
    mask = bin("sub", bin("shl", 1, field(TM.SWIZZLE, "i8", "zext")), 1)
    fill = field(TM.FILL, "i64")
    dim = [field(TM.DIM + 8 * k, "i64") for k in range(5)]
    stride = [field(TM.STRIDE + 8 * k, "i64") for k in range(5)]
    cnt = [field(TM.COUNT + 2 * k, "i16", "zext") for k in range(5)]
    es = [field(TM.ESTRIDE + k, "i8", "zext") for k in range(5)]
    lower = [field(TM.LOWER + 2 * s, "i16", "sext") for s in range(3)]
    pixels = field(TM.PIXELS, "i16", "zext")
    c = [L(f"sext i32 %c{k} to i64") for k in range(5)]
    off = [bin("and", L(f"zext i32 %o{s} to i64"), 65535) for s in range(3)]
    im2col = bin("icmp eq", want, TM.MODE_IM2COL)
    # rows: the box's runs along slot 0 (tile: every combination of slots 1-4; im2col: one per pixel)
    nrows = sel(im2col, pixels, bin("mul", bin("mul", cnt[1], cnt[2]), bin("mul", cnt[3], cnt[4])))
    # im2col: the first pixel's place in the bounding box's W-fastest order, N outermost
    first = c[4]
    for s in (3, 2, 1):
        first = bin("add", bin("mul", first, cnt[s]), bin("sdiv", bin("sub", c[s], lower[s - 1]), es[s]))
    n0 = cnt[0]
    es0 = sel(im2col, 1, es[0])

    def row(r):
        # the row's coordinates in slots 1-4
        t = sel(im2col, bin("add", first, r), r)
        g = []
        for k in (1, 2, 3):
            i = bin("urem", t, cnt[k])
            t = bin("udiv", t, cnt[k])
            step = bin("mul", i, es[k])
            g.append(sel(im2col, bin("add", bin("add", lower[k - 1], step), off[k - 1]), bin("add", c[k], step)))
        g.append(sel(im2col, t, bin("add", c[4], bin("mul", t, es[4]))))
        inside = "true"
        addr = gaddr
        for k, gk in zip((1, 2, 3, 4), g):
            inside = bin("and", inside, bin("icmp ult", gk, dim[k]), "i1")
            addr = bin("add", addr, bin("mul", gk, stride[k]))

        def element(i0):
            g0 = bin("add", c[0], bin("mul", i0, es0))
            inb = bin("and", inside, bin("icmp ult", g0, dim[0]), "i1")
            a = bin("add", "%sa", bin("mul", bin("add", bin("mul", r, n0), i0), esz))
            sw = bin("xor", a, bin("shl", bin("and", bin("lshr", a, 7), mask), 4))
            sp = L(f"getelementptr i8, ptr %box, i64 {bin('sub', sw, '%sa')}")
            gp = L(f"getelementptr i8, ptr %gbase, i64 {bin('add', addr, bin('mul', g0, stride[0]))}")
            _element_copy(f, esz, inb, sp, gp, fill)

        loop(n0, element)

    loop(nrows, row)
    f.term(f"ret i64 {bin('mul', bin('mul', nrows, n0), esz)}")
    body = "\n".join(f.entry_allocas + f.lines)
    return (f"define internal i64 {NAME}(ptr %map, ptr %box, i64 %sa, ptr %gbase, i32 %store, i32 %want, "
            f"i32 %c0, i32 %c1, i32 %c2, i32 %c3, i32 %c4, i32 %o0, i32 %o1, i32 %o2) {{\nentry:\n{body}\n}}")


def _element_copy(f, esz, inb, sp, gp, fill):
    """One element of `esz` bytes: a load copies global -> shared (the fill where out of bounds), a store
    copies shared -> global where in bounds."""
    L = f.op
    is_store = L("icmp ne i32 %store, 0")
    done = f.new_label("el.done")
    cases = {n: f.new_label(f"el.b{n}") for n in (1, 2, 4, 8)}
    f.term(f"switch i64 {esz}, label %{done} [" + " ".join(f"i64 {n}, label %{lab}" for n, lab in cases.items())
           + "]")
    for n, lab in cases.items():
        ty = f"i{8 * n}"
        f.label(lab)
        st, ld, oob = f.new_label("st"), f.new_label("ld"), f.new_label("oob")
        f.term(f"br i1 {is_store}, label %{st}, label %{ld}")
        f.label(st)
        w = f.new_label("st.in")
        f.term(f"br i1 {inb}, label %{w}, label %{done}")
        f.label(w)
        f.emit(f"store {ty} {L(f'load {ty}, ptr {sp}, align 1')}, ptr {gp}, align 1")
        f.term(f"br label %{done}")
        f.label(ld)
        r = f.new_label("ld.in")
        f.term(f"br i1 {inb}, label %{r}, label %{oob}")
        f.label(r)
        f.emit(f"store {ty} {L(f'load {ty}, ptr {gp}, align 1')}, ptr {sp}, align 1")
        f.term(f"br label %{done}")
        f.label(oob)
        v = fill if n == 8 else L(f"trunc i64 {fill} to {ty}")
        f.emit(f"store {ty} {v}, ptr {sp}, align 1")
        f.term(f"br label %{done}")
    f.label(done)
