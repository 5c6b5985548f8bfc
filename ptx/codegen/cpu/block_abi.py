"""The parts every block-range function shares (ptx/runtime/ptxrt.h): the launch's loads and the
block coordinates."""

from __future__ import annotations

from ptx.codegen import function_emitter as FE


# The grid's x and y size from the launch (offsets per ptx/runtime/ptxrt.h), which BLOCK_COORDS divides by.
GRID_DIMS = f"""  %gxp = getelementptr i8, ptr %L, i64 {FE.L_GRID}
  %gx = load i32, ptr %gxp
  %gyp = getelementptr i8, ptr %L, i64 {FE.L_GRID + 4}
  %gy = load i32, ptr %gyp
"""


# The loads every generated block function starts with: grid x/y, block x/y/z from the launch, the
# worker's scratch buffer.
BLOCK_FN_ENTRY = GRID_DIMS + f"""  %bxp = getelementptr i8, ptr %L, i64 {FE.L_BLOCK}
  %bx = load i32, ptr %bxp
  %byp = getelementptr i8, ptr %L, i64 {FE.L_BLOCK + 4}
  %by = load i32, ptr %byp
  %bzp = getelementptr i8, ptr %L, i64 {FE.L_BLOCK + 8}
  %bz = load i32, ptr %bzp
  %scp = getelementptr i8, ptr %W, i64 {FE.W_SCRATCH}
  %scratch = load ptr, ptr %scp
"""


# Linear block id %b (x fastest) split into %ctaid x/y/z, as ptxrt.h numbers blocks.
BLOCK_COORDS = """  %bq = udiv i64 %b, %gx64
  %cx64 = urem i64 %b, %gx64
  %cy64 = urem i64 %bq, %gy64
  %cz64 = udiv i64 %bq, %gy64
  %cx = trunc i64 %cx64 to i32
  %cy = trunc i64 %cy64 to i32
  %cz = trunc i64 %cz64 to i32
"""


def region_entry(bx, by, bz):
    """The entry lines every function looping over a block's threads starts with: the frame the emitter's warp
    collectives use, and the block's thread count %n64 (the SoA slots' stride)."""
    return ["  %frame = alloca [64 x i8], align 8", f"  %nxy.r = mul i32 {bx}, {by}", f"  %n.r = mul i32 %nxy.r, {bz}",
            "  %n64 = zext i32 %n.r to i64"]


def store_undef_regs(em):
    return [f"  store {ty} undef, ptr {ptr}" for ty, ptr in em.regs.values()]


# The end of every block function: on to the next block of the range [first, last), or done.
BLOCK_NEXT = """next:
  %b.next = add nuw i64 %b, 1
  %more = icmp ult i64 %b.next, %last
  br i1 %more, label %head, label %done
done:
  ret i32 0
}"""


def init_frames(fb, then):
    """The loop that clears each resumable thread's frame header (resume point, state) before a block's first
    phase, frames fb bytes apart; it goes on to label `then`."""
    return f"""init:
  %it = phi i32 [ 0, %head ], [ %it.next, %init ]
  %it64 = zext i32 %it to i64
  %ioff = mul i64 %it64, {fb}
  %ifr = getelementptr i8, ptr %scratch, i64 %ioff
  store i64 0, ptr %ifr
  %it.next = add nuw i32 %it, 1
  %imore = icmp ult i32 %it.next, %n
  br i1 %imore, label %init, label %{then}
"""
