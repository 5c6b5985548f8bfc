"""Child process of the amdgcn compiler: LLVM IR -> optimised relocatable object.

Runs apart from the application because LLVM aborts the whole process on what the AMDGPU backend
cannot select (an unsupported intrinsic); the parent sees a dead child, not a dead process.
  python amdgpu_llc.py CPU FEATURES OPT_LEVEL < module.ll > module.o      (one module)
  python amdgpu_llc.py --serve   requests "CPU FEATURES|- OPT LEN [BITCODE]\\n" + IR on stdin (BITCODE: a
                                 runtime to link in first); answers
                                 "OK LEN\\n" + object or "ERR LEN\\n" + message on stdout"""

import sys

_llvm = None


def _link_bitcode(llvm, mod, path):
    """Link a runtime's bitcode (amdgpu_texture.py) into `mod`, its functions internal: each module keeps
    its own copy, which LLVM may inline."""
    with open(path, "rb") as fh:
        lib = llvm.parse_bitcode(fh.read())
    lib.triple, lib.data_layout = mod.triple, mod.data_layout
    names = [f.name for f in lib.functions if not f.is_declaration]
    mod.link_in(lib)
    for name in names:
        mod.get_function(name).linkage = "internal"


def _compile(ir: str, cpu: str, features: str, opt: int, link=None) -> bytes:
    global _llvm
    import llvmlite.binding as llvm
    if _llvm is None:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _llvm = llvm
    tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(
        cpu=cpu, features=features, opt=opt, reloc="pic")
    try:
        mod = llvm.parse_assembly(ir)
        if link:
            _link_bitcode(llvm, mod, link)
        mod.verify()
    except RuntimeError as e:
        raise ValueError("invalid LLVM IR: " + " | ".join(str(e).splitlines()[1:3])) from None
    pto = llvm.create_pipeline_tuning_options(speed_level=opt)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_object(mod)


def serve():
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = inp.readline()
        if not header:
            return 0
        cpu, features, opt, n, *link = header.decode().rstrip("\n").split(" ", 4)   # a path may hold spaces
        ir = inp.read(int(n)).decode()
        try:
            obj = _compile(ir, cpu, "" if features == "-" else features, int(opt), link[0] if link else None)
            out.write(b"OK %d\n" % len(obj) + obj)
        except ValueError as e:
            msg = str(e).encode()
            out.write(b"ERR %d\n" % len(msg) + msg)
        out.flush()


def main():
    if sys.argv[1:2] == ["--serve"]:
        return serve()
    cpu, features, opt = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        obj = _compile(sys.stdin.buffer.read().decode(), cpu, features, opt)
    except ValueError as e:
        sys.stderr.write(f"{e}\n")
        return 3
    sys.stdout.buffer.write(obj)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
