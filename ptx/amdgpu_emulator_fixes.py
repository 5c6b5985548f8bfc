"""Fixes to tinygrad's RDNA3/CDNA emulator, applied to its source text when it is loaded: each names the
bug it repairs, and a text that no longer occurs exactly once stops the load (another emulator version)."""

from __future__ import annotations

import os
from dataclasses import dataclass


class EmulatorUnavailable(RuntimeError):
    """No usable emulator: ZLUDA_AMDGPU_EMULATOR unset or wrong, no clang, or a fix no longer applies."""


@dataclass(frozen=True)
class Fix:
    tag: str
    why: str
    edits: tuple            # ((text, replacement), ...): each text must occur exactly once in the file
    module: str = "emu"     # test/mockgpu/amd/<module>.py


FIXES = (
    Fix("lds-load-inactive-lanes",
        "a DS load reads LDS for every lane and masks only the register write, so an inactive lane whose "
        "address register holds data reads outside the LDS allocation and the process dies; global loads "
        "already pass the lane's exec bit, DS loads now do too",
        (("'_lds': mem, 'laneId': lane,\n", "'_lds': mem, 'laneId': lane, '_active': _lane_active(exec_mask, lane),\n"),)),
    Fix("cmpswap-b64",
        "the 64-bit compare-and-swap carries 128 data bits {new, compare}, but an atomic's data was read as 64 "
        "bits only when it is exactly 64 wide: the new value was cut to 32 bits and the compare value "
        "(DATA[127:64]) undefined, so the swap never happened",
        (("        if data_bits_mem == 64 else ctx.rvgpr_dyn(vdata_reg, lane)\n"
          "      return {'ADDR': addr, 'DATA': atomic_data,",
          "        if data_bits_mem in (64, 128) else ctx.rvgpr_dyn(vdata_reg, lane)\n"
          "      return {'ADDR': addr, 'DATA': atomic_data, 'DATA_HI': _u64(ctx.rvgpr_dyn(vdata_reg + _c(2), lane), "
          "ctx.rvgpr_dyn(vdata_reg + _c(3), lane)),"),
         ("  exec_mask, op_name = ctx.rexec(), _op_name(inst)\n  pcode = get_pcode(inst.op)\n",
          "  exec_mask, op_name = ctx.rexec(), _op_name(inst)\n"
          "  pcode = get_pcode(inst.op).replace('DATA[127 : 64]', 'DATA_HI')\n"))),
    Fix("sop1-reads-pc",
        "s_getpc_b64 (`D0 = PC + 4`) did not compile: scalar one-operand pcode had no PC variable; LLVM "
        "uses it for every PC-relative address (module constants and globals)",
        (("    srcs = {'S0': ctx.rsrc_dyn(ssrc0_off, None, bits['s0'], literal)}\n"
          "    dst_off, dst_size = sdst_off, bits['d'] // 32\n  elif isinstance(inst, (ir3.SOP2",
          "    srcs = {'S0': ctx.rsrc_dyn(ssrc0_off, None, bits['s0'], literal), 'PC': ctx.rpc().cast(dtypes.int64)}\n"
          "    dst_off, dst_size = sdst_off, bits['d'] // 32\n  elif isinstance(inst, (ir3.SOP2"),)),
    Fix("sop-writes-pc",
        "s_setpc_b64 and s_swappc_b64 (calls and returns: the directed-rounding helpers, nvcc's expf) only "
        "advanced the PC; the PC their pcode assigns was dropped",
        (("    _, assigns = parse_pcode(pcode, srcs)\n"
          "    return UOp.sink(*self.scalar_stores(assigns, sdst_reg, sdst_size), *self.inc_pc())\n",
          "    _, assigns = parse_pcode(pcode, srcs)\n"
          "    pc = [v for d, v in assigns if d == 'PC' or d.startswith('PC.')]\n"
          "    if pc:\n"
          "      lo, hi = _split64(pc[-1].cast(dtypes.uint64))\n"
          "      rest = [(d, v) for d, v in assigns if not (d == 'PC' or d.startswith('PC.'))]\n"
          "      return UOp.sink(*self.scalar_stores(rest, sdst_reg, sdst_size), self.wsgpr_dyn(_c(PC_LO_IDX), lo), "
          "self.wsgpr_dyn(_c(PC_HI_IDX), hi))\n"
          "    return UOp.sink(*self.scalar_stores(assigns, sdst_reg, sdst_size), *self.inc_pc())\n"),)),
    Fix("hw-id-over-inline-constant",
        "the wave's HW_ID (for s_getreg) is stored in slot 248, which is also inline constant 1/(2*pi): "
        "`v_mul_f32 v, 0.15915494, v` (sin/cos argument scaling) multiplied by the wave index instead; "
        "the code objects here never read HW_ID",
        (("  st._write_sgpr(SGPR_COUNT - 16 + 4, hw_id)  # HW_REGISTERS[4] = HW_ID\n",
          "  pass  # slot 248 keeps inline constant 1/(2*pi)\n"),)),
    Fix("permute-writes-active-lanes",
        "ds_bpermute/ds_permute wrote every lane's destination: the pcode's `if EXEC[i]` around the write "
        "is merged as where(cond, v, v), a no-op; a lane outside the exec mask (a non-member of a partial-"
        "mask shfl.sync, branched around) lost the value it held",
        (("    stores = [ctx.vgpr.index(val[0]).store(val[1].cast(dtypes.uint32)) for dest, val in assigns "
          "if dest.startswith('VGPR[')]\n",
          "    stores = [ctx.vgpr.index(val[0]).store(_lane_active(exec_mask, val[0] % _c(ctx.wave_size))"
          ".where(val[1].cast(dtypes.uint32), ctx.vgpr.index(val[0]).load())) for dest, val in assigns "
          "if dest.startswith('VGPR[')]\n"),)),
    Fix("scratch-per-wave",
        "every wave of a workgroup got the same scratch memory, indexed by lane only: a wave's private "
        "variables were overwritten by the next wave between two barriers",
        (("  scratch_buf = Buffer('CPU', scratch_size * wave_size, dtypes.uint8).ensure_allocated() if scratch_size else None\n",
          "  scratch_buf = Buffer('CPU', scratch_size * wave_size * -(-total_threads // wave_size), dtypes.uint8)"
          ".ensure_allocated() if scratch_size else None\n"),
         ("                         ctypes.c_uint64(scratch_buf._buf.va_addr if scratch_buf else 0),\n",
          "                         ctypes.c_uint64(scratch_buf._buf.va_addr + wave_start * scratch_size if scratch_buf else 0),\n"))),
    Fix("flat-apertures",
        "src_shared_base and src_private_base read as 0, so a generic (FLAT) access to LDS or to private memory "
        "went to host address `offset` and the process died; LLVM emits them for every pointer whose address "
        "space it cannot prove (locals indexed at run time, arguments passed by reference to a call). The "
        "apertures now get bases above user space, and FLAT addresses inside them are sent to the workgroup's "
        "LDS or to the lane's scratch",
        (("      inline = is_float_const.where(float_inline.bitcast(dtypes.uint64), int_inline.bitcast(dtypes.uint64))\n",
          "      inline = is_float_const.where(float_inline.bitcast(dtypes.uint64), int_inline.bitcast(dtypes.uint64))\n"
          "      inline = (off.eq(_c(235)) | off.eq(_c(237))).where(sgpr_lo.cast(dtypes.uint64) << UOp.const(32, dtypes.uint64), inline)\n"),
         ("    return base_addr + offset64\n",
          "    addr = base_addr + offset64\n"
          "    if isinstance(inst, (ir3.FLAT, ir4.VFLAT, irc.FLAT)):\n"
          "      hi = (addr >> UOp.const(32, dtypes.uint64)).cast(dtypes.uint32)\n"
          "      lo = addr & UOp.const(0xFFFFFFFF, dtypes.uint64)\n"
          "      lds = _u64(ctx.rsgpr_dyn(_c(_APERTURE_SLOTS)), ctx.rsgpr_dyn(_c(_APERTURE_SLOTS + 1)))\n"
          "      scr = _u64(ctx.rsgpr_dyn(_c(_APERTURE_SLOTS + 2)), ctx.rsgpr_dyn(_c(_APERTURE_SLOTS + 3))) + "
          "lane.cast(dtypes.uint64) * ctx.rsgpr_dyn(_c(SCRATCH_STRIDE_IDX)).cast(dtypes.uint64)\n"
          "      addr = hi.eq(_c(_SHARED_HI)).where(lds + lo, hi.eq(_c(_PRIVATE_HI)).where(scr + lo, addr))\n"
          "    return addr\n"),
         ("def run_asm(lib: int, lib_sz: int,",
          "_SHARED_HI, _PRIVATE_HI, _APERTURE_SLOTS = 0x10000, 0x20000, 224   # slots 224-227: no operand encodes them\n"
          "def _set_apertures(st, lds, scratch):\n"
          "  st._write_sgpr(235, _SHARED_HI); st._write_sgpr(237, _PRIVATE_HI)\n"
          "  for k, v in enumerate((lds & MASK32, lds >> 32, scratch & MASK32, scratch >> 32)): st._write_sgpr(_APERTURE_SLOTS + k, v)\n"
          "def run_asm(lib: int, lib_sz: int,"),
         ("                         ctypes.c_uint64(st.accvgpr_buf._buf.va_addr)]))\n",
          "                         ctypes.c_uint64(st.accvgpr_buf._buf.va_addr)]))\n"
          "      _set_apertures(st, lds_buf._buf.va_addr, waves[-1][1][4].value or 0)\n"))),
    Fix("atomic-return-bit",
        "whether an atomic returns the old value was read from the `glc` field only; CDNA3/4 (gfx940+) "
        "encode it as `sc0` (same bit; LLVM AMDGPUUsage: atomics use sc0 to say they return the value) and "
        "RDNA4 as th bit 0 (TH_ATOMIC_RETURN), so on those targets no atomic wrote its destination and code "
        "using the old value (a CAS loop, a slot index) ran on garbage",
        (("  is_atomic, glc = 'ATOMIC' in op_name, _iattr(inst, 'glc')\n",
          "  is_atomic, glc = 'ATOMIC' in op_name, _iattr(inst, 'glc') | _iattr(inst, 'sc0') | (_iattr(inst, 'th') & 1)\n"),)),
    Fix("flat-has-no-saddr",
        "FLAT (not GLOBAL) instructions have no scalar base, but the emulator added s[saddr] whenever the field "
        "was below 124: GFX9-family encoders (LLVM for CDNA) leave that unused field 0, so every flat access "
        "on gfx950 was offset by s[0:1] and faulted",
        (("    offset0, offset1, saddr_reg = _c(0), _c(0), ctx.optional_field(inst, 'saddr')\n",
          "    offset0, offset1 = _c(0), _c(0)\n"
          "    saddr_reg = None if isinstance(inst, (ir3.FLAT, irc.FLAT)) else ctx.optional_field(inst, 'saddr')\n"),)),
    Fix("untyped-return-width",
        "a memory op's `RETURN_DATA = tmp` without a type suffix (CDNA's f64 atomics: global/flat/ds add, "
        "min, max) returned 32 bits whatever tmp's width: the old value of a 64-bit atomic lost its high half",
        (("    data_bits = int(parts[1][1:]) if len(parts) == 2 else 32\n",
          "    data_bits = int(parts[1][1:]) if len(parts) == 2 else \\\n"
          "      val.dtype.itemsize * 8 if dest == 'RETURN_DATA' and isinstance(val, UOp) and val.dtype.itemsize == 8 else 32\n"),)),
    Fix("setreg-of-mode-is-a-no-op",
        "s_setreg(_imm32)_b32 did not compile (its pcode names WAVE_STATUS, which the emulator lacks), so any "
        "kernel writing a hardware register stopped; LLVM writes MODE with it on CDNA (denormal and rounding "
        "bits around division and directed rounding). The emulator models no mode bits (a stated gap), so the "
        "write now does nothing, as s_round_mode and s_denorm_mode already do on RDNA",
        (("    if 'GETREG' in op_name:\n",
          "    if 'SETREG' in op_name: return UOp.sink(*ctx.inc_pc())\n    if 'GETREG' in op_name:\n"),)),
    Fix("denormals-as-the-descriptor-says",
        "every kernel ran with the host's DAZ+FTZ set, so f32 and f64 denormals read as zero, although the "
        "kernel descriptor (rsrc1 FLOAT_DENORM_MODE) asks to keep them, as the project's code objects do; "
        "run_asm now takes the mode from its caller",
        (("scratch_size: int = 0, arch: str = \"rdna3\", user_data: list[int]|None = None) -> int:",
          "scratch_size: int = 0, arch: str = \"rdna3\", user_data: list[int]|None = None, flush_denormals: bool = True) -> int:"),
         ("  with _MXCSRContext():\n",
          "  with (_MXCSRContext() if flush_denormals else __import__('contextlib').nullcontext()):\n"))),
    Fix("24-bit-operands",
        "the pcode type suffixes .u24/.i24 (v_mad_u32_u24, v_mul_i32_i24, ...) were ignored: the operands "
        "kept all 32 bits, so PTX mad24/mul24 came out wrong whenever an input used bits 24-31",
        (("    dt = DTYPES.get(field)\n    if dt is None: return base\n",
          "    if field in ('u24', 'i24'):\n"
          "      v = _to_u32(base) & _u32(0xFFFFFF)\n"
          "      return v if field == 'u24' else (v << _u32(8)).bitcast(dtypes.int) >> _const(dtypes.int, 8)\n"
          "    dt = DTYPES.get(field)\n    if dt is None: return base\n"),),
        module="pcode"),
)


def disabled_fixes():
    """ZLUDA_AMDGPU_EMULATOR_NO_FIX=tag,tag: leave those out (to show what each one repairs)."""
    return {t for t in os.environ.get("ZLUDA_AMDGPU_EMULATOR_NO_FIX", "").split(",") if t}


def apply_fixes(src: str, origin: str, module: str, skip=()) -> tuple:
    applied = []
    for fix in FIXES:
        if fix.module != module or fix.tag in skip:
            continue
        for old, new in fix.edits:
            n = src.count(old)
            if n != 1:
                raise EmulatorUnavailable(f"emulator fix {fix.tag!r} no longer applies: its target text occurs "
                                          f"{n} times in {origin} (a different emulator version?)")
            src = src.replace(old, new)
        applied.append(fix.tag)
    return src, tuple(applied)
