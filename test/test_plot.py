# SPDX-License-Identifier: BSD-3-Clause
"""`sva-linearizer plot`: the figure file is written and valid, labelled with the blocks of z and the
joint names, and says what A is (its nonzero count and unstable eigenvalues, checked against
linearize here); a clear error without matplotlib or with an unknown format."""
import re
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import sva_linearizer as sl
from sva_linearizer.cli import main as cli_main, w_names, z_names
from sva_linearizer.robots import load_robot

QUAT = np.array([0.1, 0.2, -0.1, 0.9]) / np.linalg.norm([0.1, 0.2, -0.1, 0.9])
Q = ",".join(repr(float(x)) for x in np.r_[0.1, -0.2, 0.4, QUAT, np.tile([0.1, 0.7, -1.2], 4)])
V = "0.3,-0.1,0.2,0.5,-0.4,0.3," + ",".join(["0.5"] * 12)


def _state(model):
    q = np.array([float(x) for x in Q.split(",")])
    return sl.State.from_vectors(model, q, np.array([float(x) for x in V.split(",")]))


def _svg_text(path):
    root = ET.parse(path).getroot()               # a well-formed SVG document
    assert root.tag.endswith("svg")
    return " ".join(t for t in root.itertext())


def test_svg_labels_and_numbers(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "quadruped.svg"
    assert cli_main(["plot", "--robot", "quadruped", f"--q={Q}", f"--v={V}", "--out", str(out)]) == 0
    text = _svg_text(out)
    model = load_robot("quadruped")
    for name in z_names(model) + w_names(model):       # every row and column labelled
        assert name in text, name
    assert {"z_H.vx", "s.LF_HAA", "v.wz", "r.RH_KFE", "tau.LF_HAA"} <= set(z_names(model) + w_names(model))
    lin = sl.linearize(model, _state(model), np.zeros(model.nj))
    nnz = int(np.count_nonzero(lin.A))
    assert re.search(rf"A: 36 x 36, {nnz} nonzero", text), text[:400]
    assert re.search(rf"B: 36 x 12, {int(np.count_nonzero(lin.B))} nonzero", text)
    ev = np.linalg.eigvals(lin.A)
    unstable = int(np.sum(ev.real > 1e-6 * max(1.0, np.max(np.abs(ev)))))    # the documented tolerance
    assert f"{unstable} unstable" in text and "eigenvalues of A" in text
    said = capsys.readouterr().out
    assert f"{unstable} eigenvalues of A with a positive real part" in said and str(out) in said


def test_png_with_contacts_and_dt(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    out = tmp_path / "standing.png"
    feet = "LF_foot,RF_foot,LH_foot,RH_foot"
    assert cli_main(["plot", f"--q={Q}", "--contacts", feet, "--dt", "0.01", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = imread(str(out))
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 600
    assert float(img[..., :3].std()) > 0.05                 # not a blank canvas
    model = load_robot("quadruped")
    state = sl.State.from_vectors(model, _state(model).q, np.zeros(model.nv))    # --v left out: zero
    lin = sl.linearize(model, state, np.zeros(model.nj), dt=0.01,
                       contacts=[sl.Contact(f, reference="world_aligned") for f in feet.split(",")])
    ev = np.abs(np.linalg.eigvals(lin.Ad))
    outside = int(np.sum(ev > 1 + 1e-6 * max(1.0, ev.max())))
    said = capsys.readouterr().out
    assert f"Ad 36x36 ({int(np.count_nonzero(lin.Ad))} nonzero)" in said
    assert f"{outside} eigenvalues of Ad outside the unit circle" in said


def test_discrete_svg_says_so(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "ur5.svg"
    assert cli_main(["plot", "--robot", "quadruped", "--fixed-base", "--dt", "0.005", "--out", str(out)]) == 0
    text = _svg_text(out)
    assert "eigenvalues of Ad (dt = 0.005 s)" in text and "unit circle" in text and "Bd: 24 x 12" in text


def test_without_matplotlib_a_clear_error(tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib -> ImportError
    out = tmp_path / "x.png"
    assert cli_main(["plot", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "matplotlib" in err and "pip install" in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize("name", ["x.jpg", "x", "no-such-folder/x.png"])
def test_bad_output_names(tmp_path, capsys, name):
    assert cli_main(["plot", "--out", str(tmp_path / name)]) == 2
    assert "--out" in capsys.readouterr().err
