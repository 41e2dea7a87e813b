# SPDX-License-Identifier: BSD-3-Clause
"""The package as a ROS 2 user builds and runs it: `colcon build` in a fresh workspace,
`source install/setup.bash`, the node started from `lib/sva_linearizer/linearizer_node` with
`--ros-args --params-file <share>/config/ur5.yaml -r __ns:=...`, A and B received by a real rclpy
peer, SIGINT; then `colcon test` + `colcon test-result` on a small subset of the suite.

Bounded: the subset is test_ros_config.py and test_ros_cdr.py (parameters, configs, launch file,
CDR bytes; about 30 tests, seconds of work) - the full suite under colcon would double CI time.
The installed copy, the node and `colcon test` alike, runs with NUMBA_DISABLE_JIT=1: it is a new
source tree, so numba would compile every kernel again (minutes on a loaded 2-core machine, and the
suite's conftest makes the first call wait for it); the same functions run as plain Python.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("rclpy", reason="needs ROS 2's rclpy (pip install '.[ros]')")
colcon = shutil.which("colcon") or str(pathlib.Path(sys.executable).parent / "colcon")
if not os.path.exists(colcon):
    pytest.skip("colcon is not installed (pip install '.[ros]')", allow_module_level=True)

from checkout import copy_checkout  # noqa: E402
from ros_helpers.cases import check_A_B  # noqa: E402
from ros_helpers.dds_harness import Harness  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUBSET = ["test/test_ros_config.py", "test/test_ros_cdr.py"]


def _bash(cmd, cwd, timeout, env=None):
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_colcon_build_run_and_test(tmp_path):
    ws = tmp_path / "ws"
    pkg = ws / "src" / "sva_linearizer"
    pkg.mkdir(parents=True)
    copy_checkout(pkg)
    r = _bash(f"'{colcon}' build --packages-select sva_linearizer", ws, 300)
    assert r.returncode == 0, r.stdout + r.stderr
    share = ws / "install" / "sva_linearizer" / "share" / "sva_linearizer"
    exe = ws / "install" / "sva_linearizer" / "lib" / "sva_linearizer" / "linearizer_node"
    assert exe.exists() and (share / "config" / "ur5.yaml").exists() and (share / "package.xml").exists()

    # the node as `ros2 run` starts it, in a shell that sourced the workspace
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    cmd = lambda ns: ["bash", "-c", f"source '{ws}/install/setup.bash' && exec '{exe}' --ros-args "  # noqa: E731
                      f"--params-file '{share}/config/ur5.yaml' -r __ns:={ns}"]
    h = Harness([], node_transport="rclpy", peer="rclpy", command=cmd, env=env)
    try:
        h.wait_ready(timeout=180.0)
        check_A_B(h, "ur5", False, n=1, oracle=False)
        assert str(ws / "install") in h.node.proc.args[-1]
        h.node.proc.send_signal(2)
        assert h.node.proc.wait(30) == 0, h.node.output()
        i = h.node.find(r"published 1 records")
        assert i is not None and not [ln for ln in h.node.lines[i + 1:] if ln.strip()], h.node.output()
    finally:
        h.close()

    r = _bash(f"source install/setup.bash && '{colcon}' test --packages-select sva_linearizer "
              f"--pytest-args {' '.join(SUBSET)}", ws, 600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _bash(f"'{colcon}' test-result --all --verbose", ws, 60)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"Summary: (\d+) tests, (\d+) errors, (\d+) failures, (\d+) skipped", r.stdout)
    assert m, r.stdout
    tests, errors, failures, skipped = map(int, m.groups())
    assert errors == 0 and failures == 0 and tests - skipped >= 20, r.stdout   # passed, not collected
