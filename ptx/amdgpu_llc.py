"""Child process of the amdgcn compiler: LLVM IR on stdin -> optimised relocatable object on stdout.

Runs apart from the application because LLVM aborts the whole process on what the AMDGPU backend
cannot select (an unsupported intrinsic); the parent sees a failed child, not a dead process.
Usage: python amdgpu_llc.py CPU FEATURES OPT_LEVEL < module.ll > module.o"""

import sys


def main():
    cpu, features, opt = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    ir = sys.stdin.buffer.read().decode()
    tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(
        cpu=cpu, features=features, opt=opt, reloc="pic")
    try:
        mod = llvm.parse_assembly(ir)
        mod.verify()
    except RuntimeError as e:
        sys.stderr.write("invalid LLVM IR: " + " | ".join(str(e).splitlines()[1:3]) + "\n")
        return 3
    pto = llvm.create_pipeline_tuning_options(speed_level=opt)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    obj = tm.emit_object(mod)
    sys.stdout.buffer.write(obj)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
