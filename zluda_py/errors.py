"""CUresult codes (from the declarations file) and CudaError, the one exception the driver raises."""

from zluda_py.decls import ENUMS, DATA

CURESULT = dict(ENUMS["CUresult"])
NAME_OF = {v: k for k, v in CURESULT.items()}
STRING_OF = DATA.get("error_strings", {})

globals().update(CURESULT)


class CudaError(Exception):
    """A driver call's failure: `code` is the CUresult returned to the caller, `message` the log line."""

    def __init__(self, code: int, message: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self):
        return f"{NAME_OF.get(self.code, self.code)}: {self.message}"
