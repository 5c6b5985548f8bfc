"""The compiler's exceptions: one base type, so callers (and the fuzz test) can catch exactly ours."""


class PTXError(Exception):
    """Any failure to accept a PTX module. `line`/`col` locate it in the source when known."""

    def __init__(self, message: str, line: int = 0, col: int = 0):
        self.message = message
        self.line = line
        self.col = col
        loc = f"{line}:{col}: " if line else ""
        super().__init__(f"{loc}{message}")


class PTXSyntaxError(PTXError):
    """Lexing/parsing failure."""


class PTXSemanticError(PTXError):
    """Well-formed but wrong: undefined register or label, type mismatch, bad operand."""


class PTXUnsupportedError(PTXError):
    """Valid PTX this compiler does not implement yet (names the instruction)."""


class KernelFault(Exception):
    """A kernel stopped abnormally at run time: `kind` is 'trap', 'assert' or 'fault'."""

    def __init__(self, kind: str, message: str = ""):
        self.kind = kind
        super().__init__(f"{kind}: {message}" if message else kind)
