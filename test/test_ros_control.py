# SPDX-License-Identifier: BSD-3-Clause
"""A controller in another process closes the loop over ROS 2 on the node's records alone
(`sva-linearizer demo --control`): three processes on loopback DDS, the node, a simulator whose
plant is Pinocchio (independent of the package: pin.aba, or pin.constraintDynamics on the feet)
taking torque commands on effort_controller/commands, and the controller (control.RecordLQR) fed
only linearization/record. The arm tracks a moving joint reference, the quadruped stands and is
pushed; each must meet the demo's bounds (demo.BOUNDS, demo.arm_bound). With a corrupted record
(A or B transposed, the drift dropped, Bd's sign flipped) the same loop must fail."""
import re
import subprocess
import sys

import pytest

pytest.importorskip("cyclonedds", reason="the DDS transport needs the cyclonedds package")
pytest.importorskip("pinocchio", reason="the plant is Pinocchio: pip install pin")

from sva_linearizer.ros.demo.control import CORRUPTIONS  # noqa: E402
from sva_linearizer.ros.demo.demo import BOUNDS, arm_bound  # noqa: E402


def _demo(*args, timeout=600):
    cmd = [sys.executable, "-m", "sva_linearizer.ros", "demo", "--control", "--plant", "pinocchio", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def test_an_arm_tracks_a_moving_reference():
    rc, out = _demo("--robot", "ur5", "--seconds", "3")
    m = re.search(r"largest joint error after 1 s ([\d.]+) mrad \(bound ([\d.]+)\): met", out)
    assert rc == 0 and m, out
    assert float(m.group(1)) * 1e-3 <= arm_bound(100.0)
    assert re.search(r"3\d\d torque commands, 0 periods without one, 0 refused", out), out


def test_a_quadruped_recovers_from_a_push():
    rc, out = _demo("--robot", "solo12", "--seconds", "3")
    assert "sim: push:" in out, out
    m = re.search(r"largest base offset ([\d.]+) mm .* offset ([\d.]+) mm .* tilt ([\d.]+) mrad .*: met", out)
    assert rc == 0 and m, out
    peak, offset, tilt = (float(x) * 1e-3 for x in m.groups())
    assert 0 < peak <= BOUNDS["push_peak_m"] and offset <= BOUNDS["base_offset_m"] and tilt <= BOUNDS["base_tilt_rad"]


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupted_record_breaks_the_loop(how):
    rc, out = _demo("--robot", "ur5", "--seconds", "3", "--corrupt-record", how)
    assert rc == 1 and ("NOT met" in out or "FAILED" in out), out


@pytest.mark.parametrize("how", ["no_drift", "Bd_flipped"])
def test_a_corrupted_record_breaks_the_standing_loop(how):
    rc, out = _demo("--robot", "solo12", "--seconds", "3", "--corrupt-record", how)
    assert rc == 1 and ("NOT met" in out or "FAILED" in out), out
