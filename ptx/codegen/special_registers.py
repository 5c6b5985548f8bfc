"""PTX special registers (%tid, %laneid, %clock, %envreg, smem sizes, ...) of the function emitter, with
the few values a target answers differently (lane_id, globaltimer, grid_workspace) as methods to override."""

from __future__ import annotations

from ptx.codegen.ptxrt_layout import (L_DYN_SHARED, L_STATIC_SHARED, L_GRID_WORKSPACE, L_CLUSTER,
                                      L_CLUSTER_EXPLICIT, W_WORKER_ID)
from ptx.codegen.reserved_smem import RESERVED_SMEM_BYTES, reserved_smem_register


class SpecialRegisters:
    """Mixed into FunctionEmitter: uses its f, m, tid, ctaid, ntid(), nctaid(), L, W, call, invariant."""

    def linear_tid(self):
        f = self.f
        bx, by = self.ntid(0), self.ntid(1)
        yz = f.op(f"mul i32 {self.tid[2]}, {by}")
        yz = f.op(f"add i32 {yz}, {self.tid[1]}")
        yz = f.op(f"mul i32 {yz}, {bx}")
        return f.op(f"add i32 {yz}, {self.tid[0]}")

    def lane_id(self):
        return self.f.op(f"and i32 {self.linear_tid()}, 31")

    def globaltimer(self):
        return self.call("ptx_rt_globaltimer", "i64", [])

    def grid_workspace(self):
        """i64 address of the cooperative-launch grid workspace (ptxrt.h)."""
        pp = self.invariant(("Lp", L_GRID_WORKSPACE), lambda: f"getelementptr i8, ptr {self.L}, i64 {L_GRID_WORKSPACE}")
        return self.invariant(("ws",), lambda: f"load i64, ptr {pp}, align 8")

    def cluster_nctaid(self, i):
        """%cluster_nctaid (i32): CTAs per cluster along axis i, from the launch record (ptxrt.h)."""
        return self.load_L_u32(L_CLUSTER + 4 * i)

    def is_explicit_cluster(self):
        return self.f.op(f"icmp ne i32 {self.load_L_u32(L_CLUSTER_EXPLICIT)}, 0")

    def cluster_ctarank(self):
        """%cluster_ctarank: the CTA's position in its cluster, x fastest."""
        f = self.f
        c = [f.op(f"urem i32 {self.ctaid[i]}, {self.cluster_nctaid(i)}") for i in range(3)]
        r = f.op(f"mul i32 {c[2]}, {self.cluster_nctaid(1)}")
        r = f.op(f"add i32 {r}, {c[1]}")
        r = f.op(f"mul i32 {r}, {self.cluster_nctaid(0)}")
        return f.op(f"add i32 {r}, {c[0]}")

    def cluster_nctarank(self):
        f = self.f
        n = f.op(f"mul i32 {self.cluster_nctaid(0)}, {self.cluster_nctaid(1)}")
        return f.op(f"mul i32 {n}, {self.cluster_nctaid(2)}")

    def special_register(self, name, ins):
        """(value, llvm type) of the special register `name`, or None where it is none we know."""
        f = self.f
        comp = {"x": 0, "y": 1, "z": 2}
        base, _, c = name.partition(".")
        if base in ("%tid", "%ntid", "%ctaid", "%nctaid") and c in comp:
            i = comp[c]
            if base == "%tid":
                return self.tid[i], "i32"
            if base == "%ctaid":
                return self.ctaid[i], "i32"
            if base == "%ntid":
                return self.ntid(i), "i32"
            return self.nctaid(i), "i32"
        # thread-block clusters: the launch's cluster shape (1, 1, 1 without one), the CTA's place in it
        if base in ("%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid") and c in comp:
            i = comp[c]
            n = self.cluster_nctaid(i)
            if base == "%cluster_nctaid":
                return n, "i32"
            if base == "%clusterid":
                return f.op(f"udiv i32 {self.ctaid[i]}, {n}"), "i32"
            if base == "%nclusterid":
                return f.op(f"udiv i32 {self.nctaid(i)}, {n}"), "i32"
            return f.op(f"urem i32 {self.ctaid[i]}, {n}"), "i32"
        if name == "%is_explicit_cluster":
            return self.is_explicit_cluster(), "i1"
        if name == "%cluster_ctarank":
            return self.cluster_ctarank(), "i32"
        if name == "%cluster_nctarank":
            return self.cluster_nctarank(), "i32"
        if name == "%laneid":
            return self.lane_id(), "i32"
        if name == "%warpid":
            return f.op(f"lshr i32 {self.linear_tid()}, 5"), "i32"
        if name == "%nwarpid":
            n = f.op(f"mul i32 {self.ntid(0)}, {self.ntid(1)}")
            n = f.op(f"mul i32 {n}, {self.ntid(2)}")
            n = f.op(f"add i32 {n}, 31")
            return f.op(f"lshr i32 {n}, 5"), "i32"
        if name.startswith("%lanemask_"):
            bit = f.op(f"shl i32 1, {self.lane_id()}")
            below = f.op(f"sub i32 {bit}, 1")
            v = {"eq": lambda: bit, "lt": lambda: below,
                 "le": lambda: f.op(f"or i32 {below}, {bit}"),
                 "gt": lambda: f.op(f"xor i32 {f.op(f'or i32 {below}, {bit}')}, -1"),
                 "ge": lambda: f.op(f"xor i32 {below}, -1")}.get(name[len("%lanemask_"):])
            if v is not None:
                return v(), "i32"
        if name in ("%clock64", "%clock"):
            v = self.call("llvm.readcyclecounter", "i64", [])
            return (f.op(f"trunc i64 {v} to i32"), "i32") if name == "%clock" else (v, "i64")
        if name in ("%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
            v = self.globaltimer()
            if name == "%globaltimer":
                return v, "i64"
            if name.endswith("hi"):
                v = f.op(f"lshr i64 {v}, 32")
            return f.op(f"trunc i64 {v} to i32"), "i32"
        if name == "%smid":
            p = f.op(f"getelementptr i8, ptr {self.W}, i64 {W_WORKER_ID}")
            return f.op(f"load i32, ptr {p}"), "i32"
        if name == "%nsmid":
            return "1024", "i32"
        if name == "%gridid":
            return "0", "i64"
        if name == "%dynamic_smem_size":
            return self.load_L_u32(L_DYN_SHARED), "i32"
        if name in ("%total_smem_size", "%aggr_smem_size"):
            a = self.load_L_u32(L_DYN_SHARED)
            b = self.load_L_u32(L_STATIC_SHARED)
            total = f.op(f"add i32 {a}, {b}")
            if self.m.reserved_smem_bytes:  # the static area holds the reservation (reserved_smem.py)
                total = f.op(f"sub i32 {total}, {self.m.reserved_smem_bytes}")
            if name == "%total_smem_size":
                return total, "i32"
            # the aggregate counts the per-CTA reservation the driver reports
            return f.op(f"add i32 {total}, {RESERVED_SMEM_BYTES}"), "i32"
        if name.startswith("%reserved_smem_offset_"):
            v = reserved_smem_register(self.m, name)
            if v is not None:
                return str(v), "i32"
        if name in ("%envreg1", "%envreg2"):
            # nvcc's inline grid.sync finds its barrier word at %envreg1 (high) : %envreg2 (low 32 bits)
            ws = self.grid_workspace()
            if name == "%envreg1":
                ws = f.op(f"lshr i64 {ws}, 32")
            return f.op(f"trunc i64 {ws} to i32"), "i32"
        if name.startswith("%envreg"):
            return "0", "i32"
        return None
