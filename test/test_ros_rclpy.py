# SPDX-License-Identifier: BSD-3-Clause
"""The node on the rclpy transport against a real ROS 2 peer, between separate processes.

ROS 2 Kilted's rclpy, messages and Fast DDS come from the community wheels on PyPI (the `ros`
extra). The node runs as its own process (`python -m sva_linearizer.ros node --transport rclpy`,
or the `linearizer_node` executable with `--ros-args`), the test side is a real rclpy node
(RclpyTransport) in this process. Everything stays on 127.0.0.1 (Fast DDS:
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and a UDPv4-only profile whitelisting 127.0.0.1) on a
private ROS_DOMAIN_ID, bounded in time, and the node is always stopped.
"""
import pathlib
import re
import signal
import time

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="the rclpy tests need ROS 2's rclpy (pip install '.[ros]')")

import sva_linearizer as sl  # noqa: E402
from fd_tools import e_max  # noqa: E402
from ros_helpers.cases import (SEC, check_A_B, check_bad_inputs, check_description_topic,  # noqa: E402
                               check_position_only, check_standing_contacts, random_input)
from ros_helpers.dds_harness import Harness  # noqa: E402
from sva_linearizer.robots import robot_urdf_path  # noqa: E402
from sva_linearizer.ros.node.parameters import DEFAULT_PARAMETERS, contact_specs, normalize_parameters  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted(p.stem for p in (ROOT / "config").glob("*.yaml"))


@pytest.mark.parametrize("robot,floating,dt", [("solo12", True, 0.01), ("ur5", False, 0.0)])
def test_A_B_over_rclpy_equal_library_and_pinocchio(robot, floating, dt):
    """The record over rclpy: A, B, the drift against Pinocchio, the point, with dt the discrete part."""
    flag = "--floating-base" if floating else "--fixed-base"
    h = Harness(["--urdf", str(robot_urdf_path(robot)), flag, "--param", "warn_period=0",
                 "--param", "max_odom_age=0.5", "--param", f"dt={dt}"], node_transport="rclpy", peer="rclpy")
    try:
        h.wait_ready()
        check_A_B(h, robot, floating, dt=dt)
    finally:
        h.close()


def test_bad_inputs_over_rclpy_are_dropped_and_node_recovers():
    h = Harness(["--robot", "solo12", "--param", "warn_period=0", "--param", "max_odom_age=0.2"],
                node_transport="rclpy", peer="rclpy")
    try:
        h.wait_ready()
        check_bad_inputs(h, "solo12")
    finally:
        h.close()


@pytest.mark.parametrize("robot,floating", [("solo12", True), ("ur5", False)])
def test_position_only_joint_states_over_rclpy(robot, floating):
    flag = "--floating-base" if floating else "--fixed-base"
    h = Harness(["--robot", robot, flag, "--param", "max_odom_age=0.5"], node_transport="rclpy", peer="rclpy")
    try:
        h.wait_ready()
        check_position_only(h, robot, floating)
    finally:
        h.close()


def test_robot_description_transient_local_before_the_node_starts():
    """/robot_description as robot_state_publisher publishes it (reliable, transient local), sent
    once before the node exists; a malformed one later does not replace the model."""
    h = Harness(["--fixed-base", "--param", "warn_period=0", "--param", "robot_description_topic=robot_description"],
                node_transport="rclpy", peer="rclpy", start_node=False)
    try:
        h.send_description(open(robot_urdf_path("ur5")).read())
        h.spin(0.2)
        h.start()
        check_description_topic(h, "ur5")
        start = len(h.node.lines)
        h.send_description("<robot name='broken'><link name='a'></robot")
        h.wait_log(r"robot_description \(topic\): cannot build a model", start)
        model = sl.load_urdf(robot_urdf_path("ur5"), floating_base=False)
        s, r, tau, _ = random_input(model, np.random.default_rng(5))

        def send():
            h.send(400 * SEC, model.joint_names, s, r, tau)
        send()
        pair = h.wait_pair(400 * SEC, resend=send)
        assert e_max(pair.A, sl.linearize(model, sl.State.from_vectors(model, s, r), tau).A) <= 1e-8
    finally:
        h.close()


def _get_parameters(h, names, timeout=30.0):
    """Values through the node's parameter service (rcl_interfaces/srv/GetParameters)."""
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    node = h.transport.node
    client = node.create_client(GetParameters, f"{h.namespace}/sva_linearizer/get_parameters")
    try:
        end = time.monotonic() + timeout
        while not client.service_is_ready():
            assert time.monotonic() < end, "parameter service did not appear"
            h.spin(0.05)
        future = client.call_async(GetParameters.Request(names=list(names)))
        while not future.done():
            assert time.monotonic() < end, "parameter service did not answer"
            h.spin(0.05)
        return dict(zip(names, (parameter_value_to_python(v) for v in future.result().values)))
    finally:
        node.destroy_client(client)


