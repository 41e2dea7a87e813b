"""The node over real DDS between separate processes, confined to loopback (no ROS 2 needed).

A test publisher (this process) sends JointState with the joint order shuffled, and Odometry for a
floating base; the node runs as `python -m sva_linearizer.ros node --transport dds` in its own
process on a private domain. The A and B it publishes equal sl.linearize's and Pinocchio's.
Bad inputs are each shown to be dropped (the node's warning names the problem, no A/B carries the
bad sample's stamp) while the node keeps running and answers the next good sample.
"""
import signal
import time
import zlib

import numpy as np
import pytest

import sva_linearizer as sl
from ros_helpers.dds_harness import Harness
from fd_tools import e_max
from ros_helpers.oracle import pinocchio_A_B
from sva_linearizer.robots import robot_urdf_path

pytest.importorskip("cyclonedds", reason="the DDS transport needs the cyclonedds package")

SEC = 1_000_000_000


def _random_input(model, rng):
    s = rng.uniform(-1.0, 1.0, model.nj)
    r = rng.normal(size=model.nj)
    tau = rng.normal(size=model.nj) * 2.0
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    odom = (rng.normal(size=3), quat, rng.normal(size=6)) if model.floating_base else None
    return s, r, tau, odom


def _shuffled(model, rng, s, r, tau):
    perm = rng.permutation(model.nj)
    names = [model.joint_names[i] for i in perm]
    return names, s[perm], r[perm], tau[perm]


@pytest.mark.parametrize("robot,floating", [("solo12", True), ("ur5", False)])
def test_A_B_over_dds_equal_library_and_pinocchio(robot, floating):
    path = robot_urdf_path(robot)
    model = sl.load_urdf(path, floating_base=floating)
    flag = "--floating-base" if floating else "--fixed-base"
    h = Harness(["--urdf", str(path), flag, "--param", "warn_period=0", "--param", "max_odom_age=0.5"])
    try:
        h.wait_ready()
        rng = np.random.default_rng(zlib.crc32(robot.encode()))
        for k in range(3):
            s, r, tau, odom = _random_input(model, rng)
            names, s_m, r_m, tau_m = _shuffled(model, rng, s, r, tau)
            stamp = (100 + k) * SEC + 12345

            def send():
                h.send(stamp, names, s_m, r_m, tau_m, odom)
            send()
            pair = h.wait_pair(stamp, resend=send)

            if floating:
                q = np.concatenate([odom[0], odom[1], s])
                v = np.concatenate([odom[2], r])
            else:
                q, v = s, r
            lin = sl.linearize(model, sl.State.from_vectors(model, q, v), tau)
            assert pair.A.shape == (2 * model.nv, 2 * model.nv) and pair.B.shape == (2 * model.nv, model.nj)
            assert e_max(pair.A, lin.A) <= 1e-8 and e_max(pair.B, lin.B) <= 1e-8
            A_pin, B_pin = pinocchio_A_B(path, model, q, v, tau)
            assert e_max(pair.A, A_pin) <= 1e-8, f"A vs Pinocchio: e_max {e_max(pair.A, A_pin):.2e}"
            assert e_max(pair.B, B_pin) <= 1e-8, f"B vs Pinocchio: e_max {e_max(pair.B, B_pin):.2e}"
    finally:
        h.close()


