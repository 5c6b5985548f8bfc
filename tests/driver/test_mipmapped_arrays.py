"""Mipmapped arrays through the real libcuda.so.1 (tests/driver/mipmap_host.c, a C program linked -lcuda):
levels made, described and copied, a surface on a level, and PTX sampling of the chain (tex.level, tex.grad,
tex, txq.level, txq.num_mipmap_levels) checked texel for texel against the host's copy."""

import random
import subprocess

from chost import C_HOST, build_c_host, user_env

pytestmark = C_HOST


def test_mipmapped_array_end_to_end(shim_libdir, tmp_path):
    exe = build_c_host(shim_libdir, "mipmap_host.c", tmp_path / "mipmap_host", libs=["-lm"])
    seed = random.randint(1, 10 ** 6)
    r = subprocess.run([exe, str(seed)], capture_output=True, text=True, timeout=600, env=user_env(ZLUDA_LOG="1"))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok 0"), f"seed {seed}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr, r.stderr
