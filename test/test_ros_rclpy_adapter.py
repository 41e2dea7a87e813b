"""The rclpy adapter's glue, run against stand-ins of the rclpy API (ROS 2 is not installed here;
on a ROS 2 machine test_ros_launch.py runs the real thing). Same node logic as the DDS transport."""
import numpy as np
import pytest

import sva_linearizer as sl
from ros_helpers import fake_rclpy
from sva_linearizer.ros import cli
from sva_linearizer.ros.messages import joint_state_msg, msg_to_matrix
from sva_linearizer.ros.node import DEFAULT_PARAMETERS, LinearizerNode
from sva_linearizer.ros.transport import RclpyTransport, make_transport, rclpy_available

pytest.importorskip("cyclonedds", reason="the stand-in messages are the DDS structs")


def test_auto_picks_rclpy_when_importable(monkeypatch):
    assert not rclpy_available() or pytest.skip("real rclpy present")
    fake_rclpy.install(monkeypatch)
    assert rclpy_available()
    t = make_transport("auto", parameter_overrides=[])
    assert isinstance(t, RclpyTransport)
    t.close()


def test_node_on_rclpy_adapter(monkeypatch):
    fake_rclpy.install(monkeypatch)
    Parameter = fake_rclpy.Parameter
    t = RclpyTransport("sva_linearizer", parameter_overrides=[Parameter("robot", value="ur5"),
                                                              Parameter("max_rate", value=0.0)])
    params = t.get_parameters(DEFAULT_PARAMETERS)
    assert params["robot"] == "ur5" and params["floating_base"] == "auto"
    node = LinearizerNode(t, params)
    rn = fake_rclpy.Node.instances[-1]
    assert set(rn.subs) == {"joint_states"} and set(rn.pub_qos) == {
        "linearization/A", "linearization/B", "linearization/stamp"}
    qos = rn.subs["joint_states"][2]
    assert (qos.depth, qos.reliability, qos.durability) == (1, "reliable", "volatile")
    rng = np.random.default_rng(0)
    m = node.model
    s, r, tau = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6)
    _, cb, _ = rn.subs["joint_states"]
    cb(joint_state_msg(t.types, 5 * 10**9, m.joint_names[::-1], s[::-1], r[::-1], tau[::-1]))
    A = msg_to_matrix(rn.published["linearization/A"][0])
    np.testing.assert_array_equal(A, sl.linearize(m, sl.State.from_vectors(m, s, r), tau).A)
    assert rn.published["linearization/stamp"][0].frame_id.startswith("seq=1 ")
    t.spin()        # ExternalShutdownException is a clean stop
    t.close()
    assert rn.destroyed


def test_robot_description_topic_qos_on_rclpy(monkeypatch):
    fake_rclpy.install(monkeypatch)
    t = RclpyTransport("sva_linearizer")
    LinearizerNode(t, t.get_parameters(DEFAULT_PARAMETERS))
    rn = fake_rclpy.Node.instances[-1]
    qos = rn.subs["/robot_description"][2]
    assert (qos.depth, qos.reliability, qos.durability) == (1, "reliable", "transient_local")
    assert "odom" in rn.subs                # floating base by default
    t.close()


def test_main_node_with_ros_args_on_rclpy(monkeypatch, tmp_path):
    state = fake_rclpy.install(monkeypatch)
    cfg = tmp_path / "p.yaml"
    cfg.write_text("/**:\n  ros__parameters:\n    robot: solo12\n    max_odom_age: 0.3\n")
    rc = cli.main_node(["--duration", "0.05", "--ros-args", "--params-file", str(cfg), "-p", "max_rate:=50.0",
                        "-r", "__node:=lin"])
    assert rc == 0
    assert state["init_args"][1:] == ["--ros-args", "--params-file", str(cfg), "-p", "max_rate:=50.0",
                                      "-r", "__node:=lin"]
    rn = fake_rclpy.Node.instances[-1]
    values = {k: p.value for k, p in rn.declared.items()}
    assert values["robot"] == "solo12" and values["max_rate"] == 50.0 and values["max_odom_age"] == 0.3
    assert any("published 0 A/B pairs" in t for _, t in rn.log_lines)


def test_transport_rclpy_without_ros_fails_cleanly(capsys):
    if rclpy_available():
        pytest.skip("rclpy is installed")
    rc = cli.main(["node", "--robot", "ur5", "--transport", "rclpy"])
    assert rc == 2 and "rclpy (ROS 2) is not importable" in capsys.readouterr().err
