"""PTX kernels for the tensor-core tests: each warp runs one instruction on register words (or matrices)
it loads from global memory, and writes the results back, so every lane's every register is checked."""

from __future__ import annotations

import ptxkit as K

HEADER = ".version 8.7\n.target sm_90\n.address_size 64\n"


def _prologue(params):
    ps = ", ".join(f".param .u64 {p}" for p in params)
    return [f"({ps})", "{", ".reg .u32 %gt, %tx, %cx, %nx, %lane;", ".reg .u64 %off, %base, %p<8>;",
            "mov.u32 %tx, %tid.x;", "mov.u32 %cx, %ctaid.x;", "mov.u32 %nx, %ntid.x;",
            "mad.lo.u32 %gt, %cx, %nx, %tx;", "mov.u32 %lane, %laneid;"] + \
        [f"ld.param.u64 %p{i}, [{p}];\ncvta.to.global.u64 %p{i}, %p{i};" for i, p in enumerate(params)]


def _regs(prefix, n, wide):
    return [f"%{prefix}{i}" for i in range(n)], f".reg .b{64 if wide else 32} %{prefix}<{max(n, 1)}>;"


def mma_sync_kernel(name, form, na, nb, nc, nd, wide):
    """in: per thread (na+nb+nc) registers' words; out: nd registers' words; one warp = one product."""
    ra, da = _regs("ra", na, wide)
    rb, db = _regs("rb", nb, wide)
    rc, dc = _regs("rc", nc, wide)
    rd, dd = _regs("rd", nd, wide)
    step = 8 if wide else 4
    ty = "b64" if wide else "b32"
    lines = [f".visible .entry {name}"] + _prologue(["pin", "pout"]) + [da, db, dc, dd]
    lines.append(f"mul.wide.u32 %off, %gt, {(na + nb + nc) * step};\nadd.u64 %base, %p0, %off;")
    for i, r in enumerate(ra + rb + rc):
        lines.append(f"ld.global.{ty} {r}, [%base+{i * step}];")
    lines.append(f"{form} {{{', '.join(rd)}}}, {{{', '.join(ra)}}}, {{{', '.join(rb)}}}, {{{', '.join(rc)}}};")
    lines.append(f"mul.wide.u32 %off, %gt, {nd * step};\nadd.u64 %base, %p1, %off;")
    for i, r in enumerate(rd):
        lines.append(f"st.global.{ty} [%base+{i * step}], {r};")
    lines += ["ret;", "}"]
    return "\n".join(lines)


def module(*kernels):
    return HEADER + "\n".join(kernels)


def compile_kernels(text):
    return K.compile_text(text)


def wmma_kernel(name, form, f, sizes, space="global"):
    """A = in0, B = in1, C = in2 (trial t at t * size), wmma.load a/b/c with the form's layouts and
    strides, the mma, wmma.store of D (row, ldd) to out: one warp per trial. `f`: the probe's form record
    (types, layouts, strides); `sizes`: bytes per trial of A, B, C, D."""
    from ptx.codegen.mma_layouts import wmma_regs
    shape = f"m{f['m']}n{f['n']}k{f['k']}"
    wide = f["atype"] == "f64"
    na, nb = wmma_regs(shape, "a", f["atype"]), wmma_regs(shape, "b", f["btype"])
    nc, nd = wmma_regs(shape, "c", f["ctype"]), wmma_regs(shape, "d", f["dtype"])
    ra, da = _regs("ra", na, wide)
    rb, db = _regs("rb", nb, wide)
    rc, dc = _regs("rc", nc, f["ctype"] == "f64")
    rd, dd = _regs("rd", nd, f["dtype"] == "f64")
    ss = "" if space == "generic" else f".{space}"
    lines = [f".visible .entry {name}"] + _prologue(["pa", "pb", "pc", "pd"]) + [da, db, dc, dd]
    lines.append(".reg .u32 %warp;\nshr.u32 %warp, %gt, 5;")
    for i, (regs, mat, ty, lay, ld) in enumerate(((ra, "a", f["atype"], f["alayout"], f["lda"]),
                                                 (rb, "b", f["btype"], f["blayout"], f["ldb"]),
                                                 (rc, "c", f["ctype"], "row", f["ldc"]))):
        lines.append(f"mul.wide.u32 %off, %warp, {sizes[i]};\nadd.u64 %base, %p{i}, %off;")
        lines.append(f"wmma.load.{mat}.sync.aligned.{lay}.{shape}{ss}.{ty} {{{', '.join(regs)}}}, [%base], {ld};")
    lines.append(f"{form} {{{', '.join(rd)}}}, {{{', '.join(ra)}}}, {{{', '.join(rb)}}}, {{{', '.join(rc)}}};")
    lines.append(f"mul.wide.u32 %off, %warp, {sizes[3]};\nadd.u64 %base, %p3, %off;")
    lines.append(f"wmma.store.d.sync.aligned.row.{shape}{ss}.{f['dtype']} [%base], {{{', '.join(rd)}}}, {f['ldd']};")
    lines += ["ret;", "}"]
    return "\n".join(lines)


