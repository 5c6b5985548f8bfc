"""The committed CUDA declarations (functions, proc-address versions, enums), loaded once from cuda_decls.json."""

import json
import os

_PATH = os.path.join(os.path.dirname(__file__), "cuda_decls.json")

with open(_PATH) as _f:
    DATA = json.load(_f)

FUNCTIONS = DATA.get("functions", [])
ENUMS = DATA.get("enums", {})
