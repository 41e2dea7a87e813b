# SPDX-License-Identifier: BSD-3-Clause
"""The command line, and the pure-Python path (no numba) computing the same numbers."""
import json
import os
import subprocess
import sys

import numpy as np

from sva_linearizer.cli import main as cli_main


def test_cli_linearize_bundled_default(tmp_path, capsys):
    out = tmp_path / "ab.npz"
    assert cli_main(["linearize", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "nj=12, nv=18" in text and "A          36 x 36" in text
    data = np.load(out)
    assert data["A"].shape == (36, 36) and data["B"].shape == (36, 12)
    assert np.all(np.isfinite(data["A"]))


def test_cli_robot_fixed_base_with_state(tmp_path, capsys):
    out = tmp_path / "ur5.npz"
    s = " ".join(["0.3"] * 6)
    assert cli_main(["linearize", "--robot", "ur5", "--fixed-base", "--q", s, "--v", s, "--tau", s,
                     "--out", str(out)]) == 0
    data = np.load(out)
    assert data["A"].shape == (12, 12) and data["B"].shape == (12, 6)


SCRIPT = """
import json, numpy as np, sva_linearizer as sl, sva_linearizer._jit as j, sva_linearizer._cache as c
from sva_linearizer.robots import load_robot
m = load_robot("quadruped")
rng = np.random.default_rng(5)
q = np.r_[rng.normal(size=3), [0.1, -0.2, 0.3, 0.9] / np.linalg.norm([0.1, -0.2, 0.3, 0.9]), rng.uniform(-1, 1, 12)]
lin = sl.linearize(m, sl.State.from_vectors(m, q, rng.normal(size=18)), rng.normal(size=12))
print(json.dumps({"jit": j.HAVE_NUMBA, "core": j.group_state("core"),
                  "machine_code": sum(len(d.signatures) for d in c.DISPATCHERS),
                  "A": lin.A.tolist(), "B": lin.B.tolist()}))
"""


def test_pure_python_path_gives_the_same_numbers():
    results = {}
    for flag in ("0", "1"):
        env = dict(os.environ, SVA_LINEARIZER_NO_JIT=flag, SVA_LINEARIZER_COMPILE="wait")
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                             timeout=1800, check=True)
        results[flag] = json.loads(out.stdout.strip().splitlines()[-1])
    assert results["1"]["jit"] is False and results["1"]["machine_code"] == 0
    # the compiled run ran numba's machine code: the core group compiled and kernels with signatures
    assert results["0"]["jit"] is True and results["0"]["core"] == "ready", results["0"]["core"]
    assert results["0"]["machine_code"] > 0
    np.testing.assert_allclose(results["0"]["A"], results["1"]["A"], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(results["0"]["B"], results["1"]["B"], rtol=1e-12, atol=1e-12)


def test_plain_forms_with_numba_are_the_pure_python_path():
    """With numba installed, a kernel group that is not compiled yet runs the kernels' plain forms
    (_plain.py: the same functions, every kernel and intrinsic they call in plain form): bit for
    bit the numbers of the package run without numba, and nothing is compiled for them."""
    results = {}
    for env in ({"SVA_LINEARIZER_NO_JIT": "1"}, {"SVA_LINEARIZER_COMPILE": "never"}):
        out = subprocess.run([sys.executable, "-c", SCRIPT + PLAIN_CHECK], capture_output=True, text=True,
                             timeout=600, check=True, env=dict(os.environ, **env))
        results[tuple(env)] = json.loads(out.stdout.strip().splitlines()[-2])
        if "SVA_LINEARIZER_COMPILE" in env:
            assert out.stdout.strip().splitlines()[-1] == "compiled: 0", out.stdout
    plain, nojit = results[("SVA_LINEARIZER_COMPILE",)], results[("SVA_LINEARIZER_NO_JIT",)]
    assert plain["jit"] is True and nojit["jit"] is False
    assert plain["A"] == nojit["A"] and plain["B"] == nojit["B"]


PLAIN_CHECK = """
from sva_linearizer import _cache
print("compiled:", sum(len(d.signatures) for d in _cache.DISPATCHERS))
"""
