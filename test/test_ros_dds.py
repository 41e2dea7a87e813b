# SPDX-License-Identifier: BSD-3-Clause
"""The node over real DDS between separate processes, confined to loopback (no ROS 2 needed).

A test publisher (this process) sends JointState with the joint order shuffled, and Odometry for a
floating base; the node runs as `python -m sva_linearizer.ros node --transport dds` in its own
process on a private domain. The A and B it publishes equal sl.linearize's and Pinocchio's.
Bad inputs are each shown to be dropped (the node's warning names the problem, no A/B carries the
bad sample's stamp) while the node keeps running and answers the next good sample.
"""
import signal
import time

import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max
from ros_helpers.cases import (check_A_B, check_bad_inputs, check_description_topic, check_position_only,
                               check_standing_contacts,
                               random_input as _random_input)
from ros_helpers.dds_harness import Harness
from sva_linearizer.robots import robot_urdf_path

pytest.importorskip("cyclonedds", reason="the DDS transport needs the cyclonedds package")

SEC = 1_000_000_000


@pytest.mark.parametrize("robot,floating,dt", [("solo12", True, 0.01), ("ur5", False, 0.0)])
def test_A_B_over_dds_equal_library_and_pinocchio(robot, floating, dt):
    """The record over DDS: A, B, the drift against Pinocchio, the point, with dt the discrete part."""
    path = robot_urdf_path(robot)
    flag = "--floating-base" if floating else "--fixed-base"
    h = Harness(["--urdf", str(path), flag, "--param", "warn_period=0", "--param", "max_odom_age=0.5",
                 "--param", f"dt={dt}"])
    try:
        h.wait_ready()
        check_A_B(h, robot, floating, dt=dt)
    finally:
        h.close()


@pytest.mark.parametrize("robot,floating", [("solo12", True), ("ur5", False)])
def test_position_only_joint_states_over_dds(robot, floating):
    flag = "--floating-base" if floating else "--fixed-base"
    h = Harness(["--robot", robot, flag, "--param", "max_odom_age=0.5"])
    try:
        h.wait_ready()
        check_position_only(h, robot, floating)
    finally:
        h.close()


def test_bad_inputs_over_dds_are_dropped_and_node_recovers():
    h = Harness(["--robot", "solo12", "--param", "warn_period=0", "--param", "max_odom_age=0.2"])
    try:
        h.wait_ready()
        check_bad_inputs(h, "solo12")
    finally:
        h.close()


@pytest.mark.parametrize("mode", ["rigid", "forces"])
def test_standing_quadruped_with_four_contacts_over_dds(mode):
    """solo12 (config/solo12.yaml: four world-aligned point feet) standing
    on its four contacts, the node in its own process over DDS: A, B (rigid: and the forces and
    their derivatives; forces as inputs: B with the force columns) equal the library's; an
    unknown frame in the contact set is dropped with a warning and nothing is published for it."""
    import pathlib

    cfg = pathlib.Path(__file__).resolve().parents[1] / "config" / "solo12.yaml"
    h = Harness(["--config", str(cfg), "--param", "warn_period=0", "--param", "max_odom_age=0.5",
                 "--param", f"contact_mode={mode}", "--param", "max_contacts_age=0.5"], contacts=True)
    try:
        h.wait_ready()
        check_standing_contacts(h, mode)
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
        assert h.node.find(r"published \d+ records") is not None, h.node.output()
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


def test_two_namespaced_nodes_take_their_own_description_by_default():
    """robot_description_topic defaults to the relative `robot_description`: two nodes started with
    no model parameter in /<ns1> and /<ns2> (as `namespace:=` gives them) each build the robot
    published (transient local) in their own namespace, and their records are their robots'."""
    hs = []
    try:
        for robot in ("ur5", "panda"):
            h = Harness(["--fixed-base", "--param", "warn_period=0"], start_node=False)
            h.send_description(robot_urdf_path(robot).read_text())
            h.start()
            hs.append((robot, h))
        for robot, h in hs:
            check_description_topic(h, robot)
            nj = sl.load_urdf(robot_urdf_path(robot), floating_base=False).nj
            assert h.pairs[-1].B.shape == (2 * nj, nj) and h.pairs[-1].description.joint_names[0].startswith(
                "shoulder" if robot == "ur5" else "panda")
    finally:
        for _, h in hs:
            h.close()


def test_parameter_files_follow_the_remapped_node_name(tmp_path):
    """On the DDS transport a parameter file is matched as ROS 2 matches it, against the node's
    name and namespace after `-r __node:=` / `-r __ns:=`: the entry for /<ns>/arm applies (ur5),
    not the one for the default name (panda), and the node's topics are in that namespace."""
    h = Harness([], start_node=False)
    f = tmp_path / "params.yaml"
    f.write_text(f"/**:\n  ros__parameters:\n    warn_period: 0.0\n"
                 f"{h.namespace}/arm:\n  ros__parameters:\n    robot: ur5\n"
                 f"sva_linearizer:\n  ros__parameters:\n    robot: panda\n")
    h.node_args = ["--ros-args", "-r", "__node:=arm", "-r", f"__ns:={h.namespace}", "--params-file", str(f)]
    try:
        h.start()
        h.wait_log(r"model from robot: 6 joints, fixed base", timeout=120.0)
        h.wait_ready()
        check_A_B(h, "ur5", False, n=1, oracle=False)
    finally:
        h.close()
