# SPDX-License-Identifier: BSD-3-Clause
"""`sva-linearizer demo` (the README's first command) and `bench-node`, end to end as a user runs
them: separate processes on a private loopback-only DDS domain; each must exit by itself."""
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("cyclonedds", reason="the DDS transport needs the cyclonedds package")
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(args, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-m", "sva_linearizer.ros", *args], cwd=ROOT, env=env, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def test_demo_runs_and_exits_by_itself():
    rc, out = _run(["demo", "--seconds", "2"], timeout=240)
    assert rc == 0, out
    assert "[echo] seq" in out and "A 36x36  B 36x12" in out and "eig(A)" in out, out
    assert "demo: done (node exit code 0)" in out, out
    # solo12 (example-robot-data is a test dependency) standing on four point contacts: each foot
    # carries about a quarter of the weight, and together exactly the weight
    assert "robot 'solo12', standing on four point contacts" in out, out
    import re
    m = re.search(r"world z \(N\): FL_FOOT ([\d.]+), FR_FOOT ([\d.]+), HL_FOOT ([\d.]+), HR_FOOT ([\d.]+); "
                  r"sum ([\d.]+) N \(weight m g = ([\d.]+) N\)", out)
    assert m, out
    fz = [float(x) for x in m.groups()]
    assert abs(fz[4] - fz[5]) < 0.02 and all(abs(f - fz[5] / 4) < 0.1 * fz[5] / 4 for f in fz[:4]), out


@pytest.mark.parametrize("transport", ["dds", "rclpy"])
def test_bench_node_smoke(transport):
    if transport == "rclpy":
        pytest.importorskip("rclpy", reason="bench-node --transport rclpy needs ROS 2's rclpy")
    rc, out = _run(["bench-node", "--robots", "quadruped", "--rates", "200", "--seconds", "1",
                    "--transport", transport], timeout=240)
    assert rc == 0, out
    row = [line.split() for line in out.splitlines() if line.startswith(transport)]
    assert len(row) == 1 and row[0][1] == "quadruped" and row[0][-1] == "ms", out
    assert float(row[0][6].rstrip("Hz")) > 50, out      # output rate: pairs arrived


def test_bench_node_soak_smoke():
    """`bench-node --soak`, briefly: the node's memory at start and end, pairs completed by the node
    and received complete, none lost; the memory stays flat (within 1%) and the exit code says so."""
    rc, out = _run(["bench-node", "--soak", "--robots", "quadruped", "--rates", "100", "--seconds", "3",
                    "--warmup", "1", "--report-every", "1"], timeout=240)
    import re
    assert re.search(r"node resident memory: [\d.]+ MiB at the first record, [\d.]+ MiB at the start, "
                     r"[\d.]+ MiB at the end \([+-][\d.]+%\)", out), out
    m = re.search(r"records published by the node: (\d+); records received whole: (\d+) .*; lost: (\d+)", out)
    assert m and int(m.group(1)) > 0 and int(m.group(1)) == int(m.group(2)) and m.group(3) == "0", out
    assert "goal (memory flat within 1%, no published record lost): met" in out and rc == 0, out
