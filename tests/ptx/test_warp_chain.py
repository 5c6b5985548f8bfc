"""Warp chains (ptx/codegen/cpu/warp_chain.py): shuffles with constant operands between the kernel's start or a
barrier and the next barrier or the exit run with each warp's lanes written out. Every mode, clamp and segment
word, a predicate output, predicated and branching code between the shuffles, chains after a barrier, whole and
partial warps (the regions one by one), 2-D blocks and live ranges that are not whole warps, each against a numpy
model with fresh random inputs, and against the same kernel with the chains turned off and the general scheduler."""

import numpy as np
import pytest

import ptx
from ptx.codegen.cpu import regions, warp_chain
from test_instr_warp import shfl_ref  # the ISA's pseudocode

HEAD = ".version 8.0\n.target sm_86\n.address_size 64\n"
POISON = 0xDEADBEEF

# t = linear thread id, g = global index, %r11 = in[g]; the steps leave their result in %r11, each shuffle's
# predicate is or-ed into %r31 (bit i for step i); out[g] = %r11, out2[g] = %r31
TEMPLATE = """
.visible .entry k(.param .u64 pin, .param .u64 pout, .param .u64 pout2, .param .u32 plive)
{{
.reg .pred %p<16>;
.reg .b32 %r<64>;
.reg .b64 %rd<16>;
.shared .align 4 .b32 sm[1024];
ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout]; ld.param.u64 %rd3, [pout2];
ld.param.u32 %r22, [plive];
mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r3, %tid.z;
mov.u32 %r4, %ntid.x; mov.u32 %r5, %ntid.y; mov.u32 %r6, %ntid.z;
mad.lo.u32 %r40, %r3, %r5, %r2;
mad.lo.u32 %r7, %r40, %r4, %r1;
mul.lo.u32 %r41, %r4, %r5;
mul.lo.u32 %r8, %r41, %r6;
mov.u32 %r9, %ctaid.x;
mad.lo.u32 %r10, %r9, %r8, %r7;
mul.wide.u32 %rd4, %r10, 4;
add.s64 %rd5, %rd1, %rd4;
add.s64 %rd6, %rd2, %rd4;
add.s64 %rd7, %rd3, %rd4;
ld.global.u32 %r11, [%rd5];
mov.u32 %r31, 0;
{prologue}
{steps}
{epilogue}
st.global.u32 [%rd6], %r11;
st.global.u32 [%rd7], %r31;
ret;
}}
"""
# before the steps: nothing; threads t >= live exit (a live range); a barrier the steps start after (the value
# goes through shared memory, reversed within the block)
PROLOGUES = {
    "start": "",
    "prefix": "setp.ge.u32 %p15, %r7, %r22;\n@%p15 ret;",
    "barrier": ("shl.b32 %r42, %r7, 2;\nmov.u32 %r43, sm;\nadd.s32 %r44, %r43, %r42;\nst.shared.u32 [%r44], %r11;\n"
                "bar.sync 0;\nsub.s32 %r45, %r8, %r7;\nsub.s32 %r45, %r45, 1;\nshl.b32 %r46, %r45, 2;\n"
                "add.s32 %r47, %r43, %r46;\nld.shared.u32 %r11, [%r47];"),
}
# after them: nothing (the chain ends at the exit); a barrier, then each thread adds its neighbour's result (in
# the second half of the shared array: the first may still be read by the prologue's loads of other warps)
EPILOGUES = {
    "exit": "",
    "barrier": ("shl.b32 %r48, %r7, 2;\nmov.u32 %r55, sm;\nadd.s32 %r49, %r55, 2048;\nadd.s32 %r50, %r49, %r48;\nst.shared.u32 [%r50], %r11;\n"
                "bar.sync 0;\nadd.s32 %r51, %r7, 1;\nrem.u32 %r51, %r51, %r8;\nshl.b32 %r52, %r51, 2;\n"
                "add.s32 %r53, %r49, %r52;\nld.shared.u32 %r54, [%r53];\nadd.s32 %r11, %r11, %r54;"),
}
MODES = ["up", "down", "bfly", "idx"]


