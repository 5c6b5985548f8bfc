"""Calls to the CUDA device runtime (programs built with -rdc -lcudadevrt): device-side launches (CDP2 and
the older names), device streams, device cudaMemcpyAsync/cudaMemsetAsync, the device's last error and
cudaGraphSetConditional. libcudadevrt.a holds SASS only, so these stay `.extern` in the linked PTX; each is
lowered to a call of the CPU runtime (ptx/runtime/devlaunch.c, whose header says what the calls mean)."""

from __future__ import annotations

from ptx.codegen.function_emitter import FunctionEmitter, unsupported

W = "W"                 # the worker pointer, first argument of most runtime calls
# name -> (runtime function, its return type, its arguments). An argument is ("W",), a parameter of the
# PTX function ("p", index, LLVM type: i64/i32, or "dim3" passed by address), or a constant ("c", type, text).
_LAUNCH = ("ptx_rt_cdp_launch", "i32", [(W,), ("p", 0, "i64"), ("p", 1, "i64"), ("p", 2, "dim3"),
                                        ("p", 3, "dim3"), ("p", 4, "i32"), ("p", 5, "i64")])
_LAUNCH_V2 = ("ptx_rt_cdp_launch_v2", "i32", [(W,), ("p", 0, "i64"), ("p", 1, "i64")])
_BUFFER = ("ptx_rt_cdp_param_buffer", "ptr", [(W,), ("p", 0, "i64"), ("p", 1, "i64")])
_BUFFER_V2 = ("ptx_rt_cdp_param_buffer_v2", "ptr", [(W,), ("p", 0, "i64"), ("p", 1, "dim3"), ("p", 2, "dim3"),
                                                    ("p", 3, "i32")])
_MEMCPY = ("ptx_rt_cdp_memcpy", "i32", [(W,), ("p", 0, "i64"), ("p", 1, "i64"), ("p", 2, "i64"), ("p", 3, "i32"),
                                        ("p", 4, "i64")])
_MEMSET = ("ptx_rt_cdp_memset", "i32", [(W,), ("p", 0, "i64"), ("p", 1, "i32"), ("p", 2, "i64"), ("p", 3, "i64")])

CALLS = {
    "__cudaCDP2GetParameterBuffer": _BUFFER,
    "cudaGetParameterBuffer": _BUFFER,
    "__cudaCDP2GetParameterBufferV2": _BUFFER_V2,
    "cudaGetParameterBufferV2": _BUFFER_V2,
    "__cudaCDP2LaunchDevice": _LAUNCH,
    "__cudaCDP2LaunchDevice_ptsz": _LAUNCH,
    "cudaLaunchDevice": _LAUNCH,
    "cudaLaunchDevice_ptsz": _LAUNCH,
    "__cudaCDP2LaunchDeviceV2": _LAUNCH_V2,
    "__cudaCDP2LaunchDeviceV2_ptsz": _LAUNCH_V2,
    "cudaLaunchDeviceV2": _LAUNCH_V2,
    "cudaLaunchDeviceV2_ptsz": _LAUNCH_V2,
    "__cudaCDP2StreamCreateWithFlags": ("ptx_rt_cdp_stream_create", "i32", [(W,), ("p", 0, "i64"), ("p", 1, "i32")]),
    "__cudaCDP2StreamDestroy": ("ptx_rt_cdp_stream_destroy", "i32", [(W,), ("p", 0, "i64")]),
    "__cudaCDP2MemcpyAsync": _MEMCPY,
    "__cudaCDP2MemcpyAsync_ptsz": _MEMCPY,
    "__cudaCDP2MemsetAsync": _MEMSET,
    "__cudaCDP2MemsetAsync_ptsz": _MEMSET,
    "__cudaCDP2GetLastError": ("ptx_rt_cdp_last_error", "i32", [(W,), ("c", "i32", "1")]),
    "__cudaCDP2PeekAtLastError": ("ptx_rt_cdp_last_error", "i32", [(W,), ("c", "i32", "0")]),
    "__cudaCDP2GetErrorString": ("ptx_rt_cdp_error_text", "ptr", [("p", 0, "i32"), ("c", "i32", "0")]),
    "__cudaCDP2GetErrorName": ("ptx_rt_cdp_error_text", "ptr", [("p", 0, "i32"), ("c", "i32", "1")]),
    "cudaGraphSetConditional": ("ptx_rt_graph_set_conditional", "void", [("p", 0, "i64"), ("p", 1, "i32")]),
}
# pointer arguments: generic addresses the runtime writes through
_POINTER_ARGS = {("ptx_rt_cdp_stream_create", 0)}


def lower_call(em, ins, name, callee, rets, args) -> bool:
    """Lower a call of the device runtime's `name`; False when it is none of the functions above."""
    spec = CALLS.get(name)
    if spec is None:
        return False
    if type(em) is not FunctionEmitter:
        unsupported(ins, f"call to {name} (the device runtime runs on the CPU backend only)")
    from ptx.codegen.ops_ctrl import _arg_ptr, _set_ret
    fn, retty, shape = spec
    formals = callee.params
    f = em.f
    needed = max([a[1] for a in shape if a[0] == "p"] + [-1]) + 1
    if len(formals) < needed or len(args) < needed:
        unsupported(ins, f"call to {name} with {len(args)} arguments (the device runtime's takes {needed})")
    ptrs = {}
    call_args = []
    for a in shape:
        if a[0] == W:
            call_args.append(("ptr", em.W))
        elif a[0] == "c":
            call_args.append((a[1], a[2]))
        else:
            k, ty = a[1], a[2]
            p = ptrs.get(k) or ptrs.setdefault(k, _arg_ptr(em, args[k], formals[k]))
            if ty == "dim3":
                call_args.append(("ptr", p))
            elif (fn, k) in _POINTER_ARGS:
                call_args.append(("ptr", f.op(f"inttoptr i64 {f.op(f'load i64, ptr {p}')} to ptr")))
            else:
                call_args.append((ty, f.op(f"load {ty}, ptr {p}")))
    r = em.call(fn, retty, call_args)
    if retty != "void" and rets and callee.returns:
        rtype = callee.returns[0].type.name
        if retty == "ptr":
            r = f.op(f"ptrtoint ptr {r} to i64")
        elif rtype in ("b64", "u64", "s64"):
            r = f.op(f"sext i32 {r} to i64")
        _set_ret(em, rets[0], r, rtype)
    return True
