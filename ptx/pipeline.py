"""Steps every target shares: PTX text to LLVM IR under the compiler's one error type, and IR dumps."""

import hashlib
from pathlib import Path

from ptx.errors import PTXError


def lower(text: str, build_ir):
    """Parse `text` and run the target's IR builder on it; a code-generator bug still surfaces as PTXError
    (with the position being compiled), so callers only ever see the compiler's own error type."""
    from ptx import parse
    return lower_module(parse(text), build_ir)


def lower_module(module, build_ir):
    """lower() for a module already parsed (and checked)."""
    try:
        return build_ir(module)
    except PTXError:
        raise
    except Exception as e:  # noqa: BLE001
        from ptx.codegen.function_emitter import current_position
        line, col = current_position()
        raise PTXError(f"internal compiler error ({type(e).__name__}: {e})", line, col) from e


def dump(dump_dir, text: str, ir_text: str, ir_suffix: str = "ll") -> None:
    """Write the PTX and its generated IR side by side, named by the PTX's hash."""
    d = Path(dump_dir)
    d.mkdir(parents=True, exist_ok=True)
    stem = hashlib.sha256(text.encode()).hexdigest()[:16]
    (d / f"{stem}.ptx").write_text(text)
    (d / f"{stem}.{ir_suffix}").write_text(ir_text)