def step_text(i, mode, b, c, between):
    """One step: the shuffle of %r11 (b and c as immediates or through registers set once), then code using the
    result: `add` (plain), `pred` (a predicated instruction), `branch` (an if/else on the lane's value)."""
    bop, cop = (f"{b}", f"{c}") if i % 2 else (f"%r{56 + i}", f"{c}")
    pre = f"mov.u32 %r{56 + i}, {b};\n" if i % 2 == 0 else ""
    out = (f"{pre}shfl.sync.{mode}.b32 %r12|%p{i}, %r11, {bop}, {cop}, -1;\n"
           f"selp.u32 %r13, {1 << i}, 0, %p{i};\nor.b32 %r31, %r31, %r13;\n")
    if between == "add":
        out += "add.s32 %r11, %r11, %r12;\n"
    elif between == "pred":
        out += f"and.b32 %r14, %r12, 1;\nsetp.eq.u32 %p{8 + i}, %r14, 0;\n@%p{8 + i} add.s32 %r11, %r11, %r12;\n" \
               f"@!%p{8 + i} xor.b32 %r11, %r11, %r12;\n"
    else:
        out += (f"and.b32 %r14, %r12, 2;\nsetp.eq.u32 %p{8 + i}, %r14, 0;\n@%p{8 + i} bra $Lodd{i};\n"
                f"mul.lo.u32 %r11, %r11, 3;\nadd.s32 %r11, %r11, %r12;\nbra.uni $Ljoin{i};\n"
                f"$Lodd{i}:\nsub.s32 %r11, %r11, %r12;\n$Ljoin{i}:\n")
    return out


def source(steps, prologue, epilogue, between):
    body = "".join(step_text(i, m, b, c, between) for i, (m, b, c) in enumerate(steps))
    return HEAD + TEMPLATE.format(prologue=PROLOGUES[prologue], steps=body, epilogue=EPILOGUES[epilogue])


def shfl_lanes(mode, b, c, n_lanes):
    """Each lane's source lane and predicate (shfl for a warp of n_lanes live lanes), from the ISA's pseudocode
    (test_instr_warp's model, not the code under test)."""
    src, pred = shfl_ref(mode, np.arange(32, dtype=np.uint32), np.full(32, b), np.full(32, c))
    src = np.where(src < n_lanes, src, np.arange(32))
    return src.astype(np.int64), pred.astype(bool)


