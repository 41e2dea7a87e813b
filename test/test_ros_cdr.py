# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 wire format: the CDR bytes of every message type the node sends or receives equal those of
an independent implementation, the `rosbags` package (ROS 2 Humble typestore), both ways."""
import dataclasses

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="the DDS transport needs the cyclonedds package")
rosbags_typesys = pytest.importorskip("rosbags.typesys", reason="rosbags is a test dependency")

from ros_helpers.fake_transport import FakeTransport  # noqa: E402
from sva_linearizer.ros.wire import dds_types as D  # noqa: E402
from sva_linearizer.ros.wire.messages import (contacts_msg, joint_state_msg, matrix_to_msg,  # noqa: E402
                                         msg_to_matrix, odometry_msg, wrench_msg)
from sva_linearizer.ros.node.node import LinearizerNode  # noqa: E402

TS = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_HUMBLE)
NODE_TYPES = ["sensor_msgs/msg/JointState", "nav_msgs/msg/Odometry", "std_msgs/msg/Float64MultiArray",
              "std_msgs/msg/Header", "std_msgs/msg/String", "geometry_msgs/msg/WrenchStamped"]


def to_rosbags(obj, ros_name):
    """Our IDL struct -> the rosbags message with the same field values (via rosbags' field defs)."""
    cls = TS.types[ros_name]
    kwargs = {}
    for fname, (kind, spec) in TS.fielddefs[ros_name][1]:
        value = getattr(obj, fname)
        kind = kind.name
        if kind == "NAME":
            kwargs[fname] = to_rosbags(value, spec)
        elif kind in ("SEQUENCE", "ARRAY"):
            (ekind, espec), _ = spec
            if ekind.name == "NAME":
                kwargs[fname] = [to_rosbags(v, espec) for v in value]
            elif espec[0] == "string":
                kwargs[fname] = list(value)
            else:
                kwargs[fname] = np.array(value, dtype=espec[0])
        else:
            kwargs[fname] = value
    return cls(**kwargs)


def plain(obj):
    """Nested plain-Python view of a message (ours or rosbags') for comparison."""
    if dataclasses.is_dataclass(obj):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not f.name.startswith("__") and not f.name.isupper()}     # not the constants
    if isinstance(obj, np.ndarray):
        return [plain(x) for x in obj.tolist()]
    if isinstance(obj, (list, tuple)) or type(obj).__name__ == "array":
        return [plain(x) for x in obj]
    return obj


