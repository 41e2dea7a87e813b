# SPDX-License-Identifier: BSD-3-Clause
"""Transport-independent message helpers: stamps, matrices as Float64MultiArray, the input messages.

Everything here works on *any* object with the ROS 2 field names: rclpy messages, the Cyclone DDS
IDL structs of :mod:`sva_linearizer.ros.wire.dds_types`, or plain namespaces in tests. Messages are built
through a ``types`` namespace that has the ROS class names (``types.Float64MultiArray`` ...), which
each transport provides.

The node's output, the linearization record, is :mod:`sva_linearizer.ros.node.record`.
"""
from __future__ import annotations

import array
from types import SimpleNamespace

import numpy as np

#: Every ROS 2 message type the package sends or receives, nested types included. Each transport
#: exposes them by short name (``types.JointState``) with the ROS 2 field names.
ROS_TYPES = (
    "builtin_interfaces/msg/Time", "std_msgs/msg/Header", "std_msgs/msg/String",
    "std_msgs/msg/MultiArrayDimension", "std_msgs/msg/MultiArrayLayout", "std_msgs/msg/Float64MultiArray",
    "sensor_msgs/msg/JointState", "geometry_msgs/msg/Point", "geometry_msgs/msg/Vector3",
    "geometry_msgs/msg/Quaternion", "geometry_msgs/msg/Pose", "geometry_msgs/msg/PoseWithCovariance",
    "geometry_msgs/msg/Twist", "geometry_msgs/msg/TwistWithCovariance", "nav_msgs/msg/Odometry",
    "geometry_msgs/msg/Wrench", "geometry_msgs/msg/WrenchStamped",
    "rosgraph_msgs/msg/Clock",
    "diagnostic_msgs/msg/KeyValue", "diagnostic_msgs/msg/DiagnosticStatus", "diagnostic_msgs/msg/DiagnosticArray",
)


def types_namespace(by_ros_name):
    """``{"pkg/msg/Type": cls}`` -> a namespace with the classes by short name (``ns.JointState``):
    the ``types`` a transport provides."""
    return SimpleNamespace(**{name.rsplit("/", 1)[1]: cls for name, cls in by_ros_name.items()})


# A and B alone (the record holds them too, with the point they belong to)
TOPIC_A = "linearization/A"
TOPIC_B = "linearization/B"

_NS = 1_000_000_000


def stamp_to_ns(stamp) -> int:
    """builtin_interfaces/Time -> integer nanoseconds."""
    return int(stamp.sec) * _NS + int(stamp.nanosec)


def ns_to_sec_nanosec(ns: int):
    sec, nanosec = divmod(int(ns), _NS)
    return sec, nanosec


def make_time(types, ns: int):
    sec, nanosec = ns_to_sec_nanosec(ns)
    return types.Time(sec=sec, nanosec=nanosec)


def matrix_payload(M) -> bytes:
    """The bytes a Float64MultiArray of M carries: row-major little-endian float64."""
    return np.ascontiguousarray(M, dtype="<f8").tobytes()


def matrix_to_msg(types, M, payload: bytes | None = None):
    """std_msgs/Float64MultiArray with layout [("rows", r, r*c), ("cols", c, c)], offset 0."""
    rows, cols = M.shape
    data = array.array("d")
    data.frombytes(matrix_payload(M) if payload is None else payload)
    layout = types.MultiArrayLayout(
        dim=[types.MultiArrayDimension(label="rows", size=rows, stride=rows * cols),
             types.MultiArrayDimension(label="cols", size=cols, stride=cols)],
        data_offset=0)
    return types.Float64MultiArray(layout=layout, data=data)


def msg_to_matrix(msg) -> np.ndarray:
    """Inverse of :func:`matrix_to_msg`; raises ValueError for any other layout."""
    dims = list(msg.layout.dim)
    if len(dims) != 2 or dims[0].label != "rows" or dims[1].label != "cols":
        raise ValueError("Float64MultiArray: expected dims ('rows', 'cols')")
    rows, cols = int(dims[0].size), int(dims[1].size)
    if int(msg.layout.data_offset) != 0 or int(dims[0].stride) != rows * cols or int(dims[1].stride) != cols:
        raise ValueError("Float64MultiArray: expected a dense row-major layout with data_offset 0")
    data = np.asarray(msg.data, dtype=float)
    if data.size != rows * cols:
        raise ValueError(f"Float64MultiArray: {data.size} values for a {rows}x{cols} matrix")
    return data.reshape(rows, cols)


def _floats(x):
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(x, dtype=float).tobytes())
    return out


def joint_state_msg(types, stamp_ns, names, position, velocity, effort=(), frame_id=""):
    """sensor_msgs/JointState from arrays (any iterable of floats)."""
    return types.JointState(header=types.Header(stamp=make_time(types, stamp_ns), frame_id=frame_id),
                            name=list(names), position=_floats(position), velocity=_floats(velocity),
                            effort=_floats(effort))


def contacts_msg(types, stamp_ns, frames, flags=None, frame_id=""):
    """The active contact set as sensor_msgs/JointState: ``name`` the contact frames; ``position``
    empty (every listed contact active) or one 1.0 (active) / 0.0 (inactive) per name."""
    return types.JointState(header=types.Header(stamp=make_time(types, stamp_ns), frame_id=frame_id),
                            name=list(frames), position=_floats([] if flags is None else flags),
                            velocity=_floats([]), effort=_floats([]))


def wrench_msg(types, stamp_ns, frame, force, torque=(0.0, 0.0, 0.0)):
    """geometry_msgs/WrenchStamped: a contact force (on the robot) in the contact's reference
    frame, ``header.frame_id`` the contact's frame name."""
    V = types.Vector3
    f, t = [float(x) for x in force], [float(x) for x in torque]
    return types.WrenchStamped(header=types.Header(stamp=make_time(types, stamp_ns), frame_id=frame),
                               wrench=types.Wrench(force=V(x=f[0], y=f[1], z=f[2]),
                                                   torque=V(x=t[0], y=t[1], z=t[2])))


def odometry_msg(types, stamp_ns, p, quat_xyzw, body_twist, frame_id="odom", child_frame_id="base_link"):
    """nav_msgs/Odometry: base pose in the world, twist [v_lin; w] in the base (child) frame."""
    P, Q, V = types.Point, types.Quaternion, types.Vector3
    pose = types.Pose(position=P(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                      orientation=Q(x=float(quat_xyzw[0]), y=float(quat_xyzw[1]),
                                    z=float(quat_xyzw[2]), w=float(quat_xyzw[3])))
    t = [float(x) for x in body_twist]
    twist = types.Twist(linear=V(x=t[0], y=t[1], z=t[2]), angular=V(x=t[3], y=t[4], z=t[5]))
    return types.Odometry(header=types.Header(stamp=make_time(types, stamp_ns), frame_id=frame_id),
                          child_frame_id=child_frame_id,
                          pose=types.PoseWithCovariance(pose=pose, covariance=[0.0] * 36),
                          twist=types.TwistWithCovariance(twist=twist, covariance=[0.0] * 36))
