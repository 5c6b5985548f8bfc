"""Device printf on amdgcn: PTX `vprintf(fmt, args)` becomes an OpenCL-style `printf(fmt, typed args)`
call that LLVM's AMDGPU printf binding turns into writes to the hidden printf buffer (metadata
`amdhsa.printf`, printed by the ROCm runtime after the kernel). The format string must be a module
constant reachable through mov/cvta (nvcc's pattern); the argument types come from parsing it."""

from __future__ import annotations

import re

from ptx import ast as A
from ptx.errors import PTXUnsupportedError

SPEC = re.compile(rb"%[-+ #0]*(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|L|z|j|t)?([diouxXcsfFeEgGaAp%n])")
HIDDEN_PRINTF_BUFFER = 72          # offset from llvm.amdgcn.implicitarg.ptr in code object v5

# ROCm device-libs' __printf_alloc: reserve `bytes` in the printf buffer (header: used, size)
PRINTF_ALLOC = f"""@llvm.compiler.used = appending global [1 x ptr] [ptr @__printf_alloc], section "llvm.metadata"
define hidden ptr addrspace(1) @__printf_alloc(i32 %bytes) {{
entry:
  %ia = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %pp = getelementptr i8, ptr addrspace(4) %ia, i64 {HIDDEN_PRINTF_BUFFER}
  %buf = load ptr addrspace(1), ptr addrspace(4) %pp, align 8
  %szp = getelementptr i8, ptr addrspace(1) %buf, i64 4
  %size = load i32, ptr addrspace(1) %szp, align 4
  %start = load atomic i32, ptr addrspace(1) %buf syncscope("agent") monotonic, align 4
  br label %loop
loop:
  %off = phi i32 [ %start, %entry ], [ %seen, %retry ]
  %end0 = add i32 %off, %bytes
  %end = add i32 %end0, 8
  %full = icmp ugt i32 %end, %size
  br i1 %full, label %fail, label %try
try:
  %pair = cmpxchg ptr addrspace(1) %buf, i32 %off, i32 %end0 syncscope("agent") monotonic monotonic, align 4
  %seen = extractvalue {{ i32, i1 }} %pair, 0
  %ok = extractvalue {{ i32, i1 }} %pair, 1
  br i1 %ok, label %done, label %retry
retry:
  br label %loop
done:
  %o8 = add i32 %off, 8
  %o64 = zext i32 %o8 to i64
  %p = getelementptr i8, ptr addrspace(1) %buf, i64 %o64
  ret ptr addrspace(1) %p
fail:
  ret ptr addrspace(1) null
}}"""


def _unsupported(ins, why):
    raise PTXUnsupportedError(f"printf: {why}", ins.pos.line, ins.pos.col)


def _single_def(body, name):
    """The only instruction writing register `name` in the function, or None (no def, or several)."""
    found = None
    for st in body:
        if isinstance(st, A.Instruction) and st.operands and st.opcode != "st":
            d = st.operands[0]
            if isinstance(d, (A.Reg, A.SymbolExpr)) and d.name == name:
                if found is not None:
                    return None
                found = st
    return found


def _param_store(body, before, name):
    """The st.param writing .param variable `name` last before index `before` (same block)."""
    for i in range(before - 1, -1, -1):
        st = body[i]
        if isinstance(st, A.Label):
            return None
        if isinstance(st, A.Instruction) and st.opcode == "st" and st.operands and not st.guard:
            d = st.operands[0]
            if isinstance(d, A.Address) and d.base == name and not d.offset:
                return st
    return None


def _resolve(em, op, before):
    """(symbol, byte offset) an address-valued operand points at, following single-def mov/cvta/add
    chains (nvcc's virtual registers), or None."""
    body = em.flat.body
    offset = 0
    for _ in range(16):
        if isinstance(op, A.Address):
            offset += op.offset
            op = A.Reg(op.base, op.pos) if op.base else None
        name = getattr(op, "name", None)
        if name is None:
            return None
        offset += getattr(op, "offset", 0) or 0
        if not em.is_register(name):
            if name in em.addr_vars and em.flat.decls.get(name) is not None and \
                    em.flat.decls[name].space == "param":
                st = _param_store(body, before, name)
                if st is None:
                    return None
                op = st.operands[1]
                continue
            return name, offset
        st = _single_def(body, name)
        if st is None or st.guard:
            return None
        if st.opcode in ("mov", "cvta") and not (st.opcode == "cvta" and "to" in st.mods):
            op = st.operands[1]
        elif st.opcode == "add" and isinstance(st.operands[2], A.Imm):
            offset += st.operands[2].value
            op = st.operands[1]
        else:
            return None
    return None


