# SPDX-License-Identifier: BSD-3-Clause
"""`sva-linearizer linearize`: arguments (negative numbers, empty paths, base choice, validation),
errors without tracebacks (missing output folder, closed stdout), and what it says and saves
(the state used, the z ordering, labelled npz). Bundled robot only: no example-robot-data needed."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from sva_linearizer.cli import join_vector_arguments, main as cli_main

NJ = 12  # the bundled quadruped
JOINTS = ["LF_HAA", "LF_HFE", "LF_KFE", "LH_HAA", "LH_HFE", "LH_KFE",
          "RF_HAA", "RF_HFE", "RF_KFE", "RH_HAA", "RH_HFE", "RH_KFE"]
BAD_URDF = """<?xml version="1.0"?>
<robot name="bad_inertia">
  <link name="base"><inertial><origin xyz="0 0 0"/><mass value="5"/>
    <inertia ixx="0.05" ixy="0" ixz="0" iyy="0.06" iyz="0" izz="0.07"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0 0 -0.1"/><mass value="1"/>
    <inertia ixx="-0.0001" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0.1 0 0"/><axis xyz="0 1 0"/><limit effort="10" velocity="5" lower="-2" upper="2"/></joint>
</robot>
"""


def _q(s):
    quat = np.array([0.1, -0.2, 0.3, 0.9])
    return np.r_[-0.1, 0.2, -0.3, quat / np.linalg.norm(quat), s]


def _text(x):
    return ",".join(repr(float(e)) for e in x)


def _words(x):
    return [repr(float(e)) for e in x]


def run_cli(*args, **kw):
    """`python -m sva_linearizer.cli ...` in a subprocess (what the console script runs)."""
    return subprocess.run([sys.executable, "-m", "sva_linearizer.cli", *args], capture_output=True,
                          text=True, timeout=600, **kw)


def test_negative_values_in_all_spellings(tmp_path, capsys):
    s = np.linspace(-0.6, 0.5, NJ)
    q, v, tau = _q(s), np.linspace(-1.0, 0.7, 6 + NJ), -np.arange(1.0, NJ + 1)
    for i, spelling in enumerate([
            ["--q", _text(q), "--v", _text(v), "--tau", _text(tau)],              # --q -0.1,...
            [f"--q={_text(q)}", f"--v={_text(v)}", f"--tau={_text(tau)}"],        # --q=-0.1,...
            ["--q", *_words(q), "--v", *_words(v), "--tau", *_words(tau)],         # --q -0.1 0.2 ...
            ["--q", " ".join(_words(q)), "--v", _text(v) + ",", "--tau", _text(tau)]]):
        out = tmp_path / f"s{i}.npz"
        assert cli_main(["linearize", *spelling, "--out", str(out)]) == 0, spelling
        d = np.load(out)
        np.testing.assert_array_equal(d["q"], q)
        np.testing.assert_array_equal(d["v"], v)
        np.testing.assert_array_equal(d["tau"], tau)
    capsys.readouterr()


def test_join_vector_arguments_leaves_other_options_alone():
    assert join_vector_arguments(["linearize", "--q", "-1,2", "--out", "x.npz"]) == \
        ["linearize", "--q=-1,2", "--out", "x.npz"]
    assert join_vector_arguments(["--v", "-1", "2e-3", "-inf", "--fixed-base"]) == ["--v=-1,2e-3,-inf", "--fixed-base"]
    assert join_vector_arguments(["--q", "--fixed-base"]) == ["--q", "--fixed-base"]  # argparse reports it
    assert join_vector_arguments(["--robot", "-x"]) == ["--robot", "-x"]


def test_negative_values_through_the_console_script():
    exe = shutil.which("sva-linearizer", path=os.path.dirname(sys.executable)) or shutil.which("sva-linearizer")
    if exe is None:
        pytest.skip("the sva-linearizer console script is not installed")
    r = subprocess.run([exe, "linearize", "--fixed-base", "--q", _text(np.linspace(-0.5, 0.5, NJ))],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "fixed base" in r.stdout and "s (-0.5," in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--urdf", ""], "--urdf: empty path"),
    (["--urdf", "   "], "--urdf: empty path"),
    (["--urdf", "/no/such/robot.urdf"], "no such file"),
    (["--robot", ""], "--robot: empty name"),
    (["--q", "1,2"], "--q: expected 19 numbers"),
    (["--tau", "1,x"], "--tau: expected numbers"),
    (["--out", "/no/such/folder/ab.npz"], "--out: folder '/no/such/folder' does not exist"),
])
def test_bad_arguments_are_errors(args, message, capsys):
    assert cli_main(["linearize", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_missing_output_folder_in_a_subprocess(tmp_path):
    r = run_cli("linearize", "--out", str(tmp_path / "missing" / "ab.npz"))
    assert r.returncode == 2
    assert "does not exist" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "missing").exists()


def test_closed_stdout_exits_cleanly():
    """`sva-linearizer linearize | head -1` where head has gone: no traceback, exit 141 (SIGPIPE)."""
    p = subprocess.Popen([sys.executable, "-m", "sva_linearizer.cli", "linearize"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the first line is written
    err = p.stderr.read().decode()
    p.wait(timeout=600)
    assert p.returncode == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_head_reads_one_line():
    r = subprocess.run(f"'{sys.executable}' -m sva_linearizer.cli linearize | head -1", shell=True,
                       capture_output=True, text=True, timeout=600)
    assert r.stdout.startswith("model ") and r.stdout.count("\n") == 1
    assert "Traceback" not in r.stderr


def test_floating_and_fixed_base_switches(tmp_path, capsys):
    for flag, n, floating in (("--fixed-base", NJ, False), ("--floating-base", 6 + NJ, True), (None, 6 + NJ, True)):
        out = tmp_path / f"{flag}.npz"
        assert cli_main(["linearize", *([flag] if flag else []), "--out", str(out)]) == 0
        d = np.load(out)
        assert d["A"].shape == (2 * n, 2 * n) and d["B"].shape == (2 * n, NJ)
        assert bool(d["floating_base"]) is floating
    assert "fixed base" in capsys.readouterr().out


def test_a_urdf_rooted_at_world_is_fixed_and_the_summary_says_why(capsys):
    from sva_linearizer.robots import robot_urdf_path

    ur5 = str(robot_urdf_path("ur5"))
    assert cli_main(["linearize", "--urdf", ur5]) == 0
    out = capsys.readouterr().out
    assert "fixed base (the URDF's root link is 'world': the robot is fixed to the world; --floating-base" in out
    assert "nv=6," in out
    assert cli_main(["linearize", "--urdf", ur5, "--floating-base"]) == 0
    assert "floating base (--floating-base), nj=6, nv=12" in capsys.readouterr().out


def test_base_switches_exclude_each_other(capsys):
    with pytest.raises(SystemExit):
        cli_main(["linearize", "--fixed-base", "--floating-base"])
    assert "not allowed with" in capsys.readouterr().err


def test_no_validate(tmp_path, capsys):
    urdf = tmp_path / "bad.urdf"
    urdf.write_text(BAD_URDF)
    assert cli_main(["linearize", "--urdf", str(urdf), "--fixed-base"]) == 2
    assert "not positive semi-definite" in capsys.readouterr().err
    out = tmp_path / "bad.npz"
    with pytest.warns(UserWarning):
        assert cli_main(["linearize", "--urdf", str(urdf), "--fixed-base", "--no-validate",
                         "--out", str(out)]) == 0
    assert np.load(out)["A"].shape == (2, 2)


def test_no_validate_warnings_are_one_line_each(tmp_path):
    urdf = tmp_path / "bad.urdf"
    urdf.write_text(BAD_URDF)
    r = run_cli("linearize", "--urdf", str(urdf), "--fixed-base", "--no-validate")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines and all(x.startswith("sva-linearizer: warning: ") for x in lines), r.stderr


def test_summary_states_the_state_and_z(capsys):
    s = np.linspace(-0.6, 0.5, NJ)
    assert cli_main(["linearize", "--q", _text(_q(s)), "--tau", "0.5 " * NJ]) == 0
    text = capsys.readouterr().out
    assert "joints     " + ", ".join(JOINTS) in text
    assert "state      q  position p (-0.1, 0.2, -0.3), quaternion xyzw (" in text
    assert "s (-0.6, " in text
    assert "v  base body twist v_lin all 0 (3), w all 0 (3), r all 0 (12)  [default]" in text
    assert f"tau all 0.5 ({NJ})" in text
    assert "z = [z_H (6: pose H -> H exp(z_H^), lin-ang), s (12), v (6: base body twist, lin-ang), r (12)]" in text
    assert "w = tau (12)" in text
    assert cli_main(["linearize", "--fixed-base"]) == 0
    text = capsys.readouterr().out
    assert "q  s all 0 (12)  [default]" in text and "z = [s (12), r (12)], w = tau (12)" in text


def test_npz_labels(tmp_path, capsys):
    out = tmp_path / "ab"          # np.savez appends .npz; the CLI says where it wrote
    assert cli_main(["linearize", "--out", str(out)]) == 0
    assert f"saved      {out}.npz" in capsys.readouterr().out
    d = np.load(f"{out}.npz")      # no pickles: plain string arrays
    z, w = list(d["z_names"]), list(d["w_names"])
    assert len(z) == d["A"].shape[0] == 2 * (6 + NJ) and len(w) == d["B"].shape[1] == NJ
    assert z[:6] == ["z_H.vx", "z_H.vy", "z_H.vz", "z_H.wx", "z_H.wy", "z_H.wz"]
    assert z[6:6 + NJ] == [f"s.{j}" for j in JOINTS]
    assert z[6 + NJ:12 + NJ] == ["v.vx", "v.vy", "v.vz", "v.wx", "v.wy", "v.wz"]
    assert z[12 + NJ:] == [f"r.{j}" for j in JOINTS]
    assert w == [f"tau.{j}" for j in JOINTS]
    assert list(d["joint_names"]) == JOINTS and bool(d["floating_base"]) is True
    assert str(d["model"]) == "sva_quadruped" and str(d["z_ordering"]).startswith("z = [z_H (6")
    out2 = tmp_path / "fixed.npz"
    assert cli_main(["linearize", "--fixed-base", "--out", str(out2)]) == 0
    d = np.load(out2)
    assert list(d["z_names"]) == [f"s.{j}" for j in JOINTS] + [f"r.{j}" for j in JOINTS]
    assert bool(d["floating_base"]) is False
    capsys.readouterr()
