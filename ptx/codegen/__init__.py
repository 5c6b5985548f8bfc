"""Code generators: PTX syntax trees to LLVM IR text (host CPU target)."""