def _format_symbol(em, op, ins):
    r = _resolve(em, op, em.cur_index)
    if r is None or r[1] != 0 or r[0] not in em.m.module_var_names:
        _unsupported(ins, "the format string is not a module constant known at compile time")
    return r[0]


def _string_argument(em, buf, off, ins):
    """The module constant a %s argument points at: the value of the last store into its slot of
    the argument buffer in the call's block."""
    body = em.flat.body
    for i in range(em.cur_index - 1, -1, -1):
        st = body[i]
        if isinstance(st, A.Label):
            break
        if not (isinstance(st, A.Instruction) and st.opcode == "st" and st.operands) or st.guard:
            continue
        if "param" in st.mods or not any(m in ("u64", "b64", "s64") for m in st.mods) or \
                any(m in ("v2", "v4") for m in st.mods):
            continue
        where = _resolve(em, st.operands[0], i)
        if where == (buf[0], buf[1] + off):
            val = _resolve(em, st.operands[1], i)
            if val is not None and val[0] in em.m.module_var_names:
                return val
            break
    _unsupported(ins, "a %s argument that is not a module constant string")


def _format_bytes(em, sym, ins, offset=0):
    from ptx.codegen.module_context import init_bytes, decl_size
    d = next((i for i in em.m.module.items if isinstance(i, A.VarDecl) and i.name == sym), None)
    if d is None or not d.init:
        _unsupported(ins, f"format string {sym} has no initialiser")
    relocs = []
    data = init_bytes(d, max(decl_size(d), len(d.init) if isinstance(d.init, list) else 0), relocs)
    data = data[offset:]
    end = data.find(b"\0")
    return data[:end] if end >= 0 else data


def _arg_types(fmt, ins):
    """[(llvm type, size)] of the arguments the format consumes, in order."""
    out = []
    for m in SPEC.finditer(fmt):
        width, prec, length, conv = m.groups()
        if conv == b"%":
            continue
        for star in (width, prec):
            if star == b"*":
                out.append(("i32", 4))
        if conv in b"diouxXc":
            out.append(("i64", 8) if length in (b"l", b"ll", b"j", b"z", b"t") else ("i32", 4))
        elif conv in b"fFeEgGaA":
            out.append(("double", 8))
        elif conv == b"p":
            out.append(("i64", 8))
        elif conv == b"s" and length is None:
            out.append(("str", 8))
        else:
            _unsupported(ins, f"the %{conv.decode()} conversion (string contents live on the device)")
    return out


def _constant_string(em, data: bytes) -> str:
    """A private addrspace(4) constant holding `data` + NUL (what LLVM's printf binding can read)."""
    gname = f'@"zluda.printf.str.{len(em.m.helpers)}"'
    text = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data + b"\0")
    em.m.add_helper(gname, f'{gname} = private unnamed_addr addrspace(4) constant [{len(data) + 1} x i8] c"{text}"')
    return gname


def lower_vprintf(em, ins, rets, args):
    from ptx.codegen.ops_ctrl import _arg_value, _set_ret
    f = em.f
    if len(args) != 2:
        _unsupported(ins, "vprintf takes a format and an argument buffer")
    fmt = _format_bytes(em, _format_symbol(em, args[0], ins), ins)
    types = _arg_types(fmt, ins)
    buf = f.op(f"inttoptr i64 {_arg_value(em, args[1], 'u64')} to ptr")
    buf_at = _resolve(em, args[1], em.cur_index) if any(t == "str" for t, _ in types) else None
    vals, off = [], 0
    for ty, size in types:
        off = (off + size - 1) // size * size
        if ty == "str":
            if buf_at is None:
                _unsupported(ins, "a %s argument in a buffer not known at compile time")
            sym, soff = _string_argument(em, buf_at, off, ins)
            vals.append(f"ptr addrspace(4) {_constant_string(em, _format_bytes(em, sym, ins, soff))}")
        else:
            p = f.op(f"getelementptr i8, ptr {buf}, i64 {off}")
            vals.append(f"{ty} {f.op(f'load {ty}, ptr {p}, align {size}')}")
        off += size
    gname = _constant_string(em, fmt)
    em.m.declare("declare i32 @printf(ptr addrspace(4), ...)")
    em.m.declare("declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()")
    em.m.add_helper("__printf_alloc", PRINTF_ALLOC)
    r = f.op(f"call i32 (ptr addrspace(4), ...) @printf(ptr addrspace(4) {gname}{''.join(', ' + v for v in vals)})")
    if rets:
        _set_ret(em, rets[0], r, "b32")
