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
import json, numpy as np, sva_linearizer as sl, sva_linearizer._jit as j
from sva_linearizer.robots import load_robot
m = load_robot("quadruped")
rng = np.random.default_rng(5)
q = np.r_[rng.normal(size=3), [0.1, -0.2, 0.3, 0.9] / np.linalg.norm([0.1, -0.2, 0.3, 0.9]), rng.uniform(-1, 1, 12)]
lin = sl.linearize(m, sl.State.from_vectors(m, q, rng.normal(size=18)), rng.normal(size=12))
print(json.dumps({"jit": j.HAVE_NUMBA, "A": lin.A.tolist(), "B": lin.B.tolist()}))
"""


def test_pure_python_path_gives_the_same_numbers():
    results = {}
    for flag in ("0", "1"):
        env = dict(os.environ, SVA_LINEARIZER_NO_JIT=flag)
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                             timeout=600, check=True)
        results[flag] = json.loads(out.stdout.strip().splitlines()[-1])
    assert results["1"]["jit"] is False
    np.testing.assert_allclose(results["0"]["A"], results["1"]["A"], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(results["0"]["B"], results["1"]["B"], rtol=1e-12, atol=1e-12)
