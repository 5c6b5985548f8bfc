"""The CPU target's kernel code generation, one concern per module (ptx.codegen.host_module assembles them)."""