def _set_parameter(h, name, value, timeout=30.0):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    node = h.transport.node
    client = node.create_client(SetParameters, f"{h.namespace}/sva_linearizer/set_parameters")
    try:
        end = time.monotonic() + timeout
        while not client.service_is_ready():
            assert time.monotonic() < end
            h.spin(0.05)
        future = client.call_async(SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()]))
        while not future.done():
            assert time.monotonic() < end
            h.spin(0.05)
        return future.result().results[0]
    finally:
        node.destroy_client(client)


@pytest.mark.parametrize("config", CONFIGS)
def test_linearizer_node_with_params_file(config):
    """`linearizer_node --ros-args --params-file config/<robot>.yaml`: rcl's own YAML parser reads
    the shipped file; the parameter service reads back exactly the file's values (they are the
    values in use), and changes are refused. ur5 and solo12 also compute A and B."""
    path = ROOT / "config" / f"{config}.yaml"
    expected = yaml.safe_load(path.read_text())["/**"]["ros__parameters"]
    h = Harness(["--ros-args", "--params-file", str(path), "-p", "warn_period:=0.5"],
                node_transport="rclpy", peer="rclpy", script=True)
    try:
        h.wait_ready(need_js=False)
        got = _get_parameters(h, list(DEFAULT_PARAMETERS))
        expected["warn_period"] = 0.5
        for k, v in expected.items():
            assert got[k] == pytest.approx(v) if isinstance(v, (float, list)) else got[k] == v, (k, got[k], v)
        assert isinstance(got["floating_base"], bool)
        kind = "floating" if expected["floating_base"] else "fixed"
        assert h.node.find(rf"model from robot: \d+ joints, {kind} base") is not None, h.node.output()
        res = _set_parameter(h, "max_rate", 10.0)
        assert not res.successful and "read-only" in res.reason
        assert _get_parameters(h, ["max_rate"])["max_rate"] == expected["max_rate"]
        if config in ("ur5", "solo12"):
            h.wait_ready()
            # solo12's config has its four feet, all active until a contact set arrives
            contacts = contact_specs(normalize_parameters(expected)) or None
            check_A_B(h, config, expected["floating_base"], n=1, oracle=False, contacts=contacts)
    finally:
        h.close()


def _call(h, srv_type, service, request, timeout=30.0):
    node = h.transport.node
    client = node.create_client(srv_type, f"{h.namespace}/sva_linearizer/{service}")
    try:
        end = time.monotonic() + timeout
        while not client.service_is_ready():
            assert time.monotonic() < end, f"{service} did not appear"
            h.spin(0.05)
        future = client.call_async(request)
        while not future.done():
            assert time.monotonic() < end, f"{service} did not answer"
            h.spin(0.05)
        return future.result()
    finally:
        node.destroy_client(client)


def test_parameters_read_back_typed_through_the_parameter_service():
    """ur5's config leaves every contact array empty: through /sva_linearizer/describe_parameters
    and get_parameters they are string / double arrays (rcl_interfaces/msg/ParameterType), not byte
    arrays; an integer given for a double (-p max_rate:=100) reads back as a double."""
    from rcl_interfaces.msg import ParameterType as T
    from rcl_interfaces.srv import DescribeParameters, GetParameters

    expected = {"contact_frames": T.PARAMETER_STRING_ARRAY, "contact_kinds": T.PARAMETER_STRING_ARRAY,
                "contact_references": T.PARAMETER_STRING_ARRAY, "contact_offsets": T.PARAMETER_DOUBLE_ARRAY,
                "contact_baumgarte_kp": T.PARAMETER_DOUBLE_ARRAY, "contact_baumgarte_kd": T.PARAMETER_DOUBLE_ARRAY,
                "gravity": T.PARAMETER_DOUBLE_ARRAY, "max_rate": T.PARAMETER_DOUBLE, "robot": T.PARAMETER_STRING,
                "floating_base": T.PARAMETER_BOOL, "allow_empty_velocity_effort": T.PARAMETER_BOOL}
    names = list(expected)
    h = Harness(["--ros-args", "--params-file", str(ROOT / "config" / "ur5.yaml"), "-p", "max_rate:=100"],
                node_transport="rclpy", peer="rclpy", script=True)
    try:
        h.wait_ready(need_js=False)
        described = _call(h, DescribeParameters, "describe_parameters", DescribeParameters.Request(names=names))
        assert {d.name: d.type for d in described.descriptors} == expected
        assert not any(d.dynamic_typing for d in described.descriptors)
        values = _call(h, GetParameters, "get_parameters", GetParameters.Request(names=names)).values
        got = dict(zip(names, values))
        assert {k: v.type for k, v in got.items()} == expected
        for k in ("contact_frames", "contact_kinds", "contact_references"):
            assert list(got[k].string_array_value) == []
        for k in ("contact_offsets", "contact_baumgarte_kp", "contact_baumgarte_kd"):
            assert list(got[k].double_array_value) == []
        assert got["max_rate"].double_value == 100.0 and got["floating_base"].bool_value is False
        # read-only with a description and, for numbers, a range; a change is refused
        from rcl_interfaces.msg import Parameter as P, ParameterValue
        from rcl_interfaces.srv import SetParameters

        by_name = {d.name: d for d in _call(h, DescribeParameters, "describe_parameters",
                                            DescribeParameters.Request(names=["max_rate", "dt", "robot"])).descriptors}
        assert all(d.read_only and d.description for d in by_name.values()), by_name
        rng = by_name["dt"].floating_point_range[0]
        assert (rng.from_value, rng.to_value) == (0.0, 10.0) and not by_name["robot"].floating_point_range
        req = SetParameters.Request(parameters=[P(name="max_rate", value=ParameterValue(
            type=T.PARAMETER_DOUBLE, double_value=5.0))])
        (result,) = _call(h, SetParameters, "set_parameters", req).results
        assert not result.successful
        values = _call(h, GetParameters, "get_parameters", GetParameters.Request(names=["max_rate"])).values
        assert values[0].double_value == 100.0
    finally:
        h.close()


