"""mbarrier on the CPU executor, per the PTX ISA: init / arrive (count, noComplete, expect_tx) /
arrive_drop / expect_tx / complete_tx / pending_count / test_wait / try_wait (state and parity forms),
checked one step at a time in one thread, and a block whose threads spin on try_wait until all arrived."""

import numpy as np

import ptx

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def run(body, blocks=1, threads=1, nout=32, regs=""):
    text = HEADER + f"""
.visible .entry k(.param .u64 out)
{{
    .shared .align 8 .b64 bar;
    .shared .align 8 .b64 bar2;
    .shared .align 4 .b8 data[1024];
    .reg .pred %p<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    {regs}
    ld.param.u64 %rd1, [out];
{body}
    ret;
}}"""
    k = ptx.compile(text, target="host").kernel("k")
    out = np.full(nout * blocks, 0xBAD0BAD0, dtype=np.uint32)
    k.launch((blocks,), (threads,), [out])
    return out


def put(slot, value_reg):
    return f"    st.global.u32 [%rd1+{4 * slot}], {value_reg};\n"


def put_pred(slot, pred):
    return f"    selp.u32 %r15, 1, 0, {pred};\n" + put(slot, "%r15")


def test_single_thread_steps():
    body = (
        "    mbarrier.init.shared.b64 [bar], 3;\n"
        "    mbarrier.arrive.shared.b64 %rd2, [bar];\n"                  # pending 2
        "    mbarrier.pending_count.b64 %r1, %rd2;\n" + put(0, "%r1") +
        "    mbarrier.test_wait.shared.b64 %p1, [bar], %rd2;\n" + put_pred(1, "%p1") +
        "    mbarrier.arrive.shared.b64 %rd3, [bar], 2;\n"               # the last two: phase 0 done
        "    mbarrier.pending_count.b64 %r2, %rd3;\n" + put(2, "%r2") +
        "    mbarrier.test_wait.shared.b64 %p2, [bar], %rd2;\n" + put_pred(3, "%p2") +
        "    mbarrier.test_wait.parity.shared.b64 %p3, [bar], 0;\n" + put_pred(4, "%p3") +
        "    mbarrier.test_wait.parity.shared.b64 %p4, [bar], 1;\n" + put_pred(5, "%p4") +
        # phase 1: arrive.noComplete (which must not be the completing arrival) leaves one pending
        "    mbarrier.arrive.noComplete.shared.b64 %rd4, [bar], 2;\n"
        "    mbarrier.try_wait.parity.shared.b64 %p5, [bar], 1;\n" + put_pred(6, "%p5") +
        # arrive_drop: this phase still needs its 3, the next ones only 2
        "    mbarrier.init.shared.b64 [bar], 3;\n"
        "    mbarrier.arrive_drop.shared.b64 %rd5, [bar];\n"
        "    mbarrier.arrive.shared.b64 %rd5, [bar], 2;\n"
        "    mbarrier.test_wait.parity.shared.b64 %p6, [bar], 0;\n" + put_pred(7, "%p6") +
        "    mbarrier.arrive.shared.b64 %rd6, [bar];\n"
        "    mbarrier.pending_count.b64 %r3, %rd6;\n" + put(8, "%r3") +
        "    mbarrier.arrive.shared.b64 %rd6, [bar];\n"
        "    mbarrier.try_wait.shared.b64 %p7, [bar], %rd6, 1000;\n" + put_pred(9, "%p7") +
        # transactions: arrivals alone do not complete a phase while bytes are pending
        "    mbarrier.init.shared.b64 [bar2], 1;\n"
        "    mbarrier.arrive.expect_tx.shared.b64 %rd7, [bar2], 48;\n"
        "    mbarrier.test_wait.shared.b64 %p1, [bar2], %rd7;\n" + put_pred(10, "%p1") +
        "    mbarrier.complete_tx.shared.b64 [bar2], 40;\n"
        "    mbarrier.test_wait.shared.b64 %p1, [bar2], %rd7;\n" + put_pred(11, "%p1") +
        "    mbarrier.expect_tx.shared.b64 [bar2], 8;\n"
        "    mbarrier.complete_tx.shared.b64 [bar2], 16;\n"
        "    mbarrier.test_wait.shared.b64 %p1, [bar2], %rd7;\n" + put_pred(12, "%p1") +
        # generic addressing of the same object
        "    mov.u64 %rd8, bar2;\n"
        "    cvta.shared.u64 %rd9, %rd8;\n"
        "    mbarrier.init.b64 [%rd9], 1;\n"
        "    mbarrier.arrive.b64 %rd10, [%rd9];\n"
        "    mbarrier.test_wait.b64 %p1, [%rd9], %rd10;\n" + put_pred(13, "%p1") +
        "    mbarrier.inval.shared.b64 [bar2];\n"
        "    ld.shared.u64 %rd11, [bar2];\n"
        "    cvt.u32.u64 %r4, %rd11;\n" + put(14, "%r4"))
    out = run(body, nout=15)
    want = [2, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0]
    np.testing.assert_array_equal(out, np.array(want, dtype=np.uint32))


def test_block_spins_until_every_thread_arrived():
    # thread 0 initialises; every thread writes its word, arrives, spins on try_wait, then reads its
    # neighbour's word (written by a thread that runs after it): two phases, the second by parity
    n = 96
    body = f"""
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra ARRIVE;
    mbarrier.init.shared.b64 [bar], {n};
ARRIVE:
    bar.sync 0;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, data;
    add.u32 %r4, %r3, %r2;
    mad.lo.u32 %r5, %r1, 3, 1;
    st.shared.u32 [%r4], %r5;
    mbarrier.arrive.shared.b64 %rd2, [bar];
WAIT0:
    mbarrier.try_wait.shared.b64 %p2, [bar], %rd2;
    @!%p2 bra WAIT0;
    add.u32 %r6, %r1, 1;
    rem.u32 %r6, %r6, {n};
    shl.b32 %r7, %r6, 2;
    add.u32 %r8, %r3, %r7;
    ld.shared.u32 %r9, [%r8];
    mov.u32 %r10, %ctaid.x;
    mad.lo.u32 %r11, %r10, {2 * n}, %r1;
    mul.wide.u32 %rd3, %r11, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r9;
    mbarrier.arrive.shared.b64 %rd5, [bar];
WAIT1:
    mbarrier.test_wait.parity.shared.b64 %p3, [bar], 1;
    @!%p3 bra WAIT1;
    mbarrier.pending_count.b64 %r12, %rd5;
    setp.lt.u32 %p4, %r12, {n};
    selp.u32 %r13, 1, 0, %p4;
    st.global.u32 [%rd4+{4 * n}], %r13;
"""
    blocks = 3
    out = run(body, blocks=blocks, threads=n, nout=2 * n).reshape(blocks, 2, n)
    want = ((np.arange(n, dtype=np.uint32) + 1) % n) * 3 + 1
    for b in range(blocks):
        np.testing.assert_array_equal(out[b, 0], want)
        np.testing.assert_array_equal(out[b, 1], np.ones(n, dtype=np.uint32))
