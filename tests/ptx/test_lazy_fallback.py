"""A region kernel's general-scheduler fallback is compiled on first use, inside the launch that needs
it: not before, exact results when it is, each module's fallback bound to that module's globals, from
the object cache too, and on a cooperative launch's fibers."""

import ctypes

import numpy as np
import pytest

import ptx
from ptx import runtime

# Thread `gap` of every block exits before the barrier (when gap < ntid): the threads disagree on
# the next region and the block finishes in the fallback, which reads the .global `gval`.
KERNEL = r"""
.version 7.0
.target sm_80
.address_size 64

.global .align 4 .u32 gval;

.visible .entry lazy(.param .u64 out, .param .u32 gap)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    .shared .align 4 .b8 s[1024];

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r9, [gap];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.eq.u32 %p1, %r1, %r9;
    @%p1 bra DONE;
    shl.b32 %r5, %r1, 2;
    mov.u32 %r6, s;
    add.s32 %r7, %r6, %r5;
    mul.lo.s32 %r8, %r1, 3;
    st.shared.u32 [%r7], %r8;
    bar.sync 0;
    add.s32 %r10, %r1, 1;
    rem.u32 %r10, %r10, %r3;
    shl.b32 %r10, %r10, 2;
    add.s32 %r10, %r6, %r10;
    ld.shared.u32 %r11, [%r10];
    ld.global.u32 %r5, [gval];
    add.s32 %r11, %r11, %r5;
    st.global.u32 [%rd3], %r11;
DONE:
    ret;
}
"""


def check(k, nb, n, gap, g, cooperative=False):
    """Launch nb blocks of n threads with thread `gap` exiting early; every element checked but the
    lane that reads the exited thread's (never written) shared slot."""
    ctypes.c_uint32.from_address(k.module.globals["gval"][0]).value = g
    out = np.full(nb * n, -7, np.int32)            # poison: the exited thread writes nothing
    if cooperative:
        k.launch_raw(nb, n, k.pack_params([out, gap]), cooperative=True)
    else:
        k.launch(nb, n, [out, gap])
    t = np.arange(n)
    ref = np.tile(np.where(t == gap, -7, 3 * ((t + 1) % n) + g), nb).astype(np.int32)
    mask = np.tile(t != (gap - 1) % n if gap < n else np.ones(n, bool), nb)
    assert np.array_equal(out[mask], ref[mask]), f"{int(np.sum(out[mask] != ref[mask]))} differ"


def test_fallback_built_only_when_a_block_needs_it():
    k = ptx.compile(KERNEL + "\n// lazy 1\n").kernel("lazy")
    fb = k.module._fallback
    assert fb is not None and fb.entries is None
    assert '@"t.lazy"' not in k.module.ir and '@"r0.lazy"' in k.module.ir
    check(k, 16, 64, 64, 5)                      # no thread exits: regions only
    assert fb.entries is None
    check(k, 64, 64, 10, 9)                      # every block diverges: 64 first uses, 2 workers
    assert fb.entries is not None and fb.error is None
    slot = k.module._code.address("fbp.lazy")
    assert ctypes.c_void_p.from_address(slot).value == ctypes.cast(fb.entries["lazy"], ctypes.c_void_p).value
    check(k, 7, 96, 0, 11)


def test_each_module_fallback_reads_its_own_globals():
    a = ptx.compile(KERNEL + "\n// lazy a\n").kernel("lazy")
    b = ptx.compile(KERNEL + "\n// lazy b\n").kernel("lazy")
    ga, gb = a.module.globals["gval"][0], b.module.globals["gval"][0]
    assert ga != gb
    ctypes.c_uint32.from_address(gb).value = 1000
    check(a, 8, 32, 3, 21)
    assert ctypes.c_uint32.from_address(gb).value == 1000
    ctypes.c_uint32.from_address(ga).value = 2000
    check(b, 8, 32, 5, 77)
    assert ctypes.c_uint32.from_address(ga).value == 2000


def test_fallback_after_object_cache_hit(tmp_path):
    text = KERNEL + "\n// lazy cached\n"
    first = ptx.compile(text, cache_dir=str(tmp_path))
    second = ptx.compile(text, cache_dir=str(tmp_path))
    assert not first.cache_hit and second.cache_hit
    check(second.kernel("lazy"), 9, 48, 47, 3)
    assert second._fallback.entries is not None
    check(first.kernel("lazy"), 9, 48, 1, 4)
    third = ptx.compile(text, cache_dir=str(tmp_path))        # the cached object was not replaced
    assert third.cache_hit
    check(third.kernel("lazy"), 3, 48, 2, 6)


def test_fallback_built_on_a_cooperative_launch():
    k = ptx.compile(KERNEL + "\n// lazy coop\n").kernel("lazy")
    check(k, 4, 128, 17, 8, cooperative=True)
    assert k.module._fallback.entries is not None


def test_no_fallback_module_for_kernels_without_barriers():
    mod = ptx.compile(KERNEL.replace("bar.sync 0;", "") + "\n// no barrier\n")
    assert mod._fallback is None
    assert runtime.num_workers() >= 1
