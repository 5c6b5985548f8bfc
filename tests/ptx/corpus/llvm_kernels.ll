; Kernels in LLVM IR for LLVM's own NVPTX backend (through llvmlite), so the parser also meets PTX in the
; shape upstream LLVM emits: jump tables as brx.idx, packed-struct mask initialisers, generic() pointers,
; call prototypes, vprintf, dynamic/static shared memory, atomics and shuffles.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

%packed = type <{ i8, ptr, i16 }>
@table = internal addrspace(4) constant [4 x float] [float 1.0, float -2.5, float 0x7FF8000000000000, float 0.0], align 4
@counter = addrspace(1) global i32 0, align 4
@arr = addrspace(1) global [8 x i32] zeroinitializer, align 4
@ptr = addrspace(1) global ptr addrspacecast (ptr addrspace(1) getelementptr (i8, ptr addrspace(1) @arr, i64 8) to ptr), align 8
@pk = addrspace(1) global %packed <{ i8 7, ptr addrspacecast (ptr addrspace(1) @arr to ptr), i16 9 }>, align 1
@fmt = private unnamed_addr addrspace(1) constant [9 x i8] c"v=%d %f\0A\00", align 1
@smem = internal addrspace(3) global [256 x float] undef, align 4
@dyn = external addrspace(3) global [0 x float], align 16

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare void @llvm.nvvm.barrier0()
declare i32 @llvm.nvvm.shfl.sync.down.i32(i32, i32, i32, i32)
declare i32 @vprintf(ptr, ptr)

define ptx_kernel void @vadd(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %bdim = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %m = mul i32 %bid, %bdim
  %i = add i32 %m, %tid
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %exit
body:
  %idx = sext i32 %i to i64
  %pa = getelementptr float, ptr addrspace(1) %a, i64 %idx
  %pb = getelementptr float, ptr addrspace(1) %b, i64 %idx
  %pc = getelementptr float, ptr addrspace(1) %c, i64 %idx
  %va = load float, ptr addrspace(1) %pa, align 4
  %vb = load float, ptr addrspace(1) %pb, align 4
  %t = and i32 %i, 3
  %t64 = zext i32 %t to i64
  %pt = getelementptr [4 x float], ptr addrspace(4) @table, i64 0, i64 %t64
  %vt = load float, ptr addrspace(4) %pt, align 4
  %s = fadd float %va, %vb
  %r = fmul float %s, %vt
  store float %r, ptr addrspace(1) %pc, align 4
  br label %exit
exit:
  ret void
}

define internal i32 @pick(i32 %k, ptr addrspace(1) %o) noinline {
entry:
  switch i32 %k, label %def [
    i32 0, label %c0
    i32 1, label %c1
    i32 2, label %c2
    i32 3, label %c3
    i32 4, label %c4
    i32 5, label %c5
    i32 6, label %c6
    i32 7, label %c7
  ]
c0:
  %l0 = load i32, ptr addrspace(1) %o
  br label %done
c1:
  %g1 = getelementptr i32, ptr addrspace(1) %o, i64 5
  %l1 = load i32, ptr addrspace(1) %g1
  %m1 = mul i32 %l1, 7
  br label %done
c2:
  %g2 = getelementptr i32, ptr addrspace(1) %o, i64 9
  %l2 = load i32, ptr addrspace(1) %g2
  %x2 = xor i32 %l2, 99
  br label %done
c3:
  %g3 = getelementptr i32, ptr addrspace(1) %o, i64 13
  %l3 = load i32, ptr addrspace(1) %g3
  %s3 = shl i32 %l3, 3
  br label %done
c4:
  br label %done
c5:
  %g5 = getelementptr i32, ptr addrspace(1) %o, i64 21
  %l5 = load i32, ptr addrspace(1) %g5
  %a5 = add i32 %l5, 1234
  br label %done
c6:
  %g6 = getelementptr i32, ptr addrspace(1) %o, i64 25
  %l6 = load i32, ptr addrspace(1) %g6
  %d6 = sdiv i32 %l6, 3
  br label %done
c7:
  %g7 = getelementptr i32, ptr addrspace(1) %o, i64 29
  %l7 = load i32, ptr addrspace(1) %g7
  %o7 = or i32 %l7, 65536
  br label %done
def:
  br label %done
done:
  %v = phi i32 [ %l0, %c0 ], [ %m1, %c1 ], [ %x2, %c2 ], [ %s3, %c3 ], [ 42, %c4 ], [ %a5, %c5 ], [ %d6, %c6 ], [ %o7, %c7 ], [ -1, %def ]
  ret i32 %v
}

define ptx_kernel void @misc(ptr addrspace(1) %o, i32 %k, ptr %fp) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %v = call i32 @pick(i32 %k, ptr addrspace(1) %o)
  %ps = getelementptr [256 x float], ptr addrspace(3) @smem, i32 0, i32 %tid
  %f = sitofp i32 %v to float
  store float %f, ptr addrspace(3) %ps, align 4
  call void @llvm.nvvm.barrier0()
  %nb = xor i32 %tid, 1
  %pn = getelementptr [256 x float], ptr addrspace(3) @smem, i32 0, i32 %nb
  %fn = load float, ptr addrspace(3) %pn, align 4
  %pd = getelementptr [0 x float], ptr addrspace(3) @dyn, i32 0, i32 %tid
  store float %fn, ptr addrspace(3) %pd, align 4
  %sh = call i32 @llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %v, i32 1, i32 31)
  %old = atomicrmw add ptr addrspace(1) @counter, i32 %sh seq_cst
  %cas = cmpxchg ptr addrspace(1) %o, i32 0, i32 %old monotonic monotonic
  %ind = call i32 %fp(i32 %k, ptr addrspace(1) %o)
  %buf = alloca { i32, double }, align 8
  %b0 = getelementptr { i32, double }, ptr %buf, i32 0, i32 0
  store i32 %ind, ptr %b0
  %b1 = getelementptr { i32, double }, ptr %buf, i32 0, i32 1
  store double 1.5, ptr %b1
  %fmtg = addrspacecast ptr addrspace(1) @fmt to ptr
  %pr = call i32 @vprintf(ptr %fmtg, ptr %buf)
  ret void
}

