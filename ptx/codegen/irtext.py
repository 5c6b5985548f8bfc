"""A tiny LLVM IR text writer: fresh SSA names, instruction lines, basic-block bookkeeping."""


class IRFunction:
    """Accumulates the body of one LLVM function as text lines."""

    def __init__(self, prefix: str = "t"):
        self.lines = []
        self.entry_allocas = []     # hoisted into the entry block so mem2reg/SROA see them
        self._n = 0
        self._labels = 0
        self.prefix = prefix
        self.terminated = False

    def tmp(self) -> str:
        self._n += 1
        return f"%{self.prefix}{self._n}"

    def new_label(self, hint: str = "bb") -> str:
        self._labels += 1
        return f"{hint}.{self._labels}"

    def emit(self, text: str) -> None:
        if self.terminated:
            # code after a terminator without a label is unreachable but must live in a block
            self.lines.append(f"{self.new_label('dead')}:")
            self.terminated = False
        self.lines.append("  " + text)

    def op(self, text: str) -> str:
        """Emit `%tN = text` and return %tN."""
        name = self.tmp()
        self.emit(f"{name} = {text}")
        return name

    def term(self, text: str) -> None:
        self.emit(text)
        self.terminated = True

    def label(self, name: str) -> None:
        if not self.terminated:
            self.lines.append(f"  br label %{name}")
        self.lines.append(f"{name}:")
        self.terminated = False

    def alloca(self, ty: str, align: int = 0, count: int = 0) -> str:
        name = self.tmp()
        n = f", i64 {count}" if count else ""
        a = f", align {align}" if align else ""
        self.entry_allocas.append(f"  {name} = alloca {ty}{n}{a}")
        return name
