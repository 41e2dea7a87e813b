# SPDX-License-Identifier: BSD-3-Clause
"""ci_skips: under CI, a test skipped because a dependency is missing fails the run; only the parts
of ROS 2 that no package index serves may skip. Run on a small suite of its own."""
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
SUITE = '''
import pytest

def test_runs():
    assert 1 + 1 == 2

def test_without_launch_testing():
    pytest.skip("launch_testing (ROS 2) is not installed")
'''
MISSING_ORACLE = '''

def test_without_an_oracle():
    pytest.importorskip("an_oracle_that_is_not_installed", reason="pin (Pinocchio) is a test dependency")
'''


def _pytest(folder, ci):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    env["PYTHONPATH"] = str(HERE)
    # launch_testing's plugins, on a machine with ROS 2, stay out: they would import these suites' modules
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "ci_skips", "-p", "no:cacheprovider",
                           "-p", "no:launch_testing", "-p", "no:launch_ros", str(folder)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=folder)


def test_a_missing_oracle_fails_under_ci_only(tmp_path):
    (tmp_path / "test_suite.py").write_text(SUITE + MISSING_ORACLE)
    r = _pytest(tmp_path, ci=True)
    assert r.returncode == 1, r.stdout
    assert "skips CI does not allow" in r.stdout and "pin (Pinocchio) is a test dependency" in r.stdout, r.stdout
    listed = r.stdout.split("skipped tests, with their reasons")[1]
    assert "test_without_launch_testing: launch_testing (ROS 2) is not installed" in listed, r.stdout
    assert "test_without_an_oracle: pin (Pinocchio) is a test dependency" in listed, r.stdout
    r = _pytest(tmp_path, ci=False)             # a developer's machine: a skip is a skip
    assert r.returncode == 0 and "skips CI does not allow" not in r.stdout, r.stdout


def test_the_ros2_parts_no_index_serves_may_skip(tmp_path):
    (tmp_path / "test_suite.py").write_text(SUITE)
    r = _pytest(tmp_path, ci=True)
    assert r.returncode == 0 and "1 passed, 1 skipped" in r.stdout, r.stdout


def test_a_module_level_skip_counts_too(tmp_path):
    (tmp_path / "test_suite.py").write_text(
        "import pytest\nrosbags = pytest.importorskip('rosbags_not_installed_here')\n\ndef test_x():\n    pass\n")
    r = _pytest(tmp_path, ci=True)
    assert r.returncode == 1 and "could not import 'rosbags_not_installed_here'" in r.stdout, r.stdout


def test_a_skip_at_import_fails_under_ci_whatever_its_reason(tmp_path):
    """Even launch_testing's allowed reason: raised at import, under launch_testing's plugin it would
    skip the other files with it; in CI the launch test skips inside a test."""
    (tmp_path / "test_suite.py").write_text("def test_runs():\n    pass\n")
    (tmp_path / "test_launch.py").write_text(
        "import pytest\npytest.skip('launch_testing (ROS 2) is not installed', allow_module_level=True)\n\n"
        "def test_launch():\n    pass\n")
    r = _pytest(tmp_path, ci=True)
    assert r.returncode == 1 and "skips CI does not allow" in r.stdout, r.stdout
    assert "test_launch.py: launch_testing (ROS 2) is not installed (at import" in r.stdout, r.stdout
    r = _pytest(tmp_path, ci=False)
    assert r.returncode == 0 and "1 passed, 1 skipped" in r.stdout, r.stdout