def model(x, n, live, steps, prologue, epilogue, between):
    """One block: the outputs of each thread (POISON for those that exited)."""
    v = x.astype(np.uint64)
    alive = np.arange(n) < (live if prologue == "prefix" else n)
    if prologue == "barrier":
        v = v[::-1].copy()
    preds = np.zeros(n, np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    for i, (mode, b, c) in enumerate(steps):
        got = v.copy()
        for w in range(0, n, 32):
            lanes = min(32, int(alive[w:w + 32].sum()))
            src, pred = shfl_lanes(mode, b, c, lanes)
            for lane in range(lanes):
                got[w + lane] = v[w + src[lane]]
                preds[w + lane] |= np.uint64(int(pred[lane]) << i)
        if between == "add":
            v = (v + got) & m32
        elif between == "pred":
            v = np.where(got & 1 == 0, (v + got) & m32, v ^ got)
        else:
            v = np.where(got & 2 == 0, (v - got) & m32, (v * 3 + got) & m32)
    if epilogue == "barrier":
        v = (v + np.roll(v, -1)) & m32
    out = np.where(alive, v, POISON).astype(np.uint32)
    out2 = np.where(alive, preds, POISON).astype(np.uint32)
    return out, out2


def compile_with(src, module, name, value):
    """`src` compiled with module.name = value (a comment keeps the kernel cache apart)."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        return ptx.compile(src + f"\n// {name} = {value}\n")
    finally:
        setattr(module, name, saved)


def compile_variants(src):
    """(chains, chains off, general scheduler) modules of one source."""
    m = ptx.compile(src)
    off = compile_with(src, warp_chain, "ENABLED", False)
    general = compile_with(src, regions, "MAX_REGIONS", 0)
    assert '@"wc' not in off.ir and '@"r0.k"' not in general.ir
    return m, off, general


def run_check(src, steps, prologue, epilogue, between, block, live=0, nb=3):
    m, off, general = compile_variants(src)
    assert '@"wc' in m.ir, "no warp chain"
    rng = np.random.default_rng()
    n = int(np.prod(block))
    x = rng.integers(0, 2**32, nb * n, dtype=np.uint64).astype(np.uint32)
    want = [model(x[i * n:(i + 1) * n], n, live, steps, prologue, epilogue, between) for i in range(nb)]
    want_out = np.concatenate([w[0] for w in want])
    want_out2 = np.concatenate([w[1] for w in want])
    for which, mod in (("chains", m), ("chains off", off), ("general scheduler", general)):
        out = np.full(nb * n, POISON, np.uint32)
        out2 = np.full(nb * n, POISON, np.uint32)
        mod.kernel("k").launch(nb, block, [x, out, out2, live])
        bad = np.nonzero((out != want_out) | (out2 != want_out2))[0]
        assert bad.size == 0, (f"{which}: {bad.size} of {out.size} wrong, first at {bad[0]}: got {out[bad[0]]:#x}/"
                               f"{out2[bad[0]]:#x}, want {want_out[bad[0]]:#x}/{want_out2[bad[0]]:#x} ({steps})")
    return m


def random_steps(rng, count, modes=MODES):
    out = []
    for _ in range(count):
        mode = str(rng.choice(modes))
        b = int(rng.integers(0, 32))
        # a clamp, sometimes with a segment mask (sub-warps)
        seg = int(rng.choice([0, 0, 0x10, 0x18, 0x1c]))
        c = (seg << 8) | (int(rng.integers(0, 32)) if mode != "up" else int(rng.integers(0, 8)))
        if seg == 0 and rng.random() < 0.5:
            c = 0 if mode == "up" else 0x1f
        out.append((mode, b, c))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("between", ["add", "pred", "branch"])
def test_modes_and_code_between(mode, between):
    rng = np.random.default_rng()
    steps = random_steps(rng, 4, [mode])
    run_check(source(steps, "start", "exit", between), steps, "start", "exit", between, (64, 1, 1))


def test_reduction_down_and_butterfly():
    for steps in ([("down", o, 0x1f) for o in (16, 8, 4, 2, 1)], [("bfly", o, 0x1f) for o in (1, 2, 4, 8, 16)]):
        run_check(source(steps, "start", "exit", "add"), steps, "start", "exit", "add", (128, 1, 1))


@pytest.mark.parametrize("prologue,epilogue", [("start", "barrier"), ("barrier", "exit"), ("barrier", "barrier")])
def test_barriers_around(prologue, epilogue):
    rng = np.random.default_rng()
    steps = random_steps(rng, 3)
    run_check(source(steps, prologue, epilogue, "add"), steps, prologue, epilogue, "add", (96, 1, 1))


@pytest.mark.parametrize("block", [(32, 1, 1), (256, 1, 1), (64, 2, 1), (32, 2, 2),
                                   (48, 1, 1), (16, 4, 1), (100, 1, 1), (8, 8, 2)])
def test_blocks(block):
    """Whole warps in rows of whole warps take the chain; the rest the regions one by one (same answers)."""
    rng = np.random.default_rng()
    steps = random_steps(rng, 3)
    run_check(source(steps, "start", "barrier", "add"), steps, "start", "barrier", "add", block)


@pytest.mark.parametrize("live", [64, 96, 40, 1, 0])
def test_live_ranges(live):
    """Threads t >= live exit first: a range of whole warps takes the chain, others the regions one by one."""
    rng = np.random.default_rng()
    steps = random_steps(rng, 3)
    run_check(source(steps, "prefix", "exit", "add"), steps, "prefix", "exit", "add", (128, 1, 1), live=live)


def test_chain_shapes():
    """What makes a chain: constant operands and a full mask, no loop; each left out, no chain (through it)."""
    from ptx import parse
    from ptx.codegen.cpu import module as cpu_module
    steps = [("down", 16, 0x1f), ("down", 8, 0x1f)]
    base = source(steps, "start", "exit", "add")
    assert '@"wc0.k"' in cpu_module.build_host_ir(parse(base)).text
    variants = {
        "register distance": base.replace("shfl.sync.down.b32 %r12|%p1, %r11, 8,", "shfl.sync.down.b32 %r12|%p1, %r11, %r22,"),
        "partial mask": base.replace("8, 31, -1;", "8, 31, 65535;"),
        "a loop": base.replace("ld.global.u32 %r11, [%rd5];", "ld.global.u32 %r11, [%rd5];\n$Lloop:\n"
                               "add.s32 %r11, %r11, 1;\nsetp.lt.u32 %p14, %r11, 5;\n@%p14 bra $Lloop;"),
    }
    for what, src in variants.items():
        assert src != base, what
        text = cpu_module.build_host_ir(parse(src)).text
        # (after the loop, the first shuffle starts a chain of its own)
        assert ('@"wc0.k"' if what == "a loop" else '@"wc') not in text, what
    assert '@"wc1.k"' in text


def test_bench_reduce_shfl_chain():
    """scripts/bench_kernels/reduce_shfl.ptx: its five shuffles before the barrier are one chain; the warp after the
    barrier (the others exited) runs over its 32 threads only."""
    from pathlib import Path
    src = (Path(__file__).resolve().parents[2] / "scripts/bench_kernels/reduce_shfl.ptx").read_text()
    m = ptx.compile(src)
    assert '@"wc0.reduce_shfl"' in m.ir
    rng = np.random.default_rng()
    nb = 33
    x = rng.standard_normal(nb * 256).astype(np.float32)
    out = np.full(nb, np.nan, np.float32)
    m.kernel("reduce_shfl").launch(nb, 256, [x, out])
    v = x.reshape(nb, 256).astype(np.float32)
    lane = np.arange(256) % 32
    for o in (16, 8, 4, 2, 1):
        v = v + v[:, np.where(lane + o <= 31, np.arange(256) + o, np.arange(256))]
    w = np.zeros((nb, 32), np.float32)
    w[:, :8] = v[:, ::32]
    for o in (4, 2, 1):
        w = w + w[:, np.where(np.arange(32) + o <= 31, np.arange(32) + o, np.arange(32))]
    assert np.array_equal(out.view(np.uint32), w[:, 0].view(np.uint32))
    assert m._fallback.entries is None


@pytest.mark.parametrize("block", [None, (256, 1, 1)])
@pytest.mark.parametrize("cpu", ["", "x86-64-v3"])
def test_a_chain_is_vectorized_over_lanes_not_warps(cpu, block):
    """The loop over a block's warps stays a loop: vectorized over warps (LLVM's choice for AVX-512 targets, and
    for AVX2 ones once the block is known: 8 warps), every read of a lane's slot became a gather or a strided
    load, and reduce_shfl took 3-6x as long."""
    import llvmlite.binding as llvm
    from pathlib import Path
    from ptx import host_target, parse
    from ptx.codegen.cpu import module as cpu_module
    from ptx.host_llc import _optimised
    src = (Path(__file__).resolve().parents[2] / "scripts/bench_kernels/reduce_shfl.ptx").read_text()
    tm = host_target.machine(cpu)[0]
    text = cpu_module.build_host_ir(parse(src), block=block).text
    assert "!llvm.loop !8980" in text
    chain = str(_optimised(llvm, tm, text, 3, True)).split('@wc0.reduce_shfl(')[1].split("\n}\n")[0]
    assert "gather" not in chain and "vector.body" not in chain
    assert " x float>" in chain       # the SLP vectorizer's, over a warp's lanes


COLLECTIVES = """
shfl.sync.bfly.b32 %r12, %r11, 16, 31, -1;
add.s32 %r11, %r11, %r12;
and.b32 %r13, %r11, 1;
setp.ne.u32 %p1, %r13, 0;
vote.sync.ballot.b32 %r14, %p1, -1;
bar.warp.sync -1;
redux.sync.{rop}.{rty} %r15, %r11, -1;
xor.b32 %r11, %r11, %r15;
and.b32 %r16, %r11, {bit};
setp.ne.u32 %p2, %r16, 0;
vote.sync.{vmode}.pred %p3, {neg}%p2, -1;
activemask.b32 %r17;
selp.u32 %r18, 1, 0, %p3;
xor.b32 %r19, %r14, %r17;
shl.b32 %r20, %r19, 1;
or.b32 %r31, %r20, %r18;
"""


def collectives_model(x, vmode, neg, rop, rty, bit):
    """One block (whole warps): the outputs of COLLECTIVES."""
    n = x.size
    v = x.astype(np.int64)
    out, out2 = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    for w in range(0, n, 32):
        a = v[w:w + 32]
        a = (a + a[np.arange(32) ^ 16]) & 0xFFFFFFFF
        ballot = int(sum(int(a[l] & 1) << l for l in range(32)))
        vals = a if rty in ("u32", "b32") else np.where(a >= 1 << 31, a - (1 << 32), a)
        r = {"add": lambda: int(vals.sum()), "min": lambda: int(vals.min()), "max": lambda: int(vals.max()),
             "and": lambda: int(np.bitwise_and.reduce(vals)), "or": lambda: int(np.bitwise_or.reduce(vals)),
             "xor": lambda: int(np.bitwise_xor.reduce(vals))}[rop]() & 0xFFFFFFFF
        a = a ^ r
        p = (a & bit) != 0
        if neg:
            p = ~p
        q = {"any": p.any(), "all": p.all(), "uni": p.all() or not p.any()}[vmode]
        out[w:w + 32] = a
        out2[w:w + 32] = (((ballot ^ 0xFFFFFFFF) << 1) | int(q)) & 0xFFFFFFFF
    return out, out2


@pytest.mark.parametrize("vmode,neg", [("any", ""), ("all", "!"), ("uni", ""), ("all", "")])
@pytest.mark.parametrize("rop,rty", [("add", "s32"), ("min", "s32"), ("max", "u32"), ("xor", "b32"),
                                     ("and", "b32"), ("or", "b32"), ("min", "u32"), ("max", "s32")])
def test_votes_reduxes_activemask(vmode, neg, rop, rty):
    """vote (ballot, any, all, uni; a negated predicate), redux.sync, activemask and a warp barrier inside a chain."""
    rng = np.random.default_rng()
    bit = 1 << int(rng.integers(0, 32))
    # a bit most lanes share, sometimes: all/uni then see both answers
    body = COLLECTIVES.format(rop=rop, rty=rty, vmode=vmode, neg=neg, bit=bit)
    src = HEAD + TEMPLATE.format(prologue="", steps=body, epilogue="")
    m, off, general = compile_variants(src)
    assert '@"wc0.k"' in m.ir, "no warp chain"
    block, nb = (128, 1, 1), 3
    n = 128
    x = rng.integers(0, 2**32, nb * n, dtype=np.uint64).astype(np.uint32)
    if rng.random() < 0.5:
        x[: n] &= np.uint32(~bit & 0xFFFFFFFF)      # a warp where the bit may be clear in every lane
    want = [collectives_model(x[i * n:(i + 1) * n], vmode, neg, rop, rty, bit) for i in range(nb)]
    want_out = np.concatenate([w[0] for w in want])
    want_out2 = np.concatenate([w[1] for w in want])
    for which, mod in (("chains", m), ("chains off", off), ("general scheduler", general)):
        out = np.full(nb * n, POISON, np.uint32)
        out2 = np.full(nb * n, POISON, np.uint32)
        mod.kernel("k").launch(nb, block, [x, out, out2, 0])
        bad = np.nonzero((out != want_out) | (out2 != want_out2))[0]
        assert bad.size == 0, (f"{which}: {bad.size} of {out.size} wrong, first at {bad[0]}: got {out[bad[0]]:#x}/"
                               f"{out2[bad[0]]:#x}, want {want_out[bad[0]]:#x}/{want_out2[bad[0]]:#x}")


# __syncwarp between a warp's lanes exchanging values through shared memory: every warp (no exit), warp 0 only (the
# others exit after the block barrier), or each half-warp with its own mask (a register: no chain, the regions); each
# lane ends with the sum of its warp's (half-warp's) values, by a butterfly
WARPSYNC_STEP = """shl.b32 %r42, %r7, 2;
mov.u32 %r43, sm;
add.s32 %r44, %r43, %r42;
st.shared.u32 [%r44], %r11;
bar.warp.sync {mask};
xor.b32 %r45, %r7, {o};
shl.b32 %r46, %r45, 2;
add.s32 %r47, %r43, %r46;
ld.shared.u32 %r48, [%r47];
add.s32 %r11, %r11, %r48;
bar.warp.sync {mask};
"""
WARPSYNC_KINDS = {
    "all warps": ("bar.sync 0;", [16, 8, 4, 2, 1], "-1"),
    "warp 0": ("bar.sync 0;\nsetp.ge.u32 %p15, %r7, 32;\n@%p15 ret;", [16, 8, 4, 2, 1], "-1"),
    "half masks": ("and.b32 %r49, %r7, 16;\nsetp.eq.u32 %p14, %r49, 0;\nselp.b32 %r50, 65535, -65536, %p14;",
                   [8, 4, 2, 1], "%r50"),
}


@pytest.mark.parametrize("kind", list(WARPSYNC_KINDS))
@pytest.mark.parametrize("block", [(64, 1, 1), (256, 1, 1), (32, 2, 1), (48, 1, 1)])
def test_syncwarp(kind, block):
    from ptx.codegen.cpu import module as cpu_module
    pre, offsets, mask = WARPSYNC_KINDS[kind]
    steps = "".join(WARPSYNC_STEP.format(mask=mask, o=o) for o in offsets)
    src = HEAD + TEMPLATE.format(prologue=pre, steps=steps, epilogue="")
    m, off, general = compile_variants(src)
    assert cpu_module.build_host_ir(ptx.parse(src)).kernels["k"].warp_regions, "bar.warp.sync: not region loops"
    assert '@"wc' not in m.ir, "a chain of warp barriers alone"
    rng = np.random.default_rng()
    n, nb = int(np.prod(block)), 3
    if n % 32 and kind != "warp 0":
        pytest.skip("a partial warp's lanes would read shared words no lane wrote")
    x = rng.integers(0, 2**32, nb * n, dtype=np.uint64).astype(np.uint32)
    want = np.full(nb * n, POISON, np.uint32)
    group = 16 if kind == "half masks" else 32
    for blk in range(nb):
        for g0 in range(0, n, group):
            if kind == "warp 0" and g0 >= 32:
                break
            ids = np.arange(blk * n + g0, blk * n + min(g0 + group, n))
            want[ids] = np.uint32(int(x[ids].astype(np.uint64).sum()) & 0xFFFFFFFF)
    for which, mod in (("chains", m), ("chains off", off), ("general scheduler", general)):
        out = np.full(nb * n, POISON, np.uint32)
        out2 = np.full(nb * n, POISON, np.uint32)
        mod.kernel("k").launch(nb, block, [x, out, out2, 0])
        bad = np.nonzero(out != want)[0]
        assert bad.size == 0, f"{which}: {bad.size} of {out.size} wrong, first at {bad[0]}: got {out[bad[0]]:#x}, " \
                              f"want {want[bad[0]]:#x}"
    # (half masks: both halves wait at the same instruction, so the regions run every thread to it: a stronger wait
    # than each half's, and as good)
    assert m._fallback.entries is None


def test_syncwarp_divergent_halves_fall_back():
    """Each half-warp waits at a bar.warp.sync of its own (two sites): the regions disagree, and the general
    scheduler finishes the block from the warp barriers it took over."""
    half = lambda mask: "".join(WARPSYNC_STEP.format(mask=mask, o=o) for o in (8, 4, 2, 1))
    steps = ("and.b32 %r49, %r7, 16;\nsetp.eq.u32 %p14, %r49, 0;\n@%p14 bra $LA;\n" + half("-65536") +
             "bra.uni $LEND;\n$LA:\n" + half("65535") + "$LEND:\n")
    src = HEAD + TEMPLATE.format(prologue="", steps=steps, epilogue="")
    m, off, general = compile_variants(src)
    rng = np.random.default_rng()
    n, nb = 128, 3
    x = rng.integers(0, 2**32, nb * n, dtype=np.uint64).astype(np.uint32)
    want = np.repeat(x.astype(np.uint64).reshape(-1, 16).sum(axis=1) & 0xFFFFFFFF, 16).astype(np.uint32)
    for which, mod in (("regions", m), ("general scheduler", general)):
        out = np.full(nb * n, POISON, np.uint32)
        out2 = np.full(nb * n, POISON, np.uint32)
        mod.kernel("k").launch(nb, (n, 1, 1), [x, out, out2, 0])
        bad = np.nonzero(out != want)[0]
        assert bad.size == 0, f"{which}: {bad.size} of {out.size} wrong, first at {bad[0]}"
    assert m._fallback.entries is not None, "the regions should have fallen back"


def test_softmax_more_sites_than_regions():
    """nvcc's row softmax (tests/data/softmax_rows.ptx): 23 shuffles and barriers, past the 16 regions a kernel may
    have, runs as region loops because its chains hold most of them (the last ends at a shuffle followed by a loop);
    the regions inside the chains, compiled without optimisation, give the same answers where a block takes them."""
    from pathlib import Path
    src = (Path(__file__).resolve().parents[1] / "data" / "softmax_rows.ptx").read_text()
    assert src.count("shfl.sync") + src.count("bar.sync") > regions.MAX_REGIONS
    m = ptx.compile(src)
    assert '@"r0.softmax_rows"' in m.ir and m.ir.count('define internal i32 @"wc') == 4
    general = compile_with(src, regions, "MAX_REGIONS", 0)
    plain = compile_with(src, warp_chain, "PLAIN_ONLY", True)
    assert "optnone" in plain.ir
    rng = np.random.default_rng()
    for rows, n, block in ((5, 1000, 256), (3, 77, 64), (4, 4096, 128)):
        x = (rng.standard_normal(rows * n) * 4).astype(np.float32)
        e = np.exp(x.reshape(rows, n).astype(np.float64) - x.reshape(rows, n).max(axis=1, keepdims=True))
        want = (e / e.sum(axis=1, keepdims=True)).ravel()
        outs = {}
        for which, mod in (("chains", m), ("general scheduler", general), ("regions one by one", plain)):
            y = np.full(rows * n, np.nan, np.float32)
            mod.kernel("softmax_rows").launch(rows, block, [x, y, np.int32(n)])
            assert np.allclose(y, want, rtol=2e-5, atol=1e-7), f"{which}: {np.max(np.abs(y - want))}"
            outs[which] = y
        assert np.array_equal(outs["chains"].view(np.uint32), outs["general scheduler"].view(np.uint32))
        assert np.array_equal(outs["regions one by one"].view(np.uint32), outs["chains"].view(np.uint32))
    assert m._fallback.entries is None