def samples():
    """Messages with awkward content: odd string lengths (alignment), empty and long arrays."""
    T = FakeTransport().types
    rng = np.random.default_rng(0)
    yield "sensor_msgs/msg/JointState", joint_state_msg(
        T, 1_700_000_000_123_456_789, ["a", "bc", "def", "joint_with_a_long_name"], rng.normal(size=4),
        rng.normal(size=4), [], frame_id="x")
    yield "sensor_msgs/msg/JointState", joint_state_msg(T, 5, ["j1"], [np.nan], [np.inf], [-0.0])
    yield "sensor_msgs/msg/JointState", T.JointState()
    quat = rng.normal(size=4)
    odom = odometry_msg(T, 42_000_000_007, rng.normal(size=3), quat / np.linalg.norm(quat), rng.normal(size=6),
                        frame_id="odom", child_frame_id="base")
    odom.pose.covariance = list(rng.normal(size=36))
    odom.twist.covariance = list(rng.normal(size=36))
    yield "nav_msgs/msg/Odometry", odom
    yield "nav_msgs/msg/Odometry", odometry_msg(T, 0, [0, 0, 0], [0, 0, 0, 1], [0] * 6, frame_id="",
                                                child_frame_id="abcde")
    for shape in ((36, 36), (36, 12), (1, 1), (70, 29)):
        yield "std_msgs/msg/Float64MultiArray", matrix_to_msg(T, rng.normal(size=shape))
    yield "std_msgs/msg/Float64MultiArray", T.Float64MultiArray()
    yield "std_msgs/msg/Header", T.Header(stamp=T.Time(sec=-3, nanosec=999_999_999), frame_id="seq=1 A=0 B=1")
    yield "std_msgs/msg/String", T.String(data="<robot name='r'>\u00e9</robot>")
    yield "std_msgs/msg/String", T.String(data="")
    # the contact inputs: the active set (JointState, names only or with flags) and a force
    yield "sensor_msgs/msg/JointState", contacts_msg(T, 9 * 10**9 + 1, ["FL_FOOT", "HR_FOOT"])
    yield "sensor_msgs/msg/JointState", contacts_msg(T, 9, ["left_sole_link", "r"], [1.0, 0.0])
    yield "geometry_msgs/msg/WrenchStamped", wrench_msg(T, 1_700_000_000_000_000_001, "FL_FOOT",
                                                        rng.normal(size=3), rng.normal(size=3))
    yield "geometry_msgs/msg/WrenchStamped", wrench_msg(T, 0, "abc", [0.0, -0.0, 6.13])
    yield "geometry_msgs/msg/WrenchStamped", T.WrenchStamped()
    # the node's diagnostics
    yield "diagnostic_msgs/msg/DiagnosticArray", T.DiagnosticArray(
        header=T.Header(stamp=T.Time(sec=12, nanosec=7), frame_id=""),
        status=[T.DiagnosticStatus(level=1, name="/r1/sva_linearizer: linearizer", message="3 inputs dropped",
                                   hardware_id="ur5", values=[T.KeyValue(key="input rate (Hz)", value="99.5"),
                                                              T.KeyValue(key="k", value="")]),
                T.DiagnosticStatus(level=2, name="x")])
    yield "diagnostic_msgs/msg/DiagnosticArray", T.DiagnosticArray()


@pytest.mark.parametrize("ros_name,msg", list(samples()))
def test_cdr_bytes_equal_rosbags(ros_name, msg):
    ours = msg.serialize()
    ref = bytes(TS.serialize_cdr(to_rosbags(msg, ros_name), ros_name))
    assert ours[:4] == b"\x00\x01\x00\x00"            # CDR little-endian encapsulation (XCDR1)
    assert ours == ref
    # and each side reads the other's bytes back to the same values
    ours_back = type(msg).deserialize(ref)
    ref_back = TS.deserialize_cdr(ours, ros_name)
    a, b = plain(ours_back), plain(ref_back)
    assert repr(a) == repr(b)  # repr: NaN-safe structural comparison


def test_struct_definitions_match_ros2_humble():
    """Field names, order and type names of every IDL struct equal ROS 2 Humble's definitions."""
    for ros_name, cls in D.BY_ROS_NAME.items():
        pkg, _, typ = ros_name.split("/")
        assert cls.__idl_typename__.replace(".", "::") == f"{pkg}::msg::dds_::{typ}_"
        ours = [f.name for f in dataclasses.fields(cls)]
        theirs = [name for name, _ in TS.fielddefs[ros_name][1]]
        assert ours == theirs, ros_name
    assert set(NODE_TYPES) <= set(D.BY_ROS_NAME)


def test_node_output_messages_bytes_equal_rosbags():
    """The node's actual output messages: the record, its description, the point, A and B."""
    T = FakeTransport()
    node = LinearizerNode(T, {"robot": "ur5", "warn_period": 0, "publish_point": True})
    m = node.model
    rng = np.random.default_rng(1)
    T.deliver("joint_states", joint_state_msg(T.types, 7 * 10**9 + 3, m.joint_names, rng.normal(size=m.nj),
                                              rng.normal(size=m.nj), rng.normal(size=m.nj)))
    for topic, ros_name in (("linearization/A", "std_msgs/msg/Float64MultiArray"),
                            ("linearization/B", "std_msgs/msg/Float64MultiArray"),
                            ("linearization/record", "std_msgs/msg/Float64MultiArray"),
                            ("linearization/description", "std_msgs/msg/String"),
                            ("linearization/point/joint_state", "sensor_msgs/msg/JointState")):
        (msg,) = T.published[topic]
        assert msg.serialize() == bytes(TS.serialize_cdr(to_rosbags(msg, ros_name), ros_name))
    A = msg_to_matrix(T.published["linearization/A"][0])
    ref = TS.deserialize_cdr(T.published["linearization/A"][0].serialize(), "std_msgs/msg/Float64MultiArray")
    assert [(d.label, d.size, d.stride) for d in ref.layout.dim] == [("rows", 12, 144), ("cols", 12, 12)]
    assert ref.layout.data_offset == 0
    np.testing.assert_array_equal(ref.data.reshape(12, 12), A)


