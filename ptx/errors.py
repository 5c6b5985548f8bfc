"""The compiler's exceptions: one base type, so callers (and the fuzz test) can catch exactly ours."""


class PTXError(Exception):
    """Any failure to accept a PTX module. `line`/`col` locate it in the source when known."""

    def __init__(self, message: str, line: int = 0, col: int = 0):
        self.message = message
        self.line = line
        self.col = col
        loc = f"{line}:{col}: " if line else ""
        super().__init__(f"{loc}{message}")

    def ptxas_severity(self):
        return "error"

    def ptxas_log(self) -> str:
        """The error as the JIT's error log words it: ptxas's line, then its closing line."""
        where = f"ptxas application ptx input, line {self.line}; " if self.line else "ptxas "
        text = f"{where}{self.ptxas_severity():<8}: {self.message}"
        if self.ptxas_severity() == "fatal":
            return text
        return text + "\nptxas fatal   : Ptx assembly aborted due to errors"


class PTXSyntaxError(PTXError):
    """Lexing/parsing failure."""


class PTXSemanticError(PTXError):
    """Well-formed but wrong: undefined register or label, type mismatch, bad operand."""


class PTXVersionError(PTXSemanticError):
    """A .version that does not exist or is newer than the ISA this compiler takes (CUDA's 222, not 218)."""

    def ptxas_severity(self):
        return "fatal"


class PTXUnsupportedError(PTXError):
    """Valid PTX this compiler does not implement yet (names the instruction)."""


class KernelFault(Exception):
    """A kernel stopped abnormally at run time: `kind` is 'trap', 'assert', 'fault' or 'misaligned'."""

    def __init__(self, kind: str, message: str = ""):
        self.kind = kind
        super().__init__(f"{kind}: {message}" if message else kind)