@pytest.mark.parametrize("node_transport,mode", [("rclpy", "rigid"), ("rclpy", "forces"), ("dds", "rigid")])
def test_standing_quadruped_with_four_contacts_rclpy_peer(node_transport, mode):
    """The contacts acceptance check (test_ros_dds.py) with a real rclpy peer publishing the contact
    set (sensor_msgs/JointState) and forces (geometry_msgs/WrenchStamped) and receiving A, B and the
    forces: node on rclpy, and across vendors (node on Cyclone, peer on Fast DDS)."""
    h = Harness(["--config", str(ROOT / "config" / "solo12.yaml"), "--param", "warn_period=0",
                 "--param", "max_odom_age=0.5", "--param", "max_contacts_age=0.5", "--param", f"contact_mode={mode}"],
                node_transport=node_transport, peer="rclpy", contacts=True)
    try:
        h.wait_ready()
        check_standing_contacts(h, mode)
    finally:
        h.close()


def test_floating_base_auto_reads_back_the_value_in_use():
    h = Harness(["--robot", "ur5"], node_transport="rclpy", peer="rclpy")
    try:
        h.wait_ready(need_js=False)
        got = _get_parameters(h, ["floating_base", "robot", "gravity"])
        assert got == {"floating_base": False, "robot": "ur5", "gravity": [0.0, 0.0, -9.81]}
    finally:
        h.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_clean_exit_on_signal_rclpy(sig):
    """Exit code 0, the summary logged (through rosout, the context still valid), and nothing
    logged after it: no 'Failed to publish log message to rosout'."""
    h = Harness(["--robot", "ur5"], node_transport="rclpy", peer="rclpy")
    try:
        h.wait_ready()
        check_A_B(h, "ur5", False, n=1, oracle=False)
        h.node.proc.send_signal(sig)
        rc = h.node.proc.wait(30)
        time.sleep(0.3)      # the pump thread reads the last lines
        out = h.node.output()
        assert rc == 0, out
        i = h.node.find(r"published 1 records")
        assert i is not None, out
        assert [ln for ln in h.node.lines[i + 1:] if ln.strip()] == [], out
        assert "rosout" not in out and "Traceback" not in out, out
    finally:
        h.close()


@pytest.mark.parametrize("node_transport", ["rclpy", "dds"])
def test_best_effort_publishers_are_matched(node_transport):
    """Joint states and odometry from best-effort (sensor-data QoS) rclpy publishers reach the node
    (its subscriptions are best effort, which matches reliable publishers too - the other tests)."""
    from rclpy.qos import ReliabilityPolicy

    h = Harness(["--robot", "solo12", "--param", "max_odom_age=0.5"], node_transport=node_transport,
                peer="rclpy", state_qos=dict(reliable=False, transient_local=False, depth=5))
    try:
        h.wait_ready()
        for topic in ("joint_states", "odom"):
            infos = h.transport.node.get_subscriptions_info_by_topic(f"{h.namespace}/{topic}")
            assert [i.qos_profile.reliability for i in infos] == [ReliabilityPolicy.BEST_EFFORT], topic
        assert h.pub_js.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
        check_A_B(h, "solo12", True, n=2, oracle=False)
    finally:
        h.close()


