"""`.align N` beyond the runtime's own alignment (128 for a block's shared memory, 64 for a resumable
thread's frame) on .shared (static, dynamic, in a .func) and .local variables: every address is
N-aligned in every block and thread, the data stays intact, and the kernel reports exactly the static
shared bytes its variables take."""

import numpy as np
import pytest

import ptx

HEADER = ".version 8.0\n.target sm_86\n.address_size 64\n"


def compile_kernel(text, name="k"):
    return ptx.compile(HEADER + text, target="host").kernel(name)


@pytest.mark.parametrize("align", [256, 512, 4096])
def test_static_shared_alignment(align):
    k = compile_kernel(f"""
.shared .align 4 .b8 small[12];
.visible .entry k(.param .u64 out)
{{
    .shared .align {align} .b8 big[40];
    .reg .b32 %r<6>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r1, %r3, %r2;
    mul.wide.u32 %rd2, %r4, 16;
    add.s64 %rd3, %rd1, %rd2;
    mov.u64 %rd4, big;
    cvta.shared.u64 %rd5, %rd4;
    st.global.u64 [%rd3], %rd5;
    mov.u64 %rd6, small;
    cvta.shared.u64 %rd7, %rd6;
    st.global.u64 [%rd3+8], %rd7;
    ret;
}}""")
    assert k.static_shared_bytes == align + 40      # small at 0, big at `align`: no rounding reported
    blocks, threads = 7, 4
    out = np.full((blocks * threads, 2), 0xDEADBEEFDEADBEEF, dtype=np.uint64)
    k.launch((blocks,), (threads,), [out])
    assert np.all(out[:, 0] % align == 0)
    assert np.all(out[:, 0] - out[:, 1] == align)   # both variables from the same (aligned) base
    for b in range(blocks):                           # one base per block, shared by its threads
        assert len(set(out[b * threads:(b + 1) * threads, 0])) == 1


def test_dynamic_shared_alignment_and_room():
    # 40 static bytes, then a 256-aligned dynamic array filled and read back whole by each block
    k = compile_kernel("""
.extern .shared .align 256 .b8 dyn[];
.visible .entry k(.param .u64 out, .param .u64 addr)
{
    .shared .align 4 .b8 st[40];
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd8, [addr];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %dynamic_smem_size;
    shr.u32 %r4, %r3, 2;
    mov.u32 %r5, %r2;
LOOP_W:
    setp.ge.u32 %p1, %r5, %r4;
    @%p1 bra DONE_W;
    mul.wide.u32 %rd2, %r5, 4;
    mov.u64 %rd3, dyn;
    add.s64 %rd4, %rd3, %rd2;
    mad.lo.s32 %r6, %r1, 100000, %r5;
    st.shared.u32 [%rd4], %r6;
    add.s32 %r5, %r5, 32;
    bra.uni LOOP_W;
DONE_W:
    st.shared.u32 [st+36], %r1;
    bar.sync 0;
    mov.u32 %r5, %r2;
LOOP_R:
    setp.ge.u32 %p1, %r5, %r4;
    @%p1 bra DONE_R;
    mul.wide.u32 %rd2, %r5, 4;
    mov.u64 %rd3, dyn;
    add.s64 %rd4, %rd3, %rd2;
    ld.shared.u32 %r6, [%rd4];
    mad.lo.s32 %r7, %r1, %r4, %r5;
    mul.wide.u32 %rd5, %r7, 4;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6], %r6;
    add.s32 %r5, %r5, 32;
    bra.uni LOOP_R;
DONE_R:
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra END;
    mov.u64 %rd3, dyn;
    cvta.shared.u64 %rd4, %rd3;
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd8, %rd5;
    st.global.u64 [%rd6], %rd4;
    ld.shared.u32 %r8, [st+36];
    cvt.u64.u32 %rd7, %r8;
    st.global.u64 [%rd6+8], %rd7;
END:
    ret;
}""")
    assert k.static_shared_bytes == 40
    blocks, words = 5, 1000
    out = np.full(blocks * words, 0xA5A5A5A5, dtype=np.uint32)
    addr = np.full((blocks, 2), 0xDEADBEEFDEADBEEF, dtype=np.uint64)
    k.launch((blocks,), (32,), [out, addr], shared_bytes=words * 4)
    want = (np.arange(blocks, dtype=np.uint32)[:, None] * 100000 + np.arange(words, dtype=np.uint32)).ravel()
    np.testing.assert_array_equal(out, want)
    assert np.all(addr[:, 0] % 256 == 0)
    np.testing.assert_array_equal(addr[:, 1], np.arange(blocks, dtype=np.uint64))   # static data intact


def test_shared_in_func_and_kernel_agree_on_the_base():
    # a .func's own 512-aligned shared variable and the kernel's view of it through its address
    k = compile_kernel("""
.func (.param .b64 r) where()
{
    .shared .align 512 .b8 fbuf[64];
    .reg .b64 %rd<3>;
    mov.u64 %rd1, fbuf;
    cvta.shared.u64 %rd2, %rd1;
    st.shared.u32 [fbuf+4], 77;
    st.param.b64 [r], %rd2;
    ret;
}
.visible .entry k(.param .u64 out)
{
    .shared .align 8 .b8 kb[24];
    .reg .b32 %r<3>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    {
    .param .b64 rv;
    call.uni (rv), where, ();
    ld.param.b64 %rd2, [rv];
    }
    ld.u32 %r1, [%rd2+4];
    mov.u64 %rd3, kb;
    cvta.shared.u64 %rd4, %rd3;
    st.global.u64 [%rd1], %rd2;
    st.global.u64 [%rd1+8], %rd4;
    cvt.u64.u32 %rd5, %r1;
    st.global.u64 [%rd1+16], %rd5;
    ret;
}""")
    out = np.full(3, 0xDEADBEEFDEADBEEF, dtype=np.uint64)
    k.launch((1,), (1,), [out])
    assert out[0] % 512 == 0 and out[2] == 77
    assert abs(int(out[0]) - int(out[1])) < 4096   # both in this block's shared memory


@pytest.mark.parametrize("align", [128, 256, 1024])
def test_local_alignment_in_resumable_frames(align):
    # a barrier makes every thread a resumable one whose .local array lives in its frame
    k = compile_kernel(f"""
.visible .entry k(.param .u64 out)
{{
    .local .align {align} .b8 arr[24];
    .local .align 4 .b8 pad[4];
    .reg .b32 %r<6>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %ctaid.x;
    mad.lo.s32 %r4, %r3, %r2, %r1;
    st.local.u32 [arr+20], %r4;
    st.local.u32 [pad], 5;
    bar.sync 0;
    ld.local.u32 %r5, [arr+20];
    mov.u64 %rd2, arr;
    cvta.local.u64 %rd3, %rd2;
    mul.wide.u32 %rd4, %r4, 16;
    add.s64 %rd5, %rd1, %rd4;
    st.global.u64 [%rd5], %rd3;
    cvt.u64.u32 %rd6, %r5;
    st.global.u64 [%rd5+8], %rd6;
    ret;
}}""")
    assert k.frame_bytes > 0                        # the frame path is the one under test
    blocks, threads = 3, 48
    out = np.full((blocks * threads, 2), 0xDEADBEEFDEADBEEF, dtype=np.uint64)
    k.launch((blocks,), (threads,), [out])
    assert np.all(out[:, 0] % align == 0)
    np.testing.assert_array_equal(out[:, 1], np.arange(blocks * threads, dtype=np.uint64))
