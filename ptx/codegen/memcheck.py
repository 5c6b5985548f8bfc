"""ZLUDA_MEMCHECK code generation: a call of ptx_rt_memcheck (ptx/runtime/memcheck.c) before every global,
generic, shared and local access, naming the function, PTX line and thread for the report."""

from __future__ import annotations

CHECK_FN = "ptx_rt_memcheck"
SPACE_CODE = {None: 0, "generic": 0, "global": 1, "shared": 2, "local": 3}
FILE_NAME = "module.ptx"     # the driver loads PTX from memory: there is no file name to give


def _string(em, key, text):
    """A private constant C string in the module, one per distinct text."""
    strings = em.m.__dict__.setdefault("_mc_strings", {})
    name = strings.get(text)
    if name is None:
        name = f'@"mc.str.{len(strings)}"'
        strings[text] = name
        data = text.encode() + b"\0"
        body = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data)
        em.m.declare(f'{name} = private unnamed_addr constant [{len(data)} x i8] c"{body}"')
    return name


def check(em, ptr, size, write, space):
    """Before an access of `size` bytes at pointer `ptr` in `space` (None: generic); nothing without the
    knob. Constant and parameter spaces are not checked (they are the compiler's own storage)."""
    if not getattr(em.m, "memcheck", False) or space not in SPACE_CODE:
        return
    f = em.f
    ins = em.cur_ins
    line = ins.pos.line if ins is not None else 0
    fn = _string(em, "fn", em.flat.func.name)
    file = _string(em, "file", FILE_NAME)
    em.m.declare(f"declare void @{CHECK_FN}(ptr, ptr, i64, i32, i64, ptr, ptr, i32, i32, i32, i32, i32, i32)")
    addr = f.op(f"ptrtoint ptr {ptr} to i64")
    desc = size | (1 << 24 if write else 0) | (SPACE_CODE[space] << 25)
    cont = None
    if space == "local" and em.local_vars:
        # the function's own .local variables are the bounds (the runtime only knows the whole stack)
        inside = "false"
        for p, n in em.local_vars:
            lo = f.op(f"ptrtoint ptr {p} to i64")
            rel = f.op(f"sub i64 {addr}, {lo}")
            hit = f.op(f"icmp ule i64 {rel}, {n - size}") if n >= size else "false"
            inside = f.op(f"or i1 {inside}, {hit}")
        bad, cont = f.new_label("mc.bad"), f.new_label("mc.ok")
        f.term(f"br i1 {inside}, label %{cont}, label %{bad}")
        f.label(bad)
        desc |= 1 << 28
    site = line | (max(em.cur_index, 0) << 32)
    ids = ", ".join(f"i32 {v}" for v in list(em.tid) + list(em.ctaid))
    f.emit(f"call void @{CHECK_FN}(ptr {em.L}, ptr {em.W}, i64 {addr}, i32 {desc}, i64 {site}, "
           f"ptr {fn}, ptr {file}, {ids})")
    if cont is not None:
        f.term(f"br label %{cont}")
        f.label(cont)