def test_auto_transport_is_rclpy_when_importable():
    from sva_linearizer.ros.transports.loopback import private_domain_id
    from sva_linearizer.ros.transports.transport import make_transport
    from sva_linearizer.ros.transports.transport_rclpy import RclpyTransport

    t = make_transport("auto", "sva_auto_test", domain_id=private_domain_id(991), args=["x"])
    try:
        assert isinstance(t, RclpyTransport)
        assert re.match(r"sva_auto_test", t.node.get_name())
    finally:
        t.close()


@pytest.mark.parametrize("node_transport", ["rclpy", "dds"])
def test_use_sim_time_stamps_unstamped_states_with_the_clock_topic(node_transport):
    """`-p use_sim_time:=true`: the node's clock is /clock's (rclpy's time source; on the DDS
    transport its own /clock subscription), so a joint state without a stamp gets the simulated
    time, not the wall clock's."""
    from rosgraph_msgs.msg import Clock

    h = Harness(["--robot", "ur5", "--ros-args", "-p", "use_sim_time:=true"], node_transport=node_transport,
                peer="rclpy")
    try:
        h.wait_ready()
        clock_pub = h.transport.node.create_publisher(Clock, "/clock", 10)
        model = sl.load_urdf(robot_urdf_path("ur5"), floating_base=False)
        s, r, tau, _ = random_input(model, np.random.default_rng(5))
        end = time.monotonic() + 30.0
        while not h.pairs and time.monotonic() < end:
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = 1000, 500
            clock_pub.publish(msg)
            h.spin(0.1)
            h.send(0, list(model.joint_names), s, r, tau)        # unstamped
            h.spin(0.2)
        assert h.pairs, "no record; node output:\n" + h.node.output()
        assert h.pairs[0].stamp_ns == 1000 * SEC + 500, h.pairs[0].stamp_ns
    finally:
        h.close()


@pytest.mark.parametrize("node_transport", ["rclpy", "dds"])
def test_diagnostics_reach_a_ros2_subscriber(node_transport):
    """/diagnostics (diagnostic_msgs/DiagnosticArray) from the node, read by a real rclpy node:
    about once a second, named after the node (its namespace included), with the output rate of
    the records it published."""
    from diagnostic_msgs.msg import DiagnosticArray

    h = Harness(["--robot", "ur5"], node_transport=node_transport, peer="rclpy")
    got = []
    try:
        h.transport.node.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
        h.wait_ready()
        model = sl.load_urdf(robot_urdf_path("ur5"), floating_base=False)
        s, r, tau, _ = random_input(model, np.random.default_rng(9))
        end = time.monotonic() + 30.0
        k = 0
        while time.monotonic() < end:
            k += 1
            h.send((400 + k) * SEC // 10, list(model.joint_names), s, r, tau)
            h.spin(0.05)
            rates = [float(kv.value) for m in got for st in m.status for kv in st.values
                     if kv.key == "output rate (Hz)"]
            if any(x > 0 for x in rates):
                break
        statuses = [st for m in got for st in m.status]
        assert statuses, "no diagnostics arrived"
        assert all(st.name == f"{h.namespace}/sva_linearizer: linearizer" for st in statuses), statuses[0].name
        assert any(float({kv.key: kv.value for kv in st.values}["output rate (Hz)"]) > 0 for st in statuses)
        assert all(st.level in (b"\x00", b"\x01", 0, 1) for st in statuses), [(st.level, st.message) for st in statuses]
    finally:
        h.close()


def test_qos_overrides_are_applied_on_rclpy_and_refused_on_dds():
    """`-p qos_overrides.<topic>.publisher.reliability:=best_effort` (ROS 2's QoS overriding
    parameters): the rclpy node's record publisher is best effort, as a peer sees it in the graph;
    the DDS transport, which cannot apply them, refuses them at start naming them."""
    import subprocess
    import sys

    from rclpy.qos import ReliabilityPolicy

    h = Harness([], node_transport="rclpy", peer="rclpy", start_node=False)
    topic = f"{h.namespace}/linearization/record"
    h.node_args = ["--robot", "ur5", "--ros-args", "-p", f"qos_overrides.{topic}.publisher.reliability:=best_effort"]
    try:
        h.start()
        h.wait_ready(need_js=False)
        (info,) = h.transport.node.get_publishers_info_by_topic(topic)
        assert info.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
        (info,) = h.transport.node.get_publishers_info_by_topic(f"{h.namespace}/linearization/A")
        assert info.qos_profile.reliability == ReliabilityPolicy.RELIABLE       # the others as they were
    finally:
        h.close()
    r = subprocess.run([sys.executable, "-m", "sva_linearizer.ros", "node", "--transport", "dds", "--robot", "ur5",
                        "--ros-args", "-p", "qos_overrides./linearization/record.publisher.reliability:=best_effort"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "qos_overrides./linearization/record.publisher.reliability" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1
