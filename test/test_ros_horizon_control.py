# SPDX-License-Identifier: BSD-3-Clause
"""A model-predictive controller in another process closes the loop through the node's horizon
(`sva-linearizer demo --control --horizon N`): three processes on loopback DDS, the node, a
simulator whose plant is Pinocchio (independent of the package) and the controller (mpc.HorizonMPC),
which sends its predicted trajectory as a horizon request each period and takes one Riccati step
along the answer's knots. The arm tracks a fast reference on which the one-step controller
(control.RecordLQR) misses its own bound: the MPC's error is within tasks.mpc_arm_bound and at most
half the one-step's. The quadruped shifts its weight, lifts a foot for 0.5 s and puts it down, the
knots carrying the schedule: tasks.QUADRUPED_BOUNDS. With the knots reversed, knot 0's Bd flipped or
the schedule ignored (every foot active at every knot) the same loops fail."""
import re
import subprocess
import sys

import pytest

pytest.importorskip("cyclonedds", reason="the DDS transport needs the cyclonedds package")
pytest.importorskip("pinocchio", reason="the plant is Pinocchio: pip install pin")

from sva_linearizer.ros.demo import tasks  # noqa: E402
from sva_linearizer.ros.demo.demo import arm_bound  # noqa: E402
from sva_linearizer.ros.demo.mpc import HORIZON_CORRUPTIONS  # noqa: E402

KNOTS = 10
RATE = 100.0


def _demo(*args, timeout=600):
    cmd = [sys.executable, "-m", "sva_linearizer.ros", "demo", "--control", "--plant", "pinocchio",
           "--horizon", str(KNOTS), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def test_an_arm_tracks_a_fast_reference_better_than_the_one_step_controller():
    rc, out = _demo("--robot", "ur5", "--seconds", "2")
    one = re.search(r"one-step controller \(RecordLQR\): largest joint error after 1 s ([\d.]+) mrad \(its bound, "
                    r"demo --control's: ([\d.]+) mrad: NOT met\)", out)
    mpc = re.search(rf"horizon MPC \({KNOTS} knots\): largest joint error after 1 s ([\d.]+) mrad \(bound ([\d.]+) "
                    r"mrad; ([\d.]+) of the one-step controller's \(at most 0.5\)\): met", out)
    assert rc == 0 and one and mpc, out
    e_one, e_mpc = float(one.group(1)) * 1e-3, float(mpc.group(1)) * 1e-3
    assert e_one > arm_bound(RATE, tasks.FAST_SWING, tasks.FAST_HZ)        # the one-step misses its bound here
    assert e_mpc <= tasks.mpc_arm_bound(RATE) and e_mpc <= 0.5 * e_one
    assert len(re.findall(r"200 torque commands, 0 periods without one, 0 refused", out)) == 2, out


def test_a_quadruped_shifts_its_weight_and_lifts_a_foot_on_the_schedule():
    seconds = tasks.SHIFT_BACK[1] + 0.2
    rc, out = _demo("--robot", "solo12", "--seconds", f"{seconds:g}")
    m = re.search(r"base within ([\d.]+) mm of its plan .*?: met; rotation from the plan at most ([\d.]+) mrad .*?: "
                  r"met; \w+ lifted ([\d.]+) mm .*?: met; put down ([\d.]+) mm from where it stood, ([\d.]+) mm at "
                  r"the end .*?: met; normal forces on the feet in contact while it was up at least ([-\d.]+) N, on "
                  r"all four over the last 0.1 s ([-\d.]+) N .*?: met; knots with \w+ off the ground: (\d+), "
                  r"records: (\d+): met\. The quadruped's task: met", out)
    assert rc == 0 and m, out
    base, rot, high, touchdown, end, fz_up, fz_end = (float(x) for x in m.groups()[:7])
    B = tasks.QUADRUPED_BOUNDS
    assert base * 1e-3 <= B["base_m"] and rot * 1e-3 <= B["tilt_rad"] and high * 1e-3 >= B["lift_min_m"]
    assert max(touchdown, end) * 1e-3 <= B["touchdown_m"] and min(fz_up, fz_end) > B["normal_force_min_n"]
    # every knot inside the lift's span came back with the foot inactive, and no other (each period's
    # request holds N knots: every period of the lift is in N requests)
    periods_up = round((tasks.LIFT[1] - tasks.LIFT[0]) * RATE)
    assert int(m.group(8)) == periods_up * KNOTS, out
    # and the node's per-state records followed the simulator's contact set on `contacts`
    assert int(m.group(9)) == periods_up, out
    assert "sim: push" not in out and re.search(r"0 periods without one, 0 refused", out), out


@pytest.mark.parametrize("how", HORIZON_CORRUPTIONS)
def test_a_corrupted_horizon_breaks_the_loop(how):
    if how == "schedule_ignored":
        rc, out = _demo("--robot", "solo12", "--seconds", f"{tasks.SHIFT_BACK[1] + 0.2:g}", "--corrupt-horizon", how)
    else:
        rc, out = _demo("--robot", "ur5", "--seconds", "2", "--no-baseline", "--corrupt-horizon", how)
    assert f"horizon corrupted: {how}" in out, out
    assert rc == 1 and ("NOT met" in out or "FAILED" in out), out
