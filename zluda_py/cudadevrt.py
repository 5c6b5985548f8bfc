"""PTX stand-ins for the cudadevrt functions that kernels call for a grid-wide barrier (cooperative groups'
grid.sync as numba emits it). NVIDIA's libcudadevrt.a holds only SASS; linking it gives this PTX instead.

The barrier is the one nvcc inlines for grid.sync() (CUDA 11+): thread 0 of each block adds to the arrival
word at grid workspace + 4 (block 0 adds 0x80000000 - (blocks - 1), so the top bit flips when the last block
arrives) and spins on it; the CPU runtime hands cooperative launches the workspace in %envreg1 (high) : %envreg2 (low)."""

import re

CUDADEVRT_PTX = r"""
.version 7.0
.target sm_52
.address_size 64

.visible .func (.param .b64 handle) cudaCGGetIntrinsicHandle(.param .b32 scope)
{
    st.param.b64 [handle], 1;
    ret;
}

.visible .func (.param .b32 status) cudaCGSynchronize(.param .b64 handle, .param .b32 flags)
{
    .reg .pred %leader, %first, %waiting, %nows;
    .reg .b32 %t, %b, %n, %add, %old, %cur, %x;
    .reg .b32 %lo, %hi;
    .reg .b64 %ws;
    // The workspace is read here rather than through the handle: this function has a barrier, so the
    // code generator inlines it into the kernel, where the launch's environment registers are at hand.
    mov.u32 %hi, %envreg1;
    mov.u32 %lo, %envreg2;
    mov.b64 %ws, {%lo, %hi};
    // Outside a cooperative launch there is no workspace (and no grid barrier): a launch failure, not
    // a wild store.
    setp.eq.u64 %nows, %ws, 0;
    @%nows trap;
    bar.sync 0;
    mov.u32 %t, %tid.x;
    mov.u32 %x, %tid.y;
    or.b32 %t, %t, %x;
    mov.u32 %x, %tid.z;
    or.b32 %t, %t, %x;
    setp.eq.u32 %leader, %t, 0;
    @!%leader bra DONE;
    mov.u32 %b, %ctaid.x;
    mov.u32 %x, %ctaid.y;
    or.b32 %b, %b, %x;
    mov.u32 %x, %ctaid.z;
    or.b32 %b, %b, %x;
    setp.eq.u32 %first, %b, 0;
    mov.u32 %n, %nctaid.x;
    mov.u32 %x, %nctaid.y;
    mul.lo.u32 %n, %n, %x;
    mov.u32 %x, %nctaid.z;
    mul.lo.u32 %n, %n, %x;
    sub.u32 %add, 0x80000001, %n;
    selp.u32 %add, %add, 1, %first;
    atom.add.release.gpu.global.u32 %old, [%ws+4], %add;
SPIN:
    ld.acquire.gpu.global.u32 %cur, [%ws+4];
    xor.b32 %x, %old, %cur;
    and.b32 %x, %x, 0x80000000;
    setp.eq.u32 %waiting, %x, 0;
    @%waiting bra SPIN;
DONE:
    bar.sync 0;
    st.param.b32 [status], 0;
    ret;
}
"""


def is_cudadevrt(name: str) -> bool:
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return base.startswith("libcudadevrt") or base.startswith("cudadevrt")


# NVIDIA's own device runtime as PTX (libcudadevrt.a carries it for the newest architecture, sm_121 in
# CUDA 13.0): it defines the __cudaCDP2* entry points over the driver's private cnp* calls. The shim
# implements those entry points itself (ptx/codegen/ops_cdp.py), so this PTX is never linked in.
_DEVRT_DEFINITION = re.compile(r"^\.visible \.func\b[^\n]*\b__cudaCDP2\w+\(", re.M)


def is_nvidia_device_runtime(ptx_text: str) -> bool:
    return _DEVRT_DEFINITION.search(ptx_text) is not None

