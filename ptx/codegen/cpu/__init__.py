"""The CPU target's kernel code generation, one concern per module (cpu/module.py assembles them)."""