def wmma_load_kernel(name, form, words, stride, space="global", wide=False):
    """in: a matrix (any layout, stride `stride` or the default when None); out: per thread the words of
    the fragment wmma.load gives it. space 'shared': the matrix is copied to shared memory first."""
    n = words // 2 if wide else words
    rr, dr = _regs("r", n, wide)
    ty = "b64" if wide else "b32"
    step = 8 if wide else 4
    lines = [f".visible .entry {name}"] + _prologue(["pin", "pout", "pbytes"]) + [dr]
    src = "[%p0]"
    ss = "" if space == "generic" else f".{space}"
    if space == "shared":
        lines += [".shared .align 32 .b8 smem[16384];", ".reg .u32 %i, %nb;", ".reg .b32 %v;",
                  ".reg .pred %more;", "ld.param.u64 %off, [pbytes];", "cvt.u32.u64 %nb, %off;",
                  "shl.b32 %i, %tx, 2;", "COPY:", "setp.lt.u32 %more, %i, %nb;", "@!%more bra COPIED;",
                  "cvt.u64.u32 %off, %i;", "add.u64 %base, %p0, %off;", "ld.global.b32 %v, [%base];",
                  "mov.u32 %nx, smem;\nadd.u32 %nx, %nx, %i;\nst.shared.b32 [%nx], %v;",
                  "add.u32 %i, %i, 128;", "bra COPY;", "COPIED:", "bar.sync 0;"]
        src = "[smem]"
    operand = f", {stride}" if stride is not None else ""
    lines.append(f"{form.replace('@SS@', ss)} {{{', '.join(rr)}}}, {src}{operand};")
    lines.append(f"mul.wide.u32 %off, %gt, {words * 4};\nadd.u64 %base, %p1, %off;")
    for i, r in enumerate(rr):
        lines.append(f"st.global.{ty} [%base+{i * step}], {r};")
    lines += ["ret;", "}"]
    return "\n".join(lines)


def wmma_store_kernel(name, form, words, stride, wide=False):
    """in: per thread the words of a fragment; out: the matrix wmma.store writes (stride `stride`)."""
    n = words // 2 if wide else words
    rr, dr = _regs("r", n, wide)
    ty = "b64" if wide else "b32"
    step = 8 if wide else 4
    lines = [f".visible .entry {name}"] + _prologue(["pin", "pout"]) + [dr]
    lines.append(f"mul.wide.u32 %off, %gt, {words * 4};\nadd.u64 %base, %p0, %off;")
    for i, r in enumerate(rr):
        lines.append(f"ld.global.{ty} {r}, [%base+{i * step}];")
    operand = f", {stride}" if stride is not None else ""
    lines.append(f"{form} [%p1], {{{', '.join(rr)}}}{operand};")
    lines += ["ret;", "}"]
    return "\n".join(lines)


def matrix_move_kernel(name, form, n):
    """ldmatrix / stmatrix / movmatrix on shared memory: in0 = 64 rows x 8 b16 (the table), in1 = each
    lane's row (its address), in2 = each lane's n source words; out0 = n words per lane (ld/mov),
    out1 = the table after (st)."""
    rr, dr = _regs("r", n, False)
    lines = [f".visible .entry {name}"] + _prologue(["ptab", "prow", "pin", "pout", "pmem"]) + [dr]
    lines += [".shared .align 16 .b8 smem[1024];", ".reg .u32 %i, %a, %row;", ".reg .b32 %v;",
              "mov.u32 %a, smem;"]
    for k in range(8):      # 32 lanes x 8 words = the 1024-byte table
        lines.append(f"shl.b32 %i, %tx, 2;\nadd.u32 %i, %i, {k * 128};\ncvt.u64.u32 %off, %i;"
                     f"\nadd.u64 %base, %p0, %off;\nld.global.b32 %v, [%base];\nadd.u32 %i, %i, %a;"
                     f"\nst.shared.b32 [%i], %v;")
    lines.append("bar.warp.sync -1;")
    lines.append("mul.wide.u32 %off, %lane, 4;\nadd.u64 %base, %p1, %off;\nld.global.u32 %row, [%base];")
    lines.append("shl.b32 %row, %row, 4;\nadd.u32 %row, %row, %a;")
    lines.append(f"mul.wide.u32 %off, %lane, {4 * n};\nadd.u64 %base, %p2, %off;")
    for i, r in enumerate(rr):
        lines.append(f"ld.global.b32 {r}, [%base+{4 * i}];")
    regs = ", ".join(rr)
    if form.startswith("ldmatrix"):
        lines.append(f"{form} {{{regs}}}, [%row];")
    elif form.startswith("stmatrix"):
        lines.append(f"{form} [%row], {{{regs}}};")
    else:
        lines.append(f"{form} %r0, %r0;")
    lines.append("bar.warp.sync -1;")
    lines.append(f"mul.wide.u32 %off, %lane, {4 * n};\nadd.u64 %base, %p3, %off;")
    for i, r in enumerate(rr):
        lines.append(f"st.global.b32 [%base+{4 * i}], {r};")
    for k in range(8):
        lines.append(f"shl.b32 %i, %tx, 2;\nadd.u32 %i, %i, {k * 128};\ncvt.u64.u32 %off, %i;"
                     f"\nadd.u64 %base, %p4, %off;\nadd.u32 %i, %i, %a;\nld.shared.b32 %v, [%i];"
                     f"\nst.global.b32 [%base], %v;")
    lines += ["ret;", "}"]
    return "\n".join(lines)
