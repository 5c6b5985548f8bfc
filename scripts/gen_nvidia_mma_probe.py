#!/usr/bin/env python3
"""Writes scripts/nvidia_mma_probe.cu: the one-off probe of an NVIDIA GPU's tensor-core instructions
(wmma.load/store/mma, mma.sync, ldmatrix, stmatrix, movmatrix), one kernel per instruction form.

The probe measures what the PTX ISA leaves to the hardware: which matrix element each wmma fragment slot
holds (bit planes of the element index, loaded through wmma.load; slots written through wmma.store), and
the exact results of every mma form on deterministic pseudo-random inputs (splitmix64 seeds and the
distributions in tests/ptx/mma_inputs.py, which replays them bit for bit). Run once on the hardware:
    python3 scripts/gen_nvidia_mma_probe.py && nvcc -O1 -arch=sm_90 -o probe scripts/nvidia_mma_probe.cu
    ./probe tests/data/nvidia_mma_answers.json bulk.json
`./probe --inputs-only out.json` runs nothing on a GPU and records only the inputs' hashes (to check the
Python replay of the generator)."""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "nvidia_mma_probe.cu"

BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8,
        "s4": 4, "u4": 4, "b1": 1, "s32": 32}
SHAPES = {"m16n16k16": (16, 16, 16), "m8n32k16": (8, 32, 16), "m32n8k16": (32, 8, 16),
          "m16n16k8": (16, 16, 8), "m8n8k4": (8, 8, 4), "m8n8k32": (8, 8, 32), "m8n8k128": (8, 8, 128)}
BIG3 = ("m16n16k16", "m8n32k16", "m32n8k16")

# trial plans: (dist A, dist B, dist C) per trial; the names are the generator's (mma_inputs.py)
FLOAT_PLAN = [("unit", "unit", "unit"), ("unit", "unit", "zero"), ("spread", "spread", "spread"),
              ("spread", "spread", "zero"), ("subn", "subn", "unit"), ("unit", "unit", "subn"),
              ("infnan", "unit", "unit"), ("unit", "unit", "infnan")]
INT_PLAN = [("rand", "rand", "unit"), ("big", "big", "extreme"), ("rand", "rand", "extreme"),
            ("big", "big", "unit")]
BULK_PLAN = FLOAT_PLAN[:6]
BULK_REPEAT = 48


def wmma_regs(mat, shape, ty):
    """(registers, register bits) of a wmma fragment."""
    if ty == "f16":
        return (8 if mat in "ab" else 4), 32
    if ty in ("f32", "tf32") and mat in "cd":
        return 8, 32
    if ty == "s32":
        return (8 if shape in BIG3 else 2), 32
    if ty == "f64":
        return (1 if mat in "ab" else 2), 64
    if ty == "bf16":
        return {"m16n16k16": (4, 4), "m8n32k16": (2, 8), "m32n8k16": (8, 2)}[shape][mat == "b"], 32
    if ty == "tf32":
        return 4, 32
    if ty in ("s8", "u8"):
        return {"m16n16k16": (2, 2), "m8n32k16": (1, 4), "m32n8k16": (4, 1)}[shape][mat == "b"], 32
    return 1, 32          # s4, u4, b1


