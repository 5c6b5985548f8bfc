"""Packed pairs of f32 (.f32x2 in a .b64 register, sm_100): add/sub/mul/fma computed lane by
lane with the scalar .f32 lowering of each modifier, the low 32 bits being element 0."""

from __future__ import annotations

import itertools

from ptx import ast as A
from ptx.codegen.function_emitter import HANDLERS

_serial = itertools.count()
OPCODES = ("add", "sub", "mul", "fma")


def _temp(em, name):
    if name not in em.regs:
        em.regs[name] = ("float", em.f.alloca("float"))
    return A.Reg(name, None)


def _lanewise(scalar, em, ins):
    f = em.f
    n = len(ins.operands)
    k = next(_serial)
    srcs = [em.read(op, "b64") for op in ins.operands[1:]]
    mods = tuple("f32" if m == "f32x2" else m for m in ins.mods)
    lanes = []
    for lane in (0, 1):
        regs = [_temp(em, f"%__f32x2.{k}.{lane}.{i}") for i in range(n)]
        for r, v in zip(regs[1:], srcs):
            part = f.op(f"lshr i64 {v}, 32") if lane else v
            em.write(r, f.op(f"bitcast i32 {f.op(f'trunc i64 {part} to i32')} to float"), "f32")
        scalar(em, A.Instruction(ins.opcode, mods, regs, None, ins.pos))
        bits = f.op(f"bitcast float {em.read(regs[0], 'f32')} to i32")
        lanes.append(f.op(f"zext i32 {bits} to i64"))
    r = f.op(f"or i64 {f.op(f'shl i64 {lanes[1]}, 32')}, {lanes[0]}")
    em.write(ins.operands[0], r, "b64")


def _wrap(scalar):
    def op(em, ins):
        if "f32x2" in ins.mods:
            return _lanewise(scalar, em, ins)
        return scalar(em, ins)
    return op


for _op in OPCODES:
    HANDLERS[_op] = _wrap(HANDLERS[_op])
