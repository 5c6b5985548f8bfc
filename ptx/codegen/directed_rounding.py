"""f32 results rounded toward zero, up or down without changing the FPU's rounding mode: the exact result
is a double-double (f32 operands make a product exact in double, and TwoSum makes a sum's error exact), its
round-to-nearest f32 is one ulp step from the directed one, and plain IR decides the step, so thread loops
with fma.rm/add.rz/... vectorise (a rounding-mode switch is two serialising instructions per operation)."""

from __future__ import annotations


def ulp_neighbours(em, b, ity):
    """(next up, next down) of the float whose bits are `b` (integer type ity): one ulp toward +inf and -inf,
    through zero to the smallest subnormal of the other sign; -inf and +inf step to the largest finite."""
    f = em.f
    sign = 1 << (int(ity[1:]) - 1)
    neg = f.op(f"icmp slt {ity} {b}, 0")
    is_zero = f.op(f"icmp eq {ity} {f.op(f'and {ity} {b}, {sign - 1}')}, 0")
    inc, dec = f.op(f"add {ity} {b}, 1"), f.op(f"sub {ity} {b}, 1")
    up = f.op(f"select i1 {is_zero}, {ity} 1, {ity} {f.op(f'select i1 {neg}, {ity} {dec}, {ity} {inc}')}")
    down = f.op(f"select i1 {is_zero}, {ity} {-(sign - 1)}, {ity} {f.op(f'select i1 {neg}, {ity} {inc}, {ity} {dec}')}")
    return up, down


def f32_directed(em, p, c, mode):
    """The f32 of exact p + c (doubles; c None: exactly p) rounded by mode (towardzero/upward/downward)."""
    f = em.f
    if c is None:
        s, err = p, "0.0"
    else:
        s = f.op(f"fadd double {p}, {c}")
        bb = f.op(f"fsub double {s}, {p}")
        e1 = f.op(f"fsub double {p}, {f.op(f'fsub double {s}, {bb}')}")
        err = f.op(f"fadd double {e1}, {f.op(f'fsub double {c}, {bb}')}")
    r = f.op(f"fptrunc double {s} to float")
    back = f.op(f"fpext float {r} to double")
    tie = f.op(f"fcmp oeq double {back}, {s}")
    # r above / below the exact value (NaN: neither; an infinite s: err is NaN, r == s, neither)
    gt, lt = f.op(f"fcmp ogt double {back}, {s}"), f.op(f"fcmp olt double {back}, {s}")
    err_neg, err_pos = f.op(f"fcmp olt double {err}, 0.0"), f.op(f"fcmp ogt double {err}, 0.0")
    above = f.op(f"or i1 {gt}, {f.op(f'and i1 {tie}, {err_neg}')}")
    below = f.op(f"or i1 {lt}, {f.op(f'and i1 {tie}, {err_pos}')}")
    b = f.op(f"bitcast float {r} to i32")
    up, down = ulp_neighbours(em, b, "i32")
    if mode == "upward":
        nb = f.op(f"select i1 {below}, i32 {up}, i32 {b}")
    elif mode == "downward":
        nb = f.op(f"select i1 {above}, i32 {down}, i32 {b}")
        if c is not None:
            # an exact zero sum is -0 when rounding down unless both terms are +0 (IEEE 754 6.3)
            zero_sum = f.op(f"fcmp oeq double {s}, 0.0")
            pb, cb = f.op(f"bitcast double {p} to i64"), f.op(f"bitcast double {c} to i64")
            signs = f.op(f"or i64 {pb}, {cb}")
            zneg = f.op(f"icmp slt i64 {signs}, 0")
            nb = f.op(f"select i1 {f.op(f'and i1 {zero_sum}, {zneg}')}, i32 -2147483648, i32 {nb}")
    else:
        pos = f.op(f"fcmp ogt double {s}, 0.0")
        away = f.op(f"select i1 {pos}, i1 {above}, i1 {below}")     # |r| > |exact| (s == 0: r == 0, neither)
        nb = f.op(f"select i1 {away}, i32 {f.op(f'sub i32 {b}, 1')}, i32 {b}")
    return f.op(f"bitcast i32 {nb} to float")