def dims(mat, shape):
    m, n, k = SHAPES[shape]
    return {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[mat]


def pad_elems(ty):
    """Extra elements per leading dimension in the probe's memory (64 bytes): strides are exercised."""
    return 512 // BITS[ty]


# ------------------------------------------------------------------ the forms

def wmma_load_forms():
    out = []
    for mat in "abc":
        for shape, types in [(s, ("f16", "bf16", "s8", "u8")) for s in BIG3] + \
                [("m16n16k8", ("tf32",)), ("m8n8k4", ("f64",)), ("m8n8k32", ("s4", "u4")),
                 ("m8n8k128", ("b1",))]:
            if mat == "c":
                types = {"m16n16k8": ("f32",), "m8n8k4": ("f64",), "m8n8k32": ("s32",),
                         "m8n8k128": ("s32",)}.get(shape, ("f16", "f32", "s32"))
            for ty in types:
                for lay in ("row", "col"):
                    if ty in ("s4", "u4", "b1") and lay != ("row" if mat == "a" else "col"):
                        continue
                    out.append((mat, shape, ty, lay))
    return out


def wmma_mma_forms():
    """(ptx form, shape, atype, btype, ctype, dtype, alayout, blayout, primary)."""
    out = []
    lays = [("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")]
    for shape in BIG3:
        for al, bl in lays:
            for d, c in (("f32", "f32"), ("f32", "f16"), ("f16", "f32"), ("f16", "f16")):
                out.append((f"wmma.mma.sync.aligned.{al}.{bl}.{shape}.{d}.{c}", shape, "f16", "f16", c, d, al, bl,
                            (al, bl) == ("row", "col")))
            out.append((f"wmma.mma.sync.aligned.{al}.{bl}.{shape}.f32.bf16.bf16.f32", shape, "bf16", "bf16",
                        "f32", "f32", al, bl, (al, bl) == ("row", "col")))
            for t in ("s8", "u8"):
                for sat in ("", ".satfinite"):
                    out.append((f"wmma.mma.sync.aligned.{al}.{bl}.{shape}.s32.{t}.{t}.s32{sat}", shape, t, t,
                                "s32", "s32", al, bl, (al, bl) == ("row", "col")))
    for al, bl in lays:
        out.append((f"wmma.mma.sync.aligned.{al}.{bl}.m16n16k8.f32.tf32.tf32.f32", "m16n16k8", "tf32", "tf32",
                    "f32", "f32", al, bl, (al, bl) == ("row", "col")))
        for rnd in ("", ".rn", ".rz", ".rm", ".rp"):
            if rnd and (al, bl) != ("row", "col"):
                continue
            out.append((f"wmma.mma.sync.aligned.{al}.{bl}.m8n8k4{rnd}.f64.f64.f64.f64", "m8n8k4", "f64", "f64",
                        "f64", "f64", al, bl, (al, bl) == ("row", "col")))
    for t in ("s4", "u4"):
        for sat in ("", ".satfinite"):
            out.append((f"wmma.mma.sync.aligned.row.col.m8n8k32.s32.{t}.{t}.s32{sat}", "m8n8k32", t, t, "s32", "s32",
                        "row", "col", True))
    for op in ("xor", "and"):
        out.append((f"wmma.mma.{op}.popc.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32", "m8n8k128", "b1", "b1",
                    "s32", "s32", "row", "col", True))
    return out


def mma_sync_forms():
    """(ptx form, atype, btype, ctype, dtype, na, nb, nc, nd, register bits of a/b/c/d)."""
    out = []

    def add(form, at, bt, ct, dt, na, nb, nc, nd, wide=False):
        out.append((form, at, bt, ct, dt, na, nb, nc, nd, 64 if wide else 32))

    for al in ("row", "col"):
        for bl in ("row", "col"):
            for d, c in (("f16", "f16"), ("f32", "f16"), ("f32", "f32")):
                add(f"mma.sync.aligned.m8n8k4.{al}.{bl}.{d}.f16.f16.{c}", "f16", "f16", c, d, 2, 2,
                    4 if c == "f16" else 8, 4 if d == "f16" else 8)
    for shape, na, nb in (("m16n8k8", 2, 1), ("m16n8k16", 4, 2)):
        for d in ("f16", "f32"):
            add(f"mma.sync.aligned.{shape}.row.col.{d}.f16.f16.{d}", "f16", "f16", d, d, na, nb,
                2 if d == "f16" else 4, 2 if d == "f16" else 4)
        add(f"mma.sync.aligned.{shape}.row.col.f32.bf16.bf16.f32", "bf16", "bf16", "f32", "f32", na, nb, 4, 4)
    add("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32", "tf32", "tf32", "f32", "f32", 2, 1, 4, 4)
    add("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "tf32", "tf32", "f32", "f32", 4, 2, 4, 4)
    add("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", "f64", "f64", "f64", "f64", 1, 1, 2, 2, True)
    for shape, na, nb in (("m16n8k4", 2, 1), ("m16n8k8", 4, 2), ("m16n8k16", 8, 4)):
        add(f"mma.sync.aligned.{shape}.row.col.f64.f64.f64.f64", "f64", "f64", "f64", "f64", na, nb, 4, 4, True)
    for shapes, types in (((("m8n8k16", 1, 1, 2), ("m16n8k16", 2, 1, 4), ("m16n8k32", 4, 2, 4)), ("u8", "s8")),
                          ((("m8n8k32", 1, 1, 2), ("m16n8k32", 2, 1, 4), ("m16n8k64", 4, 2, 4)), ("u4", "s4"))):
        for shape, na, nb, nc in shapes:
            for at in types:
                for bt in types:
                    for sat in ("", ".satfinite"):
                        add(f"mma.sync.aligned.{shape}.row.col{sat}.s32.{at}.{bt}.s32", at, bt, "s32", "s32",
                            na, nb, nc, nc)
    for shape, na, nb, nc in (("m8n8k128", 1, 1, 2), ("m16n8k128", 2, 1, 4), ("m16n8k256", 4, 2, 4)):
        for op in ("xor", "and"):
            add(f"mma.sync.aligned.{shape}.row.col.s32.b1.b1.s32.{op}.popc", "b1", "b1", "s32", "s32", na, nb, nc, nc)
    for shape, na, nb in (("m16n8k16", 2, 1), ("m16n8k32", 4, 2)):
        for at in ("e4m3", "e5m2"):
            for bt in ("e4m3", "e5m2"):
                for d in ("f32", "f16"):
                    add(f"mma.sync.aligned.{shape}.row.col.{d}.{at}.{bt}.{d}", at, bt, d, d, na, nb,
                        4 if d == "f32" else 2, 4 if d == "f32" else 2)
    return out


BULK_MMA = {
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f16",
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64",
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16",
}
BULK_WMMA = {
    "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32", "wmma.mma.sync.aligned.row.col.m16n16k16.f16.f16",
    "wmma.mma.sync.aligned.row.col.m16n16k16.f16.f32", "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f16",
    "wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32",
    "wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f32",
    "wmma.mma.sync.aligned.row.col.m8n8k4.rn.f64.f64.f64.f64", "wmma.mma.sync.aligned.row.col.m8n8k4.rz.f64.f64.f64.f64",
    "wmma.mma.sync.aligned.row.col.m8n8k4.rm.f64.f64.f64.f64", "wmma.mma.sync.aligned.row.col.m8n8k4.rp.f64.f64.f64.f64",
}


# ------------------------------------------------------------------ code generation

def _regs(prefix, n, start):
    return ", ".join(f"%{start + i}" for i in range(n))


def _cons(kind, arr, n, wide):
    c = ("=l" if wide else "=r") if kind == "out" else ("l" if wide else "r")
    return ", ".join(f'"{c}"({arr}[{i}])' for i in range(n))


def kname(form):
    return "k_" + "".join(ch if ch.isalnum() else "_" for ch in form)


def gen_wmma_load(mat, shape, ty, lay):
    n, rb = wmma_regs(mat, shape, ty)
    wide = rb == 64
    form = f"wmma.load.{mat}.sync.aligned.{lay}.{shape}.{ty}"
    ct = "unsigned long long" if wide else "uint32_t"
    name = kname(form)
    asm = f'"{form} {{{_regs("", n, 0)}}}, [%{n}], %{n + 1};"'
    words = n * (2 if wide else 1)
    store = "\n".join(
        (f"  o[{2 * i}] = (uint32_t)r[{i}]; o[{2 * i + 1}] = (uint32_t)(r[{i}] >> 32);" if wide else
         f"  o[{i}] = r[{i}];") for i in range(n))
    return name, form, words, f"""
__global__ void {name}(const uint8_t *mem, size_t plane_bytes, int ld, uint32_t *out) {{
  const uint8_t *p = mem + blockIdx.x * plane_bytes;
  {ct} r[{n}];
  asm volatile({asm} : {_cons("out", "r", n, wide)} : "l"(p), "r"(ld) : "memory");
  uint32_t *o = out + ((size_t)blockIdx.x * 32 + threadIdx.x) * {words};
{store}
}}"""


def gen_wmma_store(shape, ty, lay):
    n, rb = wmma_regs("d", shape, ty)
    wide = rb == 64
    form = f"wmma.store.d.sync.aligned.{lay}.{shape}.{ty}"
    ct = "unsigned long long" if wide else "uint32_t"
    words = n * (2 if wide else 1)
    name = kname(form)
    load = "\n".join(
        (f"  r[{i}] = i_[{2 * i}] | ((unsigned long long)i_[{2 * i + 1}] << 32);" if wide else f"  r[{i}] = i_[{i}];")
        for i in range(n))
    asm = f'"{form} [%0], {{{_regs("", n, 1)}}}, %{n + 1};"'
    return name, form, words, f"""
__global__ void {name}(const uint32_t *in, uint8_t *mem, int ld) {{
  const uint32_t *i_ = in + threadIdx.x * {words};
  {ct} r[{n}];
{load}
  asm volatile({asm} :: "l"(mem), {_cons("in", "r", n, wide)}, "r"(ld) : "memory");
}}"""


def gen_wmma_mma(form, shape, at, bt, ct, dt, al, bl):
    na, rba = wmma_regs("a", shape, at)
    nb, _ = wmma_regs("b", shape, bt)
    nc, rbc = wmma_regs("c", shape, ct)
    nd, _ = wmma_regs("d", shape, dt)
    wa, wc = rba == 64, rbc == 64
    ta = "unsigned long long" if wa else "uint32_t"
    tc = "unsigned long long" if wc else "uint32_t"
    name = kname(form)
    return name, f"""
__global__ void {name}(const uint8_t *A, const uint8_t *B, const uint8_t *C, uint8_t *D, size_t sa, size_t sb,
                       size_t sc, size_t sd, int lda, int ldb, int ldc, int ldd) {{
  size_t t = blockIdx.x;
  const uint8_t *pa = A + t * sa, *pb = B + t * sb, *pc = C + t * sc;
  uint8_t *pd = D + t * sd;
  {ta} a[{na}], b[{nb}];
  {tc} c[{nc}], d[{nd}];
  asm volatile("wmma.load.a.sync.aligned.{al}.{shape}.{at} {{{_regs("", na, 0)}}}, [%{na}], %{na + 1};"
               : {_cons("out", "a", na, wa)} : "l"(pa), "r"(lda) : "memory");
  asm volatile("wmma.load.b.sync.aligned.{bl}.{shape}.{bt} {{{_regs("", nb, 0)}}}, [%{nb}], %{nb + 1};"
               : {_cons("out", "b", nb, wa)} : "l"(pb), "r"(ldb) : "memory");
  asm volatile("wmma.load.c.sync.aligned.row.{shape}.{ct} {{{_regs("", nc, 0)}}}, [%{nc}], %{nc + 1};"
               : {_cons("out", "c", nc, wc)} : "l"(pc), "r"(ldc) : "memory");
  asm volatile("{form} {{{_regs("", nd, 0)}}}, {{{_regs("", na, nd)}}}, {{{_regs("", nb, nd + na)}}}, "
               "{{{_regs("", nc, nd + na + nb)}}};"
               : {_cons("out", "d", nd, wc)} : {_cons("in", "a", na, wa)}, {_cons("in", "b", nb, wa)},
                 {_cons("in", "c", nc, wc)});
  asm volatile("wmma.store.d.sync.aligned.row.{shape}.{dt} [%0], {{{_regs("", nd, 1)}}}, %{nd + 1};"
               :: "l"(pd), {_cons("in", "d", nd, wc)}, "r"(ldd) : "memory");
}}"""


def gen_mma_sync(form, na, nb, nc, nd, rb):
    wide = rb == 64
    ct = "unsigned long long" if wide else "uint32_t"
    wpr = 2 if wide else 1
    nin = (na + nb + nc) * wpr
    name = kname(form)

    def load(arr, n, off):
        return "\n".join(
            (f"  {arr}[{i}] = ip[{off + 2 * i}] | ((unsigned long long)ip[{off + 2 * i + 1}] << 32);" if wide
             else f"  {arr}[{i}] = ip[{off + i}];") for i in range(n))
    store = "\n".join(
        (f"  op[{2 * i}] = (uint32_t)d[{i}]; op[{2 * i + 1}] = (uint32_t)(d[{i}] >> 32);" if wide else
         f"  op[{i}] = d[{i}];") for i in range(nd))
    return name, f"""
__global__ void {name}(const uint32_t *in, uint32_t *out) {{
  const uint32_t *ip = in + ((size_t)blockIdx.x * 32 + threadIdx.x) * {nin};
  uint32_t *op = out + ((size_t)blockIdx.x * 32 + threadIdx.x) * {nd * wpr};
  {ct} a[{na}], b[{nb}], c[{nc}], d[{nd}];
{load("a", na, 0)}
{load("b", nb, na * wpr)}
{load("c", nc, (na + nb) * wpr)}
  asm volatile("{form} {{{_regs("", nd, 0)}}}, {{{_regs("", na, nd)}}}, {{{_regs("", nb, nd + na)}}}, "
               "{{{_regs("", nc, nd + na + nb)}}};"
               : {_cons("out", "d", nd, wide)} : {_cons("in", "a", na, wide)}, {_cons("in", "b", nb, wide)},
                 {_cons("in", "c", nc, wide)});
{store}
}}"""


def gen_ldst():
    parts, table = [], []
    for num, n in (("x1", 1), ("x2", 2), ("x4", 4)):
        for tr in ("", ".trans"):
            form = f"ldmatrix.sync.aligned.m8n8.{num}{tr}.shared.b16"
            name = kname(form)
            parts.append(f"""
__global__ void {name}(const uint16_t *table, const int *rowsel, uint32_t *out) {{
  __shared__ __align__(16) uint16_t sm[64 * 8];
  for (int i = threadIdx.x; i < 64 * 8; i += 32) sm[i] = table[i];
  __syncwarp();
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(&sm[rowsel[threadIdx.x] * 8]);
  uint32_t r[{n}];
  asm volatile("{form} {{{_regs("", n, 0)}}}, [%{n}];" : {_cons("out", "r", n, False)} : "r"(addr) : "memory");
  for (int i = 0; i < {n}; i++) out[threadIdx.x * {n} + i] = r[i];
}}""")
            table.append(f'  {{"{form}", 1, {n}, (void *){name}}},')
            form = f"stmatrix.sync.aligned.m8n8.{num}{tr}.shared.b16"
            name = kname(form)
            parts.append(f"""
__global__ void {name}(const uint32_t *in, const int *rowsel, uint16_t *out) {{
  __shared__ __align__(16) uint16_t sm[64 * 8];
  for (int i = threadIdx.x; i < 64 * 8; i += 32) sm[i] = 0xFFFF;
  __syncwarp();
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(&sm[rowsel[threadIdx.x] * 8]);
  uint32_t r[{n}];
  for (int i = 0; i < {n}; i++) r[i] = in[threadIdx.x * {n} + i];
  asm volatile("{form} [%0], {{{_regs("", n, 1)}}};" :: "r"(addr), {_cons("in", "r", n, False)} : "memory");
  __syncwarp();
  for (int i = threadIdx.x; i < 64 * 8; i += 32) out[i] = sm[i];
}}""")
            table.append(f'  {{"{form}", 2, {n}, (void *){name}}},')
    form = "movmatrix.sync.aligned.m8n8.trans.b16"
    name = kname(form)
    parts.append(f"""
__global__ void {name}(const uint32_t *in, uint32_t *out) {{
  uint32_t a = in[threadIdx.x], d;
  asm volatile("{form} %0, %1;" : "=r"(d) : "r"(a));
  out[threadIdx.x] = d;
}}""")
    table.append(f'  {{"{form}", 3, 1, (void *){name}}},')
    return parts, table


TYPE_ENUM = ["f16", "bf16", "tf32", "f32", "f64", "e4m3", "e5m2", "s8", "u8", "s4", "u4", "b1", "s32"]
DIST_ENUM = ["unit", "spread", "subn", "infnan", "zero", "rand", "big", "extreme"]


def cstr_plan(plan):
    return "{" + ", ".join("{" + ", ".join(f"D_{d.upper()}" for d in trial) + "}" for trial in plan) + "}"


def generate():
    kernels, loads, stores, wmmas, mmas = [], [], [], [], []
    for mat, shape, ty, lay in wmma_load_forms():
        name, form, words, text = gen_wmma_load(mat, shape, ty, lay)
        kernels.append(text)
        r, c = dims(mat, shape)
        loads.append(f'  {{"{form}", \'{mat}\', T_{ty.upper()}, {int(lay == "row")}, {r}, {c}, {words}, '
                     f'(void *){name}}},')
        if mat == "c":
            name, form, words, text = gen_wmma_store(shape, ty, lay)
            kernels.append(text)
            stores.append(f'  {{"{form}", \'d\', T_{ty.upper()}, {int(lay == "row")}, {r}, {c}, {words}, '
                          f'(void *){name}}},')
    for form, shape, at, bt, ct, dt, al, bl, primary in wmma_mma_forms():
        name, text = gen_wmma_mma(form, shape, at, bt, ct, dt, al, bl)
        kernels.append(text)
        m, n, k = SHAPES[shape]
        isint = at in ("s8", "u8", "s4", "u4", "b1")
        wmmas.append(f'  {{"{form}", {m}, {n}, {k}, T_{at.upper()}, T_{bt.upper()}, T_{ct.upper()}, T_{dt.upper()}, '
                     f'{int(al == "row")}, {int(bl == "row")}, {int(isint)}, {int(primary)}, '
                     f'{int(form in BULK_WMMA)}, (void *){name}}},')
    for form, at, bt, ct, dt, na, nb, nc, nd, rb in mma_sync_forms():
        name, text = gen_mma_sync(form, na, nb, nc, nd, rb)
        kernels.append(text)
        isint = at in ("s8", "u8", "s4", "u4", "b1")
        mmas.append(f'  {{"{form}", T_{at.upper()}, T_{bt.upper()}, T_{ct.upper()}, T_{dt.upper()}, {na}, {nb}, '
                    f'{nc}, {nd}, {rb}, {int(isint)}, {int(form in BULK_MMA)}, (void *){name}}},')
    ldst_k, ldst_t = gen_ldst()
    kernels += ldst_k
    template = (Path(__file__).resolve().parent / "nvidia_mma_probe_host.inc").read_text()
    text = template.replace("@KERNELS@", "\n".join(kernels))
    text = text.replace("@LOADS@", "\n".join(loads)).replace("@STORES@", "\n".join(stores))
    text = text.replace("@WMMAS@", "\n".join(wmmas)).replace("@MMAS@", "\n".join(mmas))
    text = text.replace("@LDST@", "\n".join(ldst_t))
    text = text.replace("@TYPES@", ", ".join(f"T_{t.upper()}" for t in TYPE_ENUM))
    text = text.replace("@TYPENAMES@", ", ".join(f'"{t}"' for t in TYPE_ENUM))
    text = text.replace("@TYPEBITS@", ", ".join(str(BITS[t]) for t in TYPE_ENUM))
    text = text.replace("@DISTS@", ", ".join(f"D_{d.upper()}" for d in DIST_ENUM))
    text = text.replace("@DISTNAMES@", ", ".join(f'"{d}"' for d in DIST_ENUM))
    text = text.replace("@FLOAT_PLAN@", cstr_plan(FLOAT_PLAN)).replace("@INT_PLAN@", cstr_plan(INT_PLAN))
    text = text.replace("@NFLOAT@", str(len(FLOAT_PLAN))).replace("@NINT@", str(len(INT_PLAN)))
    text = text.replace("@NBULK@", str(len(BULK_PLAN))).replace("@BULK_REPEAT@", str(BULK_REPEAT))
    return "/* Generated by scripts/gen_nvidia_mma_probe.py: edit that, not this. */\n" + text


if __name__ == "__main__":
    OUT.write_text(generate())
    print(f"wrote {OUT}", file=sys.stderr)