def test_bad_inputs_over_dds_are_dropped_and_node_recovers():
    robot = "solo12"
    path = robot_urdf_path(robot)
    model = sl.load_urdf(path, floating_base=True)
    h = Harness(["--robot", robot, "--param", "warn_period=0", "--param", "max_odom_age=0.2"])
    rng = np.random.default_rng(7)
    bad_stamps = []
    t = [200 * SEC]

    def next_stamp():
        t[0] += SEC
        return t[0]

    def good():
        s, r, tau, odom = _random_input(model, rng)
        names, s_m, r_m, tau_m = _shuffled(model, rng, s, r, tau)
        stamp = next_stamp()

        def send():
            h.send(stamp, names, s_m, r_m, tau_m, odom)
        send()
        h.wait_pair(stamp, resend=send)
        return stamp, (names, s_m, r_m, tau_m, odom)

    def bad(pattern, mutate):
        """mutate(stamp, names, s, r, tau, odom) sends a bad sample and returns the joint state's
        stamp; the node must warn (pattern), publish nothing for it, and answer the next good one."""
        s, r, tau, odom = _random_input(model, rng)
        names, s_m, r_m, tau_m = _shuffled(model, rng, s, r, tau)
        stamp = next_stamp()
        start = len(h.node.lines)

        def send():
            bad_stamps.append(mutate(stamp, list(names), s_m.copy(), r_m.copy(), tau_m.copy(), odom))
        send()
        h.wait_log(pattern, start, resend=send)
        good()

    def nan_position(st, n, s, r, tau, o):
        s[3] = np.nan
        h.send(st, n, s, r, tau, o)
        return st

    def inf_velocity(st, n, s, r, tau, o):
        r[0] = np.inf
        h.send(st, n, s, r, tau, o)
        return st

    def inf_effort(st, n, s, r, tau, o):
        tau[5] = -np.inf
        h.send(st, n, s, r, tau, o)
        return st

    def nan_odom(st, n, s, r, tau, o):
        h.send(st, n, s, r, tau, (o[0], o[1], np.r_[np.nan, o[2][1:]]))
        return st

    def unknown_joint(st, n, s, r, tau, o):
        h.send(st, n + ["foo"], np.r_[s, 0.0], np.r_[r, 0.0], np.r_[tau, 0.0], o)
        return st

    def missing_joint(st, n, s, r, tau, o):
        h.send(st, n[1:], s[1:], r[1:], tau[1:], o)
        return st

    def non_unit_quaternion(st, n, s, r, tau, o):
        h.send(st, n, s, r, tau, (o[0], np.array([0.0, 0.0, 0.0, 1.3]), o[2]))
        return st

    def stale_odom(st, n, s, r, tau, o):
        h.send_odom(st, o)                      # valid odometry at st ...
        h.send(st + SEC // 2, n, s, r, tau)     # ... and a joint state 0.5 s later (max 0.2 s)
        return st + SEC // 2

    def out_of_order(st, n, s, r, tau, o):
        last = st - SEC                         # the last published stamp (good() before)
        h.send(last - 10_000_000, n, s, r, tau, o)
        return last - 10_000_000

    try:
        h.wait_ready()
        good()
        bad(r"joint_states: position of '\w+' is nan", nan_position)
        bad(r"joint_states: velocity of '\w+' is inf", inf_velocity)
        bad(r"joint_states: effort of '\w+' is -inf", inf_effort)
        bad(r"odom: twist has NaN", nan_odom)
        bad(r"joint_states: unknown joint 'foo'", unknown_joint)
        bad(r"joint_states: missing joint '\w+'", missing_joint)
        bad(r"odom: quaternion norm 1.3 is not unit", non_unit_quaternion)
        bad(r"odom: stale \(age 0.5 s > max 0.2 s\)", stale_odom)
        bad(r"joint_states: stamp older than previous \(out of order", out_of_order)
        assert h.node.alive()
        published = {p.stamp_ns for p in h.pairs}
        assert not published & set(bad_stamps), "an A/B was published for a bad sample"
    finally:
        h.close()


def test_malformed_robot_description_over_dds():
    """Model from the robot_description topic (transient local): a malformed one is reported, the
    node keeps running, a good one is used, a later malformed one does not replace it."""
    path = robot_urdf_path("ur5")
    model = sl.load_urdf(path, floating_base=False)
    h = Harness(["--fixed-base", "--param", "warn_period=0",
                 "--param", "robot_description_topic=robot_description"])
    rng = np.random.default_rng(3)
    try:
        h.wait_ready(need_js=True)
        h.send_description("<robot name='broken'><link name='a'></robot")
        h.wait_log(r"robot_description \(topic\): cannot build a model")
        s, r, tau, _ = _random_input(model, rng)
        h.send(300 * SEC, model.joint_names, s, r, tau)
        h.wait_log(r"no robot model yet", resend=lambda: h.send(300 * SEC, model.joint_names, s, r, tau))

        h.send_description(open(path).read())
        h.wait_log(r"model from topic: 6 joints, fixed base")

        def send():
            h.send(301 * SEC, model.joint_names, s, r, tau)
        send()
        pair = h.wait_pair(301 * SEC, resend=send)
        lin = sl.linearize(model, sl.State.from_vectors(model, s, r), tau)
        assert e_max(pair.A, lin.A) <= 1e-8

        start = len(h.node.lines)
        h.send_description("not xml at all")
        h.wait_log(r"robot_description \(topic\): cannot build a model", start)

        def send2():
            h.send(302 * SEC, model.joint_names, s, r, tau)
        send2()
        h.wait_pair(302 * SEC, resend=send2)
        assert 300 * SEC not in {p.stamp_ns for p in h.pairs}
    finally:
        h.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_clean_exit_on_signal(sig):
    h = Harness(["--robot", "ur5"])
    try:
        h.wait_ready()
        h.node.proc.send_signal(sig)
        rc = h.node.proc.wait(30)
        time.sleep(0.2)
        assert rc == 0, h.node.output()
        assert h.node.find(r"published \d+ A/B pairs") is not None, h.node.output()
        assert "Traceback" not in h.node.output()
    finally:
        h.close()


def test_node_from_config_file_over_dds():
    """`node --config config/ur5.yaml` (a ROS 2 parameter file) over DDS."""
    import pathlib

    cfg = pathlib.Path(__file__).resolve().parents[1] / "config" / "ur5.yaml"
    model = sl.load_urdf(robot_urdf_path("ur5"), floating_base=False)
    h = Harness(["--config", str(cfg)])
    try:
        h.wait_ready()
        rng = np.random.default_rng(11)
        s, r, tau, _ = _random_input(model, rng)

        def send():
            h.send(500 * SEC, model.joint_names, s, r, tau)
        send()
        pair = h.wait_pair(500 * SEC, resend=send)
        lin = sl.linearize(model, sl.State.from_vectors(model, s, r), tau)
        assert e_max(pair.A, lin.A) <= 1e-8 and e_max(pair.B, lin.B) <= 1e-8
    finally:
        h.close()