def test_dds_endpoints_use_xcdr1():
    """ROS 2 (rmw_cyclonedds) uses XCDR1; our writers and readers must offer exactly that."""
    from cyclonedds.qos import Policy

    from sva_linearizer.ros.transports.loopback import loopback_config, private_domain_id
    from sva_linearizer.ros.transports.transport_dds import DdsTransport

    t = DdsTransport("cdr_test", domain_id=private_domain_id(12345), config=loopback_config())
    try:
        pub = t.create_publisher("x", "std_msgs/msg/Header", {"reliable": True, "depth": 1})
        reader = t.create_subscription("y", "std_msgs/msg/String", lambda m, r: None,
                                       {"reliable": True, "transient_local": True, "depth": 1})
        for ent in (pub.writer, reader):
            rep = ent.get_qos()[Policy.DataRepresentation]
            assert rep.use_cdrv0_representation and not rep.use_xcdrv2_representation
        assert pub.writer.topic.name == "rt/x" and reader.topic.name == "rt/y"
        assert pub.writer.topic.typename == "std_msgs::msg::dds_::Header_"
    finally:
        t.close()


def _hot_samples():
    from sva_linearizer.ros.wire.messages import types_namespace

    T = types_namespace(D.BY_ROS_NAME)
    rng = np.random.default_rng(4)
    return [matrix_to_msg(T, rng.normal(size=(70, 70))), matrix_to_msg(T, rng.normal(size=(7, 3))),
            D.Float64MultiArray(),
            joint_state_msg(T, 10**18 + 7, ["a", "bb", "ccc", "dddd"], rng.normal(size=4), rng.normal(size=4), []),
            joint_state_msg(T, 3, ["x" * 5], [1.0], [2.0], [3.0], frame_id="base"),
            D.JointState(),
            odometry_msg(T, 99, rng.normal(size=3), [0.0, 0.6, 0.0, 0.8], rng.normal(size=6), frame_id="o",
                         child_frame_id="base_link"),
            odometry_msg(T, 5, [1, 2, 3], [0, 0, 0, 1], [1, 2, 3, 4, 5, 6], frame_id="odom1", child_frame_id="b2"),
            D.Odometry()]


@pytest.mark.parametrize("k", range(9))
def test_fast_codecs_equal_the_generic_ones(k):
    """JointState, Odometry and Float64MultiArray take a one-pass struct codec (the node's hot path):
    same bytes as cyclonedds' generic serialiser, and decoding either way gives the same message."""
    m = _hot_samples()[k]
    cls = type(m)
    generic = cls.generic_serialize(m)
    assert m.serialize() == generic
    fast, slow = cls.deserialize(generic), cls.generic_deserialize(generic)
    assert cls.generic_serialize(fast) == cls.generic_serialize(slow) == generic
    for f in dataclasses.fields(cls):
        a, b = getattr(fast, f.name), getattr(slow, f.name)
        assert (list(a) == list(b)) if f.name in ("position", "velocity", "effort", "data", "name") else a == b


@pytest.mark.parametrize("k", [0, 3, 6])
def test_fast_decoders_reject_truncated_samples(k):
    m = _hot_samples()[k]
    data = m.serialize()
    with pytest.raises(ValueError, match="truncated"):
        type(m).deserialize(data[:len(data) - 5])
